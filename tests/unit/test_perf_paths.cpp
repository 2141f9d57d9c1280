// SPDX-License-Identifier: MIT OR Apache-2.0
// Fast paths of the CPU elementwise and random kernels (issue 8): each must give bit-identical
// results to the plain path it replaces. Transposed-view binary / where ops are checked
// against the same op on contiguous copies (elementwise, so equal bit for bit); bernoulli is
// checked against the Philox stream computed here element by element.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "core/rng.h"

using namespace kiln;

namespace {

template <class T>
bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<T>();
  auto y = b.to_vector<T>();
  if constexpr (std::is_same_v<T, bool>)
    return x == y;
  else
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

}  // namespace

TEST(PerfPaths, BinaryOnTransposedViewsMatchesContiguous) {
  manual_seed(3);
  // Odd sizes: partial tiles at both edges.
  for (auto [r, c] : {std::pair<int64_t, int64_t>{517, 787}, {64, 64}, {33, 200}}) {
    Tensor g = randn({c, r}).t();  // [r, c] with strides (1, r)
    Tensor h = randn({r, c});
    Tensor gc = g.contiguous();
    EXPECT_TRUE(same_bits<float>(mul(g, 0.01), mul(gc, 0.01)));
    EXPECT_TRUE(same_bits<float>(sub(h, g), sub(h, gc)));
    EXPECT_TRUE(same_bits<float>(div(g, h), div(gc, h)));
    EXPECT_TRUE(same_bits<float>(mul(g, g), mul(gc, gc)));
    EXPECT_TRUE(same_bits<bool>(gt(g, 0), gt(gc, 0)));
    EXPECT_TRUE(same_bits<bool>(gt(g, h), gt(gc, h)));
    Tensor gd = g.to(DType::F64), gdc = gd.contiguous();
    EXPECT_TRUE(same_bits<double>(mul(gd, 3.0), mul(gdc, 3.0)));
    EXPECT_TRUE(same_bits<double>(maximum(gd, gd.neg()), maximum(gdc, gdc.neg())));
    // In place into a contiguous tensor from a transposed one, and into a transposed one.
    Tensor p = h.clone(), pc = h.clone();
    p.sub_(g);
    pc.sub_(gc);
    EXPECT_TRUE(same_bits<float>(p, pc));
    Tensor q = randn({c, r}), qc = q.t().contiguous();
    Tensor qt = q.t();
    qt.mul_(h);
    qc.mul_(h);
    EXPECT_TRUE(same_bits<float>(qt, qc));
  }
}

// Binary arithmetic over a 2-d loop runs as one call per block of rows (a per-channel operand
// over small planes). Every element must be the single rounding of the exact result, which for
// f32 add, sub, mul and div is the f64 result rounded to f32: per-channel and per-row operands,
// both sides, flipped (negative strides) and sliced views, in place, rows of 1 to 70 on 1 and 2
// threads, and NaN / inf.
TEST(PerfPaths, BinaryRowBlocksMatchTheScalarDefinition) {
  const int saved = num_threads();
  manual_seed(12);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t plane : {1, 7, 16, 64, 70})
      for (int form = 0; form < 5; ++form) {
        Tensor x = randn({3, 5, plane}), c = randn({5, 1}) + 2;           // c away from 0 (division)
        if (form == 0) c = c.reshape({5, 1});                             // per channel
        if (form == 1) c = randn({plane}) + 2;                            // one row for every row
        if (form == 2) x = randn({3, 5, plane}).flip({1});                // negative row stride
        if (form == 3) x = randn({3, 5, plane + 3}).narrow(2, 1, plane);  // rows with gaps
        if (form == 4) x = full({3, 5, plane}, INFINITY).index_fill(2, tensor(std::vector<int64_t>{0}, Shape{1}), NAN);
        for (int op = 0; op < 4; ++op) {
          Tensor got = op == 0 ? x + c : op == 1 ? c - x : op == 2 ? x * c : x / c;
          Tensor xd = x.to(f64).expand(got.shape()), cd = c.to(f64).expand(got.shape());
          Tensor want = (op == 0 ? xd + cd : op == 1 ? cd - xd : op == 2 ? xd * cd : xd / cd).to(f32);
          EXPECT_TRUE(same_bits<float>(got, want)) << "plane " << plane << " form " << form << " op " << op;
        }
        Tensor y = x.clone();
        y.mul_(c);  // in place, the output one of the inputs
        EXPECT_TRUE(same_bits<float>(y, (x.to(f64) * c.to(f64)).to(f32))) << "in place, plane " << plane;
      }
  }
  set_num_threads(saved);
}

TEST(PerfPaths, WhereFastPathsMatchPlainSelect) {
  manual_seed(4);
  Tensor x = randn({300, 257});
  Tensor g = randn({300, 257});
  Tensor m = gt(x, 0);
  auto mv = m.to_vector<bool>();
  auto gv = g.to_vector<float>();
  auto w = where(m, g, 0).to_vector<float>();
  auto w2 = where(m, 0, g).to_vector<float>();
  auto w3 = where(m, g, x).to_vector<float>();
  auto xv = x.to_vector<float>();
  for (size_t i = 0; i < mv.size(); ++i) {
    ASSERT_EQ(w[i], mv[i] ? gv[i] : 0.f);
    ASSERT_EQ(w2[i], mv[i] ? 0.f : gv[i]);
    ASSERT_EQ(w3[i], mv[i] ? gv[i] : xv[i]);
  }
  // Other element sizes and a transposed operand.
  Tensor gd = g.to(DType::F64);
  auto wd = where(m, gd, -1.0).to_vector<double>();
  for (size_t i = 0; i < mv.size(); ++i) ASSERT_EQ(wd[i], mv[i] ? static_cast<double>(gv[i]) : -1.0);
  Tensor gt_ = randn({257, 300}).t();
  EXPECT_TRUE(same_bits<float>(where(m, gt_, 0), where(m, gt_.contiguous(), 0)));
  Tensor gh = g.to(DType::F16);
  EXPECT_TRUE(same_bits<float>(where(m, gh, 0).to(DType::F32), where(m, g, 0).to(DType::F16).to(DType::F32)));
}

TEST(PerfPaths, BernoulliFollowsThePhiloxStream) {
  manual_seed(11);
  const int64_t n = 10007;
  Tensor p = rand({n}, {.dtype = DType::F64});
  rng::GeneratorState st = rng::reserve(0);  // the state bernoulli will take
  auto b = bernoulli(p).to_vector<double>();
  auto pv = p.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    uint32_t w[4];
    rng::Philox::generate(st.seed, st.offset + static_cast<uint64_t>(i / 2), w);
    const int s = static_cast<int>(i % 2);
    const double u = rng::u01d(w[2 * s], w[2 * s + 1]);
    ASSERT_EQ(b[static_cast<size_t>(i)], u < pv[static_cast<size_t>(i)] ? 1.0 : 0.0) << "element " << i;
  }
}
