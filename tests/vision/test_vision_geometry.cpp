// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision resizing with antialias, rotate and affine against torch / torchvision
// (tests/data/vision/geometry.safetensors) and perspective warps against OpenCV
// (tests/data/vision/perspective.safetensors).
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor G(const std::string& k) { return test::ref("geometry", k); }
Tensor P(const std::string& k) { return test::ref("perspective", k); }

TEST(VisionResize, AntialiasMatchesTorch) {
  for (const char* mode : {"bilinear", "bicubic"}) {
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{7, 9}, {5, 11}, {31, 12}, {17, 23}}) {
      const std::string key = std::string("resize_") + mode + "_" + std::to_string(oh) + "x" + std::to_string(ow);
      SCOPED_TRACE(key);
      expect_close(vision::resize(G("x"), {oh, ow}, mode), G(key), 1e-5, 1e-5);
    }
    SCOPED_TRACE(mode);
    // torch's u8 path rounds its fixed-point weights in two passes: within 1.
    expect_close(vision::resize(G("xu"), {7, 9}, mode), G(std::string("resize_") + mode + "_u8"), 1.0, 0);
  }
}

TEST(VisionResize, GradientEmptyAndBadInput) {
  EXPECT_EQ(test::gradcheck(
                [](const std::vector<Tensor>& in) {
                  return vision::resize(in[0], {3, 4}, "bicubic");
                },
                {test::rand_input({1, 2, 7, 9})}),
            "");
  EXPECT_EQ(vision::resize(zeros({0, 3, 8, 8}), {4, 4}).shape(), (Shape{0, 3, 4, 4}));
  EXPECT_TRUE(equal(vision::resize(zeros({1, 1, 9, 7}).to(u8), {3, 5}), zeros({1, 1, 3, 5}).to(u8)));
  // Without antialias: interpolate's bilinear.
  const Tensor x = rand({1, 2, 9, 7});
  expect_close(vision::resize(x, {4, 3}, "bilinear", false),
               nn::functional::interpolate(x, {.size = Dims{4, 3}, .mode = "bilinear", .align_corners = false}));
  expect_error([] { vision::resize(zeros({1, 1, 4, 4}), {0, 3}); }, "vision::resize", "0 x 3");
  expect_error([] { vision::resize(zeros({1, 1, 4, 4}), {2, 3}, "area"); }, "vision::resize", "area");
  expect_error([] { vision::resize(zeros({1, 1, 0, 4}), {2, 3}); }, "vision::resize", "empty");
}

TEST(VisionRotate, MatchesTorchvision) {
  const Tensor x = G("x").narrow(0, 0, 1);
  struct Case {
    const char* name;
    double angle;
    vision::RotateOptions o;
  };
  const Case cases[] = {{"rot30", 30, {}},
                        {"rot30_expand", 30, {.expand = true}},
                        {"rot_m75_center", -75, {.center = std::array<double, 2>{4.0, 6.5}}},
                        {"rot30_fill", 30, {.fill = 0.25}},
                        {"rot90", 90, {.expand = true}}};
  for (const Case& c : cases)
    for (const char* in : {"bilinear", "nearest"}) {
      const std::string key = std::string(c.name) + "_" + in;
      SCOPED_TRACE(key);
      vision::RotateOptions o = c.o;
      o.interpolation = in;
      expect_close(vision::rotate(x, c.angle, o), G(key), 2e-5, 1e-5);
    }
  expect_close(vision::rotate(G("xu"), 30, {.interpolation = "bilinear"}), G("rot30_u8"), 1.0, 0);
}

TEST(VisionAffine, MatchesTorchvision) {
  const Tensor x = G("x").narrow(0, 0, 1);
  for (const char* in : {"bilinear", "nearest"}) {
    SCOPED_TRACE(in);
    expect_close(vision::affine(x, 20, {2, -1}, 0.9, {10, 5}, {.interpolation = in}), G(std::string("affine_") + in),
                 2e-5, 1e-5);
  }
  expect_close(vision::affine(G("xu"), -12, {1, 3}, 1.2, {0, -8}, {.interpolation = "bilinear", .fill = 40}),
               G("affine_u8"), 1.0, 0);
  EXPECT_EQ(test::gradcheck(
                [](const std::vector<Tensor>& in) {
                  return vision::affine(in[0], 17, {0.5, 0}, 1.1, {3, 0}, {.interpolation = "bilinear"});
                },
                {test::rand_input({1, 1, 5, 6})}),
            "");
  EXPECT_EQ(vision::rotate(zeros({0, 3, 5, 5}), 10.0).shape(), (Shape{0, 3, 5, 5}));
  EXPECT_EQ(vision::rotate(zeros({1, 1, 0, 5}), 10.0).shape(), (Shape{1, 1, 0, 5}));
  expect_error([] { vision::affine(zeros({1, 1, 4, 4}), 0, {0, 0}, 0.0); }, "vision::affine", "scale");
  expect_error(
      [] {
        vision::rotate(zeros({1, 1, 4, 4}), 10, {.interpolation = "bicubic"});
      },
      "vision::rotate", "bicubic");
  expect_error([] { vision::rotate(zeros({4, 4}), 10); }, "vision::rotate", "[4, 4]");
}

TEST(VisionPerspective, MatchesOpenCV) {
  expect_close(vision::perspective_transform(P("src"), P("dst")), P("m"), 1e-9, 1e-9);
  for (const char* in : {"bilinear", "nearest"}) {
    SCOPED_TRACE(in);
    const std::string key = std::string("persp_") + in;
    // u8: OpenCV's fixed-point weights round differently by at most 1.
    expect_close(vision::warp_perspective(P("gray_u8"), P("m"), {14, 19}, in), P(key + "_u8"), 1.0, 0);
    expect_close(vision::warp_perspective(P("rgb_f"), P("m"), {4, 6}, in), P(key + "_f"), 1e-5);
  }
  expect_close(vision::warp_perspective(P("rgb_f"), P("m"), {4, 6}, "bilinear", true), P("persp_inverse_f"), 1e-5);
}

TEST(VisionPerspective, GradientEmptyAndBadInput) {
  const Tensor m = tensor<double>({1.1, 0.1, -0.5, 0.05, 0.9, 0.3, 0.01, -0.02, 1.0}, {3, 3});
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& in) {
                  return vision::warp_perspective(in[0], m, {4, 5});
                },
                {test::rand_input({1, 2, 5, 6})}),
            "");
  EXPECT_EQ(vision::warp_perspective(zeros({0, 1, 4, 4}), m, {3, 3}).shape(), (Shape{0, 1, 3, 3}));
  const char* op = "vision::warp_perspective";
  expect_error([&] { vision::warp_perspective(zeros({1, 1, 4, 4}), zeros({2, 3}), {3, 3}); }, op, "[2, 3]");
  expect_error([&] { vision::warp_perspective(zeros({1, 1, 4, 4}), m, {3, 3}, "area"); }, op, "area");
  const Tensor line = tensor<float>({0, 0, 1, 1, 2, 2, 3, 3}, {4, 2});
  expect_error([&] { vision::perspective_transform(line, line); }, "vision::perspective_transform", "degenerate");
  expect_error([&] { vision::perspective_transform(zeros({3, 2}), line); }, "vision::perspective_transform", "[3, 2]");
}

TEST(VisionNewOps, NonContiguousInputsGiveTheContiguousResult) {
  const Tensor x = rand({2, 3, 9, 11}).transpose(2, 3);  // [2, 3, 11, 9], a strided view
  ASSERT_FALSE(x.is_contiguous());
  const Tensor c = x.contiguous();
  EXPECT_TRUE(equal(vision::resize(x, {5, 4}, "bicubic"), vision::resize(c, {5, 4}, "bicubic")));
  EXPECT_TRUE(equal(vision::rotate(x, 20, {.interpolation = "bilinear"}),
                    vision::rotate(c, 20, {.interpolation = "bilinear"})));
  const Tensor m = tensor<double>({1.1, 0.1, -0.5, 0.05, 0.9, 0.3, 0.01, -0.02, 1.0}, {3, 3});
  EXPECT_TRUE(equal(vision::warp_perspective(x, m, {6, 7}), vision::warp_perspective(c, m, {6, 7})));
  EXPECT_TRUE(equal(vision::bilateral_filter(x, 5, 0.2, 2), vision::bilateral_filter(c, 5, 0.2, 2)));
  EXPECT_TRUE(equal(vision::rgb_to_lab(x), vision::rgb_to_lab(c)));
  const Tensor w = rand({4, 3, 3, 3}), off = rand({2, 18, 7, 9}).transpose(2, 3);
  EXPECT_TRUE(equal(vision::deform_conv2d(x, off, w), vision::deform_conv2d(c, off.contiguous(), w)));
}

}  // namespace
}  // namespace kiln
