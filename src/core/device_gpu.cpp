// SPDX-License-Identifier: MIT OR Apache-2.0
// Device::vulkan: a name of the device registry (the Vulkan library registers "vulkan" when it
// is built), so core names no backend.
#include <string>

#include "kiln/device.h"
#include "kiln/error.h"

namespace kiln {

Device Device::vulkan(int index) {
  KILN_CHECK(index >= 0, "vulkan", "device index " << index << " is negative");
  try {
    return from_string("vulkan:" + std::to_string(index));
  } catch (const Error& e) {
    KILN_CHECK(std::string(e.what()).find("unknown device") == std::string::npos, "vulkan",
               "this build has no Vulkan backend (configure with the Vulkan headers installed: "
               "libvulkan-dev; KILN_WITH_VULKAN)");
    throw;
  }
}

}  // namespace kiln
