// Indexing family: index_select, gather, scatter*, index_add/copy/fill/put, masked ops,
// nonzero, take, triangles, diagonals, one_hot, embedding, Tensor::index / index_put_.
// Reference values: PyTorch documentation examples (hand-checked) and naive loops below.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "test_util.h"

using namespace kiln;
using kiln::test::error_of;

namespace {

Tensor I(std::initializer_list<int64_t> v, const Shape& s) { return tensor<int64_t>(v, s); }
Tensor I(std::initializer_list<int64_t> v) { return tensor<int64_t>(v); }
Tensor F(std::initializer_list<float> v, const Shape& s) { return tensor<float>(v, s); }
std::vector<float> fv(const Tensor& t) { return t.to_vector<float>(); }
std::vector<int64_t> iv(const Tensor& t) { return t.to_vector<int64_t>(); }
double hsum(const Tensor& t) {
  double s = 0;
  for (double v : t.to_vector<double>()) s += v;
  return s;
}

std::vector<float> rnd(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(g);
  return v;
}
std::vector<int64_t> rnd_idx(int64_t n, int64_t hi, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int64_t> u(0, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(g);
  return v;
}
std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}

/// Multi-index of linear position p in shape s.
std::vector<int64_t> unravel(int64_t p, const Shape& s) {
  std::vector<int64_t> m(s.size());
  for (size_t k = s.size(); k-- > 0;) {
    m[k] = p % s[k];
    p /= s[k];
  }
  return m;
}
int64_t ravel(const std::vector<int64_t>& m, const Shape& s) {
  int64_t p = 0;
  for (size_t k = 0; k < s.size(); ++k) p = p * s[k] + m[k];
  return p;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}
}  // namespace

// ---- index_select, gather, take, embedding ----------------------------------------------------
TEST(Index, IndexSelectMatchesNaiveOnEveryDim) {
  Shape s{4, 5, 6};
  auto xv = rnd(120, 1);
  Tensor x = tensor(xv, s);
  for (int64_t d = -3; d < 3; ++d) {
    int64_t dd = d < 0 ? d + 3 : d;
    auto idx = rnd_idx(7, s[static_cast<size_t>(dd)], 2 + static_cast<uint32_t>(dd));
    Tensor r = index_select(x, d, tensor(idx, {7}));
    Shape rs = s;
    rs[static_cast<size_t>(dd)] = 7;
    ASSERT_EQ(r.shape(), rs);
    auto got = fv(r);
    for (int64_t p = 0; p < r.numel(); ++p) {
      auto m = unravel(p, rs);
      m[static_cast<size_t>(dd)] = idx[static_cast<size_t>(m[static_cast<size_t>(dd)])];
      ASSERT_EQ(got[static_cast<size_t>(p)], xv[static_cast<size_t>(ravel(m, s))]) << "dim " << d << " pos " << p;
    }
  }
}

TEST(Index, IndexSelectNonContiguousDtypesEmptyAndZeroDim) {
  Tensor x = tensor(iota(12), {3, 4});
  Tensor xt = x.t();                                     // [4, 3], non-contiguous
  Tensor idx = I({3, 0, 1, 2, 9, 9}).slice(0, 0, 6, 2);  // strided index: [3, 1, 9] -> use first two
  Tensor r = index_select(xt, 0, idx.narrow(0, 0, 2));
  EXPECT_EQ(fv(r), (std::vector<float>{3, 7, 11, 1, 5, 9}));
  EXPECT_EQ(fv(index_select(x.flip({1}), 1, I({0, 3}))), (std::vector<float>{3, 0, 7, 4, 11, 8}));
  // i32 indices are accepted; several dtypes keep their dtype.
  for (DType dt : {DType::Bool, DType::I8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F64}) {
    Tensor xd = x.to(dt);
    Tensor rd = index_select(xd, 1, tensor<int32_t>({2, 0}));
    EXPECT_EQ(rd.dtype(), dt);
    EXPECT_EQ(rd.to_vector<double>(), index_select(x, 1, I({2, 0})).to(dt).to_vector<double>()) << dtype_name(dt);
  }
  Tensor e = index_select(x, 0, tensor<int64_t>(std::vector<int64_t>{}, {0}));
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  Tensor z = scalar_tensor(5.f);
  EXPECT_EQ(index_select(z, 0, I({0})).shape(), Shape{});
  EXPECT_EQ(index_select(z, 0, I({0})).item<float>(), 5.f);
  EXPECT_EQ(fv(index_select(x, 1, scalar_tensor(int64_t{1}))), (std::vector<float>{1, 5, 9}));
}

TEST(Index, IndexSelectErrors) {
  Tensor x = tensor(iota(12), {3, 4});
  std::string m = error_of([&] { index_select(x, 1, I({0, 4})); });
  EXPECT_NE(m.find("[index_select]"), std::string::npos) << m;
  EXPECT_NE(m.find("index 4"), std::string::npos) << m;
  EXPECT_NE(m.find("size 4"), std::string::npos) << m;
  EXPECT_ERROR(index_select(x, 0, I({-1})), "index -1");  // no negative indices here (as PyTorch)
  EXPECT_ERROR(index_select(x, 0, F({0.f}, {1})), "[index_select]");
  EXPECT_ERROR(index_select(x, 0, tensor({true}, {1})), "integer");
  EXPECT_ERROR(index_select(x, 0, I({0, 1}, {1, 2})), "[index_select]");
  EXPECT_ERROR(index_select(x, 2, I({0})), "[index_select]");
  EXPECT_ERROR(index_select(x, 0, I({0}).to(Device::null())), "device");
}

TEST(Index, GatherDocExampleAndNaive) {
  Tensor t = F({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(fv(gather(t, 1, I({0, 0, 1, 0}, {2, 2}))), (std::vector<float>{1, 1, 4, 3}));
  Shape s{3, 4, 5};
  auto xv = rnd(60, 3);
  Tensor x = tensor(xv, s);
  for (int64_t d = 0; d < 3; ++d) {
    Shape is{2, 3, 4};  // smaller than x in the other dims
    auto idx = rnd_idx(24, s[static_cast<size_t>(d)], 10 + static_cast<uint32_t>(d));
    Tensor r = gather(x, d - 3, tensor(idx, is));
    ASSERT_EQ(r.shape(), is);
    auto got = fv(r);
    for (int64_t p = 0; p < 24; ++p) {
      auto m = unravel(p, is);
      m[static_cast<size_t>(d)] = idx[static_cast<size_t>(p)];
      ASSERT_EQ(got[static_cast<size_t>(p)], xv[static_cast<size_t>(ravel(m, s))]);
    }
    // Non-contiguous input and index give the same values.
    Tensor xn = x.transpose(0, 2).contiguous().transpose(0, 2);
    Tensor in = tensor(idx, is).transpose(0, 1).contiguous().transpose(0, 1);
    EXPECT_EQ(fv(gather(xn, d, in)), got);
  }
  EXPECT_EQ(gather(x, 0, tensor<int64_t>(std::vector<int64_t>{}, {0, 4, 5})).shape(), (Shape{0, 4, 5}));
  EXPECT_EQ(gather(scalar_tensor(7.f), 0, scalar_tensor(int64_t{0})).item<float>(), 7.f);
}

TEST(Index, GatherErrors) {
  Tensor x = tensor(iota(6), {2, 3});
  EXPECT_ERROR(gather(x, 1, I({0, 3}, {1, 2})), "index 3");
  EXPECT_ERROR(gather(x, 1, I({0, 3}, {1, 2})), "[gather]");
  EXPECT_ERROR(gather(x, 1, I({0, 1})), "same number of dims");
  EXPECT_ERROR(gather(x, 1, I({0, 0, 0, 0, 0, 0}, {3, 2})), "exceeds input shape");
  EXPECT_ERROR(gather(x, 0, F({0, 0}, {1, 2})), "[gather]");
}

TEST(Index, TakeAndTakeAlongDim) {
  Tensor src = F({4, 3, 5, 6, 7, 8}, {2, 3});
  EXPECT_EQ(fv(take(src, I({0, 2, 5}))), (std::vector<float>{4, 5, 8}));
  EXPECT_EQ(fv(take(src.t(), I({0, 1, -1}))), (std::vector<float>{4, 6, 8}));  // negatives wrap
  EXPECT_EQ(take(src, I({0, 1, 2, 3}, {2, 2})).shape(), (Shape{2, 2}));
  EXPECT_ERROR(take(src, I({6})), "[take]");
  EXPECT_ERROR(take(src, I({-7})), "index -7");
  Tensor t = F({10, 30, 20, 60, 40, 50}, {2, 3});
  EXPECT_EQ(fv(take_along_dim(t, I({0, 2, 1, 1, 2, 0}, {2, 3}), 1)), (std::vector<float>{10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(fv(take_along_dim(t, I({3}))), (std::vector<float>{60}));
  // Broadcasting in the non-indexed dims: indices [1, 2] against x [2, 3] along dim 1.
  Tensor r = take_along_dim(t, I({2, 0}, {1, 2}), -1);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(fv(r), (std::vector<float>{20, 10, 50, 60}));
  EXPECT_ERROR(take_along_dim(t, I({0, 5}, {1, 2}), 1), "[take_along_dim]");
}

TEST(Index, EmbeddingAnyIndexShape) {
  auto wv = rnd(30, 4);
  Tensor w = tensor(wv, {10, 3});
  Tensor e = embedding(tensor<int32_t>({1, 2, 4, 9}, {2, 2}), w);
  ASSERT_EQ(e.shape(), (Shape{2, 2, 3}));
  auto got = fv(e);
  int rows[] = {1, 2, 4, 9};
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(got[static_cast<size_t>(k * 3 + c)], wv[static_cast<size_t>(rows[k] * 3 + c)]);
  EXPECT_EQ(embedding(scalar_tensor(int64_t{2}), w).shape(), (Shape{3}));
  EXPECT_ERROR(embedding(I({10}), w), "[embedding] index 10 is out of range for dim 0 with size 10");
  EXPECT_ERROR(embedding(F({1.f}, {1}), w), "[embedding]");
  EXPECT_ERROR(embedding(I({1}), tensor(iota(3), {3})), "2-d");
}

// ---- scatter family ---------------------------------------------------------------------------
TEST(Index, ScatterDocExamples) {
  Tensor src = tensor(iota(11), {11}).narrow(0, 1, 10).reshape({2, 5});  // 1..10
  Tensor r = scatter(zeros({3, 5}), 0, I({0, 1, 2, 0}, {1, 4}), src);
  EXPECT_EQ(fv(r), (std::vector<float>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}));
  r = scatter(zeros({3, 5}), 1, I({0, 1, 2, 0, 1, 4}, {2, 3}), src);
  EXPECT_EQ(fv(r), (std::vector<float>{1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0}));
  Tensor two = full({2, 4}, 2.f);
  auto m = fv(scatter(two, 1, I({2, 3}, {2, 1}), 1.23, "multiply"));
  EXPECT_NEAR(m[2], 2.46f, 1e-6);
  EXPECT_NEAR(m[7], 2.46f, 1e-6);
  EXPECT_EQ(m[0], 2.f);
  auto a = fv(scatter(two, 1, I({2, 3}, {2, 1}), 1.23, "add"));
  EXPECT_NEAR(a[2], 3.23f, 1e-6);
  EXPECT_NEAR(a[7], 3.23f, 1e-6);
  EXPECT_EQ(fv(scatter_add(zeros({3, 5}), 0, I({0, 1, 2, 0, 0}, {1, 5}), ones({2, 5}))),
            (std::vector<float>{1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}));
  Tensor s6 = F({1, 2, 3, 4, 5, 6}, {6});
  Tensor i6 = I({0, 1, 0, 1, 2, 1});
  Tensor in4 = F({1, 2, 3, 4}, {4});
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "sum")), (std::vector<float>{5, 14, 8, 4}));
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "sum", false)), (std::vector<float>{4, 12, 5, 4}));
  Tensor in2 = F({5, 4, 3, 2}, {4});
  EXPECT_EQ(fv(scatter_reduce(in2, 0, i6, s6, "amax")), (std::vector<float>{5, 6, 5, 2}));
  EXPECT_EQ(fv(scatter_reduce(in2, 0, i6, s6, "amax", false)), (std::vector<float>{3, 6, 5, 2}));
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "amax", true)), (std::vector<float>{3, 6, 5, 4}));
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "amin", false)), (std::vector<float>{1, 2, 5, 4}));
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "prod", true)), (std::vector<float>{3, 96, 15, 4}));
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "mean", true)), (std::vector<float>{5.f / 3, 14.f / 4, 8.f / 2, 4}));
  EXPECT_EQ(fv(scatter_reduce(in4, 0, i6, s6, "mean", false)), (std::vector<float>{2, 4, 5, 4}));
  // Integer mean floors like PyTorch: (-1 + -2) / 2 -> -2.
  Tensor im = scatter_reduce(tensor<int32_t>({0, 0}), 0, I({0, 0}), tensor<int32_t>({-1, -2}), "mean", false);
  EXPECT_EQ(im.to_vector<int32_t>(), (std::vector<int32_t>{-2, 0}));
}

TEST(Index, ScatterDuplicatesAreDeterministic) {
  // Last write in index order wins.
  EXPECT_EQ(fv(scatter(zeros({3}), 0, I({1, 1, 1}), F({5, 6, 7}, {3}))), (std::vector<float>{0, 7, 0}));
  EXPECT_EQ(fv(index_copy(zeros({3, 2}), 0, I({2, 2}), F({1, 2, 3, 4}, {2, 2}))),
            (std::vector<float>{0, 0, 0, 0, 3, 4}));
  // Large inputs: identical bits with 1 and 2 threads.
  int64_t n = 200000, bins = 37;
  Tensor src = tensor(rnd(n, 5), {n});
  Tensor idx = tensor(rnd_idx(n, bins, 6), {n});
  Tensor src2 = tensor(rnd(n * 2, 7), {2, n});
  Tensor idx2 = tensor(rnd_idx(n * 2, bins, 8), {2, n});
  auto run = [&] {
    return std::array<Tensor, 4>{scatter_add(zeros({bins}), 0, idx, src), index_add(zeros({bins}), 0, idx, src),
                                 scatter_reduce(zeros({2, bins}), 1, idx2, src2, "mean", false),
                                 index_put(zeros({bins}), {idx}, src, true)};
  };
  auto [a1, b1, c1, d1] = test::with_threads(1, run);
  auto [a2, b2, c2, d2] = test::with_threads(2, run);
  EXPECT_TRUE(same_bits(a1, a2));
  EXPECT_TRUE(same_bits(b1, b2));
  EXPECT_TRUE(same_bits(c1, c2));
  EXPECT_TRUE(same_bits(d1, d2));
  // And equal to a sequential sum in index order.
  auto sv = fv(src);
  auto ix = iv(idx);
  std::vector<float> ref(static_cast<size_t>(bins), 0.f);
  for (int64_t k = 0; k < n; ++k) ref[static_cast<size_t>(ix[static_cast<size_t>(k)])] += sv[static_cast<size_t>(k)];
  EXPECT_EQ(fv(a1), ref);
  EXPECT_EQ(fv(b1), ref);
  EXPECT_EQ(fv(d1), ref);
}

TEST(Index, ScatterReduceMatchesNaive) {
  Shape xs{4, 5}, is{3, 4};
  auto xv = rnd(20, 11);
  auto sv = rnd(30, 12);
  Tensor x = tensor(xv, xs);
  Tensor src = tensor(sv, {5, 6}).t().narrow(0, 1, 4);  // [4, 5] view with strides (1, 6)
  for (int64_t dim = 0; dim < 2; ++dim) {
    auto idx = rnd_idx(12, xs[static_cast<size_t>(dim)], 13 + static_cast<uint32_t>(dim));
    Tensor it = tensor(idx, is);
    auto s_host = src.contiguous().to_vector<float>();  // [4, 5]
    for (const char* red : {"sum", "prod", "mean", "amax", "amin"}) {
      for (bool self : {true, false}) {
        std::vector<double> acc(xv.begin(), xv.end());
        std::vector<int> cnt(20, 0);
        for (int64_t p = 0; p < 12; ++p) {
          auto m = unravel(p, is);
          float s = s_host[static_cast<size_t>(m[0] * 5 + m[1])];
          m[static_cast<size_t>(dim)] = idx[static_cast<size_t>(p)];
          size_t q = static_cast<size_t>(ravel(m, xs));
          std::string r = red;
          if (cnt[q] == 0 && !self)
            acc[q] = s;
          else if (r == "sum" || r == "mean")
            acc[q] += s;
          else if (r == "prod")
            acc[q] *= s;
          else if (r == "amax")
            acc[q] = std::max<double>(acc[q], s);
          else
            acc[q] = std::min<double>(acc[q], s);
          cnt[q]++;
        }
        if (std::string(red) == "mean")
          for (size_t q = 0; q < 20; ++q)
            if (cnt[q]) acc[q] /= cnt[q] + (self ? 1 : 0);
        auto got = fv(scatter_reduce(x, dim, it, src, red, self));
        for (size_t q = 0; q < 20; ++q)
          ASSERT_NEAR(got[q], acc[q], 1e-5) << red << " self=" << self << " dim=" << dim << " q=" << q;
      }
    }
  }
  // amax propagates NaN.
  auto nanr = fv(scatter_reduce(zeros({2}), 0, I({0, 0}), F({NAN, 1.f}, {2}), "amax"));
  EXPECT_TRUE(std::isnan(nanr[0]));
}

TEST(Index, ScatterDtypesAndErrors) {
  for (DType dt : {DType::I8, DType::I64, DType::F16, DType::BF16, DType::F64, DType::U8}) {
    Tensor r = scatter_add(zeros({2, 3}, {.dtype = dt}), 1, I({0, 0, 2}, {1, 3}), ones({1, 3}, {.dtype = dt}));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{2, 0, 1, 0, 0, 0})) << dtype_name(dt);
  }
  Tensor b = scatter(zeros({3}, {.dtype = DType::Bool}), 0, I({2}), true);
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
  Tensor x = zeros({2, 3});
  EXPECT_ERROR(scatter(x, 1, I({3}, {1, 1}), ones({1, 1})), "[scatter] index 3 is out of range for dim 1 with size 3");
  EXPECT_ERROR(scatter(x, 1, I({-1}, {1, 1}), ones({1, 1})), "index -1");
  EXPECT_ERROR(scatter(x, 1, I({0}, {1, 1}), ones({1, 1}, {.dtype = DType::F64})), "dtype");
  EXPECT_ERROR(scatter(x, 1, I({0, 0}, {1, 2}), ones({1, 1})), "exceeds source shape");
  EXPECT_ERROR(scatter(x, 1, I({0}), ones({1})), "same number of dims");
  EXPECT_ERROR(scatter(x, 1, I({0}, {1, 1}), 1.0, "max"), "[scatter] reduce");
  EXPECT_ERROR(scatter_reduce(x, 1, I({0}, {1, 1}), ones({1, 1}), "median"), "[scatter_reduce]");
  EXPECT_ERROR(scatter_add(x, 0, F({0}, {1, 1}), ones({1, 1})), "[scatter_add]");
  // A bad index leaves nothing half-written: the input is untouched and the error is thrown first.
  EXPECT_EQ(fv(x), std::vector<float>(6, 0.f));
  // Empty index: a copy of the input.
  EXPECT_EQ(fv(scatter(ones({2, 2}), 0, tensor<int64_t>(std::vector<int64_t>{}, {0, 2}), ones({0, 2}))),
            std::vector<float>(4, 1.f));
}

TEST(Index, IndexAddCopyFill) {
  Tensor t = F({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  Tensor i = I({0, 4, 2});
  EXPECT_EQ(fv(index_add(ones({5, 3}), 0, i, t)), (std::vector<float>{2, 3, 4, 1, 1, 1, 8, 9, 10, 1, 1, 1, 5, 6, 7}));
  EXPECT_EQ(fv(index_add(ones({5, 3}), 0, i, t, -2)),
            (std::vector<float>{-1, -3, -5, 1, 1, 1, -13, -15, -17, 1, 1, 1, -7, -9, -11}));
  EXPECT_EQ(fv(index_copy(zeros({5, 3}), 0, i, t)), (std::vector<float>{1, 2, 3, 0, 0, 0, 7, 8, 9, 0, 0, 0, 4, 5, 6}));
  EXPECT_EQ(fv(index_fill(t, 1, I({0, 2}), -1)), (std::vector<float>{-1, 2, -1, -1, 5, -1, -1, 8, -1}));
  // Along dim 1 of a non-contiguous input, with duplicates accumulating.
  Tensor x = tensor(iota(6), {3, 2}).t();  // [2, 3]
  EXPECT_EQ(fv(index_add(x, -1, I({1, 1}), F({1, 2, 3, 4}, {2, 2}))), (std::vector<float>{0, 5, 4, 1, 10, 5}));
  Tensor xi = tensor<int32_t>({1, 2, 3}, {3});
  EXPECT_EQ(index_add(xi, 0, I({2}), tensor<int32_t>({5}, {1}), 3).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 18}));
  EXPECT_ERROR(index_add(xi, 0, I({2}), tensor<int32_t>({5}, {1}), 0.5), "[index_add] alpha");
  EXPECT_ERROR(index_add(ones({3}), 0, I({3}), ones({1})), "[index_add] index 3 is out of range");
  EXPECT_ERROR(index_copy(ones({3, 2}), 0, I({0}), ones({1, 3})), "[index_copy] source of shape");
  EXPECT_ERROR(index_fill(ones({3}), 0, I({-4}), 1), "[index_fill]");
  EXPECT_EQ(fv(index_fill(zeros({3}), 0, I({-1}), 2)), (std::vector<float>{0, 0, 2}));  // wraps, as PyTorch
  EXPECT_ERROR(index_copy(ones({3}), 0, I({-1}), ones({1})), "[index_copy] index -1");
  EXPECT_EQ(index_fill(ones({3}, {.dtype = DType::I64}), 0, tensor<int64_t>(std::vector<int64_t>{}, {0}), 5)
                .to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 1}));
}

// ---- triangles, diagonals, one_hot --------------------------------------------------------------
TEST(Index, TrilTriuBatchedMatchNaive) {
  Shape s{2, 4, 5};
  auto xv = rnd(40, 21);
  Tensor x = tensor(xv, s);
  for (int64_t k : {-2, -1, 0, 1, 3}) {
    auto lo = fv(tril(x, k)), up = fv(triu(x, k));
    for (int64_t p = 0; p < 40; ++p) {
      auto m = unravel(p, s);
      bool in_lo = m[2] - m[1] <= k, in_up = m[2] - m[1] >= k;
      EXPECT_EQ(lo[static_cast<size_t>(p)], in_lo ? xv[static_cast<size_t>(p)] : 0.f);
      EXPECT_EQ(up[static_cast<size_t>(p)], in_up ? xv[static_cast<size_t>(p)] : 0.f);
    }
  }
  Tensor xt = x.transpose(1, 2);  // non-contiguous [2, 5, 4]
  EXPECT_EQ(fv(tril(xt)), fv(tril(xt.contiguous())));
  Tensor b = ones({3, 3}, {.dtype = DType::Bool});
  EXPECT_EQ(triu(b).dtype(), DType::Bool);
  EXPECT_EQ(triu(b).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(tril(ones({2, 2}, {.dtype = DType::I32})).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 1, 1}));
  EXPECT_ERROR(tril(ones({3})), "[tril]");
  EXPECT_ERROR(triu(ones({3})), "[triu]");
}

TEST(Index, DiagDiagEmbedDiagonal) {
  Tensor v = F({1, 2, 3}, {3});
  EXPECT_EQ(fv(diag(v)), (std::vector<float>{1, 0, 0, 0, 2, 0, 0, 0, 3}));
  Tensor d1 = diag(v, 1);
  EXPECT_EQ(d1.shape(), (Shape{4, 4}));
  EXPECT_EQ(fv(d1), (std::vector<float>{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0}));
  EXPECT_EQ(fv(diag(v, -1))[4], 1.f);
  Tensor m = tensor(iota(12), {3, 4});
  EXPECT_EQ(fv(diag(m)), (std::vector<float>{0, 5, 10}));
  EXPECT_EQ(fv(diag(m, 1)), (std::vector<float>{1, 6, 11}));
  EXPECT_EQ(fv(diag(m, -2)), (std::vector<float>{8}));
  EXPECT_FALSE(diag(m).is_same_storage(m));
  EXPECT_TRUE(diagonal(m, 1).is_same_storage(m));
  EXPECT_ERROR(diag(ones({2, 2, 2})), "[diag]");
  Tensor x = F({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor e = diag_embed(x);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(fv(e), (std::vector<float>{1, 0, 0, 0, 2, 0, 0, 0, 3, 4, 0, 0, 0, 5, 0, 0, 0, 6}));
  Tensor e2 = diag_embed(x, 1, 0, 2);  // [4, 2, 4]: out[i, b, i+1] = x[b, i]
  EXPECT_EQ(e2.shape(), (Shape{4, 2, 4}));
  auto ev = fv(e2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(ev[static_cast<size_t>(i * 8 + b * 4 + i + 1)], fv(x)[static_cast<size_t>(b * 3 + i)]);
  EXPECT_EQ(hsum(e2), 21);
  EXPECT_ERROR(diag_embed(x, 0, 1, -2), "[diag_embed]");
}

TEST(Index, OneHot) {
  Tensor o = one_hot(I({0, 2, 1}));
  EXPECT_EQ(o.dtype(), DType::I64);
  EXPECT_EQ(o.shape(), (Shape{3, 3}));
  EXPECT_EQ(iv(o), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0}));
  Tensor o5 = one_hot(tensor<int32_t>({1, 0, 3, 4}, {2, 2}), 5);
  EXPECT_EQ(o5.shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(iv(o5)[1], 1);
  EXPECT_EQ(iv(o5)[5 * 3 + 4], 1);
  EXPECT_EQ(hsum(o5), 4);
  EXPECT_EQ(one_hot(scalar_tensor(int64_t{2}), 4).shape(), (Shape{4}));
  EXPECT_EQ(one_hot(tensor<int64_t>(std::vector<int64_t>{}, {0}), 3).shape(), (Shape{0, 3}));
  EXPECT_ERROR(one_hot(I({0, 3}), 3), "[one_hot] index 3 is out of range");
  EXPECT_ERROR(one_hot(I({-1}), 3), "[one_hot]");
  EXPECT_ERROR(one_hot(F({1}, {1})), "[one_hot]");
  EXPECT_ERROR(one_hot(tensor<int64_t>(std::vector<int64_t>{}, {0})), "empty");
}

// ---- data-dependent sizes ---------------------------------------------------------------------------
TEST(Index, NonzeroAndTuple) {
  EXPECT_EQ(iv(nonzero(I({1, 1, 1, 0, 1}))), (std::vector<int64_t>{0, 1, 2, 4}));
  EXPECT_EQ(nonzero(I({1, 1, 1, 0, 1})).shape(), (Shape{4, 1}));
  Tensor m = F({0.6f, 0, 0, 0, 0, 0.4f, 0, 0, 0, 0, 1.2f, 0, 0, 0, 0, -0.4f}, {4, 4});
  EXPECT_EQ(iv(nonzero(m)), (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(iv(nonzero(F({0, NAN, 0.1f}, {3}))), (std::vector<int64_t>{1, 2}));
  auto tup = nonzero_tuple(m.t());
  ASSERT_EQ(tup.size(), 2u);
  EXPECT_EQ(iv(tup[0]), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(nonzero(scalar_tensor(3.f)).shape(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(scalar_tensor(0.f)).shape(), (Shape{0, 0}));
  EXPECT_EQ(nonzero(zeros({0, 3})).shape(), (Shape{0, 2}));
  EXPECT_EQ(nonzero_tuple(scalar_tensor(3.f)).size(), 1u);
  Tensor n = zeros({3}, {.dtype = f32, .device = Device::null()});
  EXPECT_ERROR(nonzero(n), "[nonzero]");
  EXPECT_ERROR(masked_select(n, n > 0), "[masked_select]");
}

TEST(Index, MaskedSelectAndScatter) {
  auto xv = rnd(12, 31);
  Tensor x = tensor(xv, {3, 4});
  Tensor mask = x > 0;
  std::vector<float> ref;
  for (float v : xv)
    if (v > 0) ref.push_back(v);
  EXPECT_EQ(fv(masked_select(x, mask)), ref);
  // Broadcast mask [4] against x [3, 4]; non-contiguous x.
  Tensor row = tensor({true, false, false, true}, {4});
  Tensor xt = tensor(xv, {4, 3}).t();
  auto xtc = fv(xt.contiguous());
  std::vector<float> ref2;
  for (int r = 0; r < 3; ++r)
    ref2.insert(ref2.end(), {xtc[static_cast<size_t>(r * 4)], xtc[static_cast<size_t>(r * 4 + 3)]});
  EXPECT_EQ(fv(masked_select(xt, row)), ref2);
  EXPECT_ERROR(masked_select(x, I({1, 0, 0, 1})), "[masked_select] mask must be bool");
  Tensor sm = tensor({false, false, false, true, true, true, true, false, true, true}, {2, 5});
  Tensor src = tensor(iota(10), {2, 5});
  EXPECT_EQ(fv(masked_scatter(zeros({2, 5}), sm, src)), (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 0, 4, 5}));
  EXPECT_ERROR(masked_scatter(zeros({2, 5}), sm, F({1, 2}, {2})), "[masked_scatter]");
  EXPECT_ERROR(masked_scatter(zeros({2, 5}), sm, src.to(DType::F64)), "dtype");
  EXPECT_EQ(masked_select(x, zeros({3, 4}, {.dtype = DType::Bool})).shape(), (Shape{0}));
}

// ---- Tensor::index and index_put_ ------------------------------------------------------------------
TEST(Index, BasicIndexingGivesViews) {
  Tensor x = tensor(iota(210), {5, 6, 7});
  Tensor v = x.index({1, Slice{0, 2}});
  EXPECT_EQ(v.shape(), (Shape{2, 7}));
  EXPECT_TRUE(v.is_same_storage(x));
  EXPECT_EQ(fv(v.contiguous())[8], 42.f + 8);  // x[1][1][1]
  Tensor w = x.index({Ellipsis, -1});
  EXPECT_EQ(w.shape(), (Shape{5, 6}));
  EXPECT_EQ(fv(w.contiguous())[0], 6.f);
  Tensor n = x.index({None, Slice{}, None, 2});
  EXPECT_EQ(n.shape(), (Shape{1, 5, 1, 7}));
  Tensor s = x.index({Slice{-2, std::nullopt}, Slice{std::nullopt, std::nullopt, 2}, 3});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(fv(s.contiguous()), (std::vector<float>{129, 143, 157, 171, 185, 199}));
  EXPECT_TRUE(x.index({Ellipsis}).is_same_storage(x));
  EXPECT_EQ(scalar_tensor(1.f).index({None}).shape(), (Shape{1}));
  EXPECT_ERROR(x.index({0, 0, 0, 0}), "[index] too many indices");
  EXPECT_ERROR(x.index({5}), "[index] index 5 is out of range");
  EXPECT_ERROR(x.index({Ellipsis, Ellipsis}), "[index]");
  EXPECT_ERROR(x.index({Slice{0, 2, 0}}), "[index] slice step");
}

TEST(Index, AdvancedIndexingShapesAndValues) {
  Shape s{5, 6, 7};
  Tensor x = tensor(iota(210), s);
  Tensor a = I({0, 4, 2, 1, 3, -1}, {2, 3});
  std::vector<int64_t> av{0, 4, 2, 1, 3, 6};  // -1 wraps to 6 on a size-7 dim; on size 5 -> 4
  // Separated advanced indices: B first.
  Tensor r = x.index({a, Slice{}, a});
  ASSERT_EQ(r.shape(), (Shape{2, 3, 6}));
  auto rv = fv(r);
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t j = 0; j < 6; ++j) {
      int64_t i0 = av[static_cast<size_t>(b)] == 6 ? 4 : av[static_cast<size_t>(b)], i2 = av[static_cast<size_t>(b)];
      ASSERT_EQ(rv[static_cast<size_t>(b * 6 + j)], static_cast<float>(i0 * 42 + j * 7 + i2));
    }
  // Adjacent: B in place.
  Tensor adj = x.index({Slice{}, a, a});
  ASSERT_EQ(adj.shape(), (Shape{5, 2, 3}));
  auto jv = fv(adj);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t b = 0; b < 6; ++b) {
      int64_t i1 = av[static_cast<size_t>(b)] == 6 ? 5 : av[static_cast<size_t>(b)], i2 = av[static_cast<size_t>(b)];
      ASSERT_EQ(jv[static_cast<size_t>(i * 6 + b)], static_cast<float>(i * 42 + i1 * 7 + i2));
    }
  // Broadcasting index tensors: [2, 1] and [3] -> [2, 3].
  Tensor bc = x.index({I({1, 3}, {2, 1}), I({0, 2, 5})});
  ASSERT_EQ(bc.shape(), (Shape{2, 3, 7}));
  EXPECT_EQ(fv(bc)[static_cast<size_t>((1 * 3 + 2) * 7 + 4)], 3.f * 42 + 5 * 7 + 4);
  // One index tensor in the middle and at the end.
  EXPECT_EQ(x.index({Slice{}, a}).shape(), (Shape{5, 2, 3, 7}));
  EXPECT_EQ(x.index({Ellipsis, I({1, 2})}).shape(), (Shape{5, 6, 2}));
  EXPECT_EQ(fv(x.index({Ellipsis, I({1, -1})}))[1], 6.f);
  // Integers are basic (as in PyTorch): x[0, :, a] -> [6, 2, 3].
  EXPECT_EQ(x.index({0, Slice{}, a}).shape(), (Shape{6, 2, 3}));
  EXPECT_EQ(x.index({a, 0, a}).shape(), (Shape{2, 3}));
  EXPECT_EQ(x.index({None, a, Slice{}, 1}).shape(), (Shape{1, 2, 3, 6}));
  // 0-d integer tensor.
  EXPECT_EQ(x.index({scalar_tensor(int64_t{2})}).shape(), (Shape{6, 7}));
  // Non-contiguous source.
  Tensor xt = x.transpose(0, 2);  // [7, 6, 5]
  EXPECT_EQ(fv(xt.index({I({1, 2}), Slice{}, I({0, 4})})), fv(xt.contiguous().index({I({1, 2}), Slice{}, I({0, 4})})));
  // Errors name [index], the bad value and the size.
  std::string m = error_of([&] { x.index({Slice{}, Slice{}, I({0, 7})}); });
  EXPECT_NE(m.find("[index] index 7 is out of range for dim 2 with size 7"), std::string::npos) << m;
  m = error_of([&] { x.index({I({0}), Slice{}, I({-8})}); });
  EXPECT_NE(m.find("[index] index -8 is out of range for dim 2 with size 7"), std::string::npos) << m;
  EXPECT_ERROR(x.index({F({0.f}, {1})}), "[index] tensors used as indices must be integer or bool");
  EXPECT_ERROR(x.index({I({0, 1}), I({0, 1, 2})}), "[index]");
  EXPECT_EQ(x.index({tensor<int64_t>(std::vector<int64_t>{}, {0})}).shape(), (Shape{0, 6, 7}));
}

TEST(Index, BoolMaskIndexing) {
  Tensor x = tensor(iota(24), {2, 3, 4});
  Tensor m2 = tensor({true, false, true, false, false, true}, {2, 3});
  Tensor r = x.index({m2});
  ASSERT_EQ(r.shape(), (Shape{3, 4}));
  EXPECT_EQ(fv(r), (std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23}));
  Tensor m1 = tensor({false, true, true, false}, {4});
  Tensor c = x.index({Slice{}, Slice{}, m1});
  ASSERT_EQ(c.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(fv(c)[0], 1.f);
  EXPECT_EQ(fv(c)[1], 2.f);
  EXPECT_EQ(fv(x.index({x > 20})), (std::vector<float>{21, 22, 23}));
  EXPECT_EQ(x.index({scalar_tensor(true)}).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.index({scalar_tensor(false)}).shape(), (Shape{0, 2, 3, 4}));
  EXPECT_ERROR(x.index({tensor({true, false, true}, {3})}), "[index] the shape of the mask");
}

TEST(Index, IndexPutInPlaceAndFree) {
  Tensor x = tensor(iota(12), {3, 4});
  x.index_put_({Slice{0, 2}}, 0.f);
  EXPECT_EQ(fv(x), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 8, 9, 10, 11}));
  x.index_put_({Slice{}, 1}, F({7, 8, 9}, {3}));
  EXPECT_EQ(fv(x.index({Slice{}, 1}).contiguous()), (std::vector<float>{7, 8, 9}));
  // On a view: writes reach the base tensor.
  Tensor base = zeros({4, 4});
  Tensor view = base.t();
  view.index_put_({I({0, 3}), I({1, 2})}, F({5, 6}, {2}));
  auto bv = fv(base);
  EXPECT_EQ(bv[1 * 4 + 0], 5.f);  // view[0][1] = base[1][0]
  EXPECT_EQ(bv[2 * 4 + 3], 6.f);
  EXPECT_EQ(hsum(base), 11);
  // Mask assignment (relu-like), values cast from i64.
  Tensor y = tensor(rnd(20, 41), {4, 5});
  Tensor y2 = y.clone();
  y2.index_put_({y2 < 0}, 0);
  for (float v : fv(y2)) EXPECT_GE(v, 0.f);
  EXPECT_EQ(fv(y2), fv(where(y < 0, scalar_tensor(0.f), y)));
  // Separated advanced indices with a value per [B, 5] row.
  Tensor z = zeros({4, 5, 6});
  Tensor vals = tensor(iota(10), {2, 5});
  z.index_put_({I({1, 3}), Slice{}, I({0, -1})}, vals);
  auto zv = fv(z);
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(zv[static_cast<size_t>(1 * 30 + j * 6 + 0)], static_cast<float>(j));
    EXPECT_EQ(zv[static_cast<size_t>(3 * 30 + j * 6 + 5)], static_cast<float>(5 + j));
  }
  EXPECT_EQ(hsum(z), 45);
  // Adjacent in the middle: z2[:, [0, 2], [1, 3]] = [[1, 2]] (broadcast over dim 0).
  Tensor z2 = zeros({3, 4, 5});
  z2.index_put_({Slice{}, I({0, 2}), I({1, 3})}, F({1, 2}, {1, 2}));
  EXPECT_EQ(fv(z2.index({Slice{}, I({0, 2}), I({1, 3})})), (std::vector<float>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(hsum(z2), 9);
  // Free index_put: duplicates accumulate in order, or the last wins.
  Tensor e = zeros({5});
  EXPECT_EQ(fv(index_put(e, {I({0, 0, 2})}, F({1, 2, 3}, {3}), true)), (std::vector<float>{3, 0, 3, 0, 0}));
  EXPECT_EQ(fv(index_put(e, {I({0, 0, 2})}, F({1, 2, 3}, {3}))), (std::vector<float>{2, 0, 3, 0, 0}));
  EXPECT_EQ(fv(e), std::vector<float>(5, 0.f));  // out of place
  Tensor g = ones({2, 3});
  EXPECT_EQ(fv(index_put(g, {Tensor(), I({2, 2})}, F({5}, {1}), true)), (std::vector<float>{1, 1, 11, 1, 1, 11}));
  EXPECT_EQ(fv(index_put(g, {g > 0}, scalar_tensor(3.f))), std::vector<float>(6, 3.f));
  EXPECT_ERROR(index_put(g, {I({0})}, F({1}, {1}).to(DType::F64)), "[index_put] values dtype");
  EXPECT_ERROR(index_put(g, {I({2})}, F({1}, {1})), "[index_put] index 2 is out of range for dim 0 with size 2");
  EXPECT_ERROR(g.index_put_({I({0})}, F({1, 2}, {2})), "[index_put_] values of shape");
  EXPECT_EQ(fv(g), std::vector<float>(6, 1.f));
}

TEST(Index, NullDeviceTracksShapes) {
  Device nd = Device::null();
  Tensor x = zeros({4, 5}, {.dtype = f32, .device = nd});
  Tensor i = zeros({3}, {.dtype = i64, .device = nd});
  EXPECT_EQ(index_select(x, 1, i).shape(), (Shape{4, 3}));
  EXPECT_EQ(gather(x, 0, zeros({2, 5}, {.dtype = i64, .device = nd})).shape(), (Shape{2, 5}));
  EXPECT_EQ(x.index({i, Slice{}}).shape(), (Shape{3, 5}));
  EXPECT_EQ(embedding(zeros({2, 2}, {.dtype = i64, .device = nd}), x).shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(tril(x).shape(), (Shape{4, 5}));
  EXPECT_ERROR(x.index({x > 0}), "[index]");
  EXPECT_EQ(masked_scatter(x, x > 0, x).shape(), (Shape{4, 5}));  // shape does not depend on values
}

TEST(Index, IndexPutTwoIndicesMatchesNaive) {
  Shape s{4, 5, 6};
  auto xv = rnd(120, 51);
  Tensor x = tensor(xv, s);
  auto i0 = rnd_idx(10, 4, 52), i2 = rnd_idx(10, 6, 53);
  auto vv = rnd(50, 54);
  Tensor vals = tensor(vv, {10, 5});
  for (bool acc : {true, false}) {
    std::vector<float> ref = xv;
    for (int64_t b = 0; b < 10; ++b)
      for (int64_t j = 0; j < 5; ++j) {
        size_t q = static_cast<size_t>(i0[static_cast<size_t>(b)] * 30 + j * 6 + i2[static_cast<size_t>(b)]);
        float v = vv[static_cast<size_t>(b * 5 + j)];
        ref[q] = acc ? ref[q] + v : v;
      }
    Tensor r = index_put(x.transpose(0, 2).contiguous().transpose(0, 2), {tensor(i0, {10}), Tensor(), tensor(i2, {10})},
                         vals, acc);
    EXPECT_EQ(fv(r), ref) << "accumulate=" << acc;
  }
  // u8 index tensors act as masks (as in PyTorch); i32 index tensors as integers.
  Tensor m = tensor<uint8_t>({1, 0, 0, 1}, {4});
  EXPECT_EQ(x.index({m}).shape(), (Shape{2, 5, 6}));
  EXPECT_EQ(x.index({tensor<int32_t>({3, 3, 3}, {3})}).shape(), (Shape{3, 5, 6}));
}

TEST(Index, ParallelSplitsGiveIdenticalResults) {
  // Many lines: the work is split over threads; results must not depend on the split.
  int64_t rows = 64, cols = 4096, m = 300;
  Tensor src = tensor(rnd(m * cols, 61), {m, cols});
  Tensor idx = tensor(rnd_idx(m, rows, 62), {m});
  Tensor idx2 = tensor(rnd_idx(m * cols, rows, 63), {m, cols});
  Tensor big = tensor(rnd(rows * cols, 64), {rows, cols});
  std::vector<Tensor> r[2];
  for (int t = 0; t < 2; ++t) {
    r[t] = test::with_threads(t + 1, [&]() -> std::vector<Tensor> {
      return {index_add(zeros({rows, cols}), 0, idx, src),
              scatter_add(zeros({rows, cols}), 0, idx2, src),
              scatter_reduce(big, 0, idx2, src, "mean", false),
              index_copy(zeros({rows, cols}), 0, idx, src),
              gather(big, 0, idx2),
              index_select(big.t(), 1, idx),
              big.index({idx, Slice{0, cols, 3}})};
    });
  }
  for (size_t k = 0; k < r[0].size(); ++k) EXPECT_TRUE(same_bits(r[0][k], r[1][k])) << "result " << k;
  // index_add against a naive sum in index order.
  auto sv = fv(src);
  auto ix = iv(idx);
  std::vector<float> ref(static_cast<size_t>(rows * cols), 0.f);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t c = 0; c < cols; ++c)
      ref[static_cast<size_t>(ix[static_cast<size_t>(j)] * cols + c)] += sv[static_cast<size_t>(j * cols + c)];
  EXPECT_EQ(fv(r[0][0]), ref);
}
