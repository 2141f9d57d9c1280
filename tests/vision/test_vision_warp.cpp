// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision affine warps against OpenCV (tests/data/vision/warp.safetensors).
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor W(const std::string& k) { return test::ref("warp", k); }

TEST(VisionWarp, RotationMatrixMatchesOpenCV) {
  expect_close(vision::rotation_matrix_2d(7.5, 5.0, 33.0, 0.8), W("rot"), 1e-12);
}

TEST(VisionWarp, AffineMatchesOpenCV) {
  for (const char* m : {"rot", "shear"})
    for (const char* in : {"bilinear", "nearest"}) {
      const std::string key = std::string("warp_") + m + "_" + in;
      SCOPED_TRACE(key);
      // u8: OpenCV's fixed-point weights round differently by at most 1.
      expect_close(vision::warp_affine(W("gray_u8"), W(m), {13, 19}, in), W(key + "_u8"), 1.0);
      expect_close(vision::warp_affine(W("rgb_f"), W(m), {8, 11}, in), W(key + "_f"), 1e-5);
    }
  expect_close(vision::warp_affine(W("rgb_f"), W("rot"), {8, 11}, "bilinear", true), W("warp_rot_inverse_f"), 1e-5);
  expect_close(vision::warp_affine(W("rgb_f"), W("shear"), {8, 11}, "bilinear", true), W("warp_shear_inverse_f"), 1e-5);
}

TEST(VisionWarp, GradientAndBadInput) {
  const Tensor m = tensor<double>({0.9, 0.2, 0.3, -0.1, 1.1, -0.4}, {2, 3});
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& in) {
                  return vision::warp_affine(in[0], m, {4, 5});
                },
                {test::rand_input({1, 2, 5, 6})}),
            "");
  EXPECT_EQ(vision::warp_affine(zeros({0, 1, 4, 4}), m, {3, 3}).shape(), (Shape{0, 1, 3, 3}));
  expect_error(
      [&] {
        vision::warp_affine(zeros({1, 1, 4, 4}), zeros({3, 3}), {3, 3});
      },
      "vision::warp_affine", "[3, 3]");
  expect_error([&] { vision::warp_affine(zeros({1, 1, 4, 4}), m, {3, 3}, "cubic"); }, "vision::warp_affine", "cubic");
}

}  // namespace
}  // namespace kiln
