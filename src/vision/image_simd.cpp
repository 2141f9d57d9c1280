// SPDX-License-Identifier: MIT OR Apache-2.0
// Row kernels of kiln::vision's host fast paths (image_simd.h): Highway, compiled for several
// x86 targets and chosen at run time; the same loops in plain C++ without Highway. Full vectors
// run over the row and the last one overlaps the previous (dst never aliases an input), so rows
// shorter than one vector take the scalar loop.
#include "vision/image_simd.h"

#include <algorithm>
#include <cmath>

// Highway's foreach_target.h includes this file again for each target: the scalar helpers once.
#ifndef KILN_VISION_IMAGE_SIMD_SCALAR
#define KILN_VISION_IMAGE_SIMD_SCALAR
namespace kiln::vision::detail {
namespace {

template <class T>
void minmax_scalar(T* dst, const T* const* src, int k, int64_t from, int64_t n, bool max) {
  for (int64_t x = from; x < n; ++x) {
    T a = src[0][x];
    for (int i = 1; i < k; ++i) a = max ? std::max(a, src[i][x]) : std::min(a, src[i][x]);
    dst[x] = a;
  }
}

template <class T>
void median_scalar(T* dst, const T* const* src, int k, const uint8_t* pairs, int npairs, int64_t from, int64_t n) {
  T v[256];
  for (int64_t x = from; x < n; ++x) {
    for (int i = 0; i < k; ++i) v[i] = src[i][x];
    for (int p = 0; p < npairs; ++p) {
      const T a = v[pairs[2 * p]], b = v[pairs[2 * p + 1]];
      v[pairs[2 * p]] = std::min(a, b);
      v[pairs[2 * p + 1]] = std::max(a, b);
    }
    dst[x] = v[k / 2];
  }
}

uint8_t round_u8(float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f)); }

}  // namespace
}  // namespace kiln::vision::detail
#endif

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "vision/image_simd.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target before highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::vision::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class T>
void MinMaxRows(T* dst, const T* const* src, int k, int64_t n, bool max) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  if (n < N) return minmax_scalar(dst, src, k, 0, n, max);
  for (int64_t x = 0;; x += N) {
    x = std::min(x, n - N);
    auto a = hn::LoadU(d, src[0] + x);
    if (max) {
      for (int i = 1; i < k; ++i) a = hn::Max(a, hn::LoadU(d, src[i] + x));
    } else {
      for (int i = 1; i < k; ++i) a = hn::Min(a, hn::LoadU(d, src[i] + x));
    }
    hn::StoreU(a, d, dst + x);
    if (x == n - N) break;
  }
}

void MinMaxRowsU8(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max) {
  MinMaxRows(dst, src, k, n, max);
}
void MinMaxRowsF32(float* dst, const float* const* src, int k, int64_t n, bool max) { MinMaxRows(dst, src, k, n, max); }

void DotRows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  int64_t x = 0;
  if (n >= N) {
    for (;; x += N) {
      x = std::min(x, n - N);
      auto a = hn::Set(d, bias);
      for (int i = 0; i < k; ++i) a = hn::MulAdd(hn::Set(d, w[i]), hn::LoadU(d, src[i] + x), a);
      hn::StoreU(a, d, dst + x);
      if (x == n - N) return;
    }
  }
  for (; x < n; ++x) {
    float a = bias;
    for (int i = 0; i < k; ++i) a = std::fma(w[i], src[i][x], a);
    dst[x] = a;
  }
}

void U8ToF32(float* dst, const uint8_t* src, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  int64_t x = 0;
  for (; x + N <= n; x += N) hn::StoreU(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(du, src + x))), df, dst + x);
  for (; x < n; ++x) dst[x] = src[x];
}

void F32ToU8(uint8_t* dst, const float* src, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint8_t, decltype(df)> du;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  const auto lo = hn::Zero(df), hi = hn::Set(df, 255.0f);
  int64_t x = 0;
  for (; x + N <= n; x += N) {
    const auto v = hn::Min(hn::Max(hn::LoadU(df, src + x), lo), hi);
    hn::StoreU(hn::DemoteTo(du, hn::NearestInt(v)), du, dst + x);
  }
  for (; x < n; ++x) dst[x] = round_u8(src[x]);
}

template <class T>
void MedianRows(T* dst, const T* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
  median_scalar(dst, src, k, pairs, npairs, 0, n);
#else
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  if (n < N) return median_scalar(dst, src, k, pairs, npairs, 0, n);
  hn::Vec<decltype(d)> v[64];
  for (int64_t x = 0;; x += N) {
    x = std::min(x, n - N);
    for (int i = 0; i < k; ++i) v[i] = hn::LoadU(d, src[i] + x);
    for (int p = 0; p < npairs; ++p) {
      const auto a = v[pairs[2 * p]], b = v[pairs[2 * p + 1]];
      v[pairs[2 * p]] = hn::Min(a, b);
      v[pairs[2 * p + 1]] = hn::Max(a, b);
    }
    hn::StoreU(v[k / 2], d, dst + x);
    if (x == n - N) break;
  }
#endif
}

void MedianRowsU8(uint8_t* dst, const uint8_t* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
  MedianRows(dst, src, k, pairs, npairs, n);
}
void MedianRowsF32(float* dst, const float* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
  MedianRows(dst, src, k, pairs, npairs, n);
}

}  // namespace kiln::vision::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::vision::detail {
HWY_EXPORT(MinMaxRowsU8);
HWY_EXPORT(MinMaxRowsF32);
HWY_EXPORT(DotRows);
HWY_EXPORT(U8ToF32);
HWY_EXPORT(F32ToU8);
HWY_EXPORT(MedianRowsU8);
HWY_EXPORT(MedianRowsF32);

void minmax_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max) {
  HWY_DYNAMIC_DISPATCH(MinMaxRowsU8)(dst, src, k, n, max);
}
void minmax_rows(float* dst, const float* const* src, int k, int64_t n, bool max) {
  HWY_DYNAMIC_DISPATCH(MinMaxRowsF32)(dst, src, k, n, max);
}
void dot_rows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DotRows)(dst, src, w, k, bias, n);
}
void u8_to_f32(float* dst, const uint8_t* src, int64_t n) { HWY_DYNAMIC_DISPATCH(U8ToF32)(dst, src, n); }
void f32_to_u8(uint8_t* dst, const float* src, int64_t n) { HWY_DYNAMIC_DISPATCH(F32ToU8)(dst, src, n); }
void median_rows(uint8_t* dst, const uint8_t* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MedianRowsU8)(dst, src, k, pairs, npairs, n);
}
void median_rows(float* dst, const float* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MedianRowsF32)(dst, src, k, pairs, npairs, n);
}
}  // namespace kiln::vision::detail
#endif

#else  // !KILN_WITH_HWY

namespace kiln::vision::detail {
void minmax_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max) {
  minmax_scalar(dst, src, k, 0, n, max);
}
void minmax_rows(float* dst, const float* const* src, int k, int64_t n, bool max) {
  minmax_scalar(dst, src, k, 0, n, max);
}
void dot_rows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n) {
  for (int64_t x = 0; x < n; ++x) {
    float a = bias;
    for (int i = 0; i < k; ++i) a += w[i] * src[i][x];
    dst[x] = a;
  }
}
void u8_to_f32(float* dst, const uint8_t* src, int64_t n) {
  for (int64_t x = 0; x < n; ++x) dst[x] = src[x];
}
void f32_to_u8(uint8_t* dst, const float* src, int64_t n) {
  for (int64_t x = 0; x < n; ++x) dst[x] = round_u8(src[x]);
}
void median_rows(uint8_t* dst, const uint8_t* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
  median_scalar(dst, src, k, pairs, npairs, 0, n);
}
void median_rows(float* dst, const float* const* src, int k, const uint8_t* pairs, int npairs, int64_t n) {
  median_scalar(dst, src, k, pairs, npairs, 0, n);
}
}  // namespace kiln::vision::detail

#endif
