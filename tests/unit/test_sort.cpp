// SPDX-License-Identifier: MIT OR Apache-2.0
// sort, argsort, topk, kthvalue, median, nanmedian and unique against std:: algorithms.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

/// Reference stable sort of one line: NaN largest.
std::vector<int64_t> ref_order(const std::vector<double>& v, bool desc) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    double x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    if (desc) {
      if (std::isnan(x)) return !std::isnan(y);
      if (std::isnan(y)) return false;
      return x > y;
    }
    if (std::isnan(x)) return false;
    if (std::isnan(y)) return true;
    return x < y;
  });
  return idx;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST(Sort, MatchesStableSortAlongEveryDim) {
  std::mt19937 g(11);
  std::uniform_int_distribution<int> d(0, 6);  // many ties
  Shape s{4, 5, 9};
  std::vector<float> v(180);
  for (auto& x : v) x = static_cast<float>(d(g));
  v[7] = NAN;
  v[50] = NAN;
  v[51] = -INFINITY;
  Tensor x = tensor(v, s);
  Strides st = contiguous_strides(s);
  for (int dim : {0, 1, 2}) {
    for (bool desc : {false, true}) {
      auto [sv, si] = sort(x, dim, desc);
      EXPECT_EQ(si.dtype(), i64);
      EXPECT_EQ(sv.shape(), s);
      auto svv = sv.to_vector<double>();
      auto siv = si.to_vector<int64_t>();
      int64_t sd = st[static_cast<size_t>(dim)], L = s[static_cast<size_t>(dim)];
      for (int64_t start = 0; start < 180; ++start) {
        if ((start / sd) % L != 0) continue;  // first element of a line
        std::vector<double> line;
        for (int64_t k = 0; k < L; ++k) line.push_back(v[static_cast<size_t>(start + k * sd)]);
        auto ord = ref_order(line, desc);
        for (int64_t k = 0; k < L; ++k) {
          size_t at = static_cast<size_t>(start + k * sd);
          EXPECT_EQ(siv[at], ord[static_cast<size_t>(k)]) << "dim " << dim << " desc " << desc;
          EXPECT_TRUE(same(svv[at], line[static_cast<size_t>(ord[static_cast<size_t>(k)])]));
        }
      }
      EXPECT_EQ(argsort(x, dim, desc).to_vector<int64_t>(), siv);
    }
  }
}

TEST(Sort, StableTiesNaNAndDtypes) {
  Tensor x = tensor({2.f, 1.f, NAN, 2.f, 1.f, NAN, 0.f}, {7});
  auto [v, i] = sort(x);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{6, 1, 4, 0, 3, 2, 5}));
  EXPECT_TRUE(std::isnan(v.to_vector<float>()[5]));
  auto [dv, di] = sort(x, 0, true);
  EXPECT_EQ(di.to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 0, 3, 1, 4, 6}));
  // Integers, bools, f16, f64.
  auto [iv, ii] = sort(tensor<int64_t>({5, -3, 5, 0}, {4}));
  EXPECT_EQ(iv.to_vector<int64_t>(), (std::vector<int64_t>{-3, 0, 5, 5}));
  EXPECT_EQ(ii.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
  auto [bv, bi] = sort(tensor<bool>({true, false, true, false}, {4}), 0, true);
  EXPECT_EQ(bv.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(bi.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1, 3}));
  std::vector<Half> h = {Half(0.5f), Half(-1.f), Half(2.f)};
  EXPECT_EQ(sort(tensor(h, {3})).first.to_vector<float>(), (std::vector<float>{-1.f, 0.5f, 2.f}));
  EXPECT_EQ(sort(tensor({3.0, 1.0}, {2})).first.dtype(), f64);
  // Non-contiguous input (transposed and flipped).
  Tensor m = tensor({3.f, 1.f, 2.f, 6.f, 5.f, 4.f}, {2, 3});
  EXPECT_EQ(sort(m.t(), 0).first.to_vector<float>(), (std::vector<float>{1.f, 4.f, 2.f, 5.f, 3.f, 6.f}));
  EXPECT_EQ(sort(m.flip({1}), 1).second.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 2, 0, 1, 2}));
  // Empty and 0-d.
  EXPECT_EQ(sort(zeros({0, 3}), 0).first.shape(), (Shape{0, 3}));
  auto [zv, zi] = sort(scalar_tensor(4.0, f32));
  EXPECT_EQ(zv.shape(), Shape{});
  EXPECT_EQ(zi.item<int64_t>(), 0);
  expect_error([&] { sort(m, 2); }, "sort", "out of range");
  expect_error([&] { argsort(m, -3); }, "argsort");
}

TEST(Sort, ThreadDeterminism) {
  std::mt19937 g(3);
  std::uniform_int_distribution<int> d(0, 100);
  std::vector<float> v(300000);
  for (auto& x : v) x = static_cast<float>(d(g));
  Tensor x = tensor(v, {3000, 100});
  auto run = [&] {
    return std::pair{sort(x, 1).second.to_vector<int64_t>(), sort(x, 0, true).second.to_vector<int64_t>()};
  };
  auto [a, a0] = test::with_threads(1, run);
  auto [b, b0] = test::with_threads(2, run);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a0, b0);
}

TEST(Sort, TopK) {
  Tensor x = tensor({4.f, 9.f, 1.f, 9.f, 7.f, 3.f, 0.f, 5.f}, {2, 4});
  auto [v, i] = topk(x, 2);
  EXPECT_EQ(v.shape(), (Shape{2, 2}));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{9.f, 9.f, 7.f, 5.f}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 3}));
  auto [sv, si] = topk(x, 3, 1, false);
  EXPECT_EQ(sv.to_vector<float>(), (std::vector<float>{1.f, 4.f, 9.f, 0.f, 3.f, 5.f}));
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 2, 1, 3}));
  auto [cv, ci] = topk(x, 1, 0);
  EXPECT_EQ(cv.to_vector<float>(), (std::vector<float>{7.f, 9.f, 1.f, 9.f}));
  EXPECT_EQ(ci.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(topk(x, 0).first.shape(), (Shape{2, 0}));
  // NaN counts as the largest.
  EXPECT_TRUE(std::isnan(topk(tensor({1.f, NAN, 2.f}, {3}), 1).first.item<float>()));
  EXPECT_EQ(topk(tensor({1.f, NAN, 2.f}, {3}), 1, 0, false).first.item<float>(), 1.f);
  EXPECT_EQ(topk(scalar_tensor(3.0, f32), 1).first.shape(), Shape{});
  expect_error([&] { topk(x, 5); }, "topk", "out of range");
  expect_error([&] { topk(x, -1); }, "topk");
  expect_error([&] { topk(x, 1, 2); }, "topk");
}

TEST(Sort, KthValue) {
  Tensor x = tensor({5.f, 1.f, 4.f, 1.f, 3.f, 2.f}, {2, 3});
  auto [v, i] = kthvalue(x, 2, 1);
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{4.f, 2.f}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  auto [kv, ki] = kthvalue(x, 1, 0, true);
  EXPECT_EQ(kv.shape(), (Shape{1, 3}));
  EXPECT_EQ(kv.to_vector<float>(), (std::vector<float>{1.f, 1.f, 2.f}));
  EXPECT_EQ(ki.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(kthvalue(scalar_tensor(7.0, f32), 1).first.item<float>(), 7.f);
  expect_error([&] { kthvalue(x, 4, 1); }, "kthvalue", "out of range");
  expect_error([&] { kthvalue(x, 0, 1); }, "kthvalue");
}

TEST(Sort, Median) {
  // Lower median for an even count.
  EXPECT_EQ(median(tensor({4.f, 1.f, 3.f, 2.f}, {4})).item<float>(), 2.f);
  EXPECT_EQ(median(tensor({4.f, 1.f, 3.f}, {3})).item<float>(), 3.f);
  EXPECT_EQ(median(tensor<int64_t>({9, 2, 7, 2}, {2, 2})).item<int64_t>(), 2);
  Tensor x = tensor({3.f, 1.f, 2.f, 8.f, NAN, 7.f, 5.f, 5.f, 5.f}, {3, 3});
  auto [v, i] = median(x, 1);
  auto vv = v.to_vector<float>();
  EXPECT_EQ(vv[0], 2.f);
  EXPECT_TRUE(std::isnan(vv[1]));
  EXPECT_EQ(vv[2], 5.f);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 1}));  // ties: stable order
  auto [cv, ci] = median(x, 0, true);
  EXPECT_EQ(cv.shape(), (Shape{1, 3}));
  auto cvv = cv.to_vector<float>();
  EXPECT_EQ(cvv[0], 5.f);
  EXPECT_TRUE(std::isnan(cvv[1]));
  EXPECT_EQ(cvv[2], 5.f);
  EXPECT_EQ(ci.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_TRUE(std::isnan(median(x).item<float>()));
  EXPECT_TRUE(std::isnan(median(zeros({0})).item<float>()));
  expect_error([&] { median(zeros({2, 0}), 1); }, "median", "non-zero size");
  expect_error([&] { median(zeros({0}, {.dtype = i32})); }, "median");
  // Larger: matches nth_element.
  std::mt19937 g(5);
  std::normal_distribution<float> nd;
  std::vector<float> big(1001);
  for (auto& f : big) f = nd(g);
  std::vector<float> c = big;
  std::nth_element(c.begin(), c.begin() + 500, c.end());
  EXPECT_EQ(median(tensor(big, {1001})).item<float>(), c[500]);
}

TEST(Sort, NanMedian) {
  EXPECT_EQ(nanmedian(tensor({NAN, 4.f, 1.f, NAN, 3.f, 2.f}, {2, 3})).item<float>(), 2.f);
  EXPECT_EQ(nanmedian(tensor({NAN, 4.f, 1.f, NAN, 3.f}, {5})).item<float>(), 3.f);
  EXPECT_TRUE(std::isnan(nanmedian(tensor({NAN, NAN}, {2})).item<float>()));
  EXPECT_TRUE(std::isnan(nanmedian(zeros({0})).item<float>()));
  EXPECT_EQ(nanmedian(tensor({-0.5, 2.0}, {2})).item<double>(), -0.5);
  EXPECT_EQ(nanmedian(tensor({5, 1, 3}, {3})).item<int32_t>(), 3);
}

TEST(Sort, Unique) {
  Tensor x = tensor({3, 1, 2, 3, 1, 3}, {2, 3});
  UniqueResult r = unique(x, true, true, true);
  EXPECT_EQ(r.values.dtype(), i32);
  EXPECT_EQ(r.values.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(r.inverse.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.inverse.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 2, 0, 2}));
  // NaNs are each unique, sorted last; -0.0 and 0.0 are one value.
  UniqueResult f = unique(tensor({0.5f, NAN, -0.f, 0.f, NAN, 0.5f}, {6}), true, true, true);
  auto fv = f.values.to_vector<float>();
  ASSERT_EQ(fv.size(), 4u);
  EXPECT_EQ(fv[0], 0.f);
  EXPECT_EQ(fv[1], 0.5f);
  EXPECT_TRUE(std::isnan(fv[2]) && std::isnan(fv[3]));
  EXPECT_EQ(f.counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(f.inverse.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 0, 3, 1}));
  UniqueResult b = unique(tensor<bool>({true, true, false}, {3}));
  EXPECT_EQ(b.values.dtype(), bool_);
  EXPECT_EQ(b.values.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  std::vector<int64_t> bigv = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 1};
  EXPECT_EQ(unique(tensor(bigv, {2})).values.to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max() - 1, std::numeric_limits<int64_t>::max()}));
  UniqueResult e = unique(zeros({0, 2}), true, true, true);
  EXPECT_EQ(e.values.shape(), (Shape{0}));
  EXPECT_EQ(e.inverse.shape(), (Shape{0, 2}));
  // Non-contiguous input.
  Tensor m = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}).t();
  EXPECT_EQ(unique(m, true, true).inverse.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1, 3}));
  expect_error([&] { unique(zeros({3}, {.dtype = f32, .device = Device::null()})); }, "unique", "null device");
}

TEST(Sort, NullDeviceShapes) {
  Tensor x = zeros({3, 5}, {.dtype = f32, .device = Device::null()});
  EXPECT_EQ(sort(x, 0).second.shape(), (Shape{3, 5}));
  EXPECT_EQ(topk(x, 2).first.shape(), (Shape{3, 2}));
  EXPECT_EQ(kthvalue(x, 2, 0, true).first.shape(), (Shape{1, 5}));
  EXPECT_EQ(median(x, 1).second.shape(), (Shape{3}));
}
