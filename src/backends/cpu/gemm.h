// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Dense matrix multiply on raw CPU buffers, shared by the MatMul and convolution kernels.
// Strides are in elements and may be any non-negative values (row- or column-major, views).
#include <cstdint>

namespace kiln::cpu {

/// C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n] for m < M, n < N.
/// A element (m, k) is A[m * rsa + k * csa], likewise B and C. beta = 0 never reads C.
/// Parallel over the thread pool unless called from inside a parallel region.
void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
              int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);
void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa, const double* B,
              int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc);

}  // namespace kiln::cpu
