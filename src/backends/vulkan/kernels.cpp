// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan queue of the kernel library's launches (kernels.h).
#include "backends/vulkan/kernels.h"

namespace kiln::vulkan {

void Queue::record(const kernel::Kernel& k, const std::vector<void*>& buffers, const std::vector<int32_t>& meta,
                   const std::vector<char>& push, std::array<uint32_t, 3> groups) {
  Pipeline& p = ctx_.pipeline(k);
  const size_t meta_bytes = meta.size() * sizeof(int32_t);
  ctx_.reserve(meta_bytes);
  std::vector<Binding> b;
  b.reserve(buffers.size() + 1);
  for (void* buf : buffers) b.push_back(Binding{static_cast<const Buf*>(buf), 0});
  b.push_back(ctx_.upload(meta.data(), meta_bytes));
  ctx_.dispatch(p, b, push.data(), push.size(), groups);
}

}  // namespace kiln::vulkan
