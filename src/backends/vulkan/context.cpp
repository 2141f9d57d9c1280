// SPDX-License-Identifier: MIT OR Apache-2.0
// One Vulkan device (context.h).
//
// Note [Vulkan execution]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Ops are recorded into one command buffer, a batch, in the order they are called: each
// dispatch binds its pipeline and a descriptor set of its buffers, then a global memory barrier
// orders it before the next one. A full batch (kMaxBatch dispatches, the descriptor pool or the
// upload buffer of small parameters) is submitted without waiting, and recording goes on in a
// second frame (command buffer, fence, pools, rings) while the device runs it: the host records
// batch n + 1 while the device runs batch n. Starting a batch in a frame first waits for the
// batch that frame held; every batch opens with a barrier against the ones before it. A sync
// point (a host read or write of a buffer a batch not yet finished uses, kiln::sync) submits the
// open batch and waits for both. A buffer released while a batch may use it goes back to the
// cache only after that batch has run.
// Errors of the device (lost, out of memory) surface at the sync point as kiln::Error.
// Tensors live in device-local memory the host cannot see where the device has some (a discrete
// GPU): host writes are copied in through a ring of host-visible memory, recorded in the open
// batch in order with the dispatches, and reads are copied out and waited for. Elsewhere
// (lavapipe, integrated GPUs) memory is host-visible and coherent, and host reads and writes
// go through the persistent mapping.
#include "backends/vulkan/context.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "kernel/cache.h"
#include "kernel/device_kernels.h"
#include "kernel/ir.h"
#include "kernel/render.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

// The process that opened the devices: the driver's threads and the devices live there. A child
// forked after it has neither, so it may not record, submit or close anything.
pid_t g_owner = 0;

void check_owner() {
  KILN_CHECK(g_owner == 0 || g_owner == ::getpid(), "vulkan",
             "the Vulkan device was opened before this process was forked; a forked child "
             "cannot use it (open it after the fork, or start a new process)");
}

constexpr uint32_t kMaxBatch = 256;        // dispatches per command buffer
constexpr uint32_t kMaxSets = 256;         // descriptor sets per batch
constexpr size_t kUploadBytes = 1u << 20;  // small parameters per batch
constexpr size_t kStageBytes = 4u << 20;   // staged memory: host writes per batch through the ring

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw Error(std::string("[vulkan] ") + what + " failed: " + result_name(r));
}

/// Size classes of the buffer cache: powers of two up to 1 MiB, then multiples of 1 MiB.
size_t size_class(size_t n) {
  n = std::max<size_t>(n, 256);
  if (n > (1u << 20)) return (n + (1u << 20) - 1) & ~((size_t{1} << 20) - 1);
  size_t c = 256;
  while (c < n) c <<= 1;
  return c;
}

/// The devices of one instance, made once per process.
struct Instance {
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices;
  std::string why;  ///< why there is none
};

Instance& instance() {
  static Instance inst = [] {
    Instance in;
    in.why = load();
    if (!in.why.empty()) return in;
    Fns& f = fns();
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "kiln";
    app.apiVersion = VK_API_VERSION_1_2;  // kernel::compile_spirv targets Vulkan 1.2
    VkInstanceCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ci.pApplicationInfo = &app;
    VkResult r = f.vkCreateInstance(&ci, nullptr, &in.instance);
    if (r != VK_SUCCESS) {
      in.why = std::string("vkCreateInstance failed: ") + result_name(r);
      return in;
    }
    if (std::string miss = load_instance(in.instance); !miss.empty()) {
      in.why = "the Vulkan loader lacks " + miss;
      return in;
    }
    uint32_t n = 0;
    f.vkEnumeratePhysicalDevices(in.instance, &n, nullptr);
    in.devices.resize(n);
    if (n) f.vkEnumeratePhysicalDevices(in.instance, &n, in.devices.data());
    if (n == 0) in.why = "the Vulkan loader found no device (install a driver, e.g. mesa-vulkan-drivers)";
    return in;
  }();
  return inst;
}

}  // namespace

int Context::count(std::string* why) {
  Instance& in = instance();
  if (why) *why = in.why;
  return static_cast<int>(in.devices.size());
}

Context& Context::get(int index) {
  static std::mutex mu;
  static std::map<int, Context*> open;  // never destroyed: tensors may outlive main's locals
  std::lock_guard<std::mutex> lock(mu);
  check_owner();
  Context*& c = open[index];
  if (!c) {
    std::string why;
    const int n = count(&why);
    const std::string msg =
        n == 0 ? "no Vulkan device: " + why
               : "no Vulkan device " + std::to_string(index) + " (this machine has " + std::to_string(n) + ")";
    KILN_CHECK(index >= 0 && index < n, "vulkan", msg);
    g_owner = ::getpid();
    if (open.size() == 1)  // the first device: close them all at exit (registered after the
      std::atexit([] {     // driver loaded, so run before its teardown), in the owner only
        if (g_owner != ::getpid()) return;
        std::lock_guard<std::mutex> l(mu);
        for (auto& [i, ctx] : open)
          if (ctx) ctx->close();
      });
    c = new Context(index);
  }
  KILN_CHECK(!c->closed(), "vulkan", "the device is closed (the process is exiting)");
  return *c;
}

void Context::close() noexcept {
  std::lock_guard<std::recursive_mutex> lock(mu);
  if (closed()) return;
  Fns& f = fns();
  try {
    sync();
  } catch (...) {  // an error of the last batch has no one left to tell
  }
  f.vkDeviceWaitIdle(device_);
  for (auto& [key, p] : pipelines_) {
    f.vkDestroyPipeline(device_, p->pipeline, nullptr);
    f.vkDestroyPipelineLayout(device_, p->layout, nullptr);
    f.vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
    f.vkDestroyShaderModule(device_, p->module, nullptr);
  }
  pipelines_.clear();
  empty_cache();
  for (int frame = 0; frame < 2; ++frame) {
    if (upload_) destroy(upload_);
    if (errors_) destroy(errors_);
    if (stage_) destroy(stage_);
    upload_ = errors_ = stage_ = nullptr;
    f.vkDestroyDescriptorPool(device_, dpool_, nullptr);
    f.vkDestroyFence(device_, fence_, nullptr);
    swap_frames();
  }
  if (readback_) destroy(readback_);
  readback_ = nullptr;
  if (stats_.pipelines > 0) save_pipeline_cache();
  f.vkDestroyPipelineCache(device_, pcache_, nullptr);
  f.vkDestroyCommandPool(device_, pool_, nullptr);
  f.vkDestroyDevice(device_, nullptr);
  device_ = VK_NULL_HANDLE;
}

namespace {

/// Whether the physical device offers device extension `name`.
bool has_extension(VkPhysicalDevice phys, const char* name) {
  Fns& f = fns();
  uint32_t n = 0;
  if (f.vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> ext(n);
  if (f.vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, ext.data()) != VK_SUCCESS) return false;
  for (const VkExtensionProperties& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace

Context::Context(int index) {
  kernel::detail::warm_spirv_compiler();  // overlaps glslang's setup with the device's
  Fns& f = fns();
  instance_ = instance().instance;
  phys_ = instance().devices[static_cast<size_t>(index)];
  VkPhysicalDeviceProperties props;
  f.vkGetPhysicalDeviceProperties(phys_, &props);
  name_ = props.deviceName;
  identity_ = name_ + " vendor " + std::to_string(props.vendorID) + " device " + std::to_string(props.deviceID) +
              " driver " + std::to_string(props.driverVersion) + " api " + std::to_string(props.apiVersion);
  storage_align_ = std::max<VkDeviceSize>(4, props.limits.minStorageBufferOffsetAlignment);
  max_bindings_ = std::min({kMaxBindings, props.limits.maxPerStageDescriptorStorageBuffers - 1,
                            props.limits.maxDescriptorSetStorageBuffers - 1});
  limits_.shared_bytes = props.limits.maxComputeSharedMemorySize;
  limits_.max_group_threads = props.limits.maxComputeWorkGroupInvocations;
  limits_.subgroups = false;
  uint32_t nq = 0;
  f.vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  f.vkGetPhysicalDeviceQueueFamilyProperties(phys_, &nq, qf.data());
  family_ = nq;
  for (uint32_t q = 0; q < nq && family_ == nq; ++q)
    if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) family_ = q;
  KILN_CHECK(family_ < nq, "vulkan", "device " << name_ << " has no compute queue");
  VkPhysicalDeviceMemoryProperties mp;
  f.vkGetPhysicalDeviceMemoryProperties(phys_, &mp);
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1;
  for (uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags fl = mp.memoryTypes[t].propertyFlags;
    if ((fl & want) != want) continue;
    if (best < 0 || (fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) best = static_cast<int>(t);
  }
  KILN_CHECK(best >= 0, "vulkan", "device " << name_ << " has no host-visible coherent memory");
  host_type_ = static_cast<uint32_t>(best);
  // Tensors: device-local memory the host cannot see where there is some (a discrete GPU), its
  // contents moved through staging copies; else the host-visible memory, mapped.
  // KILN_VULKAN_MEMORY=host forces the mapping, =staged the copies (over any memory type).
  int local = -1;
  for (uint32_t t = 0; t < mp.memoryTypeCount && local < 0; ++t) {
    const VkMemoryPropertyFlags fl = mp.memoryTypes[t].propertyFlags;
    if ((fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && !(fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
      local = static_cast<int>(t);
  }
  const char* mem = std::getenv("KILN_VULKAN_MEMORY");
  const std::string asked = mem ? mem : "";
  KILN_CHECK(asked.empty() || asked == "host" || asked == "staged", "vulkan",
             "KILN_VULKAN_MEMORY is '" << asked << "': host or staged");
  staged_ = asked == "staged" || (asked.empty() && local >= 0);
  memory_type_ = staged_ && local >= 0 ? static_cast<uint32_t>(local) : host_type_;
  heap_bytes_ = mp.memoryHeaps[mp.memoryTypes[memory_type_].heapIndex].size;

  VkPhysicalDeviceFeatures have;
  f.vkGetPhysicalDeviceFeatures(phys_, &have);
  VkPhysicalDeviceFeatures on{};
  on.shaderInt64 = have.shaderInt64;
  on.shaderFloat64 = have.shaderFloat64;
  float64_ = have.shaderFloat64 == VK_TRUE;
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.pEnabledFeatures = &on;
  // Host memory used in place (wrap_host), where the device can import it.
  const char* host_ext = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
  const bool import = has_extension(phys_, host_ext);
  if (import) {
    di.enabledExtensionCount = 1;
    di.ppEnabledExtensionNames = &host_ext;
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp{};
    hp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &hp;
    f.vkGetPhysicalDeviceProperties2(phys_, &p2);
    import_align_ = static_cast<size_t>(hp.minImportedHostPointerAlignment);
  }
  check(f.vkCreateDevice(phys_, &di, nullptr, &device_), "vkCreateDevice");
  if (std::string miss = load_device(device_); !miss.empty()) throw Error("[vulkan] the driver lacks " + miss);
  if (import)
    f.vkGetMemoryHostPointerPropertiesEXT = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
        f.vkGetDeviceProcAddr(device_, "vkGetMemoryHostPointerPropertiesEXT"));
  if (!f.vkGetMemoryHostPointerPropertiesEXT) import_align_ = 0;
  f.vkGetDeviceQueue(device_, family_, 0, &queue_);

  VkCommandPoolCreateInfo pi{};

  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = family_;
  check(f.vkCreateCommandPool(device_, &pi, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxSets * (kMaxBindings + 1)};  // + debug
  VkDescriptorPoolCreateInfo dpi{};
  dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpi.maxSets = kMaxSets;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  for (int frame = 0; frame < 2; ++frame) {  // the open batch's, and the one submitted before it
    check(f.vkAllocateCommandBuffers(device_, &ai, &cmd_), "vkAllocateCommandBuffers");
    check(f.vkCreateFence(device_, &fi, nullptr, &fence_), "vkCreateFence");
    check(f.vkCreateDescriptorPool(device_, &dpi, nullptr, &dpool_), "vkCreateDescriptorPool");
    upload_ = new_buffer(kUploadBytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true);
    if (staged_)
      stage_ = new_buffer(kStageBytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, true);
    swap_frames();
  }
  VkPipelineCacheCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  // The pipelines of earlier runs (the driver checks the data's device and version itself and
  // starts empty when they differ; a damaged file is dropped the same way).
  const std::string saved = kernel::cache::read_all(pipeline_cache_path());
  pci.initialDataSize = saved.size();
  pci.pInitialData = saved.empty() ? nullptr : saved.data();
  if (f.vkCreatePipelineCache(device_, &pci, nullptr, &pcache_) != VK_SUCCESS) {
    pci.initialDataSize = 0;
    pci.pInitialData = nullptr;
    check(f.vkCreatePipelineCache(device_, &pci, nullptr, &pcache_), "vkCreatePipelineCache");
  }
  const char* dbg = std::getenv("KILN_KERNEL_DEBUG");
  set_debug(dbg && *dbg && std::strcmp(dbg, "0") != 0);
}

void Context::set_debug(bool on) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  for (int frame = 0; frame < 2; ++frame) {
    if (on && !errors_) {
      errors_ = new_buffer(kMaxBatch * storage_align_, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true);
      std::memset(errors_->map, 0, errors_->size);
    }
    swap_frames();
  }
  debug_ = on;
}

Buf* Context::new_buffer(size_t size, VkBufferUsageFlags usage, bool host) {
  Fns& f = fns();
  auto b = std::make_unique<Buf>();
  b->size = size;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = size;
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(f.vkCreateBuffer(device_, &bi, nullptr, &b->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  f.vkGetBufferMemoryRequirements(device_, b->buffer, &req);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = host ? host_type_ : memory_type_;
  VkResult r = f.vkAllocateMemory(device_, &ai, nullptr, &b->memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    empty_cache();  // once, then give up
    r = f.vkAllocateMemory(device_, &ai, nullptr, &b->memory);
  }
  if (r != VK_SUCCESS) {
    f.vkDestroyBuffer(device_, b->buffer, nullptr);
    throw Error("[vulkan] out of device memory allocating " + std::to_string(size) + " bytes on " + name_ + " (" +
                result_name(r) + ")");
  }
  f.vkBindBufferMemory(device_, b->buffer, b->memory, 0);
  if (host || !staged_) {  // staged tensors are never mapped, whatever their memory
    void* p = nullptr;
    check(f.vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    b->map = static_cast<char*>(p);
  }
  reserved_ += static_cast<int64_t>(size);
  return b.release();
}

void Context::destroy(Buf* b) noexcept {
  Fns& f = fns();
  const bool imported = b->owner != nullptr;
  if (b->map && !imported) f.vkUnmapMemory(device_, b->memory);  // staged tensors were never mapped
  f.vkDestroyBuffer(device_, b->buffer, nullptr);
  f.vkFreeMemory(device_, b->memory, nullptr);
  if (!imported) reserved_ -= static_cast<int64_t>(b->size);
  delete b;  // and the imported memory's owner
}

void Context::recycle(Buf* b) noexcept {
  if (b->owner)
    destroy(b);
  else
    free_.emplace(b->size, b);
}

Buf* Context::import_host(void* p, size_t n, std::shared_ptr<void> owner) {
  check_owner();
  Fns& f = fns();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // The whole aligned blocks around [p, p + n): mapped memory, as long as a block is no larger
  // than a page (the host maps whole pages).
  const size_t a = import_align_;
  if (closed() || a == 0 || a > page || n == 0) return nullptr;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p), lo = at / a * a, hi = (at + n + a - 1) / a * a;
  if ((at - lo) % storage_align_ != 0) return nullptr;
  VkMemoryHostPointerPropertiesEXT hp{};
  hp.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  if (f.vkGetMemoryHostPointerPropertiesEXT(device_, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                            reinterpret_cast<void*>(lo), &hp) != VK_SUCCESS)
    return nullptr;
  auto b = std::make_unique<Buf>();
  VkExternalMemoryBufferCreateInfo ext{};
  ext.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.pNext = &ext;
  bi.size = hi - lo;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (f.vkCreateBuffer(device_, &bi, nullptr, &b->buffer) != VK_SUCCESS) return nullptr;
  VkMemoryRequirements req;
  f.vkGetBufferMemoryRequirements(device_, b->buffer, &req);
  const uint32_t types = hp.memoryTypeBits & req.memoryTypeBits;
  uint32_t type = 0;
  while (type < 32 && !(types >> type & 1u)) ++type;
  VkImportMemoryHostPointerInfoEXT imp{};
  imp.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  imp.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  imp.pHostPointer = reinterpret_cast<void*>(lo);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.pNext = &imp;
  ai.allocationSize = hi - lo;
  ai.memoryTypeIndex = type;
  if (type == 32 || req.size > hi - lo || f.vkAllocateMemory(device_, &ai, nullptr, &b->memory) != VK_SUCCESS) {
    f.vkDestroyBuffer(device_, b->buffer, nullptr);
    return nullptr;
  }
  f.vkBindBufferMemory(device_, b->buffer, b->memory, 0);
  b->base = at - lo;
  b->map = static_cast<char*>(p);  // the host's own pointer
  b->size = b->in_use = n;
  b->owner = owner ? std::move(owner) : std::make_shared<int>(0);
  return b.release();
}

std::string Context::pipeline_cache_path() const {
  return kernel::cache_dir() + "/vulkan-" + kernel::cache::hash128(identity_).substr(0, 16) + ".pipelines";
}

bool Context::save_pipeline_cache() noexcept {
  try {
    Fns& f = fns();
    size_t n = 0;
    if (f.vkGetPipelineCacheData(device_, pcache_, &n, nullptr) != VK_SUCCESS || n == 0 || n > (size_t{256} << 20))
      return false;
    std::string data(n, '\0');
    if (f.vkGetPipelineCacheData(device_, pcache_, &n, data.data()) != VK_SUCCESS) return false;
    data.resize(n);
    // Written aside, then renamed over the old file: a reader never sees half of it.
    const std::string path = pipeline_cache_path(), tmp = path + ".tmp-" + std::to_string(::getpid());
    if (!kernel::cache::make_dirs(kernel::cache_dir()) || !kernel::cache::write_all(tmp, data)) {
      std::remove(tmp.c_str());
      return false;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      return false;
    }
    return true;
  } catch (...) {
    return false;
  }
}

void Context::check_size(size_t nbytes) const {
  if (nbytes > heap_bytes_)
    throw Error("[vulkan] out of device memory allocating " + std::to_string(nbytes) + " bytes on " + name_ +
                " (its memory heap has " + std::to_string(heap_bytes_) + " bytes)");
}

Buf* Context::allocate(size_t nbytes) {
  check_owner();
  KILN_CHECK(!closed(), "vulkan", "the device is closed (the process is exiting)");
  const size_t c = size_class(nbytes);
  Buf* b = nullptr;
  if (auto it = free_.find(c); it != free_.end()) {
    b = it->second;
    free_.erase(it);
  } else {
    b = new_buffer(
        c, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT);
  }
  b->in_use = nbytes;
  b->batch = 0;
  in_use_ += static_cast<int64_t>(nbytes);
  peak_ = std::max(peak_, in_use_);
  return b;
}

void Context::release(Buf* b) noexcept {
  if (closed()) {  // the device went at exit; its memory with it
    delete b;
    return;
  }
  if (!b->owner) in_use_ -= static_cast<int64_t>(b->in_use);  // imported memory is the host's
  b->in_use = 0;
  if (!pending(b))
    recycle(b);
  else if (b->batch == batch_)  // back once the batch that uses it last has run
    retired_.push_back(b);
  else
    other_.retired.push_back(b);
}

MemoryStats Context::memory_stats() const {
  MemoryStats m;
  m.in_use = in_use_;
  m.peak = peak_;
  m.cached = reserved_ - static_cast<int64_t>(upload_ ? upload_->size : 0) - in_use_;
  return m;
}

void Context::reset_peak() { peak_ = in_use_; }

void Context::empty_cache() {
  for (auto& [size, b] : free_) destroy(b);
  free_.clear();
}

Pipeline& Context::pipeline(const kernel::Kernel& k) {
  const std::string key = k.key(kernel::Target::Glsl) + (debug_ ? "|debug" : "");
  auto& slot = pipelines_[key];
  if (slot) {
    ++stats_.pipeline_hits;
    return *slot;
  }
  Fns& f = fns();
  auto p = std::make_unique<Pipeline>();
  std::string origin;
  const std::vector<uint32_t> code = kernel::compile_spirv(k, &origin, debug_);
  ++(origin == "compiled" ? stats_.spirv_compiled : stats_.spirv_from_disk);
  VkShaderModuleCreateInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  si.codeSize = code.size() * 4;
  si.pCode = code.data();
  check(f.vkCreateShaderModule(device_, &si, nullptr, &p->module), "vkCreateShaderModule");
  const kernel::ir::Kernel& ir = k.ir();
  p->nbuffers = static_cast<uint32_t>(ir.buffers.size());
  p->push_bytes = static_cast<uint32_t>(kernel::push_bytes(ir));
  p->debug = debug_;
  p->name = k.name();
  for (const auto& b : ir.buffers) p->objects.push_back(b.name);
  for (const auto& a : ir.shared) p->objects.push_back(a.name);
  KILN_CHECK(p->nbuffers <= max_bindings_, "vulkan",
             "kernel '" << k.name() << "' has " << p->nbuffers << " buffers (at most " << max_bindings_ << " here)");
  const uint32_t nbind = p->nbuffers + (debug_ ? 1 : 0);
  std::vector<VkDescriptorSetLayoutBinding> binds(nbind);
  for (uint32_t i = 0; i < nbind; ++i) {
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = nbind;
  li.pBindings = binds.data();
  check(f.vkCreateDescriptorSetLayout(device_, &li, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes};
  VkPipelineLayoutCreateInfo pli{};
  pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  pli.pushConstantRangeCount = p->push_bytes ? 1 : 0;
  pli.pPushConstantRanges = &pr;
  check(f.vkCreatePipelineLayout(device_, &pli, nullptr, &p->layout), "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = p->module;
  ci.stage.pName = "main";
  ci.layout = p->layout;
  check(f.vkCreateComputePipelines(device_, pcache_, 1, &ci, nullptr, &p->pipeline), "vkCreateComputePipelines");
  p->group = k.group_size();
  ++stats_.pipelines;
  slot = std::move(p);
  return *slot;
}

void Context::begin_batch() {
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(fns().vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  // After everything submitted before (the batch in flight may still run): a barrier's first
  // scope takes in the queue's earlier submissions.
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  fns().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                             nullptr, 0, nullptr);
}

void Context::reserve(size_t upload_bytes) {
  check_owner();
  KILN_CHECK(!closed(), "vulkan", "the device is closed (the process is exiting)");
  if (recorded_ >= kMaxBatch || sets_ >= kMaxSets || upload_used_ + upload_bytes + storage_align_ > kUploadBytes)
    submit_open();
  KILN_CHECK(upload_bytes + storage_align_ <= kUploadBytes, "vulkan",
             "parameters of " << upload_bytes << " bytes exceed the upload buffer");
}

Binding Context::upload(const void* data, size_t n) {
  size_t off = (upload_used_ + storage_align_ - 1) / storage_align_ * storage_align_;
  std::memcpy(upload_->map + off, data, n);
  upload_used_ = off + std::max<size_t>(n, 4);
  upload_->batch = batch_;
  stats_.upload_bytes += static_cast<int64_t>(n);
  return Binding{upload_, off, (std::max<size_t>(n, 4) + 3) / 4 * 4};
}

void Context::dispatch(Pipeline& p, const std::vector<Binding>& bindings, const void* push, size_t push_bytes,
                       std::array<uint32_t, 3> groups) {
  Fns& f = fns();
  KILN_CHECK(bindings.size() == p.nbuffers && push_bytes == p.push_bytes && p.debug == debug_, "vulkan",
             "a dispatch's " << bindings.size() << " buffers and " << push_bytes
                             << " bytes of constants do not match its kernel's " << p.nbuffers << " and "
                             << p.push_bytes);
  if (recorded_ == 0) begin_batch();
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = dpool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set;
  check(f.vkAllocateDescriptorSets(device_, &ai, &set), "vkAllocateDescriptorSets");
  ++sets_;
  VkDescriptorBufferInfo infos[kMaxBindings + 1];
  VkWriteDescriptorSet writes[kMaxBindings + 1];
  std::vector<Binding> all = bindings;
  if (p.debug) {  // the dispatch's error slot
    all.push_back(Binding{errors_, recorded_ * storage_align_, 16});
    checked_.resize(recorded_ + 1);
    checked_[recorded_] = &p;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    // In debug mode a buffer is bound as far as its owner asked (in whole words), so a kernel's
    // bounds checks see the tensor's size rather than the cached buffer's.
    const Binding& bi = all[i];
    const VkDeviceSize asked = (std::max<size_t>(bi.buf->in_use, 4) + 3) / 4 * 4;
    const VkDeviceSize range = !p.debug            ? VK_WHOLE_SIZE
                               : bi.range          ? bi.range
                               : asked > bi.offset ? std::min<VkDeviceSize>(asked - bi.offset, bi.buf->size - bi.offset)
                                                   : 4;
    infos[i] = VkDescriptorBufferInfo{bi.buf->buffer, bi.buf->base + bi.offset, range};
    writes[i] = VkWriteDescriptorSet{};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    const_cast<Buf*>(bi.buf)->batch = batch_;
  }
  f.vkUpdateDescriptorSets(device_, static_cast<uint32_t>(all.size()), writes, 0, nullptr);
  f.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  f.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes) f.vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
  f.vkCmdDispatch(cmd_, groups[0], groups[1], groups[2]);
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  f.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
  ++recorded_;
  ++stats_.dispatches;
}

void Context::copy(const Buf* from, size_t from_off, const Buf* to, size_t to_off, size_t n) {
  Fns& f = fns();
  if (recorded_ == 0) begin_batch();
  // After the dispatches and copies before it, and before those after it.
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  constexpr VkPipelineStageFlags kBoth = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  f.vkCmdPipelineBarrier(cmd_, kBoth, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  const VkBufferCopy region{from->base + from_off, to->base + to_off, n};
  f.vkCmdCopyBuffer(cmd_, from->buffer, to->buffer, 1, &region);
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  f.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, kBoth, 0, 1, &mb, 0, nullptr, 0, nullptr);
  const_cast<Buf*>(from)->batch = batch_;
  const_cast<Buf*>(to)->batch = batch_;
  ++recorded_;
  ++stats_.copies;
}

void Context::write(Buf* b, size_t off, const void* src, size_t n) {
  if (n == 0) return;
  check_owner();
  if (b->map) {
    if (pending(b)) sync();
    std::memcpy(b->map + off, src, n);
    return;
  }
  // Staged: through the ring of host memory, copied in the open batch in order with the
  // dispatches (nothing waits); a write larger than the ring has a buffer of its own.
  if (n <= kStageBytes) {
    if (recorded_ >= kMaxBatch || (stage_used_ + 15) / 16 * 16 + n > kStageBytes) submit_open();
    const size_t pos = (stage_used_ + 15) / 16 * 16;
    std::memcpy(stage_->map + pos, src, n);
    stage_used_ = pos + n;
    copy(stage_, pos, b, off, n);
    return;
  }
  Buf* tmp = new_buffer(n, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true);
  std::memcpy(tmp->map, src, n);
  try {
    copy(tmp, 0, b, off, n);
    sync();
  } catch (...) {
    destroy(tmp);
    throw;
  }
  destroy(tmp);
}

void Context::read(const Buf* b, size_t off, void* dst, size_t n) {
  if (n == 0) return;
  check_owner();
  if (b->map) {
    if (pending(b)) sync();
    std::memcpy(dst, b->map + off, n);
    return;
  }
  if (recorded_ >= kMaxBatch) submit_open();
  Buf* tmp = n <= kStageBytes ? nullptr : new_buffer(n, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true);
  Buf* to = tmp ? tmp : readback();
  try {
    copy(b, off, to, 0, n);
    sync();
    std::memcpy(dst, to->map, n);
  } catch (...) {
    if (tmp) destroy(tmp);
    throw;
  }
  if (tmp) destroy(tmp);
}

Buf* Context::readback() {
  if (!readback_) readback_ = new_buffer(kStageBytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true);
  return readback_;
}

void Context::reset_open() noexcept {
  Fns& f = fns();
  f.vkResetDescriptorPool(device_, dpool_, 0);
  f.vkResetCommandBuffer(cmd_, 0);
  upload_used_ = 0;
  stage_used_ = 0;
  recorded_ = 0;
  sets_ = 0;
}

void Context::swap_frames() noexcept {
  std::swap(cmd_, other_.cmd);
  std::swap(fence_, other_.fence);
  std::swap(dpool_, other_.dpool);
  std::swap(upload_, other_.upload);
  std::swap(stage_, other_.stage);
  std::swap(errors_, other_.errors);
  std::swap(checked_, other_.checked);
  std::swap(retired_, other_.retired);
}

void Context::finish_other() {
  Fns& f = fns();
  other_.in_flight = false;
  ++stats_.waits;
  const VkResult r = f.vkWaitForFences(device_, 1, &other_.fence, VK_TRUE, UINT64_MAX);
  // Whatever happened, the batch is over: its buffers and descriptor sets are free again.
  f.vkResetFences(device_, 1, &other_.fence);
  f.vkResetDescriptorPool(device_, other_.dpool, 0);
  f.vkResetCommandBuffer(other_.cmd, 0);
  for (Buf* b : other_.retired) recycle(b);
  other_.retired.clear();
  done_ = other_.batch;
  check(r, "waiting for the device");
  if (other_.errors) check_accesses(other_.errors, other_.checked);
  other_.checked.clear();
}

void Context::submit_open() {
  Fns& f = fns();
  // The older batch first: its frame records the next one. Its errors surface here, with the
  // open batch still open (and submitted by the next sync).
  if (other_.in_flight) finish_other();
  VkResult r = f.vkEndCommandBuffer(cmd_);
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  if (r == VK_SUCCESS) r = f.vkQueueSubmit(queue_, 1, &si, fence_);
  if (r != VK_SUCCESS) {  // the batch is lost: its frame is free again, its buffers too
    for (Buf* b : retired_) recycle(b);
    retired_.clear();
    checked_.clear();
    reset_open();
    done_ = batch_++;
    check(r, "submitting a batch");
  }
  ++stats_.submits;
  swap_frames();
  other_.batch = batch_;
  other_.in_flight = true;
  ++batch_;
  reset_open();
}

void Context::sync() {
  if (recorded_ == 0 && !other_.in_flight) return;
  check_owner();
  if (recorded_ > 0) submit_open();
  if (other_.in_flight) finish_other();
}

void Context::check_accesses(Buf* errors, std::vector<const Pipeline*>& checked) {
  std::string first;
  for (size_t d = 0; d < checked.size(); ++d) {
    uint32_t* e = reinterpret_cast<uint32_t*>(errors->map + d * storage_align_);
    if (checked[d] && e[0] && first.empty()) {
      const Pipeline& p = *checked[d];
      std::ostringstream m;
      m << "[kernel '" << p.name << "'] out-of-range access: " << (e[1] < p.nbuffers ? "buffer '" : "shared array '");
      if (e[1] < p.objects.size())
        m << p.objects[e[1]];
      else
        m << '#' << e[1];
      m << "' index " << static_cast<int32_t>(e[2]) << " (size " << e[3] << ")";
      first = m.str();
    }
    std::memset(e, 0, 16);
  }
  checked.clear();
  if (!first.empty()) throw Error(first);
}

}  // namespace kiln::vulkan
