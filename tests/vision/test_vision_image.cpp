// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision colour conversions and filters against OpenCV (tests/data/vision/color and
// filter.safetensors), their gradients, and bad input.
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor C(const std::string& k) { return test::ref("color", k); }
Tensor F(const std::string& k) { return test::ref("filter", k); }

TEST(VisionColor, MatchesOpenCV) {
  expect_close(vision::rgb_to_gray(C("rgb_f")), C("gray_of_rgb_f"));
  expect_close(vision::rgb_to_gray(C("rgb_u8")), C("gray_of_rgb_u8"), 0);
  EXPECT_EQ(vision::rgb_to_gray(C("rgb_u8")).dtype(), u8);
  expect_close(vision::rgb_to_hsv(C("rgb_f")), C("hsv_f"), 1e-4);
  expect_close(vision::hsv_to_rgb(C("hsv_f")), C("rgb_of_hsv_f"), 1e-5);
  expect_close(vision::rgb_to_yuv(C("rgb_f")), C("yuv_f"), 1e-5);
  expect_close(vision::yuv_to_rgb(C("yuv_f")), C("rgb_of_yuv_f"), 1e-5);
  expect_close(vision::rgb_to_bgr(C("rgb_u8")), C("bgr_u8"), 0);
  const Tensor g = C("gray_of_rgb_u8");
  expect_close(vision::gray_to_rgb(g), cat({g, g, g}, 1), 0);
}

TEST(VisionColor, BadInputNamesTheOp) {
  expect_error([] { vision::rgb_to_gray(zeros({1, 4, 2, 2})); }, "vision::rgb_to_gray", "[1, 4, 2, 2]");
  expect_error([] { vision::rgb_to_hsv(zeros({3, 2, 2})); }, "vision::rgb_to_hsv", "[3, 2, 2]");
  expect_error([] { vision::rgb_to_yuv(zeros({1, 3, 2, 2}, {.dtype = u8})); }, "vision::rgb_to_yuv", "u8");
}

TEST(VisionFilter, GaussianKernelMatchesOpenCV) {
  for (int k : {3, 5, 7}) {
    expect_close(vision::gaussian_kernel(k, 0), F("gk_" + std::to_string(k) + "_0"), 1e-7);
    expect_close(vision::gaussian_kernel(k, 1.3), F("gk_" + std::to_string(k) + "_13"), 1e-7);
  }
  expect_close(vision::gaussian_kernel(9, 0), F("gk_9_0"), 1e-7);
}

TEST(VisionFilter, SmoothingMatchesOpenCV) {
  for (const char* t : {"f", "u8"}) {
    SCOPED_TRACE(t);
    const std::string s = t;
    const Tensor x = F("gray_" + s);
    const double tol = s == "u8" ? 1.0 : 1e-5;  // OpenCV's u8 paths use fixed point
    expect_close(vision::gaussian_blur(x, {5, 3}, 1.2), F("gauss_5x3_" + s), tol);
    expect_close(vision::gaussian_blur(x, {7, 7}, 0), F("gauss_7x7_" + s), tol);
    expect_close(vision::box_filter(x, {3, 5}), F("box_3x5_" + s), tol);
    expect_close(vision::median_blur(x, 3), F("median_3_" + s), 0);
    expect_close(vision::median_blur(x, 5), F("median_5_" + s), 0);
    expect_close(vision::laplacian(x, 1), F("lap_1_" + s), 1e-4);
    expect_close(vision::laplacian(x, 3), F("lap_3_" + s), 1e-4);
  }
  expect_close(vision::gaussian_blur(F("rgb_f"), {5, 5}, 0.8), F("gauss_rgb_f"), 1e-5);
  expect_close(vision::box_filter(F("gray_f"), {3, 3}, false), F("boxsum_3x3_f"), 1e-5);
}

TEST(VisionFilter, SobelMatchesOpenCV) {
  for (auto [dx, dy, k] :
       std::vector<std::array<int, 3>>{{1, 0, 3}, {0, 1, 5}, {1, 1, 3}, {2, 0, 1}, {0, 2, 7}, {1, 0, 1}}) {
    const std::string key = "sobel_" + std::to_string(dx) + std::to_string(dy) + "_" + std::to_string(k);
    SCOPED_TRACE(key);
    expect_close(vision::sobel(F("gray_f"), dx, dy, k), F(key), 1e-4);
  }
  expect_close(vision::sobel(F("gray_u8"), 1, 0, 3, 0.5, 3), F("sobel_u8_10_3"), 1e-4);
}

TEST(VisionFilter, GradientsMatchFiniteDifferences) {
  const Tensor x = test::rand_input({1, 2, 5, 6});
  EXPECT_EQ(test::gradcheck(
                [](const std::vector<Tensor>& in) {
                  return vision::gaussian_blur(in[0], {3, 5}, 1.1);
                },
                {x}),
            "");
  EXPECT_EQ(test::gradcheck([](const std::vector<Tensor>& in) { return vision::sobel(in[0], 1, 1, 3); }, {x}), "");
  // With a gradient, median_blur runs as tensor ops: the same values as the host path.
  EXPECT_EQ(test::gradcheck([](const std::vector<Tensor>& in) { return vision::median_blur(in[0], 3); }, {x}), "");
  const Tensor xg = x.detach().require_grad();
  expect_close(vision::median_blur(xg, 5).detach(), vision::median_blur(x.detach(), 5), 0);
}

TEST(VisionFilter, EmptyBatchAndBadInput) {
  EXPECT_EQ(vision::gaussian_blur(zeros({0, 1, 5, 5}), {3, 3}, 1).shape(), (Shape{0, 1, 5, 5}));
  expect_error([] { vision::gaussian_blur(zeros({1, 5, 5}), {3, 3}, 1); }, "vision::gaussian_blur", "[1, 5, 5]");
  expect_error([] { vision::gaussian_blur(zeros({1, 1, 5, 5}), {4, 3}, 1); }, "vision::gaussian_blur", "odd");
  expect_error([] { vision::median_blur(zeros({1, 1, 5, 5}, {.dtype = i32}), 3); }, "vision::median_blur", "i32");
  expect_error([] { vision::sobel(zeros({1, 1, 5, 5}), 0, 0, 3); }, "vision::sobel", "dx 0, dy 0");
}

}  // namespace
}  // namespace kiln
