// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan library's entries in core's tables (core/registry.h): "vulkan", "vulkan:1", ... for
// the devices the loader finds (fused), and "vulkan-plain", ... (one kernel per op), asked only
// when a program lists or names devices.
#include <cstdlib>
#include <string>

#include "backends/vulkan/context.h"
#include "core/registry.h"

namespace kiln {
namespace vulkan {
Backend* backend(int index);  // backend.cpp
void register_launcher();     // custom.cpp
}  // namespace vulkan

namespace {

/// The Vulkan device of that index with op fusion (docs/gpu.md, Fusion), or without it when
/// the environment variable KILN_FUSION is 0 (as for the CPU device).
Device fused(int index) {
  static const bool fuse = [] {
    const char* e = std::getenv("KILN_FUSION");
    return !(e && std::string(e) == "0");
  }();
  const Device plain(vulkan::backend(index), index);
  const LayerMaker fusion = layer_maker(Layer::Fusion);  // Device::fusion(), without the call up
  return fuse && fusion ? with_layer(plain, Layer::Fusion, fusion) : plain;
}

}  // namespace

void register_vulkan() {
  vulkan::register_launcher();  // custom ops' kernels on Vulkan memory
  register_devices("vulkan", fused, [] { return vulkan::Context::count(); });
  register_devices(  // one kernel per op
      "vulkan-plain", [](int index) { return Device(vulkan::backend(index), index); },
      [] { return vulkan::Context::count(); });
}

}  // namespace kiln
