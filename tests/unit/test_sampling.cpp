// SPDX-License-Identifier: MIT OR Apache-2.0
// multinomial and the sampling helpers (top_k_filter, top_p_filter, sample_logits). Samples are
// random, so they are checked against the exact distributions with a chi-square statistic at a
// fixed seed (deterministic: no flakiness), against host implementations of the filters, and
// across the value devices (the same seed draws the same samples everywhere).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn/functional.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "test_devices.h"
#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

/// Pearson's chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "category " << i << " has probability 0";
      continue;
    }
    const double e = n * p[i];
    s += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return s;
}

}  // namespace

TEST(Multinomial, WithReplacementFollowsTheWeights) {
  manual_seed(7);
  const std::vector<double> w = {1, 0, 3, 6};  // unnormalised, with a zero weight
  const int64_t n = 20000;
  Tensor s = multinomial(tensor(std::vector<float>(w.begin(), w.end()), {4}), n, /*replacement=*/true);
  ASSERT_EQ(s.shape(), (Shape{n}));
  ASSERT_EQ(s.dtype(), i64);
  std::vector<int64_t> counts(4, 0);
  for (int64_t v : s.to_vector<int64_t>()) {
    ASSERT_TRUE(v >= 0 && v < 4) << v;
    ++counts[static_cast<size_t>(v)];
  }
  // 2 degrees of freedom: 18.4 is the 0.9999 quantile.
  EXPECT_LT(chi_square(counts, {0.1, 0.0, 0.3, 0.6}), 18.4);
}

TEST(Multinomial, WithoutReplacementDrawsSuccessively) {
  manual_seed(11);
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  const int64_t rows = 20000;
  Tensor w = tensor(std::vector<double>(p.begin(), p.end()), {1, 4}).expand({rows, 4});
  Tensor s = multinomial(w, 2);
  ASSERT_EQ(s.shape(), (Shape{rows, 2}));
  // P(first i, second j) = p_i p_j / (1 - p_i): 12 cells, 11 degrees of freedom (0.9999: 35.6).
  std::vector<int64_t> counts(16, 0);
  std::vector<double> exact(16, 0);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j)
      if (i != j) exact[i * 4 + j] = p[i] * p[j] / (1 - p[i]);
  const auto v = s.to_vector<int64_t>();
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) ++counts[static_cast<size_t>(v[2 * r] * 4 + v[2 * r + 1])];
  EXPECT_LT(chi_square(counts, exact), 35.6);
}

TEST(Multinomial, WithoutReplacementDrawsDistinctNonZeroCategories) {
  manual_seed(3);
  Tensor w = rand({50, 9}) * (rand({50, 9}) > 0.3).to(f32);
  w.narrow(1, 0, 1).fill_(1.0);  // every row has at least one category
  const int64_t fewest = (w > 0).sum({1}).min().item<int64_t>();
  Tensor s = multinomial(w, fewest);
  const auto v = s.to_vector<int64_t>();
  const auto wv = w.to_vector<float>();
  for (int64_t r = 0; r < 50; ++r) {
    std::vector<int64_t> row(v.begin() + r * fewest, v.begin() + (r + 1) * fewest);
    for (int64_t c : row) EXPECT_GT(wv[static_cast<size_t>(r * 9 + c)], 0.f) << "row " << r;
    std::sort(row.begin(), row.end());
    EXPECT_EQ(std::adjacent_find(row.begin(), row.end()), row.end()) << "row " << r << " repeats a category";
  }
  // All categories: a permutation.
  Tensor all = multinomial(ones({3, 6}), 6);
  auto [sorted, idx] = sort(all, 1);
  EXPECT_TRUE(equal(sorted, arange(6, i64).expand({3, 6})));
}

TEST(Multinomial, SeededAndTheSameOnEveryDevice) {
  Tensor w = rand({4, 7}, {.dtype = f64}) + 0.05;
  manual_seed(99);
  Tensor a = multinomial(w, 5, true), b = multinomial(w, 4);
  manual_seed(99);
  EXPECT_TRUE(equal(multinomial(w, 5, true), a));
  EXPECT_TRUE(equal(multinomial(w, 4), b));
  for (const test::TestDevice& d : test::value_devices()) {
    SCOPED_TRACE(d.name);
    manual_seed(99);
    Tensor wa = multinomial(w.to(d.device()), 5, true), wb = multinomial(w.to(d.device()), 4);
    EXPECT_TRUE(equal(wa.to(Device::cpu()), a));
    EXPECT_TRUE(equal(wb.to(Device::cpu()), b));
  }
  // The null device gives shapes only.
  Tensor n = multinomial(zeros({3, 5}, {.device = Device::null()}), 2);
  EXPECT_EQ(n.shape(), (Shape{3, 2}));
  EXPECT_EQ(n.dtype(), i64);
}

TEST(Multinomial, EmptyBatchAndBadInput) {
  EXPECT_EQ(multinomial(zeros({0, 4}), 3, true).shape(), (Shape{0, 3}));
  EXPECT_ERROR(multinomial(tensor({1.f, -1.f}, {2}), 1), "negative");
  EXPECT_ERROR(multinomial(tensor({1.f, std::nanf("")}, {2}), 1), "inf or nan");
  EXPECT_ERROR(multinomial(tensor({1.f, INFINITY}, {2}), 1), "inf or nan");
  EXPECT_ERROR(multinomial(tensor({1.f, 1.f, 0.f, 0.f}, {2, 2}), 1), "sums to zero");
  EXPECT_ERROR(multinomial(tensor({1.f, 0.f, 2.f}, {3}), 3), "only 2 non-zero categories");
  EXPECT_ERROR(multinomial(ones({3}), 4), "from 3 categories");
  EXPECT_ERROR(multinomial(ones({2, 3, 4}), 1), "[multinomial]");
  EXPECT_ERROR(multinomial(ones({3}, {.dtype = i64}), 1), "floating");
  EXPECT_ERROR(multinomial(ones({3}), 0), "positive");
  EXPECT_ERROR(multinomial(ones({2, 0}), 1, true), "at least one category");
}

TEST(SamplingFilters, TopKAndTopPMatchAHostImplementation) {
  manual_seed(5);
  Tensor logits = randn({6, 11});
  const auto lv = logits.to_vector<float>();
  for (int64_t k : {1, 3, 10}) {
    const auto got = F::top_k_filter(logits, k).to_vector<float>();
    for (size_t r = 0; r < 6; ++r) {
      std::vector<float> row(lv.begin() + r * 11, lv.begin() + (r + 1) * 11);
      std::vector<float> desc = row;
      std::sort(desc.begin(), desc.end(), std::greater<>());
      for (size_t c = 0; c < 11; ++c)
        EXPECT_EQ(got[r * 11 + c], row[c] < desc[static_cast<size_t>(k - 1)] ? -INFINITY : row[c]) << k;
    }
  }
  EXPECT_TRUE(equal(F::top_k_filter(logits, 0), logits));
  for (double p : {0.05, 0.5, 0.9}) {
    const auto got = F::top_p_filter(logits, p).to_vector<float>();
    for (size_t r = 0; r < 6; ++r) {
      std::vector<float> row(lv.begin() + r * 11, lv.begin() + (r + 1) * 11);
      std::vector<size_t> order(11);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
      double z = 0;
      for (float x : row) z += std::exp(double(x) - row[order[0]]);
      double before = 0;
      std::vector<bool> keep(11, false);
      for (size_t i : order) {
        keep[i] = before < p;
        before += std::exp(double(row[i]) - row[order[0]]) / z;
      }
      for (size_t c = 0; c < 11; ++c) EXPECT_EQ(got[r * 11 + c], keep[c] ? row[c] : -INFINITY) << "p " << p;
    }
  }
  EXPECT_ERROR(F::top_p_filter(logits, 0.0), "(0, 1]");
}

TEST(SamplingFilters, SampleLogits) {
  manual_seed(1);
  Tensor logits = randn({5, 8});
  EXPECT_TRUE(equal(F::sample_logits(logits, {.temperature = 0}), argmax(logits, -1)));
  EXPECT_TRUE(equal(F::sample_logits(logits, {.top_k = 1}), argmax(logits, -1)));
  // top-2 of a fixed row: only those two, in proportion to their softmax.
  Tensor row = tensor({0.f, 2.f, 1.f, -1.f}, {1, 4}).expand({4000, 4});
  Tensor s = F::sample_logits(row, {.top_k = 2});
  ASSERT_EQ(s.shape(), (Shape{4000}));
  std::vector<int64_t> counts(4, 0);
  for (int64_t v : s.to_vector<int64_t>()) ++counts[static_cast<size_t>(v)];
  const double p1 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.0));
  EXPECT_LT(chi_square(counts, {0, p1, 1 - p1, 0}), 15.1);  // 1 degree of freedom, 0.9999
  EXPECT_EQ(F::sample_logits(tensor({0.f, 5.f}, {2}), {.temperature = 0}).dim(), 0);
  EXPECT_ERROR(F::sample_logits(logits, {.temperature = -1}), "temperature");
}
