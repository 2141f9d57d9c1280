// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision box ops, NMS and losses against torchvision (tests/data/vision/boxes.safetensors).
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_equal_i64;
using test::expect_error;
Tensor R(const std::string& k) { return test::ref("boxes", k); }

TEST(VisionBoxes, AreaIouGiouMatchTorchvision) {
  expect_close(vision::box_area(R("a")), R("area_a"));
  expect_close(vision::box_iou(R("a"), R("b")), R("iou"));
  expect_close(vision::generalized_box_iou(R("a"), R("b")), R("giou"));
}

TEST(VisionBoxes, ConvertMatchesTorchvisionAndRoundTrips) {
  for (const char* f : {"xywh", "cxcywh"}) {
    expect_close(vision::box_convert(R("a"), "xyxy", f), R(std::string("a_") + f));
    expect_close(vision::box_convert(R(std::string("a_") + f), f, "xyxy"), R("a"), 1e-5);
  }
  expect_close(vision::box_convert(R("a_xywh"), "xywh", "cxcywh"), R("a_cxcywh"), 1e-5);
  expect_error([] { vision::box_convert(zeros({2, 4}), "xyxy", "yxyx"); }, "vision::box_convert", "yxyx");
}

TEST(VisionBoxes, LossesMatchTorchvision) {
  for (const char* r : {"none", "sum", "mean"}) {
    // (0-d results are stored as [1].)
    expect_close(vision::generalized_box_iou_loss(R("a"), R("c"), r).reshape({-1}),
                 R(std::string("giou_loss_") + r).reshape({-1}));
    expect_close(vision::sigmoid_focal_loss(R("logits"), R("targets"), 0.25, 2, r).reshape({-1}),
                 R(std::string("focal_") + r).reshape({-1}));
  }
  EXPECT_EQ(vision::sigmoid_focal_loss(R("logits"), R("targets"), 0.25, 2, "sum").dim(), 0);
  // No boxes: the mean GIoU loss is 0, as torchvision's.
  EXPECT_EQ(vision::generalized_box_iou_loss(zeros({0, 4}), zeros({0, 4}), "mean").item<float>(), 0.0f);
  expect_close(vision::sigmoid_focal_loss(R("logits"), R("targets"), -1, 1.5), R("focal_noalpha"));
}

TEST(VisionBoxes, MasksToBoxesMatchesTorchvision) {
  expect_close(vision::masks_to_boxes(R("masks")), R("masks_boxes"));
  // An empty mask gives zeros; no masks give [0, 4].
  expect_close(vision::masks_to_boxes(zeros({1, 3, 4})), zeros({1, 4}));
  EXPECT_EQ(vision::masks_to_boxes(zeros({0, 3, 4})).shape(), (Shape{0, 4}));
}

TEST(VisionBoxes, NmsMatchesTorchvisionWithTies) {
  for (const char* k : {"03", "05"}) {
    const double thr = std::string(k) == "03" ? 0.3 : 0.5;
    expect_equal_i64(vision::nms(R("nms_boxes"), R("nms_scores"), thr), R(std::string("nms_keep_") + k));
    expect_equal_i64(vision::batched_nms(R("nms_boxes"), R("nms_scores"), R("nms_idxs"), thr),
                     R(std::string("batched_keep_") + k));
  }
}

TEST(VisionBoxes, NmsEdgeCases) {
  // No boxes.
  EXPECT_EQ(vision::nms(zeros({0, 4}), zeros({0}), 0.5).numel(), 0);
  EXPECT_EQ(vision::batched_nms(zeros({0, 4}), zeros({0}), zeros({0}, {.dtype = i64}), 0.5).numel(), 0);
  // Equal scores keep the lower index first; identical boxes suppress; zero-area boxes stay.
  const Tensor b = tensor<float>({0, 0, 2, 2, 0, 0, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 4});
  expect_equal_i64(vision::nms(b, tensor<float>({0.5f, 0.5f, 0.5f, 0.5f}, {4}), 0.5), tensor<int64_t>({0, 2, 3}, {3}));
  // Categories keep identical boxes apart.
  expect_equal_i64(
      vision::batched_nms(b, tensor<float>({0.4f, 0.9f, 0.1f, 0.2f}, {4}), tensor<int64_t>({0, 1, 0, 0}, {4}), 0.5),
      tensor<int64_t>({1, 0, 3, 2}, {4}));
}

TEST(VisionBoxes, BadShapesNameTheOp) {
  expect_error([] { vision::nms(zeros({3, 5}), zeros({3}), 0.5); }, "vision::nms", "[3, 5]");
  expect_error([] { vision::nms(zeros({3, 4}), zeros({2}), 0.5); }, "vision::nms", "[2]");
  expect_error([] { vision::box_iou(zeros({3, 4}), zeros({4})); }, "vision::box_iou", "[4]");
  expect_error([] { vision::box_area(scalar_tensor(1.0)); }, "vision::box_area", "[]");
  expect_error(
      [] {
        vision::batched_nms(zeros({2, 4}), zeros({2}), zeros({2}), 0.5);
      },
      "vision::batched_nms", "integer");
  expect_error(
      [] {
        vision::generalized_box_iou_loss(zeros({2, 4}), zeros({3, 4}));
      },
      "vision::generalized_box_iou_loss", "[3, 4]");
  expect_error([] { vision::sigmoid_focal_loss(zeros({2}), zeros({3})); }, "vision::sigmoid_focal_loss", "[3]");
  expect_error([] { vision::masks_to_boxes(zeros({3, 4})); }, "vision::masks_to_boxes", "[3, 4]");
}

TEST(VisionBoxes, GiouLossGradientMatchesFiniteDifferences) {
  const Tensor a = R("a").to(f64), c = R("c").to(f64);
  EXPECT_EQ(
      test::gradcheck(
          [&](const std::vector<Tensor>& in) { return vision::generalized_box_iou_loss(in[0], c.to(in[0].device())); },
          {a}),
      "");
}

}  // namespace
}  // namespace kiln
