// SPDX-License-Identifier: MIT OR Apache-2.0
// Calibration block of kiln_bench: the f32 FMA peak of this machine at the bench's thread
// count, the denominator of "% of peak" for matmul, convolution and attention.
//
// A register-blocked loop of 12 independent FMA chains per thread (enough to cover the FMA
// latency on two ports), in the widest ISA the CPU has: AVX-512, else AVX2 + FMA, else SSE
// mul + add. The build's -march may be lower (x86-64-v2); the kernels are compiled with target
// attributes and chosen at run time, as Kiln's Highway kernels and oneDNN's JIT are.
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace bench {
namespace {

constexpr int kChains = 12;

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  float out[16];
  _mm512_storeu_ps(out, s);
  float r = 0;
  for (float v : out) r += v;
  return r;
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  float r = 0;
  for (float v : out) r += v;
  return r;
}

float fma_sse(int64_t iters) {
  __m128 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm_set1_ps(static_cast<float>(j) * 1e-3f);
  const __m128 m = _mm_set1_ps(0.9999999f), a = _mm_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], m), a);
  __m128 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm_add_ps(s, acc[j]);
  float out[4];
  _mm_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3];
}

}  // namespace

double fma_peak(const Options& o) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const int lanes = avx512 ? 16 : avx2 ? 8 : 4;
  const char* isa = avx512 ? "avx512" : avx2 ? "avx2_fma" : "sse";
  const int64_t iters = o.smoke ? 1000 : 20'000'000;  // ~0.1 s per thread at 3 GHz (AVX-512)
  const int threads = std::max(o.threads, 1);
  std::vector<float> sink(static_cast<size_t>(threads));
  auto run = [&] {
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
#endif
    for (int t = 0; t < threads; ++t)
      sink[static_cast<size_t>(t)] = avx512 ? fma_avx512(iters) : avx2 ? fma_avx2(iters) : fma_sse(iters);
  };
  const double s = best_of(run, o.smoke ? 1 : 5, o.smoke ? 0 : 1);
  const double flops = double(threads) * double(iters) * kChains * lanes * 2;
  volatile float keep = sink[0];
  (void)keep;
  emit(std::string("calib/fma_peak/") + isa, s, flops);
  return flops / s / 1e9;
}

}  // namespace bench
