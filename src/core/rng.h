// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Counter-based random numbers (Philox-4x32-10): element i of a random op depends only on the
// seed, the op's offset and i, so results are identical whatever the thread count.
#include <cmath>
#include <cstdint>

namespace kiln::rng {

struct Philox {
  static void round(uint32_t ctr[4], const uint32_t key[2]) {
    constexpr uint64_t M0 = 0xD2511F53, M1 = 0xCD9E8D57;
    uint64_t p0 = M0 * ctr[0], p1 = M1 * ctr[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    uint32_t r[4] = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    ctr[0] = r[0], ctr[1] = r[1], ctr[2] = r[2], ctr[3] = r[3];
  }
  /// Four 32-bit random words for counter (offset, block).
  static void generate(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    uint32_t ctr[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0x9E3779B9u, 0x243F6A88u};
    for (int i = 0; i < 10; ++i) {
      round(ctr, key);
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    out[0] = ctr[0], out[1] = ctr[1], out[2] = ctr[2], out[3] = ctr[3];
  }
};

/// Uniform float in [0, 1) from 24 random bits, and double from 53.
inline float u01f(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
inline double u01d(uint32_t a, uint32_t b) {
  uint64_t v = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  // Through int64 (exact below 2^53): a single signed conversion instead of the unsigned one.
  return static_cast<double>(static_cast<int64_t>(v & ((1ULL << 53) - 1))) * (1.0 / 9007199254740992.0);
}

/// The global generator: a seed and a running offset (in 4-word blocks).
struct GeneratorState {
  uint64_t seed;
  uint64_t offset;
};
/// Reserves `blocks` counter blocks and returns (seed, first block).
GeneratorState reserve(uint64_t blocks);

}  // namespace kiln::rng
