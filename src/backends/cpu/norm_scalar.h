// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Portable scalar row helpers of the LayerNorm kernel (norm_vec.h), with the structure of the
// Highway ones (8 accumulators): the build without Highway, and f64 rows where the Highway
// target has no f64 vectors (Highway 1.0's WASM target).
#include <cstdint>

namespace kiln::cpu::normvec::scalar {

template <class T>
void sums(const T* x, int64_t n, T shift, T* s1, T* s2) {
  T a[8] = {}, q[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const T v = x[i + j] - shift;
      a[j] += v;
      q[j] += v * v;
    }
  T t1 = 0, t2 = 0;
  for (; i < n; ++i) {
    const T v = x[i] - shift;
    t1 += v;
    t2 += v * v;
  }
  for (int j = 0; j < 8; ++j) {
    t1 += a[j];
    t2 += q[j];
  }
  *s1 = t1;
  *s2 = t2;
}
template <class T>
void moments(const T* x, int64_t n, double* mean, double* m2) {
  T s, q;
  sums<T>(x, n, T(0), &s, &q);
  const T m = s / static_cast<T>(n);
  T c1, c2;
  sums<T>(x, n, m, &c1, &c2);
  *mean = static_cast<double>(m) + static_cast<double>(c1) / static_cast<double>(n);
  double r = static_cast<double>(c2) - static_cast<double>(c1) * static_cast<double>(c1) / static_cast<double>(n);
  *m2 = r > 0 ? r : 0.0;
}
template <class T>
double sumsq(const T* x, int64_t n) {
  T s, q;
  sums<T>(x, n, T(0), &s, &q);
  return static_cast<double>(q);
}
template <class T>
void normalize(const T* x, T* y, int64_t n, T mean, T mean_lo, T rstd, T shift, const T* w, const T* b) {
  for (int64_t i = 0; i < n; ++i) {
    T t = ((x[i] - mean) - mean_lo) * rstd;
    if (w) t *= w[i];
    t += b ? b[i] : shift;
    y[i] = t;
  }
}

}  // namespace kiln::cpu::normvec::scalar
