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
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::vec::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Software prefetch distance in floats (4 KiB), for the input and (for writing) the output.
// With math-heavy kernels the hardware prefetcher alone leaves memory waiting behind the
// arithmetic; measured on exp over 64 MiB, one thread: 14.3 ms without, 11.5 ms prefetching
// the input, 10.3 ms prefetching both, 10.5 ms for memcpy.
constexpr int64_t kPrefetch = 1024;

// Runs f over n floats: full vectors, then the tail through a padded buffer.
template <class F>
HWY_INLINE void Map1(const float* in, float* out, int64_t n, const F& f) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    __builtin_prefetch(in + i + kPrefetch);  // see kPrefetch
    __builtin_prefetch(out + i + kPrefetch, 1);
    hn::StoreU(f(d, hn::LoadU(d, in + i)), d, out + i);
  }
  if (i < n) {
    HWY_ALIGN float buf[64] = {};
    std::memcpy(buf, in + i, static_cast<size_t>(n - i) * 4);
    hn::Store(f(d, hn::Load(d, buf)), d, buf);
    std::memcpy(out + i, buf, static_cast<size_t>(n - i) * 4);
  }
}

// exp(x) to ~1 ulp (Cephes' expf polynomial after a two-constant ln 2 reduction). The scale
// 2^n is applied in two halves so that results down to the subnormal range and up to +inf come
// out of the arithmetic itself; NaN passes through.
HWY_INLINE V ExpSafe(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -104.0f)), hn::Set(d, 89.0f));
  const V n = hn::Round(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), xc);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  V p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  const auto ni = hn::ConvertTo(di, n);
  const auto n1 = hn::ShiftRight<1>(ni);
  const auto n2 = hn::Sub(ni, n1);
  const auto bias = hn::Set(di, 127);
  const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, bias)));
  const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n2, bias)));
  return hn::IfThenElse(hn::Eq(x, x), hn::Mul(hn::Mul(p, s1), s2), x);
}

// exp(x) for x <= 0 where results below FLT_MIN may be 0: inputs under -87 give 0 without
// computing a denormal (which costs ~100 cycles per lane on x86). Softmax uses it: masked
// (-inf) or far-below-max scores then run at full speed; they add < 1e-38 to a sum >= 1.
HWY_INLINE V ExpFlush(D d, V x) {
  const V lim = hn::Set(d, -87.0f);
  const auto low = hn::Lt(x, lim);  // false for NaN, which passes through ExpSafe
  return hn::IfThenZeroElse(low, ExpSafe(d, hn::IfThenElse(low, lim, x)));
}

HWY_INLINE V Sigmoid(D d, V x) {
  // exp(-x) overflows to +inf for very negative x, and 1 / inf = 0 is the right answer.
  return hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), ExpSafe(d, hn::Neg(x))));
}

// Evaluates c[0] + c[1] y + ... + c[n-1] y^(n-1) by Horner's rule (coefficients low to high).
template <size_t kN>
HWY_INLINE V Poly(D d, V y, const float (&c)[kN]) {
  V p = hn::Set(d, c[kN - 1]);
  for (size_t i = kN - 1; i-- > 0;) p = hn::MulAdd(p, y, hn::Set(d, c[i]));
  return p;
}

// tanh and erf as odd rational functions x P(x^2) / Q(x^2) on a clamped range (within 4e-7
// relative of the exact values, checked against std::tanh / std::erf in the tests); NaN passes.
HWY_INLINE V Tanh(D d, V x) {
  static constexpr float kP[] = {4.89352455891786e-03f, 6.37261928875436e-04f,  1.48572235717979e-05f,
                                 5.12229709037114e-08f, -8.60467152213735e-11f, 2.00018790482477e-13f,
                                 -2.76076847742355e-16f};
  static constexpr float kQ[] = {4.89352518554385e-03f, 2.26843463243900e-03f, 1.18534705686654e-04f,
                                 1.19825839466702e-06f};
  const V lim = hn::Set(d, 7.90531110763549805f);
  const V xc = hn::Min(hn::Max(x, hn::Neg(lim)), lim);
  const V x2 = hn::Mul(xc, xc);
  V r = hn::Div(hn::Mul(xc, Poly(d, x2, kP)), Poly(d, x2, kQ));
  r = hn::IfThenElse(hn::Ge(hn::Abs(x), hn::Set(d, 9.0f)), hn::CopySign(hn::Set(d, 1.0f), x), r);  // f32 rounds to 1
  return hn::IfThenElse(hn::Eq(x, x), r, x);
}

HWY_INLINE V Erf(D d, V x) {
  static constexpr float kP[] = {-1.60960333262415e-02f, -2.95459980854025e-03f, -7.34990630326855e-04f,
                                 -5.69250639462346e-05f, -2.10102402082508e-06f, 2.77068142495902e-08f,
                                 -2.72614225801306e-10f};
  static constexpr float kQ[] = {-1.42647390514189e-02f, -7.37332916720468e-03f, -1.68282697438203e-03f,
                                 -2.13374055278905e-04f, -1.45660718464996e-05f};
  const V lim = hn::Set(d, 4.0f);
  const V xc = hn::Min(hn::Max(x, hn::Neg(lim)), lim);
  const V x2 = hn::Mul(xc, xc);
  V r = hn::Div(hn::Mul(xc, Poly(d, x2, kP)), Poly(d, x2, kQ));
  r = hn::IfThenElse(hn::Ge(hn::Abs(x), lim), hn::CopySign(hn::Set(d, 1.0f), x), r);  // f32 rounds to 1
  return hn::IfThenElse(hn::Eq(x, x), r, x);
}

HWY_INLINE V LogSafe(D d, V x) {
  V r = hn::Log(d, x);
  r = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, -HUGE_VALF), r);
  r = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Set(d, NAN), r);
  r = hn::IfThenElse(hn::Eq(x, hn::Set(d, HUGE_VALF)), x, r);
  return hn::IfThenElse(hn::Eq(x, x), r, x);
}

// Like Map1, for approximations valid on [lo, hi] only: a vector with any lane outside (or NaN)
// is recomputed with the scalar reference, so special values stay exact.
template <class F, class S>
HWY_INLINE void MapGuarded(const float* in, float* out, int64_t n, float lo, float hi, const F& f, const S& scalar) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    __builtin_prefetch(in + i + kPrefetch);
    __builtin_prefetch(out + i + kPrefetch, 1);
    const V x = hn::LoadU(d, in + i);
    hn::StoreU(f(d, x), d, out + i);
    if (!hn::AllTrue(d, hn::And(hn::Ge(x, vlo), hn::Le(x, vhi))))
      for (int64_t j = i; j < i + N; ++j) out[j] = scalar(in[j]);
  }
  for (; i < n; ++i) out[i] = scalar(in[i]);
}

HWY_INLINE V Softplus(D d, V x, float beta, float threshold) {
  const V bx = hn::Mul(x, hn::Set(d, beta));
  const V r = hn::Div(hn::Log1p(d, ExpSafe(d, bx)), hn::Set(d, beta));
  return hn::IfThenElse(hn::Gt(bx, hn::Set(d, threshold)), x, r);
}

bool ExpF32(const float* in, float* out, int64_t n) {
  Map1(in, out, n, [](D d, V x) { return ExpSafe(d, x); });
  return true;
}

bool UnaryF32(const ir::Op& op, const float* in, float* out, int64_t n) {
  using ir::OpKind;
  switch (op.kind) {
    case OpKind::Relu:
      Map1(in, out, n, [](D d, V x) { return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Zero(d), x); });
      return true;
    case OpKind::Neg:
      Map1(in, out, n, [](D, V x) { return hn::Neg(x); });
      return true;
    case OpKind::Abs:
      Map1(in, out, n, [](D, V x) { return hn::Abs(x); });
      return true;
    case OpKind::Square:
      Map1(in, out, n, [](D, V x) { return hn::Mul(x, x); });
      return true;
    case OpKind::Sqrt:
      Map1(in, out, n, [](D, V x) { return hn::Sqrt(x); });
      return true;
    case OpKind::Reciprocal:
      Map1(in, out, n, [](D d, V x) { return hn::Div(hn::Set(d, 1.0f), x); });
      return true;
    case OpKind::Exp:
      return ExpF32(in, out, n);
    case OpKind::Log:
      Map1(in, out, n, [](D d, V x) { return LogSafe(d, x); });
      return true;
    case OpKind::Sigmoid:
      Map1(in, out, n, [](D d, V x) { return Sigmoid(d, x); });
      return true;
    case OpKind::Silu:
      Map1(in, out, n, [](D d, V x) { return hn::Mul(x, Sigmoid(d, x)); });
      return true;
    case OpKind::Tanh:
      Map1(in, out, n, [](D d, V x) { return Tanh(d, x); });
      return true;
    case OpKind::Erf:
      Map1(in, out, n, [](D d, V x) { return Erf(d, x); });
      return true;
    case OpKind::Gelu:
      Map1(in, out, n, [](D d, V x) {
        const V h = hn::Mul(hn::Set(d, 0.5f), x);
        return hn::MulAdd(h, Erf(d, hn::Mul(x, hn::Set(d, 0.70710678f))), h);
      });
      return true;
    case OpKind::GeluTanh:
      Map1(in, out, n, [](D d, V x) {
        const V x3 = hn::Mul(hn::Mul(x, x), x);
        const V inner = hn::Mul(hn::Set(d, 0.7978845608f), hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
        const V h = hn::Mul(hn::Set(d, 0.5f), x);
        return hn::MulAdd(h, Tanh(d, inner), h);
      });
      return true;
    case OpKind::Sin:
      MapGuarded(
          in, out, n, -39000.f, 39000.f, [](D d, V x) { return hn::Sin(d, x); }, [](float v) { return std::sin(v); });
      return true;
    case OpKind::Cos:
      MapGuarded(
          in, out, n, -39000.f, 39000.f, [](D d, V x) { return hn::Cos(d, x); }, [](float v) { return std::cos(v); });
      return true;
    case OpKind::Log1p:
      MapGuarded(
          in, out, n, 0.f, 3e38f, [](D d, V x) { return hn::Log1p(d, x); }, [](float v) { return std::log1p(v); });
      return true;
    case OpKind::Log2:
      MapGuarded(
          in, out, n, 1.2e-38f, 3e38f, [](D d, V x) { return hn::Log2(d, x); }, [](float v) { return std::log2(v); });
      return true;
    case OpKind::Log10:
      MapGuarded(
          in, out, n, 1.2e-38f, 3e38f, [](D d, V x) { return hn::Log10(d, x); }, [](float v) { return std::log10(v); });
      return true;
    case OpKind::Expm1:
      MapGuarded(
          in, out, n, -80.f, 80.f, [](D d, V x) { return hn::Expm1(d, x); }, [](float v) { return std::expm1(v); });
      return true;
    case OpKind::Atan:
      MapGuarded(
          in, out, n, -3e38f, 3e38f, [](D d, V x) { return hn::Atan(d, x); }, [](float v) { return std::atan(v); });
      return true;
    case OpKind::Asinh:
      MapGuarded(
          in, out, n, -1e18f, 1e18f, [](D d, V x) { return hn::Asinh(d, x); }, [](float v) { return std::asinh(v); });
      return true;
    case OpKind::Sinh:
      MapGuarded(
          in, out, n, -88.f, 88.f, [](D d, V x) { return hn::Sinh(d, x); }, [](float v) { return std::sinh(v); });
      return true;
    case OpKind::Floor:
      Map1(in, out, n, [](D, V x) { return hn::Floor(x); });
      return true;
    case OpKind::Ceil:
      Map1(in, out, n, [](D, V x) { return hn::Ceil(x); });
      return true;
    case OpKind::Trunc:
      Map1(in, out, n, [](D, V x) { return hn::Trunc(x); });
      return true;
    case OpKind::Softsign:
      Map1(in, out, n, [](D d, V x) { return hn::Div(x, hn::Add(hn::Set(d, 1.0f), hn::Abs(x))); });
      return true;
    case OpKind::Hardswish:
      Map1(in, out, n, [](D d, V x) {
        const V r = hn::Min(hn::Max(hn::Add(x, hn::Set(d, 3.0f)), hn::Zero(d)), hn::Set(d, 6.0f));
        return hn::Div(hn::Mul(x, r), hn::Set(d, 6.0f));
      });
      return true;
    case OpKind::Softplus: {
      const float beta = static_cast<float>(op.attrs.reals[0]), th = static_cast<float>(op.attrs.reals[1]);
      MapGuarded(
          in, out, n, -3e38f, 3e38f, [&](D d, V x) { return Softplus(d, x, beta, th); },
          [&](float v) { return v * beta > th ? v : std::log1p(std::exp(v * beta)) / beta; });
      return true;
    }
    case OpKind::Mish:
      MapGuarded(
          in, out, n, -3e38f, 3e38f, [](D d, V x) { return hn::Mul(x, Tanh(d, Softplus(d, x, 1.0f, 20.0f))); },
          [](float v) { return v * std::tanh(v > 20.f ? v : std::log1p(std::exp(v))); });
      return true;
    case OpKind::Elu: {
      const float alpha = static_cast<float>(op.attrs.reals[0]), scale = static_cast<float>(op.attrs.reals[1]),
                  in_scale = static_cast<float>(op.attrs.reals[2]);
      MapGuarded(
          in, out, n, -3e38f, 3e38f,
          [&](D d, V x) {
            const V neg = hn::Mul(hn::Set(d, scale * alpha),
                                  hn::Expm1(d, hn::Max(hn::Mul(x, hn::Set(d, in_scale)), hn::Set(d, -80.f))));
            return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Mul(x, hn::Set(d, scale)), neg);
          },
          [&](float v) { return v > 0 ? scale * v : scale * alpha * std::expm1(v * in_scale); });
      return true;
    }
    case OpKind::LeakyRelu: {
      const float s = static_cast<float>(op.attrs.reals[0]);
      Map1(in, out, n, [s](D d, V x) { return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), x, hn::Mul(x, hn::Set(d, s))); });
      return true;
    }
    default:
      return false;
  }
}

bool BinaryF32(ir::OpKind kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n) {
  using ir::OpKind;
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto run = [&](auto f) {
    int64_t i = 0;
    const V va0 = hn::Set(d, *a), vb0 = hn::Set(d, *b);
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

float SumF32(const float* q, int64_t n) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  V a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
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
HWY_EXPORT(SumF32);
HWY_EXPORT(ExpF32);
bool exp_f32(const float* in, float* out, int64_t n) { return HWY_DYNAMIC_DISPATCH(ExpF32)(in, out, n); }
HWY_EXPORT(ExtremeF32);
HWY_EXPORT(SoftmaxF32);
void softmax_f32(const float* x, float* y, int64_t n, bool log) { HWY_DYNAMIC_DISPATCH(SoftmaxF32)(x, y, n, log); }
float sum_f32(const float* q, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumF32)(q, n); }
float extreme_f32(const float* q, int64_t n, bool is_max) { return HWY_DYNAMIC_DISPATCH(ExtremeF32)(q, n, is_max); }
bool unary_f32(const ir::Op& op, const float* in, float* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(UnaryF32)(op, in, out, n);
}
bool binary_f32(ir::OpKind kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32)(kind, a, sa, b, sb, out, n);
}
}  // namespace kiln::cpu::vec
#endif

#else  // !KILN_WITH_HWY: the portable build uses the scalar kernels.
namespace kiln::cpu::vec {
bool unary_f32(const ir::Op&, const float*, float*, int64_t) { return false; }
bool binary_f32(ir::OpKind, const float*, int64_t, const float*, int64_t, float*, int64_t) { return false; }
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
