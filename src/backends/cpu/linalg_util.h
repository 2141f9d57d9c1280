// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers of the linalg kernels: batch offsets of strided matrix stacks, and loading/storing
// one matrix of a float32/float64 view to/from a dense f64 work buffer. Every factorisation
// runs in f64 on such a buffer (f32 inputs gain accuracy; any strides are handled here once).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/loops.h"
#include "core/parallel.h"
#include "ir/op.h"

namespace kiln::cpu::linalg {

/// Element offsets (from base_ptr) of each matrix of view d, for the batch shape `batch` that
/// d's batch dims broadcast to (right-aligned; size-1 dims repeat).
inline std::vector<int64_t> batch_offsets(const ir::TensorDesc& d, const Shape& batch) {
  int64_t nb = shape_numel(batch);
  std::vector<int64_t> off(static_cast<size_t>(nb), 0);
  const size_t r = batch.size(), dr = d.shape.size() - 2, lead = r - dr;
  for (int64_t b = 0; b < nb; ++b) {
    int64_t rem = b, o = 0;
    for (size_t i = r; i-- > 0;) {
      int64_t idx = rem % batch[i];
      rem /= batch[i];
      if (i >= lead) {
        size_t j = i - lead;
        if (d.shape[j] != 1) o += idx * d.strides[j];
      }
    }
    off[static_cast<size_t>(b)] = o;
  }
  return off;
}

/// Row and column strides (elements) of the matrices of d.
inline int64_t row_stride(const ir::TensorDesc& d) { return d.strides[d.shape.size() - 2]; }
inline int64_t col_stride(const ir::TensorDesc& d) { return d.strides[d.shape.size() - 1]; }

/// dst[i * ld + j] = src(i, j) for an r x c matrix with element strides rs, cs; with
/// `transpose`, dst[j * ld + i] = src(i, j) instead.
template <class T>
void load(const T* src, int64_t rs, int64_t cs, int64_t r, int64_t c, double* dst, int64_t ld, bool transpose) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double v = static_cast<double>(src[i * rs + j * cs]);
      if (transpose)
        dst[j * ld + i] = v;
      else
        dst[i * ld + j] = v;
    }
}

/// Writes an r x c contiguous output matrix: out(i, j) = src[i * ld + j] (or src[j * ld + i]
/// with `transpose`).
template <class T>
void store(const double* src, int64_t ld, bool transpose, int64_t r, int64_t c, T* out) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[i * c + j] = static_cast<T>(transpose ? src[j * ld + i] : src[i * ld + j]);
}

/// Runs f(b) for each of nb matrices, in parallel when the total work (flops ~ `work` each)
/// is large. Each matrix is computed on its own, so the result does not depend on threads.
template <class F>
void for_each_matrix(int64_t nb, double work, const F& f) {
  int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(262144.0 / std::max(work, 1.0)));
  parallel_for(nb, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b);
  });
}

inline double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
/// y += alpha * x
inline void axpy(double alpha, const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace kiln::cpu::linalg
