// SPDX-License-Identifier: MIT OR Apache-2.0
// The page's WebGPU device (context.h).
//
// Note [WebGPU execution]
// ~~~~~~~~~~~~~~~~~~~~~~~
// WebGPU is asynchronous: a buffer is read by mapping it, which resolves a Promise, and the page
// must return to its event loop for that to happen. Kiln's API reads synchronously (item(),
// to(cpu), a fallback op). The JavaScript functions that wait return Promises, and JSPI
// suspends the WebAssembly stack on them (jspi_pre.js makes them suspending imports and `main`
// and the exports a page lists in Module.kilnAsyncExports return Promises). So a call of such
// an export runs Kiln's ordinary synchronous code, and a read inside it yields to the browser
// until the GPU is done.
//
// Ops are recorded as dispatches into one batch (kiln_webgpu.js): their parameter blocks and
// push constants go into one buffer per batch (WGSL has no push constants: they are a uniform
// struct), and the batch is submitted by the next read or sync, or when it holds 256 dispatches.
// Host writes go through the queue (queue.writeBuffer), after the batch when it uses the buffer.
// The device's validation and out-of-memory errors are caught in error scopes and thrown as
// kiln::Error by the next read or sync, naming the message WebGPU gave.
#include "backends/webgpu/context.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "kernel/ir.h"
#include "kiln/error.h"

extern "C" {
int kiln_wgpu_present();
int kiln_wgpu_open(uint32_t* limits, char* msg, int cap);
uint32_t kiln_wgpu_buffer(uint32_t bytes);
void kiln_wgpu_release(uint32_t id);
void kiln_wgpu_write(uint32_t id, uint32_t off, const void* src, uint32_t n);
int kiln_wgpu_pipeline(const char* code, uint32_t len, const uint8_t* kinds, uint32_t n, char* msg, int cap);
void kiln_wgpu_dispatch(uint32_t pipe, const uint32_t* ids, const uint32_t* offs, uint32_t n, const void* meta,
                        uint32_t meta_bytes, const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy,
                        uint32_t gz);
int kiln_wgpu_read(uint32_t id, uint32_t off, void* dst, uint32_t n, char* msg, int cap);
int kiln_wgpu_sync(char* msg, int cap);
}

namespace kiln::webgpu {
namespace {

constexpr int kMsg = 4096;  ///< bytes of an error message from the JavaScript side

size_t round4(size_t n) { return (n + 3) / 4 * 4; }

}  // namespace

int Context::count() { return kiln_wgpu_present(); }

Context& Context::get() {
  static std::mutex mu;
  static Context* open = nullptr;  // never destroyed: tensors may outlive main's locals
  std::lock_guard<std::mutex> lock(mu);
  if (!open) open = new Context();
  return *open;
}

Context::Context() {
  KILN_CHECK(kiln_wgpu_present(), "webgpu",
             "this page has no WebGPU device: it needs navigator.gpu and WebAssembly JSPI (WebAssembly.Suspending; "
             "Chromium 137 or later), and the program linked with the WebGPU backend");
  uint32_t l[6] = {};
  std::vector<char> msg(kMsg, 0);
  KILN_CHECK(kiln_wgpu_open(l, msg.data(), kMsg) == 0, "webgpu", "no WebGPU device: " << msg.data());
  identity_ = msg.data();
  max_binding_bytes_ = l[0];
  max_buffer_bytes_ = l[1];
  max_bindings_ = l[2] > 1 ? l[2] - 1 : 1;  // one is the parameter block of the library's kernels
  limits_.shared_bytes = l[3];
  limits_.max_group_threads = l[4];
  limits_.subgroups = false;  // WGSL's subgroups are an extension: the kernels' fallback runs
}

void Context::check_size(size_t nbytes) const {
  KILN_CHECK(nbytes <= max_binding_bytes_ && nbytes <= max_buffer_bytes_, "webgpu",
             "a buffer of " << nbytes << " bytes is more than this WebGPU device binds ("
                            << std::min(max_binding_bytes_, max_buffer_bytes_) << " bytes)");
}

Buf* Context::allocate(size_t nbytes) {
  check_size(nbytes);
  auto b = std::make_unique<Buf>();
  b->size = std::max<size_t>(16, round4(nbytes));  // a binding has at least 4 bytes; copies 4-byte units
  b->in_use = nbytes;
  b->id = kiln_wgpu_buffer(static_cast<uint32_t>(b->size));
  in_use_ += nbytes;
  total_ += b->size;
  peak_ = std::max(peak_, in_use_);
  return b.release();
}

void Context::release(Buf* b) noexcept {
  if (!b) return;
  in_use_ -= b->in_use;
  total_ -= b->size;
  kiln_wgpu_release(b->id);
  delete b;
}

MemoryStats Context::memory_stats() const {
  MemoryStats s;
  s.in_use = static_cast<int64_t>(in_use_);
  s.peak = static_cast<int64_t>(peak_);
  s.cached = 0;
  return s;
}

void Context::write(Buf* b, size_t off, const void* src, size_t n) {
  if (n == 0) return;
  const size_t begin = off / 4 * 4, end = std::min(round4(off + n), b->size);
  if (begin == off && (end == off + n || off + n >= b->in_use)) {  // whole words, or up to the buffer's tail
    if (end == off + n) return kiln_wgpu_write(b->id, off, src, n);
    std::vector<char> words(end - begin, 0);
    std::memcpy(words.data(), src, n);
    return kiln_wgpu_write(b->id, off, words.data(), words.size());
  }
  std::vector<char> words(end - begin);  // the words n bytes touch, changed in the middle
  read(b, begin, words.data(), words.size());
  std::memcpy(words.data() + (off - begin), src, n);
  kiln_wgpu_write(b->id, begin, words.data(), words.size());
}

void Context::read(const void* buf, size_t off, void* dst, size_t n) {
  if (n == 0) return;
  const Buf* b = static_cast<const Buf*>(buf);
  const size_t begin = off / 4 * 4, end = round4(off + n);
  KILN_CHECK(end <= b->size, "webgpu",
             "a read of bytes [" << off << ", " << off + n << ") of a " << b->size << "-byte buffer");
  std::vector<char> msg(kMsg, 0);
  if (begin == off && end == off + n) {
    KILN_CHECK(kiln_wgpu_read(b->id, off, dst, n, msg.data(), kMsg) == 0, "webgpu", msg.data());
    return;
  }
  std::vector<char> words(end - begin);
  KILN_CHECK(kiln_wgpu_read(b->id, begin, words.data(), words.size(), msg.data(), kMsg) == 0, "webgpu", msg.data());
  std::memcpy(dst, words.data() + (off - begin), n);
}

void Context::sync() {
  std::vector<char> msg(kMsg, 0);
  KILN_CHECK(kiln_wgpu_sync(msg.data(), kMsg) == 0, "webgpu", msg.data());
}

uint32_t Context::pipeline(const kernel::Kernel& k) {
  const std::string key = k.key(kernel::Target::Wgsl);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  const std::string wgsl = kernel::render(k, kernel::Target::Wgsl);
  const kernel::ir::Kernel& ir = k.ir();
  std::vector<uint8_t> kinds;  // the bindings' kinds: read-only storage, storage, uniform
  for (const auto& b : ir.buffers) kinds.push_back(b.access == kernel::Access::Read ? 0 : 1);
  if (!ir.scalars.empty()) kinds.push_back(2);
  KILN_CHECK(
      ir.buffers.size() <= max_bindings_ + 1, "webgpu",
      "kernel '" << k.name() << "' has " << ir.buffers.size() << " buffers (at most " << max_bindings_ + 1 << " here)");
  std::vector<char> msg(kMsg, 0);
  const int id = kiln_wgpu_pipeline(wgsl.data(), static_cast<uint32_t>(wgsl.size()), kinds.data(),
                                    static_cast<uint32_t>(kinds.size()), msg.data(), kMsg);
  KILN_CHECK(id >= 0, "webgpu", "kernel '" << k.name() << "' did not compile as WGSL: " << msg.data());
  pipelines_.emplace(key, static_cast<uint32_t>(id));
  return static_cast<uint32_t>(id);
}

void Context::dispatch(uint32_t pipe, const kernel::Kernel& k,
                       const std::vector<std::pair<const Buf*, size_t>>& buffers, const std::vector<int32_t>* meta,
                       const std::vector<char>& push, std::array<uint32_t, 3> groups) {
  const size_t declared = k.ir().buffers.size();
  KILN_CHECK(declared == buffers.size() + (meta ? 1 : 0), "webgpu",
             "kernel '" << k.name() << "' declares " << declared << " buffers; its launch binds "
                        << buffers.size() + (meta ? 1 : 0));
  constexpr uint32_t kMaxGroups = 65535;  // what every WebGPU device allows per axis
  KILN_CHECK(groups[0] <= kMaxGroups && groups[1] <= kMaxGroups && groups[2] <= kMaxGroups, "webgpu",
             "kernel '" << k.name() << "' needs " << groups[0] << " x " << groups[1] << " x " << groups[2]
                        << " groups; WebGPU allows " << kMaxGroups << " per axis");
  std::vector<uint32_t> ids, offs;
  for (const auto& [b, off] : buffers) {
    KILN_CHECK(off % 256 == 0, "webgpu",
               "kernel '" << k.name() << "': a buffer bound at byte " << off << " (WebGPU binds at multiples of 256)");
    ids.push_back(b->id);
    offs.push_back(static_cast<uint32_t>(off));
  }
  std::vector<int32_t> block;
  if (meta) {
    block = *meta;
    block.resize(std::max<size_t>(block.size(), 4), 0);  // a binding holds at least 16 bytes
  }
  kiln_wgpu_dispatch(pipe, ids.data(), offs.data(), static_cast<uint32_t>(ids.size()), block.data(),
                     static_cast<uint32_t>(block.size() * 4), push.data(), static_cast<uint32_t>(push.size()),
                     groups[0], groups[1], groups[2]);
}

void Context::record(const kernel::Kernel& k, const std::vector<void*>& buffers, const std::vector<int32_t>& meta,
                     const std::vector<char>& push, std::array<uint32_t, 3> groups) {
  const uint32_t pipe = pipeline(k);
  std::vector<std::pair<const Buf*, size_t>> b;
  for (void* p : buffers) b.emplace_back(static_cast<const Buf*>(p), 0);
  dispatch(pipe, k, b, &meta, push, groups);
}

void Context::launch(const kernel::Kernel& k, const std::vector<std::pair<const Buf*, size_t>>& buffers,
                     const std::vector<char>& push, std::array<uint32_t, 3> groups) {
  dispatch(pipeline(k), k, buffers, nullptr, push, groups);
}

}  // namespace kiln::webgpu
