// SPDX-License-Identifier: MIT OR Apache-2.0
// Colour conversions (OpenCV's cvtColor formulas), as tensor ops on [N, 3, H, W].
#include <cfloat>

#include "kiln/vision/image.h"
#include "vision/image_host.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {
Tensor ch(const Tensor& x, int64_t k) { return x.narrow(1, k, 1); }
Tensor luma(const Tensor& r, const Tensor& g, const Tensor& b) { return 0.299 * r + 0.587 * g + 0.114 * b; }
void check_float(const char* op, const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()), op, "float image in [0, 1] expected, got " << dtype_name(x.dtype()));
}
}  // namespace

Tensor rgb_to_gray(const Tensor& rgb) {
  detail::check_image("vision::rgb_to_gray", rgb, 3);
  if (detail::host_fast(rgb)) return detail::gray_host(rgb);
  if (rgb.dtype() == u8) {  // OpenCV's fixed point: (4899 R + 9617 G + 1868 B + 2^13) >> 14
    const Tensor x = rgb.to(i32);
    return ((ch(x, 0) * 4899 + ch(x, 1) * 9617 + ch(x, 2) * 1868 + 8192) >> 14).to(u8);
  }
  const Tensor x = rgb;
  return detail::back_to(luma(ch(x, 0), ch(x, 1), ch(x, 2)), rgb);
}

Tensor gray_to_rgb(const Tensor& gray) {
  detail::check_image("vision::gray_to_rgb", gray, 1);
  return cat({gray, gray, gray}, 1);
}

Tensor rgb_to_bgr(const Tensor& x) {
  detail::check_image("vision::rgb_to_bgr", x, 3);
  return cat({ch(x, 2), ch(x, 1), ch(x, 0)}, 1);
}

Tensor rgb_to_hsv(const Tensor& rgb) {
  const char* op = "vision::rgb_to_hsv";
  detail::check_image(op, rgb, 3);
  check_float(op, rgb);
  const Tensor r = ch(rgb, 0), g = ch(rgb, 1), b = ch(rgb, 2);
  const Tensor v = maximum(maximum(r, g), b), vmin = minimum(minimum(r, g), b);
  const Tensor diff = v - vmin;
  const Tensor s = diff / (abs(v) + FLT_EPSILON);
  const Tensor k = 60.0 / (diff + FLT_EPSILON);
  Tensor h = where(v == r, (g - b) * k, where(v == g, (b - r) * k + 120, (r - g) * k + 240));
  h = where(h < 0, h + 360, h);
  return cat({h, s, v}, 1);
}

Tensor hsv_to_rgb(const Tensor& hsv) {
  const char* op = "vision::hsv_to_rgb";
  detail::check_image(op, hsv, 3);
  check_float(op, hsv);
  const Tensor h = ch(hsv, 0), s = ch(hsv, 1), v = ch(hsv, 2);
  // OpenCV: h / 60 wrapped to [0, 6), sector i = floor, f = fraction.
  Tensor hh = h / 60.0;
  hh = hh - floor(hh / 6.0) * 6.0;
  const Tensor i = floor(hh), f = hh - i;
  const Tensor p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  auto pick = [&](const Tensor& c0, const Tensor& c1, const Tensor& c2, const Tensor& c3, const Tensor& c4,
                  const Tensor& c5) {
    return where(i == 0, c0, where(i == 1, c1, where(i == 2, c2, where(i == 3, c3, where(i == 4, c4, c5)))));
  };
  return cat({pick(v, q, p, p, t, v), pick(t, v, v, q, p, p), pick(p, p, t, v, v, q)}, 1);
}

Tensor rgb_to_yuv(const Tensor& rgb) {
  const char* op = "vision::rgb_to_yuv";
  detail::check_image(op, rgb, 3);
  check_float(op, rgb);
  const Tensor r = ch(rgb, 0), g = ch(rgb, 1), b = ch(rgb, 2);
  const Tensor y = luma(r, g, b);
  return cat({y, 0.492 * (b - y) + 0.5, 0.877 * (r - y) + 0.5}, 1);
}

Tensor yuv_to_rgb(const Tensor& yuv) {
  const char* op = "vision::yuv_to_rgb";
  detail::check_image(op, yuv, 3);
  check_float(op, yuv);
  const Tensor y = ch(yuv, 0), u = ch(yuv, 1) - 0.5, v = ch(yuv, 2) - 0.5;
  return cat({y + 1.140 * v, y - 0.395 * u - 0.581 * v, y + 2.032 * u}, 1);
}

}  // namespace kiln::vision
