// SPDX-License-Identifier: MIT OR Apache-2.0
// Region-of-interest pooling, as torchvision.ops.roi_align and roi_pool: input [N, C, H, W],
// boxes [K, 5] rows of (batch index, x1, y1, x2, y2) in input coordinates before
// spatial_scale -> [K, C, output_height, output_width]. Both are differentiable with respect to
// the input (not the boxes), on every device.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::vision {

/// Output size of the RoI ops: (height, width).
struct RoiSize {
  int64_t height = 1;
  int64_t width = 1;
};

/// Each output cell is the mean of sampling_ratio^2 bilinear samples of its bin (sampling_ratio
/// <= 0: ceil(bin size) per axis). aligned shifts the box by -0.5 pixel (pixel centres);
/// without it boxes are at least 1 x 1.
Tensor roi_align(const Tensor& input, const Tensor& boxes, RoiSize output_size, double spatial_scale = 1.0,
                 int64_t sampling_ratio = -1, bool aligned = false);

/// Each output cell is the max over the pixels of its bin, the box's corners rounded to pixels;
/// an empty bin gives 0.
Tensor roi_pool(const Tensor& input, const Tensor& boxes, RoiSize output_size, double spatial_scale = 1.0);

/// Position-sensitive RoI Align: input [N, C * oh * ow, H, W] -> [K, C, oh, ow], output
/// channel c of cell (i, j) averaging the samples of input channel (c * oh + i) * ow + j
/// (torchvision.ops.ps_roi_align: boxes shifted by -0.5 pixel, no minimum size; a bin with no
/// samples gives 0 where torchvision gives NaN).
Tensor ps_roi_align(const Tensor& input, const Tensor& boxes, RoiSize output_size, double spatial_scale = 1.0,
                    int64_t sampling_ratio = -1);

}  // namespace kiln::vision
