// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Vectorised row helpers of the LayerNorm kernel (norm_hwy.cpp: Highway, runtime-dispatched;
// scalar code without Highway). Each works on one contiguous piece of a row that fits in L1
// (the kernel splits longer rows into chunks), so a second pass over it is cheap.
#include <cstdint>

namespace kiln::cpu::normvec {

/// Mean and sum of squared deviations (M2) of n >= 1 contiguous values: two passes (the sum,
/// then the corrected sum of squares around the rounded mean). Accumulates in T's precision in
/// a fixed lane layout (deterministic for one target); the results are returned as double.
void moments_f32(const float* x, int64_t n, double* mean, double* m2);
void moments_f64(const double* x, int64_t n, double* mean, double* m2);
/// Sum of squares of n contiguous values.
double sumsq_f32(const float* x, int64_t n);
double sumsq_f64(const double* x, int64_t n);
/// y[i] = ((x[i] - mean) - mean_lo) * rstd (mean + mean_lo: the mean in two parts, so that a
/// large offset cancels exactly), then * w[i] when w, then + b[i] when b else + shift (w, b may
/// be null).
void normalize_f32(const float* x, float* y, int64_t n, float mean, float mean_lo, float rstd, float shift,
                   const float* w, const float* b);
void normalize_f64(const double* x, double* y, int64_t n, double mean, double mean_lo, double rstd, double shift,
                   const double* w, const double* b);

}  // namespace kiln::cpu::normvec
