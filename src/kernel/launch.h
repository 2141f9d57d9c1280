// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Launching a traced kernel on a device's own memory: a backend library above this layer (the
// Vulkan backend) registers a launcher for its device type; custom ops (custom_op.cpp) use it
// for tensors of that type and go through the CPU otherwise.
#include <functional>
#include <vector>

#include "core/backend.h"
#include "kiln/kernel.h"

namespace kiln::kernel::detail {

/// One buffer of a launch: a storage of the launcher's backend, from byte `offset` on.
struct DeviceBuffer {
  Storage* storage = nullptr;
  size_t offset = 0;
};

/// Records (or runs) kernel k over `buffers` (its buffers in declaration order), its scalars and
/// `groups` on device `index` of the launcher's type, which the storages belong to. Errors surface as kiln::Error,
/// possibly at the device's next sync.
using DeviceLauncher = std::function<void(const Kernel& k, int index, const std::vector<DeviceBuffer>& buffers,
                                          const std::vector<Arg>& scalars, Dim3 groups)>;

/// Registers the launcher of a device type (replacing an earlier one).
void register_launcher(DeviceType type, DeviceLauncher launcher);
/// The launcher of a device type, or null.
const DeviceLauncher* launcher(DeviceType type);

}  // namespace kiln::kernel::detail
