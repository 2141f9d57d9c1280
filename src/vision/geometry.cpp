// SPDX-License-Identifier: MIT OR Apache-2.0
// Resizing with antialias (torch.nn.functional.interpolate(antialias=True)) and torchvision's
// rotate and affine. Resizing is separable: the weights of each output row and column are found
// on the host and applied as two matrix products. rotate and affine map every output pixel to a
// source position on the host, as torchvision's affine grid, and read the image with
// grid_sample. All three run on every device and are differentiable with respect to the image.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "kiln/nn/functional.h"
#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// The antialiased interpolation matrix [out, in] of one axis (ATen's
/// _compute_indices_min_size_weights_aa): the filter is stretched by the scale when shrinking and
/// the weights of each output are normalised to sum to 1.
std::vector<double> aa_weights(int64_t in, int64_t out, bool cubic) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double half = cubic ? 2.0 : 1.0;
  const double support = scale >= 1.0 ? half * scale : half;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  auto filter = [cubic](double x) {
    x = std::abs(x);
    if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
    constexpr double a = -0.5;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
  };
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0;
    for (int64_t j = lo; j < hi; ++j) total += filter((static_cast<double>(j) - center + 0.5) * invscale);
    if (total == 0) continue;
    for (int64_t j = lo; j < hi; ++j)
      m[static_cast<size_t>(i * in + j)] = filter((static_cast<double>(j) - center + 0.5) * invscale) / total;
  }
  return m;
}

/// torchvision's _get_inverse_affine_matrix: the map from output to input coordinates, both
/// relative to the image centre, of rotation by angle degrees (clockwise on screen for positive
/// angles), scale, shear (degrees, x then y) about center and then translation.
std::array<double, 6> inverse_affine(std::array<double, 2> center, double angle, std::array<double, 2> translate,
                                     double scale, std::array<double, 2> shear) {
  const double deg = std::numbers::pi / 180.0;
  const double rot = angle * deg, sx = shear[0] * deg, sy = shear[1] * deg;
  const double cx = center[0], cy = center[1], tx = translate[0], ty = translate[1];
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -(a * std::tan(sx) + std::sin(rot));
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = std::cos(rot) - c * std::tan(sx);
  std::array<double, 6> m = {d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0};
  m[2] += cx - m[0] * (cx + tx) - m[1] * (cy + ty);
  m[5] += cy - m[3] * (cx + tx) - m[4] * (cy + ty);
  return m;
}

/// torchvision's _apply_grid_transform: output pixel (i, j) of [oh, ow] reads the input at
/// m (j - (ow - 1) / 2, i - (oh - 1) / 2) + ((w - 1) / 2, (h - 1) / 2) with grid_sample (zeros
/// outside); with a fill, pixels outside take it (blended by the coverage for bilinear).
Tensor grid_transform(const char* op, const Tensor& x, const std::array<double, 6>& m, ImageSize out,
                      const std::string& interpolation, std::optional<double> fill) {
  detail::check_image(op, x);
  KILN_CHECK(interpolation == "bilinear" || interpolation == "nearest", op,
             "interpolation must be \"bilinear\" or \"nearest\", got \"" << interpolation << "\"");
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), oh = out.height, ow = out.width;
  Tensor f = detail::as_float(x);
  if (x.numel() == 0 || oh * ow == 0)
    return detail::back_to(zeros({n, c, oh, ow}, {.dtype = f.dtype(), .device = x.device()}), x);
  // torchvision's grid: the matrix divided by half the input size, applied to the centred
  // output coordinates, in the image's precision (f32 rounding decides ties of "nearest").
  const bool single = f.dtype() == f32;
  auto prec = [single](double v) { return single ? static_cast<double>(static_cast<float>(v)) : v; };
  double r[6];
  for (int k = 0; k < 6; ++k)
    r[k] = prec(prec(m[static_cast<size_t>(k)]) / prec(0.5 * static_cast<double>(k < 3 ? w : h)));
  std::vector<double> grid(static_cast<size_t>(oh * ow * 2));
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      const double xc = static_cast<double>(j) - 0.5 * static_cast<double>(ow - 1);
      const double yc = static_cast<double>(i) - 0.5 * static_cast<double>(oh - 1);
      grid[static_cast<size_t>((i * ow + j) * 2)] = prec(xc * r[0] + yc * r[1] + r[2]);
      grid[static_cast<size_t>((i * ow + j) * 2 + 1)] = prec(xc * r[3] + yc * r[4] + r[5]);
    }
  const Tensor g = tensor(grid, {1, oh, ow, 2}, x.device()).to(f.dtype()).expand({n, oh, ow, 2});
  if (fill) f = cat({f, ones({n, 1, h, w}, {.dtype = f.dtype(), .device = x.device()})}, 1);
  Tensor y =
      nn::functional::grid_sample(f, g, {.mode = interpolation, .padding_mode = "zeros", .align_corners = false});
  if (fill) {
    const Tensor cover = y.narrow(1, c, 1);
    y = y.narrow(1, 0, c);
    y = interpolation == "nearest" ? where(cover < 0.5, *fill, y) : (y - *fill) * cover + *fill;
  }
  return detail::back_to(y, x);
}

/// Rotation by a multiple of 90 degrees (counter-clockwise on screen for k = 1), as torch.rot90.
Tensor rot90(const Tensor& x, int64_t k) {
  if (k == 1) return x.transpose(2, 3).flip({2});
  if (k == 2) return x.flip({2, 3});
  return x.transpose(2, 3).flip({3});
}

}  // namespace

Tensor resize(const Tensor& x, ImageSize size, const std::string& interpolation, bool antialias) {
  const char* op = "vision::resize";
  detail::check_image(op, x);
  KILN_CHECK(interpolation == "nearest" || interpolation == "bilinear" || interpolation == "bicubic", op,
             "interpolation must be \"nearest\", \"bilinear\" or \"bicubic\", got \"" << interpolation << "\"");
  KILN_CHECK(size.height > 0 && size.width > 0, op,
             "output size must be positive, got " << size.height << " x " << size.width);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  KILN_CHECK(h > 0 && w > 0, op, "cannot resize an empty image " << to_string(x.shape()));
  const Tensor f = detail::as_float(x);
  if (n * c == 0)
    return detail::back_to(zeros({n, c, size.height, size.width}, {.dtype = f.dtype(), .device = x.device()}), x);
  if (interpolation == "nearest" || !antialias) {
    Tensor y = nn::functional::interpolate(
        f, {.size = Dims{size.height, size.width}, .mode = interpolation, .align_corners = std::nullopt});
    if (interpolation == "bicubic") y = y.clamp(0, x.dtype() == u8 ? 255.0 : 1e300);
    return detail::back_to(y, x);
  }
  const bool cubic = interpolation == "bicubic";
  const Tensor wh = tensor(aa_weights(h, size.height, cubic), {size.height, h}, x.device()).to(f.dtype());
  const Tensor ww = tensor(aa_weights(w, size.width, cubic), {size.width, w}, x.device()).to(f.dtype());
  Tensor y = wh.matmul(f.matmul(ww.t()));
  if (x.dtype() == u8 && cubic) y = y.clamp(0, 255);
  return detail::back_to(y, x);
}

Tensor rotate(const Tensor& x, double angle, const RotateOptions& options) {
  const char* op = "vision::rotate";
  detail::check_image(op, x);
  const int64_t h = x.size(2), w = x.size(3);
  angle = std::fmod(angle, 360.0);
  if (angle < 0) angle += 360.0;
  if (!options.center) {  // torchvision's exact paths
    if (angle == 0) return x.clone();
    if (angle == 180) return rot90(x, 2);
    if ((options.expand || h == w) && (angle == 90 || angle == 270)) return rot90(x, angle == 90 ? 1 : 3);
  }
  std::array<double, 2> center{0, 0};
  if (options.center)
    center = {(*options.center)[0] - 0.5 * static_cast<double>(w), (*options.center)[1] - 0.5 * static_cast<double>(h)};
  const std::array<double, 6> m = inverse_affine(center, -angle, {0, 0}, 1.0, {0, 0});
  ImageSize out{h, w};
  if (options.expand) {  // torchvision's output size: the bounding box of the turned corners
    double lo[2] = {1e300, 1e300}, hi[2] = {-1e300, -1e300};
    const double hw = 0.5 * static_cast<double>(w), hh = 0.5 * static_cast<double>(h);
    for (const auto& [px, py] : {std::pair{-hw, -hh}, {-hw, hh}, {hw, hh}, {hw, -hh}}) {
      const double v[2] = {static_cast<float>(m[0] * px + m[1] * py + m[2]) + hw,
                           static_cast<float>(m[3] * px + m[4] * py + m[5]) + hh};
      for (int k = 0; k < 2; ++k) lo[k] = std::min(lo[k], v[k]), hi[k] = std::max(hi[k], v[k]);
    }
    auto span = [](double a, double b) {
      return static_cast<int64_t>(std::ceil(std::trunc(b * 1e4) * 1e-4) - std::floor(std::trunc(a * 1e4) * 1e-4));
    };
    out = {span(lo[1], hi[1]), span(lo[0], hi[0])};
  }
  return grid_transform(op, x, m, out, options.interpolation, options.fill);
}

Tensor affine(const Tensor& x, double angle, std::array<double, 2> translate, double scale, std::array<double, 2> shear,
              const AffineOptions& options) {
  const char* op = "vision::affine";
  detail::check_image(op, x);
  KILN_CHECK(scale > 0, op, "scale must be positive, got " << scale);
  const int64_t h = x.size(2), w = x.size(3);
  std::array<double, 2> center{0, 0};
  if (options.center)
    center = {(*options.center)[0] - 0.5 * static_cast<double>(w), (*options.center)[1] - 0.5 * static_cast<double>(h)};
  return grid_transform(op, x, inverse_affine(center, angle, translate, scale, shear), {h, w}, options.interpolation,
                        options.fill);
}

}  // namespace kiln::vision
