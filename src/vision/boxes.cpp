// SPDX-License-Identifier: MIT OR Apache-2.0
// Box formats, areas, IoU and GIoU, the GIoU and focal losses, masks_to_boxes, NMS
// (torchvision.ops semantics). All but NMS are tensor ops: every device, autodiff.
#include "kiln/vision/boxes.h"

#include <algorithm>

#include "kiln/error.h"
#include "kiln/nn/loss.h"
#include "kiln/ops.h"
#include "vision/kernels.h"

namespace kiln::vision {

namespace {

void check_boxes(const char* op, const Tensor& b, const char* name = "boxes") {
  KILN_CHECK(b.defined(), op, name << " is undefined");
  KILN_CHECK(b.dim() == 2 && b.size(1) == 4, op, name << " [N, 4] expected, got " << to_string(b.shape()));
}

/// Column k of boxes [N, 4] as [N].
Tensor col(const Tensor& b, int64_t k) { return b.select(1, k); }

/// reduction "none", "mean" or "sum" of loss; the mean of no elements is 0 when empty_mean_zero
/// (torchvision's GIoU loss) and NaN otherwise.
Tensor reduce(const char* op, const Tensor& loss, const std::string& reduction, bool empty_mean_zero = false) {
  if (reduction == "none") return loss;
  if (reduction == "mean") return empty_mean_zero && loss.numel() == 0 ? loss.sum() : loss.mean();
  if (reduction == "sum") return loss.sum();
  KILN_CHECK(false, op, "reduction must be \"none\", \"mean\" or \"sum\", got \"" << reduction << "\"");
  return {};
}

/// Intersection and union [N, M] of xyxy boxes.
std::pair<Tensor, Tensor> inter_union(const Tensor& a, const Tensor& b) {
  const Tensor a2 = a.unsqueeze(1);  // [N, 1, 4]
  const Tensor lt = maximum(a2.narrow(2, 0, 2), b.narrow(1, 0, 2));
  const Tensor rb = minimum(a2.narrow(2, 2, 2), b.narrow(1, 2, 2));
  const Tensor wh = clamp_min(rb - lt, 0);
  const Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  const Tensor uni = box_area(a).unsqueeze(1) + box_area(b).unsqueeze(0) - inter;
  return {inter, uni};
}

}  // namespace

Tensor box_convert(const Tensor& boxes, const std::string& in_fmt, const std::string& out_fmt) {
  check_boxes("vision::box_convert", boxes);
  auto known = [](const std::string& f) { return f == "xyxy" || f == "xywh" || f == "cxcywh"; };
  KILN_CHECK(known(in_fmt) && known(out_fmt), "vision::box_convert",
             "formats must be \"xyxy\", \"xywh\" or \"cxcywh\", got \"" << in_fmt << "\" and \"" << out_fmt << "\"");
  if (in_fmt == out_fmt) return boxes.clone();
  const Tensor a = col(boxes, 0), b = col(boxes, 1), c = col(boxes, 2), d = col(boxes, 3);
  Tensor xyxy = boxes;
  if (in_fmt == "xywh") xyxy = stack({a, b, a + c, b + d}, 1);
  if (in_fmt == "cxcywh") xyxy = stack({a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d}, 1);
  if (out_fmt == "xyxy") return xyxy;
  const Tensor x1 = col(xyxy, 0), y1 = col(xyxy, 1), x2 = col(xyxy, 2), y2 = col(xyxy, 3);
  if (out_fmt == "xywh") return stack({x1, y1, x2 - x1, y2 - y1}, 1);
  return stack({(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1}, 1);
}

Tensor box_area(const Tensor& boxes) {
  check_boxes("vision::box_area", boxes);
  return (col(boxes, 2) - col(boxes, 0)) * (col(boxes, 3) - col(boxes, 1));
}

Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2) {
  check_boxes("vision::box_iou", boxes1, "boxes1");
  check_boxes("vision::box_iou", boxes2, "boxes2");
  auto [inter, uni] = inter_union(boxes1, boxes2);
  return inter / uni;
}

Tensor generalized_box_iou(const Tensor& boxes1, const Tensor& boxes2) {
  check_boxes("vision::generalized_box_iou", boxes1, "boxes1");
  check_boxes("vision::generalized_box_iou", boxes2, "boxes2");
  auto [inter, uni] = inter_union(boxes1, boxes2);
  const Tensor iou = inter / uni;
  const Tensor a2 = boxes1.unsqueeze(1);
  const Tensor lt = minimum(a2.narrow(2, 0, 2), boxes2.narrow(1, 0, 2));
  const Tensor rb = maximum(a2.narrow(2, 2, 2), boxes2.narrow(1, 2, 2));
  const Tensor wh = clamp_min(rb - lt, 0);
  const Tensor area = wh.select(2, 0) * wh.select(2, 1);
  return iou - (area - uni) / area;
}

Tensor generalized_box_iou_loss(const Tensor& boxes1, const Tensor& boxes2, const std::string& reduction, double eps) {
  const char* op = "vision::generalized_box_iou_loss";
  check_boxes(op, boxes1, "boxes1");
  check_boxes(op, boxes2, "boxes2");
  KILN_CHECK(boxes1.size(0) == boxes2.size(0), op,
             "boxes1 and boxes2 must have as many rows, got " << to_string(boxes1.shape()) << " and "
                                                              << to_string(boxes2.shape()));
  const Tensor x1 = col(boxes1, 0), y1 = col(boxes1, 1), x2 = col(boxes1, 2), y2 = col(boxes1, 3);
  const Tensor x1g = col(boxes2, 0), y1g = col(boxes2, 1), x2g = col(boxes2, 2), y2g = col(boxes2, 3);
  const Tensor xk1 = maximum(x1, x1g), yk1 = maximum(y1, y1g), xk2 = minimum(x2, x2g), yk2 = minimum(y2, y2g);
  const Tensor inter = where(logical_and(yk2 > yk1, xk2 > xk1), (xk2 - xk1) * (yk2 - yk1), 0.0);
  const Tensor uni = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - inter;
  const Tensor iou = inter / (uni + eps);
  const Tensor area_c = (maximum(x2, x2g) - minimum(x1, x1g)) * (maximum(y2, y2g) - minimum(y1, y1g));
  return reduce(op, 1 - (iou - (area_c - uni) / (area_c + eps)), reduction, true);
}

Tensor sigmoid_focal_loss(const Tensor& inputs, const Tensor& targets, double alpha, double gamma,
                          const std::string& reduction) {
  const char* op = "vision::sigmoid_focal_loss";
  KILN_CHECK(inputs.defined() && targets.defined() && inputs.shape() == targets.shape(), op,
             "inputs and targets of one shape expected, got "
                 << (inputs.defined() ? to_string(inputs.shape()) : "undefined") << " and "
                 << (targets.defined() ? to_string(targets.shape()) : "undefined"));
  const Tensor t = targets.to(inputs.dtype());
  const Tensor p = sigmoid(inputs);
  const Tensor ce = nn::functional::binary_cross_entropy_with_logits(inputs, t, {.reduction = "none"});
  const Tensor p_t = p * t + (1 - p) * (1 - t);
  Tensor loss = ce * pow(1 - p_t, gamma);
  if (alpha >= 0) loss = (alpha * t + (1 - alpha) * (1 - t)) * loss;
  return reduce(op, loss, reduction);
}

Tensor masks_to_boxes(const Tensor& masks) {
  KILN_CHECK(masks.defined() && masks.dim() == 3, "vision::masks_to_boxes",
             "masks [N, H, W] expected, got " << (masks.defined() ? to_string(masks.shape()) : "undefined"));
  const int64_t h = masks.size(1), w = masks.size(2);
  const Tensor on = masks != 0;
  const Tensor cols = any(on, {1}), rows = any(on, {2});  // [N, W], [N, H]
  const Tensor xs = arange(w, f32, masks.device()), ys = arange(h, f32, masks.device());
  const Tensor found = any(cols, {1});
  Tensor box =
      stack({where(cols, xs, static_cast<double>(w)).amin({1}), where(rows, ys, static_cast<double>(h)).amin({1}),
             where(cols, xs, -1.0).amax({1}), where(rows, ys, -1.0).amax({1})},
            1);
  return where(found.unsqueeze(1), box, 0.0);
}

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  check_boxes("vision::nms", boxes);
  KILN_CHECK(scores.defined() && scores.dim() == 1 && scores.size(0) == boxes.size(0), "vision::nms",
             "scores [N] matching boxes " << to_string(boxes.shape()) << " expected, got "
                                          << (scores.defined() ? to_string(scores.shape()) : "undefined"));
  const std::vector<float> bv = boxes.to(f32).contiguous().to_vector<float>();
  const std::vector<float> sv = scores.to(f32).contiguous().to_vector<float>();
  const std::vector<int64_t> order = detail::order_by_score(sv.data(), boxes.size(0));
  const std::vector<int64_t> keep = detail::greedy_nms(bv.data(), order, static_cast<float>(iou_threshold));
  return tensor(keep, {static_cast<int64_t>(keep.size())}).to(boxes.device());
}

Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs, double iou_threshold) {
  check_boxes("vision::batched_nms", boxes);
  const int64_t n = boxes.size(0);
  KILN_CHECK(scores.defined() && scores.dim() == 1 && scores.size(0) == n && idxs.defined() && idxs.dim() == 1 &&
                 idxs.size(0) == n,
             "vision::batched_nms",
             "scores [N] and idxs [N] matching boxes " << to_string(boxes.shape()) << " expected, got "
                                                       << (scores.defined() ? to_string(scores.shape()) : "undefined")
                                                       << " and "
                                                       << (idxs.defined() ? to_string(idxs.shape()) : "undefined"));
  KILN_CHECK(!is_floating(idxs.dtype()), "vision::batched_nms",
             "idxs must hold integer categories, got " << dtype_name(idxs.dtype()));
  const std::vector<float> bv = boxes.to(f32).contiguous().to_vector<float>();
  const std::vector<float> sv = scores.to(f32).contiguous().to_vector<float>();
  const std::vector<int64_t> gv = idxs.to(i64).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> order = detail::order_by_score(sv.data(), n);
  const std::vector<int64_t> keep =
      detail::greedy_nms(bv.data(), order, static_cast<float>(iou_threshold), -1, gv.data());
  return tensor(keep, {static_cast<int64_t>(keep.size())}).to(boxes.device());
}

}  // namespace kiln::vision
