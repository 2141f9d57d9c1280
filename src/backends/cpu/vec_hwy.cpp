// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway kernels for contiguous f32 rows, compiled for several x86 targets and chosen at run
// time (SSE4, AVX2, AVX-512). Special values (NaN, +-inf, 0) follow the scalar reference.
#include <cmath>
#include <cstring>

#include "backends/cpu/vec.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/vec_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target, highway, contrib), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "backends/cpu/vec_math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::vec::HWY_NAMESPACE {  // hn, D and V come from vec_math-inl.h

bool ExpF32(const float* in, float* out, int64_t n) {
  Map1(in, out, n, [](D d, V x) { return ExpSafe(d, x); });
  return true;
}

bool UnaryF32(const ir::Op& op, const float* in, float* out, int64_t n, bool stream) {
  return VisitUnary(
      op.kind, op.attrs.reals.data(), [&](const auto& f) { Map1(in, out, n, f, stream); },
      [&](float lo, float hi, const auto& f, const auto& scalar) {
        MapGuarded(in, out, n, lo, hi, f, scalar, stream);
      });
}

bool BinaryF32(ir::OpKind kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n,
               bool stream) {
  using ir::OpKind;
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto run = [&](auto f) {
    int64_t i = 0;
    // A broadcast operand's one value (a contiguous one may be empty: n == 0 reads nothing).
    const V va0 = sa ? hn::Zero(d) : hn::Set(d, *a), vb0 = sb ? hn::Zero(d) : hn::Set(d, *b);
    if (stream)
      i = StreamVectors(out, n, [&](int64_t j) {
        if (sa) __builtin_prefetch(a + j + kPrefetch);
        if (sb) __builtin_prefetch(b + j + kPrefetch);
        return f(sa ? hn::LoadU(d, a + j) : va0, sb ? hn::LoadU(d, b + j) : vb0);
      });
    for (; i + N <= n; i += N) {
      if (sa) __builtin_prefetch(a + i + kPrefetch);
      if (sb) __builtin_prefetch(b + i + kPrefetch);
      __builtin_prefetch(out + i + kPrefetch, 1);
      V va = sa ? hn::LoadU(d, a + i) : va0;
      V vb = sb ? hn::LoadU(d, b + i) : vb0;
      hn::StoreU(f(va, vb), d, out + i);
    }
    for (; i < n; ++i) {
      V va = hn::Set(d, a[sa * i]), vb = hn::Set(d, b[sb * i]);
      out[i] = hn::GetLane(f(va, vb));
    }
  };
  switch (kind) {
    case OpKind::Add:
      run([](V x, V y) { return hn::Add(x, y); });
      return true;
    case OpKind::Sub:
      run([](V x, V y) { return hn::Sub(x, y); });
      return true;
    case OpKind::Mul:
      run([](V x, V y) { return hn::Mul(x, y); });
      return true;
    case OpKind::Div:
      run([](V x, V y) { return hn::Div(x, y); });
      return true;
    default:
      return false;
  }
}

bool BinaryRowsF32(ir::OpKind kind, const float* a, int64_t sa, int64_t ra, const float* b, int64_t sb, int64_t rb,
                   float* out, int64_t ro, int64_t rows, int64_t n, bool stream) {
  for (int64_t r = 0; r < rows; ++r)
    if (!BinaryF32(kind, a + r * ra, sa, b + r * rb, sb, out + r * ro, n, stream)) return false;
  return true;
}

float SumF32(const float* q, int64_t n) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  V a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    for (int64_t j = 0; j < 4 * N; j += 16) __builtin_prefetch(q + i + kPrefetch + j);  // each line
    a0 = hn::Add(a0, hn::LoadU(d, q + i));
    a1 = hn::Add(a1, hn::LoadU(d, q + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, q + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, q + i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, hn::LoadU(d, q + i));
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  float t = 0.f;
  for (; i < n; ++i) t += q[i];
  return s + t;
}

float ExtremeF32(const float* q, int64_t n, bool is_max) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  float r = q[0];
  bool nan = false;
  int64_t i = 0;
  if (n >= 2 * N) {
    V a0 = hn::LoadU(d, q), a1 = hn::LoadU(d, q + N);
    // Lanes that saw a NaN (Highway's Ne is an ordered compare, so test !(x == x)).
    V bad = hn::VecFromMask(d, hn::Not(hn::And(hn::Eq(a0, a0), hn::Eq(a1, a1))));
    for (i = 2 * N; i + 2 * N <= n; i += 2 * N) {
      __builtin_prefetch(q + i + kPrefetch);
      const V x0 = hn::LoadU(d, q + i), x1 = hn::LoadU(d, q + i + N);
      a0 = is_max ? hn::Max(a0, x0) : hn::Min(a0, x0);
      a1 = is_max ? hn::Max(a1, x1) : hn::Min(a1, x1);
      bad = hn::Or(bad, hn::VecFromMask(d, hn::Not(hn::And(hn::Eq(x0, x0), hn::Eq(x1, x1)))));
    }
    const V a = is_max ? hn::Max(a0, a1) : hn::Min(a0, a1);
    r = hn::GetLane(is_max ? hn::MaxOfLanes(d, a) : hn::MinOfLanes(d, a));
    nan = !hn::AllFalse(d, hn::MaskFromVec(bad));
  }
  for (; i < n; ++i) {
    const float x = q[i];
    if (x != x) nan = true;
    r = is_max ? (x > r ? x : r) : (x < r ? x : r);
  }
  return nan ? NAN : r;
}

void SoftmaxF32(const float* x, float* y, int64_t n, bool log) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const float mx = ExtremeF32(x, n, true);
  const V vmx = hn::Set(d, mx);
  // Pass 2: exp(x - max), summed (and stored unless log-softmax).
  V a0 = hn::Zero(d), a1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    if (!log) __builtin_prefetch(y + i + kPrefetch, 1);
    const V e0 = ExpFlush(d, hn::Sub(hn::LoadU(d, x + i), vmx));
    const V e1 = ExpFlush(d, hn::Sub(hn::LoadU(d, x + i + N), vmx));
    if (!log) {
      hn::StoreU(e0, d, y + i);
      hn::StoreU(e1, d, y + i + N);
    }
    a0 = hn::Add(a0, e0);
    a1 = hn::Add(a1, e1);
  }
  for (; i + N <= n; i += N) {
    const V e0 = ExpFlush(d, hn::Sub(hn::LoadU(d, x + i), vmx));
    if (!log) hn::StoreU(e0, d, y + i);
    a0 = hn::Add(a0, e0);
  }
  if (i < n) {
    // The last partial vector, padded with -inf (exp gives 0): short rows (attention over a
    // few tokens) stay vectorised.
    HWY_ALIGN float buf[64];
    const int64_t rem = n - i;
    for (int64_t k = 0; k < N; ++k) buf[k] = k < rem ? x[i + k] : -INFINITY;
    const V e0 = ExpFlush(d, hn::Sub(hn::Load(d, buf), vmx));
    a1 = hn::Add(a1, e0);
    if (!log) {
      hn::Store(e0, d, buf);
      std::memcpy(y + i, buf, static_cast<size_t>(rem) * 4);
    }
  }
  const float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
  // Pass 3: scale, or shift by max + log(sum).
  i = 0;
  if (log) {
    const float c = mx + std::log(sum);
    const V vc = hn::Set(d, c);
    for (; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::LoadU(d, x + i), vc), d, y + i);
    for (; i < n; ++i) y[i] = x[i] - c;
  } else {
    const V inv = hn::Set(d, 1.0f / sum);
    for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, y + i), inv), d, y + i);
    for (; i < n; ++i) y[i] *= 1.0f / sum;
  }
}

}  // namespace kiln::cpu::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::vec {
HWY_EXPORT(UnaryF32);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(BinaryRowsF32);
HWY_EXPORT(SumF32);
HWY_EXPORT(ExpF32);
bool exp_f32(const float* in, float* out, int64_t n) { return HWY_DYNAMIC_DISPATCH(ExpF32)(in, out, n); }
HWY_EXPORT(ExtremeF32);
HWY_EXPORT(SoftmaxF32);
void softmax_f32(const float* x, float* y, int64_t n, bool log) { HWY_DYNAMIC_DISPATCH(SoftmaxF32)(x, y, n, log); }
float sum_f32(const float* q, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumF32)(q, n); }
float extreme_f32(const float* q, int64_t n, bool is_max) { return HWY_DYNAMIC_DISPATCH(ExtremeF32)(q, n, is_max); }
bool unary_f32(const ir::Op& op, const float* in, float* out, int64_t n, bool stream) {
  return HWY_DYNAMIC_DISPATCH(UnaryF32)(op, in, out, n, stream);
}
bool binary_f32(ir::OpKind kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n,
                bool stream) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32)(kind, a, sa, b, sb, out, n, stream);
}
bool binary_rows_f32(ir::OpKind kind, const float* a, int64_t sa, int64_t ra, const float* b, int64_t sb, int64_t rb,
                     float* out, int64_t ro, int64_t rows, int64_t n, bool stream) {
  return HWY_DYNAMIC_DISPATCH(BinaryRowsF32)(kind, a, sa, ra, b, sb, rb, out, ro, rows, n, stream);
}
}  // namespace kiln::cpu::vec
#endif

#else  // !KILN_WITH_HWY: the portable build uses the scalar kernels.
namespace kiln::cpu::vec {
bool unary_f32(const ir::Op&, const float*, float*, int64_t, bool) { return false; }
bool binary_f32(ir::OpKind, const float*, int64_t, const float*, int64_t, float*, int64_t, bool) { return false; }
bool binary_rows_f32(ir::OpKind, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                     int64_t, int64_t, bool) {
  return false;
}
bool exp_f32(const float*, float*, int64_t) { return false; }
float sum_f32(const float* q, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += q[i];
  return s;
}
void softmax_f32(const float* x, float* y, int64_t n, bool log) {
  float mx = extreme_f32(x, n, true), s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) y[i] = log ? x[i] - mx - std::log(s) : std::exp(x[i] - mx) / s;
}
float extreme_f32(const float* q, int64_t n, bool is_max) {
  float r = q[0];
  for (int64_t i = 0; i < n; ++i) {
    if (q[i] != q[i]) return q[i];
    r = is_max ? (q[i] > r ? q[i] : r) : (q[i] < r ? q[i] : r);
  }
  return r;
}
}  // namespace kiln::cpu::vec
#endif
