// SPDX-License-Identifier: MIT OR Apache-2.0
// Linear filters (Gaussian, box, Sobel, Laplacian) as separable depthwise convolutions, and the
// median filter, all tensor ops (OpenCV's kernels and borders).
#include <cmath>
#include <vector>

#include "kiln/nn/functional/conv.h"
#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

void check_ksize(const char* op, int64_t k, const char* what = "ksize") {
  KILN_CHECK(k >= 1 && k % 2 == 1, op, what << " must be odd and positive, got " << k);
}

/// x [N, C, H, W] (float) filtered by kx along W and ky along H (correlation), borders
/// padded with `mode` ("reflect": OpenCV's BORDER_REFLECT_101; "replicate").
Tensor separable(const Tensor& x, const std::vector<double>& kx, const std::vector<double>& ky,
                 const std::string& mode = "reflect") {
  const auto kw = static_cast<int64_t>(kx.size()), kh = static_cast<int64_t>(ky.size());
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  Tensor y = pad(x.reshape({n * c, 1, h, w}), {kw / 2, kw / 2, kh / 2, kh / 2}, mode);
  const TensorOptions o{.dtype = x.dtype(), .device = x.device()};
  y = nn::functional::conv2d(y, tensor(kx, {1, 1, 1, kw}).to(o.device, x.dtype()));
  y = nn::functional::conv2d(y, tensor(ky, {1, 1, kh, 1}).to(o.device, x.dtype()));
  return y.reshape({n, c, h, w});
}

/// The 1-d Sobel kernel of derivative `order` and size ksize (cv::getDerivKernels).
std::vector<double> sobel_kernel(int64_t order, int64_t ksize) {
  if (ksize == 1) return {1.0};
  std::vector<double> k(static_cast<size_t>(ksize + 1), 0.0);
  k[0] = 1;
  for (int64_t i = 0; i < ksize - order - 1; ++i) {  // smoothing: convolve with [1, 1]
    double old = k[0];
    for (int64_t j = 1; j <= ksize; ++j) {
      const double nv = k[static_cast<size_t>(j)] + k[static_cast<size_t>(j - 1)];
      k[static_cast<size_t>(j - 1)] = old;
      old = nv;
    }
  }
  for (int64_t i = 0; i < order; ++i) {  // differencing: convolve with [-1, 1]
    double old = -k[0];
    for (int64_t j = 1; j <= ksize; ++j) {
      const double nv = k[static_cast<size_t>(j - 1)] - k[static_cast<size_t>(j)];
      k[static_cast<size_t>(j - 1)] = old;
      old = nv;
    }
  }
  k.resize(static_cast<size_t>(ksize));
  return k;
}

std::vector<double> gaussian_values(int64_t n, double sigma) {
  static const std::vector<std::vector<double>> small = {
      {1.0},
      {0.25, 0.5, 0.25},
      {0.0625, 0.25, 0.375, 0.25, 0.0625},
      {0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125},
      {4 / 256., 13 / 256., 30 / 256., 51 / 256., 60 / 256., 51 / 256., 30 / 256., 13 / 256., 4 / 256.}};
  if (n % 2 == 1 && n <= 9 && sigma <= 0) return small[static_cast<size_t>(n / 2)];
  const double s = sigma > 0 ? sigma : ((static_cast<double>(n) - 1) * 0.5 - 1) * 0.3 + 0.8;
  std::vector<double> k(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) - static_cast<double>(n - 1) * 0.5;
    sum += k[static_cast<size_t>(i)] = std::exp(-0.5 / (s * s) * x * x);
  }
  for (double& v : k) v /= sum;
  return k;
}

}  // namespace

Tensor gaussian_kernel(int64_t ksize, double sigma) {
  check_ksize("vision::gaussian_kernel", ksize);
  const std::vector<double> k = gaussian_values(ksize, sigma);
  return tensor(k, {ksize}).to(f32);
}

Tensor gaussian_blur(const Tensor& x, KSize ksize, double sigma_x, double sigma_y) {
  const char* op = "vision::gaussian_blur";
  detail::check_image(op, x);
  check_ksize(op, ksize.height, "ksize.height");
  check_ksize(op, ksize.width, "ksize.width");
  if (sigma_y <= 0) sigma_y = sigma_x;
  const Tensor y =
      separable(detail::as_float(x), gaussian_values(ksize.width, sigma_x), gaussian_values(ksize.height, sigma_y));
  return detail::back_to(y, x);
}

Tensor box_filter(const Tensor& x, KSize ksize, bool normalize) {
  const char* op = "vision::box_filter";
  detail::check_image(op, x);
  check_ksize(op, ksize.height, "ksize.height");
  check_ksize(op, ksize.width, "ksize.width");
  const double sx = normalize ? 1.0 / static_cast<double>(ksize.width) : 1.0;
  const double sy = normalize ? 1.0 / static_cast<double>(ksize.height) : 1.0;
  const Tensor y = separable(detail::as_float(x), std::vector<double>(static_cast<size_t>(ksize.width), sx),
                             std::vector<double>(static_cast<size_t>(ksize.height), sy));
  return normalize ? detail::back_to(y, x) : y;
}

Tensor median_blur(const Tensor& x, int64_t ksize) {
  const char* op = "vision::median_blur";
  detail::check_image(op, x);
  check_ksize(op, ksize);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), r = ksize / 2;
  const Tensor p = pad(detail::as_float(x).reshape({n * c, 1, h, w}), {r, r, r, r}, "replicate");
  std::vector<Tensor> views;
  for (int64_t dy = 0; dy < ksize; ++dy)
    for (int64_t dx = 0; dx < ksize; ++dx) views.push_back(p.narrow(2, dy, h).narrow(3, dx, w));
  const Tensor m = median(stack(views, 0), 0).first.reshape({n, c, h, w});
  return detail::back_to(m, x);
}

Tensor sobel(const Tensor& x, int64_t dx, int64_t dy, int64_t ksize, double scale, double delta) {
  const char* op = "vision::sobel";
  detail::check_image(op, x);
  KILN_CHECK(ksize == 1 || ksize == 3 || ksize == 5 || ksize == 7, op, "ksize must be 1, 3, 5 or 7, got " << ksize);
  KILN_CHECK(dx >= 0 && dy >= 0 && dx + dy > 0 && dx <= 2 && dy <= 2 && dx < std::max<int64_t>(ksize, 3) &&
                 dy < std::max<int64_t>(ksize, 3),
             op, "derivative orders dx " << dx << ", dy " << dy << " do not fit ksize " << ksize);
  const int64_t kx = ksize == 1 && dx > 0 ? 3 : ksize, ky = ksize == 1 && dy > 0 ? 3 : ksize;
  Tensor y = separable(x.dtype() == f64 ? x : x.to(f32), sobel_kernel(dx, kx), sobel_kernel(dy, ky));
  if (scale != 1) y = y * scale;
  if (delta != 0) y = y + delta;
  return y;
}

Tensor laplacian(const Tensor& x, int64_t ksize, double scale, double delta) {
  const char* op = "vision::laplacian";
  detail::check_image(op, x);
  KILN_CHECK(ksize == 1 || ksize == 3 || ksize == 5 || ksize == 7, op, "ksize must be 1, 3, 5 or 7, got " << ksize);
  Tensor y = sobel(x, 2, 0, ksize) + sobel(x, 0, 2, ksize);
  if (scale != 1) y = y * scale;
  if (delta != 0) y = y + delta;
  return y;
}

}  // namespace kiln::vision
