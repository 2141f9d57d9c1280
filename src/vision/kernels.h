// SPDX-License-Identifier: MIT OR Apache-2.0
// Host kernels of the detection ops, shared by kiln::vision and the ONNX importer
// (NonMaxSuppression, RoiAlign): greedy NMS and the bilinear samples of RoI Align.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::vision::detail {

/// Indices 0..n-1 of scores in decreasing order, ties lower index first; with min_score only
/// those scoring above it.
std::vector<int64_t> order_by_score(const float* scores, int64_t n, std::optional<float> min_score = {});

/// Greedy NMS over boxes [n, 4] as (x1, y1, x2, y2) with x1 <= x2, y1 <= y2, visited in `order`:
/// a box is kept unless its IoU with a kept box (of the same group, when groups [n] is given)
/// exceeds iou_threshold; boxes that do not overlap, or have zero area, never suppress. At most
/// max_keep (< 0: all) kept; returns their indices in visiting order.
std::vector<int64_t> greedy_nms(const float* boxes, const std::vector<int64_t>& order, float iou_threshold,
                                int64_t max_keep = -1, const int64_t* groups = nullptr);

/// RoI Align's geometry (torchvision.ops.roi_align; ONNX RoiAlign).
struct RoiAlignParams {
  int64_t out_h = 1, out_w = 1;
  double spatial_scale = 1.0;
  int64_t sampling_ratio = 0;  ///< <= 0: adaptive, ceil(bin size) samples per axis
  bool aligned = false;        ///< shift by -0.5 pixel; without it RoIs are at least 1 x 1
};

/// The bilinear samples of RoIs over planes [H, W]: RoI r has out_h * out_w cells of grid[r]
/// samples each, sample s of its cell c being start[r] + c * grid[r] + s; sample k has corners
/// 4k..4k+3 with flat positions batch * H * W + y * W + x and bilinear weights (all 0 for a
/// sample more than one pixel outside the plane).
struct RoiAlignSamples {
  std::vector<int64_t> pos;
  std::vector<double> weight;
  std::vector<int64_t> start;  ///< size R + 1
  std::vector<int64_t> grid;   ///< size R
};

/// Samples of rois [R, 4] (x1, y1, x2, y2 before spatial_scale) of images batch [R] (checked by
/// the caller to lie in range) over planes h x w (both >= 1).
RoiAlignSamples roi_align_samples(const double* rois, const int64_t* batch, int64_t nr, int64_t h, int64_t w,
                                  const RoiAlignParams& p);

}  // namespace kiln::vision::detail
