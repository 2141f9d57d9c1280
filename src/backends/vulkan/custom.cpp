// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan launcher of traced kernels (kernel/launch.h): custom ops (kiln::CustomOp) run in the
// device's own memory, recorded into the open batch like the library's kernels.
#include "backends/vulkan/context.h"
#include "backends/vulkan/kernels.h"
#include "kernel/launch.h"
#include "kiln/error.h"

namespace kiln::vulkan {

void register_launcher() {
  kernel::detail::register_launcher(DeviceType::Vulkan, [](const kernel::Kernel& k, int index,
                                                           const std::vector<kernel::detail::DeviceBuffer>& buffers,
                                                           const std::vector<kernel::Arg>& scalars,
                                                           kernel::Dim3 groups) {
    KILN_CHECK(!buffers.empty(), "vulkan", "kernel '" << k.name() << "' launched without buffers");
    Context& ctx = Context::get(index);
    constexpr int64_t kMaxGroups = 65535;  // the minimum every Vulkan device allows per axis
    KILN_CHECK(groups.x <= kMaxGroups && groups.y <= kMaxGroups && groups.z <= kMaxGroups, "vulkan",
               "kernel '" << k.name() << "' needs " << groups.x << " x " << groups.y << " x " << groups.z
                          << " groups; a Vulkan launch allows " << kMaxGroups << " per axis");
    std::lock_guard<std::recursive_mutex> lock(ctx.mu);
    std::vector<Binding> bindings;
    for (const kernel::detail::DeviceBuffer& b : buffers) {
      KILN_CHECK(b.storage->backend->type() == DeviceType::Vulkan && b.storage->data, "vulkan",
                 "kernel '" << k.name() << "': a buffer of another device reached the Vulkan launcher");
      bindings.push_back({static_cast<const Buf*>(b.storage->data), b.offset});
    }
    Pipeline& p = ctx.pipeline(k);
    const std::vector<char> push = pack_push(k, scalars);
    ctx.reserve(0);
    ctx.dispatch(p, bindings, push.data(), push.size(),
                 {static_cast<uint32_t>(groups.x), static_cast<uint32_t>(groups.y), static_cast<uint32_t>(groups.z)});
  });
}

}  // namespace kiln::vulkan
