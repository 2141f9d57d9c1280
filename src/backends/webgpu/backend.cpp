// SPDX-License-Identifier: MIT OR Apache-2.0
// The WebGPU backend ("webgpu", the WebAssembly build): device buffers, the kernel library's
// kernels rendered to WGSL for the ops it has, the CPU for the rest through the fallback; and
// the launcher of custom ops' kernels. See docs/web.md and Note [WebGPU execution] in
// context.cpp.
#include "core/backend.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/webgpu/context.h"
#include "core/registry.h"
#include "kernel/launch.h"
#include "kiln/error.h"
#include "kiln/small_vector.h"

namespace kiln {
namespace webgpu {
namespace {

class WebGpuBackend final : public Backend {
 public:
  WebGpuBackend()
      : ctx_(Context::get()),
        kernels_(ctx_.limits(), /*float64=*/false, ctx_.identity(), "WebGPU", kernel::Target::Wgsl) {}
  DeviceType type() const override { return DeviceType::WebGPU; }
  std::string name() const override { return "webgpu"; }

  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    return std::make_shared<Storage>(ctx_.allocate(nbytes), nbytes, this);
  }
  void release(void* data, size_t) noexcept override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.release(static_cast<Buf*>(data));
  }
  bool supports(const ir::Op& op) override { return kernels_.supports(op); }
  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    SmallVec<void*, 4> bi, bo;
    for (size_t i = 0; i < op.inputs.size(); ++i) bi.push_back(buf(in[i]));
    for (size_t i = 0; i < op.outputs.size(); ++i) bo.push_back(buf(out[i]));
    kernels_.run(ctx_, op, bi.data(), bo.data());
  }
  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
    ctx_.write(buf(&dst), off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
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

 private:
  Buf* buf(const Storage* s) const {
    KILN_CHECK(s->backend == this && s->data, "webgpu", "a buffer of another device reached the WebGPU backend");
    return static_cast<Buf*>(s->data);
  }
  Context& ctx_;
  kernel::DeviceKernels kernels_;
};

Backend* backend() {
  static std::mutex mu;
  static Backend* made = nullptr;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  if (!made) made = new WebGpuBackend();
  return made;
}

/// Custom ops' kernels (kernel/launch.h) on WebGPU memory, recorded like the library's.
void launch(const kernel::Kernel& k, int, const std::vector<kernel::detail::DeviceBuffer>& buffers,
            const std::vector<kernel::Arg>& scalars, kernel::Dim3 groups) {
  Context& ctx = Context::get();
  std::lock_guard<std::recursive_mutex> lock(ctx.mu);
  std::vector<std::pair<const Buf*, size_t>> b;
  for (const kernel::detail::DeviceBuffer& d : buffers) {
    KILN_CHECK(d.storage->backend->type() == DeviceType::WebGPU && d.storage->data, "webgpu",
               "kernel '" << k.name() << "': a buffer of another device reached the WebGPU launcher");
    b.emplace_back(static_cast<const Buf*>(d.storage->data), d.offset);
  }
  ctx.launch(k, b, kernel::pack_push(k, scalars),
             {static_cast<uint32_t>(groups.x), static_cast<uint32_t>(groups.y), static_cast<uint32_t>(groups.z)});
}

}  // namespace
}  // namespace webgpu

void register_webgpu() {
  kernel::detail::register_launcher(DeviceType::WebGPU, webgpu::launch);
  register_devices(
      "webgpu", [](int) { return Device(webgpu::backend(), 0); }, [] { return webgpu::Context::count(); });
}

}  // namespace kiln
