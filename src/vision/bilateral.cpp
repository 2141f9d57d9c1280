// SPDX-License-Identifier: MIT OR Apache-2.0
// The bilateral filter (cv::bilateralFilter), on the host: OpenCV's disc of taps, its colour
// weight table for u8 (indexed by the L1 colour distance) and its interpolated exp table over
// the image's value range for float images, borders reflected without repeating the edge.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/parallel.h"
#include "kiln/vision/image.h"
#include "vision/image_simd.h"
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

/// The first element of a contiguous CPU tensor.
template <class T>
const T* host_data(const Tensor& c) {
  const auto* base = static_cast<const char*>(host_storage_data(c));
  KILN_CHECK(base != nullptr, "vision::bilateral_filter", "a CPU tensor without host memory");
  return reinterpret_cast<const T*>(base + c.storage_offset() * static_cast<int64_t>(sizeof(T)));
}

/// One image [c, h, w] reflected into planes of (h + 2 radius) x (w + 2 radius).
template <class T>
std::unique_ptr<T[]> pad_image(const T* v, int64_t c, int64_t h, int64_t w, int64_t radius) {
  const int64_t ph = h + 2 * radius, pw = w + 2 * radius;
  std::unique_ptr<T[]> out(new T[static_cast<size_t>(c * ph * pw)]);
  std::vector<int64_t> edge(static_cast<size_t>(2 * radius));  // source columns of the borders
  for (int64_t i = 0; i < radius; ++i) {
    edge[static_cast<size_t>(i)] = reflect101(i - radius, w);
    edge[static_cast<size_t>(radius + i)] = reflect101(w + i, w);
  }
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < ph; ++i) {
      const T* src = v + (ch * h + reflect101(i - radius, h)) * w;
      T* dst = out.get() + (ch * ph + i) * pw;
      std::copy(src, src + w, dst + radius);
      for (int64_t j = 0; j < radius; ++j) {
        dst[j] = src[edge[static_cast<size_t>(j)]];
        dst[radius + w + j] = src[edge[static_cast<size_t>(radius + j)]];
      }
    }
  return out;
}

/// Filters one image [c, h, w] (c = 1 or 3) of values v into out, a row per call of the SIMD row
/// kernel, rows split over the intra-op threads (each row is computed alone, so the result does
/// not depend on the thread count). Each pixel sums its taps in the disc's order, as OpenCV.
template <class T, class Row>
void filter_image(const T* v, T* out, int64_t c, int64_t h, int64_t w, const Taps& t, const Row& row) {
  const int64_t radius = -t.dy.front(), pw = w + 2 * radius, pplane = (h + 2 * radius) * pw;
  const auto taps = static_cast<int64_t>(t.weight.size());
  const std::unique_ptr<T[]> padded = pad_image(v, c, h, w, radius);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(w * taps, 1));
  parallel_for(h, grain, [&](int64_t y0, int64_t y1) {
    std::vector<const T*> src(static_cast<size_t>(taps * c)), centre(static_cast<size_t>(c));
    std::vector<T*> dst(static_cast<size_t>(c));
    for (int64_t y = y0; y < y1; ++y) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* plane = padded.get() + ch * pplane + radius;
        centre[static_cast<size_t>(ch)] = plane + (y + radius) * pw;
        dst[static_cast<size_t>(ch)] = out + (ch * h + y) * w;
        for (int64_t k = 0; k < taps; ++k)
          src[static_cast<size_t>(k * c + ch)] =
              plane + (y + radius + t.dy[static_cast<size_t>(k)]) * pw + t.dx[static_cast<size_t>(k)];
      }
      row(dst.data(), src.data(), centre.data(), static_cast<int>(taps), w);
    }
  });
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
  // Host copies: the input contiguous in u8 or f32, the output written in place.
  const Tensor v = (x.dtype() == u8 ? x : x.to(f32)).to(Device::cpu()).contiguous();
  Tensor y = empty(x.shape(), {.dtype = v.dtype(), .device = Device::cpu()});
  if (x.dtype() == u8) {
    std::vector<float> table(static_cast<size_t>(256 * c));
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<float>(std::exp(static_cast<double>(i * i) * color_coeff));
    const uint8_t* in = host_data<uint8_t>(v);
    uint8_t* out = const_cast<uint8_t*>(host_data<uint8_t>(y));
    for (int64_t b = 0; b < n; ++b)
      filter_image(in + b * img, out + b * img, c, h, w, t,
                   [&](uint8_t* const* dst, const uint8_t* const* src, const uint8_t* const* centre, int k, int64_t m) {
                     detail::bilateral_row(dst, src, centre, static_cast<int>(c), t.weight.data(), k, table.data(), m);
                   });
    return y.to(x.device());
  }
  const float* in = host_data<float>(v);
  float* out = const_cast<float*>(host_data<float>(y));
  for (int64_t b = 0; b < n; ++b) {
    const float* src = in + b * img;
    float lo = 0, hi = 0;
    detail::minmax_f32(src, img, lo, hi);
    if (std::abs(hi - lo) < FLT_EPSILON) {  // a constant image stays as it is
      std::copy(src, src + img, out + b * img);
      continue;
    }
    // OpenCV's table of exp over the range of L1 distances (c times the value range), 2^12 bins
    // per channel, read with linear interpolation.
    const int64_t bins = (int64_t{1} << 12) * c;
    const float scale = static_cast<float>(bins) / ((hi - lo) * static_cast<float>(c));
    std::vector<float> lut(static_cast<size_t>(bins + 2), 0.0f);
    float last = 1;
    for (int64_t i = 0; i < bins + 2 && last > 0; ++i) {
      const double val = static_cast<double>(i) / scale;
      last = lut[static_cast<size_t>(i)] = static_cast<float>(std::exp(val * val * color_coeff));
    }
    filter_image(src, out + b * img, c, h, w, t,
                 [&](float* const* dst, const float* const* rows, const float* const* centre, int k, int64_t m) {
                   detail::bilateral_row(dst, rows, centre, static_cast<int>(c), t.weight.data(), k, lut.data(), scale,
                                         static_cast<int>(bins), m);
                 });
  }
  return y.to(x.device(), x.dtype());
}

}  // namespace kiln::vision
