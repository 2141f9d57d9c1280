// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Image transforms on [C, H, W] tensors (u8 or float). The random ones take an ItemKey and a
// seed, so an item's augmentation depends only on (seed, epoch, index), never on which loader
// thread produced it. Use them inside data::map:
//
//   auto aug = kiln::data::map_image(train, kiln::data::RandomCrop{.size = 28, .padding = 2, .seed = 1});
#include <cstdint>
#include <vector>

#include "kiln/data/dataset.h"
#include "kiln/data/sources.h"
#include "kiln/tensor.h"

namespace kiln::data {

/// Memory order of an image tensor.
enum class ImageLayout : uint8_t { CHW, HWC };

/// u8 [C, H, W] (or [H, W, C] with HWC; a 2-d [H, W] is one channel) -> f32 [C, H, W] in
/// [0, 1]. Float input is only re-laid out and converted to f32.
Tensor to_tensor(const Tensor& image, ImageLayout layout = ImageLayout::CHW);

/// (x - mean[c]) / std[c] per channel of a float [C, H, W] or [N, C, H, W] tensor; mean and
/// std have one value (every channel) or C values; std must be positive.
Tensor normalize(const Tensor& image, const std::vector<double>& mean, const std::vector<double>& std);

/// Bilinear resize of [C, H, W] (or [N, C, H, W]) to [.., height, width] (PyTorch's
/// interpolate with align_corners=false, no antialias). u8 input is rounded and clamped back to u8.
Tensor resize(const Tensor& image, int64_t height, int64_t width);

/// Mirrors [.., W] left-right.
Tensor hflip(const Tensor& image);

/// The window [top, top+height) x [left, left+width) of [C, H, W] after zero padding of
/// `padding` on every side (top/left count in the padded image). Throws when it does not fit.
Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width, int64_t padding = 0);

/// Zero-pads [C, H, W] by `padding` on every side and cuts a random size x size window
/// (torchvision's RandomCrop(size, padding)); the window is drawn from (seed, key).
struct RandomCrop {
  int64_t size = 0;  ///< square output size; 0 keeps the input size
  int64_t padding = 0;
  uint64_t seed = 0;
  Tensor operator()(const Tensor& image, ItemKey key) const;
};

/// Mirrors [C, H, W] left-right with probability p, drawn from (seed, key).
struct RandomHorizontalFlip {
  double p = 0.5;
  uint64_t seed = 0;
  Tensor operator()(const Tensor& image, ItemKey key) const;
};

/// Applies an image transform (Tensor(const Tensor&) or Tensor(const Tensor&, ItemKey)) to the
/// image of every item, keeping the labels.
template <class F>
DatasetPtr<ImageItem> map_image(const DatasetPtr<ImageItem>& ds, F fn) {
  if constexpr (std::is_invocable_v<F, const Tensor&, ItemKey>) {
    return map(ds, [f = std::move(fn)](ImageItem it, ItemKey k) {
      it.image = f(it.image, k);
      return it;
    });
  } else {
    return map(ds, [f = std::move(fn)](ImageItem it) {
      it.image = f(it.image);
      return it;
    });
  }
}

}  // namespace kiln::data
