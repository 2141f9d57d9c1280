// SPDX-License-Identifier: MIT OR Apache-2.0
// Boxes, their overlaps, non-maximum suppression and detection losses, as torchvision.ops.
// Boxes are [N, 4] float tensors; "xyxy" is (x1, y1, x2, y2) with x1 <= x2 and y1 <= y2.
// The ops built from tensor ops (all but nms, batched_nms and masks_to_boxes' host part) run
// on every device and under autodiff.
#pragma once

#include <string>

#include "kiln/tensor.h"

namespace kiln::vision {

/// boxes [N, 4] from in_fmt to out_fmt, each "xyxy", "xywh" (x1, y1, width, height) or
/// "cxcywh" (centre, width, height) (torchvision.ops.box_convert).
Tensor box_convert(const Tensor& boxes, const std::string& in_fmt, const std::string& out_fmt);

/// Areas [N] of boxes [N, 4] in xyxy: (x2 - x1) * (y2 - y1) (torchvision.ops.box_area).
Tensor box_area(const Tensor& boxes);

/// Intersection over union [N, M] of boxes1 [N, 4] and boxes2 [M, 4] in xyxy
/// (torchvision.ops.box_iou; two empty boxes give 0 / 0 = NaN, as there).
Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2);

/// Generalized IoU [N, M]: IoU - (enclosing area - union) / enclosing area
/// (torchvision.ops.generalized_box_iou).
Tensor generalized_box_iou(const Tensor& boxes1, const Tensor& boxes2);

/// 1 - GIoU of matching rows of boxes1 and boxes2 [N, 4]; reduction "none" ([N]), "mean" or
/// "sum" (0-d); eps guards the divisions (torchvision.ops.generalized_box_iou_loss).
Tensor generalized_box_iou_loss(const Tensor& boxes1, const Tensor& boxes2, const std::string& reduction = "none",
                                double eps = 1e-7);

/// Focal loss of logits `inputs` against binary `targets` (same shape):
/// alpha_t * (1 - p_t)^gamma * BCE; alpha < 0 leaves out the weighting; reduction "none",
/// "mean" or "sum" (torchvision.ops.sigmoid_focal_loss).
Tensor sigmoid_focal_loss(const Tensor& inputs, const Tensor& targets, double alpha = 0.25, double gamma = 2,
                          const std::string& reduction = "none");

/// Bounding boxes [N, 4] (xyxy, f32, inclusive pixel coordinates) of the nonzero pixels of
/// masks [N, H, W]; an empty mask gives zeros (torchvision.ops.masks_to_boxes).
Tensor masks_to_boxes(const Tensor& masks);

/// Indices (i64) of the boxes [N, 4] (xyxy) kept by greedy non-maximum suppression, in
/// decreasing score order (ties: lower index first): a box is dropped when its IoU with a kept
/// box exceeds iou_threshold. Boxes of zero area never suppress (torchvision.ops.nms).
Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold);

/// nms done independently per category idxs [N] (integers): boxes of different categories never
/// suppress each other; indices in decreasing score order (torchvision.ops.batched_nms).
Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs, double iou_threshold);

}  // namespace kiln::vision
