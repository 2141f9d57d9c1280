// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway row helpers of the LayerNorm kernel (norm_vec.h), compiled for several x86 targets
// and chosen at run time. Four independent vector accumulators hide the add latency; their
// fixed layout keeps results independent of the thread count.
#include <cmath>

#include "backends/cpu/norm_scalar.h"
#include "backends/cpu/norm_vec.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/norm_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target, then highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::normvec::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of x (shift = 0) or the sums of (x - shift) and (x - shift)^2.
template <class T, bool kSquares>
HWY_INLINE void Sums(const T* x, int64_t n, T shift, T* s1, T* s2) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vs = hn::Set(d, shift);
  V a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  V q0 = hn::Zero(d), q1 = hn::Zero(d), q2 = hn::Zero(d), q3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const V x0 = hn::Sub(hn::LoadU(d, x + i), vs), x1 = hn::Sub(hn::LoadU(d, x + i + N), vs);
    const V x2 = hn::Sub(hn::LoadU(d, x + i + 2 * N), vs), x3 = hn::Sub(hn::LoadU(d, x + i + 3 * N), vs);
    a0 = hn::Add(a0, x0);
    a1 = hn::Add(a1, x1);
    a2 = hn::Add(a2, x2);
    a3 = hn::Add(a3, x3);
    if constexpr (kSquares) {
      q0 = hn::MulAdd(x0, x0, q0);
      q1 = hn::MulAdd(x1, x1, q1);
      q2 = hn::MulAdd(x2, x2, q2);
      q3 = hn::MulAdd(x3, x3, q3);
    }
  }
  for (; i + N <= n; i += N) {
    const V x0 = hn::Sub(hn::LoadU(d, x + i), vs);
    a0 = hn::Add(a0, x0);
    if constexpr (kSquares) q0 = hn::MulAdd(x0, x0, q0);
  }
  T t1 = 0, t2 = 0;
  for (; i < n; ++i) {
    const T v = x[i] - shift;
    t1 += v;
    t2 += v * v;
  }
  *s1 = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)))) + t1;
  if constexpr (kSquares) *s2 = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3)))) + t2;
}

template <class T>
HWY_INLINE void Moments(const T* x, int64_t n, double* mean, double* m2) {
  T s = 0, unused = 0;
  Sums<T, false>(x, n, T(0), &s, &unused);
  const T m = s / static_cast<T>(n);
  // Corrected two-pass: sum (x - m)^2 - (sum (x - m))^2 / n removes the rounding of m.
  T c1 = 0, c2 = 0;
  Sums<T, true>(x, n, m, &c1, &c2);
  *mean = static_cast<double>(m) + static_cast<double>(c1) / static_cast<double>(n);
  double r = static_cast<double>(c2) - static_cast<double>(c1) * static_cast<double>(c1) / static_cast<double>(n);
  *m2 = r > 0 ? r : 0.0;
}

template <class T>
HWY_INLINE double SumSq(const T* x, int64_t n) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  V q0 = hn::Zero(d), q1 = hn::Zero(d), q2 = hn::Zero(d), q3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const V x0 = hn::LoadU(d, x + i), x1 = hn::LoadU(d, x + i + N);
    const V x2 = hn::LoadU(d, x + i + 2 * N), x3 = hn::LoadU(d, x + i + 3 * N);
    q0 = hn::MulAdd(x0, x0, q0);
    q1 = hn::MulAdd(x1, x1, q1);
    q2 = hn::MulAdd(x2, x2, q2);
    q3 = hn::MulAdd(x3, x3, q3);
  }
  for (; i + N <= n; i += N) {
    const V x0 = hn::LoadU(d, x + i);
    q0 = hn::MulAdd(x0, x0, q0);
  }
  T t = 0;
  for (; i < n; ++i) t += x[i] * x[i];
  return static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3))))) +
         static_cast<double>(t);
}

template <class T>
HWY_INLINE void Normalize(const T* x, T* y, int64_t n, T mean, T mean_lo, T rstd, T shift, const T* w, const T* b) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vm = hn::Set(d, mean), vl = hn::Set(d, mean_lo), vr = hn::Set(d, rstd), vs = hn::Set(d, shift);
  int64_t i = 0;
  auto body = [&](auto wb) {
    for (; i + N <= n; i += N) {
      const V t = hn::Mul(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vm), vl), vr);
      V r;
      if constexpr (decltype(wb)::value == 3)
        r = hn::MulAdd(t, hn::LoadU(d, w + i), hn::LoadU(d, b + i));
      else if constexpr (decltype(wb)::value == 1)
        r = hn::MulAdd(t, hn::LoadU(d, w + i), vs);
      else if constexpr (decltype(wb)::value == 2)
        r = hn::Add(t, hn::LoadU(d, b + i));
      else
        r = hn::Add(t, vs);
      hn::StoreU(r, d, y + i);
    }
  };
  if (w && b)
    body(std::integral_constant<int, 3>());
  else if (w)
    body(std::integral_constant<int, 1>());
  else if (b)
    body(std::integral_constant<int, 2>());
  else
    body(std::integral_constant<int, 0>());
  for (; i < n; ++i) {
    T t = ((x[i] - mean) - mean_lo) * rstd;
    if (w) t *= w[i];
    t += b ? b[i] : shift;
    y[i] = t;
  }
}

void MomentsF32(const float* x, int64_t n, double* mean, double* m2) { Moments(x, n, mean, m2); }
double SumSqF32(const float* x, int64_t n) { return SumSq(x, n); }
void NormalizeF32(const float* x, float* y, int64_t n, float mean, float mean_lo, float rstd, float shift,
                  const float* w, const float* b) {
  Normalize(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
#if HWY_HAVE_FLOAT64
void MomentsF64(const double* x, int64_t n, double* mean, double* m2) { Moments(x, n, mean, m2); }
double SumSqF64(const double* x, int64_t n) { return SumSq(x, n); }
void NormalizeF64(const double* x, double* y, int64_t n, double mean, double mean_lo, double rstd, double shift,
                  const double* w, const double* b) {
  Normalize(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
#else  // no f64 vectors on this target (Highway 1.0's WASM): the scalar rows
void MomentsF64(const double* x, int64_t n, double* mean, double* m2) { scalar::moments(x, n, mean, m2); }
double SumSqF64(const double* x, int64_t n) { return scalar::sumsq(x, n); }
void NormalizeF64(const double* x, double* y, int64_t n, double mean, double mean_lo, double rstd, double shift,
                  const double* w, const double* b) {
  scalar::normalize(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
#endif

}  // namespace kiln::cpu::normvec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::normvec {
HWY_EXPORT(MomentsF32);
HWY_EXPORT(MomentsF64);
HWY_EXPORT(SumSqF32);
HWY_EXPORT(SumSqF64);
HWY_EXPORT(NormalizeF32);
HWY_EXPORT(NormalizeF64);
void moments_f32(const float* x, int64_t n, double* mean, double* m2) {
  HWY_DYNAMIC_DISPATCH(MomentsF32)(x, n, mean, m2);
}
void moments_f64(const double* x, int64_t n, double* mean, double* m2) {
  HWY_DYNAMIC_DISPATCH(MomentsF64)(x, n, mean, m2);
}
double sumsq_f32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumSqF32)(x, n); }
double sumsq_f64(const double* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumSqF64)(x, n); }
void normalize_f32(const float* x, float* y, int64_t n, float mean, float mean_lo, float rstd, float shift,
                   const float* w, const float* b) {
  HWY_DYNAMIC_DISPATCH(NormalizeF32)(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
void normalize_f64(const double* x, double* y, int64_t n, double mean, double mean_lo, double rstd, double shift,
                   const double* w, const double* b) {
  HWY_DYNAMIC_DISPATCH(NormalizeF64)(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
}  // namespace kiln::cpu::normvec
#endif

#else  // !KILN_WITH_HWY: portable scalar code with the same structure (8 accumulators).
namespace kiln::cpu::normvec {
using namespace scalar;
void moments_f32(const float* x, int64_t n, double* mean, double* m2) { moments(x, n, mean, m2); }
void moments_f64(const double* x, int64_t n, double* mean, double* m2) { moments(x, n, mean, m2); }
double sumsq_f32(const float* x, int64_t n) { return sumsq(x, n); }
double sumsq_f64(const double* x, int64_t n) { return sumsq(x, n); }
void normalize_f32(const float* x, float* y, int64_t n, float mean, float mean_lo, float rstd, float shift,
                   const float* w, const float* b) {
  normalize(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
void normalize_f64(const double* x, double* y, int64_t n, double mean, double mean_lo, double rstd, double shift,
                   const double* w, const double* b) {
  normalize(x, y, n, mean, mean_lo, rstd, shift, w, b);
}
}  // namespace kiln::cpu::normvec
#endif
