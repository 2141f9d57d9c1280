// SPDX-License-Identifier: MIT OR Apache-2.0
// Max pooling's CPU fast path (Note [Max pool fast path] in src/backends/cpu/pool.cpp) and the
// MaxUnpool-based gradient for windows that cannot overlap (Note [Pool gradients] in
// src/ops/nn_grad_pool.cpp): values and indices bitwise against a naive reference and against
// the generic path (reached through a view whose width stride is not 1), NaN (two payloads),
// signed zeros, ties and -inf included; gradients against the scatter_add formulation, a naive
// accumulation for overlapping windows, and finite differences.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gradcheck.h"
#include "simd_levels.h"
#include "test_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::gradcheck;
using kiln::test::gradgradcheck;
using kiln::test::rand_input;
using kiln::test::with_threads;
using TV = std::vector<Tensor>;

struct Win {
  Dims k, s, p, d;
  bool ceil = false;
};

/// PyTorch's pooling_output_shape.
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

/// Naive max pool of a contiguous [N, C, *sp] host array (1..3 spatial dims): windows in
/// row-major tap order, PyTorch's rule `v > max || isnan(v)`, index of the first valid element
/// when nothing wins.
template <class T>
void naive_max_pool(const std::vector<T>& x, const Shape& xs, const Win& w, std::vector<T>& vals,
                    std::vector<int64_t>& idx, Shape& out_shape) {
  const size_t nsp = xs.size() - 2, lead = 3 - nsp;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  out_shape = {xs[0], xs[1]};
  for (size_t i = 0; i < nsp; ++i) {
    in[lead + i] = xs[2 + i];
    k[lead + i] = w.k[i];
    s[lead + i] = w.s[i];
    p[lead + i] = w.p[i];
    d[lead + i] = w.d[i];
    out[lead + i] = pool_out(in[lead + i], k[lead + i], p[lead + i], s[lead + i], d[lead + i], w.ceil);
    out_shape.push_back(out[lead + i]);
  }
  const int64_t planes = xs[0] * xs[1], inpl = in[0] * in[1] * in[2], outpl = out[0] * out[1] * out[2];
  vals.assign(static_cast<size_t>(planes * outpl), T(0));
  idx.assign(static_cast<size_t>(planes * outpl), 0);
  auto first = [](int64_t st, int64_t dl) {
    while (st < 0) st += dl;
    return st;
  };
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t a = 0; a < out[0]; ++a)
      for (int64_t b = 0; b < out[1]; ++b)
        for (int64_t c = 0; c < out[2]; ++c) {
          const int64_t a0 = a * s[0] - p[0], b0 = b * s[1] - p[1], c0 = c * s[2] - p[2];
          T m = -std::numeric_limits<T>::infinity();
          int64_t mi = (first(a0, d[0]) * in[1] + first(b0, d[1])) * in[2] + first(c0, d[2]);
          for (int64_t i = 0; i < k[0]; ++i)
            for (int64_t j = 0; j < k[1]; ++j)
              for (int64_t t = 0; t < k[2]; ++t) {
                const int64_t ia = a0 + i * d[0], ib = b0 + j * d[1], ic = c0 + t * d[2];
                if (ia < 0 || ia >= in[0] || ib < 0 || ib >= in[1] || ic < 0 || ic >= in[2]) continue;
                const int64_t q = (ia * in[1] + ib) * in[2] + ic;
                const T v = x[static_cast<size_t>(pl * inpl + q)];
                if (v > m || std::isnan(v)) {
                  m = v;
                  mi = q;
                }
              }
          const auto o = static_cast<size_t>(pl * outpl + (a * out[1] + b) * out[2] + c);
          vals[o] = m;
          idx[o] = mi;
        }
}

/// Values with many ties, signed zeros, +-inf, whole -inf regions and NaNs of two payloads.
template <class T>
std::vector<T> nasty(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> pick(0, 99);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<T> v(static_cast<size_t>(n));
  const T inf = std::numeric_limits<T>::infinity();
  const T qnan = std::numeric_limits<T>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i) {
    const int r = pick(g);
    T x;
    if (r < 4)
      x = qnan;
    else if (r < 7)
      x = -qnan;  // a second NaN payload (sign bit set)
    else if (r < 17)
      x = -inf;
    else if (r < 19)
      x = inf;
    else if (r < 30)
      x = T(0);
    else if (r < 40)
      x = -T(0);
    else
      x = static_cast<T>(small(g));
    v[static_cast<size_t>(i)] = x;
  }
  // A run of -inf long enough to fill whole windows.
  for (int64_t i = n / 3; i < std::min<int64_t>(n, n / 3 + 12); ++i) v[static_cast<size_t>(i)] = -inf;
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    if (std::bit_cast<U>(a[i]) != std::bit_cast<U>(b[i])) return false;
  }
  return true;
}

/// x as a view with the given layout: 0 contiguous, 1 width stride 2 (generic path), 2 row /
/// depth stride doubled (width contiguous: fast path), 3 a channel slice of a wider tensor.
template <class T>
Tensor layout(const std::vector<T>& v, const Shape& s, int layout_kind) {
  const int64_t last = static_cast<int64_t>(s.size()) - 1;
  if (layout_kind == 0) return tensor(v, s);
  Shape big = s;
  int64_t dim = layout_kind == 1 ? last : layout_kind == 2 ? last - 1 : 1;
  if (s.size() == 3 && layout_kind == 2) dim = 1;  // 1-d: stride the channels instead
  big[static_cast<size_t>(dim)] *= 2;
  Tensor b = zeros(big, {.dtype = dtype_of_v<T>});
  // Write v into the even (or second-half) positions of dim.
  Tensor view = layout_kind == 3 ? b.narrow(dim, s[static_cast<size_t>(dim)], s[static_cast<size_t>(dim)])
                                 : b.slice(dim, 0, big[static_cast<size_t>(dim)], 2);
  view.copy_(tensor(v, s));
  return view;
}

template <class T>
void check_case(const Shape& s, const Win& w, uint32_t seed) {
  const std::vector<T> v = nasty<T>(shape_numel(s), seed);
  std::vector<T> rv;
  std::vector<int64_t> ri;
  Shape os;
  naive_max_pool(v, s, w, rv, ri, os);
  const F::MaxPoolOptions o{.stride = w.s, .padding = w.p, .dilation = w.d, .ceil_mode = w.ceil};
  const size_t nsp = s.size() - 2;
  auto pool = [&](const Tensor& x) {
    return nsp == 1   ? F::max_pool1d_with_indices(x, w.k, o)
           : nsp == 2 ? F::max_pool2d_with_indices(x, w.k, o)
                      : F::max_pool3d_with_indices(x, w.k, o);
  };
  auto pool_values = [&](const Tensor& x) {
    return nsp == 1 ? F::max_pool1d(x, w.k, o) : nsp == 2 ? F::max_pool2d(x, w.k, o) : F::max_pool3d(x, w.k, o);
  };
  const std::string what = ::testing::PrintToString(s) + " k" + ::testing::PrintToString(w.k) + " s" +
                           ::testing::PrintToString(w.s) + " p" + ::testing::PrintToString(w.p) + " d" +
                           ::testing::PrintToString(w.d) + (w.ceil ? " ceil" : "");
  // Values-only generic path: the same input through a width-strided view.
  const std::vector<T> generic_values = pool_values(layout(v, s, 1)).template to_vector<T>();
  for (int lk = 0; lk < 4; ++lk) {
    for (int threads : {1, 2}) {
      auto [vals, idx] = with_threads(threads, [&] { return pool(layout(v, s, lk)); });
      ASSERT_EQ(vals.shape(), os) << what;
      EXPECT_TRUE(same_bits(vals.template to_vector<T>(), rv)) << what << " layout " << lk << " threads " << threads;
      EXPECT_EQ(idx.template to_vector<int64_t>(), ri) << what << " layout " << lk << " threads " << threads;
      Tensor values_only = with_threads(threads, [&] { return pool_values(layout(v, s, lk)); });
      EXPECT_TRUE(same_bits(values_only.template to_vector<T>(), generic_values))
          << what << " values only, layout " << lk << " threads " << threads;
    }
  }
}

TEST(PoolFast, MaxPool2dMatchesNaiveAndGenericBitwise) {
  const std::vector<Shape> shapes = {{2, 3, 28, 28}, {1, 2, 14, 14}, {2, 2, 7, 9},  {1, 3, 5, 2},
                                     {1, 1, 3, 3},   {1, 2, 9, 37},  {1, 1, 2, 64}, {2, 1, 11, 1}};
  uint32_t seed = 1;
  for (const Shape& s : shapes)
    for (int64_t kh : {1, 2, 3})
      for (int64_t kw : {2, 3})
        for (int64_t sh : {1, 2, 3})
          for (int64_t ph : {int64_t{0}, kh / 2})
            for (int64_t pw : {int64_t{0}, kw / 2})
              for (bool ceil : {false, true}) {
                const Win w{{kh, kw}, {sh, 2}, {ph, pw}, {1, 1}, ceil};
                bool ok = true;
                for (size_t i = 0; i < 2; ++i) ok &= pool_out(s[2 + i], w.k[i], w.p[i], w.s[i], w.d[i], ceil) >= 1;
                if (!ok) continue;
                check_case<float>(s, w, seed++);
              }
}

/// The fast-path cases whose interior runs in the SIMD kernels (full vectors, the 4-lane
/// fallback, overlap at the end, the scalar loop for short rows).
void simd_cases() {
  uint32_t seed = 500;
  for (const Shape& s : {Shape{1, 2, 9, 37}, Shape{2, 3, 28, 28}, Shape{1, 2, 14, 14}, Shape{1, 1, 4, 64},
                         Shape{1, 1, 5, 11}, Shape{1, 1, 3, 7}})
    for (int64_t kh : {1, 2, 3})
      for (int64_t kw : {2, 3})
        for (int64_t pw : {int64_t{0}, kw / 2})
          for (bool ceil : {false, true}) {
            const Win w{{kh, kw}, {2, 2}, {0, pw}, {1, 1}, ceil};
            if (pool_out(s[2], kh, 0, 2, 1, ceil) < 1 || pool_out(s[3], kw, pw, 2, 1, ceil) < 1) continue;
            check_case<float>(s, w, seed++);
          }
}

TEST(PoolFast, EverySimdTargetMatchesNaive) { kiln::test::at_every_simd_level(simd_cases); }

TEST(PoolFast, OtherGeometriesMatchNaive) {
  // Height dilation (fast path), width dilation / stride 1 / kernel 4 (generic), f64, 1-d, 3-d.
  check_case<float>({2, 2, 9, 10}, {{2, 2}, {2, 2}, {0, 0}, {2, 1}, false}, 101);
  check_case<float>({2, 2, 9, 10}, {{3, 3}, {2, 2}, {1, 1}, {1, 2}, true}, 102);
  check_case<float>({2, 2, 9, 10}, {{3, 3}, {1, 1}, {1, 1}, {1, 1}, false}, 103);
  check_case<float>({2, 2, 9, 10}, {{4, 4}, {2, 2}, {2, 2}, {1, 1}, true}, 104);
  check_case<double>({2, 3, 13, 12}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false}, 105);
  check_case<double>({2, 3, 13, 12}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true}, 106);
  check_case<float>({2, 3, 17}, {{2}, {2}, {1}, {1}, true}, 107);
  check_case<float>({2, 3, 17}, {{3}, {2}, {0}, {1}, false}, 108);
  check_case<double>({2, 3, 16}, {{3}, {2}, {1}, {1}, false}, 109);
  check_case<float>({1, 2, 5, 6, 7}, {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false}, 110);
  check_case<float>({1, 2, 5, 6, 7}, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, true}, 111);
  check_case<float>({1, 2, 5, 6, 7}, {{1, 2, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, true}, 112);
}

TEST(PoolFast, TransposedInputMatchesContiguous) {
  Tensor x = randn({4, 5, 12, 10});
  Tensor xt = x.transpose(2, 3);  // width stride 12: generic path; its contiguous copy: fast path
  auto [a, ai] = F::max_pool2d_with_indices(xt, 2);
  auto [b, bi] = F::max_pool2d_with_indices(xt.contiguous(), 2);
  EXPECT_TRUE(a.equal(b));
  EXPECT_TRUE(ai.equal(bi));
}

// ---- gradient ----------------------------------------------------------------------------

/// The input gradient of a max pool via autodiff, and via zeros + scatter_add through the
/// indices (the formulation used for overlapping windows), for a fixed output gradient.
struct GradPair {
  Tensor autodiff, scatter;
};

template <class Pool>
GradPair grads(const Tensor& x0, Pool pool) {
  Tensor x = x0.to(Device::cpu().autodiff()).require_grad();
  auto [y, idx] = pool(x);
  Tensor gy = randn(y.shape(), {.dtype = x0.dtype()});
  Tensor gx = x.grad(y.backward(gy.to(Device::cpu().autodiff())));
  const int64_t N = x0.size(0), C = x0.size(1);
  Tensor flat_idx = idx.detach().to(Device::cpu()).reshape({N, C, -1});
  Tensor acc = zeros({N, C, x0.numel() / (N * C)}, {.dtype = x0.dtype()});
  Tensor ref = scatter_add(acc, 2, flat_idx, gy.reshape({N, C, -1})).reshape(x0.shape());
  return {gx.detach().to(Device::cpu()), ref};
}

TEST(PoolFast, UnpoolGradientEqualsScatterAdd) {
  Tensor x = randn({3, 4, 13, 11});
  for (const Win& w : {Win{{2, 2}, {2, 2}, {0, 0}, {1, 1}, false}, Win{{2, 2}, {2, 2}, {1, 1}, {1, 1}, true},
                       Win{{3, 2}, {3, 2}, {1, 0}, {1, 1}, true}, Win{{2, 3}, {3, 4}, {0, 1}, {2, 1}, false},
                       // overlapping: kernel 3 stride 2, and dilation 2 with stride 2
                       Win{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, Win{{2, 2}, {2, 2}, {0, 0}, {2, 1}, true}}) {
    const F::MaxPoolOptions o{.stride = w.s, .padding = w.p, .dilation = w.d, .ceil_mode = w.ceil};
    GradPair g = grads(x, [&](const Tensor& t) { return F::max_pool2d_with_indices(t, w.k, o); });
    EXPECT_TRUE(g.autodiff.equal(g.scatter)) << ::testing::PrintToString(w.k) << ::testing::PrintToString(w.s);
  }
  // Ties and -inf windows (integers, many equal values) with indices from the fast path.
  Tensor xi = (randn({2, 3, 10, 10}) * 1.5).round();
  GradPair gi = grads(xi, [](const Tensor& t) { return F::max_pool2d_with_indices(t, 2); });
  EXPECT_TRUE(gi.autodiff.equal(gi.scatter));
  // 1-d and 3-d, adaptive (divisible: MaxUnpool; not divisible: scatter_add), f64.
  Tensor x1 = randn({2, 3, 15}, {.dtype = DType::F64});
  GradPair g1 = grads(x1, [](const Tensor& t) { return F::max_pool1d_with_indices(t, 3, {.ceil_mode = true}); });
  EXPECT_TRUE(g1.autodiff.equal(g1.scatter));
  Tensor x3 = randn({1, 2, 4, 6, 5});
  GradPair g3 = grads(x3, [](const Tensor& t) { return F::max_pool3d_with_indices(t, 2, {.padding = 1}); });
  EXPECT_TRUE(g3.autodiff.equal(g3.scatter));
  for (Dims os : {Dims{7, 7}, Dims{4, 2}, Dims{5, 3}, Dims{1, 1}}) {
    Tensor xa = randn({2, 3, 28, 14});
    GradPair ga = grads(xa, [&](const Tensor& t) { return F::adaptive_max_pool2d_with_indices(t, os); });
    EXPECT_TRUE(ga.autodiff.equal(ga.scatter)) << ::testing::PrintToString(os);
  }
}

TEST(PoolFast, OverlappingWindowsAccumulate) {
  // kernel 3 stride 2 on a constant-free input: a shared argmax receives the sum of both
  // windows' gradients (checked against a host accumulation).
  Tensor x = randn({2, 2, 9, 9});
  Tensor xa = x.to(Device::cpu().autodiff()).require_grad();
  auto [y, idx] = F::max_pool2d_with_indices(xa, 3, {.stride = 2});
  Tensor gy = rand(y.shape()) + 0.5;
  Tensor gx = xa.grad(y.backward(gy.to(Device::cpu().autodiff()))).to(Device::cpu());
  std::vector<float> want(static_cast<size_t>(x.numel()), 0.f);
  const auto iv = idx.to(Device::cpu()).to_vector<int64_t>();
  const auto gv = gy.to_vector<float>();
  const int64_t outpl = y.size(2) * y.size(3), inpl = 81;
  for (size_t o = 0; o < iv.size(); ++o)
    want[static_cast<size_t>(static_cast<int64_t>(o) / outpl * inpl + iv[o])] += gv[o];
  EXPECT_TRUE(gx.allclose(tensor(want, x.shape()), 1e-6, 1e-6));
}

TEST(PoolFast, FiniteDifferences) {
  auto in = [](const Shape& s, uint64_t seed) { return rand_input(s, -1, 1, seed); };
  EXPECT_EQ(gradcheck([](const TV& v) { return F::max_pool2d(v[0], 2); }, {in({2, 3, 6, 8}, 1)}), "");
  EXPECT_EQ(
      gradcheck([](const TV& v) { return F::max_pool2d(v[0], 3, {.stride = 3, .padding = 1, .ceil_mode = true}); },
                {in({1, 2, 7, 8}, 2)}),
      "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::max_pool2d(v[0], 3, {.stride = 2}); }, {in({1, 2, 7, 9}, 3)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_max_pool2d(v[0], {3, 2}); }, {in({1, 2, 6, 8}, 4)}), "");
  // Gradients of gradients go through MaxUnpool's own rule (a gather).
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::max_pool2d(v[0], 2); }, {in({1, 2, 4, 6}, 5)}), "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::adaptive_max_pool1d(v[0], 3); }, {in({2, 2, 9}, 6)}), "");
}

TEST(PoolFast, UnpoolLayoutsAndBadIndices) {
  Tensor x = randn({2, 3, 8, 6});
  auto [v, i] = F::max_pool2d_with_indices(x, 2);
  // Non-contiguous values and indices (transposed twice) unpool like the contiguous ones.
  Tensor vt = v.transpose(2, 3).contiguous().transpose(2, 3);
  Tensor it = i.transpose(2, 3).contiguous().transpose(2, 3);
  EXPECT_TRUE(F::max_unpool2d(vt, it, 2).equal(F::max_unpool2d(v, i, 2)));
  std::vector<int64_t> iv = i.to_vector<int64_t>();
  iv[17] = -1;
  Tensor bad = tensor(iv, i.shape());
  kiln::test::expect_error([&] { F::max_unpool2d(v, bad, 2); }, "max_unpool2d", "Found an invalid max index: -1");
}

}  // namespace
