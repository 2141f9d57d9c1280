// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The ops a GPU backend runs itself with the kernel library (kernel/library.h): each op's launch
// traced once per op function and storages, bound to the device's buffers and recorded on its
// queue. Shared by the Vulkan and WebGPU backends, which supply a DeviceQueue; everything the
// library lacks falls back to the CPU (src/ops/fallback.cpp).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kernel/autotune.h"
#include "kernel/library.h"
#include "kiln/kernel.h"

namespace kiln::kernel {

/// A GPU device's stream of work as the library's launches use it. Buffers are the device's own
/// handles (what its Backend keeps in Storage::data).
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  /// Records one dispatch of k over `buffers` (in k's declaration order, the parameter block
  /// last: the queue uploads `meta` and binds it there), push constants `push` (pack_push's
  /// layout) and `groups`.
  virtual void record(const Kernel& k, const std::vector<void*>& buffers, const std::vector<int32_t>& meta,
                      const std::vector<char>& push, std::array<uint32_t, 3> groups) = 0;
  /// Waits for everything recorded; the device's errors surface here as kiln::Error.
  virtual void sync() = 0;
  /// Copies n bytes of buffer b from byte `off` to dst, after the recorded work that writes b.
  virtual void read(const void* b, size_t off, void* dst, size_t n) = 0;
};

/// Bytes of a kernel's push constants (its scalars in order, each aligned to its size: std430,
/// and WGSL's uniform struct of 4-byte fields), and each scalar's offset.
size_t push_bytes(const ir::Kernel& k, std::vector<size_t>* offsets = nullptr);
/// The push constants of kernel k from args (in declaration order), laid out as push_bytes says.
std::vector<char> pack_push(const Kernel& k, const std::vector<Arg>& args);

class DeviceKernels {
 public:
  /// float64: whether the device runs f64 kernels; device: its identity, the key of its
  /// autotuned choices; backend: its name in errors ("Vulkan", "WebGPU"); renders_to: a target
  /// every kernel of a supported op must render to (WGSL cannot express some: i64, f64).
  DeviceKernels(Limits limits, bool float64, const std::string& device, std::string backend,
                std::optional<Target> renders_to = std::nullopt)
      : limits_(std::move(limits)),
        float64_(float64),
        tuner_(device),
        backend_(std::move(backend)),
        renders_to_(renders_to) {}
  /// Whether op runs natively (op kind, dtypes, attributes, int32-addressable sizes).
  bool supports(const kiln::ir::Op& op) const;
  /// Records op (supported) on q over the buffers of its operands.
  void run(DeviceQueue& q, const kiln::ir::Op& op, void* const* in, void* const* out);
  /// run when the library has op's kernels; false, recording nothing, when it has not.
  bool try_run(DeviceQueue& q, const kiln::ir::Op& op, void* const* in, void* const* out);
  /// Records launch l (one without a host check or variants, such as a fused kernel's) over
  /// its output and input buffers.
  void run(DeviceQueue& q, const lib::Launch& l, void* const* in, void* const* out);

 private:
  /// The kernel named `name`, traced by `make` on first use.
  const Kernel& get(const std::string& name, const std::function<Kernel()>& make) const;
  /// Whether every kernel of l renders to renders_to_ (kept per kernel name).
  bool renders(const lib::Launch& l) const;
  /// Records one launch of the library for op, its variant chosen by the autotuner.
  void launch(DeviceQueue& q, const kiln::ir::Op& op, const std::optional<lib::Launch>& l, void* const* in,
              void* const* out);
  /// Records kernel `name` (traced by `trace`) over the launch's buffers and groups.
  void record(DeviceQueue& q, const kiln::ir::Op& op, const lib::Launch& l, const std::string& name,
              const std::function<Kernel(const Limits&)>& trace, std::array<uint32_t, 3> groups, void* const* in,
              void* const* out);
  /// Seconds variant i of l takes (best of three runs, each waited for alone).
  double time_variant(DeviceQueue& q, const kiln::ir::Op& op, const lib::Launch& l, size_t i, void* const* in,
                      void* const* out);
  Limits limits_;
  bool float64_ = false;
  Autotuner tuner_;
  std::string backend_;
  std::optional<Target> renders_to_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Kernel> cache_;
  mutable std::map<std::string, bool> renders_;
};

}  // namespace kiln::kernel
