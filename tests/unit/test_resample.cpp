// SPDX-License-Identifier: MIT OR Apache-2.0
// interpolate, grid_sample, affine_grid, pixel_shuffle: errors and identities (values against
// PyTorch are in the conformance suite).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "test_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::expect_error;
using kiln::test::with_threads;

TEST(Resample, InterpolateErrors) {
  Tensor x = randn({1, 2, 4, 5});
  expect_error([&] { F::interpolate(x, {.mode = "nearest"}); }, "interpolate", "either size or scale_factor");
  expect_error([&] { F::interpolate(x, {.size = 3, .scale_factor = 2.0}); }, "interpolate", "only one of size");
  expect_error([&] { F::interpolate(x, {.size = 3, .mode = "linear"}); }, "interpolate", "linear mode needs 3D input");
  expect_error([&] { F::interpolate(x, {.size = 3, .mode = "trilinear"}); }, "interpolate", "needs 5D");
  expect_error([&] { F::interpolate(x, {.size = 3, .mode = "cubic"}); }, "interpolate", "unknown mode");
  expect_error([&] { F::interpolate(x, {.size = 3, .mode = "nearest", .align_corners = true}); }, "interpolate",
               "align_corners option can only be set");
  expect_error([&] { F::interpolate(x, {.size = {2, 3, 4}}); }, "interpolate", "size must have 1 or 2");
  expect_error([&] { F::interpolate(x, {.scale_factor = 0.1}); }, "interpolate", "greater than 0");
  expect_error([&] { F::interpolate(x, {.size = 3, .recompute_scale_factor = true}); }, "interpolate",
               "recompute_scale_factor");
  expect_error([&] { F::interpolate(x.to(DType::I32), {.size = 3, .mode = "bilinear"}); }, "interpolate", "float");
  expect_error([&] { F::interpolate(randn({2, 3}), {.size = 3}); }, "interpolate", "3-d, 4-d or 5-d");
}

TEST(Resample, InterpolateIdentities) {
  Tensor x = randn({2, 3, 5, 7});
  // Same size: every mode returns the input (area = mean over 1x1 windows).
  for (const char* m : {"nearest", "nearest-exact", "bilinear", "area"})
    EXPECT_TRUE(F::interpolate(x, {.size = {5, 7}, .mode = m}).allclose(x, 1e-6, 1e-7)) << m;
  // Bilinear with align_corners reproduces the corners.
  Tensor y = F::interpolate(x, {.size = {9, 13}, .mode = "bilinear", .align_corners = true});
  EXPECT_TRUE(y.index({Slice{}, Slice{}, 0, 0}).allclose(x.index({Slice{}, Slice{}, 0, 0})));
  EXPECT_TRUE(y.index({Slice{}, Slice{}, -1, -1}).allclose(x.index({Slice{}, Slice{}, -1, -1})));
  // Nearest x2 repeats every element twice.
  Tensor n = F::interpolate(x, {.scale_factor = 2.0});
  EXPECT_TRUE(n.equal(x.repeat_interleave(2, 2).repeat_interleave(2, 3)));
  // Area equals adaptive average pooling; integer nearest works.
  EXPECT_TRUE(F::interpolate(x, {.size = {2, 3}, .mode = "area"}).equal(F::adaptive_avg_pool2d(x, {2, 3})));
  Tensor xi = randint(0, 200, {1, 1, 3, 3}, {.dtype = DType::U8});
  EXPECT_EQ(F::interpolate(xi, {.size = {6, 6}}).dtype(), DType::U8);
  // The result never aliases the input.
  Tensor same = F::interpolate(x, {.size = {5, 7}});
  EXPECT_FALSE(same.is_same_storage(x));
}

TEST(Resample, GridSampleAndAffineGrid) {
  Tensor x = randn({2, 3, 5, 6});
  // The identity affine grid with align_corners samples the input exactly.
  Tensor theta = tensor<float>({1, 0, 0, 0, 1, 0}, {1, 2, 3}).expand({2, 2, 3});
  for (bool ac : {true, false}) {
    Tensor g = F::affine_grid(theta, {2, 3, 5, 6}, ac);
    EXPECT_EQ(g.shape(), (Shape{2, 5, 6, 2}));
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      Tensor y = F::grid_sample(x, g, {.mode = mode, .align_corners = ac});
      EXPECT_TRUE(y.allclose(x, 1e-4, 1e-5)) << mode << " " << ac;
    }
  }
  Tensor theta3 = tensor<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, {1, 3, 4});
  Tensor x3 = randn({1, 2, 3, 4, 5});
  Tensor g3 = F::affine_grid(theta3, {1, 2, 3, 4, 5}, true);
  EXPECT_EQ(g3.shape(), (Shape{1, 3, 4, 5, 3}));
  EXPECT_TRUE(F::grid_sample(x3, g3, {.align_corners = true}).allclose(x3, 1e-4, 1e-5));
  expect_error([&] { F::grid_sample(x, randn({2, 4, 4, 3})); }, "grid_sample", "grid of shape");
  expect_error([&] { F::grid_sample(x, randn({2, 4, 4, 2}), {.mode = "area"}); }, "grid_sample", "unknown mode");
  expect_error(
      [&] {
        F::grid_sample(x, randn({2, 4, 4, 2}), {.padding_mode = "wrap"});
      },
      "grid_sample", "padding_mode");
  expect_error(
      [&] {
        F::grid_sample(x3, randn({1, 2, 2, 2, 3}), {.mode = "bicubic"});
      },
      "grid_sample", "bicubic interpolation only supports 4-d");
  expect_error([&] { F::grid_sample(x, randn({2, 4, 4, 2}, {.dtype = DType::F64})); }, "grid_sample", "one dtype");
  expect_error([&] { F::affine_grid(randn({2, 2, 3}), {2, 3, 4}); }, "affine_grid", "4-d and 5-d");
  expect_error([&] { F::affine_grid(randn({2, 3, 3}), {2, 3, 4, 5}); }, "affine_grid", "affine matrices");
}

TEST(Resample, PixelShuffle) {
  Tensor x = randn({2, 8, 3, 5});
  Tensor y = F::pixel_shuffle(x, 2);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 6, 10}));
  EXPECT_TRUE(F::pixel_unshuffle(y, 2).equal(x));
  EXPECT_TRUE(F::pixel_shuffle(F::pixel_unshuffle(y, 2), 2).equal(y));
  expect_error([&] { F::pixel_shuffle(randn({2, 5, 3, 3}), 2); }, "pixel_shuffle", "divisible");
  expect_error([&] { F::pixel_unshuffle(randn({2, 5, 3, 3}), 2); }, "pixel_unshuffle", "divisible");
  expect_error([&] { F::pixel_shuffle(randn({4, 3}), 2); }, "pixel_shuffle", "at least 3 dims");
}

TEST(Resample, SameResultWithOneAndTwoThreads) {
  Tensor x = randn({2, 8, 40, 44});
  Tensor grid = uniform({2, 30, 20, 2}, -1.2, 1.2);
  auto run = [&] {
    return std::vector<Tensor>{F::interpolate(x, {.size = {57, 31}, .mode = "bilinear"}),
                               F::interpolate(x, {.scale_factor = 1.5, .mode = "bicubic", .align_corners = true}),
                               F::grid_sample(x, grid, {.padding_mode = "reflection"})};
  };
  auto a = with_threads(1, run);
  auto b = with_threads(2, run);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(a[k].equal(b[k])) << k;
}

}  // namespace
