// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision morphology, thresholds, histogram equalisation and connected components against
// OpenCV (tests/data/vision/morph, threshold and components.safetensors).
#include <kiln/vision.h>

#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor M(const std::string& k) { return test::ref("morph", k); }
Tensor T(const std::string& k) { return test::ref("threshold", k); }

TEST(VisionMorph, StructuringElementsMatchOpenCV) {
  for (const char* s : {"rect", "cross", "ellipse"})
    for (auto [h, w] : std::vector<std::pair<int, int>>{{5, 5}, {3, 5}, {7, 5}, {4, 6}}) {
      const std::string key = std::string("se_") + s + "_" + std::to_string(h) + "x" + std::to_string(w);
      SCOPED_TRACE(key);
      expect_close(vision::structuring_element(s, {h, w}), M(key), 0);
    }
}

TEST(VisionMorph, OpsMatchOpenCV) {
  for (const char* op : {"erode", "dilate", "open", "close", "gradient", "tophat", "blackhat"})
    for (const char* k : {"ellipse_5x5", "custom"})
      for (const char* t : {"f", "u8"}) {
        const std::string key = std::string(op) + "_" + k + "_" + t;
        SCOPED_TRACE(key);
        const Tensor y = vision::morphology(M(std::string("gray_") + t), op, M(std::string("se_") + k));
        EXPECT_EQ(y.dtype(), M(std::string("gray_") + t).dtype());
        expect_close(y, M(key), 1e-6);
      }
  expect_close(vision::dilate(M("gray_u8"), M("se_cross_3x5"), 2), M("dilate_cross_it2_u8"), 0);
}

TEST(VisionMorph, BadInputNamesTheOp) {
  expect_error([] { vision::erode(zeros({1, 1, 4, 4}), zeros({3})); }, "vision::erode", "[3]");
  expect_error([] { vision::morphology(zeros({1, 1, 4, 4}), "thin", ones({3, 3})); }, "vision::morphology", "thin");
  expect_error([] { vision::structuring_element("disk", {3, 3}); }, "vision::structuring_element", "disk");
}

TEST(VisionThreshold, MatchesOpenCV) {
  for (const char* t : {"binary", "binary_inv", "trunc", "tozero", "tozero_inv"}) {
    SCOPED_TRACE(t);
    expect_close(vision::threshold(T("gray_u8"), 100.5, 200, t), T(std::string("th_") + t + "_u8"), 0);
    expect_close(vision::threshold(T("gray_f"), 0.4, 0.9, t), T(std::string("th_") + t + "_f"), 1e-7);
  }
  auto [th, y] = vision::threshold_otsu(T("gray_u8"));
  expect_close(th, T("otsu_t"), 0);
  expect_close(y, T("otsu_u8"), 0);
  for (int bs : {5, 7})
    for (const char* t : {"binary", "binary_inv"}) {
      SCOPED_TRACE(std::to_string(bs) + t);
      expect_close(vision::adaptive_threshold_mean(T("gray_u8"), 255, bs, bs == 5 ? 2 : -3.5, t),
                   T("adaptive_" + std::to_string(bs) + "_" + t), 0);
    }
  expect_close(vision::equalize_hist(T("gray_u8")), T("eq_u8"), 0);
}

TEST(VisionThreshold, ConstantAndEmptyImages) {
  const Tensor flat = T("flat_u8");
  expect_close(vision::equalize_hist(flat), T("eq_flat"), 0);
  auto [th, y] = vision::threshold_otsu(flat);
  expect_close(th, T("otsu_flat_t"), 0);
  expect_close(y, T("otsu_flat"), 0);
  EXPECT_EQ(vision::equalize_hist(zeros({0, 1, 3, 3}, {.dtype = u8})).shape(), (Shape{0, 1, 3, 3}));
  expect_error([] { vision::threshold_otsu(zeros({1, 1, 3, 3})); }, "vision::threshold_otsu", "u8");
  expect_error(
      [] {
        vision::adaptive_threshold_mean(zeros({1, 1, 3, 3}, {.dtype = u8}), 255, 4, 0);
      },
      "vision::adaptive_threshold_mean", "block_size");
}

TEST(VisionComponents, MatchOpenCV) {
  const Tensor blobs = test::ref("components", "blobs");
  for (int conn : {4, 8}) {
    const std::vector<vision::Components> all = vision::connected_components_batch(blobs, conn);
    ASSERT_EQ(all.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const std::string s = std::to_string(i) + "_" + std::to_string(conn);
      SCOPED_TRACE(s);
      expect_close(all[size_t(i)].labels, test::ref("components", "labels_" + s), 0);
      expect_close(all[size_t(i)].stats, test::ref("components", "stats_" + s), 0);
      expect_close(all[size_t(i)].centroids, test::ref("components", "cents_" + s), 1e-12);
      EXPECT_EQ(all[size_t(i)].count, test::ref("components", "stats_" + s).size(0));
    }
  }
}

TEST(VisionComponents, EdgeCases) {
  // All background, and all foreground (the background's statistics are OpenCV's empty ones).
  for (const char* name : {"zeros", "ones"}) {
    SCOPED_TRACE(name);
    const std::string s = name;
    const vision::Components c = vision::connected_components(s == "ones" ? ones({3, 4}) : zeros({3, 4}));
    expect_close(c.labels, test::ref("components", "labels_" + s), 0);
    expect_close(c.stats, test::ref("components", "stats_" + s), 0);
    expect_close(c.centroids, test::ref("components", "cents_" + s), 1e-12);
  }
  // A diagonal pair: two components with 4-connectivity, one with 8.
  const Tensor d = tensor<float>({1, 0, 0, 1}, {1, 1, 2, 2});
  EXPECT_EQ(vision::connected_components(d, 4).count, 3);
  EXPECT_EQ(vision::connected_components(d, 8).count, 2);
  expect_error(
      [] {
        vision::connected_components(zeros({2, 1, 3, 3}));
      },
      "vision::connected_components", "[2, 1, 3, 3]");
  expect_error([] { vision::connected_components(zeros({3, 3}), 6); }, "vision::connected_components", "6");
}

}  // namespace
}  // namespace kiln
