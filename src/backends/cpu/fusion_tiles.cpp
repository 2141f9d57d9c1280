// SPDX-License-Identifier: MIT OR Apache-2.0
// Memory helpers of the CPU fusion executor's tiles (fusion_tiles.h).
#include "backends/cpu/fusion_tiles.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kiln/small_vector.h"

namespace kiln::cpu::tiles {

void gather(const char* base, size_t esz, const Shape& S, const Strides& bst, int64_t offset, int64_t s, int64_t len,
            char* dst) {
  const size_t r = S.size();
  SmallVec<int64_t, 8> idx(r, 0);
  int64_t rem = s, pos = offset;
  for (size_t i = r; i-- > 0;) {
    idx[i] = rem % S[i];
    rem /= S[i];
    pos += idx[i] * bst[i];
  }
  const int64_t inner_n = r ? S[r - 1] : 1, inner_st = r ? bst[r - 1] : 0;
  int64_t k = 0;
  while (k < len) {
    int64_t run = std::min(len - k, inner_n - (r ? idx[r - 1] : 0));
    switch (esz) {
      case 1:
        for (int64_t q = 0; q < run; ++q) dst[k + q] = base[pos + q * inner_st];
        break;
      case 2: {
        auto* d = reinterpret_cast<uint16_t*>(dst) + k;
        auto* b = reinterpret_cast<const uint16_t*>(base);
        for (int64_t q = 0; q < run; ++q) d[q] = b[pos + q * inner_st];
        break;
      }
      case 4: {
        auto* d = reinterpret_cast<uint32_t*>(dst) + k;
        auto* b = reinterpret_cast<const uint32_t*>(base);
        if (inner_st == 0)
          std::fill(d, d + run, b[pos]);
        else if (inner_st == 1)
          std::memcpy(d, b + pos, static_cast<size_t>(run) * 4);
        else
          for (int64_t q = 0; q < run; ++q) d[q] = b[pos + q * inner_st];
        break;
      }
      default: {
        for (int64_t q = 0; q < run; ++q) std::memcpy(dst + (k + q) * esz, base + (pos + q * inner_st) * esz, esz);
        break;
      }
    }
    k += run;
    if (k >= len || r == 0) break;
    // advance the odometer by `run` along the last dim (which wraps to 0)
    pos += run * inner_st;
    idx[r - 1] += run;
    for (size_t i = r - 1; i > 0 && idx[i] == S[i]; --i) {
      pos -= idx[i] * bst[i];
      idx[i] = 0;
      ++idx[i - 1];
      pos += bst[i - 1];
    }
  }
}

#if defined(__SSE2__)
bool has_stream_stores() { return true; }
void stream_copy(char* dst, const char* src, size_t n) {
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | n) & 15) {
    std::memcpy(dst, src, n);
    return;
  }
  for (size_t i = 0; i < n; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_load_si128(reinterpret_cast<const __m128i*>(src + i)));
}
void stream_fence() { _mm_sfence(); }
#else
bool has_stream_stores() { return false; }
void stream_copy(char* dst, const char* src, size_t n) { std::memcpy(dst, src, n); }
void stream_fence() {}
#endif

char* aligned(std::vector<char>& v, size_t n) {
  if (v.size() < n + 64) v.resize(n + 64);
  auto p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<char*>((p + 63) & ~uintptr_t{63});
}

}  // namespace kiln::cpu::tiles
