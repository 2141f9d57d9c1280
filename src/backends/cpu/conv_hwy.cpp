// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway kernels of the convolution paths, compiled for several x86 targets and chosen at run
// time: the per-channel bias (or scale and shift), residual and activation applied to a thread's share
// of a convolution's output, plain or in oneDNN's blocked 16-channel layout
// (Note [Convolution activations] in conv_onednn.cpp), with the scalar loop's compares, so NaN
// passes.
#include <cmath>

#include "backends/cpu/conv_impl.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/conv_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target before highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::conv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// post_f32 with the optional steps chosen at compile time.
template <bool kScale, bool kShift, bool kRes>
void PostImpl(float* y, const float* r, int64_t n, float s, float t, float lo, float hi) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi), vs = hn::Set(d, s), vt = hn::Set(d, t);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    V v = hn::LoadU(d, y + i);
    if constexpr (kScale) {
      v = hn::Mul(v, vs);
#if HWY_ARCH_X86
      asm("" : "+v"(v.raw));  // the product rounds before the sum (no fused multiply-add)
#endif
    }
    if constexpr (kShift) v = hn::Add(v, vt);
    if constexpr (kRes) v = hn::Add(v, hn::LoadU(d, r + i));
    hn::StoreU(hn::IfThenElse(hn::Lt(v, vlo), vlo, hn::IfThenElse(hn::Gt(v, vhi), vhi, v)), d, y + i);
  }
  for (; i < n; ++i) {
    float v = y[i];
    if constexpr (kScale) {
      v = v * s;
#if HWY_ARCH_X86
      asm("" : "+x"(v));
#endif
    }
    if constexpr (kShift) v = v + t;
    if constexpr (kRes) v = v + r[i];
    y[i] = v < lo ? lo : (v > hi ? hi : v);
  }
}

void PostF32(float* y, const float* r, int64_t n, const float* s, const float* t, float lo, float hi) {
  const float sv = s ? *s : 1.f, tv = t ? *t : 0.f;
  switch ((s ? 4 : 0) | (t ? 2 : 0) | (r ? 1 : 0)) {
    case 0:
      return PostImpl<false, false, false>(y, r, n, sv, tv, lo, hi);
    case 1:
      return PostImpl<false, false, true>(y, r, n, sv, tv, lo, hi);
    case 2:
      return PostImpl<false, true, false>(y, r, n, sv, tv, lo, hi);
    case 3:
      return PostImpl<false, true, true>(y, r, n, sv, tv, lo, hi);
    case 4:
      return PostImpl<true, false, false>(y, r, n, sv, tv, lo, hi);
    case 5:
      return PostImpl<true, false, true>(y, r, n, sv, tv, lo, hi);
    case 6:
      return PostImpl<true, true, false>(y, r, n, sv, tv, lo, hi);
    default:
      return PostImpl<true, true, true>(y, r, n, sv, tv, lo, hi);
  }
}

/// post_blocked16_f32 with the optional steps chosen at compile time.
template <bool kScale, bool kShift, bool kRes>
void PostBlockedImpl(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks, const float* s,
                     const float* t, float lo, float hi) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t c0 = (b % cblocks) * 16;
    float* yb = y + b * plane * 16;
    const float* rb = kRes ? r + b * plane * 16 : nullptr;
    for (int64_t j = 0; j < 16; j += N) {
      const V vs = kScale ? hn::LoadU(d, s + c0 + j) : hn::Set(d, 1.f);
      const V vt = kShift ? hn::LoadU(d, t + c0 + j) : hn::Set(d, 0.f);
      for (int64_t i = 0; i < plane; ++i) {
        V v = hn::LoadU(d, yb + i * 16 + j);
        if constexpr (kScale) {
          v = hn::Mul(v, vs);
#if HWY_ARCH_X86
          asm("" : "+v"(v.raw));  // the product rounds before the sum (no fused multiply-add)
#endif
        }
        if constexpr (kShift) v = hn::Add(v, vt);
        if constexpr (kRes) v = hn::Add(v, hn::LoadU(d, rb + i * 16 + j));
        hn::StoreU(hn::IfThenElse(hn::Lt(v, vlo), vlo, hn::IfThenElse(hn::Gt(v, vhi), vhi, v)), d, yb + i * 16 + j);
      }
    }
  }
}

void PostBlocked16F32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks, const float* s,
                      const float* t, float lo, float hi) {
  switch ((s ? 4 : 0) | (t ? 2 : 0) | (r ? 1 : 0)) {
    case 0:
      return PostBlockedImpl<false, false, false>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    case 1:
      return PostBlockedImpl<false, false, true>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    case 2:
      return PostBlockedImpl<false, true, false>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    case 3:
      return PostBlockedImpl<false, true, true>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    case 4:
      return PostBlockedImpl<true, false, false>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    case 5:
      return PostBlockedImpl<true, false, true>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    case 6:
      return PostBlockedImpl<true, true, false>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
    default:
      return PostBlockedImpl<true, true, true>(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
  }
}

}  // namespace kiln::cpu::conv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::conv {
HWY_EXPORT(PostF32);
void post_f32(float* y, const float* r, int64_t n, const float* s, const float* t, float lo, float hi) {
  HWY_DYNAMIC_DISPATCH(PostF32)(y, r, n, s, t, lo, hi);
}
HWY_EXPORT(PostBlocked16F32);
void post_blocked16_f32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks,
                        const float* s, const float* t, float lo, float hi) {
  HWY_DYNAMIC_DISPATCH(PostBlocked16F32)(y, r, b0, b1, plane, cblocks, s, t, lo, hi);
}
}  // namespace kiln::cpu::conv
#endif

#else  // !KILN_WITH_HWY

namespace kiln::cpu::conv {
void post_f32(float* y, const float* r, int64_t n, const float* s, const float* t, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = y[i];
    if (s) {
      v = v * *s;
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
      asm("" : "+x"(v));  // no fused multiply-add
#endif
    }
    if (t) v = v + *t;
    if (r) v = v + r[i];
    y[i] = v < lo ? lo : (v > hi ? hi : v);  // NaN passes through (both compares false)
  }
}
void post_blocked16_f32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks,
                        const float* s, const float* t, float lo, float hi) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t c0 = (b % cblocks) * 16;
    for (int64_t i = 0; i < plane; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t o = (b * plane + i) * 16 + j;
        post_f32(y + o, r ? r + o : nullptr, 1, s ? s + c0 + j : nullptr, t ? t + c0 + j : nullptr, lo, hi);
      }
  }
}
}  // namespace kiln::cpu::conv

#endif
