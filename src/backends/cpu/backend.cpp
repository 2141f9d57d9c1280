// SPDX-License-Identifier: MIT OR Apache-2.0
// The CPU backend: a caching allocator and one kernel per primitive.
#include "core/backend.h"

#include <cstring>

#include "backends/cpu/kernels.h"
#include "core/allocator.h"

namespace kiln {
namespace {

using cpu::kKernels;

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  std::string name() const override { return "cpu"; }
  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    return std::make_shared<Storage>(alloc_.allocate(nbytes), nbytes, this);
  }
  void release(void* data, size_t nbytes) noexcept override { alloc_.release(data, nbytes); }
  void* allocate_memory(size_t nbytes) override { return alloc_.allocate(nbytes); }
  void execute(const ir::Op& op, Storage* const* inputs, Storage* const* outputs) override {
    SmallVec<void*, 4> in, out;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(inputs[i]->data);
    for (size_t i = 0; i < op.outputs.size(); ++i) out.push_back(outputs[i]->data);
    kKernels[static_cast<int>(op.kind)](op, in.data(), out.data());
  }
  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    if (n) std::memcpy(static_cast<char*>(dst.data) + off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    if (n) std::memcpy(dst, static_cast<const char*>(src.data) + off, n);
  }
  MemoryStats memory_stats() const override { return alloc_.stats(); }
  void reset_peak_memory() override { alloc_.reset_peak(); }
  void empty_cache() override { alloc_.empty_cache(); }

 private:
  CachingAllocator alloc_;
};

// Tracks shapes and dtypes only: buffers have no memory and ops do nothing.
class NullBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::Null; }
  std::string name() const override { return "null"; }
  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    stats_.allocations++;
    return std::make_shared<Storage>(nullptr, nbytes, this);
  }
  void release(void*, size_t) noexcept override {}
  void execute(const ir::Op&, Storage* const*, Storage* const*) override {}
  void write(Storage&, size_t, const void*, size_t) override {}
  void read(const Storage&, size_t, void*, size_t) override {}
  bool has_data() const override { return false; }
  MemoryStats memory_stats() const override { return stats_; }

 private:
  MemoryStats stats_;
};

}  // namespace

Backend* cpu_backend() {
  static CpuBackend* b = new CpuBackend();  // never destroyed: tensors may outlive static dtors
  return b;
}
Backend* null_backend() {
  static NullBackend* b = new NullBackend();
  return b;
}

}  // namespace kiln
