// SPDX-License-Identifier: MIT OR Apache-2.0
// Image transforms for training, with torchvision's semantics, that plug into kiln::data:
// the per-image ones (random resized crop, colour jitter, random affine, cutout) are called as
// f(image, ItemKey) and go into data::map_image; the per-batch ones (mixup, cutmix) are called
// as f(batch, key) and go into a MixBatches source. Every random choice derives from
// (seed, epoch, index) alone, so a run is reproducible whatever the number of loader threads:
//
//   auto train = kiln::data::map_image(ds, kiln::vision::RandomResizedCrop{.size = {24, 24}, .seed = 1});
//   kiln::data::DataLoader<kiln::data::ImageItem> loader(train, {.batch_size = 64});
//   kiln::vision::MixBatches mixed(loader, kiln::vision::MixUp{.alpha = 0.2, .num_classes = 10, .seed = 2});
//
// Images are [C, H, W] (one item) or [N, C, H, W] (all N take the same draw), f32/f64 in
// [0, 1] or u8 in [0, 255].
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "kiln/data/batch.h"
#include "kiln/data/dataset.h"
#include "kiln/tensor.h"
#include "kiln/vision/image.h"

namespace kiln::vision {

// ---- colour adjustments (torchvision.transforms.v2.functional; 1 or 3 channels) -----------------

/// x * factor, clamped (u8: truncated back to u8, as torchvision). factor >= 0.
Tensor adjust_brightness(const Tensor& x, double factor);
/// Blend with the mean grey level of each image: factor 0 gives flat grey, 1 the input.
Tensor adjust_contrast(const Tensor& x, double factor);
/// Blend with the grey image (0 gives grey, 1 the input); one channel is returned as is.
Tensor adjust_saturation(const Tensor& x, double factor);
/// Turns the hue by factor (in [-0.5, 0.5], a fraction of the colour circle) through HSV.
Tensor adjust_hue(const Tensor& x, double factor);

// ---- per-image random transforms --------------------------------------------------------------

/// A crop window: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

/// torchvision's RandomResizedCrop: a window of area scale x the image's and aspect ratio
/// (width / height) drawn log-uniformly from ratio (ten tries, else the central crop clamped
/// to the ratio range), resized to size (antialiased bilinear by default).
struct RandomResizedCrop {
  ImageSize size;
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
  std::string interpolation = "bilinear";
  bool antialias = true;
  uint64_t seed = 0;
  /// The window drawn for an image of height x width.
  CropBox params(int64_t height, int64_t width, data::ItemKey key) const;
  Tensor operator()(const Tensor& image, data::ItemKey key) const;
};

/// torchvision's ColorJitter: brightness, contrast and saturation factors drawn from
/// [max(0, 1 - v), 1 + v], hue from [-hue, hue] (hue <= 0.5), applied in a random order; a zero
/// strength skips that adjustment.
struct ColorJitter {
  double brightness = 0, contrast = 0, saturation = 0, hue = 0;
  uint64_t seed = 0;
  /// The draw: order (0 brightness, 1 contrast, 2 saturation, 3 hue) and the four factors.
  struct Params {
    std::array<int, 4> order{0, 1, 2, 3};
    std::array<double, 4> factor{1, 1, 1, 0};
  };
  Params params(data::ItemKey key) const;
  Tensor operator()(const Tensor& image, data::ItemKey key) const;
};

/// torchvision's RandomAffine: angle from [-degrees, degrees], translation up to
/// translate (fractions of width and height, rounded to pixels), scale from scale, shear
/// (degrees) from shear_x and shear_y, applied with affine (zeros or fill outside).
struct RandomAffine {
  double degrees = 0;
  std::array<double, 2> translate{0, 0};
  std::array<double, 2> scale{1, 1};
  std::array<double, 2> shear_x{0, 0};
  std::array<double, 2> shear_y{0, 0};
  std::string interpolation = "nearest";
  std::optional<double> fill;
  uint64_t seed = 0;
  /// The draw: angle, translation (pixels), scale and shear (x, y).
  struct Params {
    double angle = 0;
    std::array<double, 2> translate{0, 0};
    double scale = 1;
    std::array<double, 2> shear{0, 0};
  };
  Params params(int64_t height, int64_t width, data::ItemKey key) const;
  Tensor operator()(const Tensor& image, data::ItemKey key) const;
};

/// Cutout (DeVries and Taylor, 2017): with probability p, a size x size square centred on a
/// uniformly drawn pixel (clipped at the borders) is set to fill.
struct Cutout {
  int64_t size = 8;
  double p = 1.0;
  double fill = 0;
  uint64_t seed = 0;
  /// The square drawn for an image of height x width (empty when not applied).
  CropBox params(int64_t height, int64_t width, data::ItemKey key) const;
  Tensor operator()(const Tensor& image, data::ItemKey key) const;
};

// ---- per-batch random transforms (key.index: the batch number) --------------------------------

/// Mixed images [N, C, H, W] (float) and soft labels [N, num_classes] (f32, rows summing to 1).
struct Mixed {
  Tensor images;
  Tensor labels;
};

/// torchvision's MixUp: lambda ~ Beta(alpha, alpha); every image and one-hot label becomes
/// lambda x itself + (1 - lambda) x its predecessor in the batch (the batch rolled by one).
/// labels are class indices [N] (integers) or probabilities [N, num_classes].
struct MixUp {
  double alpha = 1.0;
  int64_t num_classes = 0;
  uint64_t seed = 0;
  /// The lambda drawn for a batch.
  double lambda(data::ItemKey key) const;
  Mixed operator()(const Tensor& images, const Tensor& labels, data::ItemKey key) const;
  /// The batch with input and target mixed (target becomes [N, num_classes]).
  data::Batch operator()(data::Batch batch, data::ItemKey key) const;
};

/// torchvision's CutMix: lambda ~ Beta(alpha, alpha) gives a box of about (1 - lambda) of the
/// image, centred on a uniform pixel and clipped; inside it every image takes its
/// predecessor's pixels, and the labels mix by the box's true area.
struct CutMix {
  double alpha = 1.0;
  int64_t num_classes = 0;
  uint64_t seed = 0;
  /// The box drawn for a batch of height x width images.
  CropBox params(int64_t height, int64_t width, data::ItemKey key) const;
  Mixed operator()(const Tensor& images, const Tensor& labels, data::ItemKey key) const;
  data::Batch operator()(data::Batch batch, data::ItemKey key) const;
};

/// A BatchSource that passes every batch of `inner` through fn (MixUp, CutMix or any
/// Batch(Batch, ItemKey)), keyed by (epoch, batch number). inner must outlive it.
class MixBatches : public data::BatchSource {
 public:
  using Fn = std::function<data::Batch(data::Batch, data::ItemKey)>;
  MixBatches(data::BatchSource& inner, Fn fn);
  size_t num_batches() const override { return inner_->num_batches(); }
  size_t num_items() const override { return inner_->num_items(); }
  void start_epoch(uint64_t epoch) override;
  std::optional<data::Batch> next() override;
  bool shard(size_t index, size_t count) override { return inner_->shard(index, count); }

 private:
  data::BatchSource* inner_;
  Fn fn_;
  uint64_t epoch_ = 0, batch_ = 0;
};

}  // namespace kiln::vision
