// SPDX-License-Identifier: MIT OR Apache-2.0
// The fusion library's entries in core's tables (core/registry.h): the fusion layer, which
// Device::cpu() puts over the CPU backend, and the name "cpu-fusion".
#include "core/registry.h"
#include "fusion/fusion.h"

namespace kiln {

void register_fusion() {
  register_layer(Layer::Fusion, [](Backend* inner, const void*) { return fusion::fusion_backend(inner); });
  register_device("cpu-fusion", [] { return Device(cpu_backend()).fusion(); });
}

}  // namespace kiln
