// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-target Highway helpers shared by the f32 row kernels (vec_hwy.cpp) and the elementwise
// program interpreter (program_hwy.cpp): exp, tanh, erf... on vectors, the row loops, and
// VisitUnary, the one table of vectorised unary ops (both callers take their lambdas from it,
// so a fused program computes bitwise what the row kernel does). Include it after
// hwy/highway.h inside a HWY_TARGET_INCLUDE file; it re-includes itself once per target.
#if defined(KILN_CPU_VEC_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_CPU_VEC_MATH_INL_H_
#undef KILN_CPU_VEC_MATH_INL_H_
#else
#define KILN_CPU_VEC_MATH_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

// clang-format off
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on
#include "ir/op.h"

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

// Writes g(i) (a vector) to out + i for the full vectors of [0, n) with non-temporal stores
// (stream_stores, machine.h) and returns the first element left for plain stores. Those stores
// need aligned addresses, so an out that is not 64-byte aligned streams nothing (returns 0): the
// vectors stay the ones plain stores write, and so do the results' bits.
template <class G>
HWY_INLINE int64_t StreamVectors(float* out, int64_t n, const G& g) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (reinterpret_cast<uintptr_t>(out) % 64 == 0) {
    for (; i + N <= n; i += N) hn::Stream(g(i), d, out + i);
    hwy::FlushStream();
  }
  return i;
}

// Runs f over n floats: full vectors, then the tail through a padded buffer. stream: the full
// vectors are written with non-temporal stores (StreamVectors).
template <class F>
HWY_INLINE void Map1(const float* in, float* out, int64_t n, const F& f, bool stream = false) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (stream)
    i = StreamVectors(out, n, [&](int64_t j) {
      __builtin_prefetch(in + j + kPrefetch);
      return f(d, hn::LoadU(d, in + j));
    });
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
//
// Every vector's lanes are checked first (Abs and a compare, a few cycles): when all are within
// +-87.5 (no clamp, no NaN, 2^n a normal float) the reduction and polynomial run alone and the
// scale is one multiply, which gives the same bits as the two halves there. Elementwise chains
// are bound by these vector instructions, so the checks the common case skips are its time.
HWY_INLINE V ExpPoly(D d, V xc, V& n) {
  n = hn::Round(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), xc);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  V p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  return hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
}

HWY_INLINE V ExpSafe(D d, V x) {
  const hn::RebindToSigned<D> di;
  V n;
  if (HWY_LIKELY(hn::AllTrue(d, hn::Lt(hn::Abs(x), hn::Set(d, 87.5f))))) {
    const V p = ExpPoly(d, x, n);
    return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)))));
  }
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -104.0f)), hn::Set(d, 89.0f));
  const V p = ExpPoly(d, xc, n);
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
// As in ExpSafe, a vector whose lanes are all inside the range (no NaN) skips the clamp and the
// fix-ups, with the same bits.
//
// With AVX-512 the quotient is a product with the reciprocal of Q, from the 14-bit estimate and
// one Newton step (within 2^-27): the divider's throughput bounds fused chains with tanh or
// erf, and this costs three cheap instructions instead. Other targets divide.
template <size_t kNP, size_t kNQ>
HWY_INLINE V OddRational(D d, V x, const float (&p)[kNP], const float (&q)[kNQ]) {
  const V x2 = hn::Mul(x, x);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  const V qv = Poly(d, x2, q);
  V rc = hn::ApproximateReciprocal(qv);
  rc = hn::MulAdd(rc, hn::NegMulAdd(qv, rc, hn::Set(d, 1.0f)), rc);
  return hn::Mul(hn::Mul(x, Poly(d, x2, p)), rc);
#else
  return hn::Div(hn::Mul(x, Poly(d, x2, p)), Poly(d, x2, q));
#endif
}

// OddRational on x clamped to +-lim, giving +-1 where |x| >= one and NaN where x is NaN.
template <size_t kNP, size_t kNQ>
HWY_INLINE V SaturatingOdd(D d, V x, V lim, V one, const float (&p)[kNP], const float (&q)[kNQ]) {
  V r = OddRational(d, hn::Min(hn::Max(x, hn::Neg(lim)), lim), p, q);
  r = hn::IfThenElse(hn::Ge(hn::Abs(x), one), hn::CopySign(hn::Set(d, 1.0f), x), r);  // f32 rounds to 1
  return hn::IfThenElse(hn::Eq(x, x), r, x);
}

HWY_INLINE V Tanh(D d, V x) {
  static constexpr float kP[] = {4.89352455891786e-03f, 6.37261928875436e-04f,  1.48572235717979e-05f,
                                 5.12229709037114e-08f, -8.60467152213735e-11f, 2.00018790482477e-13f,
                                 -2.76076847742355e-16f};
  static constexpr float kQ[] = {4.89352518554385e-03f, 2.26843463243900e-03f, 1.18534705686654e-04f,
                                 1.19825839466702e-06f};
  const V lim = hn::Set(d, 7.90531110763549805f);
  if (HWY_LIKELY(hn::AllTrue(d, hn::Lt(hn::Abs(x), lim)))) return OddRational(d, x, kP, kQ);
  return SaturatingOdd(d, x, lim, hn::Set(d, 9.0f), kP, kQ);
}

HWY_INLINE V Erf(D d, V x) {
  static constexpr float kP[] = {-1.60960333262415e-02f, -2.95459980854025e-03f, -7.34990630326855e-04f,
                                 -5.69250639462346e-05f, -2.10102402082508e-06f, 2.77068142495902e-08f,
                                 -2.72614225801306e-10f};
  static constexpr float kQ[] = {-1.42647390514189e-02f, -7.37332916720468e-03f, -1.68282697438203e-03f,
                                 -2.13374055278905e-04f, -1.45660718464996e-05f};
  const V lim = hn::Set(d, 4.0f);
  if (HWY_LIKELY(hn::AllTrue(d, hn::Lt(hn::Abs(x), lim)))) return OddRational(d, x, kP, kQ);
  return SaturatingOdd(d, x, lim, lim, kP, kQ);
}

HWY_INLINE V LogSafe(D d, V x) {
  V r = hn::Log(d, x);
  r = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, -HUGE_VALF), r);
  r = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Set(d, NAN), r);
  r = hn::IfThenElse(hn::Eq(x, hn::Set(d, HUGE_VALF)), x, r);
  return hn::IfThenElse(hn::Eq(x, x), r, x);
}

// f(x) for an approximation valid on [lo, hi] only: a vector with any lane outside (or NaN)
// takes the scalar reference on every lane, so special values stay exact. partial > 0: a padded
// last vector with that many real lanes, all of which take the scalar function (lanes past them
// keep f's values). Only the register x is read, so the caller may store the result over the
// memory x was loaded from (an op run in place).
template <class F, class S>
HWY_INLINE V GuardedVector(D d, V x, float lo, float hi, const F& f, const S& scalar, int64_t partial) {
  const V y = f(d, x);
  if (partial == 0 && hn::AllTrue(d, hn::And(hn::Ge(x, hn::Set(d, lo)), hn::Le(x, hn::Set(d, hi))))) return y;
  HWY_ALIGN float xs[HWY_MAX_BYTES / sizeof(float)] = {}, ys[HWY_MAX_BYTES / sizeof(float)] = {};
  hn::Store(x, d, xs);
  hn::Store(y, d, ys);
  const int64_t m = partial > 0 ? partial : static_cast<int64_t>(hn::Lanes(d));
  for (int64_t q = 0; q < m; ++q) ys[q] = scalar(xs[q]);
  return hn::Load(d, ys);
}

// Like Map1, for approximations valid on [lo, hi] only (GuardedVector); in may equal out.
template <class F, class S>
HWY_INLINE void MapGuarded(const float* in, float* out, int64_t n, float lo, float hi, const F& f, const S& scalar,
                           bool stream = false) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (stream)
    i = StreamVectors(out, n, [&](int64_t j) {
      __builtin_prefetch(in + j + kPrefetch);
      return GuardedVector(d, hn::LoadU(d, in + j), lo, hi, f, scalar, 0);
    });
  for (; i + N <= n; i += N) {
    __builtin_prefetch(in + i + kPrefetch);
    __builtin_prefetch(out + i + kPrefetch, 1);
    hn::StoreU(GuardedVector(d, hn::LoadU(d, in + i), lo, hi, f, scalar, 0), d, out + i);
  }
  for (; i < n; ++i) out[i] = scalar(in[i]);
}

HWY_INLINE V Softplus(D d, V x, float beta, float threshold) {
  const V bx = hn::Mul(x, hn::Set(d, beta));
  const V r = hn::Div(hn::Log1p(d, ExpSafe(d, bx)), hn::Set(d, beta));
  return hn::IfThenElse(hn::Gt(bx, hn::Set(d, threshold)), x, r);
}

// The vectorised unary ops: calls map(f) with the per-vector function f of a plain op, or
// guarded(lo, hi, f, scalar) for an approximation valid on [lo, hi] only (lanes outside are
// recomputed by the scalar reference). R: the op's real attributes. False: no vector form.
template <class M, class G>
HWY_INLINE bool VisitUnary(ir::OpKind kind, const double* R, const M& map, const G& guarded) {
  using ir::OpKind;
  switch (kind) {
    case OpKind::Relu:
      map([](D d, V x) { return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Zero(d), x); });
      return true;
    case OpKind::Neg:
      map([](D, V x) { return hn::Neg(x); });
      return true;
    case OpKind::Abs:
      map([](D, V x) { return hn::Abs(x); });
      return true;
    case OpKind::Square:
      map([](D, V x) { return hn::Mul(x, x); });
      return true;
    case OpKind::Sqrt:
      map([](D, V x) { return hn::Sqrt(x); });
      return true;
    case OpKind::Reciprocal:
      map([](D d, V x) { return hn::Div(hn::Set(d, 1.0f), x); });
      return true;
    case OpKind::Exp:
      map([](D d, V x) { return ExpSafe(d, x); });
      return true;
    case OpKind::Log:
      map([](D d, V x) { return LogSafe(d, x); });
      return true;
    case OpKind::Sigmoid:
      map([](D d, V x) { return Sigmoid(d, x); });
      return true;
    case OpKind::Silu:
      map([](D d, V x) { return hn::Mul(x, Sigmoid(d, x)); });
      return true;
    case OpKind::Tanh:
      map([](D d, V x) { return Tanh(d, x); });
      return true;
    case OpKind::Erf:
      map([](D d, V x) { return Erf(d, x); });
      return true;
    case OpKind::Gelu:
      map([](D d, V x) {
        const V h = hn::Mul(hn::Set(d, 0.5f), x);
        return hn::MulAdd(h, Erf(d, hn::Mul(x, hn::Set(d, 0.70710678f))), h);
      });
      return true;
    case OpKind::GeluTanh:
      map([](D d, V x) {
        const V x3 = hn::Mul(hn::Mul(x, x), x);
        const V inner = hn::Mul(hn::Set(d, 0.7978845608f), hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
        const V h = hn::Mul(hn::Set(d, 0.5f), x);
        return hn::MulAdd(h, Tanh(d, inner), h);
      });
      return true;
    case OpKind::Sin:
      guarded(
          -39000.f, 39000.f, [](D d, V x) { return hn::Sin(d, x); }, [](float v) { return std::sin(v); });
      return true;
    case OpKind::Cos:
      guarded(
          -39000.f, 39000.f, [](D d, V x) { return hn::Cos(d, x); }, [](float v) { return std::cos(v); });
      return true;
    case OpKind::Log1p:
      guarded(
          0.f, 3e38f, [](D d, V x) { return hn::Log1p(d, x); }, [](float v) { return std::log1p(v); });
      return true;
    case OpKind::Log2:
      guarded(
          1.2e-38f, 3e38f, [](D d, V x) { return hn::Log2(d, x); }, [](float v) { return std::log2(v); });
      return true;
    case OpKind::Log10:
      guarded(
          1.2e-38f, 3e38f, [](D d, V x) { return hn::Log10(d, x); }, [](float v) { return std::log10(v); });
      return true;
    case OpKind::Expm1:
      guarded(
          -80.f, 80.f, [](D d, V x) { return hn::Expm1(d, x); }, [](float v) { return std::expm1(v); });
      return true;
    case OpKind::Atan:
      guarded(
          -3e38f, 3e38f, [](D d, V x) { return hn::Atan(d, x); }, [](float v) { return std::atan(v); });
      return true;
    case OpKind::Asinh:
      guarded(
          -1e18f, 1e18f, [](D d, V x) { return hn::Asinh(d, x); }, [](float v) { return std::asinh(v); });
      return true;
    case OpKind::Sinh:
      guarded(
          -88.f, 88.f, [](D d, V x) { return hn::Sinh(d, x); }, [](float v) { return std::sinh(v); });
      return true;
    case OpKind::Floor:
      map([](D, V x) { return hn::Floor(x); });
      return true;
    case OpKind::Ceil:
      map([](D, V x) { return hn::Ceil(x); });
      return true;
    case OpKind::Trunc:
      map([](D, V x) { return hn::Trunc(x); });
      return true;
    case OpKind::Softsign:
      map([](D d, V x) { return hn::Div(x, hn::Add(hn::Set(d, 1.0f), hn::Abs(x))); });
      return true;
    case OpKind::Hardswish:
      map([](D d, V x) {
        const V r = hn::Min(hn::Max(hn::Add(x, hn::Set(d, 3.0f)), hn::Zero(d)), hn::Set(d, 6.0f));
        return hn::Div(hn::Mul(x, r), hn::Set(d, 6.0f));
      });
      return true;
    case OpKind::Softplus: {
      const float beta = static_cast<float>(R[0]), th = static_cast<float>(R[1]);
      guarded(
          -3e38f, 3e38f, [&](D d, V x) { return Softplus(d, x, beta, th); },
          [&](float v) { return v * beta > th ? v : std::log1p(std::exp(v * beta)) / beta; });
      return true;
    }
    case OpKind::Mish:
      guarded(
          -3e38f, 3e38f, [](D d, V x) { return hn::Mul(x, Tanh(d, Softplus(d, x, 1.0f, 20.0f))); },
          [](float v) { return v * std::tanh(v > 20.f ? v : std::log1p(std::exp(v))); });
      return true;
    case OpKind::Elu: {
      const float alpha = static_cast<float>(R[0]), scale = static_cast<float>(R[1]),
                  in_scale = static_cast<float>(R[2]);
      guarded(
          -3e38f, 3e38f,
          [&](D d, V x) {
            const V neg = hn::Mul(hn::Set(d, scale * alpha),
                                  hn::Expm1(d, hn::Max(hn::Mul(x, hn::Set(d, in_scale)), hn::Set(d, -80.f))));
            return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Mul(x, hn::Set(d, scale)), neg);
          },
          [&](float v) { return v > 0 ? scale * v : scale * alpha * std::expm1(v * in_scale); });
      return true;
    }
    case OpKind::LeakyRelu: {
      const float s = static_cast<float>(R[0]);
      map([s](D d, V x) { return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), x, hn::Mul(x, hn::Set(d, s))); });
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kiln::cpu::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // KILN_CPU_VEC_MATH_INL_H_
