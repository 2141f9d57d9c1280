// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision roi_align and roi_pool against torchvision (tests/data/vision/roi.safetensors),
// their gradients against finite differences, and bad input.
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor R(const std::string& k) { return test::ref("roi", k); }

TEST(VisionRoi, AlignMatchesTorchvision) {
  for (int scale10 : {10, 5})
    for (int ratio : {-1, 2})
      for (bool aligned : {false, true}) {
        const std::string key = "align_" + std::to_string(scale10) + "_" + (ratio > 0 ? std::to_string(ratio) : "a") +
                                "_" + std::to_string(int(aligned));
        SCOPED_TRACE(key);
        expect_close(vision::roi_align(R("x"), R("boxes"), {3, 4}, scale10 / 10.0, ratio, aligned), R(key), 1e-5);
      }
}

TEST(VisionRoi, PoolMatchesTorchvision) {
  expect_close(vision::roi_pool(R("x"), R("boxes"), {3, 4}, 1.0), R("pool_10"));
  expect_close(vision::roi_pool(R("x"), R("boxes"), {3, 4}, 0.5), R("pool_5"));
}

TEST(VisionRoi, PsAlignMatchesTorchvision) {
  expect_close(vision::ps_roi_align(R("ps_x"), R("ps_boxes"), {2, 3}, 0.9), R("ps_a"), 1e-5);
  expect_close(vision::ps_roi_align(R("ps_x"), R("ps_boxes"), {2, 3}, 0.9, 2), R("ps_2"), 1e-5);
  const Tensor boxes = tensor<double>({0, 1.2, 0.7, 5.3, 4.1}, {1, 5});
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& in) {
                  return vision::ps_roi_align(in[0], boxes, {2, 2}, 1.0, 2);
                },
                {test::rand_input({1, 8, 5, 6})}),
            "");
  expect_error(
      [] {
        vision::ps_roi_align(zeros({1, 5, 4, 4}), zeros({1, 5}), {2, 2});
      },
      "vision::ps_roi_align", "multiple");
}

TEST(VisionRoi, EmptyBoxesGiveEmptyOutput) {
  EXPECT_EQ(vision::roi_align(R("x"), zeros({0, 5}), {2, 2}).shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(vision::roi_pool(R("x"), zeros({0, 5}), {2, 2}).shape(), (Shape{0, 3, 2, 2}));
}

TEST(VisionRoi, GradientsMatchFiniteDifferences) {
  const Tensor boxes = tensor<double>({0, 1.2, 0.7, 6.3, 4.1, 1, 0.2, 2.5, 3.9, 5.5}, {2, 5});
  const Tensor x = test::rand_input({2, 2, 5, 7});
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& in) {
                  return vision::roi_align(in[0], boxes, {2, 3}, 1.0, 2);
                },
                {x}),
            "");
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& in) {
                  return vision::roi_pool(in[0], boxes, {2, 3});
                },
                {x}),
            "");
}

TEST(VisionRoi, BadInputNamesTheOp) {
  expect_error([] { vision::roi_align(zeros({1, 2, 4}), zeros({1, 5}), {2, 2}); }, "vision::roi_align", "[1, 2, 4]");
  expect_error([] { vision::roi_align(zeros({1, 2, 4, 4}), zeros({1, 4}), {2, 2}); }, "vision::roi_align", "[1, 4]");
  expect_error(
      [] {
        vision::roi_pool(zeros({1, 2, 4, 4}), tensor<float>({3, 0, 0, 1, 1}, {1, 5}), {2, 2});
      },
      "vision::roi_pool", "batch index 3");
  expect_error(
      [] {
        vision::roi_align(zeros({1, 2, 4, 4}), zeros({1, 5}), {0, 2});
      },
      "vision::roi_align", "output size");
}

}  // namespace
}  // namespace kiln
