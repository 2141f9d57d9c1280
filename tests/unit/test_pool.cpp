// SPDX-License-Identifier: MIT OR Apache-2.0
// Pooling: error paths, index semantics, identities and thread-count independence (the values
// themselves are checked against PyTorch by the conformance suite).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <limits>

#include "test_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::expect_error;
using kiln::test::with_threads;

TEST(Pool, MaxPoolErrors) {
  Tensor x = randn({1, 2, 5, 5});
  expect_error([&] { F::max_pool2d(x, 3, {.padding = 2}); }, "max_pool2d", "pad should be at most half of kernel size");
  expect_error([&] { F::max_pool2d(x, 7); }, "max_pool2d", "too small");
  expect_error([&] { F::max_pool2d(x, 0); }, "max_pool2d", "kernel_size must be greater than zero");
  expect_error([&] { F::max_pool2d(x, 2, {.stride = 0}); }, "max_pool2d", "stride");
  expect_error([&] { F::max_pool2d(x, {1, 2, 3}); }, "max_pool2d", "kernel_size must have 1 or 2 values");
  expect_error([&] { F::max_pool2d(randn({5, 5}), 2); }, "max_pool2d", "3-d (unbatched) or 4-d");
  expect_error([&] { F::max_pool2d(zeros({1, 0, 5, 5}), 2); }, "max_pool2d", "non-empty");
  expect_error([&] { F::max_pool1d(zeros({2, 4}, {.dtype = DType::Bool}), 2); }, "max_pool1d", "dtype");
  expect_error([&] { F::max_pool3d(randn({2, 5, 5}), 2); }, "max_pool3d", "4-d (unbatched) or 5-d");
}

TEST(Pool, AvgPoolErrors) {
  Tensor x = randn({1, 2, 5, 5});
  expect_error([&] { F::avg_pool2d(x, 3, {.padding = 2}); }, "avg_pool2d", "pad should be at most half");
  expect_error([&] { F::avg_pool2d(x, 2, {.divisor_override = 0}); }, "avg_pool2d", "divisor must be not zero");
  expect_error([&] { F::avg_pool2d(x.to(DType::I32), 2); }, "avg_pool2d", "dtype");
  expect_error([&] { F::adaptive_avg_pool2d(x.to(DType::I64), 2); }, "adaptive_avg_pool2d", "float");
  expect_error([&] { F::adaptive_avg_pool2d(x, {1, 2, 3}); }, "adaptive_avg_pool2d", "output_size must have 1 or 2");
  expect_error([&] { F::adaptive_max_pool2d(x, -1); }, "adaptive_max_pool2d", "non-negative");
}

TEST(Pool, UnpoolErrors) {
  Tensor x = ones({1, 1, 2, 2});
  Tensor idx = tensor<int64_t>({0, 1, 2, 99}, {1, 1, 2, 2});
  expect_error([&] { F::max_unpool2d(x, idx, 2); }, "max_unpool2d", "Found an invalid max index: 99");
  Tensor ok = tensor<int64_t>({0, 1, 4, 5}, {1, 1, 2, 2});
  expect_error([&] { F::max_unpool2d(x, ok, 2, {.output_size = {6, 6}}); }, "max_unpool2d", "invalid output_size");
  expect_error([&] { F::max_unpool2d(x, ok.to(DType::I32), 2); }, "max_unpool2d", "i64");
  expect_error([&] { F::max_unpool2d(x, ok.reshape({1, 1, 4}), 2); }, "max_unpool2d", "shape");
}

TEST(Pool, MaxPoolIndicesSemantics) {
  // NaN wins, and with several NaNs the last one in the window's row-major order does.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = tensor<float>({1.f, nan, nan, 2.f}, {1, 1, 2, 2});
  auto [v, i] = F::max_pool2d_with_indices(y, 2);
  EXPECT_TRUE(std::isnan(v.item<float>()));
  EXPECT_EQ(i.item<int64_t>(), 2);
  // All -inf: the index is the window's first in-range element.
  const float inf = std::numeric_limits<float>::infinity();
  Tensor z = full({1, 1, 3, 3}, -inf);
  auto [vz, iz] = F::max_pool2d_with_indices(z, 2, {.padding = 1});
  EXPECT_EQ(iz.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 3, 4}));
  // Ties: the first maximum wins.
  Tensor t = ones({1, 1, 4, 4});
  auto [vt, it] = F::max_pool2d_with_indices(t, 2);
  EXPECT_EQ(it.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 8, 10}));
  // Unbatched input keeps its rank; indices are per plane.
  Tensor u = arange(0, 2 * 16, 1, DType::F32).reshape({2, 4, 4});
  auto [vu, iu] = F::max_pool2d_with_indices(u, 2);
  EXPECT_EQ(vu.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(iu.to_vector<int64_t>(), (std::vector<int64_t>{5, 7, 13, 15, 5, 7, 13, 15}));
}

TEST(Pool, UnpoolInvertsPool) {
  Tensor x = rand({2, 3, 8, 6}) + 0.5;  // positive: the zeros of the unpooled tensor never win
  auto [v, i] = F::max_pool2d_with_indices(x, 2);
  Tensor u = F::max_unpool2d(v, i, 2);
  EXPECT_EQ(u.shape(), x.shape());
  // The unpooled tensor re-pools to the same values.
  EXPECT_TRUE(F::max_pool2d(u, 2).equal(v));
  // And equals x where it is non-zero.
  Tensor nz = u.ne(Scalar(0));
  EXPECT_TRUE(u.masked_select(nz).equal(x.masked_select(nz)));
  // 1-d and 3-d forms.
  Tensor x1 = rand({2, 3, 9});
  auto [v1, i1] = F::max_pool1d_with_indices(x1, 3);
  EXPECT_EQ(F::max_unpool1d(v1, i1, 3).shape(), (Shape{2, 3, 9}));
  Tensor x3 = rand({1, 2, 4, 4, 4}) + 0.5;
  auto [v3, i3] = F::max_pool3d_with_indices(x3, 2);
  EXPECT_TRUE(F::max_pool3d(F::max_unpool3d(v3, i3, 2), 2).equal(v3));
}

TEST(Pool, Identities) {
  Tensor x = randn({2, 3, 6, 8});
  // Global pools agree with reductions.
  EXPECT_TRUE(F::adaptive_avg_pool2d(x, 1).allclose(x.mean({2, 3}, true), 1e-5, 1e-6));
  EXPECT_TRUE(F::adaptive_max_pool2d(x, 1).equal(x.amax({2, 3}, true)));
  // Adaptive with divisible sizes equals the plain pools.
  EXPECT_TRUE(F::adaptive_avg_pool2d(x, {3, 4}).allclose(F::avg_pool2d(x, 2), 1e-5, 1e-6));
  EXPECT_TRUE(F::adaptive_max_pool2d(x, {3, 4}).equal(F::max_pool2d(x, 2)));
  // A 1x1 window is the identity; None keeps a size.
  EXPECT_TRUE(F::max_pool2d(x, 1).equal(x));
  EXPECT_TRUE(F::avg_pool2d(x, 1).equal(x));
  EXPECT_EQ(F::adaptive_avg_pool2d(x, {std::nullopt, 2}).shape(), (Shape{2, 3, 6, 2}));
  // Non-contiguous inputs give the same result as their contiguous copy.
  Tensor xt = randn({2, 3, 8, 6}).transpose(2, 3);
  EXPECT_TRUE(F::max_pool2d(xt, 3, {.stride = 2, .padding = 1})
                  .equal(F::max_pool2d(xt.contiguous(), 3, {.stride = 2, .padding = 1})));
  EXPECT_TRUE(F::avg_pool2d(xt, 3, {.stride = 2, .padding = 1})
                  .equal(F::avg_pool2d(xt.contiguous(), 3, {.stride = 2, .padding = 1})));
  // Empty batch.
  EXPECT_EQ(F::max_pool2d(zeros({0, 3, 4, 4}), 2).shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(F::adaptive_avg_pool2d(zeros({0, 3, 4, 4}), 2).shape(), (Shape{0, 3, 2, 2}));
}

TEST(Pool, HalfAndIntDtypes) {
  Tensor x = randn({2, 3, 7, 7});
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor h = x.to(dt);
    Tensor r = F::max_pool2d(h, 3, {.stride = 2});
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_TRUE(r.to(DType::F32).equal(F::max_pool2d(h.to(DType::F32), 3, {.stride = 2})));
    EXPECT_TRUE(F::avg_pool2d(h, 2).to(DType::F32).allclose(F::avg_pool2d(h.to(DType::F32), 2), 1e-2, 1e-2));
  }
  Tensor xi = randint(-100, 100, {2, 2, 6, 6});
  EXPECT_TRUE(F::max_pool2d(xi, 2).equal(F::max_pool2d(xi.to(DType::F64), 2).to(DType::I64)));
  // i64 average pooling divides with truncation, as PyTorch.
  Tensor ai = tensor<int64_t>({-3, 0, 0, 0}, {1, 1, 2, 2});
  EXPECT_EQ(F::avg_pool2d(ai, 2).item<int64_t>(), 0);
  EXPECT_EQ(F::avg_pool2d(ai * 3, 2).item<int64_t>(), -2);
}

TEST(Pool, SameResultWithOneAndTwoThreads) {
  Tensor x = randn({4, 16, 33, 31});
  auto run = [&] {
    auto [mv, mi] = F::max_pool2d_with_indices(x, 3, {.stride = 2, .padding = 1});
    return std::vector<Tensor>{mv,
                               mi,
                               F::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}),
                               F::adaptive_avg_pool2d(x, {5, 7}),
                               F::adaptive_max_pool2d(x, 1),
                               F::max_unpool2d(mv, mi, 3, {.stride = 2, .padding = 1, .output_size = {33, 31}})};
  };
  auto a = with_threads(1, run);
  auto b = with_threads(2, run);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(a[k].equal(b[k])) << k;
}

}  // namespace
