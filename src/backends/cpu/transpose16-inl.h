// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-target 16 x 16 f32 transpose in registers (x86 targets with 16-lane vectors): the blocked
// 16-channel layouts' tiles to plain channel rows (conv_hwy.cpp's unblocking, the direct
// convolution's epilogue). Include it after hwy/highway.h; it re-includes itself once per target.
#if defined(KILN_CPU_TRANSPOSE16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_CPU_TRANSPOSE16_INL_H_
#undef KILN_CPU_TRANSPOSE16_INL_H_
#else
#define KILN_CPU_TRANSPOSE16_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::conv::HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
/// Transposes r in place: on entry r[i] holds position i's 16 channels, on return r[j] holds
/// channel j's 16 positions. Four rounds: 32-bit and 64-bit interleaves within 128-bit lanes,
/// then two rounds of 128-bit lane shuffles.
HWY_INLINE void Transpose16x16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // r[4i + m], lane k: channel 4k + m of positions 4i ... 4i + 3
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), e = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
  }
  for (int i = 0; i < 2; ++i)
    for (int m = 0; m < 4; ++m) {
      t[8 * i + m] = _mm512_shuffle_f32x4(r[8 * i + m], r[8 * i + 4 + m], 0x88);
      t[8 * i + 4 + m] = _mm512_shuffle_f32x4(r[8 * i + m], r[8 * i + 4 + m], 0xdd);
    }
  for (int m = 0; m < 8; ++m) {
    r[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xdd);
  }
}
#endif

}  // namespace kiln::cpu::conv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
