// SPDX-License-Identifier: MIT OR Apache-2.0
// A scope that puts back whether oneDNN runs and the thread count, for tests that switch them.
#pragma once
#include "backends/cpu/onednn.h"
#include "kiln/device.h"

namespace kiln::test {

/// Restores whether oneDNN runs and the thread count when the test ends.
struct RestoreOnednnAndThreads {
  bool saved = cpu::onednn::enabled();
  int threads = num_threads();
  ~RestoreOnednnAndThreads() {
    cpu::onednn::set_enabled(saved);
    set_num_threads(threads);
  }
};

}  // namespace kiln::test
