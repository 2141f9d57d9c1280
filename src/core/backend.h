// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The internal backend interface: every device (and every decorator) implements it.
#include <memory>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/device.h"

namespace kiln {

namespace fusion {
class Executor;
}

/// A buffer owned by a backend. `data` is a host pointer only on host backends (CPU); on other
/// backends it is an opaque handle. Returned to its backend when the last owner drops it.
/// A fresh content stamp (Storage::stamp); never 0.
uint64_t next_stamp() noexcept;

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Backend* backend = nullptr;
  uint64_t version = 0;  ///< bumped by in-place writes (autodiff checks saved tensors against it)
  /// Names the contents: unique across all storages, renewed with every version bump. Kernels
  /// key caches of derived forms (a convolution's reordered weights) on it (TensorDesc::stamp).
  uint64_t stamp = next_stamp();
  /// Set for memory the backend did not allocate (a memory-mapped file): kept alive while the
  /// storage lives and never given to Backend::release.
  std::shared_ptr<void> external;
  Storage(void* d, size_t n, Backend* b) : data(d), nbytes(n), backend(b) {}
  Storage(void* d, size_t n, Backend* b, std::shared_ptr<void> owner)
      : data(d), nbytes(n), backend(b), external(std::move(owner)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

/// Where a backend sits in a device's chain of decorators: each layer wraps the lower ones and
/// appears at most once, so decorators compose in one order whatever order the user asked for
/// them in (`.fusion().autodiff()` == `.autodiff().fusion()`). Autodiff records on the outside,
/// fusion queues below it, the base backend runs. A new decorator takes a rank here.
enum class Layer : uint8_t { Base = 0, Fusion = 1, Autodiff = 2 };

class Backend {
 public:
  virtual ~Backend() = default;
  /// This backend's layer (Base unless it is a decorator).
  virtual Layer layer() const { return Layer::Base; }
  /// A decorator: the same decorator, with the same options, over `inner` instead (used to
  /// rebuild the layers above one that is added or removed). Base backends return nullptr.
  virtual Backend* rewrap(Backend* inner) { return nullptr; }
  virtual DeviceType type() const = 0;
  virtual std::string name() const = 0;
  /// A buffer of at least nbytes (contents undefined).
  virtual std::shared_ptr<Storage> allocate(size_t nbytes) = 0;
  /// Called by ~Storage.
  virtual void release(void* data, size_t nbytes) noexcept = 0;
  /// The memory of a buffer of at least nbytes, for a caller that keeps its own record of it
  /// (a decorator) and gives it back through release(). Default: allocate() with the Storage
  /// record dropped.
  virtual void* allocate_memory(size_t nbytes);
  /// Runs one primitive. inputs[i] / outputs[i] hold the buffers that op.inputs[i] /
  /// op.outputs[i] describe (offsets are in the descriptors). Outputs are allocated by the caller.
  virtual void execute(const ir::Op& op, Storage* const* inputs, Storage* const* outputs) = 0;
  /// Whether this backend runs op itself (per op kind, dtype and attributes). Dispatch runs an
  /// op it does not support on the CPU, with its buffers copied down and its outputs copied up
  /// (execute_op). Default: what the wrapped backend supports, else everything.
  virtual bool supports(const ir::Op& op) { return inner() ? inner()->supports(op) : true; }
  /// Host <-> device byte copies.
  virtual void write(Storage& dst, size_t byte_offset, const void* src, size_t n) = 0;
  virtual void read(const Storage& src, size_t byte_offset, void* dst, size_t n) = 0;
  /// Whether this backend holds real data (false for the null device).
  virtual bool has_data() const { return true; }
  virtual void sync() {}
  virtual MemoryStats memory_stats() const { return {}; }
  virtual void reset_peak_memory() {}
  virtual void empty_cache() {}
  /// What this backend offers the fusion decorator to run fused kernels on its memory
  /// (fusion/executor.h); null: fusion passes every op through unfused.
  virtual fusion::Executor* fusion_executor() { return nullptr; }
  /// Decorators: the wrapped backend (null for a base backend).
  virtual Backend* inner() { return nullptr; }
  /// The autodiff decorator's options (null for every other backend).
  virtual const AutodiffOptions* autodiff_options() const { return nullptr; }
  /// Host memory of `s` (a storage of this backend) for host code to read or write in place,
  /// once the queued work that touches it has run; nullptr when the memory is not host memory.
  /// Decorators ask their inner backend; a base backend answers for CPU memory.
  virtual void* host_data(Storage& s);
  /// A storage of this backend over host memory that `owner` keeps alive (zero-copy loading of
  /// a mapped file); nullptr when this backend cannot use host memory in place.
  virtual std::shared_ptr<Storage> wrap_host(void* data, size_t nbytes, std::shared_ptr<void> owner);
  /// A hint: bytes [byte_offset, byte_offset + nbytes) of `s` (a storage of this backend) hold a
  /// constant that nothing writes until the hint is withdrawn (constant = false), such as a loaded
  /// model's weights. A backend may then prepare derived forms of it once (the CPU reorders such
  /// a convolution weight into oneDNN's layout on its first use) instead of checking for writes.
  /// Decorators pass it to the backend they wrap; a base backend ignores it by default.
  virtual void hint_constant(Storage& s, size_t byte_offset, size_t nbytes, bool constant) {
    if (Backend* b = inner()) b->hint_constant(s, byte_offset, nbytes, constant);
  }
};

/// The owner to give a Storage record over memory that something else owns (a decorator's
/// buffer handed to the backend below it): with `external` set, ~Storage gives nothing back.
const std::shared_ptr<void>& unowned_memory();

class Tensor;
/// Host memory of t's storage (its element 0, not t's: add the storage offset), after queued
/// work on it has run: for host code that reads or writes CPU tensors in place (plain, fused
/// or with autodiff). nullptr for tensors of other devices or without storage.
void* host_storage_data(const Tensor& t);
/// A tensor of `device` viewing `storage` (a storage of that device's backend) with the given
/// shape, strides and offset in elements: for loaders and device moves that share memory
/// instead of copying it. The caller checks that the view fits the storage.
Tensor tensor_over_storage(std::shared_ptr<Storage> storage, const Shape& shape, const Strides& strides, int64_t offset,
                           DType dtype, const Device& device);

/// The process-wide backends (created on first use, never destroyed).
Backend* cpu_backend();
Backend* null_backend();
/// The suite's subset backend: its memory behind opaque handles (never a host pointer the
/// frontend could use), elementwise ops and copies run itself, everything else falls back.
Backend* subset_backend();

/// The chain of d with its `layer` decorator replaced by make(inner) (added where it was
/// missing), or removed when make is null; the layers above are rebuilt over it with rewrap.
Device with_layer(const Device& d, Layer layer, Backend* (*make)(Backend* inner, const void* ctx),
                  const void* ctx = nullptr);
/// The backend of d's `layer` decorator, or nullptr when d has none.
Backend* find_layer(const Device& d, Layer layer);

/// A primitive's form in other primitives: op's outputs computed from tensors over its inputs
/// (on a device without autodiff), each with the dtype and shape of the op's output.
using Composite = std::vector<Tensor> (*)(const ir::Op& op, const std::vector<Tensor>& inputs);
/// The composite form of op, or nullptr when it has none (src/ops/composites.cpp).
Composite composite_of(const ir::Op& op);

/// Runs op on backend b: b->execute when b supports it; else its composite form on b's device
/// when it has one (its pieces run there, falling back one by one as needed); else on the CPU
/// backend with every input and output buffer copied through b's read and write. Both
/// fallbacks are counted in fallback_counts.
void execute_op(Backend* b, const ir::Op& op, Storage* const* inputs, Storage* const* outputs);

}  // namespace kiln
