// SPDX-License-Identifier: MIT OR Apache-2.0
// Training transforms (torchvision.transforms.v2 semantics) with draws keyed by
// (seed, epoch, index): a counter-based generator (Philox) keyed by the seed, the transform's
// salt, the epoch and the index, so the n-th number of an item's draw is a pure function of them.
#include "kiln/vision/transforms.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/rng.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::vision {

namespace {

/// The random numbers of one (seed, transform, epoch, index).
class Draws {
 public:
  Draws(uint64_t seed, uint64_t salt, data::ItemKey key) {
    uint32_t w[4];
    rng::Philox::generate(seed ^ (salt * 0x9E3779B97F4A7C15ULL), key.epoch, w);
    rng::Philox::generate((static_cast<uint64_t>(w[0]) << 32) | w[1], key.index, w);
    key_ = (static_cast<uint64_t>(w[0]) << 32) | w[1];
  }
  /// Uniform in [0, 1).
  double uniform() {
    uint32_t w[4];
    rng::Philox::generate(key_, counter_++, w);
    return rng::u01d(w[0], w[1]);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n), n >= 1.
  int64_t below(int64_t n) {
    return std::min<int64_t>(static_cast<int64_t>(uniform() * static_cast<double>(n)), n - 1);
  }
  double normal() {  // Box-Muller
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  }
  /// Gamma(a, 1) by Marsaglia and Tsang (a < 1 boosted by U^(1/a)).
  double gamma(double a) {
    if (a < 1) return gamma(a + 1) * std::pow(1.0 - uniform(), 1.0 / a);
    const double d = a - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x = normal(), v = 1 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      const double u = 1.0 - uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
  double beta(double a, double b) {
    const double x = gamma(a), y = gamma(b);
    return x + y > 0 ? x / (x + y) : 0.5;
  }

 private:
  uint64_t key_ = 0, counter_ = 0;
};

// Salts: one stream per transform, so two transforms with one seed draw differently.
constexpr uint64_t kCropSalt = 1, kJitterSalt = 2, kAffineSalt = 3, kCutoutSalt = 4, kMixUpSalt = 5, kCutMixSalt = 6;

/// Checks a [C, H, W] or [N, C, H, W] image and returns it as [N, C, H, W].
Tensor as_batch(const char* op, const Tensor& x) {
  KILN_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), op,
             "image [C, H, W] or [N, C, H, W] expected, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  KILN_CHECK(x.dtype() == f32 || x.dtype() == f64 || x.dtype() == u8, op,
             "f32, f64 or u8 image expected, got " << dtype_name(x.dtype()));
  return x.dim() == 3 ? x.unsqueeze(0) : x;
}
Tensor like_input(const Tensor& y, const Tensor& x) { return x.dim() == 3 ? y.squeeze({0}) : y; }

/// A float result back in x's dtype, clamped to the value range (u8 truncated, as torchvision).
Tensor clamp_back(const Tensor& y, const Tensor& x) {
  if (x.dtype() != u8) return clamp(y, 0, 1);
  return clamp(y, 0, 255).to(u8);
}
Tensor as_float(const Tensor& x) { return x.dtype() == u8 ? x.to(f32) : x; }

/// torchvision's grey level r 0.2989 + g 0.587 + b 0.114 ([.., 1, H, W]; u8 floored).
Tensor grey(const Tensor& x) {
  const int64_t d = x.dim() - 3;
  const Tensor f = as_float(x);
  const Tensor g = f.narrow(d, 0, 1) * 0.2989 + f.narrow(d, 1, 1) * 0.587 + f.narrow(d, 2, 1) * 0.114;
  return x.dtype() == u8 ? floor(g) : g;
}

/// img * ratio + other * (1 - ratio), clamped back to img's dtype.
Tensor blend(const Tensor& img, const Tensor& other, double ratio) {
  return clamp_back(as_float(img) * ratio + other * (1 - ratio), img);
}

void check_colour(const char* op, const Tensor& x) {
  KILN_CHECK(x.defined() && x.dim() >= 3 && (x.size(-3) == 1 || x.size(-3) == 3), op,
             "image [.., 1 or 3, H, W] expected, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  KILN_CHECK(x.dtype() == f32 || x.dtype() == f64 || x.dtype() == u8, op,
             "f32, f64 or u8 image expected, got " << dtype_name(x.dtype()));
}

/// torchvision's _rgb_to_hsv and _hsv_to_rgb on [.., 3, H, W] floats (h, s, v in [0, 1]).
Tensor hsv_of(const Tensor& img) {
  const int64_t d = img.dim() - 3;
  const Tensor r = img.narrow(d, 0, 1), g = img.narrow(d, 1, 1), b = img.narrow(d, 2, 1);
  const Tensor maxc = amax(img, {d}, true), minc = amin(img, {d}, true), eqc = maxc == minc;
  const Tensor range = maxc - minc;
  const Tensor s = range / where(eqc, 1.0, maxc), div = where(eqc, 1.0, range);
  const Tensor rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
  const Tensor is_r = maxc == r, is_g = (maxc == g) & ~is_r;
  const Tensor h = where(is_r, bc - gc, where(is_g, 2.0 + rc - bc, 4.0 + gc - rc));
  return cat({fmod(h / 6.0 + 1.0, 1.0), s, maxc}, d);
}
Tensor rgb_of(const Tensor& hsv) {
  const int64_t d = hsv.dim() - 3;
  const Tensor h = hsv.narrow(d, 0, 1), s = hsv.narrow(d, 1, 1), v = hsv.narrow(d, 2, 1);
  const Tensor i6 = floor(h * 6), f = h * 6 - i6, i = remainder(i6, 6.0);
  const Tensor p = clamp(v * (1 - s), 0, 1), q = clamp(v * (1 - s * f), 0, 1), t = clamp(v * (s * f + (1 - s)), 0, 1);
  auto pick = [&](const Tensor& a0, const Tensor& a1, const Tensor& a2, const Tensor& a3, const Tensor& a4,
                  const Tensor& a5) {
    return where(i == 0, a0, where(i == 1, a1, where(i == 2, a2, where(i == 3, a3, where(i == 4, a4, a5)))));
  };
  return cat({pick(v, q, p, p, t, v), pick(t, v, v, q, p, p), pick(p, p, t, v, v, q)}, d);
}

/// One-hot (or checked probability) labels [N, k] as f32.
Tensor soft_labels(const char* op, const Tensor& labels, int64_t n, int64_t k) {
  KILN_CHECK(k > 0, op, "num_classes must be positive, got " << k);
  KILN_CHECK(
      labels.defined() && labels.size(0) == n && (labels.dim() == 1 || (labels.dim() == 2 && labels.size(1) == k)), op,
      "labels [" << n << "] or [" << n << ", " << k << "] expected, got "
                 << (labels.defined() ? to_string(labels.shape()) : "undefined"));
  if (labels.dim() == 2) return labels.to(f32);
  KILN_CHECK(!is_floating(labels.dtype()), op, "class indices must be integers, got " << dtype_name(labels.dtype()));
  if (n > 0) {
    const Tensor lo = labels.min(), hi = labels.max();
    KILN_CHECK(
        lo.item<int64_t>() >= 0 && hi.item<int64_t>() < k, op,
        "class indices must lie in [0, " << k << "), got " << lo.item<int64_t>() << " to " << hi.item<int64_t>());
  }
  return one_hot(labels.to(i64), k).to(f32);
}

/// Checks images [N, C, H, W] for a batch transform.
void check_batch(const char* op, const Tensor& images) {
  KILN_CHECK(images.defined() && images.dim() == 4, op,
             "images [N, C, H, W] expected, got " << (images.defined() ? to_string(images.shape()) : "undefined"));
  KILN_CHECK(is_floating(images.dtype()), op, "float images expected, got " << dtype_name(images.dtype()));
}

}  // namespace

// ---- colour ---------------------------------------------------------------------------------

Tensor adjust_brightness(const Tensor& x, double factor) {
  check_colour("vision::adjust_brightness", x);
  KILN_CHECK(factor >= 0, "vision::adjust_brightness", "factor must not be negative, got " << factor);
  return clamp_back(as_float(x) * factor, x);
}

Tensor adjust_contrast(const Tensor& x, double factor) {
  check_colour("vision::adjust_contrast", x);
  KILN_CHECK(factor >= 0, "vision::adjust_contrast", "factor must not be negative, got " << factor);
  const Tensor g = x.size(-3) == 3 ? grey(x) : as_float(x);
  return blend(x, mean(g, {-3, -2, -1}, true), factor);
}

Tensor adjust_saturation(const Tensor& x, double factor) {
  check_colour("vision::adjust_saturation", x);
  KILN_CHECK(factor >= 0, "vision::adjust_saturation", "factor must not be negative, got " << factor);
  if (x.size(-3) == 1) return x;
  return blend(x, grey(x), factor);
}

Tensor adjust_hue(const Tensor& x, double factor) {
  check_colour("vision::adjust_hue", x);
  KILN_CHECK(factor >= -0.5 && factor <= 0.5, "vision::adjust_hue", "factor must lie in [-0.5, 0.5], got " << factor);
  if (x.size(-3) == 1 || x.numel() == 0) return x;
  const Tensor f = x.dtype() == u8 ? x.to(f32) / 255.0 : x;
  Tensor hsv = hsv_of(f);
  const int64_t d = hsv.dim() - 3;
  hsv = cat({remainder(hsv.narrow(d, 0, 1) + factor, 1.0), hsv.narrow(d, 1, 2)}, d);
  const Tensor rgb = rgb_of(hsv);
  return x.dtype() == u8 ? (rgb * (255.0 + 1.0 - 1e-3)).to(u8) : rgb;
}

// ---- per-image transforms ---------------------------------------------------------------------

CropBox RandomResizedCrop::params(int64_t height, int64_t width, data::ItemKey key) const {
  const char* op = "vision::RandomResizedCrop";
  KILN_CHECK(scale[0] > 0 && scale[0] <= scale[1] && ratio[0] > 0 && ratio[0] <= ratio[1], op,
             "scale and ratio must be positive ranges (low <= high), got scale ["
                 << scale[0] << ", " << scale[1] << "] and ratio [" << ratio[0] << ", " << ratio[1] << "]");
  KILN_CHECK(height > 0 && width > 0, op, "cannot crop an empty image " << height << " x " << width);
  Draws r(seed, kCropSalt, key);
  const double area = static_cast<double>(height * width);
  const double lr0 = std::log(ratio[0]), lr1 = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * r.uniform(scale[0], scale[1]);
    const double aspect = std::exp(r.uniform(lr0, lr1));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) return {r.below(height - h + 1), r.below(width - w + 1), h, w};
  }
  // The central crop, clamped to the ratio range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio[0])
    h = std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / ratio[0])));
  else if (in_ratio > ratio[1])
    w = std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * ratio[1])));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Tensor RandomResizedCrop::operator()(const Tensor& image, data::ItemKey key) const {
  const char* op = "vision::RandomResizedCrop";
  const Tensor x = as_batch(op, image);
  KILN_CHECK(size.height > 0 && size.width > 0, op,
             "size must be positive, got " << size.height << " x " << size.width);
  const CropBox b = params(x.size(2), x.size(3), key);
  const Tensor window = x.narrow(2, b.top, b.height).narrow(3, b.left, b.width);
  return like_input(resize(window, size, interpolation, antialias), image);
}

ColorJitter::Params ColorJitter::params(data::ItemKey key) const {
  const char* op = "vision::ColorJitter";
  KILN_CHECK(brightness >= 0 && contrast >= 0 && saturation >= 0 && hue >= 0 && hue <= 0.5, op,
             "strengths must not be negative and hue at most 0.5, got " << brightness << ", " << contrast << ", "
                                                                        << saturation << ", " << hue);
  Draws r(seed, kJitterSalt, key);
  Params p;
  for (int i = 3; i > 0; --i) std::swap(p.order[static_cast<size_t>(i)], p.order[static_cast<size_t>(r.below(i + 1))]);
  const double v[3] = {brightness, contrast, saturation};
  for (int i = 0; i < 3; ++i)
    p.factor[static_cast<size_t>(i)] = v[i] > 0 ? r.uniform(std::max(0.0, 1 - v[i]), 1 + v[i]) : 1.0;
  p.factor[3] = hue > 0 ? r.uniform(-hue, hue) : 0.0;
  return p;
}

Tensor ColorJitter::operator()(const Tensor& image, data::ItemKey key) const {
  check_colour("vision::ColorJitter", image);
  const Params p = params(key);
  Tensor x = image;
  for (int k : p.order) {
    const double f = p.factor[static_cast<size_t>(k)];
    if (k == 0 && brightness > 0) x = adjust_brightness(x, f);
    if (k == 1 && contrast > 0) x = adjust_contrast(x, f);
    if (k == 2 && saturation > 0) x = adjust_saturation(x, f);
    if (k == 3 && hue > 0) x = adjust_hue(x, f);
  }
  return x;
}

RandomAffine::Params RandomAffine::params(int64_t height, int64_t width, data::ItemKey key) const {
  KILN_CHECK(degrees >= 0 && translate[0] >= 0 && translate[0] <= 1 && translate[1] >= 0 && translate[1] <= 1 &&
                 scale[0] > 0 && scale[0] <= scale[1] && shear_x[0] <= shear_x[1] && shear_y[0] <= shear_y[1],
             "vision::RandomAffine",
             "degrees must not be negative, translate lie in [0, 1], scale be a positive range and shears ranges, "
             "got degrees "
                 << degrees << ", translate (" << translate[0] << ", " << translate[1] << "), scale [" << scale[0]
                 << ", " << scale[1] << "]");
  Draws r(seed, kAffineSalt, key);
  Params p;
  p.angle = r.uniform(-degrees, degrees);
  const double mx = translate[0] * static_cast<double>(width), my = translate[1] * static_cast<double>(height);
  p.translate = {std::nearbyint(r.uniform(-mx, mx)), std::nearbyint(r.uniform(-my, my))};
  p.scale = r.uniform(scale[0], scale[1]);
  p.shear = {r.uniform(shear_x[0], shear_x[1]), r.uniform(shear_y[0], shear_y[1])};
  return p;
}

Tensor RandomAffine::operator()(const Tensor& image, data::ItemKey key) const {
  const Tensor x = as_batch("vision::RandomAffine", image);
  const Params p = params(x.size(2), x.size(3), key);
  return like_input(affine(x, p.angle, p.translate, p.scale, p.shear, {.interpolation = interpolation, .fill = fill}),
                    image);
}

CropBox Cutout::params(int64_t height, int64_t width, data::ItemKey key) const {
  KILN_CHECK(size >= 0 && p >= 0 && p <= 1, "vision::Cutout",
             "size must not be negative and p lie in [0, 1], got size " << size << " and p " << p);
  Draws r(seed, kCutoutSalt, key);
  if (r.uniform() >= p || height == 0 || width == 0) return {};
  const int64_t cy = r.below(height), cx = r.below(width);
  const int64_t y0 = std::clamp<int64_t>(cy - size / 2, 0, height),
                y1 = std::clamp<int64_t>(cy - size / 2 + size, 0, height);
  const int64_t x0 = std::clamp<int64_t>(cx - size / 2, 0, width),
                x1 = std::clamp<int64_t>(cx - size / 2 + size, 0, width);
  return {y0, x0, y1 - y0, x1 - x0};
}

Tensor Cutout::operator()(const Tensor& image, data::ItemKey key) const {
  const Tensor x = as_batch("vision::Cutout", image);
  const CropBox b = params(x.size(2), x.size(3), key);
  if (b.height * b.width == 0) return image;
  const Tensor rows =
      (arange(x.size(2), i64, x.device()) >= b.top) & (arange(x.size(2), i64, x.device()) < b.top + b.height);
  const Tensor cols =
      (arange(x.size(3), i64, x.device()) >= b.left) & (arange(x.size(3), i64, x.device()) < b.left + b.width);
  const Tensor inside = rows.reshape({1, 1, -1, 1}) & cols.reshape({1, 1, 1, -1});
  return like_input(masked_fill(x, inside, fill), image);
}

// ---- per-batch transforms ---------------------------------------------------------------------

double MixUp::lambda(data::ItemKey key) const {
  KILN_CHECK(alpha > 0, "vision::MixUp", "alpha must be positive, got " << alpha);
  return Draws(seed, kMixUpSalt, key).beta(alpha, alpha);
}

Mixed MixUp::operator()(const Tensor& images, const Tensor& labels, data::ItemKey key) const {
  const char* op = "vision::MixUp";
  check_batch(op, images);
  const Tensor y = soft_labels(op, labels, images.size(0), num_classes);
  const double lam = lambda(key);
  if (images.size(0) == 0) return {images, y};
  return {images.roll({1}, {0}) * (1 - lam) + images * lam, y.roll({1}, {0}) * (1 - lam) + y * lam};
}

data::Batch MixUp::operator()(data::Batch batch, data::ItemKey key) const {
  Mixed m = (*this)(batch.input, batch.target, key);
  return {std::move(m.images), std::move(m.labels)};
}

CropBox CutMix::params(int64_t height, int64_t width, data::ItemKey key) const {
  KILN_CHECK(alpha > 0, "vision::CutMix", "alpha must be positive, got " << alpha);
  Draws r(seed, kCutMixSalt, key);
  const double lam = r.beta(alpha, alpha);
  if (height == 0 || width == 0) return {};
  const int64_t cx = r.below(width), cy = r.below(height);
  const double f = 0.5 * std::sqrt(1.0 - lam);
  const auto hw = static_cast<int64_t>(f * static_cast<double>(width));
  const auto hh = static_cast<int64_t>(f * static_cast<double>(height));
  const int64_t x0 = std::max<int64_t>(cx - hw, 0), x1 = std::min<int64_t>(cx + hw, width);
  const int64_t y0 = std::max<int64_t>(cy - hh, 0), y1 = std::min<int64_t>(cy + hh, height);
  return {y0, x0, y1 - y0, x1 - x0};
}

Mixed CutMix::operator()(const Tensor& images, const Tensor& labels, data::ItemKey key) const {
  const char* op = "vision::CutMix";
  check_batch(op, images);
  const Tensor y = soft_labels(op, labels, images.size(0), num_classes);
  const int64_t h = images.size(2), w = images.size(3);
  const CropBox b = params(h, w, key);
  if (images.size(0) == 0 || b.height * b.width == 0) return {images, y};
  const Device d = images.device();
  const Tensor rows = (arange(h, i64, d) >= b.top) & (arange(h, i64, d) < b.top + b.height);
  const Tensor cols = (arange(w, i64, d) >= b.left) & (arange(w, i64, d) < b.left + b.width);
  const Tensor inside = rows.reshape({1, 1, -1, 1}) & cols.reshape({1, 1, 1, -1});
  const double lam = 1.0 - static_cast<double>(b.height * b.width) / static_cast<double>(h * w);
  return {where(inside, images.roll({1}, {0}), images), y.roll({1}, {0}) * (1 - lam) + y * lam};
}

data::Batch CutMix::operator()(data::Batch batch, data::ItemKey key) const {
  Mixed m = (*this)(batch.input, batch.target, key);
  return {std::move(m.images), std::move(m.labels)};
}

MixBatches::MixBatches(data::BatchSource& inner, Fn fn) : inner_(&inner), fn_(std::move(fn)) {
  KILN_CHECK(fn_ != nullptr, "vision::MixBatches", "the batch function is empty");
}

void MixBatches::start_epoch(uint64_t epoch) {
  epoch_ = epoch, batch_ = 0;
  inner_->start_epoch(epoch);
}

std::optional<data::Batch> MixBatches::next() {
  std::optional<data::Batch> b = inner_->next();
  if (!b) return b;
  return fn_(std::move(*b), data::ItemKey{batch_++, epoch_});
}

}  // namespace kiln::vision
