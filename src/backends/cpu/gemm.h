// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Dense matrix multiply on raw CPU buffers, shared by the MatMul and convolution kernels.
// Strides are in elements and may be any values (row- or column-major, views, negative).
#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

/// C[m, n] = alpha * sum_k A[m, k] * B[k, n] + beta * C[m, n] for m < M, n < N.
/// A element (m, k) is A[m * rsa + k * csa], likewise B and C. beta = 0 never reads C; K = 0
/// or alpha = 0 gives beta * C without reading A or B. C must not overlap A or B.
/// Parallel over the thread pool unless called from inside a parallel region; the result does
/// not depend on the thread count (each C element is summed in one fixed k order).
void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
              int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);
void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa, const double* B,
              int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc);

/// Whether an M x N x K product of elem-byte values is small (gemm_small_f32 takes it): B
/// (K x N) within 32 KiB, in L1 with the rows of A and C, and little enough work that packing
/// and threads do not pay (measured against oneDNN's sgemm and the packed driver). A B whose
/// rows are not contiguous must also fit in 8 KiB (it is copied first). KILN_GEMM_SMALL=0
/// turns the small kernel off (read once).
bool gemm_small_fits(int64_t M, int64_t N, int64_t K, size_t elem);
/// gemm_f32 / gemm_f64 for a small product (its B fits in L1 and it is too small to be worth
/// blocking or threads), on one thread without packing; false (nothing done) for any other.
/// The result depends on the shape only. matmul_f32 tries it before oneDNN, whose per-call
/// cost is larger than such a product.
bool gemm_small_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                    const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);

/// C = A B [+ bias in every row] for one f32 matrix (strides as gemm_f32): oneDNN's sgemm when
/// it is on and the layout fits, else gemm_f32. bias: null, or N values at stride bstride
/// written into C's rows first, the product accumulated onto them (beta = 1). matmul.cpp.
void matmul_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa, const float* B, int64_t rsb,
                int64_t csb, float* C, int64_t rsc, int64_t csc, const float* bias = nullptr, int64_t bstride = 1);

namespace gemm_detail {

/// The register-blocked building blocks of one SIMD target (gemm_hwy.cpp) or the scalar
/// fallback (gemm.cpp). Packed panels are 64-byte aligned.
template <class T>
struct Kernels {
  int mr = 0, nr = 0;  // micro-tile rows (A panel height) and columns (B panel width)
  /// C[i, j] = alpha * sum_k a[k * mr + i] * b[k * nr + j] + beta * C[i, j] for i < m <= mr,
  /// j < n <= nr (beta = 0 does not read C); C element (i, j) is c[i * rsc + j * csc].
  void (*tile)(int64_t kc, const T* a, const T* b, T* c, int64_t rsc, int64_t csc, int64_t m, int64_t n, T alpha,
               T beta) = nullptr;
  /// Packs rows [0, m) (m <= mr) and k [0, kc) of A into dst[k * mr + i], zero rows past m.
  void (*pack_a)(const T* A, int64_t rsa, int64_t csa, int64_t m, int64_t kc, T* dst) = nullptr;
  /// Packs k [0, kc) and columns [0, n) (n <= nr) of B into dst[k * nr + j], zero columns past n.
  void (*pack_b)(const T* B, int64_t rsb, int64_t csb, int64_t n, int64_t kc, T* dst) = nullptr;
  /// sum_i x[i] * y[i] over n contiguous elements (a fixed summation order for a given n).
  T (*dot)(const T* x, const T* y, int64_t n) = nullptr;
  /// y[i] += a * x[i] over n contiguous elements.
  void (*axpy)(T a, const T* x, T* y, int64_t n) = nullptr;
  /// C = alpha * A B + beta * C without packing, for products whose B fits in L1: B and C rows
  /// contiguous (element (k, n) at B[k * rsb + n]), every row of B readable up to N rounded up
  /// to `lanes`. Each element is summed over k in order. Null without SIMD.
  void (*small)(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa, const T* B, int64_t rsb,
                T beta, T* C, int64_t rsc) = nullptr;
  int lanes = 1;  ///< vector width of `small`
};

/// The best kernels of the running CPU (null members when built without SIMD).
Kernels<float> simd_kernels_f32();
Kernels<double> simd_kernels_f64();

/// Testing hook: which kernels gemm uses. 0: the best for this CPU; 1: at most AVX2;
/// 2: at most SSE4 (both x86 only, and they restrict every Highway dispatch of the process);
/// 3: the scalar fallback.
void set_kernel_limit_for_test(int level);

}  // namespace gemm_detail
}  // namespace kiln::cpu
