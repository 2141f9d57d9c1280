// SPDX-License-Identifier: MIT OR Apache-2.0
// The CPU library's entries in core's tables (core/registry.h): the CPU backend (Device::cpu()
// and the fallback of every device) and the names "cpu" and "cpu-plain".
#include "core/registry.h"

namespace kiln {

namespace cpu {
Backend* backend();  // backend.cpp: the CPU backend (created on first use, never destroyed)
}  // namespace cpu

void register_cpu() {
  register_cpu_backend(&cpu::backend);
  register_device("cpu", [] { return Device::cpu(); });
  register_device("cpu-plain", [] { return Device(cpu_backend()); });
}

}  // namespace kiln
