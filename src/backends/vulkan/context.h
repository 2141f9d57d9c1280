// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// One Vulkan device: its queue, memory, pipelines and the command buffer that records dispatches
// until the next sync point (Note [Vulkan execution] in context.cpp).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/vulkan/vk.h"
#include "kiln/device.h"
#include "kiln/kernel.h"

namespace kiln::vulkan {

/// A device buffer: host-visible memory, mapped for the life of the buffer.
struct Buf {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  char* map = nullptr;  ///< the host's view of byte 0 (from `base` in the VkBuffer)
  size_t size = 0;      ///< bytes of the buffer (a size class: reused by the cache)
  size_t in_use = 0;    ///< bytes asked for by its current owner
  uint64_t batch = 0;   ///< the last batch that reads or writes it
  /// Host memory imported in place (import_host): byte 0 lies `base` bytes into the VkBuffer;
  /// `owner` keeps the memory alive until the buffer is destroyed (never cached).
  size_t base = 0;
  std::shared_ptr<void> owner;
};

/// A compute pipeline of one traced kernel.
struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t nbuffers = 0;
  uint32_t push_bytes = 0;
  std::array<uint32_t, 3> group{1, 1, 1};
  bool debug = false;                ///< built with bounds checks (one more binding: the error slot)
  std::string name;                  ///< the kernel's, for errors
  std::vector<std::string> objects;  ///< its buffers' then shared arrays' names, for errors
};

/// A buffer binding of a dispatch: buf from byte `offset` on.
struct Binding {
  const Buf* buf = nullptr;
  size_t offset = 0;
  size_t range = 0;  ///< bytes bound (0: the bytes its owner asked for, from offset)
};

/// Counters since the device was opened (Vulkan section of make bench, tests).
/// Buffers a kernel may bind at most (a device may allow fewer: Context::max_bindings). The
/// library's own kernels take at most 8, what WebGPU guarantees (maxStorageBuffersPerShaderStage).
constexpr uint32_t kMaxBindings = 16;

struct Stats {
  int64_t dispatches = 0;      ///< kernels recorded
  int64_t submits = 0;         ///< command buffers submitted
  int64_t waits = 0;           ///< waits for a submitted batch to finish (a sync, or its frame reused)
  int64_t pipelines = 0;       ///< pipelines created
  int64_t spirv_compiled = 0;  ///< GLSL compiled to SPIR-V (glslc ran)
  int64_t spirv_from_disk = 0;
  int64_t pipeline_hits = 0;  ///< dispatches that found their pipeline built
  int64_t upload_bytes = 0;   ///< bytes of small parameters (shapes, strides) uploaded
  int64_t copies = 0;         ///< staged memory: copies between host-visible and device memory
};

class Context {
 public:
  /// The device of that index, opened on first use; throws kiln::Error saying why when there
  /// is no loader or no such device.
  static Context& get(int index);
  /// How many Vulkan devices this machine has (0 with no loader); why: the reason when 0.
  static int count(std::string* why = nullptr);

  const std::string& name() const { return name_; }
  /// The device and driver (names, ids, versions): what a measured choice holds for.
  const std::string& identity() const { return identity_; }
  /// Limits of kernels traced for this device.
  const kernel::Limits& limits() const { return limits_; }
  /// Whether kernels may use f64 (the device's shaderFloat64, enabled).
  bool float64() const { return float64_; }
  /// Buffers a kernel may bind here: the device's limit (one kept for KILN_KERNEL_DEBUG's
  /// error buffer), at most kMaxBindings.
  uint32_t max_bindings() const { return max_bindings_; }

  Buf* allocate(size_t nbytes);
  /// Writes the pipeline cache (the driver's compiled pipelines) to pipeline_cache_path(),
  /// which the next process opening the device starts from; close() does it when pipelines
  /// were built. False when it could not (nothing half-written is left).
  bool save_pipeline_cache() noexcept;
  /// kernel::cache_dir()/vulkan-<hash of the device's identity>.pipelines
  std::string pipeline_cache_path() const;
  /// Throws the out-of-memory error of allocate when nbytes exceed the memory heap (a lazy
  /// allocator's check when a buffer is made, before its memory is).
  void check_size(size_t nbytes) const;
  /// Gives b back (reused once the batches that use it have finished).
  void release(Buf* b) noexcept;
  /// A buffer over n bytes of host memory at p, used in place (VK_EXT_external_memory_host),
  /// that `owner` keeps alive; nullptr where the device cannot import it (no extension, or p
  /// not aligned as a storage buffer offset must be). Released like any buffer; never cached.
  Buf* import_host(void* p, size_t n, std::shared_ptr<void> owner);
  /// Bytes of buffers held by tensors, of all buffers, the peak of in_use.
  MemoryStats memory_stats() const;
  void reset_peak();
  /// Frees cached buffers nothing holds.
  void empty_cache();

  /// The pipeline of k (built on first use: GLSL -> SPIR-V with glslc, cached on disk).
  Pipeline& pipeline(const kernel::Kernel& k);
  /// Records one dispatch of p over `groups` into the open batch. `push`: the push constants.
  void dispatch(Pipeline& p, const std::vector<Binding>& bindings, const void* push, size_t push_bytes,
                std::array<uint32_t, 3> groups);
  /// Room in the open batch for one more dispatch with `upload_bytes` of parameters (the batch
  /// is submitted first when it is full). Call before upload and dispatch.
  void reserve(size_t upload_bytes);
  /// Bytes for a dispatch's small parameters (shapes, strides) in this batch's upload buffer;
  /// returns where they are (bind with the returned binding).
  Binding upload(const void* data, size_t n);
  /// Host writes and reads of n bytes of b at byte `off` (a forked child's throw): through the mapping, waiting for
  /// the open batch when it uses b; or, for staged memory, as copies through host-visible
  /// buffers (a write recorded in the open batch, a read waiting for it).
  void write(Buf* b, size_t off, const void* src, size_t n);
  void read(const Buf* b, size_t off, void* dst, size_t n);
  /// Whether tensors live in memory the host reaches only through copies (docs/gpu.md, Memory).
  bool staged() const { return staged_; }
  /// Submits the open batch and waits for it. Errors of the device surface here, and the first
  /// out-of-range access of a kernel in debug mode.
  void sync();
  /// Debug mode (KILN_KERNEL_DEBUG=1 when the device opens): kernels are built with a bounds
  /// check on every access, and one out of range is a kiln::Error at the next sync naming the
  /// kernel, the buffer, the index and the size. Changing it applies to later dispatches.
  bool debug() const { return debug_; }
  void set_debug(bool on);
  /// Whether b is used by the open batch (a host access must sync first).
  bool pending(const Buf* b) const { return b->batch > done_; }
  Stats stats() const { return stats_; }

  std::recursive_mutex mu;  ///< held by the backend around every call

  /// Waits for the device and destroys it (at process exit, before the driver's own teardown,
  /// so no driver thread still runs then). Buffers released later are only forgotten; any
  /// other use after it throws.
  void close() noexcept;
  bool closed() const { return device_ == VK_NULL_HANDLE; }

 private:
  explicit Context(int index);
  void begin_batch();
  /// Debug mode: throws the first out-of-range access a finished batch recorded in `errors`
  /// (and clears the slots and `checked`).
  void check_accesses(Buf* errors, std::vector<const Pipeline*>& checked);
  /// A buffer of memory_type_ (mapped unless staged), or of host_type_ (mapped) when `host`.
  Buf* new_buffer(size_t size, VkBufferUsageFlags usage, bool host = false);
  /// Submits the open batch without waiting and opens the next in the other frame (after
  /// finishing the batch that frame held, when it is still in flight).
  void submit_open();
  /// Waits for the batch in flight in other_ and makes its frame free: its buffers go back to
  /// the cache, and its errors (the device's, an out-of-range access) are thrown.
  void finish_other();
  /// Resets the open frame's command buffer, descriptor pool, rings and counters.
  void reset_open() noexcept;
  /// Records a copy of n bytes between buffers into the open batch.
  void copy(const Buf* from, size_t from_off, const Buf* to, size_t to_off, size_t n);
  /// The host-visible buffer reads are copied into (made on first use).
  Buf* readback();
  void destroy(Buf* b) noexcept;
  /// A released buffer whose batches have run: back to the cache, or destroyed if imported.
  void recycle(Buf* b) noexcept;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  uint32_t memory_type_ = 0;  ///< of tensors' buffers
  uint32_t host_type_ = 0;    ///< host-visible, coherent: parameters, staging
  bool staged_ = false;
  Buf* stage_ = nullptr;  ///< staged memory: the ring host writes go through, per batch
  size_t stage_used_ = 0;
  Buf* readback_ = nullptr;
  uint64_t heap_bytes_ = UINT64_MAX;  ///< of memory_type_'s heap
  VkDeviceSize storage_align_ = 256;
  uint32_t max_bindings_ = 8;
  size_t import_align_ = 0;    ///< minImportedHostPointerAlignment (0: no host import)
  uint32_t import_types_ = 0;  ///< memory types host memory may be imported into
  std::string name_, identity_;
  kernel::Limits limits_;
  bool float64_ = false;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool dpool_ = VK_NULL_HANDLE;
  VkPipelineCache pcache_ = VK_NULL_HANDLE;
  /// What a batch uses, swapped between the open frame (the members above and below) and
  /// other_, the batch submitted before it, while the device runs it (Note [Vulkan execution]).
  struct Frame {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkDescriptorPool dpool = VK_NULL_HANDLE;
    Buf *upload = nullptr, *stage = nullptr, *errors = nullptr;
    std::vector<const Pipeline*> checked;
    std::vector<Buf*> retired;
    uint64_t batch = 0;
    bool in_flight = false;
  };
  /// Swaps the open frame's resources with other_'s.
  void swap_frames() noexcept;
  Frame other_;
  uint64_t done_ = 0;      ///< every batch up to this one has finished
  uint64_t batch_ = 1;     ///< the open batch
  uint32_t recorded_ = 0;  ///< dispatches in it
  uint32_t sets_ = 0;      ///< descriptor sets taken from dpool_ in it
  Buf* upload_ = nullptr;  ///< small parameters of the open batch
  bool debug_ = false;
  Buf* errors_ = nullptr;                 ///< debug mode: an error slot per dispatch of the batch
  std::vector<const Pipeline*> checked_;  ///< debug mode: the pipeline of each slot
  size_t upload_used_ = 0;
  std::multimap<size_t, Buf*> free_;  ///< cached buffers by size
  std::vector<Buf*> retired_;         ///< released while the open batch may use them
  std::unordered_map<std::string, std::unique_ptr<Pipeline>> pipelines_;
  int64_t in_use_ = 0, reserved_ = 0, peak_ = 0;
  Stats stats_;
};

}  // namespace kiln::vulkan
