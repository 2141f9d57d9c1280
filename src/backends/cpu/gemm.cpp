// SPDX-License-Identifier: MIT OR Apache-2.0
// Reference GEMM (to be replaced by the packed SIMD kernel).
#include "backends/cpu/gemm.h"

namespace kiln::cpu {

namespace {
template <class T>
void gemm_ref(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa, const T* B, int64_t rsb,
              int64_t csb, T beta, T* C, int64_t rsc, int64_t csc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(A[m * rsa + k * csa]) * double(B[k * rsb + n * csb]);
      T& c = C[m * rsc + n * csc];
      c = beta == T(0) ? T(alpha * T(acc)) : T(alpha * T(acc) + beta * c);
    }
}
}  // namespace

void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
              int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_ref(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}
void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa, const double* B,
              int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc) {
  gemm_ref(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

}  // namespace kiln::cpu
