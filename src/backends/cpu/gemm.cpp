// SPDX-License-Identifier: MIT OR Apache-2.0
// Packed, blocked GEMM (the Goto/BLIS scheme). For each KC-deep slice of K and NC-wide slice of
// N, B is packed once into NR-wide panels (shared by all threads, L3), then each thread takes a
// range of rows (or columns), packs MC x KC blocks of A into MR-high panels (L2) and runs the
// register-tile micro-kernel of gemm_hwy.cpp over every (MR, NR) tile, B panel outermost so it
// stays in L1. Each C tile is summed over the K slices in order by one kernel call per slice, so
// the result does not depend on which thread ran it. Matrix-vector shapes (M = 1 or N = 1) use
// dot / axpy loops instead.
#include "backends/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#include "core/machine.h"
#include "core/parallel.h"

namespace kiln::cpu {

namespace {
using gemm_detail::Kernels;

// ---- scalar fallback kernels (builds without Highway, or CPUs without SIMD) -------------------

constexpr int kScalarMR = 4, kScalarNR = 8;

template <class T>
void scalar_tile(int64_t kc, const T* a, const T* b, T* c, int64_t rsc, int64_t csc, int64_t m, int64_t n, T alpha,
                 T beta) {
  T acc[kScalarMR][kScalarNR] = {};
  for (int64_t k = 0; k < kc; ++k, a += kScalarMR, b += kScalarNR)
    for (int i = 0; i < kScalarMR; ++i)
      for (int j = 0; j < kScalarNR; ++j) acc[i][j] += a[i] * b[j];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T& y = c[i * rsc + j * csc];
      y = beta == T(0) ? alpha * acc[i][j] : beta * y + alpha * acc[i][j];
    }
}

template <class T, int R>
void scalar_pack(const T* X, int64_t rs, int64_t cs, int64_t m, int64_t kc, T* dst) {
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t i = 0; i < R; ++i) dst[k * R + i] = i < m ? X[i * rs + k * cs] : T(0);
}
template <class T>
void scalar_pack_a(const T* A, int64_t rsa, int64_t csa, int64_t m, int64_t kc, T* dst) {
  scalar_pack<T, kScalarMR>(A, rsa, csa, m, kc, dst);
}
template <class T>
void scalar_pack_b(const T* B, int64_t rsb, int64_t csb, int64_t n, int64_t kc, T* dst) {
  scalar_pack<T, kScalarNR>(B, csb, rsb, n, kc, dst);
}
template <class T>
T scalar_dot(const T* x, const T* y, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}
template <class T>
void scalar_axpy(T a, const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

std::atomic<int> g_limit{0};  // set_kernel_limit_for_test

template <class T>
Kernels<T> kernels() {
  Kernels<T> k;
  if (g_limit.load(std::memory_order_relaxed) != 3) {
    if constexpr (std::is_same_v<T, float>)
      k = gemm_detail::simd_kernels_f32();
    else
      k = gemm_detail::simd_kernels_f64();
  }
  if (k.tile) return k;
  return {kScalarMR, kScalarNR, &scalar_tile<T>, &scalar_pack_a<T>, &scalar_pack_b<T>, &scalar_dot<T>, &scalar_axpy<T>,
          nullptr,   1};
}

// ---- buffers ------------------------------------------------------------------------------------

/// A 64-byte aligned scratch buffer that grows on demand (one per thread and purpose).
struct Scratch {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> p;
  size_t size = 0;
  template <class T>
  T* get(int64_t n) {
    const size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) & ~size_t{63};
    if (bytes > size) {
      p.reset(static_cast<char*>(std::aligned_alloc(64, bytes)));
      size = p ? bytes : 0;
      if (!p) throw std::bad_alloc();
    }
    return reinterpret_cast<T*>(p.get());
  }
};
thread_local Scratch tl_pack_b, tl_pack_a, tl_vec;

bool in_parallel() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

/// Threads worth using for `work` multiply-adds.
int threads_for(double work) {
  if (in_parallel()) return 1;
  const int nt = num_threads();
  return std::max(1, std::min<int>(nt, static_cast<int>(work / tuning().gemm_thread_work)));
}

/// C = beta * C over an M x N view (beta = 0 writes zeros without reading C).
template <class T>
void scale(int64_t M, int64_t N, T beta, T* C, int64_t rsc, int64_t csc) {
  if (beta == T(1)) return;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T& y = C[i * rsc + j * csc];
      y = beta == T(0) ? T(0) : beta * y;
    }
}

// ---- matrix-vector: z[i] = alpha * sum_k X[i, k] * v[k] + beta * z[i] -----------------------

template <class T>
void gemv(const Kernels<T>& kr, int64_t L, int64_t K, T alpha, const T* X, int64_t rx, int64_t cx, const T* v,
          int64_t sv, T beta, T* z, int64_t sz) {
  auto finish = [&](T acc, T& y) { y = beta == T(0) ? alpha * acc : beta * y + alpha * acc; };
  const int nt = threads_for(double(L) * double(K) / 4);
  if (cx == 1) {
    // Rows of X are contiguous: one dot product per output.
    const T* vc = v;
    if (sv != 1) {
      T* buf = tl_vec.get<T>(K);
      for (int64_t k = 0; k < K; ++k) buf[k] = v[k * sv];
      vc = buf;
    }
    parallel_for(L, (L + nt - 1) / nt, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) finish(kr.dot(X + i * rx, vc, K), z[i * sz]);
    });
    return;
  }
  if (rx == 1) {
    // Columns of X are contiguous: accumulate alpha-free column sums in blocks of outputs.
    constexpr int64_t kBlock = 1024;
    const int64_t nb = (L + kBlock - 1) / kBlock;
    parallel_for(nb, (nb + nt - 1) / nt, [&](int64_t b, int64_t e) {
      T* acc = tl_vec.get<T>(kBlock);
      for (int64_t blk = b; blk < e; ++blk) {
        const int64_t i0 = blk * kBlock, n = std::min(kBlock, L - i0);
        std::fill(acc, acc + n, T(0));
        for (int64_t k = 0; k < K; ++k) kr.axpy(v[k * sv], X + i0 + k * cx, acc, n);
        for (int64_t i = 0; i < n; ++i) finish(acc[i], z[(i0 + i) * sz]);
      }
    });
    return;
  }
  parallel_for(L, (L + nt - 1) / nt, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += X[i * rx + k * cx] * v[k * sv];
      finish(acc, z[i * sz]);
    }
  });
}

// ---- small products --------------------------------------------------------------------------

}  // namespace

bool gemm_small_fits(int64_t M, int64_t N, int64_t K, size_t elem) {
  static const bool on = [] {  // KILN_GEMM_SMALL=0: every product packed (or oneDNN), for A/B runs
    const char* e = std::getenv("KILN_GEMM_SMALL");
    return !(e && e[0] == '0');
  }();
  return on && M >= 1 && N >= 2 && K >= 1 &&
         static_cast<int64_t>(N * K * static_cast<int64_t>(elem)) <= tuning().gemm_small_b_bytes &&
         double(M) * double(N) * double(K) <= 64.0 * 64 * 64;
}

namespace {

template <class T>
bool gemm_small(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa, const T* B, int64_t rsb,
                int64_t csb, T beta, T* C, int64_t rsc, int64_t csc) {
  if (csc != 1 && rsc == 1 && M > 1) {  // a column-major C: C^T = B^T A^T is row-major
    std::swap(M, N);
    std::swap(A, B);
    std::swap(rsa, csb);
    std::swap(csa, rsb);
    std::swap(rsc, csc);
  }
  if (csc != 1 || !gemm_small_fits(M, N, K, sizeof(T)) || alpha == T(0)) return false;
  // A B whose rows are not contiguous is copied first: only when that copy is cheap.
  if (csb != 1 && static_cast<size_t>(N * K) * sizeof(T) > (8u << 10)) return false;
  const Kernels<T> kr = kernels<T>();
  if (!kr.small) return false;
  const int64_t L = kr.lanes;
  if (csb != 1 || N % L != 0) {  // B's rows made contiguous and padded to whole vectors
    const int64_t ld = (N + L - 1) / L * L;
    T* buf = tl_vec.get<T>(K * ld);
    if (rsb == 1) {  // B^T's rows are contiguous: read them in order
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) buf[k * ld + j] = B[j * csb + k];
    } else {
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) buf[k * ld + j] = B[k * rsb + j * csb];
    }
    for (int64_t k = 0; k < K; ++k) std::fill(buf + k * ld + N, buf + (k + 1) * ld, T(0));
    B = buf;
    rsb = ld;
  }
  kr.small(M, N, K, alpha, A, rsa, csa, B, rsb, beta, C, rsc);
  return true;
}

// ---- the packed driver ----------------------------------------------------------------------

template <class T>
void gemm_impl(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa, const T* B, int64_t rsb,
               int64_t csb, T beta, T* C, int64_t rsc, int64_t csc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) return scale(M, N, beta, C, rsc, csc);
  const Kernels<T> kr = kernels<T>();
  if (N == 1) return gemv(kr, M, K, alpha, A, rsa, csa, B, rsb, beta, C, rsc);
  if (gemm_small(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc)) return;
  if (M == 1) return gemv(kr, N, K, alpha, B, csb, rsb, A, csa, beta, C, csc);

  const int64_t MR = kr.mr, NR = kr.nr;
  // Blocking (depends on the shape only, never on the thread count). B is packed for all of K
  // and NC columns at once (KC x NR micro-panels, <= ~8 MiB, L3); each thread then walks its
  // MC-row blocks of C, and for each one runs through the K slices while that C block stays in
  // L2, packing MC x KC of A per slice (L2) and sweeping the B micro-panels (L1) over it. K is
  // split into equal slices so that no slice is a sliver.
  constexpr int64_t kc_max = 1024 / sizeof(T), mc_max = 384 / sizeof(T), nc_bytes = 8 << 20;
  const int64_t nkb = (K + kc_max - 1) / kc_max;
  const int64_t KC = (K + nkb - 1) / nkb;
  const int64_t MC = std::max<int64_t>(MR, mc_max / MR * MR);
  const int64_t NC = std::clamp<int64_t>(nc_bytes / (static_cast<int64_t>(sizeof(T)) * K) / NR * NR, NR, 4096);

  const int nt = threads_for(double(M) * double(N) * double(K));
  const int64_t npa_all = (M + MR - 1) / MR;
  T* bp = tl_pack_b.get<T>(K * std::min(NC, (N + NR - 1) / NR * NR));

  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    const int64_t npb = (nc + NR - 1) / NR;
    // B slice pc starts at bp + pc * npb * NR; panel p of it at + p * NR * kc.
    const int64_t nbt = npb * nkb;
    parallel_for(nbt, std::max<int64_t>(1, (nbt + nt - 1) / nt), [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const int64_t pc = (q / npb) * KC, p = q % npb, kc = std::min(KC, K - pc), j0 = jc + p * NR;
        kr.pack_b(B + pc * rsb + j0 * csb, rsb, csb, std::min(NR, N - j0), kc, bp + pc * npb * NR + p * NR * kc);
      }
    });
    // Split the tiles among the threads along the dimension with more panels.
    const bool split_rows = npa_all >= npb;
    const int64_t parts = std::min<int64_t>(nt, split_rows ? npa_all : npb);
    parallel_for(parts, 1, [&](int64_t tb, int64_t te) {
      T* ap = tl_pack_a.get<T>(KC * std::min(MC, npa_all * MR));
      for (int64_t t = tb; t < te; ++t) {
        const int64_t r0 = split_rows ? npa_all * t / parts : 0, r1 = split_rows ? npa_all * (t + 1) / parts : npa_all;
        const int64_t c0 = split_rows ? 0 : npb * t / parts, c1 = split_rows ? npb : npb * (t + 1) / parts;
        for (int64_t ib = r0; ib < r1; ib += MC / MR) {
          const int64_t ie = std::min(r1, ib + MC / MR);
          for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = std::min(KC, K - pc);
            const T beta_k = pc == 0 ? beta : T(1);
            for (int64_t ir = ib; ir < ie; ++ir) {
              const int64_t i0 = ir * MR;
              kr.pack_a(A + i0 * rsa + pc * csa, rsa, csa, std::min(MR, M - i0), kc, ap + (ir - ib) * MR * kc);
            }
            const T* bslice = bp + pc * npb * NR;
            for (int64_t jr = c0; jr < c1; ++jr) {
              const int64_t j0 = jc + jr * NR, n = std::min(NR, N - j0);
              const T* b = bslice + jr * NR * kc;
              for (int64_t ir = ib; ir < ie; ++ir) {
                const int64_t i0 = ir * MR;
                kr.tile(kc, ap + (ir - ib) * MR * kc, b, C + i0 * rsc + j0 * csc, rsc, csc, std::min(MR, M - i0), n,
                        alpha, beta_k);
              }
            }
          }
        }
      }
    });
  }
}

}  // namespace

namespace gemm_detail {
void limit_simd_targets_for_test(int level);  // gemm_hwy.cpp
void set_kernel_limit_for_test(int level) {
  g_limit.store(level);
  limit_simd_targets_for_test(level == 3 ? 0 : level);
}
}  // namespace gemm_detail

bool gemm_small_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                    const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  return gemm_small(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
              int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_impl(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}
void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa, const double* B,
              int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc) {
  gemm_impl(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

}  // namespace kiln::cpu
