// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/device.h"

namespace kiln {

/// A caching host allocator: freed blocks are kept in per-size-class free lists and reused.
/// Blocks are 64-byte aligned. Thread-safe.
class CachingAllocator {
 public:
  ~CachingAllocator();
  void* allocate(size_t nbytes);
  void release(void* p, size_t nbytes) noexcept;
  MemoryStats stats() const;
  void reset_peak();
  void empty_cache();
  /// The size class a request of nbytes is served from.
  static size_t round_size(size_t nbytes);

 private:
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  MemoryStats stats_;
};

}  // namespace kiln
