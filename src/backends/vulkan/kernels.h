// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The ops the Vulkan backend runs itself: elementwise ops over strided and broadcast f32 and
// i32 operands, and copies of 4-byte dtypes, each a kernel of the kernel language traced once
// per op and dtype (kernels.cpp). Backend::supports answers from here.
#include <map>
#include <mutex>
#include <string>

#include "backends/vulkan/context.h"
#include "ir/op.h"
#include "kiln/kernel.h"

namespace kiln::vulkan {

class Kernels {
 public:
  explicit Kernels(kernel::Limits limits) : limits_(std::move(limits)) {}
  /// Whether op runs natively (op kind, dtypes, attributes, int32-addressable sizes).
  static bool supports(const ir::Op& op);
  /// Records op (supported) into ctx's open batch over the buffers of its operands.
  void run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out);

 private:
  const kernel::Kernel& elementwise(const ir::Op& op);
  kernel::Limits limits_;
  std::mutex mu_;
  std::map<std::string, kernel::Kernel> cache_;
};

}  // namespace kiln::vulkan
