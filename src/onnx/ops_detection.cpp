// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX detection ops, on the host: NonMaxSuppression (greedy, per batch and class) and RoiAlign
// (bilinear samples averaged or maxed per output cell, as the reference implementation), over
// the kernels kiln::vision shares (src/vision/kernels.h).
#include <algorithm>
#include <optional>

#include "onnx/ops.h"
#include "vision/kernels.h"

namespace kiln::onnx {

namespace {

/// boxes [batches, n, 4] (corners (y1, x1, y2, x2) in either order, or with center_point_box
/// (x_center, y_center, width, height)) as rows of (x1, y1, x2, y2) with x1 <= x2, y1 <= y2.
std::vector<float> corner_boxes(const std::vector<float>& b, bool center) {
  std::vector<float> out(b.size());
  for (size_t i = 0; i + 3 < b.size(); i += 4) {
    const float* p = b.data() + i;
    float* o = out.data() + i;
    if (center) {
      const float hw = p[2] / 2, hh = p[3] / 2;
      o[0] = p[0] - hw, o[1] = p[1] - hh, o[2] = p[0] + hw, o[3] = p[1] + hh;
    } else {
      o[0] = std::min(p[1], p[3]), o[1] = std::min(p[0], p[2]), o[2] = std::max(p[1], p[3]);
      o[3] = std::max(p[0], p[2]);
    }
  }
  return out;
}

/// boxes [batches, n, 4], scores [batches, classes, n], optional max_output_boxes_per_class,
/// iou_threshold and score_threshold (one value each) -> selected [k, 3] int64 rows of
/// (batch, class, box): per batch and class, boxes in decreasing score (ties: lower index
/// first) above score_threshold, each kept unless its IoU with a kept box exceeds
/// iou_threshold, at most max_output_boxes_per_class of them (kiln::vision's greedy NMS).
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
  std::optional<float> min_score;
  if (c.has(4)) min_score = static_cast<float>(one_value(4, "score_threshold"));
  const bool center = c.attr_i("center_point_box", 0) != 0;
  const int64_t nb = boxes.size(0), n = boxes.size(1), nc = scores.size(1);
  const std::vector<float> bv = corner_boxes(boxes.to(f32).contiguous().to_vector<float>(), center);
  const std::vector<float> sv = scores.to(f32).contiguous().to_vector<float>();
  std::vector<int64_t> out;
  for (int64_t b = 0; b < nb && max_out > 0; ++b)
    for (int64_t k = 0; k < nc; ++k) {
      const std::vector<int64_t> order = vision::detail::order_by_score(sv.data() + (b * nc + k) * n, n, min_score);
      for (int64_t i : vision::detail::greedy_nms(bv.data() + b * n * 4, order, iou, max_out))
        out.insert(out.end(), {b, k, i});
    }
  const auto rows = static_cast<int64_t>(out.size() / 3);
  c.set(0, tensor(out, {rows, 3}).to(boxes.device()));
}

/// X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2) in input coordinates times spatial_scale,
/// batch_indices [R] -> [R, C, output_height, output_width]: each output cell the average (or
/// the max of the weighted corners) of sampling_ratio^2 bilinear samples (adaptive: ceil of the
/// cell's size) inside its part of the region (kiln::vision's RoI Align samples).
void roi_align(OpContext& c) {
  const Tensor &x = c.x(0), &rois = c.x(1), &bi = c.x(2);
  c.check(x.dim() == 4 && rois.dim() == 2 && rois.size(1) == 4 && bi.dim() == 1 && bi.size(0) == rois.size(0),
          "X [N, C, H, W], rois [R, 4] and batch_indices [R] expected, got " + to_string(x.shape()) + ", " +
              to_string(rois.shape()) + ", " + to_string(bi.shape()));
  const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3), nr = rois.size(0);
  vision::detail::RoiAlignParams p;
  p.out_h = c.attr_i("output_height", 1);
  p.out_w = c.attr_i("output_width", 1);
  p.sampling_ratio = c.attr_i("sampling_ratio", 0);
  p.spatial_scale = c.attr_f("spatial_scale", 1.0f);
  p.aligned = c.opset >= 16 && c.attr_s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const bool avg = c.attr_s("mode", "avg") == "avg";
  c.check(p.out_h >= 1 && p.out_w >= 1, "output_height and output_width must be positive");
  c.check(nr == 0 || (h >= 1 && wd >= 1), "X has an empty plane " + to_string(x.shape()));
  const std::vector<double> xv = x.to(f64).contiguous().to_vector<double>();
  const std::vector<double> rv = rois.to(f64).contiguous().to_vector<double>();
  const std::vector<int64_t> bv = bi.to(i64).to_vector<int64_t>();
  for (int64_t b : bv)
    c.check(b >= 0 && b < n, "batch index " + std::to_string(b) + " out of range for " + std::to_string(n) + " images");
  const vision::detail::RoiAlignSamples s = vision::detail::roi_align_samples(rv.data(), bv.data(), nr, h, wd, p);
  const int64_t cells = p.out_h * p.out_w;
  std::vector<double> out(static_cast<size_t>(nr * ch * cells));
  for (int64_t r = 0; r < nr; ++r) {
    const int64_t g = s.grid[static_cast<size_t>(r)];
    const double count = static_cast<double>(std::max<int64_t>(g, 1));
    const int64_t b = bv[static_cast<size_t>(r)];
    for (int64_t k = 0; k < ch; ++k) {
      // Sample positions index image b's planes from b * H * W; channel k is k * H * W further.
      const double* plane = xv.data() + (b * (ch - 1) + k) * h * wd;
      double* o = out.data() + (r * ch + k) * cells;
      for (int64_t cell = 0; cell < cells; ++cell) {
        double acc = 0;
        for (int64_t q = 0; q < g; ++q) {
          const auto si = static_cast<size_t>(4 * (s.start[static_cast<size_t>(r)] + cell * g + q));
          const int64_t* pos = s.pos.data() + si;
          const double* w = s.weight.data() + si;
          if (avg) {
            for (int j = 0; j < 4; ++j) acc += w[j] * plane[pos[j]];
          } else {
            double m = w[0] * plane[pos[0]];
            for (int j = 1; j < 4; ++j) m = std::max(m, w[j] * plane[pos[j]]);
            acc = q == 0 ? m : std::max(acc, m);
          }
        }
        o[cell] = avg ? acc / count : acc;
      }
    }
  }
  c.set(0, tensor(out, {nr, ch, p.out_h, p.out_w}).to(x.dtype()).to(x.device()));
}

}  // namespace

void register_detection(Registry& r) {
  r["NonMaxSuppression"] = non_max_suppression;
  r["RoiAlign"] = roi_align;
}

}  // namespace kiln::onnx
