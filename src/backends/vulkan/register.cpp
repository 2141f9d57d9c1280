// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan library's entry in core's tables (core/registry.h): "vulkan", "vulkan:1", ... for
// the devices the loader finds, asked only when a program lists or names devices.
#include "backends/vulkan/context.h"
#include "core/registry.h"

namespace kiln {
namespace vulkan {
Backend* backend(int index);  // backend.cpp
void register_launcher();     // custom.cpp
}  // namespace vulkan

void register_vulkan() {
  vulkan::register_launcher();  // custom ops' kernels on Vulkan memory
  register_devices(
      "vulkan", [](int index) { return Device(vulkan::backend(index), index); },
      [] { return vulkan::Context::count(); });
  register_devices(  // the same devices with op fusion (docs/gpu.md, Fusion)
      "vulkan-fusion", [](int index) { return Device(vulkan::backend(index), index).fusion(); },
      [] { return vulkan::Context::count(); });
}

}  // namespace kiln
