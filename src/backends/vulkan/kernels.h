// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The ops the Vulkan backend runs itself: the kernels of the kernel library (kernel/library.h)
// for elementwise ops, reductions, matmul and softmax, traced once per op function and
// storages and rendered to GLSL. Backend::supports answers from here; everything else falls
// back to the CPU (src/ops/fallback.cpp).
#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/vulkan/context.h"
#include "ir/op.h"
#include "kernel/autotune.h"
#include "kernel/library.h"
#include "kiln/kernel.h"

namespace kiln::vulkan {

class Kernels {
 public:
  /// float64: whether the device runs f64 kernels (shaderFloat64); device: its identity, the
  /// key of its autotuned choices.
  Kernels(kernel::Limits limits, bool float64, const std::string& device)
      : limits_(std::move(limits)), float64_(float64), tuner_(device) {}
  /// Whether op runs natively (op kind, dtypes, attributes, int32-addressable sizes).
  bool supports(const ir::Op& op) const;
  /// Records op (supported) into ctx's open batch over the buffers of its operands.
  void run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out);
  /// run when the library has op's kernels (its launch worked out once); false, recording
  /// nothing, when it has not.
  bool try_run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out);
  /// Records launch l (one without a host check or variants, such as a fused kernel's) over
  /// its output and input buffers.
  void run(Context& ctx, const kernel::lib::Launch& l, Buf* const* in, Buf* const* out);

 private:
  /// The kernel named `name`, traced by `make` on first use.
  const kernel::Kernel& get(const std::string& name, const std::function<kernel::Kernel()>& make);
  /// Records one launch of the library for op (a Kernel error when there is none), its
  /// variant chosen by the autotuner.
  void launch(Context& ctx, const ir::Op& op, const std::optional<kernel::lib::Launch>& l, Buf* const* in,
              Buf* const* out);
  /// Records kernel `name` (traced by `trace`) over the launch's buffers and groups.
  void record(Context& ctx, const ir::Op& op, const kernel::lib::Launch& l, const std::string& name,
              const std::function<kernel::Kernel(const kernel::Limits&)>& trace, std::array<uint32_t, 3> groups,
              Buf* const* in, Buf* const* out);
  /// Seconds variant i of l takes (best of three runs, each submitted and waited for alone).
  double time_variant(Context& ctx, const ir::Op& op, const kernel::lib::Launch& l, size_t i, Buf* const* in,
                      Buf* const* out);
  kernel::Limits limits_;
  bool float64_ = false;
  kernel::Autotuner tuner_;
  std::mutex mu_;
  std::map<std::string, kernel::Kernel> cache_;
};

/// The push constants of kernel k from args (in declaration order), laid out as push_bytes says.
std::vector<char> pack_push(const kernel::Kernel& k, const std::vector<kernel::Arg>& args);

}  // namespace kiln::vulkan
