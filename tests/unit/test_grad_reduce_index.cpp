// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Reduce, Scan, Index and Movement families (ops.def): finite-difference
// gradcheck on contiguous, transposed, sliced and expanded inputs, gradgradcheck (second
// order), ties and zeros (amax/amin split evenly, prod/cumprod exact with zeros), every scatter
// reduction, every pad mode, composites common in models (logsumexp, norms, std, topk, max(dim),
// cross entropy, cat/stack/split/chunk, repeat/tile, advanced indexing) and differentiable slice
// assignment (Tensor::index_put_ on tracked tensors).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "grad_coverage.h"
#include "gradcheck.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::ad_device;
using kiln::test::gradcheck;
using kiln::test::gradgradcheck;
using kiln::test::rand_input;

KILN_GRAD_COVERED(reduce_index, "Sum", "Prod", "Mean", "Max", "Min", "Var", "CumSum", "CumProd", "CumMax", "CumMin",
                  "Sort", "Softmax", "LogSoftmax", "IndexSelect", "Gather", "Scatter", "IndexAdd", "IndexCopy", "Cat",
                  "Pad");

namespace {

using Vs = std::vector<Tensor>;

/// Distinct values (a shuffled grid 0.3 apart, shifted), so max/sort/cummax have no ties
/// within finite-difference reach. `shift` 0.1 also makes the absolute values distinct (the
/// grid is symmetric about 0 otherwise; which pairs share a row depends on std::shuffle).
Tensor distinct(const Shape& s, uint64_t seed, double shift = 0) {
  const int64_t n = shape_numel(s);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.3 * static_cast<double>(i) - 0.15 * n + shift;
  std::mt19937_64 g(seed);
  std::shuffle(v.begin(), v.end(), g);
  return tensor(v, s, ad_device());
}

/// Values of size in [lo, hi) with a random sign (away from 0, for prod / abs / division).
Tensor nonzero_input(const Shape& s, uint64_t seed, double lo = 0.5, double hi = 1.5) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::bernoulli_distribution b(0.5);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = b(g) ? u(g) : -u(g);
  return tensor(v, s, ad_device());
}

Tensor f64s(const std::vector<double>& v, const Shape& s) { return tensor(v, s, ad_device()); }
Tensor idx(const std::vector<int64_t>& v, const Shape& s) { return tensor(v, s, ad_device()); }
Tensor idx(const std::vector<int64_t>& v) { return idx(v, {static_cast<int64_t>(v.size())}); }

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-9) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

}  // namespace

// ---- Reduce ----------------------------------------------------------------------------------

TEST(GradReduce, SumAndMean) {
  for (bool keep : {false, true}) {
    for (Dims dims : {Dims{1}, Dims{0, 2}, Dims{}, Dims{-1}}) {
      EXPECT_EQ(gradcheck([&](const Vs& v) { return sum(v[0], dims, keep); }, {rand_input({2, 3, 4})}), "");
      EXPECT_EQ(gradcheck([&](const Vs& v) { return mean(v[0], dims, keep); }, {rand_input({2, 3, 4})}), "");
    }
  }
  // Transposed, sliced and expanded inputs.
  EXPECT_EQ(gradcheck([](const Vs& v) { return sum(v[0].transpose(0, 1), {0}); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return mean(v[0].slice(1, 0, 4, 2), {1}, true); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return sum(v[0].unsqueeze(0).expand({3, 2, 4}), {0, 2});
                },
                {rand_input({2, 4})}),
            "");
  // 0-d input.
  EXPECT_EQ(gradcheck([](const Vs& v) { return sum(v[0]) * mean(v[0]); }, {rand_input({})}), "");
  // Second order.
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return sum(v[0] * v[0] * v[0], {1}); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return mean(v[0] * v[0] * v[1], {0}, true); },
                          {rand_input({3, 2}), rand_input({2}, -1, 1, 5)}),
            "");
}

TEST(GradReduce, Prod) {
  for (bool keep : {false, true})
    for (Dims dims : {Dims{1}, Dims{0, 2}, Dims{}})
      EXPECT_EQ(gradcheck([&](const Vs& v) { return prod(v[0], dims, keep); }, {nonzero_input({2, 3, 4}, 3)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return prod(v[0].transpose(0, 1), {1}); }, {nonzero_input({3, 4}, 4)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return prod(v[0]); }, {rand_input({})}), "");
  // Zeros: none, one and two zeros per reduced group.
  Tensor z = f64s({0.5, 0.0, 2.0, -1.5,   //
                   0.0, 0.0, 1.2, 0.7,    //
                   1.1, -0.8, 0.9, 1.3},  //
                  {3, 4});
  EXPECT_EQ(gradcheck([](const Vs& v) { return prod(v[0], {1}); }, {z}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return prod(v[0], {0}); }, {z}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return prod(v[0]); }, {z}), "");
  // The exact values at zeros: d/dx0 of x0 * x1 * x2 with x0 = 0 is x1 * x2.
  Tensor x = f64s({0.0, 2.0, 3.0}, {3}).require_grad();
  Gradients g = prod(x).backward();
  expect_near(values(x.grad(g)), {6.0, 0.0, 0.0});
  Tensor y = f64s({0.0, 2.0, 0.0}, {3}).require_grad();
  g = prod(y).backward();
  expect_near(values(y.grad(g)), {0.0, 0.0, 0.0});
  // Second order, also with zeros.
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return prod(v[0], {1}); }, {nonzero_input({2, 4}, 6)}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return prod(v[0], {1}); }, {z}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return prod(v[0], {0, 1}, true); }, {z}), "");
}

TEST(GradReduce, AmaxAmin) {
  for (bool keep : {false, true})
    for (Dims dims : {Dims{1}, Dims{0, 2}, Dims{}}) {
      EXPECT_EQ(gradcheck([&](const Vs& v) { return amax(v[0], dims, keep); }, {distinct({2, 3, 4}, 1)}), "");
      EXPECT_EQ(gradcheck([&](const Vs& v) { return amin(v[0], dims, keep); }, {distinct({2, 3, 4}, 2)}), "");
    }
  EXPECT_EQ(gradcheck([](const Vs& v) { return amax(v[0].transpose(0, 1), {1}); }, {distinct({3, 4}, 3)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return max(v[0]) + min(v[0]); }, {distinct({3, 4}, 4)}), "");
  EXPECT_EQ(
      gradcheck([](const Vs& v) { return max(v[0], 1).first + min(v[0], 0, true).first.sum(); }, {distinct({3, 4}, 5)}),
      "");
  // Ties split the gradient evenly (PyTorch's amax/amin).
  Tensor x = f64s({1, 3, 3, 2, -1, -1}, {2, 3}).require_grad();
  Gradients g = (amax(x, {}) + amin(x, {1}).sum()).backward();
  expect_near(values(x.grad(g)), {1, 0.5, 0.5, 0, 0.5, 0.5});
  // Second order (the mask is constant: exercises the rule under create_graph).
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return amax(v[0] * v[0] * v[0], {1}); }, {distinct({3, 4}, 6)}), "");
}

TEST(GradReduce, VarStd) {
  for (double corr : {0.0, 1.0, 2.0})
    for (bool keep : {false, true})
      for (Dims dims : {Dims{1}, Dims{0, 2}, Dims{}}) {
        EXPECT_EQ(gradcheck([&](const Vs& v) { return var(v[0], dims, corr, keep); }, {rand_input({2, 3, 4})}), "");
        EXPECT_EQ(gradcheck([&](const Vs& v) { return kiln::std(v[0], dims, corr, keep); }, {rand_input({2, 3, 4})}),
                  "");
      }
  EXPECT_EQ(gradcheck([](const Vs& v) { return kiln::std(v[0].transpose(0, 1), {0}); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  auto [vr, mn] = var_mean(v[0], {1}, 1, true);
                  return vr * mn;
                },
                {rand_input({3, 4})}),
            "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return var(v[0], {1}); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return kiln::std(v[0], {0}, 0); }, {rand_input({3, 4})}), "");
  // std of a constant line: gradient 0, not NaN (PyTorch's masked std_backward).
  Tensor c = f64s({2, 2, 2}, {3}).require_grad();
  Gradients g = kiln::std(c).backward();
  expect_near(values(c.grad(g)), {0, 0, 0});
}

TEST(GradReduce, NonDifferentiable) {
  Tensor x = rand_input({3, 4}).require_grad();
  EXPECT_FALSE(argmax(x, 1).requires_grad());
  EXPECT_FALSE(argmin(x).requires_grad());
  EXPECT_FALSE(any(gt(x, 0)).requires_grad());
  EXPECT_FALSE(all(x, {1}).requires_grad());
  EXPECT_FALSE(max(x, 0).second.requires_grad());
  EXPECT_FALSE(sort(x, 1).second.requires_grad());
}

TEST(GradReduce, Composites) {
  EXPECT_EQ(gradcheck([](const Vs& v) { return logsumexp(v[0], {1}); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return logsumexp(v[0].transpose(0, 1), {0, 1}, true);
                },
                {rand_input({3, 4})}),
            "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return logsumexp(v[0], {0}); }, {rand_input({3, 4})}), "");
  for (double p : {2.0, 1.0, 3.0}) {
    EXPECT_EQ(gradcheck([&](const Vs& v) { return norm(v[0], p, {1}); }, {nonzero_input({3, 4}, 7)}), "") << p;
    EXPECT_EQ(gradcheck([&](const Vs& v) { return norm(v[0], p); }, {nonzero_input({3, 4}, 8)}), "") << p;
  }
  EXPECT_EQ(gradcheck([](const Vs& v) { return norm(v[0], INFINITY, {0}); }, {distinct({3, 4}, 9, 0.1)}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return norm(v[0], 2, {1}); }, {nonzero_input({3, 4}, 10)}), "");
  // Mean / var / std over dims, as in normalisation layers.
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor m = mean(v[0], {1}, true);
                  Tensor s = kiln::std(v[0], {1}, 0, true);
                  return (v[0] - m) / (s + 1e-3);
                },
                {rand_input({3, 5})}),
            "");
  // topk and kthvalue values, median.
  EXPECT_EQ(gradcheck([](const Vs& v) { return topk(v[0], 2, 1).first; }, {distinct({3, 5}, 11)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return topk(v[0], 3, 0, false).first; }, {distinct({4, 3}, 12)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return kthvalue(v[0], 2, 1).first; }, {distinct({3, 5}, 13)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return median(v[0], 0).first; }, {distinct({5, 3}, 14)}), "");
  // Cross-entropy-like pipeline: log_softmax + gather of the targets + mean.
  Tensor target = idx({2, 0, 3}, {3, 1});
  EXPECT_EQ(
      gradcheck([&](const Vs& v) { return -mean(gather(log_softmax(v[0], 1), 1, target)); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(
      gradgradcheck([&](const Vs& v) { return -mean(gather(log_softmax(v[0], 1), 1, target)); }, {rand_input({3, 4})}),
      "");
}

// ---- Scan ------------------------------------------------------------------------------------

TEST(GradScan, CumSum) {
  for (int64_t d : {0, 1, -1})
    EXPECT_EQ(gradcheck([&](const Vs& v) { return cumsum(v[0], d); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cumsum(v[0].transpose(0, 1), 0); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cumsum(v[0], 0); }, {rand_input({})}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return cumsum(v[0] * v[0], 1); }, {rand_input({2, 3})}), "");
}

TEST(GradScan, CumProd) {
  for (int64_t d : {0, 1})
    EXPECT_EQ(gradcheck([&](const Vs& v) { return cumprod(v[0], d); }, {nonzero_input({3, 4}, 20)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cumprod(v[0].transpose(0, 1), 1); }, {nonzero_input({3, 4}, 21)}), "");
  // Zeros: one, two, at the start, at the end of a line.
  Tensor z = f64s({0.5, 0.0, 2.0, -1.5, 0.9,  //
                   0.0, 1.1, 0.0, 0.7, 1.2,   //
                   1.1, -0.8, 0.9, 1.3, 0.0},
                  {3, 5});
  EXPECT_EQ(gradcheck([](const Vs& v) { return cumprod(v[0], 1); }, {z}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cumprod(v[0], 0); }, {z}), "");
  // Second order: exact for lines with at most one zero.
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return cumprod(v[0], 1); }, {nonzero_input({2, 4}, 22)}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return cumprod(v[0], 1); },
                          {f64s({0.5, 0.0, 2.0, -1.5, 1.1, -0.8, 0.9, 0.0}, {2, 4})}),
            "");
}

TEST(GradScan, CumMaxCumMinSort) {
  EXPECT_EQ(gradcheck([](const Vs& v) { return cummax(v[0], 1).first; }, {distinct({3, 5}, 30)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cummin(v[0], 0).first; }, {distinct({4, 3}, 31)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cummax(v[0].transpose(0, 1), 0).first; }, {distinct({3, 4}, 32)}), "");
  for (bool desc : {false, true})
    for (int64_t d : {0, 1})
      EXPECT_EQ(gradcheck([&](const Vs& v) { return sort(v[0], d, desc).first; }, {distinct({3, 4}, 33)}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return sort(v[0].transpose(0, 1), 1).first; }, {distinct({3, 4}, 34)}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return sort(v[0] * v[0] * v[0], 1).first; }, {distinct({2, 4}, 35)}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return cummax(v[0] * v[0] * v[0], 1).first; }, {distinct({2, 4}, 36)}), "");
}

TEST(GradScan, SoftmaxLogSoftmax) {
  for (int64_t d : {0, 1, -1}) {
    EXPECT_EQ(gradcheck([&](const Vs& v) { return softmax(v[0], d); }, {rand_input({3, 4})}), "");
    EXPECT_EQ(gradcheck([&](const Vs& v) { return log_softmax(v[0], d); }, {rand_input({3, 4})}), "");
  }
  EXPECT_EQ(gradcheck([](const Vs& v) { return softmax(v[0].transpose(0, 1), 1); }, {rand_input({3, 4})}), "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return log_softmax(v[0].unsqueeze(0).expand({2, 3, 4}), 0);
                },
                {rand_input({3, 4})}),
            "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return softmax(v[0], 0) + log_softmax(v[0], 0); }, {rand_input({})}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return softmax(v[0], 1); }, {rand_input({2, 4})}), "");
  EXPECT_EQ(gradgradcheck([](const Vs& v) { return log_softmax(v[0], 0); }, {rand_input({3, 2})}), "");
}

// ---- Index -----------------------------------------------------------------------------------

TEST(GradIndex, IndexSelect) {
  Tensor i = idx({2, 0, 2, 1});  // duplicates sum
  for (int64_t d : {0, 1})
    EXPECT_EQ(gradcheck([&](const Vs& v) { return index_select(v[0], d, i); }, {rand_input({3, 3})}), "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return index_select(v[0].transpose(0, 1), 0, i); }, {rand_input({4, 3})}), "");
  EXPECT_EQ(gradcheck(
                [&](const Vs& v) {
                  return embedding(idx({1, 0, 1, 2}, {2, 2}), v[0]);
                },
                {rand_input({3, 2})}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return take(v[0], idx({-1, 0, 5}, {3})); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradgradcheck([&](const Vs& v) { return index_select(v[0] * v[0], 1, i); }, {rand_input({2, 3})}), "");
}

TEST(GradIndex, Gather) {
  Tensor i = idx({0, 2, 2, 1, 0, 0}, {2, 3});
  EXPECT_EQ(gradcheck([&](const Vs& v) { return gather(v[0], 1, i); }, {rand_input({2, 4})}), "");
  EXPECT_EQ(gradcheck(
                [&](const Vs& v) {
                  return gather(v[0], 0, idx({0, 1, 1, 0, 0, 1}, {2, 3}));
                },
                {rand_input({3, 4})}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return gather(v[0].transpose(0, 1), 1, i); }, {rand_input({4, 3})}), "");
  EXPECT_EQ(gradcheck(
                [&](const Vs& v) {
                  return take_along_dim(v[0], idx({1, 0, 2}, {3, 1}), 1);
                },
                {rand_input({3, 3})}),
            "");
  EXPECT_EQ(gradgradcheck([&](const Vs& v) { return gather(v[0] * v[0], 1, i); }, {rand_input({2, 4})}), "");
}

TEST(GradIndex, ScatterNoneAndAdd) {
  // No duplicate positions for plain scatter (duplicates overwrite: PyTorch's gradient is
  // unspecified there). src larger than index: only the index-shaped block is read.
  Tensor i = idx({1, 0, 2, 2, 1, 0}, {2, 3});
  EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter(v[0], 0, i, v[1]); },
                      {rand_input({3, 3}), rand_input({3, 4}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter(v[0].transpose(0, 1), 0, i, v[1]); },
                      {rand_input({3, 3}), rand_input({2, 3}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter(v[0], 1, i, 2.5); }, {rand_input({2, 3})}), "");
  Tensor dup = idx({0, 0, 1, 0, 0, 0}, {2, 3});
  EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter_add(v[0], 0, dup, v[1]); },
                      {rand_input({2, 3}), rand_input({2, 4}, -1, 1, 3)}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter(v[0], 1, dup, v[1], "add"); },
                      {rand_input({2, 3}), rand_input({2, 3}, -1, 1, 3)}),
            "");
  EXPECT_EQ(gradgradcheck([&](const Vs& v) { return scatter(v[0] * v[0], 0, i, v[1] * v[0].narrow(0, 0, 2)); },
                          {rand_input({3, 3}), rand_input({2, 3}, -1, 1, 4)}),
            "");
}

TEST(GradIndex, ScatterReduce) {
  Tensor dup = idx({0, 2, 0, 0, 1, 2}, {2, 3});  // along dim 1 of a [2, 3] x
  for (bool self : {true, false}) {
    for (const char* how : {"sum", "mean"}) {
      EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter_reduce(v[0], 1, dup, v[1], how, self); },
                          {rand_input({2, 3}), rand_input({2, 4}, -1, 1, 5)}),
                "")
          << how << self;
      EXPECT_EQ(gradgradcheck([&](const Vs& v) { return scatter_reduce(v[0] * v[0], 1, dup, v[1] * v[1], how, self); },
                              {rand_input({2, 3}), rand_input({2, 3}, -1, 1, 5)}),
                "")
          << how << self;
    }
    for (const char* how : {"amax", "amin"}) {
      Tensor a = distinct({2, 3}, 40), b = distinct({2, 3}, 41) + 0.1;  // no ties between or within
      EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter_reduce(v[0], 1, dup, v[1], how, self); }, {a, b}), "")
          << how << self;
    }
    EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter_reduce(v[0], 1, dup, v[1], "prod", self); },
                        {nonzero_input({2, 3}, 42), nonzero_input({2, 3}, 43)}),
              "")
        << self;
    // Zeros in x and in src (a single zero in a group, and two).
    Tensor x0 = f64s({0.0, 1.5, -0.7, 1.2, 0.0, 0.8}, {2, 3});
    Tensor s0 = f64s({0.0, 0.9, 1.1, 0.0, -1.3, 0.0}, {2, 3});
    EXPECT_EQ(gradcheck([&](const Vs& v) { return scatter_reduce(v[0], 1, dup, v[1], "prod", self); }, {x0, s0}), "")
        << self;
  }
  // Ties in amax split evenly between x and src.
  Tensor x = f64s({1, 5}, {2}).require_grad();
  Tensor s = f64s({3, 5, 2}, {3}).require_grad();
  Gradients g = scatter_reduce(x, 0, idx({1, 1, 0}), s, "amax").sum().backward();
  expect_near(values(x.grad(g)), {0, 0.5});
  expect_near(values(s.grad(g)), {0, 0.5, 1});
}

TEST(GradIndex, IndexAddIndexCopy) {
  Tensor i = idx({2, 0, 2});
  EXPECT_EQ(gradcheck([&](const Vs& v) { return index_add(v[0], 0, i, v[1], 0.5); },
                      {rand_input({3, 2}), rand_input({3, 2}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return index_add(v[0].transpose(0, 1), 1, i, v[1]); },
                      {rand_input({3, 2}), rand_input({2, 3}, -1, 1, 2)}),
            "");
  Tensor u = idx({2, 0});
  EXPECT_EQ(gradcheck([&](const Vs& v) { return index_copy(v[0], 1, u, v[1]); },
                      {rand_input({2, 3}), rand_input({2, 2}, -1, 1, 3)}),
            "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return index_fill(v[0], 0, u, -1.0); }, {rand_input({3, 2})}), "");
  EXPECT_EQ(gradgradcheck([&](const Vs& v) { return index_add(v[0] * v[0], 0, i, v[1] * v[1]); },
                          {rand_input({3, 2}), rand_input({3, 2}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradgradcheck([&](const Vs& v) { return index_copy(v[0] * v[0], 1, u, v[1] * v[1]); },
                          {rand_input({2, 3}), rand_input({2, 2}, -1, 1, 3)}),
            "");
}

TEST(GradIndex, AdvancedIndexing) {
  Tensor i = idx({2, 0, 2});
  EXPECT_EQ(gradcheck([&](const Vs& v) { return v[0].index({i}); }, {rand_input({3, 2})}), "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return v[0].index({Slice{}, i, 1}); }, {rand_input({2, 3, 2})}), "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return v[0].index({i, idx({1, 0, 1})}); }, {rand_input({3, 2})}), "");
  EXPECT_EQ(gradcheck(
                [&](const Vs& v) {
                  return v[0].index({Slice{1, 3}, None, Ellipsis, 0});
                },
                {rand_input({3, 2, 2})}),
            "");
  Tensor mask = tensor<bool>({true, false, true, true, false, true}, {2, 3}, ad_device());
  EXPECT_EQ(gradcheck([&](const Vs& v) { return v[0].index({mask}); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return masked_select(v[0], mask); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradcheck([&](const Vs& v) { return index_put(v[0], {i}, v[1], true); },
                      {rand_input({3, 2}), rand_input({3, 2}, -1, 1, 4)}),
            "");
}

// ---- Movement --------------------------------------------------------------------------------

TEST(GradMovement, CatStackSplit) {
  for (int64_t d : {0, 1})
    EXPECT_EQ(gradcheck(
                  [&](const Vs& v) {
                    return cat({v[0], v[1].transpose(0, 1), v[0]}, d);
                  },
                  {rand_input({2, 2}), rand_input({2, 2}, -1, 1, 2)}),
              "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return cat({v[0], v[1]}, 1);
                },
                {rand_input({2, 1}), rand_input({2, 3}, -1, 1, 3)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return stack({v[0], v[1], v[0] * v[1]}, 1);
                },
                {rand_input({2, 3}), rand_input({2, 3}, -1, 1, 4)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return hstack({v[0], v[1]}) + vstack({v[1], v[0]}).reshape({6});
                },
                {rand_input({3}), rand_input({3}, -1, 1, 5)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  auto parts = split(v[0], 2, 1);
                  auto ch = chunk(v[0], 2, 0);
                  auto ub = unbind(v[0], 0);
                  return parts[0].sum() * parts[1].sum() + parts[2].sum() + (ch[0] * ch[0]).sum() + ub[1].prod();
                },
                {rand_input({2, 5})}),
            "");
  EXPECT_EQ(gradgradcheck(
                [](const Vs& v) {
                  return cat({v[0] * v[0], v[1] * v[1]}, 0);
                },
                {rand_input({2, 2}), rand_input({3, 2}, -1, 1, 6)}),
            "");
}

TEST(GradMovement, Pad) {
  for (const char* mode : {"constant", "reflect", "replicate", "circular"}) {
    EXPECT_EQ(gradcheck([&](const Vs& v) { return pad(v[0], {2, 1}, mode, 0.5); }, {rand_input({2, 4})}), "") << mode;
    EXPECT_EQ(gradcheck(
                  [&](const Vs& v) {
                    return pad(v[0], {1, 2, 2, 0}, mode);
                  },
                  {rand_input({2, 3, 4})}),
              "")
        << mode;
    EXPECT_EQ(gradcheck(
                  [&](const Vs& v) {
                    return pad(v[0].transpose(1, 2), {0, 2, 1, 1}, mode);
                  },
                  {rand_input({1, 4, 3})}),
              "")
        << mode;
    EXPECT_EQ(gradgradcheck(
                  [&](const Vs& v) {
                    return pad(v[0] * v[0], {1, 2}, mode);
                  },
                  {rand_input({2, 3})}),
              "")
        << mode;
  }
  // Circular pads as large as the dim; constant negative pads crop.
  EXPECT_EQ(gradcheck([](const Vs& v) { return pad(v[0], {3, 3}, "circular"); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return pad(v[0], {-1, 2, 1, -2}, "constant", 1.0);
                },
                {rand_input({4, 4})}),
            "");
  // The reflect gradient sums the reflected copies: pad [a, b, c] by (2, 2) -> [c, b, a, b, c, b, a].
  Tensor x = f64s({1, 2, 3}, {3}).require_grad();
  Gradients g = pad(x, {2, 2}, "reflect").sum().backward();
  expect_near(values(x.grad(g)), {2, 3, 2});
}

TEST(GradMovement, RepeatTileFlipRoll) {
  EXPECT_EQ(gradcheck([](const Vs& v) { return repeat(v[0], {2, 1, 3}); }, {rand_input({2, 2})}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return tile(v[0].transpose(0, 1), {2}); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return repeat_interleave(v[0], 2, 1); }, {rand_input({2, 3})}), "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return roll(v[0], {1, -2}, {0, 1}) * flip(v[0], {1});
                },
                {rand_input({2, 3})}),
            "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return broadcast_to(v[0], {2, 3}) * meshgrid({v[0], v[0]})[0].narrow(0, 0, 2);
                },
                {rand_input({3})}),
            "");
}

// ---- Slice assignment ------------------------------------------------------------------------

TEST(GradIndexPut, BasicSlices) {
  // Writes into a tracked non-leaf tensor: the old values lose their gradient where written,
  // the written values get it.
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor y = v[0] * 2;
                  y.index_put_({Slice{1, 3}, Slice{}}, v[1]);
                  return y.exp();
                },
                {rand_input({4, 3}), rand_input({2, 3}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor y = v[0].exp() * 1.0;                    // not exp's own output: exp saves it
                  y.index_put_({Slice{}, Slice{0, 3, 2}}, v[1]);  // stepped, value broadcast
                  y.index_put_({0, 1}, v[1].sum());               // a second write into the same tensor
                  return y * y;
                },
                {rand_input({3, 3}), rand_input({3, 1}, -1, 1, 3)}),
            "");
  Tensor x = rand_input({3, 4}).require_grad();
  Tensor val = rand_input({4}, -1, 1, 4).require_grad();
  Tensor y = x * 1.0;
  y.index_put_({1}, val);
  Gradients g = (y * 3).sum().backward();
  std::vector<double> gx = values(x.grad(g));
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(gx[static_cast<size_t>(k)], k / 4 == 1 ? 0.0 : 3.0) << k;
  expect_near(values(val.grad(g)), {3, 3, 3, 3});
  // x's storage holds the new values.
  expect_near(values(y.index({1})), values(val));
}

TEST(GradIndexPut, AdvancedAndScalars) {
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor y = v[0] + 0.0;
                  y.index_put_({idx({2, 0})}, v[1]);
                  y.index_put_({Slice{}, 1}, 0.25);
                  return y.sin();
                },
                {rand_input({3, 2}), rand_input({2, 2}, -1, 1, 5)}),
            "");
  Tensor mask = tensor<bool>({true, false, false, true, true, false}, {3, 2}, ad_device());
  EXPECT_EQ(gradcheck(
                [&](const Vs& v) {
                  Tensor y = v[0] * v[0];
                  y.index_put_({mask}, v[1]);
                  return y;
                },
                {rand_input({3, 2}), rand_input({3}, -1, 1, 6)}),
            "");
  // An untracked target written with a tracked value becomes tracked.
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor y = zeros({3, 3}, {.dtype = f64, .device = ad_device()});
                  y.index_put_({Slice{0, 2}, Slice{1, 3}}, v[0]);
                  return y.exp();
                },
                {rand_input({2, 2})}),
            "");
  // x[:, 0] = f(x[:, 0]): the value reads the old x.
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor y = v[0] * 1.5;
                  y.index_put_({Slice{}, 0}, y.index({Slice{}, 0}).exp());
                  return y;
                },
                {rand_input({3, 2})}),
            "");
  // y[idx] = y[idx] * 2 and a gather read before the write: the reads keep only their indices.
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  Tensor y = v[0] * 1.0;
                  Tensor i = idx({2, 0});
                  Tensor g = gather(y, 1, idx({1, 0, 0}, {3, 1}));
                  y.index_put_({i}, y.index({i}) * 2);
                  y.index_put_({Slice{}, Slice{0, 1}}, g);
                  return y;
                },
                {rand_input({3, 2})}),
            "");
  EXPECT_EQ(gradgradcheck(
                [](const Vs& v) {
                  Tensor y = v[0] * v[0];
                  y.index_put_({Slice{0, 1}}, v[1] * v[1]);
                  return y;
                },
                {rand_input({3, 2}), rand_input({2}, -1, 1, 7)}),
            "");
}

TEST(GradIndexPut, Errors) {
  Tensor leaf = rand_input({3}).require_grad();
  kiln::test::expect_error([&] { leaf.index_put_({0}, 1.0); }, "index_put_", "leaf");
  {
    NoGradGuard ng;  // allowed without grad mode (an optimizer step)
    leaf.index_put_({0}, 1.0);
  }
  EXPECT_EQ(values(leaf)[0], 1.0);
  Tensor y = leaf * 2;
  Tensor row = y.index({Slice{0, 2}});
  kiln::test::expect_error([&] { row.index_put_({0}, 1.0); }, "index_put_", "view");
  // A tensor an earlier op saved was overwritten: backward says so instead of a wrong gradient.
  Tensor z = leaf * 2;
  Tensor w = z * z;  // saves z
  z.index_put_({1}, 0.0);
  EXPECT_ERROR(w.sum().backward(), "modified in place");
  // exp keeps its output for the gradient: overwriting it is caught the same way (as in PyTorch).
  Tensor e = leaf.exp();
  e.index_put_({0}, 0.0);
  EXPECT_ERROR(e.sum().backward(), "modified in place");
}

// ---- 0-d and empty tensors -------------------------------------------------------------------

TEST(GradEdgeCases, ZeroDim) {
  Tensor i0 = idx({0}, {});
  Tensor i1 = idx({0});
  EXPECT_EQ(gradcheck([](const Vs& v) { return prod(v[0]) + kiln::std(v[0].unsqueeze(0).expand({2}) * v[0]); },
                      {rand_input({})}),
            "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return cumprod(v[0], 0) + sort(v[0], 0).first + cummax(v[0], 0).first; },
                      {rand_input({})}),
            "");
  EXPECT_EQ(
      gradcheck([&](const Vs& v) { return index_select(v[0], 0, i1).sum() + gather(v[0], 0, i0); }, {rand_input({})}),
      "");
  EXPECT_EQ(gradcheck(
                [&](const Vs& v) {
                  return scatter(v[0], 0, i0, v[1]) + index_add(v[0], 0, i1, v[1], 2.0) + index_copy(v[0], 0, i1, v[1]);
                },
                {rand_input({}), rand_input({}, -1, 1, 2)}),
            "");
}

TEST(GradEdgeCases, Empty) {
  Tensor x = zeros({2, 0}, {.dtype = f64, .device = ad_device()}).require_grad();
  Tensor y = (sum(x, {1}) + prod(x, {1}) + mean(x, {0}, false).sum() + cumprod(x, 1).sum()).sum();
  Gradients g = y.backward();
  EXPECT_EQ(x.grad(g).shape(), (Shape{2, 0}));
  EXPECT_EQ(gradcheck(
                [](const Vs& v) {
                  return cat({v[0], v[1].narrow(1, 0, 0)}, 1) * 2;
                },
                {rand_input({2, 2}), rand_input({2, 2}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck([](const Vs& v) { return pad(v[0], {-2, 0}); }, {rand_input({2, 2})}), "");
}

TEST(GradEdgeCases, Float32MatchesFloat64) {
  // The rules keep the input dtype: f32 gradients agree with f64 ones to f32 precision.
  auto f = [](const Tensor& x) {
    return (softmax(x, 1) * var(x, {1}, 1, true) + prod(x, {0}) + pad(cumsum(x, 1), {1, 1}, "reflect").narrow(1, 1, 4) +
            gather(x, 1, idx({0, 3, 1}, {3, 1})) + amax(x, {1}, true))
        .sum();
  };
  Tensor x64 = nonzero_input({3, 4}, 50).require_grad();
  Tensor x32 = x64.detach().to(f32).require_grad();
  Tensor g64 = x64.grad(f(x64).backward());
  Tensor g32 = x32.grad(f(x32).backward());
  EXPECT_EQ(g32.dtype(), f32);
  expect_near(values(g32), values(g64), 1e-5);
}
