// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The cached oneDNN convolution primitives of conv_onednn.cpp, shared with the one-image split
// (conv_onednn_split.cpp): internal to those files.
#include "backends/cpu/conv_impl.h"
#include "backends/cpu/onednn.h"

#if KILN_WITH_ONEDNN
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kiln::cpu::conv::dnn {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class Kind { Fwd, BwdData, BwdWeights };

/// One plain operand and, when the primitive wants another layout, its blocked twin.
struct Operand {
  memory::desc plain, used;
  bool reorder = false;
  std::unique_ptr<dnnl::reorder> to_used, to_plain;
  onednn::Floats buf;  // blocked staging buffer (when reorder)

  /// `attr`: user-managed scratchpad for primitives run on several threads at once; such a
  /// reorder must need no scratchpad (throws dnnl::error, so the entry is not used).
  void init(const memory::desc& p, const memory::desc& u, bool input, const dnnl::primitive_attr& attr = {}) {
    plain = p;
    used = u;
    reorder = !(p == u);
    if (!reorder) return;
    auto& eng = onednn::engine();
    auto pd = input ? dnnl::reorder::primitive_desc(eng, plain, eng, used, attr)
                    : dnnl::reorder::primitive_desc(eng, used, eng, plain, attr);
    if (pd.scratchpad_desc().get_size() != 0 && attr.get_scratchpad_mode() == dnnl::scratchpad_mode::user)
      throw dnnl::error(dnnl_unimplemented, "reorder needs a scratchpad");
    if (input)
      to_used = std::make_unique<dnnl::reorder>(pd);
    else
      to_plain = std::make_unique<dnnl::reorder>(pd);
    buf.resize(used.get_size() / sizeof(float) + 16);
  }
  // Memory objects made once (creating them costs about a microsecond each, which matters for
  // small convolutions); the user one gets the caller's pointer on each call.
  memory user_mem, used_mem;
  memory& user(const float* p) {
    if (!user_mem) user_mem = memory(plain, onednn::engine(), const_cast<float*>(p));
    user_mem.set_data_handle(const_cast<float*>(p));
    return user_mem;
  }
  memory& staged() {
    if (!used_mem) used_mem = memory(used, onednn::engine(), buf.data());
    return used_mem;
  }
  /// The memory the primitive reads: the user buffer, or the reordered copy.
  memory in(const float* user_ptr) {
    memory& um = user(user_ptr);
    if (!reorder) return um;
    onednn::reorder(*to_used, um, staged());
    return staged();
  }
  /// The memory the primitive writes; finish() copies it to the user buffer.
  memory out(float* user_ptr) {
    if (!reorder) return user(user_ptr);
    return staged();
  }
  void finish(const memory& m, float* user_ptr) {
    if (!reorder) return;
    onednn::reorder(*to_plain, m, user(user_ptr));
  }
};

/// A weight reordered into the primitive's layout, valid while its id is: a constant's
/// registration, or the content stamp of an eager weight (TensorDesc::stamp).
struct Packed {
  uint64_t id = 0;
  bool counted = false;  // its bytes count against kPackedBudget (stamped, not registered)
  onednn::Floats buf;
  memory mem;
  size_t bytes() const { return buf.size() * sizeof(float); }
};

// Reordered copies of eager weights kept across calls, over all entries: inference with the
// same weights reorders each once; past the budget a weight is reordered on every call again.
constexpr size_t kPackedBudget = size_t{256} << 20;
constexpr size_t kMaxPackedPerEntry = 64;
inline std::atomic<size_t> g_packed_bytes{0};

/// The registration id of `p` (register_constant), 0 when it is not a registered constant.
uint64_t constant_id(const void* p);

struct Entry {
  std::mutex mu;
  std::unique_ptr<dnnl::primitive> prim;
  Operand a, b, c;  // fwd: src, wei, dst; bwd-data: diff_dst, wei, diff_src; bwd-w: src, diff_dst, diff_wei
  bool has_bias = false;
  memory bias_mem;
  std::unordered_map<const float*, Packed> packed;         // constant weights by pointer
  std::vector<char, onednn::Aligned64<char>> scratch_buf;  // user scratchpad (batch-chunk entries)
  memory scratch;                                          // over scratch_buf, when there is one
  bool out_blocked16 = false;                              // a forward conv's dst is blocked by 16 channels (blocked16)
  // A one-image split's share (conv_onednn_split.cpp): its part of the shared blocked output,
  // its rows of the input's kept form, and its rows of a plain input.
  memory split_mem, split_in;
  onednn::Floats split_rows;

  /// The weights operand. A registered constant is reordered once and kept (until its
  /// registration changes). A weight whose content stamp is known (`stamp`, 0: not known) is kept
  /// from its second call with the same stamp on: weights read once per value (training, whose
  /// step writes them) are not copied, weights read again and again (inference) are reordered
  /// once.
  memory weights(const float* w, uint64_t stamp) {
    if (!b.reorder) return b.in(w);
    const uint64_t reg = constant_id(w), id = reg ? reg : stamp;
    if (!id) return b.in(w);
    auto it = packed.find(w);
    if (it != packed.end() && it->second.id == id && it->second.mem) return it->second.mem;
    if (it == packed.end()) {
      if (packed.size() >= kMaxPackedPerEntry) drop_packed();  // bound stale records
      it = packed.emplace(w, Packed{}).first;
    } else if (it->second.id != id) {
      release(it->second);
    } else if (!reg) {
      return pack(it->second, w, id, true);  // the second call with these contents
    }
    it->second.id = id;
    return reg ? pack(it->second, w, id, false) : b.in(w);
  }
  /// Reorders w into p's own buffer (counted: against kPackedBudget; over it, the staging
  /// buffer serves this call and nothing is kept).
  memory pack(Packed& p, const float* w, uint64_t id, bool counted) {
    const size_t n = b.used.get_size() / sizeof(float) + 16;
    if (counted && g_packed_bytes.fetch_add(n * sizeof(float)) + n * sizeof(float) > kPackedBudget) {
      g_packed_bytes.fetch_sub(n * sizeof(float));
      return b.in(w);
    }
    p.id = id;
    p.counted = counted;
    p.buf.resize(n);
    p.mem = memory(b.used, onednn::engine(), p.buf.data());
    onednn::reorder(*b.to_used, b.user(w), p.mem);
    return p.mem;
  }
  static void release(Packed& p) {
    if (p.counted) g_packed_bytes.fetch_sub(p.bytes());
    p.counted = false;
    onednn::Floats().swap(p.buf);
    p.mem = memory();
  }
  void drop_packed() {
    for (auto& [ptr, p] : packed) release(p);
    packed.clear();
  }
};

memory::dims sp_dims(const Geom& g, const int64_t* v);

/// The cached entry for this problem (created on first use); null when oneDNN cannot run it.
/// `slot` tells apart entries of the same problem used at the same time (batch chunks).
Entry* lookup(Kind kind, const Geom& g, bool bias, int nt, int slot = 0);

/// post applied to planes [p0, p1) of a convolution's output y [N, O, plane] (plane p is channel
/// p % O; the residual laid out as y); serial.
void post_planes(float* y, int64_t p0, int64_t p1, int64_t O, int64_t plane, const PostOp& post);

/// Executes e's forward primitive from src into dst (under e's lock; the caller waits).
void exec_fwd(Entry* e, const Geom& g, const memory& src, const float* w, const float* b, const memory& dst,
              uint64_t w_stamp);

/// post_blocked over blocks [b0, b1) of y (block b is channels 16 (b % (O / 16)) + [0, 16)), positions
/// [q0, q1) of each (q1 < 0: all), serial; plain may be null.
void post_blocks(float* y, const float* r, int64_t b0, int64_t b1, int64_t O, int64_t plane, const PostOp& post,
                 float* plain, int64_t q0 = 0, int64_t q1 = -1);

/// Looks up `count` entries through get(i); a lookup may clear the cache (and so invalidate
/// entries looked up before it), so the lookups repeat until a pass finds them all unchanged.
template <class Get>
bool stable_lookups(std::vector<Entry*>& es, size_t count, const Get& get) {
  es.assign(count, nullptr);
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<Entry*> again(count);
    for (size_t i = 0; i < count; ++i) again[i] = get(i);
    for (auto* e : again)
      if (!e) return false;
    if (again == es) return true;
    es = std::move(again);
  }
  return false;
}

/// A forward conv over one image split over the threads (Note [One-image split]), reading and
/// keeping blocked forms as run_fwd_kept does; false, doing nothing, when it does not apply.
bool run_fwd_split(const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post,
                   const Stamps& st);
/// onednn_forward_maxpool over one image split over the threads (pool fits, post has no
/// residual); false, doing nothing, when it does not apply.
bool run_maxpool_split(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post,
                       const PoolAfter& pool, float* y, const Stamps& st);

}  // namespace kiln::cpu::conv::dnn
#endif
