// SPDX-License-Identifier: MIT OR Apache-2.0
// The fusion decorator. See Note [Fusion design].
//
// Note [Fusion design]
// ~~~~~~~~~~~~~~~~~~~~
// A FusionBackend wraps a host backend (the CPU). Its buffers are lazy: a Storage's `data` points
// to a Buf record, whose host memory (`real`) is allocated from the inner backend only when a
// value must exist in memory. Elementwise ops (Unary/Binary/Ternary families, floating or bool
// operands, casts from any dtype) and row ops (Sum/Mean/Max/Min/Prod/Var, Softmax, LogSoftmax,
// LayerNorm) are not run by execute(): they are appended to a stream. Any other op runs at
// once, so errors raised by kernels (index checks...) stay synchronous; the stream is flushed
// first unless no queued op names the op's buffers.
// The stream is also flushed by read (to_vector, item, printing), write into a queued buffer,
// kiln::sync, set_enabled and a length limit (kMaxStream ops). A recordable op on small
// tensors (every result within small_limit() elements) whose buffers no queued op names runs
// at once instead: fusing it would save no memory traffic, and recording and launching cost
// more than running it.
//
// A flush first walks the stream backwards: an op is live when one of its outputs is held by a
// live tensor (the Storage still exists) or read by a later live op; dead ops are dropped. Live
// ops are then cut, in order, into groups: a run of elementwise steps whose outputs are
// contiguous and share one iteration shape S, optionally closed by a row op reducing the trailing
// dims of a value produced in the group. A step input is either a value of an earlier step (read
// through the very descriptor it was written with) or a load from memory (identity layout,
// a single element, or a broadcast/strided gather). A group's value is stored to memory only
// when a live tensor holds its buffer or an op after the group reads it; the others live in
// tile scratch and are never materialised.
//
// A group runs over S in tiles of 4096 elements (whole rows when it has a row op): each
// tile applies every step, in order, by calling the CPU kernel of the op on descriptors of the
// tile (1-d, contiguous or a broadcast element), so each op is described once (in the kernel)
// and results are bitwise those of the unfused ops. Tiles are split over the thread pool; a
// tile's result depends only on its position, so results do not depend on the thread count.
// Plans (the slot mapping and tile ops of a group) are cached by a shape-relative signature:
// op kinds, attributes, dtypes, ranks and broadcast pattern, not sizes.
#include "fusion/fusion.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vec.h"
#include "core/parallel.h"
#include "fusion/tiles.h"
#include "kiln/error.h"

namespace kiln {
namespace fusion {
namespace {

using ir::OpKind;

using cpu::kKernels;

constexpr size_t kMaxStream = 512;      // queued ops before a forced flush
constexpr int64_t kDefaultTile = 4096;  // elements: 16 KB per f32 operand

/// Tile size in elements (KILN_FUSION_TILE overrides it, for measurements).
int64_t tile_elems() {
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

std::atomic<int> g_enabled{-1};
constexpr int64_t kDefaultSmall = 4096;
std::atomic<int64_t> g_small{-1};
alignas(64) Stats g_stats;  // updated through std::atomic_ref

bool debug_on() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_FUSION_DEBUG");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

void dbg(const std::string& s) {
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

uint64_t g_epoch = 0, g_gepoch = 0;  // advanced under a backend's lock

Buf& fl(Buf* b) {
  if (b->epoch != g_epoch) {
    b->epoch = g_epoch;
    b->needed = false;
    b->last_reader = -1;
  }
  return *b;
}
Buf& gr(Buf* b) {
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

bool float_or_bool(DType t) { return is_floating(t) || t == DType::Bool; }

/// Why op cannot be a step of an elementwise chain (null: it can).
const char* step_refusal(const ir::Op& op) {
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

bool is_row_kind(OpKind k) {
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
int64_t row_dims(const ir::Op& op) {
  const int64_t r = static_cast<int64_t>(op.inputs[0].shape.size());
  if (r == 0) return 0;
  switch (op.kind) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      int64_t d = op.attrs.ints[0] < 0 ? op.attrs.ints[0] + r : op.attrs.ints[0];
      return d == r - 1 ? 1 : 0;
    }
    case OpKind::LayerNorm: {
      if (op.attrs.ints.size() > 4 && op.attrs.ints[4] != 0) return 0;
      return op.attrs.ints[0] >= 1 && op.attrs.ints[0] <= r ? op.attrs.ints[0] : 0;
    }
    default: {
      const auto& ints = op.attrs.ints;
      int64_t k = static_cast<int64_t>(ints.size()) - 1;
      if (k < 1 || k > r) return 0;
      for (int64_t i = 0; i < k; ++i)
        if (ints[static_cast<size_t>(i + 1)] != r - k + i) return 0;
      return k;
    }
  }
}

/// A convolution that may take a fused activation: Conv without one yet (ops.def).
bool is_conv_anchor(const ir::Op& op) {
  return op.kind == OpKind::Conv && op.attrs.ints.size() >= 2 &&
         op.attrs.ints.size() == ir::conv_geometry_ints(op.attrs.ints[1]);
}

/// A matrix product that may take an elementwise epilogue: f32 or f64, contiguous result
/// (ops.def: [B, M, N] descriptors).
bool is_matmul_anchor(const ir::Op& op) {
  if (op.kind != OpKind::MatMul || op.outputs.size() != 1 || op.outputs[0].shape.size() != 3) return false;
  const DType t = op.outputs[0].dtype;
  if ((t != DType::F32 && t != DType::F64) || !op.outputs[0].is_contiguous()) return false;
  for (const auto& d : op.inputs)
    if (d.dtype != t) return false;
  return true;
}

/// An op queued only for what may follow it (an activation, an epilogue).
bool is_anchor(const ir::Op& op) { return is_conv_anchor(op) || is_matmul_anchor(op); }

bool recordable(const ir::Op& op) {
  if (!step_refusal(op) || op.kind == OpKind::Fill || is_anchor(op)) return true;
  if (!is_row_kind(op.kind)) return false;
  for (auto& d : op.inputs)
    if (!is_floating(d.dtype)) return false;
  for (auto& d : op.outputs)
    if (!is_floating(d.dtype)) return false;
  return true;
}

bool is_identity(const ir::TensorDesc& d, const Shape& s) { return d.shape == s && d.strides == contiguous_strides(s); }
bool is_full_contiguous(const ir::TensorDesc& d, const Shape& s) { return d.offset == 0 && is_identity(d, s); }

std::string desc_str(const ir::TensorDesc& d) {
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

std::atomic<int> g_program{-1};  // -1: from KILN_FUSION_PROGRAM on first use

/// Compiles the steps of g into prog: loads at first use, one register per live value (freed
/// after its last reader), stores right after the step that makes a stored value.
void build_program(const std::vector<Rec>& s, const Group& g, int tail_in, GroupScratch& w) {
  using cpu::vec::PInstr;
  const std::vector<Load>& loads = w.loads;
  const std::vector<std::vector<Src>>& src = w.src;
  const std::vector<char>& store = w.store;
  ProgramCode& prog = w.prog;
  prog.ok = false;
  prog.tail_slot = -1;
  const size_t ns = g.steps.size(), nl = loads.size();
  std::vector<PInstr>& ops = w.ops;
  ops.assign(ns, PInstr{});
  for (size_t k = 0; k < ns; ++k)
    if (!cpu::vec::program_supports(s[g.steps[k]].op, &ops[k])) return;
  for (const Load& L : loads)
    if (L.desc.dtype != DType::F32 && L.desc.dtype != DType::Bool) return;
  // value ids: loads 0..nl-1, steps nl..nl+ns-1; last reader of each
  std::vector<int64_t>& last = w.last;
  last.assign(nl + ns, -1);
  auto vid = [&](const Src& sr) {
    return sr.step >= 0 ? nl + static_cast<size_t>(sr.step) : static_cast<size_t>(sr.load);
  };
  for (size_t k = 0; k < ns; ++k)
    for (const Src& sr : src[k]) last[vid(sr)] = static_cast<int64_t>(k);
  std::vector<int16_t>&reg = w.reg, &free_regs = w.free_regs;
  reg.assign(nl + ns, -1);
  free_regs.clear();
  int nregs = 0;
  auto alloc = [&]() -> int16_t {
    if (!free_regs.empty()) {
      int16_t r = free_regs.back();
      free_regs.pop_back();
      return r;
    }
    return static_cast<int16_t>(nregs++);
  };
  size_t nstored = 0;
  for (size_t k = 0; k < ns; ++k) nstored += store[k] ? 1 : 0;
  // Loads and stores may use the memory directly when no buffer is both read and written.
  auto stored_buf = [&](const Buf* b) {
    for (size_t k = 0; k < ns; ++k)
      if (store[k] && s[g.steps[k]].out[0] == b) return true;
    return false;
  };
  auto loaded_buf = [&](const Buf* b) {
    for (const Load& L : loads)
      if (L.buf == b) return true;
    return false;
  };
  prog.stored.clear();
  prog.code.clear();
  for (size_t k = 0; k < ns; ++k) {
    PInstr op = ops[k];
    int16_t* operand[3] = {&op.a, &op.b, &op.c};
    for (size_t q = 0; q < src[k].size(); ++q) {
      const size_t v = vid(src[k][q]);
      if (reg[v] < 0) {  // a load, at its first use
        const Load& L = loads[v];
        PInstr ld;
        const bool b = L.desc.dtype == DType::Bool;
        ld.code = L.kind == LoadKind::Scalar ? (b ? PInstr::SplatBool : PInstr::Splat)
                                             : (b ? PInstr::LoadBool : PInstr::Load);
        ld.slot = static_cast<int32_t>(v);
        if (ld.code == PInstr::Load && (L.kind == LoadKind::Gather || !stored_buf(L.buf))) ld.flags = PInstr::kDirect;
        ld.dst = reg[v] = alloc();
        prog.code.push_back(ld);
      }
      *operand[q] = reg[v];
    }
    op.dst = reg[nl + k] = alloc();
    const bool bool_out = s[g.steps[k]].op.outputs[0].dtype == DType::Bool;
    if (store[k] && !bool_out && !loaded_buf(s[g.steps[k]].out[0])) {
      op.flags = PInstr::kDirect;
      op.slot = static_cast<int32_t>(nl + prog.stored.size());
    }
    prog.code.push_back(op);
    for (size_t q = 0; q < src[k].size(); ++q) {  // inputs read for the last time
      const size_t v = vid(src[k][q]);
      if (last[v] == static_cast<int64_t>(k) && reg[v] >= 0) {
        free_regs.push_back(reg[v]);
        reg[v] = -2;  // freed (a value read twice by this step is freed once)
      }
    }
    if (store[k]) {
      PInstr st;
      st.code = bool_out ? PInstr::StoreBool : PInstr::Store;
      st.flags = op.flags;
      st.a = op.dst;
      st.slot = static_cast<int32_t>(nl + prog.stored.size());
      prog.stored.push_back(k);
      prog.code.push_back(st);
    }
    if (static_cast<int>(k) == tail_in) {
      PInstr st;
      st.code = bool_out ? PInstr::StoreBool : PInstr::Store;
      st.a = op.dst;
      st.slot = static_cast<int32_t>(nl + nstored);
      prog.tail_slot = st.slot;
      prog.code.push_back(st);
    }
    if (last[nl + k] < 0) free_regs.push_back(op.dst);  // never read again in the group
  }
  prog.nregs = nregs;
  prog.nslots = nl + nstored + 1;
  prog.ok = true;
}

}  // namespace

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
    r.op = op;
    for (Buf* b : r.in) ++b->refs;
    for (Buf* b : r.out) ++b->refs;
    stream_.push_back(std::move(r));
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
    return true;
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
                   std::vector<size_t>& hoisted, std::string& why);
  bool epilogue_fits(const std::vector<Rec>& s, size_t i, const Group& g) const;
  void run_matmul_rows(const Rec& mm, int64_t row0, int64_t row1, void* dst);
  bool try_add_step(const std::vector<Rec>& s, size_t j, Group& g, std::string& why);
  bool try_tail(const std::vector<Rec>& s, size_t j, Group& g, std::string& why);
  void run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul = nullptr);

  Backend* inner_;
  const bool cpu_;  ///< the inner backend is the CPU with data: ops may be queued; run_single calls its kernels
  std::vector<char>* released_ = nullptr;  ///< per record of the stream being flushed
  std::recursive_mutex mu_;
  std::vector<Rec> stream_, spare_;  // the queue, and storage for the next one
  GroupScratch gs_;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
};

namespace {

/// The shape-relative signature of a group: raw bytes of op kinds, attributes, dtypes, ranks,
/// broadcast pattern, dataflow and store flags (no sizes).
void signature(const std::vector<Rec>& s, const Group& g, const std::vector<char>& store, std::string& os) {
  os.clear();
  auto put = [&](auto v) { os.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(static_cast<uint8_t>(g.S.size()));
  auto put_op = [&](const ir::Op& op) {
    put(static_cast<uint16_t>(op.kind));
    put(static_cast<uint8_t>(op.attrs.dtype));
    put(static_cast<uint8_t>(op.attrs.ints.size()));
    for (auto v : op.attrs.ints) put(v);
    put(static_cast<uint8_t>(op.attrs.reals.size()));
    for (auto v : op.attrs.reals) put(v);
    put(static_cast<uint8_t>(op.inputs.size()));
    for (auto& d : op.inputs) {
      put(static_cast<uint8_t>(d.dtype));
      put(static_cast<uint8_t>(d.shape.size()));
      for (size_t k = 0; k < d.shape.size(); ++k) os.push_back(d.shape[k] == 1 ? 'b' : d.strides[k] == 0 ? 'z' : 'n');
      os.push_back(d.is_contiguous() ? 'c' : 's');
    }
    for (auto& d : op.outputs) {
      put(static_cast<uint8_t>(d.dtype));
      put(static_cast<uint8_t>(d.shape.size()));
    }
  };
  for (size_t i = 0; i < g.steps.size(); ++i) {
    put_op(s[g.steps[i]].op);
    os.push_back(store[i] ? 'S' : '-');
    for (Buf* b : s[g.steps[i]].in) {  // the dataflow: which inputs are earlier steps
      put(gr(b).sig_writer);
    }
    gr(s[g.steps[i]].out[0]).sig_writer = static_cast<int32_t>(i);
  }
  if (g.tail >= 0) {
    os.push_back('T');
    put_op(s[static_cast<size_t>(g.tail)].op);
  }
}

}  // namespace

bool FusionBackend::try_add_step(const std::vector<Rec>& s, size_t j, Group& g, std::string& why) {
  const Rec& r = s[j];
  if (const char* w = step_refusal(r.op)) return refuse(why, [&] { return std::string(w); });
  const ir::TensorDesc& o = r.op.outputs[0];
  if (g.steps.empty()) g.S = o.shape;
  if (!is_full_contiguous(o, g.S))
    return refuse(why, [&] {
      return o.shape == g.S ? std::string("writes into a strided view")
                            : "shape " + desc_str(o) + " differs from the group's";
    });
  for (size_t k = 0; k < r.in.size(); ++k) {
    const int64_t pr = gr(r.in[k]).producer;
    if (pr >= 0) {
      if (!(s[static_cast<size_t>(pr)].op.outputs[0] == r.op.inputs[k]))
        return refuse(why, [&] { return std::string("reads a value of the group through another view"); });
    } else if (!is_identity(r.op.inputs[k], g.S) && r.op.inputs[k].numel() != 1) {
      if (r.in[k] == r.out[0])
        return refuse(why, [&] { return std::string("reads its own output buffer through a broadcast"); });
      // A transposed or strided operand (innermost stride not 0 or 1) would be gathered element
      // by element; alone, the op runs through the CPU kernel's tiled transpose instead.
      const ir::TensorDesc& d = r.op.inputs[k];
      if (!d.shape.empty() && !g.S.empty() && g.S.back() > 1 && d.shape.back() > 1 && d.strides.back() != 1 &&
          d.strides.back() != 0)
        return refuse(why, [&] { return std::string("reads a transposed or strided view " + desc_str(d)); });
    }
  }
  if (gr(r.out[0]).loaded_other)
    return refuse(why, [&] { return std::string("overwrites a buffer the group reads through a broadcast"); });
  for (size_t k = 0; k < r.in.size(); ++k)
    if (gr(r.in[k]).producer < 0) {
      r.in[k]->loaded = true;
      if (!is_identity(r.op.inputs[k], g.S)) r.in[k]->loaded_other = true;
    }
  g.steps.push_back(j);
  gr(r.out[0]).producer = static_cast<int64_t>(j);
  return true;
}

bool FusionBackend::try_tail(const std::vector<Rec>& s, size_t j, Group& g, std::string& why) {
  const Rec& r = s[j];
  if (!is_row_kind(r.op.kind)) return false;
  const int64_t pr = gr(r.in[0]).producer;
  if (pr < 0 || !(s[static_cast<size_t>(pr)].op.outputs[0] == r.op.inputs[0]))
    return refuse(why, [&] { return std::string("row op whose input is not a value of the group"); });
  const int64_t k = row_dims(r.op);
  if (k == 0) return refuse(why, [&] { return std::string("row op not over the trailing dims"); });
  const int64_t rk = static_cast<int64_t>(g.S.size());
  int64_t rowlen = 1;
  for (int64_t i = rk - k; i < rk; ++i) rowlen *= g.S[static_cast<size_t>(i)];
  if (rowlen < 1 || rowlen > kMaxRowLen)
    return refuse(why,
                  [&] { return std::string("row of " + std::to_string(rowlen) + " elements (too long for a tile)"); });
  for (size_t q = 1; q < r.in.size(); ++q)
    if (gr(r.in[q]).producer >= 0)
      return refuse(why, [&] { return std::string("row op parameter produced in the group"); });
  for (size_t q = 0; q < r.out.size(); ++q) {
    if (r.op.outputs[q].offset != 0 || !r.op.outputs[q].is_contiguous() || gr(r.out[q]).loaded ||
        gr(r.out[q]).producer >= 0)
      return refuse(why, [&] { return std::string("row op output aliases the group's buffers"); });
  }
  g.tail = static_cast<ptrdiff_t>(j);
  return true;
}

void FusionBackend::run_stream(const std::vector<Rec>& s) {
  const size_t n = s.size();
  // Liveness, backwards.
  std::vector<char> live(n, 0);
  ++g_epoch;
  {
    for (size_t i = n; i-- > 0;) {
      bool l = false;
      for (Buf* b : s[i].out) l |= b->alive || fl(b).needed;
      live[i] = l;
      if (!l) {
        bump(&Stats::dead);
        if (debug_on()) dbg("  dead: " + std::string(ir::op_name(s[i].op.kind)) + " (result never read)");
        continue;
      }
      for (Buf* b : s[i].in) fl(b).needed = true;
    }
  }

  for (size_t q = 0; q < n; ++q)
    for (Buf* b : s[q].in) fl(b).last_reader = static_cast<int64_t>(q);
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t q = 0; q < n; ++q)
    if (live[q])
      order.push_back(q);
    else
      release(s, q);
  run_ops(s, std::move(order));
}

/// Whether op j may run before the group built so far (it is hoisted past the group's steps):
/// it reads no buffer the group writes and writes no buffer the group reads or writes.
bool hoistable(const Rec& r) {
  for (Buf* b : r.in)
    if (gr(b).producer >= 0) return false;
  for (Buf* b : r.out)
    if (gr(b).producer >= 0 || gr(b).loaded) return false;
  return true;
}

/// Conv at order[head] followed by its epilogue (the next live ops): an Add of a value shaped
/// like the result (a residual; f32/f64), then a Relu, or a Relu alone, each reading the whole
/// result of the op before, which nothing else reads. Runs them as one convolution with the
/// epilogue fused (ops.def; oneDNN adds the residual per share of images while they are in the
/// cache), writing the last op's buffer; the intermediates are never materialised. Returns the
/// number of ops run (0: none, nothing fused). The residual is computed already: its producer
/// precedes the Add, hence the convolution, in `order`.
size_t FusionBackend::try_conv_epilogue(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head) {
  const Rec& c = s[order[head]];
  if (!is_conv_anchor(c.op)) return 0;
  Buf* y = c.out[0];
  const ir::TensorDesc* yd = &c.op.outputs[0];
  // Whether r (at stream index j) reads y whole as input arg, with nothing else reading y.
  auto sole_reader = [&](size_t j, const Rec& r, size_t arg) {
    return r.in[arg] == y && r.op.inputs[arg] == *yd && r.op.outputs[0] == *yd && !y->alive &&
           fl(y).last_reader == static_cast<int64_t>(j) && r.out[0] != y;
  };
  Rec f;
  f.op = c.op;
  f.in = c.in;
  int64_t epi = 0;
  size_t k = head + 1;
  if (k < order.size() && (yd->dtype == DType::F32 || yd->dtype == DType::F64)) {
    const Rec& a = s[order[k]];
    if (a.op.kind == OpKind::Add && a.in.size() == 2 && a.in[0] != a.in[1]) {
      const size_t arg = a.in[0] == y ? 0 : 1, other = 1 - arg;
      const ir::TensorDesc& rd = a.op.inputs[other];
      if (sole_reader(order[k], a, arg) && rd.shape == yd->shape && rd.dtype == yd->dtype && a.out[0] != a.in[other]) {
        f.in.push_back(a.in[other]);
        f.op.inputs.push_back(rd);
        epi |= ir::kConvResidual;
        y = a.out[0];
        yd = &a.op.outputs[0];
        ++k;
      }
    }
  }
  if (k < order.size()) {
    const Rec& r = s[order[k]];
    if (r.op.kind == OpKind::Relu && sole_reader(order[k], r, 0)) {
      epi |= ir::kConvRelu;
      y = r.out[0];
      yd = &r.op.outputs[0];
      ++k;
    }
  }
  if (epi == 0) return 0;
  for (Buf* b : f.in)
    if (b == y) return 0;  // written in place: the convolution would overwrite what it reads
  f.op.attrs.ints.push_back(epi);
  f.op.outputs[0] = *yd;
  f.out.push_back(y);
  if (debug_on())
    dbg(std::string("  Conv with its ") + (epi & ir::kConvResidual ? "residual Add" : "") +
        (epi == (ir::kConvResidual | ir::kConvRelu) ? " and " : "") + (epi & ir::kConvRelu ? "Relu" : "") + " fused " +
        desc_str(c.op.outputs[0]));
  bump(&Stats::epilogues);
  run_single(f.op, f);
  for (size_t q = head; q < k; ++q) release(s, order[q]);
  return k - head;
}

/// Cuts a group from order[start]: steps join while they can; an op that cannot join but is
/// independent of the group (hoistable) is set aside in `hoisted` and the group goes on past it
/// (within the look-ahead bounds); anything else ends the group. Returns the first position of
/// `order` not consumed.
size_t FusionBackend::cut_group(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t start, Group& g,
                                std::vector<size_t>& hoisted, std::string& why) {
  // Bounds on the look-ahead: ops set aside in all, and in a row since the last one joined.
  constexpr size_t kMaxHoisted = 32, kMaxHoistedRun = 12;
  ++g_gepoch;
  size_t end = start + 1;
  size_t run = 0;  // ops set aside since the last step joined
  if (!try_add_step(s, order[start], g, why)) return end;
  for (; end < order.size(); ++end) {
    const size_t j = order[end];
    std::string w1, w2;
    if (try_add_step(s, j, g, w1)) {
      run = 0;
      continue;
    }
    if (try_tail(s, j, g, w2)) return end + 1;
    if (hoisted.size() < kMaxHoisted && run < kMaxHoistedRun && hoistable(s[j])) {
      hoisted.push_back(j);
      ++run;
      continue;
    }
    if (debug_on())
      dbg("  group ends before " + std::string(ir::op_name(s[j].op.kind)) + ": " + (w2.empty() ? w1 : w2));
    break;
  }
  return end;
}

/// Whether group g can run as the epilogue of the product at stream index i, row block by row
/// block: the result is large (kEpilogueMinBytes), g covers the product's elements, reads the product only element for
/// element (the identity view of the whole result) and writes none of the product's inputs; a row op closing g reduces
/// at most one row of the product at a time.
bool FusionBackend::epilogue_fits(const std::vector<Rec>& s, size_t i, const Group& g) const {
  const Rec& mm = s[i];
  const ir::TensorDesc& c = mm.op.outputs[0];
  if (g.steps.empty() || shape_numel(g.S) != c.numel() ||
      c.numel() * static_cast<int64_t>(dtype_size(c.dtype)) < kEpilogueMinBytes)
    return false;
  Buf* out = mm.out[0];
  bool reads = false;
  // Writing the product's own result is fine (element for element, in its block); writing an
  // input of the product is not (later blocks still read it).
  auto touches_inputs = [&](const Rec& r) {
    for (Buf* b : r.out)
      if (std::find(mm.in.begin(), mm.in.end(), b) != mm.in.end()) return true;
    return false;
  };
  for (size_t k : g.steps) {
    const Rec& r = s[k];
    if (touches_inputs(r)) return false;
    for (size_t q = 0; q < r.in.size(); ++q) {
      if (r.in[q] != out) continue;
      if (!is_full_contiguous(r.op.inputs[q], g.S)) return false;
      reads = true;
    }
  }
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    if (touches_inputs(t)) return false;
    for (size_t q = 1; q < t.in.size(); ++q)
      if (t.in[q] == out) return false;
    int64_t rowlen = 1;
    for (size_t q = g.S.size() - static_cast<size_t>(row_dims(t.op)); q < g.S.size(); ++q) rowlen *= g.S[q];
    if (c.shape[2] % rowlen != 0) return false;
  }
  return reads;
}

/// Runs rows [row0, row1) of the product mm ([B, M, N], rows counted over B * M, within one
/// batch) into its result's memory, or into dst (contiguous rows) when dst is not null.
void FusionBackend::run_matmul_rows(const Rec& mm, int64_t row0, int64_t row1, void* dst) {
  const ir::TensorDesc &a = mm.op.inputs[0], &b = mm.op.inputs[1], &c = mm.op.outputs[0];
  const int64_t M = c.shape[1], bi = row0 / M, m0 = row0 % M, rows = row1 - row0;
  ir::Op sub = mm.op;
  ir::TensorDesc &sa = sub.inputs[0], &sb = sub.inputs[1], &sc = sub.outputs[0];
  sa.shape = Shape{1, rows, a.shape[2]};
  sa.offset = a.offset + bi * a.strides[0] + m0 * a.strides[1];
  sb.shape = Shape{1, b.shape[1], b.shape[2]};
  sb.offset = b.offset + bi * b.strides[0];
  sc.shape = Shape{1, rows, c.shape[2]};
  sc.offset = dst ? 0 : c.offset + bi * c.strides[0] + m0 * c.strides[1];
  void* in[2] = {mm.in[0]->real, mm.in[1]->real};
  void* out[1] = {dst ? dst : mm.out[0]->real};
  kKernels[static_cast<size_t>(OpKind::MatMul)](sub, in, out);
}

void FusionBackend::run_ops(const std::vector<Rec>& s, std::vector<size_t> order) {
  // `order`: live stream indices, ascending. Each round cuts a group from the front: steps join
  // while they can; an op that cannot join but is independent of the group (hoistable) is set
  // aside and runs, with the other set-aside ops and in their order, before the group, so the
  // group can go on past it (a per-channel coefficient computed between two full-size steps).
  // Anything else ends the group (cut_group).
  auto release_group = [&](const Group& g) {
    for (size_t q : g.steps) release(s, q);
    if (g.tail >= 0) release(s, static_cast<size_t>(g.tail));
  };
  size_t head = 0;
  while (head < order.size()) {
    const size_t i = order[head];
    if (const size_t n = try_conv_epilogue(s, order, head)) {
      head += n;
      continue;
    }
    if (head + 1 < order.size() && is_matmul_anchor(s[i].op)) {
      // The group after a product: when it reads the product only element for element, the
      // product runs in row blocks, each followed by the group over the same rows.
      Group g;
      std::vector<size_t> hoisted;
      std::string why;
      const size_t end = cut_group(s, order, head + 1, g, hoisted, why);
      if (hoisted.empty() && epilogue_fits(s, i, g)) {
        bump(&Stats::epilogues);
        run_group(s, g, &s[i]);
        release(s, i);
        release_group(g);
        order.erase(order.begin(), order.begin() + static_cast<ptrdiff_t>(end));
        head = 0;
        continue;
      }
    }
    Group g;
    std::vector<size_t> hoisted, rest;
    std::string why;
    const size_t end = cut_group(s, order, head, g, hoisted, why);
    if (g.steps.size() + (g.tail >= 0 ? 1 : 0) >= 2 && shape_numel(g.S) > 0) {
      if (!hoisted.empty()) {
        // Hoisted ops were checked against the group up to their own position only; ops after
        // them that joined the group may read their results, which is why they run first.
        // Set-aside ops after the group's last member stay in the stream.
        const size_t gend = g.tail >= 0 ? static_cast<size_t>(g.tail) : g.steps.back();
        std::vector<size_t> before;
        for (size_t q : hoisted) (q < gend ? before : rest).push_back(q);
        if (!before.empty()) {
          if (debug_on()) dbg("  " + std::to_string(before.size()) + " independent ops run before the group");
          // The group reads after all of them now: values it takes from them must be stored.
          auto mark = [&](size_t q) {
            for (Buf* b : s[q].in) fl(b).last_reader = std::numeric_limits<int64_t>::max();
          };
          for (size_t q : g.steps) mark(q);
          if (g.tail >= 0) mark(static_cast<size_t>(g.tail));
          run_ops(s, std::move(before));
        }
      }
      run_group(s, g);
      release_group(g);
      // What remains: set-aside ops after the group's end, then everything not reached.
      rest.insert(rest.end(), order.begin() + static_cast<ptrdiff_t>(end), order.end());
      order = std::move(rest);
      head = 0;
    } else {
      if (debug_on())
        dbg("  alone: " + std::string(ir::op_name(s[i].op.kind)) + " " + desc_str(s[i].op.outputs[0]) +
            (why.empty() ? "" : " (" + why + ")"));
      bump(&Stats::single_ops);
      run_single(s[i].op, s[i]);
      release(s, i);
      ++head;
    }
  }
}

/// Runs group g over its shape in tiles (parallel). With `matmul`, the product whose result the
/// group reads (epilogue_fits) runs in row blocks of about kEpilogueBlock elements, each followed
/// by the group's tiles over the same elements while they are in the cache.
void FusionBackend::run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul) {
  ++g_gepoch;  // fresh per-buffer group scratch (hoisted groups may have run since g was cut)
  const size_t ns = g.steps.size();
  const size_t gend = g.tail >= 0 ? static_cast<size_t>(g.tail) : g.steps.back();
  // Is buffer b read by a (live or not: conservative) op after the group?
  auto read_after = [&](Buf* b) { return fl(b).last_reader > static_cast<int64_t>(gend); };
  // Which step values go to memory: the last in-group writer of a buffer that is held by a live
  // tensor or read after the group (or by the tail through memory, never: the tail reads values).
  GroupScratch& w = gs_;
  std::vector<char>& store = w.store;
  store.assign(ns, 0);
  int64_t elided = 0;
  for (size_t k = 0; k < ns; ++k) gr(s[g.steps[k]].out[0]).last_step = static_cast<int32_t>(k);
  for (size_t k = 0; k < ns; ++k) {
    Buf* b = s[g.steps[k]].out[0];
    const bool last = gr(b).last_step == static_cast<int32_t>(k);
    if (last && (b->alive || read_after(b)))
      store[k] = 1;
    else
      ++elided;
  }
  std::vector<char>& tail_store = w.tail_store;
  tail_store.clear();
  if (g.tail >= 0)
    for (Buf* b : s[static_cast<size_t>(g.tail)].out) tail_store.push_back(b->alive || read_after(b));

  // The plan (cached by signature).
  signature(s, g, store, w.sig);
  const std::string& sig = w.sig;
  std::shared_ptr<Plan> plan;
  auto pit = plans_.find(sig);
  if (pit != plans_.end()) {
    plan = pit->second;
    bump(&Stats::plan_hits);
  } else {
    plan = std::make_shared<Plan>();
    plan->id = static_cast<int64_t>(plans_.size()) + 1;
    std::ostringstream text;
    text << "fused " << ns + (g.tail >= 0 ? 1 : 0) << " ops:";
    for (size_t k = 0; k < ns; ++k) {
      text << " " << ir::op_name(s[g.steps[k]].op.kind) << (store[k] ? "*" : "");
    }
    if (g.tail >= 0) text << " | row op " << ir::op_name(s[static_cast<size_t>(g.tail)].op.kind);
    text << "  (* = stored; others stay in tiles)";
    plan->text = text.str();
    plans_.emplace(sig, plan);
    bump(&Stats::plans_built);
  }
  bump(&Stats::fused_groups);
  bump(&Stats::fused_ops, static_cast<int64_t>(ns) + (g.tail >= 0 ? 1 : 0));
  bump(&Stats::intermediates_elided, elided);
  if (debug_on()) {
    std::ostringstream os;
    os << "  plan #" << plan->id << (pit != plans_.end() ? " (cached)" : " (built)") << " over "
       << desc_str(s[g.steps[0]].op.outputs[0]) << ": " << plan->text;
    dbg(os.str());
  }

  // Sources and loads for this run (sizes known now).
  std::vector<Load>& loads = w.loads;
  loads.clear();
  std::vector<std::vector<Src>>& src = w.src;
  if (src.size() < ns) src.resize(ns);
  for (size_t k = 0; k < ns; ++k) src[k].clear();
  const Shape& S = g.S;
  const size_t r = S.size();
  auto add_load = [&](Buf* b, const ir::TensorDesc& d) {
    for (size_t q = 0; q < loads.size(); ++q)  // one load (one gather per tile) per view
      if (loads[q].buf == b && loads[q].desc == d) return static_cast<int>(q);
    Load L;
    L.buf = b;
    L.desc = d;
    if (d.numel() == 1)
      L.kind = LoadKind::Scalar;
    else if (is_identity(d, S))
      L.kind = LoadKind::Identity;
    else {
      L.kind = LoadKind::Gather;
      L.bstrides = Strides(r, 0);
      const size_t rd = d.shape.size();
      for (size_t q = 0; q < r; ++q) {
        if (q + rd < r) continue;
        size_t jd = q + rd - r;
        L.bstrides[q] = (d.shape[jd] == 1 && S[q] != 1) ? 0 : d.strides[jd];
      }
      // Merge dim q into q+1 where one stride walks both (broadcast runs become long runs).
      Shape gs;
      Strides gb;
      for (size_t q = 0; q < r; ++q) {
        if (!gs.empty() && gb.back() == L.bstrides[q] * S[q]) {
          gs.back() *= S[q];
          gb.back() = L.bstrides[q];
        } else {
          gs.push_back(S[q]);
          gb.push_back(L.bstrides[q]);
        }
      }
      L.gshape = std::move(gs);
      L.bstrides = std::move(gb);
    }
    loads.push_back(std::move(L));
    return static_cast<int>(loads.size() - 1);
  };
  for (size_t k = 0; k < ns; ++k) {
    const Rec& rec = s[g.steps[k]];
    for (size_t q = 0; q < rec.in.size(); ++q) {
      Src sr;
      if (gr(rec.in[q]).step >= 0)
        sr.step = rec.in[q]->step;
      else
        sr.load = add_load(rec.in[q], rec.op.inputs[q]);
      src[k].push_back(sr);
    }
    gr(rec.out[0]).step = static_cast<int32_t>(k);
  }
  int tail_in = -1;
  int64_t rowlen = 1, k_dims = 0;
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    tail_in = gr(t.in[0]).step;
    k_dims = row_dims(t.op);
    for (size_t q = r - static_cast<size_t>(k_dims); q < r; ++q) rowlen *= S[q];
  }
  // Materialise everything touched in memory before going parallel.

  // A product's result that nothing reads after the group (and no tensor holds) is never
  // materialised: each block is computed into a thread's scratch and the group reads it there.
  Buf* const in_scratch = matmul && !matmul->out[0]->alive && !read_after(matmul->out[0]) ? matmul->out[0] : nullptr;
  for (auto& L : loads)
    if (L.buf != in_scratch) materialise(L.buf);
  if (matmul) {
    for (Buf* b : matmul->in) materialise(b);
    if (!in_scratch) materialise(matmul->out[0]);
  }
  for (size_t k = 0; k < ns; ++k)
    if (store[k]) materialise(s[g.steps[k]].out[0]);
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    for (size_t q = 1; q < t.in.size(); ++q) materialise(t.in[q]);
    for (size_t q = 0; q < t.out.size(); ++q)
      if (tail_store[q]) materialise(t.out[q]);
  }

  const int64_t N = shape_numel(S);
  const int64_t rows_per_tile = g.tail >= 0 ? std::max<int64_t>(1, tile_elems() / rowlen) : 0;
  const int64_t tile = g.tail >= 0 ? std::min(rows_per_tile, N / rowlen) * rowlen : std::min(tile_elems(), N);
  const int64_t ntiles = (N + tile - 1) / tile;
  // A thread takes at least kMinElemsPerThread elements of work per step: longer chains split
  // smaller groups (each element costs a pass of every step).
  const int64_t grain =
      std::max<int64_t>(1, kMinElemsPerThread / static_cast<int64_t>(ns + (g.tail >= 0 ? 1 : 0)) / tile);
  const int64_t total_rows = g.tail >= 0 ? N / rowlen : 0;

  std::vector<int>& gather_slot = w.gather_slot;
  gather_slot.assign(loads.size(), -1);
  int ngather = 0;
  for (size_t q = 0; q < loads.size(); ++q)
    if (loads[q].kind == LoadKind::Gather) gather_slot[q] = ngather++;
  std::vector<char>& f32_step = w.f32_step;
  f32_step.assign(ns, 0);
  for (size_t k = 0; k < ns; ++k) {
    const ir::Op& op = s[g.steps[k]].op;
    bool all = op.outputs[0].dtype == DType::F32 && op.inputs.size() <= 2 && op.kind != OpKind::Copy &&
               op.kind != OpKind::Cast;
    for (auto& d : op.inputs) all &= d.dtype == DType::F32;
    f32_step[k] = all;
  }
  // Large stored results bypass the caches (non-temporal stores, no read-for-ownership): the
  // tile is computed in scratch and streamed out. Full tiles only (they are 64-byte aligned).
  const bool streaming = tiles::has_stream_stores() && g.tail < 0 && N * 4 >= tiles::kStreamBytes && tile % 16 == 0;
  // When every step has a vector form, the group runs as one elementwise program per tile
  // (cpu::vec::run_program); pointer slots: the loads, then the stored steps, then the tail's
  // input in scratch.
  ProgramCode& prog = w.prog;
  prog.ok = false;
  if (program_enabled()) build_program(s, g, tail_in, w);
  if (prog.ok) bump(&Stats::program_groups);
  if (debug_on() && !prog.ok) dbg("    (runs op by op: a step or load has no program form)");
  if (debug_on() && matmul)
    dbg("    the epilogue of MatMul " + desc_str(matmul->op.outputs[0]) + ", run per row block of the product");
  // Tiles [tb, te) of the elements [range0, range1); `block`: where element range0 of the
  // in_scratch product is.
  auto tiles_of = [&](int64_t range0, int64_t range1, int64_t tb, int64_t te, const char* block) {
    thread_local std::vector<char> scratch_v;
    const size_t slot = static_cast<size_t>(tile) * 8;
    const size_t nslots = ns + static_cast<size_t>(ngather) + 4;
    char* scratch = tiles::aligned(scratch_v, slot * nslots);
    // per-chunk copies of the ops (descriptors rewritten per tile); a program needs none
    std::vector<ir::Op> ops(prog.ok ? 0 : ns);
    for (size_t k = 0; k < ops.size(); ++k) {
      ops[k].kind = s[g.steps[k]].op.kind;
      ops[k].attrs = s[g.steps[k]].op.attrs;
      ops[k].inputs = s[g.steps[k]].op.inputs;
      ops[k].outputs = s[g.steps[k]].op.outputs;
    }
    ir::Op tail_op;
    if (g.tail >= 0) tail_op = s[static_cast<size_t>(g.tail)].op;
    thread_local std::vector<char*> val, lp;
    thread_local std::vector<void*> prog_ptrs;
    val.assign(ns, nullptr);
    lp.assign(loads.size(), nullptr);
    prog_ptrs.assign(prog.ok ? prog.nslots : 0, nullptr);
    SmallVec<void*, 4> in_p, out_p;
    for (int64_t t = tb; t < te; ++t) {
      const int64_t s0 = range0 + t * tile, len = std::min(tile, range1 - s0);
      // loads gathered once per tile
      for (size_t q = 0; q < loads.size(); ++q) {
        const Load& L = loads[q];
        const size_t esz = dtype_size(L.desc.dtype);
        char* base = static_cast<char*>(L.buf->real);
        switch (L.kind) {
          case LoadKind::Scalar:
            lp[q] = base + static_cast<size_t>(L.desc.offset) * esz;
            break;
          case LoadKind::Identity:
            lp[q] = L.buf == in_scratch ? const_cast<char*>(block) + static_cast<size_t>(s0 - range0) * esz
                                        : base + static_cast<size_t>(L.desc.offset + s0) * esz;
            break;
          case LoadKind::Gather:
            lp[q] = scratch + slot * (ns + static_cast<size_t>(gather_slot[q]));
            tiles::gather(base, esz, L.gshape, L.bstrides, L.desc.offset, s0, len, lp[q]);
            break;
        }
      }
      if (prog.ok) {
        std::vector<void*>& ptrs = prog_ptrs;
        for (size_t q = 0; q < loads.size(); ++q) ptrs[q] = lp[q];
        bool aligned_out = true;
        for (size_t q = 0; q < prog.stored.size(); ++q) {
          const size_t k = prog.stored[q];
          const size_t esz = dtype_size(s[g.steps[k]].op.outputs[0].dtype);
          char* dst = static_cast<char*>(s[g.steps[k]].out[0]->real) + static_cast<size_t>(s0) * esz;
          ptrs[loads.size() + q] = dst;
          val[k] = dst;
          aligned_out &= (reinterpret_cast<uintptr_t>(dst) & 63) == 0 && esz == 4;
        }
        if (prog.tail_slot >= 0) {
          char* tmp = scratch + slot * static_cast<size_t>(tail_in);
          ptrs[static_cast<size_t>(prog.tail_slot)] = tmp;
          val[static_cast<size_t>(tail_in)] = tmp;
        }
        cpu::vec::run_program(prog.code.data(), prog.code.size(), prog.nregs, ptrs.data(), len,
                              streaming && len == tile && aligned_out);
      }
      for (size_t k = 0; k < ns && !prog.ok; ++k) {
        ir::Op& op = ops[k];
        in_p.clear();
        out_p.clear();
        for (size_t q = 0; q < src[k].size(); ++q) {
          ir::TensorDesc& d = op.inputs[q];
          const Src& sr = src[k][q];
          bool scalar = sr.load >= 0 && loads[static_cast<size_t>(sr.load)].kind == LoadKind::Scalar;
          d.shape = Shape{scalar ? 1 : len};
          d.strides = Strides{1};
          d.offset = 0;
          in_p.push_back(sr.step >= 0 ? val[static_cast<size_t>(sr.step)] : lp[static_cast<size_t>(sr.load)]);
        }
        ir::TensorDesc& od = op.outputs[0];
        od.shape = Shape{len};
        od.strides = Strides{1};
        od.offset = 0;
        const size_t esz = dtype_size(od.dtype);
        char* dst = store[k] ? static_cast<char*>(s[g.steps[k]].out[0]->real) + static_cast<size_t>(s0) * esz : nullptr;
        const bool nt = store[k] && streaming && len == tile;
        val[k] = store[k] && !nt ? dst : scratch + slot * k;
        out_p.push_back(val[k]);
        // f32 rows: the vectorised row functions the CPU kernels call for contiguous f32 runs
        // (same results), without building the kernel's loop for every tile.
        bool done = false;
        if (f32_step[k]) {
          const auto* a = static_cast<const float*>(in_p[0]);
          auto* o = reinterpret_cast<float*>(val[k]);
          if (in_p.size() == 1)
            done = cpu::vec::unary_f32(op, a, o, len);
          else if (in_p.size() == 2)
            done = cpu::vec::binary_f32(op.kind, a, op.inputs[0].shape[0] == 1 ? 0 : 1,
                                        static_cast<const float*>(in_p[1]), op.inputs[1].shape[0] == 1 ? 0 : 1, o, len);
        }
        if (!done) kKernels[static_cast<int>(op.kind)](op, in_p.data(), out_p.data());
        if (nt) tiles::stream_copy(dst, val[k], static_cast<size_t>(len) * esz);
      }
      if (g.tail >= 0) {
        const Rec& tr = s[static_cast<size_t>(g.tail)];
        const ir::Op& orig = tr.op;
        const int64_t rows = len / rowlen, row0 = s0 / rowlen;
        Shape in_shape{rows};
        for (size_t q = r - static_cast<size_t>(k_dims); q < r; ++q) in_shape.push_back(S[q]);
        tail_op.inputs[0] = ir::contiguous_desc(in_shape, orig.inputs[0].dtype);
        in_p.clear();
        out_p.clear();
        in_p.push_back(val[static_cast<size_t>(tail_in)]);
        for (size_t q = 1; q < tr.in.size(); ++q) in_p.push_back(tr.in[q]->real);
        if (orig.kind != OpKind::Softmax && orig.kind != OpKind::LogSoftmax && orig.kind != OpKind::LayerNorm) {
          tail_op.attrs.ints.clear();
          tail_op.attrs.ints.push_back(orig.attrs.ints[0]);
          for (int64_t q = 1; q <= k_dims; ++q) tail_op.attrs.ints.push_back(q);
        } else if (orig.kind != OpKind::LayerNorm) {
          tail_op.attrs.ints[0] = 1;
        }
        for (size_t q = 0; q < tr.out.size(); ++q) {
          const ir::TensorDesc& od = orig.outputs[q];
          Shape os{rows};
          if (od.shape.size() == r)
            for (size_t z = r - static_cast<size_t>(k_dims); z < r; ++z) os.push_back(od.shape[z]);
          tail_op.outputs[q] = ir::contiguous_desc(os, od.dtype);
          const int64_t per_row = total_rows ? od.numel() / total_rows : 0;
          const size_t esz = dtype_size(od.dtype);
          out_p.push_back(tail_store[q]
                              ? static_cast<char*>(tr.out[q]->real) + static_cast<size_t>(row0 * per_row) * esz
                              : scratch + slot * (ns + static_cast<size_t>(ngather) + std::min<size_t>(q, 3)));
        }
        kKernels[static_cast<int>(tail_op.kind)](tail_op, in_p.data(), out_p.data());
      }
    }
    tiles::stream_fence();
  };
  if (!matmul) {
    parallel_for(ntiles, grain, [&](int64_t tb, int64_t te) { tiles_of(0, N, tb, te, nullptr); });
    return;
  }
  // Row blocks of the product ([B, M, Ncols], rows counted over B * M, within one batch each),
  // spread over the threads: a thread computes a block's rows (the GEMM runs single-threaded
  // inside the parallel region) and runs the group's tiles over them while they are in its cache.
  const ir::TensorDesc& c = matmul->op.outputs[0];
  const int64_t M = c.shape[1], ncols = c.shape[2];
  const int64_t block_rows = std::min(M, std::max<int64_t>(8, kEpilogueBlock / std::max<int64_t>(ncols, 1)));
  const int64_t per_batch = (M + block_rows - 1) / block_rows;
  parallel_for(c.shape[0] * per_batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t row = (blk / per_batch) * M + (blk % per_batch) * block_rows;
      const int64_t row_end = std::min(row + block_rows, (blk / per_batch + 1) * M);
      char* dst = nullptr;
      if (in_scratch) {
        thread_local std::vector<char> block_v;
        dst = tiles::aligned(block_v, static_cast<size_t>((row_end - row) * ncols) * dtype_size(c.dtype));
      }
      run_matmul_rows(*matmul, row, row_end, dst);
      tiles_of(row * ncols, row_end * ncols, 0, ((row_end - row) * ncols + tile - 1) / tile, dst);
    }
  });
}

// ---- public entry points -----------------------------------------------------------------------

namespace {
std::mutex g_reg_mu;
std::map<Backend*, FusionBackend*>& registry() {
  static auto* m = new std::map<Backend*, FusionBackend*>();  // never destroyed
  return *m;
}
}  // namespace

Backend* fusion_backend(Backend* inner) {
  std::lock_guard<std::mutex> lock(g_reg_mu);
  FusionBackend*& b = registry()[inner];
  if (!b) b = new FusionBackend(inner);
  return b;
}

bool is_fusion(const Backend* b) { return dynamic_cast<const FusionBackend*>(b) != nullptr; }

bool enabled() {
  int v = g_enabled.load();
  if (v < 0) {
    const char* e = std::getenv("KILN_FUSION");
    v = (e && std::strcmp(e, "0") == 0) ? 0 : 1;
    g_enabled.store(v);
  }
  return v == 1;
}

void set_enabled(bool on) {
  {
    std::lock_guard<std::mutex> lock(g_reg_mu);
    for (auto& [inner, f] : registry()) f->flush_all("set_enabled");
  }
  g_enabled.store(on ? 1 : 0);
}

bool program_enabled() {
  int v = g_program.load();
  if (v < 0) {
    const char* e = std::getenv("KILN_FUSION_PROGRAM");
    v = e && std::strcmp(e, "0") == 0 ? 0 : 1;
    g_program.store(v);
  }
  return v != 0;
}

void set_program_enabled(bool on) { g_program.store(on ? 1 : 0); }

int64_t small_limit() {
  int64_t v = g_small.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("KILN_FUSION_SMALL");
    v = e && *e ? std::max<int64_t>(0, std::atoll(e)) : kDefaultSmall;
    g_small.store(v, std::memory_order_relaxed);
  }
  return v;
}

void set_small_limit(int64_t elements) {
  {
    std::lock_guard<std::mutex> lock(g_reg_mu);
    for (auto& [inner, f] : registry()) f->flush_all("set_small_limit");
  }
  g_small.store(std::max<int64_t>(0, elements), std::memory_order_relaxed);
}

// The counters are bumped with relaxed atomic adds (no lock per recorded op) and read field by
// field the same way.
#define KILN_FUSION_STATS(X) \
  X(recorded)                \
  X(eager)                   \
  X(dead)                    \
  X(fused_groups)            \
  X(program_groups)          \
  X(fused_ops) X(single_ops) X(flushes) X(plans_built) X(plan_hits) X(intermediates_elided) X(epilogues) X(small_direct)
Stats stats() {
  Stats s;
#define KILN_LOAD(f) s.f = std::atomic_ref<int64_t>(g_stats.f).load(std::memory_order_relaxed);
  KILN_FUSION_STATS(KILN_LOAD)
#undef KILN_LOAD
  return s;
}
void reset_stats() {
#define KILN_ZERO(f) std::atomic_ref<int64_t>(g_stats.f).store(0, std::memory_order_relaxed);
  KILN_FUSION_STATS(KILN_ZERO)
#undef KILN_ZERO
}
#undef KILN_FUSION_STATS

}  // namespace fusion

// ---- Device entry points -------------------------------------------------------------------------

Device Device::fusion() const {
  Backend* below = backend_;
  const AutodiffOptions* ad = backend_->autodiff_options();
  while (below->autodiff_options()) below = below->inner();
  if (fusion::is_fusion(below)) return *this;
  Device d(fusion::fusion_backend(below), index_);
  return ad ? d.autodiff(*ad) : d;
}

Device Device::without_fusion() const {
  if (!has_fusion()) return *this;
  const AutodiffOptions* ad = backend_->autodiff_options();
  Backend* below = backend_;
  while (below->autodiff_options()) below = below->inner();
  Device d(below->inner(), index_);  // the fusion decorator's inner backend
  return ad ? d.autodiff(*ad) : d;
}

bool Device::has_fusion() const {
  for (Backend* b = backend_; b; b = b->inner())
    if (fusion::is_fusion(b)) return true;
  return false;
}

}  // namespace kiln
