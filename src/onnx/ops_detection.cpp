// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX detection ops, on the host: NonMaxSuppression (greedy, per batch and class) and RoiAlign
// (bilinear samples averaged or maxed per output cell, as the reference implementation).
#include <algorithm>
#include <cmath>
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

/// One bilinear sample of a [H, W] plane at (y, x), as RoiAlign takes it: samples more than one
/// pixel outside give 0; the four weighted corners are returned for the max mode.
struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};
Sample bilinear(double y, double x, int64_t h, int64_t wd) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(wd)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);
  int64_t y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) y = static_cast<double>(y0 = y1 = h - 1);
  if (x0 >= wd - 1) x = static_cast<double>(x0 = x1 = wd - 1);
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  s.pos[0] = y0 * wd + x0;
  s.pos[1] = y0 * wd + x1;
  s.pos[2] = y1 * wd + x0;
  s.pos[3] = y1 * wd + x1;
  s.w[0] = (1 - ly) * (1 - lx);
  s.w[1] = (1 - ly) * lx;
  s.w[2] = ly * (1 - lx);
  s.w[3] = ly * lx;
  return s;
}

/// X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2) in input coordinates times spatial_scale,
/// batch_indices [R] -> [R, C, output_height, output_width]: each output cell the average (or
/// the max of the weighted corners) of sampling_ratio^2 bilinear samples (adaptive: ceil of the
/// cell's size) inside its part of the region.
void roi_align(OpContext& c) {
  const Tensor &x = c.x(0), &rois = c.x(1), &bi = c.x(2);
  c.check(x.dim() == 4 && rois.dim() == 2 && rois.size(1) == 4 && bi.dim() == 1 && bi.size(0) == rois.size(0),
          "X [N, C, H, W], rois [R, 4] and batch_indices [R] expected, got " + to_string(x.shape()) + ", " +
              to_string(rois.shape()) + ", " + to_string(bi.shape()));
  const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), wd = x.size(3), nr = rois.size(0);
  const int64_t oh = c.attr_i("output_height", 1), ow = c.attr_i("output_width", 1);
  const int64_t ratio = c.attr_i("sampling_ratio", 0);
  const double scale = c.attr_f("spatial_scale", 1.0f);
  const bool avg = c.attr_s("mode", "avg") == "avg";
  const bool half_pixel = c.opset >= 16 && c.attr_s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  c.check(oh >= 1 && ow >= 1, "output_height and output_width must be positive");
  c.check(nr == 0 || (h >= 1 && wd >= 1), "X has an empty plane " + to_string(x.shape()));
  const std::vector<double> xv = x.to(f64).contiguous().to_vector<double>();
  const std::vector<double> rv = rois.to(f64).contiguous().to_vector<double>();
  const std::vector<int64_t> bv = bi.to(i64).to_vector<int64_t>();
  std::vector<double> out(static_cast<size_t>(nr * ch * oh * ow));
  std::vector<Sample> samples;
  for (int64_t r = 0; r < nr; ++r) {
    const int64_t b = bv[static_cast<size_t>(r)];
    c.check(b >= 0 && b < n, "batch index " + std::to_string(b) + " out of range for " + std::to_string(n) + " images");
    const double off = half_pixel ? 0.5 : 0.0;
    const double* roi = rv.data() + r * 4;
    const double x0 = roi[0] * scale - off, y0 = roi[1] * scale - off;
    double rw = roi[2] * scale - off - x0, rh = roi[3] * scale - off - y0;
    if (!half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    samples.clear();  // per output cell, gh * gw samples, shared by the channels
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix)
            samples.push_back(bilinear(
                y0 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh),
                x0 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw), h,
                wd));
    for (int64_t k = 0; k < ch; ++k) {
      const double* plane = xv.data() + (b * ch + k) * h * wd;
      double* o = out.data() + (r * ch + k) * oh * ow;
      size_t si = 0;
      for (int64_t cell = 0; cell < oh * ow; ++cell) {
        double acc = 0;
        for (int64_t q = 0; q < gh * gw; ++q, ++si) {
          const Sample& sp = samples[si];
          if (avg) {
            for (int j = 0; j < 4; ++j) acc += sp.w[j] * plane[sp.pos[j]];
          } else {
            double m = sp.w[0] * plane[sp.pos[0]];
            for (int j = 1; j < 4; ++j) m = std::max(m, sp.w[j] * plane[sp.pos[j]]);
            acc = q == 0 ? m : std::max(acc, m);
          }
        }
        o[cell] = avg ? acc / count : acc;
      }
    }
  }
  c.set(0, tensor(out, {nr, ch, oh, ow}).to(x.dtype()).to(x.device()));
}

}  // namespace

void register_detection(Registry& r) {
  r["NonMaxSuppression"] = non_max_suppression;
  r["RoiAlign"] = roi_align;
}

}  // namespace kiln::onnx
