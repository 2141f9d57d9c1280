// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway kernels of the convolution paths, compiled for several x86 targets and chosen at run
// time: the per-channel bias (or scale and shift), residual and activation applied to a thread's share
// of a convolution's output, plain or in oneDNN's blocked 16-channel layout
// (Note [Convolution activations] in conv_onednn.cpp), with the scalar loop's compares, so NaN
// passes.
#include <algorithm>
#include <cmath>
#include <type_traits>

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
#include "backends/cpu/transpose16-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::conv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// One vector of the epilogue: v (* s) (+ t) (+ r), clamped to [lo, hi] with the scalar compares.
template <bool kScale, bool kShift, bool kRes, class D, class V = hn::Vec<D>>
HWY_INLINE V Step(D d, V v, V vs, V vt, const float* r, V vlo, V vhi) {
  if constexpr (kScale) {
    v = hn::Mul(v, vs);
#if HWY_ARCH_X86
    asm("" : "+v"(v.raw));  // the product rounds before the sum (no fused multiply-add)
#endif
  }
  if constexpr (kShift) v = hn::Add(v, vt);
  if constexpr (kRes) v = hn::Add(v, hn::LoadU(d, r));
  return hn::IfThenElse(hn::Lt(v, vlo), vlo, hn::IfThenElse(hn::Gt(v, vhi), vhi, v));
}

/// Calls f(S, T, R), std::bool_constant types telling whether the scale, shift and residual steps
/// run, so each combination is its own instantiation.
template <class F>
HWY_INLINE void WithSteps(bool s, bool t, bool r, const F& f) {
  auto with_r = [&](auto S, auto T) { r ? f(S, T, std::true_type{}) : f(S, T, std::false_type{}); };
  auto with_t = [&](auto S) { t ? with_r(S, std::true_type{}) : with_r(S, std::false_type{}); };
  s ? with_t(std::true_type{}) : with_t(std::false_type{});
}

void PostPlanesF32(float* y, const float* r, int64_t p0, int64_t p1, int64_t C, int64_t plane, const float* s,
                   const float* t, float lo, float hi) {
  WithSteps(s, t, r, [&](auto S, auto T, auto R) {
    constexpr bool kScale = decltype(S)::value, kShift = decltype(T)::value, kRes = decltype(R)::value;
    const hn::ScalableTag<float> d;
    using V = hn::Vec<decltype(d)>;
    const auto N = static_cast<int64_t>(hn::Lanes(d));
    const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % C;
      const float sv = kScale ? s[c] : 1.f, tv = kShift ? t[c] : 0.f;
      const V vs = hn::Set(d, sv), vt = hn::Set(d, tv);
      float* yp = y + p * plane;
      const float* rp = kRes ? r + p * plane : nullptr;
      int64_t i = 0;
      for (; i + N <= plane; i += N)
        hn::StoreU(Step<kScale, kShift, kRes>(d, hn::LoadU(d, yp + i), vs, vt, kRes ? rp + i : nullptr, vlo, vhi), d,
                   yp + i);
      for (; i < plane; ++i) {
        float v = yp[i];
        if constexpr (kScale) {
          v = v * sv;
#if HWY_ARCH_X86
          asm("" : "+x"(v));
#endif
        }
        if constexpr (kShift) v = v + tv;
        if constexpr (kRes) v = v + rp[i];
        yp[i] = v < lo ? lo : (v > hi ? hi : v);
      }
    }
  });
}

/// Copies a tile of len (<= 16) positions of a blocked 16-channel plane (blk: [len][16]) to 16
/// plain channel rows (channel j at plain + j * plane).
HWY_INLINE void UnblockTile(const float* blk, int64_t len, int64_t plane, float* plain) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if (len == 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(blk + i * 16);
    Transpose16x16(r);
    for (int j = 0; j < 16; ++j) _mm512_storeu_ps(plain + j * plane, r[j]);
    return;
  }
#endif
  for (int64_t j = 0; j < 16; ++j)
    for (int64_t i = 0; i < len; ++i) plain[j * plane + i] = blk[i * 16 + j];
}

void PostBlocked16F32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks, const float* s,
                      const float* t, float lo, float hi, float* plain, int64_t q0, int64_t q1) {
  WithSteps(s, t, r, [&](auto S, auto T, auto R) {
    constexpr bool kScale = decltype(S)::value, kShift = decltype(T)::value, kRes = decltype(R)::value;
    const hn::ScalableTag<float> d;
    using V = hn::Vec<decltype(d)>;
    const auto N = static_cast<int64_t>(hn::Lanes(d));
    const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t c0 = (b % cblocks) * 16;  // the block's first channel
      float* yb = y + b * plane * 16;
      const float* rb = kRes ? r + b * plane * 16 : nullptr;
      // Tiles of 16 positions: each is copied to the plain rows while it is in the cache.
      for (int64_t i0 = q0; i0 < q1; i0 += 16) {
        const int64_t i1 = std::min<int64_t>(q1, i0 + 16);
        for (int64_t j = 0; j < 16; j += N) {
          const V vs = kScale ? hn::LoadU(d, s + c0 + j) : hn::Set(d, 1.f);
          const V vt = kShift ? hn::LoadU(d, t + c0 + j) : hn::Set(d, 0.f);
          for (int64_t i = i0; i < i1; ++i) {
            float* p = yb + i * 16 + j;
            hn::StoreU(
                Step<kScale, kShift, kRes>(d, hn::LoadU(d, p), vs, vt, kRes ? rb + i * 16 + j : nullptr, vlo, vhi), d,
                p);
          }
        }
        if (plain) UnblockTile(yb + i0 * 16, i1 - i0, plane, plain + b * 16 * plane + i0);
      }
    }
  });
}

void Unblock16F32(const float* y, int64_t b0, int64_t b1, int64_t plane, float* plain, int64_t q0, int64_t q1) {
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t i0 = q0; i0 < q1; i0 += 16)
      UnblockTile(y + (b * plane + i0) * 16, std::min<int64_t>(q1 - i0, 16), plane, plain + b * 16 * plane + i0);
}

}  // namespace kiln::cpu::conv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::conv {
HWY_EXPORT(PostPlanesF32);
void post_planes_f32(float* y, const float* r, int64_t p0, int64_t p1, int64_t C, int64_t plane, const float* s,
                     const float* t, float lo, float hi) {
  HWY_DYNAMIC_DISPATCH(PostPlanesF32)(y, r, p0, p1, C, plane, s, t, lo, hi);
}
void post_f32(float* y, const float* r, int64_t n, const float* s, const float* t, float lo, float hi) {
  post_planes_f32(y, r, 0, 1, 1, n, s, t, lo, hi);
}
HWY_EXPORT(PostBlocked16F32);
void post_blocked16_f32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks,
                        const float* s, const float* t, float lo, float hi, float* plain, int64_t q0, int64_t q1) {
  HWY_DYNAMIC_DISPATCH(PostBlocked16F32)(y, r, b0, b1, plane, cblocks, s, t, lo, hi, plain, q0, q1 < 0 ? plane : q1);
}
HWY_EXPORT(Unblock16F32);
void unblock16_f32(const float* y, int64_t b0, int64_t b1, int64_t plane, float* plain, int64_t q0, int64_t q1) {
  HWY_DYNAMIC_DISPATCH(Unblock16F32)(y, b0, b1, plane, plain, q0, q1 < 0 ? plane : q1);
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
void post_planes_f32(float* y, const float* r, int64_t p0, int64_t p1, int64_t C, int64_t plane, const float* s,
                     const float* t, float lo, float hi) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t c = p % C;
    post_f32(y + p * plane, r ? r + p * plane : nullptr, plane, s ? s + c : nullptr, t ? t + c : nullptr, lo, hi);
  }
}
void unblock16_f32(const float* y, int64_t b0, int64_t b1, int64_t plane, float* plain, int64_t q0, int64_t q1) {
  if (q1 < 0) q1 = plane;
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t j = 0; j < 16; ++j)
      for (int64_t i = q0; i < q1; ++i) plain[(b * 16 + j) * plane + i] = y[(b * plane + i) * 16 + j];
}
void post_blocked16_f32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks,
                        const float* s, const float* t, float lo, float hi, float* plain, int64_t q0, int64_t q1) {
  if (q1 < 0) q1 = plane;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t c0 = (b % cblocks) * 16;
    for (int64_t i = q0; i < q1; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t o = (b * plane + i) * 16 + j;
        post_f32(y + o, r ? r + o : nullptr, 1, s ? s + c0 + j : nullptr, t ? t + c0 + j : nullptr, lo, hi);
      }
  }
  if (plain) unblock16_f32(y, b0, b1, plane, plain, q0, q1);
}
}  // namespace kiln::cpu::conv

#endif
