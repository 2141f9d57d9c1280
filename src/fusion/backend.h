// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal to the fusion decorator (fusion.cpp: recording, flushes, cutting groups; group.cpp:
// running a group over its tiles). See Note [Fusion design] in fusion.cpp.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/reduce_full.h"
#include "backends/cpu/vec.h"
#include "core/checked.h"
#include "core/parallel.h"
#include "fusion/fusion.h"
#include "fusion/tiles.h"
#include "ir/attrs.h"
#include "kiln/error.h"

namespace kiln::fusion {

using ir::OpKind;

using cpu::kKernels;

constexpr size_t kMaxStream = 512;      // queued ops before a forced flush
constexpr int64_t kDefaultTile = 4096;  // elements: 16 KB per f32 operand

/// Tile size in elements (KILN_FUSION_TILE overrides it, for measurements).
inline int64_t tile_elems() {
  static const int64_t t = [] {
    const char* e = std::getenv("KILN_FUSION_TILE");
    int64_t v = e ? std::atoll(e) : 0;
    return v >= 64 && v <= (1 << 22) ? v : kDefaultTile;
  }();
  return t;
}
constexpr int64_t kMaxRowLen = 65536;  // longer rows: the row op runs alone
constexpr int64_t kMinElemsPerThread = 32768;
// A product's epilogue runs per row block of about kEpilogueBlock elements (256 KB in f32), for
// results of at least kEpilogueMinBytes (smaller ones stay in the cache between the two anyway).
constexpr int64_t kEpilogueBlock = 65536;
constexpr int64_t kEpilogueMinBytes = int64_t{2} << 20;

inline std::atomic<int> g_enabled{-1};
constexpr int64_t kDefaultSmall = 4096;
inline std::atomic<int64_t> g_small{-1};
inline std::atomic<int64_t> g_jit_min{-1};  // -1: from KILN_FUSION_JIT_MIN on first use
constexpr int64_t kDefaultJitMin = 16384;
alignas(64) inline Stats g_stats;  // updated through std::atomic_ref

inline bool debug_on() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_FUSION_DEBUG");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

inline void dbg(const std::string& s) {
  if (debug_on()) std::fprintf(stderr, "[kiln fusion] %s\n", s.c_str());
}

/// What a fusion Storage's data points to.
struct Buf {
  void* real = nullptr;         ///< host memory from the inner backend, once materialised
  std::shared_ptr<void> owner;  ///< set for host memory not from the inner backend (wrap_host)
  size_t nbytes = 0;
  bool alive = true;  ///< false once its Storage is gone
  uint32_t refs = 0;  ///< queued ops naming it
  // Scratch of one flush, valid while `epoch` equals the flush's (no hash maps on the hot path).
  uint64_t epoch = 0;
  bool needed = false;       ///< read by a later live op
  int64_t last_reader = -1;  ///< stream index of the last op reading it
  // Scratch of one group, valid while `gepoch` equals the group's.
  uint64_t gepoch = 0;
  int64_t producer = -1;  ///< stream index of the group's latest writer
  bool loaded = false, loaded_other = false;
  int32_t step = -1, last_step = -1, sig_writer = -1;
};

inline uint64_t g_epoch = 0, g_gepoch = 0;  // advanced under a backend's lock

inline Buf& fl(Buf* b) {
  if (b->epoch != g_epoch) {
    b->epoch = g_epoch;
    b->needed = false;
    b->last_reader = -1;
  }
  return *b;
}
inline Buf& gr(Buf* b) {
  if (b->gepoch != g_gepoch) {
    b->gepoch = g_gepoch;
    b->producer = -1;
    b->loaded = b->loaded_other = false;
    b->step = b->last_step = b->sig_writer = -1;
  }
  return *b;
}

struct Rec {
  ir::Op op;
  SmallVec<Buf*, 4> in, out;  // inline: no allocation per recorded op
};

inline bool float_or_bool(DType t) { return is_floating(t) || t == DType::Bool; }

/// Why op cannot be a step of an elementwise chain (null: it can).
inline const char* step_refusal(const ir::Op& op) {
  ir::Family f = ir::op_family(op.kind);
  if (f != ir::Family::Unary && f != ir::Family::Binary && f != ir::Family::Ternary) return "not elementwise";
  if (op.kind == OpKind::Bernoulli) return "random (position-dependent)";
  if (op.outputs.size() != 1) return "several outputs";
  if (op.kind != OpKind::Cast) {
    for (auto& d : op.inputs)
      if (!float_or_bool(d.dtype)) return "integer operand";
    if (!float_or_bool(op.outputs[0].dtype)) return "integer result";
  }
  return nullptr;
}

/// Returns false, setting why to msg() when debug output is on (refusals are only formatted
/// for KILN_FUSION_DEBUG: a flush tries many ops against each group).
template <class Msg>
bool refuse(std::string& why, const Msg& msg) {
  if (debug_on()) why = msg();
  return false;
}

inline bool is_row_kind(OpKind k) {
  switch (k) {
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::Prod:
    case OpKind::Var:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::LayerNorm:
      return true;
    default:
      return false;
  }
}

/// Number of trailing dims a row op works on (0: not a trailing-dims row op).
inline int64_t row_dims(const ir::Op& op) {
  const int64_t r = static_cast<int64_t>(op.inputs[0].shape.size());
  if (r == 0) return 0;
  switch (op.kind) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      const int64_t dim = ir::ScanAttrs::decode(op).dim;
      int64_t d = dim < 0 ? dim + r : dim;
      return d == r - 1 ? 1 : 0;
    }
    case OpKind::LayerNorm: {
      const ir::NormAttrs n = ir::NormAttrs::decode(op);
      if (n.groups != 0) return 0;
      return n.ndims >= 1 && n.ndims <= r ? n.ndims : 0;
    }
    default: {
      const Dims dims = ir::ReduceAttrs::decode(op).dims;
      int64_t k = static_cast<int64_t>(dims.size());
      if (k < 1 || k > r) return 0;
      for (int64_t i = 0; i < k; ++i)
        if (dims[static_cast<size_t>(i)] != r - k + i) return 0;
      return k;
    }
  }
}

/// A convolution that may take a fused activation: Conv without one yet (ops.def).
inline bool is_conv_anchor(const ir::Op& op) {
  return op.kind == OpKind::Conv && !ir::ConvAttrs::decode(op).has_epilogue;
}

/// A matrix product that may take an elementwise epilogue: f32 or f64, contiguous result
/// (ops.def: [B, M, N] descriptors).
inline bool is_matmul_anchor(const ir::Op& op) {
  if (op.kind != OpKind::MatMul || op.outputs.size() != 1 || op.outputs[0].shape.size() != 3) return false;
  const DType t = op.outputs[0].dtype;
  if ((t != DType::F32 && t != DType::F64) || !op.outputs[0].is_contiguous()) return false;
  for (const auto& d : op.inputs)
    if (d.dtype != t) return false;
  return true;
}

/// An op queued only for what may follow it (an activation, an epilogue).
inline bool is_anchor(const ir::Op& op) { return is_conv_anchor(op) || is_matmul_anchor(op); }

inline bool recordable(const ir::Op& op) {
  if (!step_refusal(op) || op.kind == OpKind::Fill || is_anchor(op)) return true;
  if (!is_row_kind(op.kind)) return false;
  for (auto& d : op.inputs)
    if (!is_floating(d.dtype)) return false;
  for (auto& d : op.outputs)
    if (!is_floating(d.dtype)) return false;
  return true;
}

inline bool is_identity(const ir::TensorDesc& d, const Shape& s) {
  return d.shape == s && d.strides == contiguous_strides(s);
}
inline bool is_full_contiguous(const ir::TensorDesc& d, const Shape& s) { return d.offset == 0 && is_identity(d, s); }

inline std::string desc_str(const ir::TensorDesc& d) {
  std::ostringstream os;
  os << dtype_name(d.dtype).data() << to_string(d.shape);
  return os.str();
}

// ---- plans ------------------------------------------------------------------------------------

enum class LoadKind : uint8_t { Identity, Scalar, Gather };

/// Where a step input comes from.
struct Src {
  int step = -1;  ///< >= 0: the value of that step
  int load = -1;  ///< >= 0: that memory load
};

struct Load {
  Buf* buf = nullptr;
  ir::TensorDesc desc;
  LoadKind kind = LoadKind::Identity;
  Strides bstrides;  ///< per dim of gshape (Gather)
  Shape gshape;      ///< S with dims merged where the load's strides allow (Gather)
};

/// A group as cut from the stream: indices of its steps (and tail) in the stream.
struct Group {
  std::vector<size_t> steps;
  ptrdiff_t tail = -1;
  Shape S;
  /// The tail is a full Sum / Mean longer than a tile (cpu::full): each tile adds its leaves'
  /// partials, combined after the tiles in the kernel's order (the same bits).
  bool long_tail = false;
};

/// A stage of a row pipeline (rows.cpp): a group (with its tail), a row op alone (`lone`, a
/// stream index), or a Sum / Mean over the rows (`column`, a stream index: leaves per block,
/// folded after the blocks). A per-row group works on one value per row (its shape: the rows).
struct Stage {
  Group g;
  ptrdiff_t lone = -1, column = -1;
  bool per_row = false;
};

/// The cached part of a group: its number and description (for KILN_FUSION_DEBUG).
struct Plan {
  std::string text;
  int64_t id = 0;
};

/// A group compiled to an elementwise program (ok false: some step has no vector form).
struct ProgramCode {
  bool ok = false;
  std::vector<cpu::vec::PInstr> code;
  int nregs = 0;
  size_t nslots = 0;
  std::vector<size_t> stored;  ///< steps stored to memory, in slot order after the loads
  int tail_slot = -1;          ///< slot of the tail input's scratch copy
};

/// Vectors of one group launch, kept by the backend between launches so that a launch does not
/// allocate (only the flushing thread uses them, under the backend's lock).
struct GroupScratch {
  std::vector<char> store, tail_store, f32_step;
  std::string sig;
  std::vector<Load> loads;
  std::vector<std::vector<Src>> src;
  std::vector<int> gather_slot;
  ProgramCode prog;
  // build_program's
  std::vector<cpu::vec::PInstr> ops;
  std::vector<int64_t> last;
  std::vector<int16_t> reg, free_regs;
};

inline std::atomic<int> g_program{-1};  // -1: from KILN_FUSION_PROGRAM on first use

/// Rewrites op, a copy of the row op orig (reducing the trailing k dims of its input, of shape
/// S), to work on `rows` rows of contiguous input and outputs (group.cpp).
void rows_op(ir::Op& op, const ir::Op& orig, const Shape& S, int64_t k, int64_t rows);
/// Compiles the steps of g into w.prog (group.cpp).
void build_program(const std::vector<Rec>& s, const Group& g, int tail_in, GroupScratch& w);
/// The shape-relative signature of a group (group.cpp).
void signature(const std::vector<Rec>& s, const Group& g, const std::vector<char>& store, std::string& os);

// ---- the backend -------------------------------------------------------------------------------

class FusionBackend final : public Backend {
 public:
  explicit FusionBackend(Backend* inner) : inner_(inner), cpu_(inner->type() == DeviceType::CPU && inner->has_data()) {}
  DeviceType type() const override { return inner_->type(); }
  std::string name() const override { return inner_->name() + "+fusion"; }

  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    auto* b = new Buf;
    b->nbytes = nbytes;
    return std::make_shared<Storage>(b, nbytes, this);
  }
  void release(void* data, size_t) noexcept override {
    if (!data) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = static_cast<Buf*>(data);
    b->alive = false;
    if (b->refs == 0) free_buf(b);
  }

  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Rec r;
    r.in.reserve(op.inputs.size());
    for (size_t i = 0; i < op.inputs.size(); ++i) r.in.push_back(buf_of(in[i]));
    for (size_t i = 0; i < op.outputs.size(); ++i) r.out.push_back(buf_of(out[i]));
    const bool lz = lazy(), small = lz && is_small(op);
    // A small convolution or product is not queued for its epilogue: its result feeds small ops.
    const bool rec = lz && recordable(op) && !(small && is_anchor(op));
    if (rec && small && independent(r)) {
      bump(&Stats::small_direct);
      run_single(op, r);
      return;
    }
    if (!rec) {
      // An op that cannot be queued runs now; the queue runs first unless no queued op names
      // its buffers (then the order between them changes nothing).
      const bool first = !stream_.empty() && !independent(r);
      if (lz) note_eager(op, first);
      if (first) flush("cannot be queued", &op);
      run_single(op, r);
      return;
    }
    for (Buf* b : r.in) ++b->refs;
    for (Buf* b : r.out) ++b->refs;
    Rec& q = stream_.emplace_back();  // the op is copied once, into its place in the stream
    q.op = op;
    q.in = r.in;
    q.out = r.out;
    bump(&Stats::recorded);
    if (stream_.size() >= kMaxStream) flush("stream length limit");
  }

  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = buf_of(&dst);
    if (b->refs) flush("write into a queued buffer");
    materialise(b);
    Storage tmp(b->real, b->nbytes, nullptr);
    inner_->write(tmp, off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = buf_of(&src);
    if (b->refs) flush("read");
    materialise(b);
    Storage tmp(b->real, b->nbytes, nullptr);
    inner_->read(tmp, off, dst, n);
  }
  bool has_data() const override { return inner_->has_data(); }
  void* host_data(Storage& s) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = buf_of(&s);
    if (b->refs) flush("host access");
    materialise(b);
    return inner_->type() == DeviceType::CPU ? b->real : nullptr;
  }
  std::shared_ptr<Storage> wrap_host(void* data, size_t nbytes, std::shared_ptr<void> owner) override {
    if (inner_->type() != DeviceType::CPU || !inner_->has_data()) return nullptr;
    auto* b = new Buf;
    b->nbytes = nbytes;
    b->real = data;
    b->owner = owner ? std::move(owner) : std::make_shared<int>(0);
    return std::make_shared<Storage>(b, nbytes, this);
  }
  void sync() override {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      flush("sync");
    }
    inner_->sync();
  }
  /// Memory is allocated when a value is computed, so queued work runs first.
  MemoryStats memory_stats() const override {
    const_cast<FusionBackend*>(this)->flush_all("memory_stats");
    return inner_->memory_stats();
  }
  void reset_peak_memory() override { inner_->reset_peak_memory(); }
  void empty_cache() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush("empty_cache");
    inner_->empty_cache();
  }
  Backend* inner() override { return inner_; }
  Layer layer() const override { return Layer::Fusion; }
  Backend* rewrap(Backend* inner) override { return fusion::fusion_backend(inner); }

  void flush_all(const char* why) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush(why);
  }

 private:
  bool lazy() const { return enabled() && cpu_; }

  /// Whether every result of op has at most small_limit() elements (a limit of 0: never).
  /// Inputs may be larger (a reduction, a convolution's weights): what fusion keeps out of
  /// memory is the results passed between ops.
  static bool is_small(const ir::Op& op) {
    const int64_t lim = small_limit();
    if (lim <= 0) return false;
    for (const auto& d : op.outputs)
      if (d.numel() > lim) return false;
    // A row op over the trailing dims of a large input is queued: it may lead a row pipeline.
    return !is_row_kind(op.kind) || op.inputs.empty() || op.inputs[0].numel() <= lim || row_dims(op) == 0;
  }
  /// Whether no queued op names a buffer of r: running r ahead of the queue changes nothing.
  static bool independent(const Rec& r) {
    for (Buf* b : r.in)
      if (b->refs) return false;
    for (Buf* b : r.out)
      if (b->refs) return false;
    return true;
  }

  Buf* buf_of(const Storage* s) {
    KILN_CHECK(s->backend == this && s->data != nullptr, "fusion",
               "a buffer of another device reached the fusion decorator");
    return static_cast<Buf*>(s->data);
  }

  static void bump(int64_t Stats::*field, int64_t n = 1) {
    std::atomic_ref<int64_t>(g_stats.*field).fetch_add(n, std::memory_order_relaxed);
  }

  void note_eager(const ir::Op& op, bool flushes) {
    bump(&Stats::eager);
    if (debug_on()) {
      const char* w = step_refusal(op);
      std::string why = is_row_kind(op.kind) ? "row op on a non-float dtype" : w ? w : "";
      dbg("not queued: " + std::string(ir::op_name(op.kind)) + " (" + why + "); runs now" +
          (flushes           ? ", after flushing " + std::to_string(stream_.size()) + " queued ops"
           : stream_.empty() ? ""
                             : ", ahead of " + std::to_string(stream_.size()) + " independent queued ops"));
    }
  }

  void free_buf(Buf* b) noexcept {
    if (b->real && !b->owner) inner_->release(b->real, b->nbytes);
    delete b;
  }

  void materialise(Buf* b) {
    if (b->real || b->nbytes == 0) return;
    b->real = inner_->allocate_memory(b->nbytes);  // given back in free_buf
  }

  /// Runs op now on the inner backend over the buffers of r (r.op is not read).
  void run_single(const ir::Op& op, const Rec& r) {
    if (cpu_) {  // what CpuBackend::execute does, without Storage records of the memory
      SmallVec<void*, 4> in, out;
      for (Buf* b : r.in) {
        materialise(b);
        in.push_back(b->real);
      }
      for (Buf* b : r.out) {
        materialise(b);
        out.push_back(b->real);
      }
      kKernels[static_cast<size_t>(op.kind)](op, in.data(), out.data());
      return;
    }
    // Storages of the inner backend over the buffers' memory: inline for up to 8 (no allocation
    // per op), in a deque beyond that (Storage cannot move; an empty deque allocates, so it is
    // made only when needed).
    std::optional<Storage> inline_tmp[8];
    size_t used = 0;
    std::optional<std::deque<Storage>> more;
    auto wrap = [&](Buf* b) -> Storage* {
      materialise(b);
      if (used < std::size(inline_tmp)) return &inline_tmp[used++].emplace(b->real, b->nbytes, nullptr);
      if (!more) more.emplace();
      return &more->emplace_back(b->real, b->nbytes, nullptr);
    };
    SmallVec<Storage*, 4> in, out;
    for (Buf* b : r.in) in.push_back(wrap(b));
    for (Buf* b : r.out) out.push_back(wrap(b));
    inner_->execute(op, in.data(), out.data());
  }

  /// Runs the queue. why: the reason, for debug output ("op <kind> <why>" when `op` is given).
  void flush(const char* why, const ir::Op* op = nullptr) {
    if (stream_.empty()) return;
    // The queue's storage is recycled (a spare vector with its capacity), not reallocated.
    std::vector<Rec> s = std::move(stream_);
    stream_ = std::move(spare_);
    stream_.clear();
    if (stream_.capacity() < kMaxStream) stream_.reserve(kMaxStream);
    bump(&Stats::flushes);
    if (debug_on())
      dbg("flush (" + (op ? "op " + std::string(ir::op_name(op->kind)) + " " : std::string()) + why +
          "): " + std::to_string(s.size()) + " queued ops");
    // Each op's buffer references are dropped as soon as it has run (release), so memory of
    // values that die inside the stream goes back to the allocator for the ops after them; the
    // rest (an exception, a nested flush) are dropped at the end.
    std::vector<char> released(s.size(), 0);
    struct Drop {
      FusionBackend* self;
      std::vector<Rec>& s;
      std::vector<char>* saved;
      ~Drop() {
        for (size_t q = 0; q < s.size(); ++q) self->release(s, q);
        self->released_ = saved;
        s.clear();
        if (self->spare_.capacity() < s.capacity()) self->spare_ = std::move(s);
      }
    } drop{this, s, released_};
    released_ = &released;
    // Queued work completes at a sync point: a buffer that cannot be allocated now is reported
    // as "[sync] out of memory ..." unless a user op (whose call flushed) is already named.
    detail::OpScope scope("sync");
    run_stream(s);
  }

  /// Drops record q's buffer references (it has run, or is dead); its buffers may be freed.
  void release(const std::vector<Rec>& s, size_t q) noexcept {
    if (!released_ || (*released_)[q]) return;
    (*released_)[q] = 1;
    for (Buf* b : s[q].in) unref(b);
    for (Buf* b : s[q].out) unref(b);
  }

  void unref(Buf* b) noexcept {
    if (--b->refs == 0 && !b->alive) free_buf(b);
  }

  void run_stream(const std::vector<Rec>& s);
  void run_ops(const std::vector<Rec>& s, std::vector<size_t> order);
  size_t try_conv_epilogue(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head);
  size_t cut_group(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t start, Group& g,
                   std::vector<size_t>& hoisted, std::string& why, bool hoist = true);
  bool epilogue_fits(const std::vector<Rec>& s, size_t i, const Group& g) const;
  void run_matmul_rows(const Rec& mm, int64_t row0, int64_t row1, void* dst);
  bool try_add_step(const std::vector<Rec>& s, size_t j, Group& g, std::string& why);
  bool try_tail(const std::vector<Rec>& s, size_t j, Group& g, std::string& why);
  /// Runs g's tiles over the elements [e0, e1) (whole rows of a row pipeline).
  using RangeFn = std::function<void(int64_t e0, int64_t e1)>;
  /// With `then`, g is set up but not run: then(f) gets the function that runs g's tiles over a
  /// range of elements (a stage of a row pipeline; group.cpp). `last`: no later stage reads its
  /// results (large ones may bypass the caches).
  void run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul = nullptr,
                 const std::function<void(const RangeFn&)>* then = nullptr, bool last = true);
  size_t try_row_pipeline(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head, const Group* first,
                          size_t end);
  void run_row_pipeline(const std::vector<Rec>& s, const std::vector<Stage>& stages, const Shape& S, int64_t k);

  Backend* inner_;
  const bool cpu_;  ///< the inner backend is the CPU with data: ops may be queued; run_single calls its kernels
  std::vector<char>* released_ = nullptr;  ///< per record of the stream being flushed
  std::recursive_mutex mu_;
  std::vector<Rec> stream_, spare_;  // the queue, and storage for the next one
  /// Where tiles find b's memory: its host memory, or for a value internal to the row pipeline
  /// being run (internal_), this thread's block of it (t_block_bases: addressed as the whole
  /// buffer would be, valid over the block's elements only).
  char* base_of(const Buf* b) const {
    for (size_t j = 0; j < internal_.size(); ++j)
      if (internal_[j] == b) return t_block_bases[j];
    return static_cast<char*>(b->real);
  }
  bool is_internal(const Buf* b) const { return std::find(internal_.begin(), internal_.end(), b) != internal_.end(); }
  /// Materialises b unless it lives in per-thread blocks of a row pipeline.
  void materialise_unless_internal(Buf* b) {
    if (!is_internal(b)) materialise(b);
  }
  std::vector<Buf*> internal_;  ///< values a row pipeline keeps in per-thread blocks (rows.cpp)
  static inline thread_local std::vector<char*> t_block_bases;
  std::deque<GroupScratch> gs_;  ///< one per stage being set up (row pipelines nest run_group)
  size_t depth_ = 0;             ///< stages set up and not yet run
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
  struct GroupRun;  ///< one run_group call: its setup and tile loop (group.cpp)
};

}  // namespace kiln::fusion
