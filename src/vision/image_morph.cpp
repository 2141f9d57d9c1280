// SPDX-License-Identifier: MIT OR Apache-2.0
// Morphology with any structuring element (OpenCV's erode, dilate, morphologyEx): the max or
// min over shifted views of the image, borders padded with -inf / +inf (tensor ops); CPU f32
// and u8 images without a gradient take the host path (image_host.cpp).
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_host.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// The element's cells on the host, checked to be a 2-d kernel.
std::vector<uint8_t> element_cells(const char* op, const Tensor& kernel) {
  KILN_CHECK(
      kernel.defined() && kernel.dim() == 2 && kernel.size(0) >= 1 && kernel.size(1) >= 1, op,
      "structuring element [kh, kw] expected, got " << (kernel.defined() ? to_string(kernel.shape()) : "undefined"));
  const std::vector<double> v = kernel.to_vector<double>();
  std::vector<uint8_t> cells(v.size());
  for (size_t i = 0; i < v.size(); ++i) cells[i] = v[i] != 0;
  return cells;
}

/// One erosion (dilate false) or dilation of float x by the element, anchored at its centre.
Tensor morph_once(const Tensor& x, const std::vector<uint8_t>& cells, int64_t kh, int64_t kw, bool dilate) {
  const int64_t h = x.size(2), w = x.size(3), ay = kh / 2, ax = kw / 2;
  const double fill = dilate ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  const Tensor p = pad(x, {ax, kw - 1 - ax, ay, kh - 1 - ay}, "constant", fill);
  Tensor acc;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      if (!cells[static_cast<size_t>(i * kw + j)]) continue;
      const Tensor v = p.narrow(2, i, h).narrow(3, j, w);
      acc = !acc.defined() ? v : dilate ? maximum(acc, v) : minimum(acc, v);
    }
  return acc.defined() ? acc : x;
}

Tensor morph(const char* op, const Tensor& x, const Tensor& kernel, int64_t iterations, bool dilate) {
  detail::check_image(op, x);
  KILN_CHECK(iterations >= 0, op, "iterations must be >= 0, got " << iterations);
  const std::vector<uint8_t> cells = element_cells(op, kernel);
  if (detail::host_fast(x)) return detail::morph_host(x, cells, kernel.size(0), kernel.size(1), dilate, iterations);
  Tensor y = detail::as_float(x);
  for (int64_t i = 0; i < iterations; ++i) y = morph_once(y, cells, kernel.size(0), kernel.size(1), dilate);
  return detail::back_to(y, x);
}

}  // namespace

Tensor structuring_element(const std::string& shape, KSize ksize) {
  const char* op = "vision::structuring_element";
  KILN_CHECK(shape == "rect" || shape == "cross" || shape == "ellipse", op,
             "shape must be \"rect\", \"cross\" or \"ellipse\", got \"" << shape << "\"");
  KILN_CHECK(ksize.height >= 1 && ksize.width >= 1, op,
             "ksize must be positive, got " << ksize.height << " x " << ksize.width);
  const int64_t h = ksize.height, w = ksize.width, ay = h / 2, ax = w / 2;
  std::vector<uint8_t> e(static_cast<size_t>(h * w), 0);
  const int64_t r = h / 2, c = w / 2;
  const double inv_r2 = r ? 1.0 / static_cast<double>(r * r) : 0;
  for (int64_t i = 0; i < h; ++i) {
    int64_t j1 = 0, j2 = 0;
    if (shape == "rect" || (shape == "cross" && i == ay)) {
      j2 = w;
    } else if (shape == "cross") {
      j1 = ax, j2 = ax + 1;
    } else {  // OpenCV's ellipse: half-width rounded half to even
      const int64_t dy = i - r;
      if (std::abs(dy) <= r) {
        const auto dx = static_cast<int64_t>(
            std::nearbyint(static_cast<double>(c) * std::sqrt(static_cast<double>(r * r - dy * dy) * inv_r2)));
        j1 = std::max<int64_t>(c - dx, 0);
        j2 = std::min<int64_t>(c + dx + 1, w);
      }
    }
    for (int64_t j = j1; j < j2; ++j) e[static_cast<size_t>(i * w + j)] = 1;
  }
  return tensor(std::vector<uint8_t>(e), {h, w}).to(u8);
}

Tensor erode(const Tensor& x, const Tensor& kernel, int64_t iterations) {
  return morph("vision::erode", x, kernel, iterations, false);
}

Tensor dilate(const Tensor& x, const Tensor& kernel, int64_t iterations) {
  return morph("vision::dilate", x, kernel, iterations, true);
}

Tensor morphology(const Tensor& x, const std::string& op, const Tensor& kernel, int64_t iterations) {
  const char* name = "vision::morphology";
  KILN_CHECK(op == "erode" || op == "dilate" || op == "open" || op == "close" || op == "gradient" || op == "tophat" ||
                 op == "blackhat",
             name, "op must be erode, dilate, open, close, gradient, tophat or blackhat, got \"" << op << "\"");
  detail::check_image(name, x);
  if (op == "erode") return erode(x, kernel, iterations);
  if (op == "dilate") return dilate(x, kernel, iterations);
  // Opening and closing commute with the u8 -> f32 conversion: the host path runs them in u8.
  if (detail::host_fast(x) && op == "open") return dilate(erode(x, kernel, iterations), kernel, iterations);
  if (detail::host_fast(x) && op == "close") return erode(dilate(x, kernel, iterations), kernel, iterations);
  const Tensor f = detail::as_float(x);
  Tensor y;
  if (op == "open") y = dilate(erode(f, kernel, iterations), kernel, iterations);
  if (op == "close") y = erode(dilate(f, kernel, iterations), kernel, iterations);
  if (op == "gradient") y = dilate(f, kernel, iterations) - erode(f, kernel, iterations);
  if (op == "tophat") y = f - dilate(erode(f, kernel, iterations), kernel, iterations);
  if (op == "blackhat") y = erode(dilate(f, kernel, iterations), kernel, iterations) - f;
  return detail::back_to(y, x);
}

}  // namespace kiln::vision
