// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Schedules of a value over training steps: exploration epsilon, entropy coefficients,
// learning-rate fractions.
//
//   rl::LinearSchedule eps{.start = 1.0, .end = 0.05, .steps = 10000};
//   double e = eps(step);
#include <cstdint>

namespace kiln::rl {

/// From start to end linearly over `steps` steps, then end (steps <= 0: end at once).
struct LinearSchedule {
  double start = 1.0, end = 0.0;
  int64_t steps = 1;
  double operator()(int64_t t) const {
    if (steps <= 0 || t >= steps) return end;
    if (t <= 0) return start;
    return start + (end - start) * static_cast<double>(t) / static_cast<double>(steps);
  }
};

/// end + (start - end) * decay^t: decays geometrically from start towards end.
struct ExponentialSchedule {
  double start = 1.0, end = 0.0, decay = 0.999;
  double operator()(int64_t t) const;
};

}  // namespace kiln::rl
