// SPDX-License-Identifier: MIT OR Apache-2.0
// The table of values that common-subexpression elimination looks equal ops up in: the
// eliminate_common pass and the tracer (which merges an op with an earlier equal one as it
// records it) share it.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernel/ir.h"

namespace kiln::kernel::ir {

/// The pure values seen so far, by everything that makes two ops compute the same value. A
/// chained hash table whose entries form a stack: the entries of a region are dropped when the
/// walk leaves it (a value defined inside an if or loop is not visible after it).
class ValueTable {
 public:
  /// Buckets: a power of two, at least twice the ops (short chains for large kernels too); the
  /// table doubles them when its entries outgrow them (a kernel being traced grows).
  explicit ValueTable(const Kernel& k) : k_(k), head_(std::bit_ceil(std::max<size_t>(64, 2 * k.ops.size())), kNone) {}
  /// The earlier op computing what op `id` computes, kNone if none (then `id` is added).
  uint32_t find_or_add(uint32_t id) { return find_or_add(k_.ops[id], id); }
  /// The same for an op not (yet) in the kernel, to be added as `id`.
  uint32_t find_or_add(const Op& op, uint32_t id) {
    const uint64_t h = hash(op);
    uint32_t& head = head_[h & (head_.size() - 1)];
    for (uint32_t e = head; e != kNone; e = entries_[e].next)
      if (entries_[e].hash == h && same(k_.ops[entries_[e].id], op)) return entries_[e].id;
    entries_.push_back({h, id, head});
    head = static_cast<uint32_t>(entries_.size() - 1);
    if (entries_.size() > head_.size()) grow();
    return kNone;
  }
  size_t mark() const { return entries_.size(); }
  /// Drops the entries added since mark `m` (newest first, so each bucket's head is restored).
  void drop_to(size_t m) {
    while (entries_.size() > m) {
      head_[entries_.back().hash & (head_.size() - 1)] = entries_.back().next;
      entries_.pop_back();
    }
  }

 private:
  void grow() {
    head_.assign(head_.size() * 2, kNone);
    for (uint32_t e = 0; e < entries_.size(); ++e) {  // oldest first: each chain stays newest first
      uint32_t& head = head_[entries_[e].hash & (head_.size() - 1)];
      entries_[e].next = head;
      head = e;
    }
  }
  struct Entry {
    uint64_t hash;
    uint32_t id, next;
  };
  static uint64_t bits(double f) {
    uint64_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  }
  static uint64_t hash(const Op& op) {
    uint64_t h = (static_cast<uint64_t>(op.kind) << 24) ^ (static_cast<uint64_t>(op.attr) << 16) ^
                 (static_cast<uint64_t>(op.type) << 8) ^ op.axis;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 0x9e3779b97f4a7c15ull; };
    mix(op.obj);
    for (uint8_t i = 0; i < op.nin; ++i) mix(op.in[i]);
    mix(bits(op.f));
    mix(static_cast<uint64_t>(op.i));
    return h ^ (h >> 29);
  }
  static bool same(const Op& a, const Op& b) {
    return a.kind == b.kind && a.attr == b.attr && a.type == b.type && a.axis == b.axis && a.obj == b.obj &&
           a.nin == b.nin && std::equal(a.in.begin(), a.in.begin() + a.nin, b.in.begin()) && bits(a.f) == bits(b.f) &&
           a.i == b.i;
  }
  const Kernel& k_;
  std::vector<uint32_t> head_;
  std::vector<Entry> entries_;
};

}  // namespace kiln::kernel::ir
