// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision's bilateral filter and LAB conversions against OpenCV
// (tests/data/vision/bilateral.safetensors, lab.safetensors).
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor B(const std::string& k) { return test::ref("bilateral", k); }
Tensor L(const std::string& k) { return test::ref("lab", k); }

TEST(VisionBilateral, MatchesOpenCV) {
  struct Case {
    const char* name;
    double sigma_color;
  };
  for (const Case& c : {Case{"gray_u8", 40}, {"rgb_u8", 60}, {"gray_f", 0.15}, {"rgb_f", 0.3}}) {
    const bool bytes = std::string(c.name).ends_with("u8");
    // u8: OpenCV sums in another order before rounding, so a tie may round the other way.
    const double tol = bytes ? 1.0 : 1e-5;
    SCOPED_TRACE(c.name);
    expect_close(vision::bilateral_filter(B(c.name), 5, c.sigma_color, 3.0), B(std::string("bil_") + c.name + "_5"),
                 tol);
    expect_close(vision::bilateral_filter(B(c.name), -1, c.sigma_color, 1.5), B(std::string("bil_") + c.name + "_auto"),
                 tol);
    expect_close(vision::bilateral_filter(B(c.name), 8, c.sigma_color, 2.0), B(std::string("bil_") + c.name + "_8"),
                 tol);
  }
}

TEST(VisionBilateral, ThreadsBatchesAndRowWidths) {
  // Rows narrower than a vector (5), with a partial last vector (37), over two threads: the same
  // results as one thread, and each batch element as when filtered alone.
  for (const int64_t w : {5, 37}) {
    const Tensor x8 = test::rand_input({2, 3, 70, w}, 0, 256, 11).floor().to(u8), xf = x8.to(f32) / 255.0;
    const int saved = num_threads();
    set_num_threads(1);
    const Tensor one8 = vision::bilateral_filter(x8, 9, 75, 75), onef = vision::bilateral_filter(xf, 5, 0.3, 3);
    set_num_threads(2);
    const Tensor two8 = vision::bilateral_filter(x8, 9, 75, 75), twof = vision::bilateral_filter(xf, 5, 0.3, 3);
    set_num_threads(saved);
    EXPECT_TRUE(equal(two8, one8));
    EXPECT_TRUE(equal(twof, onef));
    EXPECT_TRUE(equal(vision::bilateral_filter(x8.slice(0, 1, 2), 9, 75, 75), one8.slice(0, 1, 2)));
    EXPECT_TRUE(equal(vision::bilateral_filter(xf.slice(0, 1, 2), 5, 0.3, 3), onef.slice(0, 1, 2)));
  }
}

TEST(VisionBilateral, ConstantEmptyAndBadInput) {
  const Tensor flat = full({1, 3, 5, 4}, 0.5);
  EXPECT_TRUE(equal(vision::bilateral_filter(flat, 5, 0.1, 2), flat));
  EXPECT_TRUE(equal(vision::bilateral_filter(zeros({1, 1, 6, 7}).to(u8), 5, 20, 2), zeros({1, 1, 6, 7}).to(u8)));
  EXPECT_EQ(vision::bilateral_filter(zeros({0, 1, 5, 5}), 5, 1, 1).shape(), (Shape{0, 1, 5, 5}));
  EXPECT_EQ(vision::bilateral_filter(rand({1, 1, 1, 1}), 5, 1, 1).shape(), (Shape{1, 1, 1, 1}));
  expect_error(
      [] {
        vision::bilateral_filter(zeros({1, 2, 5, 5}), 5, 1, 1);
      },
      "vision::bilateral_filter", "[1, 2, 5, 5]");
  expect_error(
      [] {
        vision::bilateral_filter(zeros({1, 1, 5, 5}).to(i32), 5, 1, 1);
      },
      "vision::bilateral_filter", "i32");
}

TEST(VisionLab, MatchesOpenCV) {
  // Exact against a plain implementation of OpenCV's formulas; OpenCV's own float path reads
  // an interpolated table, within 0.3 of them.
  expect_close(vision::rgb_to_lab(L("rgb_f")), L("lab_exact_f"), 2e-4, 1e-5);
  expect_close(vision::rgb_to_lab(L("rgb_f").to(f64)), L("lab_exact_f"), 1e-9, 1e-9);
  expect_close(vision::rgb_to_lab(L("rgb_f")), L("lab_f"), 0.3, 0);
  expect_close(vision::lab_to_rgb(L("lab_exact_f")), L("rgb_of_lab_exact_f"), 1e-9, 1e-9);
  expect_close(vision::lab_to_rgb(L("lab_f")), L("rgb_of_lab_f"), 1e-4, 1e-4);
  expect_close(vision::lab_to_rgb(vision::rgb_to_lab(L("rgb_f"))), L("rgb_f"), 1e-4, 1e-4);
  // u8: OpenCV's integer tables round within 1 of the exact conversion.
  expect_close(vision::rgb_to_lab(L("rgb_u8")), L("lab_u8"), 1.0, 0);
  expect_close(vision::lab_to_rgb(L("lab_u8")), L("rgb_of_lab_u8"), 1.0, 0);
}

TEST(VisionLab, GradientEmptyAndBadInput) {
  EXPECT_EQ(test::gradcheck([](const std::vector<Tensor>& in) { return vision::rgb_to_lab(in[0]); },
                            {test::rand_input({1, 3, 2, 3}, 0.1, 0.9)}),
            "");
  EXPECT_EQ(vision::rgb_to_lab(zeros({0, 3, 4, 4})).shape(), (Shape{0, 3, 4, 4}));
  expect_close(vision::rgb_to_lab(zeros({1, 3, 2, 2})), zeros({1, 3, 2, 2}), 1e-6);
  expect_error([] { vision::rgb_to_lab(zeros({1, 4, 2, 2})); }, "vision::rgb_to_lab", "3 channels");
  expect_error([] { vision::lab_to_rgb(zeros({1, 3, 2})); }, "vision::lab_to_rgb", "[1, 3, 2]");
}

}  // namespace
}  // namespace kiln
