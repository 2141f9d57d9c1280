// SPDX-License-Identifier: MIT OR Apache-2.0
// Perspective warps (cv::warpPerspective, cv::getPerspectiveTransform). As the affine warps:
// the source position of each output pixel is found on the host with OpenCV's arithmetic
// (rounded to 1/32 pixel for bilinear weights), and the image is read with index_select, so
// the warp runs on every device and is differentiable with respect to the image.
#include <array>
#include <climits>
#include <cmath>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// The 3 x 3 inverse of m (cv::invert; a singular matrix gives zeros).
std::array<double, 9> invert3(const std::array<double, 9>& m) {
  const double c0 = m[4] * m[8] - m[5] * m[7], c1 = m[5] * m[6] - m[3] * m[8], c2 = m[3] * m[7] - m[4] * m[6];
  double d = m[0] * c0 + m[1] * c1 + m[2] * c2;
  d = d != 0 ? 1.0 / d : 0.0;
  return {c0 * d, (m[2] * m[7] - m[1] * m[8]) * d, (m[1] * m[5] - m[2] * m[4]) * d,
          c1 * d, (m[0] * m[8] - m[2] * m[6]) * d, (m[2] * m[3] - m[0] * m[5]) * d,
          c2 * d, (m[1] * m[6] - m[0] * m[7]) * d, (m[0] * m[4] - m[1] * m[3]) * d};
}

/// saturate_cast<int>(v): rounded to nearest (ties to even), clamped to int.
int64_t round_sat(double v) {
  return static_cast<int64_t>(std::nearbyint(std::max<double>(INT_MIN, std::min<double>(INT_MAX, v))));
}

/// Points [4, 2] as 8 doubles (x, y per row), checked.
std::vector<double> four_points(const char* op, const char* name, const Tensor& p) {
  KILN_CHECK(p.defined() && p.numel() == 8 && p.dim() == 2 && p.size(0) == 4, op,
             name << " points [4, 2] expected, got " << (p.defined() ? to_string(p.shape()) : "undefined"));
  return p.to(f64).contiguous().to_vector<double>();
}

}  // namespace

Tensor perspective_transform(const Tensor& src, const Tensor& dst) {
  const char* op = "vision::perspective_transform";
  const std::vector<double> s = four_points(op, "src", src), d = four_points(op, "dst", dst);
  // OpenCV's system: a [8, 8] c = b with c the first eight entries of the matrix (the ninth is 1).
  double a[8][9] = {};
  for (int i = 0; i < 4; ++i) {
    const double x = s[static_cast<size_t>(2 * i)], y = s[static_cast<size_t>(2 * i + 1)];
    const double u = d[static_cast<size_t>(2 * i)], v = d[static_cast<size_t>(2 * i + 1)];
    double* r0 = a[i];
    double* r1 = a[i + 4];
    r0[0] = r1[3] = x, r0[1] = r1[4] = y, r0[2] = r1[5] = 1;
    r0[6] = -x * u, r0[7] = -y * u, r1[6] = -x * v, r1[7] = -y * v;
    r0[8] = u, r1[8] = v;
  }
  // Gaussian elimination with partial pivoting (cv::solve with DECOMP_LU).
  for (int c = 0; c < 8; ++c) {
    int p = c;
    for (int r = c + 1; r < 8; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    KILN_CHECK(std::abs(a[p][c]) > 1e-300, op, "the points are degenerate (three of them on a line)");
    if (p != c)
      for (int k = 0; k < 9; ++k) std::swap(a[p][k], a[c][k]);
    for (int r = c + 1; r < 8; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < 9; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::vector<double> m(9, 1.0);
  for (int r = 7; r >= 0; --r) {
    double v = a[r][8];
    for (int k = r + 1; k < 8; ++k) v -= a[r][k] * m[static_cast<size_t>(k)];
    m[static_cast<size_t>(r)] = v / a[r][r];
  }
  return tensor(m, {3, 3});
}

Tensor warp_perspective(const Tensor& x, const Tensor& m, ImageSize dsize, const std::string& interpolation,
                        bool inverse_map) {
  const char* op = "vision::warp_perspective";
  detail::check_warp(op, x, m, 3, interpolation, dsize);
  const std::vector<double> mv = m.to(f64).contiguous().to_vector<double>();
  std::array<double, 9> a{};
  std::copy(mv.begin(), mv.end(), a.begin());
  if (!inverse_map) a = invert3(a);
  const bool linear = interpolation == "bilinear";
  const int64_t oh = dsize.height, ow = dsize.width;
  detail::WarpSamples samples(x.size(2), x.size(3), oh, ow, linear);
  const double tab = linear ? 32.0 : 1.0;
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t xo = 0; xo < ow; ++xo) {
      const auto fx = static_cast<double>(xo), fy = static_cast<double>(y);
      const double x0 = a[0] * fx + a[1] * fy + a[2], y0 = a[3] * fx + a[4] * fy + a[5];
      double wd = a[6] * fx + a[7] * fy + a[8];
      wd = wd != 0 ? tab / wd : 0.0;
      samples.put(y * ow + xo, round_sat(x0 * wd), round_sat(y0 * wd));
    }
  return samples.gather(x);
}

}  // namespace kiln::vision
