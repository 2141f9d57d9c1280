// SPDX-License-Identifier: MIT OR Apache-2.0
// RGB <-> CIE L*a*b* (OpenCV's cvtColor formulas), as tensor ops on [N, 3, H, W]: every device,
// and autodiff for float images.
#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

Tensor ch(const Tensor& x, int64_t k) { return x.narrow(1, k, 1); }

// CIE L*a*b* with OpenCV's constants: sRGB primaries, the D65 white point, and its thresholds
// (0.008856 = (6/29)^3, 7.787 = (29/3)^3 / (29 * 4), 903.3 = (29/3)^3).
constexpr double kRgbToXyz[9] = {0.412453, 0.357580, 0.180423, 0.212671, 0.715160,
                                 0.072169, 0.019334, 0.119193, 0.950227};
constexpr double kXyzToRgb[9] = {3.240479, -1.53715, -0.498535, -0.969256, 1.875991,
                                 0.041556, 0.055648, -0.204043, 1.057311};
constexpr double kWhite[3] = {0.950456, 1.0, 1.088754};

/// Row r of the 3 x 3 matrix m applied to the channels (c0, c1, c2), column j scaled by s[j].
Tensor mix3(const double* m, int r, const Tensor& c0, const Tensor& c1, const Tensor& c2, const double* s) {
  return m[r * 3] * s[0] * c0 + m[r * 3 + 1] * s[1] * c1 + m[r * 3 + 2] * s[2] * c2;
}

}  // namespace

Tensor rgb_to_lab(const Tensor& rgb) {
  detail::check_image("vision::rgb_to_lab", rgb, 3);
  const Tensor x = rgb.dtype() == u8 ? rgb.to(f32) / 255.0 : clamp(rgb, 0, 1);
  const Tensor lin = where(x <= 0.04045, x / 12.92, pow((clamp_min(x, 0.04045) + 0.055) / 1.055, 2.4));
  const Tensor r = ch(lin, 0), g = ch(lin, 1), b = ch(lin, 2);
  auto row = [&](int k) {  // X / Xn, Y / Yn, Z / Zn
    const double s[3] = {1 / kWhite[k], 1 / kWhite[k], 1 / kWhite[k]};
    return mix3(kRgbToXyz, k, r, g, b, s);
  };
  const Tensor xx = row(0), yy = row(1), zz = row(2);
  auto f = [](const Tensor& t) {
    return where(t > 0.008856, pow(clamp_min(t, 0.008856), 1.0 / 3), 7.787 * t + 16.0 / 116);
  };
  const Tensor fx = f(xx), fy = f(yy), fz = f(zz);
  const Tensor l = where(yy > 0.008856, 116 * fy - 16, 903.3 * yy), a = 500 * (fx - fy), bb = 200 * (fy - fz);
  if (rgb.dtype() != u8) return cat({l, a, bb}, 1);
  return detail::back_to(cat({l * (255.0 / 100), a + 128, bb + 128}, 1), rgb);
}

Tensor lab_to_rgb(const Tensor& lab) {
  detail::check_image("vision::lab_to_rgb", lab, 3);
  const bool bytes = lab.dtype() == u8;
  const Tensor x = bytes ? lab.to(f32) : lab;
  const Tensor l = bytes ? ch(x, 0) * (100.0 / 255) : ch(x, 0);
  const Tensor a = bytes ? ch(x, 1) - 128 : ch(x, 1), b = bytes ? ch(x, 2) - 128 : ch(x, 2);
  const Tensor low = l <= 0.008856 * 903.3;
  const Tensor y = where(low, l / 903.3, pow((l + 16) / 116, 3));
  const Tensor fy = where(low, 7.787 * (l / 903.3) + 16.0 / 116, (l + 16) / 116);
  auto inv = [](const Tensor& t) { return where(t <= 0.206893, (t - 16.0 / 116) / 7.787, t * t * t); };
  const Tensor xx = inv(a / 500 + fy), zz = inv(fy - b / 200);
  std::vector<Tensor> out;
  for (int k = 0; k < 3; ++k) {
    const Tensor v = clamp(mix3(kXyzToRgb, k, xx, y, zz, kWhite), 0, 1);
    out.push_back(where(v <= 0.0031308, 12.92 * v, 1.055 * pow(clamp_min(v, 0.0031308), 1 / 2.4) - 0.055));
  }
  const Tensor rgb = cat(out, 1);
  return bytes ? detail::back_to(rgb * 255, lab) : rgb;
}

}  // namespace kiln::vision
