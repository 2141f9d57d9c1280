// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-target Highway helpers of the elementwise programs (vec.h: PInstr): the ops without a
// VisitUnary entry (OtherOp), the post steps, and OpVector, one Op instruction on one vector of
// each operand. The interpreter (program_hwy.cpp) and the compiled kernels of program_jit.cpp
// both take their arithmetic from here and from vec_math-inl.h, so they give the same bits.
// Include it after vec_math-inl.h; like it, it re-includes itself once per target.
#if defined(KILN_CPU_PROGRAM_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_CPU_PROGRAM_OPS_INL_H_
#undef KILN_CPU_PROGRAM_OPS_INL_H_
#else
#define KILN_CPU_PROGRAM_OPS_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include "backends/cpu/vec.h"
#include "backends/cpu/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::vec::HWY_NAMESPACE {

// std::max / std::min as the scalar kernels write them: (a < b ? b : a), (b < a ? b : a).
HWY_INLINE V StdMax(V a, V b) { return hn::IfThenElse(hn::Lt(a, b), b, a); }
HWY_INLINE V StdMin(V a, V b) { return hn::IfThenElse(hn::Lt(b, a), b, a); }
HWY_INLINE V Bool01(D d, hn::Mask<D> m) { return hn::IfThenElseZero(m, hn::Set(d, 1.0f)); }
/// x, opaque to the optimiser: a product passed through it is not contracted into an FMA (the
/// scalar kernels, built without FMA, round the product and the sum separately).
HWY_INLINE V NoContract(V x) {
#if HWY_ARCH_X86
  asm("" : "+v"(x.raw));
#endif
  return x;
}
/// An Op's post step (PInstr::Post) on a vector; K = kNoPost is the identity. The result is
/// opaque first, so that a product and the sum after it are not contracted into an FMA.
/// Scalable vectors (SVE) are sizeless and cannot be members: there the step holds the float
/// and splats it at each use (hoisted out of the loop by the compiler).
template <int K>
struct PostStep {
#if HWY_HAVE_SCALABLE
  float s;
#else
  V v;
#endif
  HWY_INLINE V operator()(V x) const {
    if constexpr (K == PInstr::kNoPost) {
      return x;
    } else {
#if HWY_HAVE_SCALABLE
      const V v = hn::Set(D(), s);
#endif
      x = NoContract(x);
      if constexpr (K == PInstr::kAdd) return hn::Add(x, v);
      if constexpr (K == PInstr::kSub) return hn::Sub(x, v);
      if constexpr (K == PInstr::kRSub) return hn::Sub(v, x);
      if constexpr (K == PInstr::kMul) return hn::Mul(x, v);
      if constexpr (K == PInstr::kDiv) return hn::Div(x, v);
      if constexpr (K == PInstr::kRDiv) return hn::Div(v, x);
    }
  }
};

HWY_INLINE hn::Mask<D> NonZero(D d, V x) { return hn::Not(hn::Eq(x, hn::Zero(d))); }  // NaN: true

/// The ops without a VisitUnary entry: returns false when kind is not one of them.
template <class M1, class M2, class M3>
HWY_INLINE bool OtherOp(D d, ir::OpKind kind, const double* r, const M1& map1, const M2& map2, const M3& map3) {
  using ir::OpKind;
  switch (kind) {
    case OpKind::Rsqrt:
      map1([d](V x) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x)); });
      return true;
    case OpKind::Sign:
      map1([d](V x) {
        return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Set(d, 1.0f),
                              hn::IfThenElseZero(hn::Lt(x, hn::Zero(d)), hn::Set(d, -1.0f)));
      });
      return true;
    case OpKind::Hardsigmoid:
      map1([d](V x) {
        const V t = hn::Add(hn::Div(x, hn::Set(d, 6.0f)), hn::Set(d, 0.5f));
        return StdMin(StdMax(t, hn::Zero(d)), hn::Set(d, 1.0f));
      });
      return true;
    case OpKind::Clamp: {
      // The bounds are captured as floats: SVE vectors are sizeless and cannot be captured.
      const float lo = static_cast<float>(r[0]), hi = static_cast<float>(r[1]);
      map1([d, lo, hi](V x) { return StdMin(StdMax(x, hn::Set(d, lo)), hn::Set(d, hi)); });
      return true;
    }
    case OpKind::IsNan:
      map1([d](V x) { return Bool01(d, hn::Not(hn::Eq(x, x))); });
      return true;
    case OpKind::IsFinite:
      map1([d](V x) { return Bool01(d, hn::Lt(hn::Abs(x), hn::Set(d, HUGE_VALF))); });
      return true;
    case OpKind::LogicalNot:
      map1([d](V x) { return Bool01(d, hn::Eq(x, hn::Zero(d))); });
      return true;
    case OpKind::Cast:  // f32/bool -> f32/bool; r[0] != 0: the target is bool
      if (r[0] != 0)
        map1([d](V x) { return Bool01(d, NonZero(d, x)); });
      else
        map1([](V x) { return x; });
      return true;
    case OpKind::Copy:
      map1([](V x) { return x; });
      return true;
    case OpKind::Add:
      map2([](V x, V y) { return hn::Add(x, y); });
      return true;
    case OpKind::Sub:
      map2([](V x, V y) { return hn::Sub(x, y); });
      return true;
    case OpKind::Mul:
      map2([](V x, V y) { return hn::Mul(x, y); });
      return true;
    case OpKind::Div:
      map2([](V x, V y) { return hn::Div(x, y); });
      return true;
    case OpKind::Maximum:
    case OpKind::Minimum: {
      const bool mx = kind == OpKind::Maximum;
      map2([mx](V x, V y) {  // NaN in either: x + y (a NaN), as the scalar kernel
        const V r = mx ? hn::IfThenElse(hn::Gt(x, y), x, y) : hn::IfThenElse(hn::Lt(x, y), x, y);
        return hn::IfThenElse(hn::And(hn::Eq(x, x), hn::Eq(y, y)), r, hn::Add(x, y));
      });
      return true;
    }
    case OpKind::Eq:
      map2([d](V x, V y) { return Bool01(d, hn::Eq(x, y)); });
      return true;
    case OpKind::Ne:
      map2([d](V x, V y) { return Bool01(d, hn::Not(hn::Eq(x, y))); });
      return true;
    case OpKind::Lt:
      map2([d](V x, V y) { return Bool01(d, hn::Lt(x, y)); });
      return true;
    case OpKind::Le:
      map2([d](V x, V y) { return Bool01(d, hn::Le(x, y)); });
      return true;
    case OpKind::Gt:
      map2([d](V x, V y) { return Bool01(d, hn::Gt(x, y)); });
      return true;
    case OpKind::Ge:
      map2([d](V x, V y) { return Bool01(d, hn::Ge(x, y)); });
      return true;
    case OpKind::LogicalAnd:
      map2([d](V x, V y) { return Bool01(d, hn::And(NonZero(d, x), NonZero(d, y))); });
      return true;
    case OpKind::LogicalOr:
      map2([d](V x, V y) { return Bool01(d, hn::Or(NonZero(d, x), NonZero(d, y))); });
      return true;
    case OpKind::LogicalXor:
      map2([d](V x, V y) { return Bool01(d, hn::Xor(NonZero(d, x), NonZero(d, y))); });
      return true;
    case OpKind::Where:
      map3([d](V c, V x, V y) { return hn::IfThenElse(NonZero(d, c), x, y); });
      return true;
    case OpKind::Lerp:  // the kernel's formula, exact at both ends; products never fused into FMAs
      map3([d](V a, V b, V t) {
        const V diff = hn::Sub(b, a);
        const V lo = hn::Add(a, NoContract(hn::Mul(t, diff)));
        const V hi = hn::Sub(b, NoContract(hn::Mul(diff, hn::Sub(hn::Set(d, 1.0f), t))));
        return hn::IfThenElse(hn::Lt(hn::Abs(t), hn::Set(d, 0.5f)), lo, hi);
      });
      return true;
    default:
      return false;
  }
}

/// Lanes(d) bool bytes at p as 0.0f / 1.0f (LoadBool), and a vector back to bytes, x != 0
/// (StoreBool; NaN is true).
HWY_INLINE V LoadBoolVector(D d, const uint8_t* p) {
  HWY_ALIGN float t[HWY_MAX_BYTES / sizeof(float)];
  for (size_t q = 0; q < hn::Lanes(d); ++q) t[q] = p[q] ? 1.0f : 0.0f;
  return hn::Load(d, t);
}
HWY_INLINE void StoreBoolVector(D d, V x, uint8_t* p) {
  HWY_ALIGN float t[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(x, d, t);
  for (size_t q = 0; q < hn::Lanes(d); ++q) p[q] = t[q] != 0.0f;
}

/// Op instruction `kind` (real attributes r) on one vector of each operand (b and c are read
/// by the ops that take them), its result through post. partial > 0: a padded last vector with
/// that many real lanes, which a guarded op computes with its scalar function on every real
/// lane, as the interpreter does for the last vector of a chunk.
template <class P>
HWY_INLINE V OpVector(D d, ir::OpKind kind, const double* r, const P& post, V a, V b, V c, int64_t partial) {
  V out = a;
  const bool unary = VisitUnary(
      kind, r, [&](const auto& f) { out = f(d, a); },
      [&](float lo, float hi, const auto& f, const auto& scalar) {
        out = GuardedVector(d, a, lo, hi, f, scalar, partial);
      });
  if (!unary)
    OtherOp(
        d, kind, r, [&](const auto& f) { out = f(a); }, [&](const auto& f) { out = f(a, b); },
        [&](const auto& f) { out = f(a, b, c); });
  return post(out);
}

}  // namespace kiln::cpu::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // KILN_CPU_PROGRAM_OPS_INL_H_
