// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Vulkan backend's native ops: the kernel library's launches (kernel/device_kernels.h)
// recorded into a Context's open batch through this queue, rendered to GLSL. Backend::supports
// answers from DeviceKernels; everything else falls back to the CPU (src/ops/fallback.cpp).
#include <array>
#include <vector>

#include "backends/vulkan/context.h"
#include "kernel/device_kernels.h"

namespace kiln::vulkan {

using Kernels = kernel::DeviceKernels;
using kernel::pack_push;

/// A Context as the kernel library's queue: buffers are Buf*.
class Queue final : public kernel::DeviceQueue {
 public:
  explicit Queue(Context& ctx) : ctx_(ctx) {}
  void record(const kernel::Kernel& k, const std::vector<void*>& buffers, const std::vector<int32_t>& meta,
              const std::vector<char>& push, std::array<uint32_t, 3> groups) override;
  void sync() override { ctx_.sync(); }
  void read(const void* b, size_t off, void* dst, size_t n) override {
    ctx_.read(static_cast<const Buf*>(b), off, dst, n);
  }

 private:
  Context& ctx_;
};

}  // namespace kiln::vulkan
