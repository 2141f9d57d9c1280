// SPDX-License-Identifier: MIT OR Apache-2.0
// The subset device ("subset"): a backend built the way a new GPU backend comes up. Its
// buffers live in host memory behind opaque handles (a handle is not a pointer the frontend can
// follow: using one as memory faults), values move only through read and write, and it runs
// only the elementwise ops (unary, binary, ternary, casts, copies, fills) itself, with the CPU's
// kernels. Every other op reaches it as "not supported" and runs through the CPU fallback
// (Note [Fallback], src/ops/fallback.cpp). The conformance suite runs on it, which proves the
// fallback and the frontend's independence from host pointers.
#include "core/backend.h"

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "core/allocator.h"
#include "core/registry.h"

namespace kiln {
namespace {

/// Handles are host addresses with high bits flipped: non-canonical on x86-64 and AArch64, so
/// a stray dereference faults at once instead of reading the right bytes by luck (on wasm32,
/// bits 25-30 flipped: outside a memory below 32 MiB).
constexpr uintptr_t kHandleBits = uintptr_t{0x5a} << (sizeof(uintptr_t) * 8 - 8);
void* to_handle(void* p) { return p ? reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) ^ kHandleBits) : p; }
void* to_memory(void* h) { return to_handle(h); }

/// The device's kernels by op kind, generated from ops.def like every backend's table: the CPU's
/// kernel for the elementwise families and Fill, and an explicit "not implemented" (nullptr) for
/// every other op, which supports() reports so that the op falls back.
constexpr bool kRunsItself(ir::Family f, ir::OpKind k) {
  return f == ir::Family::Unary || f == ir::Family::Binary || f == ir::Family::Ternary || k == ir::OpKind::Fill;
}
constexpr cpu::Kernel kKernels[] = {
#define KILN_OP(name, family, nin, nout) kRunsItself(ir::Family::family, ir::OpKind::name) ? &cpu::k_##name : nullptr,
#include "ir/ops.def"
#undef KILN_OP
};
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == ir::kNumOps, "one entry per op of ops.def");

class SubsetBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::Subset; }
  std::string name() const override { return "subset"; }
  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    return std::make_shared<Storage>(to_handle(alloc_.allocate(nbytes)), nbytes, this);
  }
  void release(void* data, size_t nbytes) noexcept override { alloc_.release(to_memory(data), nbytes); }
  void* allocate_memory(size_t nbytes) override { return to_handle(alloc_.allocate(nbytes)); }
  bool supports(const ir::Op& op) override { return kKernels[static_cast<int>(op.kind)] != nullptr; }
  void execute(const ir::Op& op, Storage* const* inputs, Storage* const* outputs) override {
    SmallVec<void*, 4> in, out;
    for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(to_memory(inputs[i]->data));
    for (size_t i = 0; i < op.outputs.size(); ++i) out.push_back(to_memory(outputs[i]->data));
    kKernels[static_cast<int>(op.kind)](op, in.data(), out.data());
  }
  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    if (n) std::memcpy(static_cast<char*>(to_memory(dst.data)) + off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    if (n) std::memcpy(dst, static_cast<const char*>(to_memory(src.data)) + off, n);
  }
  void* host_data(Storage&) override { return nullptr; }
  MemoryStats memory_stats() const override { return alloc_.stats(); }
  void reset_peak_memory() override { alloc_.reset_peak(); }
  void empty_cache() override { alloc_.empty_cache(); }

 private:
  CachingAllocator alloc_;
};

}  // namespace

Backend* subset_backend() {
  static SubsetBackend* b = new SubsetBackend();  // never destroyed, like the CPU backend
  return b;
}

void register_subset() {
  register_device("subset", [] { return Device(subset_backend()); });
}

}  // namespace kiln
