// SPDX-License-Identifier: MIT OR Apache-2.0
// Linear filters (Gaussian, box, Sobel, Laplacian) as separable sums of shifted views (tensor
// ops), and the median filter (on the host, or tensor ops when a gradient is needed). CPU f32
// and u8 images without a gradient take the host paths of image_host.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_host.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

void check_ksize(const char* op, int64_t k, const char* what = "ksize") {
  KILN_CHECK(k >= 1 && k % 2 == 1, op, what << " must be odd and positive, got " << k);
}

/// x [N, C, H, W] (float) filtered by kx along W and ky along H (correlation), borders
/// padded with `mode` ("reflect": OpenCV's BORDER_REFLECT_101; "replicate"). Each pass is a
/// weighted sum of shifted views (zero taps skipped): elementwise ops, which the CPU fuses,
/// and far faster than a one-channel convolution.
Tensor separable(const Tensor& x, const std::vector<double>& kx, const std::vector<double>& ky,
                 const std::string& mode = "reflect") {
  const auto kw = static_cast<int64_t>(kx.size()), kh = static_cast<int64_t>(ky.size());
  const int64_t h = x.size(2), w = x.size(3);
  auto pass = [](const Tensor& p, const std::vector<double>& k, int64_t dim, int64_t len) {
    Tensor acc;
    for (int64_t i = 0; i < static_cast<int64_t>(k.size()); ++i) {
      const double wt = k[static_cast<size_t>(i)];
      if (wt == 0) continue;
      const Tensor v = p.narrow(dim, i, len);
      const Tensor term = wt == 1 ? v : v * wt;
      acc = acc.defined() ? acc + term : term;
    }
    return acc.defined() ? acc : zeros_like(p.narrow(dim, 0, len));
  };
  Tensor y = kw > 1 ? pass(pad(x, {kw / 2, kw / 2, 0, 0}, mode), kx, 3, w) : x * kx[0];
  return kh > 1 ? pass(pad(y, {0, 0, kh / 2, kh / 2}, mode), ky, 2, h) : y * ky[0];
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
  if (detail::host_fast(x))
    return detail::separable_host(x, gaussian_values(ksize.width, sigma_x), gaussian_values(ksize.height, sigma_y),
                                  x.dtype());
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
  if (detail::host_fast(x))
    return detail::separable_host(x, std::vector<double>(static_cast<size_t>(ksize.width), sx),
                                  std::vector<double>(static_cast<size_t>(ksize.height), sy),
                                  normalize ? x.dtype() : f32);
  const Tensor y = separable(detail::as_float(x), std::vector<double>(static_cast<size_t>(ksize.width), sx),
                             std::vector<double>(static_cast<size_t>(ksize.height), sy));
  return normalize ? detail::back_to(y, x) : y;
}

namespace {

/// median_blur on the host (no gradient needed): per pixel, nth_element over its window.
Tensor median_host(const Tensor& x, int64_t ksize) {
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3), r = ksize / 2;
  const std::vector<double> v = x.to(f64).contiguous().to_vector<double>();
  std::vector<double> out(v.size()), win(static_cast<size_t>(ksize * ksize));
  const auto mid = win.begin() + static_cast<std::ptrdiff_t>(win.size() / 2);
  for (int64_t p = 0; p < planes; ++p) {
    const double* src = v.data() + p * h * w;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx) {
        size_t k = 0;
        for (int64_t dy = -r; dy <= r; ++dy) {
          const double* row = src + std::clamp<int64_t>(y + dy, 0, h - 1) * w;
          for (int64_t dx = -r; dx <= r; ++dx) win[k++] = row[std::clamp<int64_t>(xx + dx, 0, w - 1)];
        }
        std::nth_element(win.begin(), mid, win.end());
        out[static_cast<size_t>(p * h * w + y * w + xx)] = *mid;
      }
  }
  return tensor(out, x.shape()).to(x.device(), x.dtype());
}

}  // namespace

Tensor median_blur(const Tensor& x, int64_t ksize) {
  const char* op = "vision::median_blur";
  detail::check_image(op, x);
  check_ksize(op, ksize);
  if (detail::host_fast(x) && ksize <= 7) return detail::median_host_network(x, ksize);
  if (detail::host_fast(x) && x.dtype() == u8) return detail::median_host_histogram(x, ksize);
  if (!x.requires_grad()) return median_host(x, ksize);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), r = ksize / 2;
  const Tensor p = pad(x.reshape({n * c, 1, h, w}), {r, r, r, r}, "replicate");
  std::vector<Tensor> views;
  for (int64_t dy = 0; dy < ksize; ++dy)
    for (int64_t dx = 0; dx < ksize; ++dx) views.push_back(p.narrow(2, dy, h).narrow(3, dx, w));
  return median(stack(views, 0), 0).first.reshape({n, c, h, w});
}

Tensor sobel(const Tensor& x, int64_t dx, int64_t dy, int64_t ksize, double scale, double delta) {
  const char* op = "vision::sobel";
  detail::check_image(op, x);
  KILN_CHECK(ksize == 1 || ksize == 3 || ksize == 5 || ksize == 7, op, "ksize must be 1, 3, 5 or 7, got " << ksize);
  KILN_CHECK(dx >= 0 && dy >= 0 && dx + dy > 0 && dx <= 2 && dy <= 2 && dx < std::max<int64_t>(ksize, 3) &&
                 dy < std::max<int64_t>(ksize, 3),
             op, "derivative orders dx " << dx << ", dy " << dy << " do not fit ksize " << ksize);
  const int64_t kx = ksize == 1 && dx > 0 ? 3 : ksize, ky = ksize == 1 && dy > 0 ? 3 : ksize;
  if (detail::host_fast(x))
    return detail::separable_host(x, sobel_kernel(dx, kx), sobel_kernel(dy, ky), f32, scale, delta);
  Tensor y = separable(x.dtype() == f64 ? x : x.to(f32), sobel_kernel(dx, kx), sobel_kernel(dy, ky));
  if (scale != 1) y = y * scale;
  if (delta != 0) y = y + delta;
  return y;
}

Tensor laplacian(const Tensor& x, int64_t ksize, double scale, double delta) {
  const char* op = "vision::laplacian";
  detail::check_image(op, x);
  KILN_CHECK(ksize == 1 || ksize == 3 || ksize == 5 || ksize == 7, op, "ksize must be 1, 3, 5 or 7, got " << ksize);
  if (detail::host_fast(x)) {  // one pass over both second derivatives
    if (ksize == 3)            // OpenCV's [2 0 2; 0 -8 0; 2 0 2]: corners plus centre, 6 taps not 12
      return detail::separable_host(x, {{{1, 0, 1}, {2, 0, 2}}, {{-8}, {1}}}, f32, scale, delta);
    const int64_t k = std::max<int64_t>(ksize, 3), s = ksize == 1 ? 1 : ksize;
    return detail::separable_host(
        x, {{sobel_kernel(2, k), sobel_kernel(0, s)}, {sobel_kernel(0, s), sobel_kernel(2, k)}}, f32, scale, delta);
  }
  Tensor y = sobel(x, 2, 0, ksize) + sobel(x, 0, 2, ksize);
  if (scale != 1) y = y * scale;
  if (delta != 0) y = y + delta;
  return y;
}

}  // namespace kiln::vision
