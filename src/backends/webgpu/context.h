// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The page's WebGPU device (the WebAssembly build): buffers and pipelines held by the JavaScript
// side (kiln_webgpu.js) by id, dispatches recorded into one batch until the next read or sync,
// which wait through JSPI (jspi_pre.js). Note [WebGPU execution] in context.cpp.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernel/device_kernels.h"
#include "kiln/device.h"
#include "kiln/kernel.h"

namespace kiln::webgpu {

/// A device buffer: its JavaScript id, its size (a multiple of 4) and the bytes its owner asked for.
struct Buf {
  uint32_t id = 0;
  size_t size = 0;
  size_t in_use = 0;
};

class Context final : public kernel::DeviceQueue {
 public:
  /// The device, opened on first use (inside a call that can wait); throws kiln::Error saying
  /// why when the page has none.
  static Context& get();
  /// 1 when this page can open a WebGPU device (navigator.gpu and JSPI), else 0.
  static int count();

  /// The adapter's description: what a measured choice holds for.
  const std::string& identity() const { return identity_; }
  const kernel::Limits& limits() const { return limits_; }

  /// A buffer of nbytes; throws kiln::Error when the device cannot bind one that large.
  Buf* allocate(size_t nbytes);
  void release(Buf* b) noexcept;
  /// Host writes and reads of n bytes of b at byte `off`, in order with the recorded work
  /// (reads wait for it; unaligned writes read the words they change first).
  void write(Buf* b, size_t off, const void* src, size_t n);
  void read(const void* b, size_t off, void* dst, size_t n) override;
  void record(const kernel::Kernel& k, const std::vector<void*>& buffers, const std::vector<int32_t>& meta,
              const std::vector<char>& push, std::array<uint32_t, 3> groups) override;
  /// Records k over buffers (with byte offsets), no parameter block: a custom op's launch.
  void launch(const kernel::Kernel& k, const std::vector<std::pair<const Buf*, size_t>>& buffers,
              const std::vector<char>& push, std::array<uint32_t, 3> groups);
  /// Submits the open batch and waits for it; errors of the recorded work surface here.
  void sync() override;
  MemoryStats memory_stats() const;
  void reset_peak() { peak_ = in_use_; }

  std::recursive_mutex mu;

 private:
  Context();
  /// Throws the error of allocate when a buffer of nbytes cannot be bound.
  void check_size(size_t nbytes) const;
  /// The pipeline id of k (WGSL rendered and compiled on first use).
  uint32_t pipeline(const kernel::Kernel& k);
  void dispatch(uint32_t pipe, const kernel::Kernel& k, const std::vector<std::pair<const Buf*, size_t>>& buffers,
                const std::vector<int32_t>* meta, const std::vector<char>& push, std::array<uint32_t, 3> groups);

  std::string identity_;
  kernel::Limits limits_;
  uint32_t max_bindings_ = 8;  ///< buffers a kernel may bind besides its parameter block
  uint64_t max_binding_bytes_ = 128u << 20;
  uint64_t max_buffer_bytes_ = 256u << 20;
  std::unordered_map<std::string, uint32_t> pipelines_;
  size_t in_use_ = 0, total_ = 0, peak_ = 0;
};

}  // namespace kiln::webgpu
