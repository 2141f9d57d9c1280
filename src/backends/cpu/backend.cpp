// SPDX-License-Identifier: MIT OR Apache-2.0
// The CPU backend: a caching allocator and one kernel per primitive.
#include "core/backend.h"

#include <cstring>

#include "backends/cpu/conv_impl.h"
#include "backends/cpu/fusion_exec.h"
#include "backends/cpu/kernels.h"
#include "core/allocator.h"

namespace kiln {
namespace {

using cpu::FusionExecutor;
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
  void hint_constant(Storage& s, size_t byte_offset, size_t nbytes, bool constant) override {
    const char* p = static_cast<const char*>(s.data) + byte_offset;
    if (constant)
      cpu::conv::register_constant(p, nbytes);
    else
      cpu::conv::unregister_constant(p);
  }
  fusion::Executor* fusion_executor() override {
    static FusionExecutor exec;  // stateless: shared by every decorator over a CPU backend
    return &exec;
  }

 private:
  CachingAllocator alloc_;
};

}  // namespace

// The CPU backend, which register_cpu() (register.cpp) puts in core's table for cpu_backend().
namespace cpu {
Backend* backend() {
  static CpuBackend* b = new CpuBackend();  // never destroyed: tensors may outlive static dtors
  return b;
}
}  // namespace cpu

}  // namespace kiln
