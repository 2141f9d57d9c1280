// SPDX-License-Identifier: MIT OR Apache-2.0
// The bilateral filter (cv::bilateralFilter), on the host: OpenCV's disc of taps, its colour
// weight table for u8 (indexed by the L1 colour distance) and its interpolated exp table over
// the image's value range for float images, borders reflected without repeating the edge.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// Index of coordinate i in [0, n) under BORDER_REFLECT_101.
int64_t reflect101(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
  return i;
}

/// The taps of the disc of the given radius: offsets (dy, dx) and space weights.
struct Taps {
  std::vector<int64_t> dy, dx;
  std::vector<float> weight;
};

Taps disc(int64_t radius, double sigma_space) {
  const double coeff = -0.5 / (sigma_space * sigma_space);
  Taps t;
  for (int64_t i = -radius; i <= radius; ++i)
    for (int64_t j = -radius; j <= radius; ++j) {
      const double r = std::sqrt(static_cast<double>(i * i + j * j));
      if (r > static_cast<double>(radius)) continue;
      t.dy.push_back(i), t.dx.push_back(j);
      t.weight.push_back(static_cast<float>(std::exp(r * r * coeff)));
    }
  return t;
}

/// Filters one image [C, H, W] (C = 1 or 3) of values v into out. `colour(d)` is the colour
/// weight of the L1 distance d. Row by row, tap by tap, so the inner loop runs along x; each
/// pixel still sums its taps in the disc's order, as OpenCV.
template <int C, class T, class Colour>
void filter_image(const T* v, T* out, int64_t h, int64_t w, const Taps& t, Colour colour) {
  using Dist = std::conditional_t<std::is_same_v<T, uint8_t>, int, float>;
  const int64_t plane = h * w, radius = -t.dy.front();
  const auto taps = static_cast<int64_t>(t.weight.size());
  // Reflected row offsets and columns of every coordinate within radius of the image.
  std::vector<int64_t> row(static_cast<size_t>(h + 2 * radius)), col(static_cast<size_t>(w + 2 * radius));
  for (int64_t i = 0; i < h + 2 * radius; ++i) row[static_cast<size_t>(i)] = reflect101(i - radius, h) * w;
  for (int64_t i = 0; i < w + 2 * radius; ++i) col[static_cast<size_t>(i)] = reflect101(i - radius, w);
  std::vector<float> sum(static_cast<size_t>(C * w)), wsum(static_cast<size_t>(w));
  for (int64_t y = 0; y < h; ++y) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    std::fill(wsum.begin(), wsum.end(), 0.0f);
    const T* centre = v + y * w;
    for (int64_t k = 0; k < taps; ++k) {
      const T* src = v + row[static_cast<size_t>(y + radius + t.dy[static_cast<size_t>(k)])];
      const int64_t* cols = col.data() + radius + t.dx[static_cast<size_t>(k)];
      const float sw = t.weight[static_cast<size_t>(k)];
      for (int64_t x = 0; x < w; ++x) {
        const int64_t p = cols[x];
        Dist dist = 0;  // u8: exact integer distances index the colour table
        for (int ch = 0; ch < C; ++ch)
          dist += std::abs(static_cast<Dist>(src[ch * plane + p]) - static_cast<Dist>(centre[ch * plane + x]));
        const float wt = sw * colour(dist);
        wsum[static_cast<size_t>(x)] += wt;
        for (int ch = 0; ch < C; ++ch)
          sum[static_cast<size_t>(ch * w + x)] += static_cast<float>(src[ch * plane + p]) * wt;
      }
    }
    for (int ch = 0; ch < C; ++ch)
      for (int64_t x = 0; x < w; ++x) {
        const float r = sum[static_cast<size_t>(ch * w + x)] / wsum[static_cast<size_t>(x)];
        if constexpr (std::is_same_v<T, uint8_t>)
          out[ch * plane + y * w + x] = static_cast<uint8_t>(std::clamp(std::nearbyint(r), 0.0f, 255.0f));
        else
          out[ch * plane + y * w + x] = static_cast<T>(r);
      }
  }
}

/// filter_image for c = 1 or 3 channels.
template <class T, class Colour>
void filter_any(const T* v, T* out, int64_t c, int64_t h, int64_t w, const Taps& t, Colour colour) {
  if (c == 1)
    filter_image<1>(v, out, h, w, t, colour);
  else
    filter_image<3>(v, out, h, w, t, colour);
}

}  // namespace

Tensor bilateral_filter(const Tensor& x, int64_t d, double sigma_color, double sigma_space) {
  const char* op = "vision::bilateral_filter";
  detail::check_image(op, x);
  KILN_CHECK(x.size(1) == 1 || x.size(1) == 3, op, "image with 1 or 3 channels expected, got " << to_string(x.shape()));
  if (sigma_color <= 0) sigma_color = 1;
  if (sigma_space <= 0) sigma_space = 1;
  const int64_t radius = std::max<int64_t>(d <= 0 ? std::llround(sigma_space * 1.5) : d / 2, 1);
  KILN_CHECK(radius <= 256, op, "diameter " << 2 * radius + 1 << " is too large (at most 513)");
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), img = c * h * w;
  if (x.numel() == 0) return x.clone();
  const Taps t = disc(radius, sigma_space);
  const double color_coeff = -0.5 / (sigma_color * sigma_color);
  if (x.dtype() == u8) {
    std::vector<float> table(static_cast<size_t>(256 * c));
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<float>(std::exp(static_cast<double>(i * i) * color_coeff));
    const std::vector<uint8_t> v = x.contiguous().to_vector<uint8_t>();
    std::vector<uint8_t> out(v.size());
    for (int64_t b = 0; b < n; ++b)
      filter_any(v.data() + b * img, out.data() + b * img, c, h, w, t,
                 [&](int dist) { return table[static_cast<size_t>(dist)]; });
    return tensor(out, x.shape(), x.device());
  }
  const std::vector<float> v = x.to(f32).contiguous().to_vector<float>();
  std::vector<float> out(v.size());
  for (int64_t b = 0; b < n; ++b) {
    const float* src = v.data() + b * img;
    const auto [lo, hi] = std::minmax_element(src, src + img);
    if (std::abs(*hi - *lo) < FLT_EPSILON) {  // a constant image stays as it is
      std::copy(src, src + img, out.data() + b * img);
      continue;
    }
    // OpenCV's table of exp over the range of L1 distances (c times the value range), 2^12 bins
    // per channel, read with linear interpolation.
    const int64_t bins = (int64_t{1} << 12) * c;
    const float scale = static_cast<float>(bins) / ((*hi - *lo) * static_cast<float>(c));
    std::vector<float> lut(static_cast<size_t>(bins + 2), 0.0f);
    float last = 1;
    for (int64_t i = 0; i < bins + 2 && last > 0; ++i) {
      const double val = static_cast<double>(i) / scale;
      last = lut[static_cast<size_t>(i)] = static_cast<float>(std::exp(val * val * color_coeff));
    }
    filter_any(src, out.data() + b * img, c, h, w, t, [&](float dist) {
      float alpha = dist * scale;
      const auto idx = std::min(static_cast<size_t>(std::floor(alpha)), static_cast<size_t>(bins));
      alpha -= static_cast<float>(idx);
      return lut[idx] + alpha * (lut[idx + 1] - lut[idx]);
    });
  }
  return tensor(out, x.shape(), x.device()).to(x.dtype());
}

}  // namespace kiln::vision
