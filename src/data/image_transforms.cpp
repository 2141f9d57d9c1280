// SPDX-License-Identifier: MIT OR Apache-2.0
// Image transforms on [C, H, W] tensors.
#include "kiln/data/image.h"
#include "kiln/nn/functional.h"
#include "kiln/ops.h"

namespace kiln::data {

Tensor to_tensor(const Tensor& image, ImageLayout layout) {
  KILN_CHECK(image.defined() && (image.dim() == 2 || image.dim() == 3), "data::to_tensor",
             "image must be [H, W], [C, H, W] or [H, W, C], got " << (image.defined() ? image.shape() : Shape{}));
  Tensor x = image.dim() == 2 ? image.unsqueeze(0) : layout == ImageLayout::HWC ? image.permute({2, 0, 1}) : image;
  if (x.dtype() == u8) return x.to(f32).div(255.0).contiguous();
  return x.to(f32).contiguous();
}

Tensor normalize(const Tensor& image, const std::vector<double>& mean, const std::vector<double>& std) {
  constexpr const char* op = "data::normalize";
  KILN_CHECK(image.defined() && (image.dim() == 3 || image.dim() == 4) && image.is_floating_point(), op,
             "image must be a float [C, H, W] or [N, C, H, W] tensor, got "
                 << (image.defined() ? image.shape() : Shape{})
                 << (image.defined() ? " " + to_string(image.dtype()) : ""));
  const int64_t c = image.size(-3);
  KILN_CHECK(!mean.empty() && !std.empty() && (mean.size() == 1 || static_cast<int64_t>(mean.size()) == c) &&
                 (std.size() == 1 || static_cast<int64_t>(std.size()) == c),
             op,
             "mean and std need 1 or " << c << " values, got " << static_cast<long long>(mean.size()) << " and "
                                       << static_cast<long long>(std.size()));
  std::vector<float> m(static_cast<size_t>(c)), s(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    m[static_cast<size_t>(k)] = static_cast<float>(mean.size() == 1 ? mean[0] : mean[static_cast<size_t>(k)]);
    double sd = std.size() == 1 ? std[0] : std[static_cast<size_t>(k)];
    KILN_CHECK(sd > 0, op, "std must be positive, got " << sd);
    s[static_cast<size_t>(k)] = static_cast<float>(sd);
  }
  Tensor mt = from_blob_copy(m.data(), Shape{c, 1, 1}, f32, image.device()).to(image.dtype());
  Tensor st = from_blob_copy(s.data(), Shape{c, 1, 1}, f32, image.device()).to(image.dtype());
  return image.sub(mt).div(st);
}

Tensor resize(const Tensor& image, int64_t height, int64_t width) {
  constexpr const char* op = "data::resize";
  KILN_CHECK(image.defined() && (image.dim() == 3 || image.dim() == 4), op,
             "image must be [C, H, W] or [N, C, H, W], got " << (image.defined() ? image.shape() : Shape{}));
  KILN_CHECK(height > 0 && width > 0, op, "size must be positive, got " << height << "x" << width);
  const bool batched = image.dim() == 4;
  Tensor x = batched ? image : image.unsqueeze(0);
  const DType dt = image.dtype();
  Tensor xf = is_floating(dt) ? x : x.to(f32);
  Tensor y = nn::functional::interpolate(xf, {.size = Dims{height, width}, .mode = "bilinear", .align_corners = false});
  if (!is_floating(dt)) y = y.round().clamp(0, dt == u8 ? 255 : 1e18).to(dt);
  return batched ? y : y.squeeze({0});
}

Tensor hflip(const Tensor& image) {
  KILN_CHECK(image.defined() && image.dim() >= 2, "data::hflip",
             "image must have at least 2 dims, got " << (image.defined() ? image.shape() : Shape{}));
  return image.flip({-1});
}

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width, int64_t padding) {
  constexpr const char* op = "data::crop";
  KILN_CHECK(image.defined() && image.dim() == 3, op,
             "image must be [C, H, W], got " << (image.defined() ? image.shape() : Shape{}));
  KILN_CHECK(
      padding >= 0 && height > 0 && width > 0, op,
      "padding must be >= 0 and the size positive, got padding " << padding << ", size " << height << "x" << width);
  const int64_t ph = image.size(1) + 2 * padding, pw = image.size(2) + 2 * padding;
  KILN_CHECK(top >= 0 && left >= 0 && top + height <= ph && left + width <= pw, op,
             "window " << height << "x" << width << " at (" << top << ", " << left << ") does not fit in the " << ph
                       << "x" << pw << " padded image " << image.shape() << " (padding " << padding << ")");
  Tensor x = padding > 0 ? pad(image, Shape{padding, padding, padding, padding}) : image;
  return x.narrow(1, top, height).narrow(2, left, width).contiguous();
}

Tensor RandomCrop::operator()(const Tensor& image, ItemKey key) const {
  KILN_CHECK(image.defined() && image.dim() == 3, "data::RandomCrop",
             "image must be [C, H, W], got " << (image.defined() ? image.shape() : Shape{}));
  const int64_t h = size > 0 ? size : image.size(1), w = size > 0 ? size : image.size(2);
  const int64_t ph = image.size(1) + 2 * padding, pw = image.size(2) + 2 * padding;
  KILN_CHECK(h <= ph && w <= pw, "data::RandomCrop",
             "crop size " << h << " is larger than the padded image " << ph << "x" << pw);
  Rng rng(hash_mix(seed, key.epoch, key.index, 0x63726f70ULL));
  const int64_t top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(ph - h + 1)));
  const int64_t left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(pw - w + 1)));
  return crop(image, top, left, h, w, padding);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& image, ItemKey key) const {
  Rng rng(hash_mix(seed, key.epoch, key.index, 0x666c6970ULL));
  return rng.uniform() < p ? hflip(image) : image;
}

}  // namespace kiln::data
