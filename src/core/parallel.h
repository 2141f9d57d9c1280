// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Intra-op parallelism over OpenMP (oneDNN in Debian uses OpenMP too, so the two share threads).
#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kiln/device.h"

namespace kiln {

/// Splits [0, n) into at most num_threads() contiguous ranges of at least `grain` elements and
/// calls f(begin, end) for each, in parallel. Runs inline when n <= grain or inside a parallel
/// region. The split depends only on n, grain and the thread count.
template <class F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  int nt = num_threads();
#ifdef _OPENMP
  if (omp_in_parallel()) nt = 1;
#endif
  int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    f(b, e);
  }
}

/// Calls f(i) for i in [0, n) with blocks of `block` indices per task; the assignment of
/// indices to blocks is fixed (independent of the thread count), so per-block partial results
/// combined in block order are deterministic.
template <class F>
void parallel_blocks(int64_t nblocks, const F& f) {
  parallel_for(nblocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

}  // namespace kiln
