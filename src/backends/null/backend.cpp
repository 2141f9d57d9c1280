// SPDX-License-Identifier: MIT OR Apache-2.0
// The null device: tracks shapes and dtypes only. Buffers have no memory, ops do nothing, and
// every argument check and shape inference of the frontend still runs, so shape logic is tested
// without data (and the fuzz targets run fast).
#include "core/backend.h"

#include "core/registry.h"

namespace kiln {
namespace {

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

Backend* null_backend() {
  static NullBackend* b = new NullBackend();  // never destroyed, like the CPU backend
  return b;
}

void register_null() {
  register_device("null", [] { return Device(null_backend()); });
}

}  // namespace kiln
