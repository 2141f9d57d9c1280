// Random creation: statistics on 1e6 samples, ranges, determinism under manual_seed, identical
// results with 1 and 2 threads, errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

struct Stats {
  double mean = 0, var = 0, lo = INFINITY, hi = -INFINITY;
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  for (double x : v) {
    s.mean += x;
    s.lo = std::min(s.lo, x);
    s.hi = std::max(s.hi, x);
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= static_cast<double>(v.size() - 1);
  return s;
}

constexpr int64_t kN = 1000000;

}  // namespace

TEST(Random, RandUniformStats) {
  manual_seed(1);
  for (DType dt : {f32, f64}) {
    Tensor t = rand({1000, 1000}, {.dtype = dt});
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.shape(), (Shape{1000, 1000}));
    Stats s = stats(t.to_vector<double>());
    EXPECT_NEAR(s.mean, 0.5, 0.002);
    EXPECT_NEAR(s.var, 1.0 / 12, 0.001);
    EXPECT_GE(s.lo, 0.0);
    EXPECT_LT(s.hi, 1.0);
    EXPECT_LT(s.lo, 1e-4);
    EXPECT_GT(s.hi, 1 - 1e-4);
  }
  for (DType dt : {f16, bf16}) {
    Stats s = stats(rand({100000}, {.dtype = dt}).to_vector<double>());
    EXPECT_GE(s.lo, 0.0);
    EXPECT_LT(s.hi, 1.0);
    EXPECT_NEAR(s.mean, 0.5, 0.01);
  }
}

TEST(Random, UniformRange) {
  manual_seed(2);
  Stats s = stats(uniform({kN}, -2.0, 3.0).to_vector<double>());
  EXPECT_NEAR(s.mean, 0.5, 0.01);
  EXPECT_NEAR(s.var, 25.0 / 12, 0.02);
  EXPECT_GE(s.lo, -2.0);
  EXPECT_LT(s.hi, 3.0);
  Stats d = stats(uniform({kN}, 10.0, 10.5, {.dtype = f64}).to_vector<double>());
  EXPECT_GE(d.lo, 10.0);
  EXPECT_LT(d.hi, 10.5);
  // A degenerate range gives the bound.
  EXPECT_EQ(uniform({3}, 4.0, 4.0).to_vector<float>(), (std::vector<float>{4.f, 4.f, 4.f}));
  expect_error([] { uniform({2}, 3.0, 1.0); }, "uniform", "low");
  expect_error([] { uniform({2}, 0.0, INFINITY); }, "uniform");
}

TEST(Random, NormalStats) {
  manual_seed(3);
  for (DType dt : {f32, f64}) {
    auto v = randn({kN}, {.dtype = dt}).to_vector<double>();
    Stats s = stats(v);
    EXPECT_NEAR(s.mean, 0.0, 0.005);
    EXPECT_NEAR(s.var, 1.0, 0.005);
    int64_t within1 = std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) < 1; });
    EXPECT_NEAR(static_cast<double>(within1) / kN, 0.682689, 0.002);
    // Fourth moment of a standard normal is 3.
    double m4 = 0;
    for (double x : v) m4 += x * x * x * x;
    EXPECT_NEAR(m4 / kN, 3.0, 0.05);
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }));
  }
  Stats s = stats(normal({kN}, 3.0, 2.0).to_vector<double>());
  EXPECT_NEAR(s.mean, 3.0, 0.01);
  EXPECT_NEAR(s.var, 4.0, 0.03);
  Stats h = stats(randn({100000}, {.dtype = bf16}).to_vector<double>());
  EXPECT_NEAR(h.mean, 0.0, 0.02);
  EXPECT_NEAR(h.var, 1.0, 0.03);
  EXPECT_EQ(normal({4}, 1.5, 0.0).to_vector<float>(), (std::vector<float>(4, 1.5f)));
  expect_error([] { normal({2}, 0.0, -1.0); }, "normal", "std");
}

TEST(Random, RandintRangeAndCounts) {
  manual_seed(4);
  Tensor t = randint(-5, 5, {kN});
  EXPECT_EQ(t.dtype(), i64);
  auto v = t.to_vector<int64_t>();
  std::vector<int64_t> count(10, 0);
  for (auto x : v) {
    ASSERT_GE(x, -5);
    ASSERT_LT(x, 5);
    count[static_cast<size_t>(x + 5)]++;
  }
  for (auto c : count) EXPECT_NEAR(static_cast<double>(c), kN / 10.0, 1500);
  // 64-bit ranges: values above 2^32 appear and the full i64 range works.
  auto big = randint(0, int64_t{1} << 40, {10000}).to_vector<int64_t>();
  EXPECT_GT(*std::max_element(big.begin(), big.end()), int64_t{1} << 39);
  EXPECT_GE(*std::min_element(big.begin(), big.end()), 0);
  auto full =
      randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {10000}).to_vector<int64_t>();
  EXPECT_LT(*std::min_element(full.begin(), full.end()), -(int64_t{1} << 60));
  EXPECT_GT(*std::max_element(full.begin(), full.end()), int64_t{1} << 60);
  // Other dtypes.
  auto u = randint(250, 256, {1000}, {.dtype = u8}).to_vector<int64_t>();
  EXPECT_TRUE(std::all_of(u.begin(), u.end(), [](int64_t x) { return x >= 250 && x <= 255; }));
  auto f = randint(0, 3, {1000}, {.dtype = f32}).to_vector<float>();
  EXPECT_TRUE(std::all_of(f.begin(), f.end(), [](float x) { return x == 0.f || x == 1.f || x == 2.f; }));
  auto b = randint(0, 2, {1000}, {.dtype = bool_}).to_vector<int64_t>();
  EXPECT_GT(std::count(b.begin(), b.end(), 1), 400);
  expect_error([] { randint(3, 3, {2}); }, "randint", "low < high");
  expect_error([] { randint(0, 300, {2}, {.dtype = u8}); }, "randint", "u8");
  expect_error([] { randint(-1, 2, {2}, {.dtype = u8}); }, "randint");
}

TEST(Random, Bernoulli) {
  manual_seed(5);
  Tensor p = full({kN}, 0.3);
  Tensor b = bernoulli(p);
  EXPECT_EQ(b.dtype(), f32);
  auto v = b.to_vector<double>();
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0 || x == 1.0; }));
  EXPECT_NEAR(stats(v).mean, 0.3, 0.002);
  // p = 0 and p = 1 are exact; p may be a non-contiguous view.
  Tensor q = tensor({0.f, 1.f, 0.f, 1.f, 0.f, 1.f}, {2, 3}).t();
  for (int i = 0; i < 10; ++i) {
    Tensor r = bernoulli(q);
    EXPECT_EQ(r.to_vector<float>(), q.contiguous().to_vector<float>());
  }
  Tensor e = bernoulli(full({1}, 0.75, {.dtype = f64}).expand({kN}));
  EXPECT_EQ(e.dtype(), f64);
  EXPECT_NEAR(stats(e.to_vector<double>()).mean, 0.75, 0.002);
  Tensor s = bernoulli({kN}, 0.1);
  EXPECT_EQ(s.dtype(), f32);
  EXPECT_NEAR(stats(s.to_vector<double>()).mean, 0.1, 0.002);
  Tensor sb = bernoulli({1000}, 0.5, {.dtype = bool_});
  EXPECT_EQ(sb.dtype(), bool_);
  EXPECT_EQ(bernoulli(tensor({0.5f}).to(f16)).dtype(), f16);
  expect_error([] { bernoulli(tensor({0.5f, 1.5f})); }, "bernoulli", "[0, 1]");
  expect_error([] { bernoulli(tensor({NAN})); }, "bernoulli", "[0, 1]");
  expect_error([] { bernoulli(tensor<int64_t>({1})); }, "bernoulli", "i64");
  expect_error([] { bernoulli({2}, 1.5); }, "bernoulli", "p");
}

TEST(Random, Randperm) {
  manual_seed(6);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    auto v = randperm(n).to_vector<int64_t>();
    ASSERT_EQ(static_cast<int64_t>(v.size()), n);
    std::vector<int64_t> s = v;
    std::sort(s.begin(), s.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(s[static_cast<size_t>(i)], i);
  }
  // Roughly uniform: each value lands at position 0 about equally often.
  std::vector<int> first(4, 0);
  for (int i = 0; i < 4000; ++i) first[static_cast<size_t>(randperm(4).to_vector<int64_t>()[0])]++;
  for (int c : first) EXPECT_NEAR(c, 1000, 150);
  manual_seed(9);
  auto a = randperm(50).to_vector<int64_t>();
  manual_seed(9);
  EXPECT_EQ(randperm(50).to_vector<int64_t>(), a);
  expect_error([] { randperm(-1); }, "randperm");
}

TEST(Random, ManualSeedDeterminism) {
  manual_seed(42);
  auto a = rand({100}).to_vector<float>();
  auto a2 = rand({100}).to_vector<float>();
  manual_seed(42);
  EXPECT_EQ(rand({100}).to_vector<float>(), a);
  EXPECT_EQ(rand({100}).to_vector<float>(), a2);
  EXPECT_NE(a, a2);
  manual_seed(43);
  EXPECT_NE(rand({100}).to_vector<float>(), a);
  // Element i depends only on (seed, offset, i): the shape does not matter.
  manual_seed(7);
  auto flat = randn({12}).to_vector<float>();
  manual_seed(7);
  EXPECT_EQ(randn({3, 4}).to_vector<float>(), flat);
  // A large seed uses both 32-bit halves.
  manual_seed(0x100000000ULL);
  auto hi = rand({8}).to_vector<float>();
  manual_seed(0);
  EXPECT_NE(rand({8}).to_vector<float>(), hi);
}

TEST(Random, SameResultsWithOneAndTwoThreads) {
  auto draw = [](int threads) {
    return test::with_threads(threads, [] {
      manual_seed(11);
      std::vector<double> all;
      auto add = [&](const Tensor& t) {
        auto v = t.to_vector<double>();
        all.insert(all.end(), v.begin(), v.end());
      };
      add(rand({200001}));
      add(rand({100001}, {.dtype = f64}));
      add(randn({200003}));
      add(randn({100003}, {.dtype = f64}));
      add(randn({100003}, {.dtype = f16}));
      add(randint(-1000, 1000, {150001}));
      add(bernoulli(rand({150001})));
      add(bernoulli({100001}, 0.4));
      return all;
    });
  };
  auto one = draw(1), two = draw(2);
  EXPECT_EQ(one, two);
}

TEST(Random, LikeAndNullDevice) {
  Tensor x = zeros({3, 2}, {.dtype = f64});
  Tensor r = rand_like(x);
  EXPECT_EQ(r.shape(), x.shape());
  EXPECT_EQ(r.dtype(), f64);
  EXPECT_EQ(randn_like(x).dtype(), f64);
  expect_error([] { rand_like(zeros({2}, {.dtype = i64})); }, "rand_like", "i64");
  expect_error([] { randn_like(Tensor()); }, "randn_like");
  TensorOptions nul{.dtype = f32, .device = Device::null()};
  EXPECT_EQ(rand({2, 3}, nul).shape(), (Shape{2, 3}));
  EXPECT_EQ(randn({4}, nul).device(), Device::null());
  EXPECT_EQ(randint(0, 5, {7}, {.dtype = i64, .device = Device::null()}).shape(), (Shape{7}));
  EXPECT_EQ(bernoulli({2, 2}, 0.5, nul).shape(), (Shape{2, 2}));
  EXPECT_EQ(randperm(5, Device::null()).shape(), (Shape{5}));
  EXPECT_EQ(rand({0, 3}).numel(), 0);
  expect_error([] { rand({2}, {.dtype = i32}); }, "rand", "floating");
  expect_error([] { randn({-1}); }, "randn", "negative");
}
