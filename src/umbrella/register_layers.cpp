// SPDX-License-Identifier: MIT OR Apache-2.0
// The one object of the umbrella library kiln::kiln: registers the backends and decorators of
// the layer libraries in core's tables (core/registry.h). Core calls it before its first lookup;
// the umbrella's link option (-u kiln_register_layers) keeps this object in every program that
// links kiln::kiln, and through it the registering objects of each layer.
#include "core/registry.h"

extern "C" void kiln_register_layers() {
  kiln::register_cpu();
  kiln::register_fusion();
  kiln::register_null();
  kiln::register_subset();
#if KILN_WITH_VULKAN
  kiln::register_vulkan();
#endif
#if KILN_WITH_WEBGPU
  kiln::register_webgpu();
#endif
#if KILN_WITH_REMOTE
  kiln::register_remote();
#endif
}
