// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway GEMM building blocks, compiled for several x86 targets and chosen at run time:
// a register-blocked micro-kernel (MR rows x NV vectors of C held in registers, one FMA per
// A broadcast and B vector), the packing routines that lay A and B out for it, and the dot /
// axpy loops of matrix-vector products. The blocking driver is in gemm.cpp.
#include <array>
#include <cstring>
#include <utility>

#include "backends/cpu/gemm.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/gemm_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
// The micro-kernel holds its tile in arrays of vectors and packs B for a compile-time number of
// lanes: neither fits SVE's sizeless vectors of run-time length, so aarch64 runs NEON here.
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
// Order matters (foreach_target, highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::gemm_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Register tile per target: MR rows x NV vectors of accumulators. AVX-512 has 32 vector
// registers (MR * NV = 24 accumulators, 2-3 B vectors, broadcasts folded into the FMAs);
// AVX2/SSE4 have 16 (12 accumulators + 2 B vectors + 1 broadcast).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kMR = 12, kNV = 2;
#else
constexpr size_t kMR = 6, kNV = 2;
#endif

template <class T>
constexpr size_t kLanes = HWY_LANES(T);

template <class T>
void Tile(int64_t kc, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* HWY_RESTRICT c, int64_t rsc, int64_t csc,
          int64_t m, int64_t n, T alpha, T beta) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  constexpr size_t L = kLanes<T>, MR = kMR, NV = kNV, NR = NV * L;
  // Start loading the C tile now: it is read (beta != 0) or written after the k loop, and
  // between K slices it has usually left the caches.
  if (csc == 1)
    for (int64_t r = 0; r < m; ++r) {
      __builtin_prefetch(c + r * rsc, 1);
      __builtin_prefetch(c + r * rsc + NR - 1, 1);
    }
  V acc[MR][NV];
#pragma GCC unroll 32
  for (size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (size_t j = 0; j < NV; ++j) acc[r][j] = hn::Zero(d);
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (size_t j = 0; j < NV; ++j) bv[j] = hn::Load(d, b + j * L);
#pragma GCC unroll 32
    for (size_t r = 0; r < MR; ++r) {
      const V av = hn::Set(d, a[r]);
#pragma GCC unroll 4
      for (size_t j = 0; j < NV; ++j) acc[r][j] = hn::MulAdd(av, bv[j], acc[r][j]);
    }
    a += MR;
    b += NR;
  }
  const V va = hn::Set(d, alpha);
  if (m == int64_t(MR) && n == int64_t(NR) && csc == 1) {
    if (beta == T(0)) {
#pragma GCC unroll 32
      for (size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (size_t j = 0; j < NV; ++j) hn::StoreU(hn::Mul(acc[r][j], va), d, c + r * rsc + j * L);
    } else {
      const V vb = hn::Set(d, beta);
#pragma GCC unroll 32
      for (size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (size_t j = 0; j < NV; ++j) {
          T* p = c + r * rsc + j * L;
          hn::StoreU(hn::MulAdd(vb, hn::LoadU(d, p), hn::Mul(acc[r][j], va)), d, p);
        }
    }
    return;
  }
  HWY_ALIGN T buf[MR * NR];
#pragma GCC unroll 32
  for (size_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (size_t j = 0; j < NV; ++j) hn::Store(hn::Mul(acc[r][j], va), d, buf + r * NR + j * L);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T& y = c[i * rsc + j * csc];
      y = beta == T(0) ? buf[i * NR + j] : beta * y + buf[i * NR + j];
    }
}

template <class T>
void PackA(const T* A, int64_t rsa, int64_t csa, int64_t m, int64_t kc, T* HWY_RESTRICT dst) {
  constexpr int64_t MR = kMR;
  if (m == MR && csa == 1) {
    // Rows are contiguous: read each row along k (whole rows keep the prefetchers streaming),
    // write with stride MR into the L1-resident panel.
    // Rows usually come from L3 or memory: prefetch two rows ahead.
    constexpr int64_t kLine = 64 / sizeof(T);
    for (int64_t i = 0; i < MR; ++i) {
      const T* HWY_RESTRICT src = A + i * rsa;
      const char* ahead = reinterpret_cast<const char*>(A + (i + 2 < MR ? i + 2 : MR - 1) * rsa);
      for (int64_t k0 = 0; k0 < kc; k0 += kLine) {
        __builtin_prefetch(ahead + k0 * sizeof(T));
        const int64_t k1 = k0 + kLine < kc ? k0 + kLine : kc;
        for (int64_t k = k0; k < k1; ++k) dst[k * MR + i] = src[k];
      }
    }
    return;
  }
  if (m == MR && rsa == 1) {
    for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * MR, A + k * csa, sizeof(T) * MR);
    return;
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t i = 0; i < MR; ++i) dst[k * MR + i] = i < m ? A[i * rsa + k * csa] : T(0);
}

template <class T>
void PackB(const T* B, int64_t rsb, int64_t csb, int64_t n, int64_t kc, T* HWY_RESTRICT dst) {
  constexpr int64_t NR = kNV * kLanes<T>;
  if (n == NR && csb == 1) {
    for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, B + k * rsb, sizeof(T) * NR);
    return;
  }
  if (n == NR && rsb == 1) {
    // Columns are contiguous: read each column along k, write with stride NR.
    for (int64_t k0 = 0; k0 < kc; k0 += 64) {
      const int64_t k1 = k0 + 64 < kc ? k0 + 64 : kc;
      for (int64_t j = 0; j < NR; ++j) {
        const T* src = B + j * csb;
        for (int64_t k = k0; k < k1; ++k) dst[k * NR + j] = src[k];
      }
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t j = 0; j < NR; ++j) dst[k * NR + j] = j < n ? B[k * rsb + j * csb] : T(0);
}

template <class T>
T Dot(const T* HWY_RESTRICT x, const T* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<T> d;
  constexpr int64_t L = kLanes<T>;
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, x + i + L), hn::LoadU(d, y + i + L), s1);
    s2 = hn::MulAdd(hn::LoadU(d, x + i + 2 * L), hn::LoadU(d, y + i + 2 * L), s2);
    s3 = hn::MulAdd(hn::LoadU(d, x + i + 3 * L), hn::LoadU(d, y + i + 3 * L), s3);
  }
  for (; i + L <= n; i += L) s0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), s0);
  T s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

template <class T>
void Axpy(T a, const T* HWY_RESTRICT x, T* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<T> d;
  constexpr int64_t L = kLanes<T>;
  const auto va = hn::Set(d, a);
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::MulAdd(va, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

// ---- small products: no packing -----------------------------------------------------------

// Rows of C per block and vectors of C per row: R * NV accumulators, NV B vectors and a
// broadcast in registers (AVX-512 has 32, AVX2 / SSE4 16).
constexpr size_t kSmallR = 4;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kSmallNV = 4;
#else
constexpr size_t kSmallNV = 2;
#endif

/// C[r, j] = alpha * sum_k A[r, k] B[k, j] + beta * C[r, j] for r < R, j < n, with
/// (NV - 1) * L < n <= NV * L; every row of B holds NV * L readable values (zero past n).
/// Each element is summed over k in order.
template <class T, size_t R, size_t NV>
void SmallBlock(int64_t K, const T* HWY_RESTRICT A, int64_t rsa, int64_t csa, const T* HWY_RESTRICT B, int64_t rsb,
                T* HWY_RESTRICT C, int64_t rsc, size_t n, T alpha, T beta) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  constexpr size_t L = kLanes<T>;
  V acc[R][NV];
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t j = 0; j < NV; ++j) acc[r][j] = hn::Zero(d);
  for (int64_t k = 0; k < K; ++k) {
    const T* b = B + k * rsb;
    V bv[NV];
#pragma GCC unroll 4
    for (size_t j = 0; j < NV; ++j) bv[j] = hn::LoadU(d, b + j * L);
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) {
      const V av = hn::Set(d, A[static_cast<int64_t>(r) * rsa + k * csa]);
#pragma GCC unroll 4
      for (size_t j = 0; j < NV; ++j) acc[r][j] = hn::MulAdd(av, bv[j], acc[r][j]);
    }
  }
  const V va = hn::Set(d, alpha), vb = hn::Set(d, beta);
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t j = 0; j < NV; ++j) {
      T* p = C + static_cast<int64_t>(r) * rsc + j * L;
      const V v = hn::Mul(acc[r][j], va);
      if (j + 1 < NV || n == NV * L) {
        hn::StoreU(beta == T(0) ? v : hn::MulAdd(vb, hn::LoadU(d, p), v), d, p);
      } else {  // a partial last vector: only n - j * L lanes of C are there
        HWY_ALIGN T buf[L];
        hn::Store(v, d, buf);
        for (size_t i = 0; i < n - j * L; ++i) p[i] = beta == T(0) ? buf[i] : beta * p[i] + buf[i];
      }
    }
}

template <class T, size_t R, size_t... NV>
constexpr auto SmallRow(std::index_sequence<NV...>) {
  using Fn = decltype(&SmallBlock<T, 1, 1>);
  return std::array<Fn, sizeof...(NV)>{&SmallBlock<T, R, NV + 1>...};
}

template <class T>
void Small(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa, const T* B, int64_t rsb,
           T beta, T* C, int64_t rsc) {
  constexpr size_t L = kLanes<T>, W = kSmallNV * L;
  static constexpr std::array<decltype(SmallRow<T, 1>(std::make_index_sequence<kSmallNV>())), kSmallR> table = {
      SmallRow<T, 1>(std::make_index_sequence<kSmallNV>()), SmallRow<T, 2>(std::make_index_sequence<kSmallNV>()),
      SmallRow<T, 3>(std::make_index_sequence<kSmallNV>()), SmallRow<T, 4>(std::make_index_sequence<kSmallNV>())};
  static_assert(kSmallR == 4);
  // Column blocks outermost: one block of B (K x W) stays in L1 while every row passes.
  for (int64_t j0 = 0; j0 < N; j0 += int64_t(W)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(int64_t(W), N - j0)), nv = (n + L - 1) / L;
    for (int64_t i0 = 0; i0 < M; i0 += int64_t(kSmallR)) {
      const size_t r = static_cast<size_t>(std::min<int64_t>(int64_t(kSmallR), M - i0));
      table[r - 1][nv - 1](K, A + i0 * rsa, rsa, csa, B + j0, rsb, C + i0 * rsc + j0, rsc, n, alpha, beta);
    }
  }
}

template <class T>
Kernels<T> Make() {
  Kernels<T> k;
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  return k;  // no SIMD: gemm.cpp's scalar kernels
#else
  if constexpr (std::is_same_v<T, double> && !HWY_HAVE_FLOAT64) {
    return k;  // no f64 vectors (Highway 1.0's WASM target): gemm.cpp's scalar kernels
  } else {
    k.mr = int(kMR);
    k.nr = int(kNV * kLanes<T>);
    k.tile = &Tile<T>;
    k.pack_a = &PackA<T>;
    k.pack_b = &PackB<T>;
    k.dot = &Dot<T>;
    k.axpy = &Axpy<T>;
    k.small = &Small<T>;
    k.lanes = int(kLanes<T>);
    return k;
  }
#endif
}

Kernels<float> KernelsF32() { return Make<float>(); }
Kernels<double> KernelsF64() { return Make<double>(); }

}  // namespace kiln::cpu::gemm_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy/targets.h"
namespace kiln::cpu::gemm_detail {
HWY_EXPORT(KernelsF32);
HWY_EXPORT(KernelsF64);
Kernels<float> simd_kernels_f32() { return HWY_DYNAMIC_DISPATCH(KernelsF32)(); }
Kernels<double> simd_kernels_f64() { return HWY_DYNAMIC_DISPATCH(KernelsF64)(); }
void limit_simd_targets_for_test(int level) {
#if HWY_ARCH_X86
  hwy::SetSupportedTargetsForTest(level == 1   ? (HWY_AVX2 | HWY_SSE4 | HWY_SCALAR)
                                  : level == 2 ? (HWY_SSE4 | HWY_SCALAR)
                                               : 0);
#endif
}
}  // namespace kiln::cpu::gemm_detail
#endif

#else  // !KILN_WITH_HWY: gemm.cpp uses its scalar kernels.
namespace kiln::cpu::gemm_detail {
Kernels<float> simd_kernels_f32() { return {}; }
Kernels<double> simd_kernels_f64() { return {}; }
void limit_simd_targets_for_test(int) {}
}  // namespace kiln::cpu::gemm_detail
#endif
