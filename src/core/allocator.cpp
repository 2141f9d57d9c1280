// SPDX-License-Identifier: MIT OR Apache-2.0
#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/checked.h"
#include "kiln/error.h"

namespace kiln {

CachingAllocator::~CachingAllocator() { empty_cache(); }

namespace detail {
namespace {
thread_local const char* tl_op = nullptr;
}  // namespace
OpScope::OpScope(const char* op) noexcept : prev_(tl_op) {
  if (!tl_op) tl_op = op;  // the outermost scope names the op the user called
}
OpScope::~OpScope() { tl_op = prev_; }
const char* OpScope::current(const char* fallback) noexcept { return tl_op ? tl_op : fallback; }
}  // namespace detail

namespace {
/// Requests above this are refused without asking the system (no address space holds them, and
/// the size classes above it would overflow size_t): 2^62 with a 64-bit size_t, 2^30 on wasm32.
constexpr size_t kMaxRequest = size_t{1} << (sizeof(size_t) * 8 - 2);

[[noreturn]] void throw_out_of_memory(size_t nbytes, const MemoryStats& st) {
  detail::MsgBuilder m;
  m << "[" << detail::OpScope::current("allocate") << "] out of memory: cannot allocate "
    << static_cast<unsigned long>(nbytes) << " bytes on cpu, even after emptying the allocator's cache "
    << "(memory_stats: " << static_cast<long long>(st.in_use) << " bytes in use, " << static_cast<long long>(st.cached)
    << " cached, peak " << static_cast<long long>(st.peak) << ", " << static_cast<long long>(st.allocations)
    << " allocations)";
  detail::throw_error(m.str());
}

/// 64-byte aligned memory of sz bytes (a multiple of 64), or nullptr, never an exception.
void* system_alloc(size_t sz) noexcept {
  if (sz > kMaxRequest) return nullptr;
  return std::aligned_alloc(64, sz);
}
}  // namespace

size_t CachingAllocator::round_size(size_t n) {
  if (n <= 512) return 512;
  if (n > kMaxRequest) return n;  // refused by allocate(); no class above 2^62
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
  void* p = system_alloc(sz);
  if (!p) {
    empty_cache();
    p = system_alloc(sz);
    if (!p) throw_out_of_memory(nbytes, stats());
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
