// SPDX-License-Identifier: MIT OR Apache-2.0
#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace kiln {

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::round_size(size_t n) {
  if (n <= 512) return 512;
  // Size classes 2^k and 1.5 * 2^k keep waste under 33% and make reuse likely.
  size_t p = 1;
  while (p < n) p <<= 1;
  size_t mid = (p >> 1) + (p >> 2);
  return n <= mid ? mid : p;
}

void* CachingAllocator::allocate(size_t nbytes) {
  size_t sz = round_size(nbytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(sz);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      stats_.cached -= static_cast<int64_t>(sz);
      stats_.in_use += static_cast<int64_t>(sz);
      stats_.peak = std::max(stats_.peak, stats_.in_use);
      ++stats_.allocations;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, sz);
  if (!p) {
    empty_cache();
    p = std::aligned_alloc(64, sz);
    if (!p) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use += static_cast<int64_t>(sz);
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  ++stats_.allocations;
  return p;
}

void CachingAllocator::release(void* p, size_t nbytes) noexcept {
  if (!p) return;
  size_t sz = round_size(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  try {
    free_[sz].push_back(p);
  } catch (...) {
    std::free(p);
    stats_.in_use -= static_cast<int64_t>(sz);
    return;
  }
  stats_.in_use -= static_cast<int64_t>(sz);
  stats_.cached += static_cast<int64_t>(sz);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [sz, list] : free_)
    for (void* p : list) std::free(p);
  free_.clear();
  stats_.cached = 0;
}

}  // namespace kiln
