// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX detection ops: NonMaxSuppression (greedy, per batch and class, on the host).
#include <algorithm>
#include <numeric>

#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

/// A box as x_min, x_max, y_min, y_max (corners in either order, or center and size).
struct Box {
  float x0, x1, y0, y1;
};

Box box_at(const float* b, bool center) {
  if (center) {
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh};
  }
  return {std::min(b[1], b[3]), std::max(b[1], b[3]), std::min(b[0], b[2]), std::max(b[0], b[2])};
}

/// Whether the intersection over union of a and b exceeds threshold (empty or degenerate boxes
/// never suppress).
bool overlaps(const Box& a, const Box& b, float threshold) {
  const float ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  const float iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (ix1 <= ix0 || iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  const float uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

/// boxes [batches, n, 4], scores [batches, classes, n], optional max_output_boxes_per_class,
/// iou_threshold and score_threshold (one value each) -> selected [k, 3] int64 rows of
/// (batch, class, box): per batch and class, boxes in decreasing score (ties: lower index
/// first) above score_threshold, each kept unless its IoU with a kept box exceeds
/// iou_threshold, at most max_output_boxes_per_class of them.
void non_max_suppression(OpContext& c) {
  const Tensor& boxes = c.x(0);
  const Tensor& scores = c.x(1);
  c.check(boxes.dim() == 3 && boxes.size(2) == 4 && scores.dim() == 3 && scores.size(0) == boxes.size(0) &&
              scores.size(2) == boxes.size(1),
          "boxes [batches, n, 4] and scores [batches, classes, n] expected, got " + to_string(boxes.shape()) + " and " +
              to_string(scores.shape()));
  auto one_value = [&](size_t i, const char* what) {
    c.check(c.x(i).numel() == 1, std::string(what) + " must hold one value, got " + to_string(c.x(i).shape()));
    return c.x(i).to(f64).item<double>();
  };
  const int64_t max_out =
      c.has(2) ? std::max<int64_t>(0, static_cast<int64_t>(one_value(2, "max_output_boxes_per_class"))) : 0;
  const float iou = c.has(3) ? static_cast<float>(one_value(3, "iou_threshold")) : 0.0f;
  const bool has_min = c.has(4);
  const float min_score = has_min ? static_cast<float>(one_value(4, "score_threshold")) : 0.0f;
  const bool center = c.attr_i("center_point_box", 0) != 0;
  const int64_t nb = boxes.size(0), n = boxes.size(1), nc = scores.size(1);
  const std::vector<float> bv = boxes.to(f32).contiguous().to_vector<float>();
  const std::vector<float> sv = scores.to(f32).contiguous().to_vector<float>();
  std::vector<int64_t> out;
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < nb && max_out > 0; ++b)
    for (int64_t k = 0; k < nc; ++k) {
      const float* s = sv.data() + (b * nc + k) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i)
        if (!has_min || s[i] > min_score) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box cand = box_at(bv.data() + (b * n + i) * 4, center);
        if (std::any_of(kept.begin(), kept.end(), [&](const Box& q) { return overlaps(cand, q, iou); })) continue;
        kept.push_back(cand);
        out.insert(out.end(), {b, k, i});
      }
    }
  const auto rows = static_cast<int64_t>(out.size() / 3);
  c.set(0, tensor(out, {rows, 3}).to(boxes.device()));
}

}  // namespace

void register_detection(Registry& r) { r["NonMaxSuppression"] = non_max_suppression; }

}  // namespace kiln::onnx
