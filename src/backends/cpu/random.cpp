// SPDX-License-Identifier: MIT OR Apache-2.0
// Random kernels over the counter-based Philox generator (core/rng.h). Element i takes its
// words from block offset + i / per_block (per_block elements share one 4-word block), so the
// values depend only on (seed, offset, i) and never on the thread count.
// Note [Random layouts] (the frontend reserves ceil(numel / per_block) blocks):
//   RandUniform: f64 2 per block (53 bits each), other floats 4 per block (one word each).
//   RandNormal: Box-Muller over pairs of uniforms; f64 2 per block, other floats 4 per block.
//   RandInt: 64 bits per element, 2 per block.  Bernoulli: a 53-bit uniform, 2 per block.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "core/rng.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

struct Counter {
  uint64_t seed;
  uint64_t offset;
};

Counter counter_of(const ir::Op& op) {
  const ir::CreationAttrs a = ir::CreationAttrs::decode(op);
  return {a.seed, a.offset};
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// The 10 Philox rounds for 8 lanes in one AVX2 register (same words as the SSE2 path).
__attribute__((target("avx2"))) void philox_rounds_avx2(uint32_t* c0, uint32_t* c1, uint32_t* c2, uint32_t* c3,
                                                        uint32_t k0, uint32_t k1) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u)),
                m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m256i lo_mask = _mm256_set1_epi64x(0xFFFFFFFFLL);
  __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c0));
  __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c1));
  __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c2));
  __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c3));
  for (int i = 0; i < 10; ++i) {
    const __m256i pe0 = _mm256_mul_epu32(x0, m0), po0 = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
    const __m256i pe1 = _mm256_mul_epu32(x2, m1), po1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
    const __m256i lo0 = _mm256_or_si256(_mm256_and_si256(pe0, lo_mask), _mm256_slli_epi64(po0, 32));
    const __m256i hi0 = _mm256_or_si256(_mm256_srli_epi64(pe0, 32), _mm256_andnot_si256(lo_mask, po0));
    const __m256i lo1 = _mm256_or_si256(_mm256_and_si256(pe1, lo_mask), _mm256_slli_epi64(po1, 32));
    const __m256i hi1 = _mm256_or_si256(_mm256_srli_epi64(pe1, 32), _mm256_andnot_si256(lo_mask, po1));
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32(static_cast<int>(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32(static_cast<int>(k1)));
    x0 = n0, x1 = lo1, x2 = n2, x3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c0), x0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c1), x1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c2), x2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c3), x3);
}
#endif

/// Philox-4x32-10 for kLanes consecutive counters at once: out[l] holds the same words as
/// rng::Philox::generate(seed, counter + l). SSE2 (every x86-64) does 4 lanes per register,
/// the 32x32->64 products with pmuludq; elsewhere a lane loop.
constexpr int kLanes = 8;
void philox_batch(uint64_t seed, uint64_t counter, uint32_t out[kLanes][4]) {
  constexpr uint64_t M0 = 0xD2511F53, M1 = 0xCD9E8D57;
  alignas(16) uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t ctr = counter + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(ctr);
    c1[l] = static_cast<uint32_t>(ctr >> 32);
    c2[l] = 0x9E3779B9u;
    c3[l] = 0x243F6A88u;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static_assert(kLanes == 8, "philox_rounds_avx2 does 8 lanes");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    philox_rounds_avx2(c0, c1, c2, c3, k0, k1);
  } else
#endif
  {
#if defined(__SSE2__)
    const __m128i m0 = _mm_set1_epi32(static_cast<int>(M0)), m1 = _mm_set1_epi32(static_cast<int>(M1));
    const __m128i lo_mask = _mm_set1_epi64x(0xFFFFFFFFLL);
    for (int g = 0; g < kLanes; g += 4) {
      __m128i x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(c0 + g));
      __m128i x1 = _mm_load_si128(reinterpret_cast<const __m128i*>(c1 + g));
      __m128i x2 = _mm_load_si128(reinterpret_cast<const __m128i*>(c2 + g));
      __m128i x3 = _mm_load_si128(reinterpret_cast<const __m128i*>(c3 + g));
      uint32_t a0 = k0, a1 = k1;
      for (int i = 0; i < 10; ++i) {
        // Full 64-bit products of the even and the odd lanes, then split into hi and lo words.
        const __m128i pe0 = _mm_mul_epu32(x0, m0), po0 = _mm_mul_epu32(_mm_srli_epi64(x0, 32), m0);
        const __m128i pe1 = _mm_mul_epu32(x2, m1), po1 = _mm_mul_epu32(_mm_srli_epi64(x2, 32), m1);
        const __m128i lo0 = _mm_or_si128(_mm_and_si128(pe0, lo_mask), _mm_slli_epi64(po0, 32));
        const __m128i hi0 = _mm_or_si128(_mm_srli_epi64(pe0, 32), _mm_andnot_si128(lo_mask, po0));
        const __m128i lo1 = _mm_or_si128(_mm_and_si128(pe1, lo_mask), _mm_slli_epi64(po1, 32));
        const __m128i hi1 = _mm_or_si128(_mm_srli_epi64(pe1, 32), _mm_andnot_si128(lo_mask, po1));
        const __m128i n0 = _mm_xor_si128(_mm_xor_si128(hi1, x1), _mm_set1_epi32(static_cast<int>(a0)));
        const __m128i n2 = _mm_xor_si128(_mm_xor_si128(hi0, x3), _mm_set1_epi32(static_cast<int>(a1)));
        x0 = n0, x1 = lo1, x2 = n2, x3 = lo0;
        a0 += 0x9E3779B9u;
        a1 += 0xBB67AE85u;
      }
      _mm_store_si128(reinterpret_cast<__m128i*>(c0 + g), x0);
      _mm_store_si128(reinterpret_cast<__m128i*>(c1 + g), x1);
      _mm_store_si128(reinterpret_cast<__m128i*>(c2 + g), x2);
      _mm_store_si128(reinterpret_cast<__m128i*>(c3 + g), x3);
    }
#else
    for (int i = 0; i < 10; ++i) {
      for (int l = 0; l < kLanes; ++l) {
        const uint64_t p0 = M0 * c0[l], p1 = M1 * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1);
        c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
#endif
  }
  for (int l = 0; l < kLanes; ++l) out[l][0] = c0[l], out[l][1] = c1[l], out[l][2] = c2[l], out[l][3] = c3[l];
}

/// Fills o[0, n) block by block: gen(words, vals) turns the 4 words of a block into PB values
/// and the block's elements take them in order. Parallel over blocks; each element's value
/// depends only on its block number, never on the split.
template <int PB, class T, class Gen>
void fill_blocks(const Counter& c, T* o, int64_t n, const Gen& gen) {
  int64_t nblocks = (n + PB - 1) / PB;
  parallel_for(nblocks, std::max<int64_t>(1, kGrain / PB), [&](int64_t bb, int64_t be) {
    uint32_t w[4];
    T vals[PB];
    for (int64_t blk = bb; blk < be; ++blk) {
      rng::Philox::generate(c.seed, c.offset + static_cast<uint64_t>(blk), w);
      gen(w, vals);
      int64_t first = blk * PB, cnt = std::min<int64_t>(PB, n - first);
      for (int64_t k = 0; k < cnt; ++k) o[first + k] = vals[k];
    }
  });
}

/// Uniform in [0, 1) with the precision of T (24 bits for f32, 11 for f16, 8 for bf16).
template <class T>
inline double unit_from_word(uint32_t x) {
  constexpr int digits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
  return static_cast<double>(x >> (32 - digits)) * (1.0 / static_cast<double>(1u << digits));
}

/// (0, 1] from 32 bits, for logarithms.
inline double open_unit(uint32_t x) { return (static_cast<double>(x) + 1.0) * (1.0 / 4294967296.0); }
inline double open_unit53(uint32_t a, uint32_t b) { return 1.0 - rng::u01d(a, b); }

template <class T>
inline T to_elem(double v) {
  if constexpr (is_half_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

}  // namespace

void k_RandUniform(const ir::Op& op, void* const*, void* const* out) {
  const ir::TensorDesc& d = op.outputs[0];
  const Counter c = counter_of(op);
  const ir::CreationAttrs a = ir::CreationAttrs::decode(op);
  const double lo = a.a, hi = a.b, span = hi - lo;
  KILN_SWITCH_FLOAT(d.dtype, "rand", T, {
    T* o = reinterpret_cast<T*>(base_ptr(out[0], d));
    if constexpr (std::is_same_v<T, double>) {
      fill_blocks<2>(c, o, d.numel(), [&](const uint32_t* w, double* v) {
        for (int s = 0; s < 2; ++s) {
          v[s] = lo + rng::u01d(w[2 * s], w[2 * s + 1]) * span;
          if (v[s] >= hi && hi > lo) v[s] = std::nextafter(hi, lo);
        }
      });
    } else {
      const float hf = static_cast<float>(hi), lf = static_cast<float>(lo);
      fill_blocks<4>(c, o, d.numel(), [&](const uint32_t* w, T* v) {
        for (int s = 0; s < 4; ++s) {
          double x = lo + unit_from_word<T>(w[s]) * span;
          if constexpr (std::is_same_v<T, float>) {
            float f = static_cast<float>(x);
            v[s] = (f >= hf && hi > lo) ? std::nextafter(hf, lf) : f;
          } else {
            v[s] = to_elem<T>(x);
          }
        }
      });
    }
  });
}

// Box-Muller: one pair of uniforms (u1 in (0, 1], u2 in [0, 1)) gives two normals
// r cos(2 pi u2) and r sin(2 pi u2) with r = sqrt(-2 log u1).
void k_RandNormal(const ir::Op& op, void* const*, void* const* out) {
  const ir::TensorDesc& d = op.outputs[0];
  const Counter c = counter_of(op);
  const ir::CreationAttrs a = ir::CreationAttrs::decode(op);
  const double mean = a.a, sd = a.b;
  KILN_SWITCH_FLOAT(d.dtype, "randn", T, {
    T* o = reinterpret_cast<T*>(base_ptr(out[0], d));
    if constexpr (std::is_same_v<T, double>) {
      fill_blocks<2>(c, o, d.numel(), [&](const uint32_t* w, double* v) {
        double r = std::sqrt(-2.0 * std::log(open_unit53(w[0], w[1])));
        double t = kTwoPi * rng::u01d(w[2], w[3]);
        v[0] = mean + sd * r * std::cos(t);
        v[1] = mean + sd * r * std::sin(t);
      });
    } else {
      fill_blocks<4>(c, o, d.numel(), [&](const uint32_t* w, T* v) {
        // Float math for f32 and the halves (the result is rounded to float anyway).
        for (int p = 0; p < 2; ++p) {
          float r = std::sqrt(-2.0f * std::log(static_cast<float>(open_unit(w[2 * p]))));
          float t = static_cast<float>(kTwoPi) * (static_cast<float>(w[2 * p + 1] >> 8) * (1.0f / 16777216.0f));
          v[2 * p] = to_elem<T>(mean + sd * static_cast<double>(r * std::cos(t)));
          v[2 * p + 1] = to_elem<T>(mean + sd * static_cast<double>(r * std::sin(t)));
        }
      });
    }
  });
}

// ints = {seed_lo, seed_hi, offset, low, high, shape...}: values low + (r mod (high - low)) with
// r 64 random bits (exact for any i64 range).
void k_RandInt(const ir::Op& op, void* const*, void* const* out) {
  const ir::TensorDesc& d = op.outputs[0];
  const Counter c = counter_of(op);
  const ir::CreationAttrs a = ir::CreationAttrs::decode(op);
  const int64_t low = a.low, high = a.high;
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  KILN_SWITCH_ALL(d.dtype, "randint", T, {
    T* o = reinterpret_cast<T*>(base_ptr(out[0], d));
    fill_blocks<2>(c, o, d.numel(), [&](const uint32_t* w, T* v) {
      for (int s = 0; s < 2; ++s) {
        uint64_t r = (static_cast<uint64_t>(w[2 * s]) << 32) | w[2 * s + 1];
        int64_t x = static_cast<int64_t>(static_cast<uint64_t>(low) + (range ? r % range : r));
        if constexpr (std::is_same_v<T, bool>)
          v[s] = x != 0;
        else if constexpr (std::is_integral_v<T>)
          v[s] = static_cast<T>(x);
        else
          v[s] = to_elem<T>(static_cast<double>(x));
      }
    });
  });
}

// Input p (float, any strides, same shape as the output); ints = {seed_lo, seed_hi, offset}.
void k_Bernoulli(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& d = op.outputs[0];
  const Counter c = counter_of(op);
  auto loop = unary_loop(op, in, out);
  KILN_SWITCH_FLOAT(d.dtype, "bernoulli", T, {
    // p must lie in [0, 1]; checked before any thread starts so the error is a clean throw.
    bool ok = true;
    loop.run_range(
        [&](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
          const char* q = p[1];
          for (int64_t k = 0; k < n; ++k, q += st[1]) {
            double v = static_cast<double>(load<T>(q));
            ok &= v >= 0.0 && v <= 1.0;
          }
        },
        0, loop.numel);
    KILN_CHECK(ok, "bernoulli", "expects all elements of p to be in [0, 1] (shape " << d.shape << ")");
    parallel_for(loop.numel, kGrain, [&](int64_t b, int64_t e) {
      int64_t pos = b;
      uint32_t wb[kLanes][4] = {};
      int64_t first = -1;  // block of wb[0]; -1: none generated yet
      const T vals01[2] = {to_elem<T>(0.0), to_elem<T>(1.0)};
      loop.run_range(
          [&](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
            char* o = p[0];
            const char* q = p[1];
            for (int64_t k = 0; k < n; ++k, o += st[0], q += st[1], ++pos) {
              const int64_t blk = pos / 2;
              if (first < 0 || blk - first >= kLanes) {
                philox_batch(c.seed, c.offset + static_cast<uint64_t>(blk), wb);
                first = blk;
              }
              const uint32_t* w = wb[blk - first];
              int s = static_cast<int>(pos % 2);
              double u = rng::u01d(w[2 * s], w[2 * s + 1]);
              *reinterpret_cast<T*>(o) = vals01[u < static_cast<double>(load<T>(q))];  // branchless
            }
          },
          b, e);
    });
  });
}

}  // namespace kiln::cpu
