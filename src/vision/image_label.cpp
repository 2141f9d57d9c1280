// SPDX-License-Identifier: MIT OR Apache-2.0
// Thresholds (fixed, Otsu, adaptive mean), histogram equalisation and connected components with
// statistics, as OpenCV. Only the fixed threshold is a tensor op; the rest run on the host.
#include <array>
#include <cfloat>
#include <cmath>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

void check_u8(const char* op, const Tensor& x) {
  detail::check_image(op, x);
  KILN_CHECK(x.dtype() == u8, op, "u8 image expected, got " << dtype_name(x.dtype()));
}

uint8_t saturate_u8(double v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0, 255.0)); }

/// Otsu's threshold of a 256-bin histogram of `total` pixels (cv::getThreshVal_Otsu_8u).
double otsu(const std::array<int64_t, 256>& hist, int64_t total) {
  const double scale = total ? 1.0 / static_cast<double>(total) : 0.0;
  double mu = 0;
  for (int i = 0; i < 256; ++i) mu += i * static_cast<double>(hist[static_cast<size_t>(i)]);
  mu *= scale;
  double mu1 = 0, q1 = 0, max_sigma = 0, max_val = 0;
  for (int i = 0; i < 256; ++i) {
    const double p = static_cast<double>(hist[static_cast<size_t>(i)]) * scale;
    mu1 *= q1;
    q1 += p;
    const double q2 = 1. - q1;
    if (std::min(q1, q2) < FLT_EPSILON || std::max(q1, q2) > 1. - FLT_EPSILON) continue;
    mu1 = (mu1 + i * p) / q1;
    const double mu2 = (mu - q1 * mu1) / q2;
    const double sigma = q1 * q2 * (mu1 - mu2) * (mu1 - mu2);
    if (sigma > max_sigma) {
      max_sigma = sigma;
      max_val = i;
    }
  }
  return max_val;
}

}  // namespace

Tensor threshold(const Tensor& x, double thresh, double maxval, const std::string& type) {
  const char* op = "vision::threshold";
  detail::check_image(op, x);
  KILN_CHECK(type == "binary" || type == "binary_inv" || type == "trunc" || type == "tozero" || type == "tozero_inv",
             op, "type must be binary, binary_inv, trunc, tozero or tozero_inv, got \"" << type << "\"");
  Tensor f = detail::as_float(x);
  if (x.dtype() == u8) {  // OpenCV compares u8 with floor(thresh) and saturates maxval
    thresh = std::floor(thresh);
    maxval = saturate_u8(maxval);
  }
  const Tensor above = f > thresh;
  Tensor y;
  if (type == "binary") y = where(above, maxval, 0.0).to(f.dtype());
  if (type == "binary_inv") y = where(above, 0.0, maxval).to(f.dtype());
  if (type == "trunc") y = where(above, thresh, f);
  if (type == "tozero") y = where(above, f, 0.0);
  if (type == "tozero_inv") y = where(above, 0.0, f);
  return detail::back_to(y, x);
}

std::pair<Tensor, Tensor> threshold_otsu(const Tensor& x, double maxval) {
  const char* op = "vision::threshold_otsu";
  check_u8(op, x);
  const int64_t planes = x.size(0) * x.size(1), area = x.size(2) * x.size(3);
  const std::vector<uint8_t> v = x.contiguous().to_vector<uint8_t>();
  std::vector<double> t(static_cast<size_t>(planes));
  std::vector<uint8_t> out(v.size());
  const uint8_t mv = saturate_u8(maxval);
  for (int64_t p = 0; p < planes; ++p) {
    std::array<int64_t, 256> hist{};
    for (int64_t i = 0; i < area; ++i) ++hist[v[static_cast<size_t>(p * area + i)]];
    const double th = otsu(hist, area);
    t[static_cast<size_t>(p)] = th;
    for (int64_t i = 0; i < area; ++i) {
      const auto k = static_cast<size_t>(p * area + i);
      out[k] = v[k] > th ? mv : 0;
    }
  }
  return {tensor(t, {x.size(0), x.size(1)}).to(x.device()), tensor(out, x.shape()).to(x.device())};
}

Tensor adaptive_threshold_mean(const Tensor& x, double maxval, int64_t block_size, double c, const std::string& type) {
  const char* op = "vision::adaptive_threshold_mean";
  check_u8(op, x);
  KILN_CHECK(block_size >= 3 && block_size % 2 == 1, op, "block_size must be odd and >= 3, got " << block_size);
  KILN_CHECK(type == "binary" || type == "binary_inv", op, "type must be binary or binary_inv, got \"" << type << "\"");
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3), r = block_size / 2;
  const std::vector<uint8_t> v = x.contiguous().to_vector<uint8_t>();
  std::vector<uint8_t> out(v.size());
  const uint8_t mv = saturate_u8(maxval);
  const bool inv = type == "binary_inv";
  const auto idelta = static_cast<int64_t>(inv ? std::floor(c) : std::ceil(c));
  const double norm = 1.0 / static_cast<double>(block_size * block_size);
  // Summed-area table of the replicate-padded plane.
  const int64_t ph = h + 2 * r, pw = w + 2 * r;
  std::vector<int64_t> sat(static_cast<size_t>((ph + 1) * (pw + 1)));
  for (int64_t p = 0; p < planes; ++p) {
    const uint8_t* src = v.data() + p * h * w;
    for (int64_t y = 0; y < ph; ++y)
      for (int64_t xx = 0; xx < pw; ++xx) {
        const int64_t sy = std::clamp<int64_t>(y - r, 0, h - 1), sx = std::clamp<int64_t>(xx - r, 0, w - 1);
        sat[static_cast<size_t>((y + 1) * (pw + 1) + xx + 1)] =
            src[sy * w + sx] + sat[static_cast<size_t>(y * (pw + 1) + xx + 1)] +
            sat[static_cast<size_t>((y + 1) * (pw + 1) + xx)] - sat[static_cast<size_t>(y * (pw + 1) + xx)];
      }
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx) {
        auto at = [&](int64_t yy, int64_t xv) { return sat[static_cast<size_t>(yy * (pw + 1) + xv)]; };
        const int64_t s =
            at(y + block_size, xx + block_size) - at(y, xx + block_size) - at(y + block_size, xx) + at(y, xx);
        const int64_t mean = saturate_u8(static_cast<double>(s) * norm);
        const bool on = src[y * w + xx] - mean > -idelta;
        out[static_cast<size_t>(p * h * w + y * w + xx)] = on != inv ? mv : 0;
      }
  }
  return tensor(out, x.shape()).to(x.device());
}

Tensor equalize_hist(const Tensor& x) {
  check_u8("vision::equalize_hist", x);
  const int64_t planes = x.size(0) * x.size(1), area = x.size(2) * x.size(3);
  std::vector<uint8_t> v = x.contiguous().to_vector<uint8_t>();
  for (int64_t p = 0; p < planes; ++p) {
    uint8_t* px = v.data() + p * area;
    std::array<int64_t, 256> hist{};
    for (int64_t i = 0; i < area; ++i) ++hist[px[i]];
    int i = 0;
    while (i < 256 && !hist[static_cast<size_t>(i)]) ++i;
    if (i == 256) continue;  // an empty plane
    std::array<uint8_t, 256> lut{};
    if (hist[static_cast<size_t>(i)] == area) {
      lut[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    } else {
      const float scale = 255.f / static_cast<float>(area - hist[static_cast<size_t>(i)]);
      int64_t sum = 0;
      for (lut[static_cast<size_t>(i++)] = 0; i < 256; ++i) {
        sum += hist[static_cast<size_t>(i)];
        lut[static_cast<size_t>(i)] = saturate_u8(static_cast<float>(sum) * scale);
      }
    }
    for (int64_t k = 0; k < area; ++k) px[k] = lut[px[k]];
  }
  return tensor(v, x.shape()).to(x.device());
}

}  // namespace kiln::vision
