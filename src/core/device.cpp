// SPDX-License-Identifier: MIT OR Apache-2.0
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "core/backend.h"
#include "core/checked.h"
#include "core/rng.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln {

namespace {
std::atomic<uint64_t> g_stamps{0};  // constant-initialised: no guard on the per-allocation path
}  // namespace

// Each thread takes stamps in blocks: unique across threads without an atomic per buffer.
uint64_t next_stamp() noexcept {
  constexpr uint64_t kBlock = 1024;
  thread_local uint64_t next = 0, end = 0;
  if (next == end) {
    next = g_stamps.fetch_add(kBlock, std::memory_order_relaxed) + 1;
    end = next + kBlock;
  }
  return next++;
}

Storage::~Storage() {
  if (backend && !external) backend->release(data, nbytes);
}

const std::shared_ptr<void>& unowned_memory() {
  static const std::shared_ptr<void> k = std::make_shared<int>(0);
  return k;
}

void* Backend::allocate_memory(size_t nbytes) {
  std::shared_ptr<Storage> s = allocate(nbytes);
  s->backend = nullptr;  // the memory now belongs to the caller
  return s->data;
}

void* Backend::host_data(Storage& s) {
  if (Backend* b = inner()) return b->host_data(s);
  return type() == DeviceType::CPU && has_data() ? s.data : nullptr;
}

std::shared_ptr<Storage> Backend::wrap_host(void* data, size_t nbytes, std::shared_ptr<void> owner) {
  if (Backend* b = inner()) return b->wrap_host(data, nbytes, std::move(owner));
  if (type() != DeviceType::CPU || !has_data()) return nullptr;
  return std::make_shared<Storage>(data, nbytes, this, std::move(owner));
}

Tensor tensor_over_storage(std::shared_ptr<Storage> storage, const Shape& shape, const Strides& strides, int64_t offset,
                           DType dtype, const Device& device) {
  // The loaders check first with their own messages; this keeps a missed case from escaping.
  if (storage) detail::check_view_in_storage(shape, strides, offset, dtype, storage->nbytes, "tensor_over_storage");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  impl->device = device;
  impl->storage = std::move(storage);
  return Tensor(std::move(impl));
}

void* host_storage_data(const Tensor& t) {
  if (!t.defined()) return nullptr;
  Storage* s = t.impl().storage.get();
  return s && s->backend ? s->backend->host_data(*s) : nullptr;
}

Device with_layer(const Device& d, Layer layer, Backend* (*make)(Backend* inner, const void* ctx), const void* ctx) {
  if (!make && !find_layer(d, layer)) return d;  // nothing to remove (without_fusion of a plain device)
  Backend* above[3];                             // the decorators over `layer`, outermost first (one per rank of Layer)
  size_t n = 0;
  Backend* below = d.backend();
  while (below->layer() > layer) {
    KILN_ASSERT(n < 3);
    above[n++] = below;
    below = below->inner();
  }
  if (below->layer() == layer && layer != Layer::Base) below = below->inner();  // the one replaced
  Backend* b = make ? make(below, ctx) : below;
  while (n > 0) b = above[--n]->rewrap(b);
  return Device(b, d.index());
}

Backend* find_layer(const Device& d, Layer layer) {
  for (Backend* b = d.backend(); b; b = b->inner())
    if (b->layer() == layer) return b;
  return nullptr;
}

// Device::cpu(), Device::null(), from_string and list read the tables that the layers above
// core fill (core/registry.cpp).
Device::Device() : backend_(cpu().backend_) {}

Device Device::default_device() {
  static const Device d = [] {
    const char* env = std::getenv("KILN_DEVICE");
    return env && *env ? from_string(env) : cpu();
  }();
  return d;
}

DeviceType Device::type() const { return backend_->type(); }
std::string Device::str() const { return backend_->name(); }
std::string to_string(const Device& d) { return d.str(); }

void sync(const Device& d) { d.backend()->sync(); }
MemoryStats memory_stats(const Device& d) { return d.backend()->memory_stats(); }
void reset_peak_memory(const Device& d) { d.backend()->reset_peak_memory(); }
void empty_cache(const Device& d) { d.backend()->empty_cache(); }

namespace {
int& thread_setting() {
  static int n = [] {
    const char* env = std::getenv("KILN_NUM_THREADS");
    int v = env ? std::atoi(env) : 0;
    if (v <= 0) v = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return v;
  }();
  return n;
}
}  // namespace

int num_threads() { return thread_setting(); }
void set_num_threads(int n) {
  KILN_CHECK(n >= 1, "set_num_threads", "thread count must be >= 1, got " << n);
  thread_setting() = n;
}

namespace rng {
namespace {
std::mutex g_mu;
GeneratorState g_state{0x5eed5eedULL, 0};
}  // namespace
GeneratorState reserve(uint64_t blocks) {
  std::lock_guard<std::mutex> lock(g_mu);
  GeneratorState s = g_state;
  g_state.offset += blocks;
  return s;
}
}  // namespace rng

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(rng::g_mu);
  rng::g_state = {seed, 0};
}

RngState rng_state() {
  std::lock_guard<std::mutex> lock(rng::g_mu);
  return {rng::g_state.seed, rng::g_state.offset};
}

void set_rng_state(const RngState& state) {
  std::lock_guard<std::mutex> lock(rng::g_mu);
  rng::g_state = {state.seed, state.offset};
}

}  // namespace kiln
