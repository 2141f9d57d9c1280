// SPDX-License-Identifier: MIT OR Apache-2.0
// Running a test body at each SIMD level (Highway target) the machine has.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>

#if KILN_TEST_HWY_TARGETS
#include <hwy/targets.h>
#endif

namespace kiln::test {

/// Runs f at each SIMD level this machine has (SSE4, AVX2, AVX-512; on ARM64 NEON and the SVE
/// targets) where the build can pick them, else once; the dispatch is back to the best level
/// afterwards, also when f throws.
template <class F>
void at_every_simd_level(const F& f) {
#if KILN_TEST_HWY_TARGETS
  struct Restore {
    ~Restore() { hwy::SetSupportedTargetsForTest(0); }
  } restore;
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t t : {int64_t{HWY_SSE4}, int64_t{HWY_AVX2}, int64_t{HWY_AVX3}, int64_t{HWY_NEON}, int64_t{HWY_SVE},
                    int64_t{HWY_SVE2}, int64_t{HWY_SVE_256}, int64_t{HWY_SVE2_128}}) {
    if (!(supported & t)) continue;
    hwy::SetSupportedTargetsForTest(t);
    SCOPED_TRACE(hwy::TargetName(t));
    f();
    ++ran;
  }
  EXPECT_GE(ran, 1);
#else
  f();
#endif
}

}  // namespace kiln::test
