// SPDX-License-Identifier: MIT OR Apache-2.0
// A forward convolution over one image split over the threads (Note [One-image split]).
//
// Note [One-image split]
// One image gives the batch split (batch_chunks) nothing to split, and oneDNN's own threads do
// not help a convolution of a few microseconds inside a model: with a few microseconds of serial
// work between calls, its 2-thread primitives took 15-18 µs where one thread took 12-13 µs
// (oneDNN 2.6, ResNet's 16-64 channel convolutions). So on several threads a forward
// convolution over one image runs as one parallel region in which each thread runs a
// single-threaded primitive (its own cache slot and user scratchpad) over its share of the
// output:
// - its output channels, in whole 16-channel blocks, when there are two blocks or more; the
//   share then runs the epilogue (and a fused max pool) over its channels;
// - else its output rows (2-d, one 16-channel block): the share's own geometry reads the input
//   rows its output rows need, padded as the whole is where it reaches an edge; the epilogue
//   runs after the region.
// With one image the blocked layout holds the channel blocks one after the other and, in a
// block, the rows one after the other, so the shares write one blocked output, kept whole (Note
// [Kept blocked outputs]) for the next convolution or max pool. Each output element is summed
// by the same kernel over the same inputs as without the split: the bits are those of one
// thread. A share reads the input's kept form when there is one (its rows of it, for a row
// share), else reorders (or copies) what it reads of the plain input.
#include "backends/cpu/conv_onednn_entry.h"

#if KILN_WITH_ONEDNN
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "backends/cpu/conv_onednn_kept.h"
#include "core/parallel.h"
#include "kiln/device.h"

namespace kiln::cpu::conv {

namespace dnn {

namespace {

/// Convolutions over one image of at least this much work split (measured on ResNet's 295k to
/// 590k multiply-add convolutions); larger ones keep oneDNN's own split over its threads (the
/// one-image split was not measured faster there).
constexpr double kMinSplitMacs = 1 << 18;
constexpr double kMaxSplitMacs = 1 << 24;
/// Each share gets at least this much work (on many cores, fewer shares than threads).
constexpr double kMinShareMacs = 1 << 17;
/// The cache slots of the shares' entries start here (batch chunks use 1, 2, ...).
constexpr int kSplitSlots = 1 << 10;
std::atomic<int64_t> g_splits{0};

/// How a one-image convolution splits: `parts` shares (0: it does not), of rows or channels.
struct Split {
  int parts = 0;
  bool rows = false;
};

/// KILN_CONV_SPLIT=0 turns the split off (read once; measurements).
bool split_on() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_CONV_SPLIT");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

Split plan_split(const Geom& g) {
  const int nt = num_threads();
  const double macs = static_cast<double>(g.O) * g.out_size() * g.C * g.k_size();
  if (g.N != 1 || nt <= 1 || g.groups != 1 || g.O % 16 != 0 || macs < kMinSplitMacs || macs >= kMaxSplitMacs ||
      !keep_on() || !split_on())
    return {};
#ifdef _OPENMP
  if (omp_in_parallel()) return {};
#endif
  const int64_t most = std::min<int64_t>(nt, static_cast<int64_t>(macs / kMinShareMacs));
  if (g.O >= 32) {
    for (int parts = static_cast<int>(std::min<int64_t>(most, g.O / 16)); parts >= 2; --parts)
      if (g.O % (16 * parts) == 0) return {parts, false};
    return {};
  }
  const int parts = static_cast<int>(std::min<int64_t>(most, g.out[1]));
  return g.nsp == 2 && parts >= 2 ? Split{parts, true} : Split{};
}

/// Output rows [r0, r1) of share p of a row split.
void share_rows(const Geom& g, const Split& s, int64_t p, int64_t& r0, int64_t& r1) {
  r0 = g.out[1] * p / s.parts;
  r1 = g.out[1] * (p + 1) / s.parts;
}

/// Share p's geometry; in_lo: the first input row it reads (0 for a channel share).
Geom share_geom(const Geom& g, const Split& s, int64_t p, int64_t& in_lo) {
  Geom gp = g;
  in_lo = 0;
  if (!s.rows) {
    gp.O = g.O / s.parts;
    return gp;
  }
  int64_t r0, r1;
  share_rows(g, s, p, r0, r1);
  const int64_t lo = r0 * g.stride[1] - g.pad[1], hi = (r1 - 1) * g.stride[1] - g.pad[1] + (g.k[1] - 1) * g.dil[1];
  in_lo = std::max<int64_t>(0, lo);
  gp.in[1] = std::min<int64_t>(g.in[1] - 1, hi) - in_lo + 1;  // < 1: the share reads padding only
  gp.out[1] = r1 - r0;
  gp.pad[1] = in_lo - lo;
  return gp;
}

/// g's 16-channel blocked layout of one image with these spatial dims.
memory::desc blocked_of(const Geom& g, int64_t channels, const int64_t* sp) {
  memory::dims d{1, channels};
  for (auto v : sp_dims(g, sp)) d.push_back(v);
  return blocked16(d);
}

/// Runs the shares of g (split s) from x into `out` (g's output, blocked by 16 channels), then
/// share(p) for each share in the region (may be empty); false, doing nothing, when an entry
/// is missing or its layouts do not fit.
bool run_shares(const Geom& g, const Split& s, const float* x, const float* w, const float* b, const Stamps& st,
                float* out, const std::function<void(int64_t)>& share) {
  const auto parts = static_cast<size_t>(s.parts);
  std::vector<Geom> gs(parts);
  std::vector<int64_t> in_lo(parts);
  for (size_t p = 0; p < parts; ++p) {
    gs[p] = share_geom(g, s, static_cast<int64_t>(p), in_lo[p]);
    if (gs[p].in[1] < 1) return false;
  }
  std::vector<Entry*> es;
  {
    onednn::ThreadScope scope(1);  // single-threaded primitives, created outside the region
    if (!stable_lookups(es, parts, [&](size_t i) {
          return lookup(Kind::Fwd, gs[i], b != nullptr, 1, kSplitSlots + static_cast<int>(i));
        }))
      return false;
  }
  for (Entry* e : es)
    if (!e->out_blocked16) return false;
  // A row share reads rows of the kept form only where one block holds all channels.
  std::shared_ptr<const Kept> kx =
      es[0]->a.reorder && (!s.rows || g.C == 16) ? find_kept(st.x, x, blocked_of(g, g.C, g.in)) : nullptr;
  for (size_t p = 0; p < parts && kx; ++p)
    if (!(es[p]->a.used == (s.rows ? blocked_of(gs[p], g.C, gs[p].in) : kx->md))) kx = nullptr;
  const int64_t kc = g.C * g.k_size(), row_in = g.in[2] * 16, row_out = g.out[2] * 16;
  // A registered weight's shares are not registered themselves: they are kept by its id.
  const uint64_t reg = constant_id(w), w_id = reg ? reg : st.w;
  parallel_for(s.parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      Entry* e = es[static_cast<size_t>(p)];
      const Geom& gp = gs[static_cast<size_t>(p)];
      const int64_t lo = in_lo[static_cast<size_t>(p)];
      int64_t r0 = 0, r1 = 0;
      if (s.rows) share_rows(g, s, p, r0, r1);
      std::lock_guard<std::mutex> lock(e->mu);
      if (!e->split_mem) e->split_mem = memory(e->c.used, onednn::engine(), out);
      e->split_mem.set_data_handle(out + (s.rows ? r0 * row_out : p * gp.O * g.out_size()));
      memory src;
      if (kx && s.rows) {
        if (!e->split_in) e->split_in = memory(e->a.used, onednn::engine(), const_cast<float*>(kx->buf.data()));
        e->split_in.set_data_handle(const_cast<float*>(kx->buf.data()) + lo * row_in);
        src = e->split_in;
      } else if (kx) {
        src = kx->mem;
      } else if (s.rows) {  // this share's rows of every channel, plain, then as the primitive wants
        const int64_t n = gp.in[1] * g.in[2];
        e->split_rows.resize(static_cast<size_t>(g.C * n));
        for (int64_t c = 0; c < g.C; ++c)
          std::memcpy(e->split_rows.data() + c * n, x + (c * g.in[1] + lo) * g.in[2], static_cast<size_t>(n) * 4);
        src = e->a.in(e->split_rows.data());
      } else {
        src = e->a.in(x);
      }
      const float* wp = s.rows ? w : w + p * gp.O * kc;
      const float* bp = b && !s.rows ? b + p * gp.O : b;
      exec_fwd(e, gp, src, wp, bp, e->split_mem, w_id);
      onednn::stream().wait();
      if (share) share(p);
    }
  });
  g_splits.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool run_fwd_split(const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post,
                   const Stamps& st) {
  const Split s = plan_split(g);
  if (!s.parts) return false;
  const memory::desc whole = blocked_of(g, g.O, g.out);
  std::shared_ptr<const Kept> kr = post.residual ? find_kept(st.residual, post.residual, whole) : nullptr;
  std::shared_ptr<Kept> out = spare_kept(whole);
  const int64_t plane = g.out_size(), cb = g.O / 16;
  // The epilogue over channel blocks [c0, c1), positions [q0, q1): on the blocked form, writing
  // the plain output in the same pass, or on the plain output when the residual has only a plain
  // form (then over whole planes).
  const bool plain_residual = post.residual && !kr;
  auto epilogue = [&](int64_t c0, int64_t c1, int64_t q0, int64_t q1) {
    if (plain_residual) {
      unblock16_f32(out->buf.data(), c0, c1, plane, y);
      post_planes(y, c0 * 16, c1 * 16, g.O, plane, post);
    } else {
      post_blocks(out->buf.data(), kr ? kr->buf.data() : nullptr, c0, c1, g.O, plane, post, y, q0, q1);
    }
  };
  const int64_t per = cb / s.parts;
  std::function<void(int64_t)> share = [&](int64_t p) {
    if (!s.rows) return epilogue(p * per, (p + 1) * per, 0, plane);
    int64_t r0, r1;
    share_rows(g, s, p, r0, r1);
    epilogue(0, cb, r0 * g.out[2], r1 * g.out[2]);
  };
  if (!run_shares(g, s, x, w, b, st, out->buf.data(), s.rows && plain_residual ? nullptr : share)) return false;
  if (s.rows && plain_residual) epilogue(0, cb, 0, plane);
  keep_form(std::move(out), !post.residual || kr ? st.y : 0, y);
  return true;
}

bool run_maxpool_split(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post,
                       const PoolAfter& pool, float* y, const Stamps& st) {
  const Split s = plan_split(g);
  if (!s.parts) return false;
  const int64_t H = g.out[1], W = g.out[2], cb = g.O / 16, per = cb / s.parts;
  thread_local onednn::Floats conv_buf;  // the blocked conv output, read only by the pool
  conv_buf.resize(static_cast<size_t>(g.O * g.out_size() + 16));
  float* const conv_out = conv_buf.data();  // the shares see the calling thread's buffer
  std::shared_ptr<Kept> pooled = spare_kept(blocked16({1, g.O, pool.out[0], pool.out[1]}));
  // post over channel blocks [c0, c1), positions [q0, q1); the pool and its plain output over
  // blocks [c0, c1), pooled rows [o0, o1).
  auto epilogue = [&](int64_t c0, int64_t c1, int64_t q0, int64_t q1) {
    post_blocks(conv_out, nullptr, c0, c1, g.O, H * W, post, nullptr, q0, q1);
  };
  auto pool_rows = [&](int64_t c0, int64_t c1, int64_t o0, int64_t o1) {
    pool_blocks(conv_out, H, W, pool, pooled->buf.data(), y, c0, c1, o0, o1);
  };
  std::function<void(int64_t)> share = [&](int64_t p) {
    if (s.rows) {  // the pool reads rows of other shares: it waits for the region's end
      int64_t r0, r1;
      share_rows(g, s, p, r0, r1);
      return epilogue(0, cb, r0 * W, r1 * W);
    }
    epilogue(p * per, (p + 1) * per, 0, H * W);
    pool_rows(p * per, (p + 1) * per, 0, pool.out[0]);
  };
  if (!run_shares(g, s, x, w, b, st, conv_out, share)) return false;
  if (s.rows)
    parallel_for(s.parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) pool_rows(0, cb, pool.out[0] * p / s.parts, pool.out[0] * (p + 1) / s.parts);
    });
  keep_form(std::move(pooled), st.y, y);
  return true;
}

}  // namespace dnn

int64_t one_image_splits() { return dnn::g_splits.load(std::memory_order_relaxed); }

}  // namespace kiln::cpu::conv
#endif
