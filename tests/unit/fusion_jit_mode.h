// SPDX-License-Identifier: MIT OR Apache-2.0
// A scoped compiled-program mode (cpu::vec::jit_mode) for the fusion tests.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/vec.h"
#include "fusion/fusion.h"

namespace kiln::test {

/// Sets cpu::vec::jit_mode for the life of the object; any mode but kOff also compiles programs
/// of every size (fusion::jit_min_elements 0).
struct JitMode {
  cpu::vec::JitMode saved = cpu::vec::jit_mode();
  int64_t saved_min = fusion::jit_min_elements();
  explicit JitMode(cpu::vec::JitMode m) {
    cpu::vec::set_jit_mode(m);
    if (m != cpu::vec::JitMode::kOff) fusion::set_jit_min_elements(0);
  }
  ~JitMode() {
    cpu::vec::set_jit_mode(saved);
    fusion::set_jit_min_elements(saved_min);
  }
  JitMode(const JitMode&) = delete;
  JitMode& operator=(const JitMode&) = delete;
};

/// Whether the compiler of programs is built in (CMake option KILN_WITH_JIT).
inline bool jit_built() { return cpu::vec::jit_unavailable_reason().rfind("built without KILN_WITH_JIT", 0) != 0; }

/// Whether programs must compile here: built with KILN_WITH_JIT, a Highway target with compiled
/// kernels (x86), and not turned off with KILN_FUSION_JIT=0. A missing compiler or source tree
/// is then a failure.
inline bool jit_expected() {
  const char* e = std::getenv("KILN_FUSION_JIT");
  if (e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0)) return false;
  if (!jit_built()) return false;
  return cpu::vec::jit_unavailable_reason().rfind("no compiled-kernel flags", 0) != 0;
}

}  // namespace kiln::test
