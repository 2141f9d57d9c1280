// SPDX-License-Identifier: MIT OR Apache-2.0
// A scoped fusion::small_limit for the fusion tests.
#pragma once
#include <cstdint>

#include "fusion/fusion.h"

namespace kiln::test {

/// Sets fusion::small_limit for the life of the object. 0 queues every recordable op, for tests
/// of how streams of small tensors are cut into groups and programs.
struct SmallLimit {
  int64_t saved = fusion::small_limit();
  explicit SmallLimit(int64_t v) { fusion::set_small_limit(v); }
  ~SmallLimit() { fusion::set_small_limit(saved); }
  SmallLimit(const SmallLimit&) = delete;
  SmallLimit& operator=(const SmallLimit&) = delete;
};

}  // namespace kiln::test
