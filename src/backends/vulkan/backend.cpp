// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan backend ("vulkan", "vulkan:N"): device buffers, host copies at sync points, native
// kernels for the ops kernels.h lists, the CPU for the rest through the fallback. See
// docs/gpu.md and Note [Vulkan execution] in context.cpp.
#include "core/backend.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/vulkan/context.h"
#include "backends/vulkan/fusion.h"
#include "backends/vulkan/kernels.h"
#include "kiln/error.h"
#include "kiln/small_vector.h"

namespace kiln {
namespace vulkan {
namespace {

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(int index)
      : index_(index),
        ctx_(Context::get(index)),
        queue_(ctx_),
        kernels_(ctx_.limits(), ctx_.float64(), ctx_.identity(), "Vulkan") {}
  DeviceType type() const override { return DeviceType::Vulkan; }
  std::string name() const override { return index_ == 0 ? "vulkan" : "vulkan:" + std::to_string(index_); }

  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    return std::make_shared<Storage>(ctx_.allocate(nbytes), nbytes, this);
  }
  void release(void* data, size_t) noexcept override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.release(static_cast<Buf*>(data));
  }
  /// Host memory in place where the device imports it (unified memory: lavapipe, integrated
  /// GPUs); else nullptr, and the caller copies.
  std::shared_ptr<Storage> wrap_host(void* data, size_t nbytes, std::shared_ptr<void> owner) override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    Buf* b = ctx_.import_host(data, nbytes, std::move(owner));
    return b ? std::make_shared<Storage>(b, nbytes, this) : nullptr;
  }
  bool supports(const ir::Op& op) override { return kernels_.supports(op); }
  fusion::Executor* fusion_executor() override { return &fusion_; }
  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override {
    // an op without a kernel is refused by Kernels::run (its launch), not asked again here
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    SmallVec<void*, 4> bi, bo;
    for (size_t i = 0; i < op.inputs.size(); ++i) bi.push_back(buf(in[i]));
    for (size_t i = 0; i < op.outputs.size(); ++i) bo.push_back(buf(out[i]));
    kernels_.run(queue_, op, bi.data(), bo.data());
  }
  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    if (n == 0) return;
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.write(buf(&dst), off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    if (n == 0) return;
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.read(buf(&src), off, dst, n);
  }
  void sync() override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.sync();
  }
  MemoryStats memory_stats() const override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    return ctx_.memory_stats();
  }
  void reset_peak_memory() override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.reset_peak();
  }
  void empty_cache() override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.sync();
    ctx_.empty_cache();
  }

 private:
  Buf* buf(const Storage* s) const {
    KILN_CHECK(s->backend == this && s->data, "vulkan", "a buffer of another device reached the Vulkan backend");
    return static_cast<Buf*>(s->data);
  }
  int index_;
  Context& ctx_;
  Queue queue_;
  Kernels kernels_;
  FusionExecutor fusion_{this, ctx_, queue_, kernels_};
};

}  // namespace

Backend* backend(int index) {
  static std::mutex mu;
  static std::map<int, Backend*> made;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  Backend*& b = made[index];
  if (!b) b = new VulkanBackend(index);
  return b;
}

}  // namespace vulkan
}  // namespace kiln
