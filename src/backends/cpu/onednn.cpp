// SPDX-License-Identifier: MIT OR Apache-2.0
#include "backends/cpu/onednn.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln::cpu::onednn {

namespace {
std::atomic<bool>& flag() {
  static std::atomic<bool> on = [] {
    const char* e = std::getenv("KILN_ONEDNN");
    return KILN_WITH_ONEDNN && !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
}  // namespace

bool enabled() { return KILN_WITH_ONEDNN && flag().load(std::memory_order_relaxed); }
void set_enabled(bool on) { flag().store(on && KILN_WITH_ONEDNN, std::memory_order_relaxed); }

#if KILN_WITH_ONEDNN
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}
#endif

}  // namespace kiln::cpu::onednn
