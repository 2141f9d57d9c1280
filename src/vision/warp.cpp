// SPDX-License-Identifier: MIT OR Apache-2.0
// Affine warps (cv::warpAffine, cv::getRotationMatrix2D). The source position of each output
// pixel is found on the host with OpenCV's fixed-point arithmetic (1/1024 pixel, then 1/32 for
// bilinear weights); the image is read with index_select, so warps run on every device and
// are differentiable with respect to the image.
#include <array>
#include <cmath>
#include <numbers>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// cvRound: to nearest, ties to even, as int64.
int64_t cv_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

/// The inverse of the affine map m (cv::invertAffineTransform; a singular map gives zeros).
std::array<double, 6> invert(const std::array<double, 6>& m) {
  double d = m[0] * m[4] - m[1] * m[3];
  d = d != 0 ? 1.0 / d : 0.0;
  const double a11 = m[4] * d, a22 = m[0] * d, a12 = -m[1] * d, a21 = -m[3] * d;
  return {a11, a12, -a11 * m[2] - a12 * m[5], a21, a22, -a21 * m[2] - a22 * m[5]};
}

}  // namespace

Tensor rotation_matrix_2d(double center_x, double center_y, double angle, double scale) {
  const double a = angle * std::numbers::pi / 180.0;
  const double alpha = std::cos(a) * scale, beta = std::sin(a) * scale;
  return tensor(std::vector<double>{alpha, beta, (1 - alpha) * center_x - beta * center_y, -beta, alpha,
                                    beta * center_x + (1 - alpha) * center_y},
                {2, 3});
}

Tensor warp_affine(const Tensor& x, const Tensor& m, ImageSize dsize, const std::string& interpolation,
                   bool inverse_map) {
  const char* op = "vision::warp_affine";
  detail::check_warp(op, x, m, 2, interpolation, dsize);
  const std::vector<double> mv = m.to(f64).contiguous().to_vector<double>();
  std::array<double, 6> a{};
  std::copy(mv.begin(), mv.end(), a.begin());
  if (!inverse_map) a = invert(a);
  const bool linear = interpolation == "bilinear";
  const int64_t oh = dsize.height, ow = dsize.width;
  detail::WarpSamples samples(x.size(2), x.size(3), oh, ow, linear);
  const int64_t round_delta = linear ? 16 : 512, shift = linear ? 5 : 10;
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t xo = 0; xo < ow; ++xo) {
      const int64_t bx = cv_round((a[1] * static_cast<double>(y) + a[2]) * 1024) + round_delta;
      const int64_t by = cv_round((a[4] * static_cast<double>(y) + a[5]) * 1024) + round_delta;
      const int64_t sx = (bx + cv_round(a[0] * static_cast<double>(xo) * 1024)) >> shift;
      const int64_t sy = (by + cv_round(a[3] * static_cast<double>(xo) * 1024)) >> shift;
      samples.put(y * ow + xo, sx, sy);
    }
  return samples.gather(x);
}

namespace detail {

WarpSamples::WarpSamples(int64_t h_, int64_t w_, int64_t oh_, int64_t ow_, bool linear_)
    : h(h_), w(w_), oh(oh_), ow(ow_), linear(linear_), corners(linear_ ? 4 : 1) {
  pos.assign(static_cast<size_t>(oh * ow * corners), 0);
  wt.assign(pos.size(), 0.0);
}

void WarpSamples::put(int64_t o, int64_t sx, int64_t sy) {
  const auto base = static_cast<size_t>(o * corners);
  if (!linear) {
    if (sx >= 0 && sx < w && sy >= 0 && sy < h) pos[base] = sy * w + sx, wt[base] = 1;
    return;
  }
  const int64_t ix = sx >> 5, iy = sy >> 5;
  const double fx = static_cast<double>(sx & 31) / 32, fy = static_cast<double>(sy & 31) / 32;
  const double cw[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
  for (int k = 0; k < 4; ++k) {
    const int64_t px = ix + (k & 1), py = iy + (k >> 1);
    if (px < 0 || px >= w || py < 0 || py >= h) continue;
    pos[base + static_cast<size_t>(k)] = py * w + px;
    wt[base + static_cast<size_t>(k)] = cw[k];
  }
}

Tensor WarpSamples::gather(const Tensor& x) const {
  const int64_t n = x.size(0), c = x.size(1);
  const Tensor f = as_float(x);
  if (h * w == 0 || oh * ow == 0 || n * c == 0)
    return back_to(zeros({n, c, oh, ow}, {.dtype = f.dtype(), .device = x.device()}), x);
  const auto m_all = static_cast<int64_t>(pos.size());
  const Tensor picked = index_select(f.reshape({n * c, h * w}), 1, tensor(pos, {m_all}, x.device()));
  const Tensor weights = tensor(wt, {1, m_all}, x.device()).to(f.dtype());
  const Tensor y = (picked * weights).reshape({n * c, oh * ow, corners}).sum({2}).reshape({n, c, oh, ow});
  return back_to(y, x);
}

void check_warp(const char* op, const Tensor& x, const Tensor& m, int64_t rows, const std::string& interpolation,
                ImageSize dsize) {
  check_image(op, x);
  KILN_CHECK(m.defined() && m.dim() == 2 && m.size(0) == rows && m.size(1) == 3, op,
             "matrix [" << rows << ", 3] expected, got " << (m.defined() ? to_string(m.shape()) : "undefined"));
  KILN_CHECK(interpolation == "bilinear" || interpolation == "nearest", op,
             "interpolation must be \"bilinear\" or \"nearest\", got \"" << interpolation << "\"");
  KILN_CHECK(dsize.height >= 0 && dsize.width >= 0, op,
             "output size must not be negative, got " << dsize.height << " x " << dsize.width);
}

}  // namespace detail

}  // namespace kiln::vision
