// SPDX-License-Identifier: MIT OR Apache-2.0
// Unit tests for matmul, mm, bmm, mv, dot, outer, addmm, baddbmm, linear and einsum: shapes,
// values against a naive reference, strided/broadcast inputs without copies, errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

/// Naive reference for 2-d [M, K] x [K, N] in double.
std::vector<double> ref_mm(const Tensor& a, const Tensor& b) {
  auto va = a.contiguous().to_vector<double>(), vb = b.contiguous().to_vector<double>();
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += va[static_cast<size_t>(m * K + k)] * vb[static_cast<size_t>(k * N + n)];
      c[static_cast<size_t>(m * N + n)] = s;
    }
  return c;
}

void expect_near_vec(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
}

}  // namespace

TEST(Matmul, TwoDMatchesReference) {
  manual_seed(1);
  Tensor a = randn({5, 7}), b = randn({7, 3});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{5, 3}));
  expect_near_vec(c.to_vector<double>(), ref_mm(a, b), 1e-5);
  EXPECT_TRUE(a.matmul(b).equal(c));
  EXPECT_TRUE(mm(a, b).equal(c));
}

TEST(Matmul, RankCombinations) {
  manual_seed(2);
  Tensor v = randn({4}), w = randn({4});
  Tensor d = matmul(v, w);
  EXPECT_EQ(d.dim(), 0);
  double s = 0;
  auto vv = v.to_vector<double>(), vw = w.to_vector<double>();
  for (int i = 0; i < 4; ++i) s += vv[i] * vw[i];
  EXPECT_NEAR(d.item<double>(), s, 1e-5);
  EXPECT_EQ(matmul(randn({3, 4}), v).shape(), (Shape{3}));
  EXPECT_EQ(matmul(v, randn({4, 6})).shape(), (Shape{6}));
  EXPECT_EQ(matmul(v, randn({2, 4, 6})).shape(), (Shape{2, 6}));
  EXPECT_EQ(matmul(randn({2, 3, 4}), v).shape(), (Shape{2, 3}));
  EXPECT_EQ(matmul(randn({2, 1, 3, 4}), randn({5, 4, 6})).shape(), (Shape{2, 5, 3, 6}));
  EXPECT_EQ(matmul(randn({3, 4}), randn({2, 4, 6})).shape(), (Shape{2, 3, 6}));
  EXPECT_EQ(matmul(randn({2, 3, 4}), randn({4, 6})).shape(), (Shape{2, 3, 6}));
}

TEST(Matmul, BroadcastBatchMatchesSlices) {
  manual_seed(3);
  Tensor a = randn({2, 1, 3, 4}), b = randn({3, 4, 5});
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 3, 5}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      expect_near_vec(c.select(0, i).select(0, j).to_vector<double>(),
                      ref_mm(a.select(0, i).select(0, 0), b.select(0, j)), 1e-5);
}

TEST(Matmul, StridedInputs) {
  manual_seed(4);
  Tensor a = randn({6, 8}).t();                  // [8, 6] transposed
  Tensor b = randn({6, 10}).slice(1, 0, 10, 2);  // [6, 5] sliced
  expect_near_vec(matmul(a, b).to_vector<double>(), ref_mm(a, b), 1e-5);
  Tensor ab = randn({3, 8, 6}).transpose(1, 2).flip({0});  // [3, 6, 8]
  Tensor bb = randn({8, 2});
  Tensor c = matmul(ab, bb);
  for (int64_t i = 0; i < 3; ++i)
    expect_near_vec(c.select(0, i).to_vector<double>(), ref_mm(ab.select(0, i), bb), 1e-5);
}

TEST(Matmul, ExpandedBatchIsNotCopied) {
  manual_seed(5);
  Tensor a = randn({1, 64, 64}).expand({32, 64, 64});
  Tensor b = randn({32, 64, 64});
  const Device cpu = Device::cpu();
  Tensor c0 = matmul(a, b);  // warm the cache
  c0 = Tensor();
  reset_peak_memory(cpu);
  int64_t before = memory_stats(cpu).in_use;
  Tensor c = matmul(a, b);
  int64_t peak = memory_stats(cpu).peak - before;
  EXPECT_LE(peak, 32 * 64 * 64 * 4 + 4096);  // the output only
  expect_near_vec(c.select(0, 7).to_vector<double>(), ref_mm(a.select(0, 7), b.select(0, 7)), 1e-5);
  // The same with a 2-d b (a batch of rows a non-expanded a would fold into): still not copied.
  Tensor b2 = randn({64, 64});
  c = Tensor();
  reset_peak_memory(cpu);
  before = memory_stats(cpu).in_use;
  c = matmul(a, b2);
  EXPECT_LE(memory_stats(cpu).peak - before, 32 * 64 * 64 * 4 + 4096);
  expect_near_vec(c.select(0, 5).to_vector<double>(), ref_mm(a.select(0, 5), b2), 1e-5);
}

TEST(Matmul, EmptyDims) {
  Tensor z = matmul(ones({3, 0}), ones({0, 4}));
  EXPECT_EQ(z.shape(), (Shape{3, 4}));
  EXPECT_TRUE(z.equal(zeros({3, 4})));
  EXPECT_EQ(matmul(ones({0, 3}), ones({3, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(matmul(ones({2, 0, 3}), ones({3, 4})).shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(dot(ones({0}), ones({0})).item<float>(), 0.f);
}

TEST(Matmul, IntegerAndHalfDtypes) {
  Tensor a = arange(6, i32).reshape({2, 3}), b = arange(6, i32).reshape({3, 2});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), i32);
  EXPECT_EQ(c.to_vector<int>(), (std::vector<int>{10, 13, 28, 40}));
  Tensor h = matmul(a.to(f16), b.to(f16));
  EXPECT_EQ(h.dtype(), f16);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{10, 13, 28, 40}));
  EXPECT_EQ(matmul(a.to(bf16), b.to(bf16)).to_vector<float>(), (std::vector<float>{10, 13, 28, 40}));
  EXPECT_EQ(matmul(a.to(i64), b.to(i64)).dtype(), i64);
}

TEST(Matmul, Errors) {
  expect_error([] { matmul(ones({2, 3}), ones({3, 2}, {.dtype = f64})); }, "matmul", "same dtype");
  expect_error(
      [] {
        matmul(ones({2, 3}, {.dtype = kiln::bool_}), ones({3, 2}, {.dtype = kiln::bool_}));
      },
      "matmul", "bool");
  expect_error([] { matmul(scalar_tensor(1.f), ones({3})); }, "matmul", "at least 1D");
  expect_error([] { matmul(ones({2, 2, 3}), ones({4, 5})); }, "matmul", "2x3 and 4x5");
  expect_error([] { matmul(ones({2, 2, 3}), ones({3, 3, 4})); }, "matmul", "[2, 2, 3]");
  expect_error([] { matmul(ones({2, 3}), ones({4, 5})); }, "matmul", "2x3 and 4x5");
  expect_error([] { mm(ones({3}), ones({3, 2})); }, "mm", "matrix");
  expect_error([] { bmm(ones({2, 3}), ones({2, 3, 4})); }, "bmm", "3D");
  expect_error([] { bmm(ones({2, 3, 4}), ones({3, 4, 5})); }, "bmm", "[2, 4]");
  expect_error([] { dot(ones({3}), ones({4})); }, "dot", "[3]");
  expect_error([] { dot(ones({3, 1}), ones({3})); }, "dot", "1D");
  expect_error([] { mv(ones({3, 2}), ones({3})); }, "mv", "");
  expect_error([] { outer(ones({3, 1}), ones({3})); }, "outer", "1-D");
  expect_error([] { linear(ones({2, 3}), ones({4, 5})); }, "linear", "[4, 5]");
  expect_error([] { addmm(ones({4, 4}), ones({2, 3}), ones({3, 5})); }, "addmm", "[4, 4]");
}

TEST(Matmul, AddProducts) {
  manual_seed(6);
  Tensor in = randn({5}), m1 = randn({3, 4}), m2 = randn({4, 5});
  Tensor r = addmm(in, m1, m2, {.beta = 0.5, .alpha = 2});
  EXPECT_TRUE(r.allclose(in * 0.5 + mm(m1, m2) * 2, 1e-5, 1e-5));
  Tensor nan_in = full({3, 5}, std::nan(""));
  EXPECT_FALSE(addmm(nan_in, m1, m2, {.beta = 0}).isnan().any().item<bool>());
  Tensor bi = randn({2, 1, 5}), b1 = randn({2, 3, 4}), b2 = randn({2, 4, 5});
  EXPECT_TRUE(baddbmm(bi, b1, b2).allclose(bi + bmm(b1, b2), 1e-5, 1e-5));
  Tensor v = randn({4});
  EXPECT_TRUE(addmv(randn({3}) * 0, m1, v, {.alpha = 3}).allclose(mv(m1, v) * 3, 1e-5, 1e-5));
  Tensor ii = ones({3, 4}, {.dtype = i32});
  EXPECT_EQ(addmm(ii, ii, ones({4, 4}, {.dtype = i32}), {.beta = 0.5}).to_vector<int>()[0], 4);
}

TEST(Matmul, LinearUsesTransposedWeight) {
  manual_seed(7);
  Tensor x = randn({2, 3, 4}), w = randn({5, 4}), b = randn({5});
  Tensor y = linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
  EXPECT_TRUE(y.allclose(matmul(x, w.t().contiguous()) + b, 1e-5, 1e-5));
  EXPECT_EQ(nn::functional::linear(randn({4}), w).shape(), (Shape{5}));
  EXPECT_EQ(linear(randn({2, 4}), randn({4})).shape(), (Shape{2}));
}

TEST(Matmul, BiasIsPartOfTheProduct) {
  // linear with an [out] bias (and addmm with an [N] input) runs one MatMul that accumulates the
  // product onto the bias: against the f64 definition, over ranks, views, dtypes and empty dims.
  manual_seed(8);
  auto ref = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    const int64_t K = x.size(-1), N = w.size(0);
    Tensor x2 = x.reshape({-1, K});
    std::vector<double> r = ref_mm(x2, w.t()), vb = b.contiguous().to_vector<double>();
    for (size_t i = 0; i < r.size(); ++i) r[i] += vb[i % static_cast<size_t>(N)];
    return r;
  };
  for (DType dt : {f32, f64}) {
    const double tol = dt == f32 ? 1e-5 : 1e-12;
    auto t = [dt](const Shape& s) { return randn(s, {.dtype = dt}); };
    const Tensor w = t({5, 7}), b = t({5});
    struct Case {
      Tensor x, w, b;
    };
    const std::vector<Case> cases = {
        {t({7}), w, b},
        {t({3, 7}), w, b},
        {t({2, 3, 7}), w, b},
        {t({2, 2, 3, 7}), w, b},
        {t({7, 3}).t(), w, b},                                   // transposed input
        {t({3, 2, 7}).permute({1, 0, 2}), w, b},                 // batch that does not fold
        {t({3, 7}), t({7, 5}).t(), t({10}).slice(0, 0, 10, 2)},  // transposed weight, strided bias
        {t({300, 600}), t({40, 600}), t({40})},                  // long K: blocked accumulation
    };
    for (const Case& c : cases) {
      Tensor y = linear(c.x, c.w, c.b);
      Shape want = c.x.shape();
      want.back() = c.w.size(0);
      ASSERT_EQ(y.shape(), want);
      EXPECT_EQ(y.dtype(), dt);
      const double k_scale = std::max<double>(1.0, static_cast<double>(c.x.size(-1)) / 64);  // f32 sums of K terms
      expect_near_vec(y.contiguous().to_vector<double>(), ref(c.x, c.w, c.b), tol * k_scale);
    }
    Tensor in = t({5}), m1 = t({3, 7});
    expect_near_vec(addmm(in, m1, w.t()).to_vector<double>(), ref(m1, w, in), tol);
    // Empty rows, empty K (the bias alone), empty out.
    EXPECT_EQ(linear(t({0, 7}), w, b).shape(), (Shape{0, 5}));
    EXPECT_TRUE(linear(t({3, 0}), t({5, 0}), b).equal(b.expand({3, 5})));
    EXPECT_EQ(linear(t({3, 7}), t({0, 7}), t({0})).shape(), (Shape{3, 0}));
  }
  // NaN and inf in the bias pass through as a separate add would.
  Tensor bn = tensor({NAN, INFINITY, 1.f}, {3}), wn = randn({3, 2}), xn = randn({4, 2});
  Tensor yn = linear(xn, wn, bn);
  EXPECT_TRUE(yn.select(1, 0).isnan().all().item<bool>());
  EXPECT_TRUE(yn.select(1, 1).isinf().all().item<bool>());
  // A bias that is not [out] still broadcasts as an add (or fails naming linear).
  Tensor xb = randn({2, 3, 4}), wb = randn({5, 4}), bb = randn({3, 1});
  EXPECT_TRUE(linear(xb, wb, bb).allclose(matmul(xb, wb.t()) + bb, 1e-5, 1e-5));
  expect_error([&] { linear(xb, wb, randn({6})); }, "linear", "[6]");
  expect_error([&] { linear(xb, wb, randn({5}, {.dtype = f64})); }, "linear", "dtype");
}

TEST(Matmul, OuterAndDot) {
  Tensor a = tensor({1.f, 2.f, 3.f}), b = tensor({4.f, 5.f});
  Tensor o = outer(a, b);
  EXPECT_EQ(o.shape(), (Shape{3, 2}));
  EXPECT_EQ(o.to_vector<float>(), (std::vector<float>{4, 5, 8, 10, 12, 15}));
  EXPECT_EQ(a.dot(a).item<float>(), 14.f);
  EXPECT_EQ(a.outer(b).shape(), (Shape{3, 2}));
}

TEST(Matmul, SameResultWithOneAndTwoThreads) {
  manual_seed(8);
  Tensor a = randn({4, 96, 200}), b = randn({200, 130});
  Tensor r1 = kiln::test::with_threads(1, [&] { return matmul(a, b); });
  Tensor r2 = kiln::test::with_threads(2, [&] { return matmul(a, b); });
  EXPECT_TRUE(r1.equal(r2));
}

TEST(Einsum, MatchesMatmulAndReductions) {
  manual_seed(9);
  Tensor a = randn({3, 4}), b = randn({4, 5}), sq = randn({4, 4});
  EXPECT_TRUE(einsum("ij,jk->ik", {a, b}).allclose(mm(a, b), 1e-5, 1e-5));
  EXPECT_TRUE(einsum("ij,jk", {a, b}).allclose(mm(a, b), 1e-5, 1e-5));
  EXPECT_TRUE(einsum("ij->ji", {a}).equal(a.t()));
  EXPECT_TRUE(einsum("ii->i", {sq}).equal(sq.diagonal()));
  EXPECT_NEAR(einsum("ii", {sq}).item<float>(), sq.diagonal().sum().item<float>(), 1e-5);
  EXPECT_EQ(einsum("ij->", {a}).dim(), 0);
  Tensor x = randn({2, 3, 4}), y = randn({2, 4, 5});
  EXPECT_TRUE(einsum("bij,bjk->bik", {x, y}).allclose(bmm(x, y), 1e-5, 1e-5));
  EXPECT_TRUE(einsum("...ij,...jk", {x, b}).allclose(matmul(x, b), 1e-5, 1e-5));
  Tensor c = randn({5, 6});
  EXPECT_TRUE(einsum("ij,jk,kl->il", {a, b, c}).allclose(mm(mm(a, b), c), 1e-4, 1e-4));
  EXPECT_TRUE(einsum("i,j->ij", {a.select(0, 0), b.select(0, 0)}).allclose(outer(a.select(0, 0), b.select(0, 0))));
  EXPECT_EQ(einsum("Ab,bc", {a, b}).shape(), (Shape{3, 5}));
}

TEST(Einsum, Errors) {
  Tensor a = ones({3, 4}), b = ones({4, 5});
  expect_error([&] { einsum("ij,jk->ik", {a}); }, "einsum", "ij,jk->ik");
  expect_error([&] { einsum("ij->ik", {a}); }, "einsum", "output subscript k");
  expect_error([&] { einsum("ij,jk->ii", {a, b}); }, "einsum", "more than once");
  expect_error([&] { einsum("ij,ik->jk", {a, b}); }, "einsum", "does not broadcast");
  expect_error([&] { einsum("ijk->i", {a}); }, "einsum", "number of subscripts");
  expect_error([&] { einsum("i1->i", {a}); }, "einsum", "invalid subscript");
  expect_error([&] { einsum("i..j->i", {a}); }, "einsum", "ellipsis");
  expect_error([&] { einsum("ii->i", {a}); }, "einsum", "repeated");
  expect_error([&] { einsum("ij,jk", {a, b.to(f64)}); }, "einsum", "dtype");
  expect_error([&] { einsum("ij", {a, b}); }, "einsum", "more operands");
}

TEST(Einsum, ContractionUsesMatmulNotOuterProduct) {
  // An outer-product-then-sum evaluation would need 256 * 256 * 256 * 4 bytes = 64 MiB.
  manual_seed(10);
  Tensor a = randn({256, 256}), b = randn({256, 256});
  const Device cpu = Device::cpu();
  reset_peak_memory(cpu);
  int64_t before = memory_stats(cpu).in_use;
  Tensor c = einsum("ik,kj->ij", {a, b});
  EXPECT_LE(memory_stats(cpu).peak - before, 4 * 256 * 256 * 4);
  EXPECT_TRUE(c.allclose(mm(a, b), 1e-4, 1e-4));
}

TEST(Einsum, BoolOperands) {
  Tensor a = tensor({true, false, true, true}, {2, 2}), b = tensor({false, true, false, false}, {2, 2});
  EXPECT_EQ(einsum("ij,jk->ik", {a, b}).dtype(), bool_);
  EXPECT_EQ(einsum("ij,jk->ik", {a, b}).to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
}
