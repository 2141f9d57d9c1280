// SPDX-License-Identifier: MIT OR Apache-2.0
// The kept blocked forms of convolution outputs (conv_onednn_kept.h).
//
// Note [Kept blocked outputs]
// A forward convolution whose output oneDNN writes in a blocked 16-channel layout (nChw16c and
// its 1-d / 3-d forms) keeps that blocked form after reordering it to the plain output, keyed on
// the output's content stamp and address (an op's output descriptor carries the stamp of what it
// writes, TensorDesc::stamp). A later convolution or max pool whose input carries the same stamp
// and address, and whose primitive wants the same layout, reads the kept form instead of
// reordering the plain tensor again: the consecutive convolutions of a ResNet-style model
// reorder each activation once instead of twice, and a max pool after a convolution pools the
// blocked form. The epilogue (scale, shift, residual, activation) then runs on the blocked form
// before the reorder, so both forms hold the same values; a residual must have a kept form too,
// else the output keeps nothing. A batch split over the threads (batch_chunks) keeps one form per
// chunk of images, at the chunk's address, which the next split convolution finds chunk by chunk.
// The plain output is always written, by the epilogue's pass over the blocked form (Kiln's own
// 16 x 16 transposes, post_blocked16_f32 / unblock16_f32; a oneDNN reorder call costs 0.4-0.8 µs,
// as much as a small convolution's reorder itself). The kept forms are a cache of at most
// kKeptMax entries and kKeptBytes, the oldest dropped first, their buffers reused. A stamp names contents (renewed by
// every write), so a kept form is never stale.

#include "backends/cpu/conv_onednn_kept.h"

#if KILN_WITH_ONEDNN
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "backends/cpu/conv_impl.h"
#include "backends/cpu/pool_vec.h"
#include "core/parallel.h"

namespace kiln::cpu::conv {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

memory::desc blocked16(const memory::dims& dims) {
  const size_t n = dims.size();
  return memory::desc(dims, dt::f32, n == 3 ? tag::nCw16c : n == 4 ? tag::nChw16c : tag::nCdhw16c);
}

namespace {

/// KILN_CONV_KEEP=0 or set_keep_blocked(false) turns the kept forms off (measurements, tests).
std::atomic<int> g_keep{-1};
std::atomic<int64_t> g_kept_reads{0};

struct KeptStore {
  std::mutex mu;
  std::deque<std::shared_ptr<Kept>> list;    // oldest first
  std::vector<std::shared_ptr<Kept>> spare;  // dropped entries no reader holds, for reuse
  size_t bytes = 0, spare_bytes = 0;
};

/// Spare buffers kept for reuse, at most kKeptMax of them and this many bytes: an output too
/// large to keep (a pooled batch) is still reused by the next call instead of reallocated.
constexpr size_t kSpareBytes = size_t{256} << 20;

size_t bytes_of(const Kept& e) { return e.buf.size() * sizeof(float); }

/// Offers e's buffer for reuse when no reader holds it and the spares have room (under k.mu).
void offer_spare(KeptStore& k, std::shared_ptr<Kept>&& e) {
  if (e.use_count() != 1 || k.spare.size() >= kKeptMax || k.spare_bytes + bytes_of(*e) > kSpareBytes) return;
  k.spare_bytes += bytes_of(*e);
  k.spare.push_back(std::move(e));
}
KeptStore& kept_store() {
  static KeptStore k;
  return k;
}

}  // namespace

bool keep_on() {
  int v = g_keep.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("KILN_CONV_KEEP");
    v = e && std::strcmp(e, "0") == 0 ? 0 : 1;
    g_keep.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

/// The kept form of the tensor at ptr with this stamp, in layout md; null when there is none.
std::shared_ptr<const Kept> find_kept(uint64_t stamp, const float* ptr, const memory::desc& md) {
  if (!stamp) return nullptr;
  KeptStore& k = kept_store();
  std::lock_guard<std::mutex> l(k.mu);
  for (auto it = k.list.rbegin(); it != k.list.rend(); ++it)
    if ((*it)->stamp == stamp && (*it)->ptr == ptr) {
      if (!((*it)->md == md)) return nullptr;
      g_kept_reads.fetch_add(1, std::memory_order_relaxed);
      return *it;
    }
  return nullptr;
}

/// The kept forms that together hold x [N, C, H, W] (content stamp `stamp`), blocked by 16
/// channels: the whole tensor's, or one per chunk of images (a batch split), in image order; empty
/// when they do not cover it.
std::vector<std::shared_ptr<const Kept>> find_kept_parts(uint64_t stamp, const float* x, int64_t N, int64_t C,
                                                         int64_t H, int64_t W) {
  std::vector<std::shared_ptr<const Kept>> parts;
  if (!stamp) return parts;
  const int64_t image = C * H * W;
  {
    KeptStore& k = kept_store();
    std::lock_guard<std::mutex> l(k.mu);
    for (const auto& e : k.list) {
      if (e->stamp != stamp || e->ptr < x || e->ptr >= x + N * image || (e->ptr - x) % image != 0) continue;
      const memory::dims d = e->md.dims();
      if (d.size() == 4 && d[1] == C && d[2] == H && d[3] == W && e->md == blocked16(d)) parts.push_back(e);
    }
  }
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a->ptr < b->ptr; });
  const float* next = x;
  for (const auto& p : parts) {
    if (p->ptr != next) return {};
    next += p->md.dims()[0] * image;
  }
  if (next != x + N * image) return {};
  g_kept_reads.fetch_add(static_cast<int64_t>(parts.size()), std::memory_order_relaxed);
  return parts;
}

/// A Kept whose buffer holds layout md (reused from a dropped one of that layout when there is
/// one), not in the store.
std::shared_ptr<Kept> spare_kept(const memory::desc& md) {
  KeptStore& k = kept_store();
  std::shared_ptr<Kept> r;
  {
    std::lock_guard<std::mutex> l(k.mu);
    for (auto& e : k.spare)
      if (e->md == md) {
        r = std::move(e);
        k.spare_bytes -= bytes_of(*r);
        std::swap(e, k.spare.back());
        k.spare.pop_back();
        break;
      }
  }
  if (!r) {
    r = std::make_shared<Kept>();
    r->md = md;
    r->buf.resize(md.get_size() / sizeof(float) + 16);
  }
  if (!r->mem) r->mem = memory(md, onednn::engine(), r->buf.data());
  return r;
}

/// Adds e (stamp, ptr, md and buf set) to the store, dropping older forms of the same address
/// and the oldest past the bounds.
void keep(std::shared_ptr<Kept> e) {
  KeptStore& k = kept_store();
  std::lock_guard<std::mutex> l(k.mu);
  auto drop = [&k](std::deque<std::shared_ptr<Kept>>::iterator it) {
    k.bytes -= bytes_of(**it);
    offer_spare(k, std::move(*it));
    return k.list.erase(it);
  };
  for (auto it = k.list.begin(); it != k.list.end();) it = (*it)->ptr == e->ptr ? drop(it) : std::next(it);
  k.bytes += bytes_of(*e);
  k.list.push_back(std::move(e));
  while (k.list.size() > kKeptMax || k.bytes > kKeptBytes) drop(k.list.begin());
}

void keep_form(std::shared_ptr<Kept> e, uint64_t stamp, const float* ptr) {
  if (stamp && keep_on() && bytes_of(*e) <= kKeptBytes / 4) {
    e->stamp = stamp;
    e->ptr = ptr;
    return keep(std::move(e));
  }
  KeptStore& k = kept_store();
  std::lock_guard<std::mutex> l(k.mu);
  offer_spare(k, std::move(e));
}

bool onednn_maxpool_kept(const float* x, uint64_t x_stamp, const int64_t (&dims)[4], const PoolAfter& pool, float* y,
                         uint64_t y_stamp) {
  const int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
  if (!x_stamp || !keep_on() || !onednn::enabled() || N < 1 || C % 16 != 0 || !pool_fits(pool, H, W)) return false;
  const std::vector<std::shared_ptr<const Kept>> parts = find_kept_parts(x_stamp, x, N, C, H, W);
  if (parts.empty()) return false;
  const int64_t image_in = C * H * W, image_out = C * pool.out[0] * pool.out[1];
  for (const auto& part : parts) {
    const Kept& k = *part;
    const int64_t n = k.md.dims()[0], n0 = (k.ptr - x) / image_in, planes = n * (C / 16);
    std::shared_ptr<Kept> out = spare_kept(blocked16({n, C, pool.out[0], pool.out[1]}));
    float* yp = y + n0 * image_out;
    // Each share pools its planes and copies them to the plain output while they are in the cache.
    parallel_for(planes, std::max<int64_t>(1, 32768 / (H * W * 16)),
                 [&](int64_t p0, int64_t p1) { pool_blocks(k.buf.data(), H, W, pool, out->buf.data(), yp, p0, p1); });
    keep_form(std::move(out), y_stamp, yp);  // the pooled images of this part
  }
  return true;
}

void set_keep_blocked(bool on) { g_keep.store(on ? 1 : 0, std::memory_order_relaxed); }
int64_t kept_reads() { return g_kept_reads.load(std::memory_order_relaxed); }

}  // namespace kiln::cpu::conv
#endif
