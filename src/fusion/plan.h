// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The fusion planner's records and plans, backend-neutral: lazy buffers (Buf), queued ops (Rec),
// groups cut from the stream, their loads, sources and fused programs (GroupScratch), row
// pipeline stages. The planner (fusion.cpp, plan.cpp, rows.cpp) writes them; a backend's
// executor (fusion/executor.h) runs them. See Note [Fusion design] in fusion.cpp.
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

#include "core/checked.h"
#include "core/parallel.h"
#include "fusion/fusion.h"
#include "fusion/program.h"
#include "ir/attrs.h"
#include "kiln/error.h"
#include "kiln/small_vector.h"

namespace kiln::fusion {

using ir::OpKind;
class Executor;

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
alignas(64) inline Stats g_stats;  // updated through counter_add (atomic_ref)

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
  std::shared_ptr<void> owner;  ///< set for memory the buffer did not allocate (wrap_host)
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

/// A convolution whose result may feed an epilogue group (Executor::conv_products): a Conv
/// anchor of f32 or f64 with a contiguous result.
inline bool is_conv_product(const ir::Op& op) {
  if (!is_conv_anchor(op) || op.outputs.size() != 1) return false;
  const DType t = op.outputs[0].dtype;
  return (t == DType::F32 || t == DType::F64) && op.outputs[0].is_contiguous();
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
  /// The tail is a full Sum / Mean longer than a tile (Executor::long_reduction): each tile adds its leaves'
  /// partials, combined after the tiles in the kernel's order (the same bits).
  bool long_tail = false;
};

/// The stream index of a group's last record: its tail, else its last step.
inline size_t group_end(const Group& g) { return g.tail >= 0 ? static_cast<size_t>(g.tail) : g.steps.back(); }

/// Whether buffer b must be in memory after group g: a tensor holds it or a later op reads it
/// (live or not: conservative).
inline bool needed_after(Buf* b, const Group& g) {
  return b->alive || fl(b).last_reader > static_cast<int64_t>(group_end(g));
}

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
  std::vector<PInstr> code;
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
  int tail_in = -1;                ///< the step the tail reads (-1: no tail)
  int64_t rowlen = 1, k_dims = 0;  ///< the tail's row length and row dims
  // build_program's
  std::vector<PInstr> ops;
  std::vector<int64_t> last;
  std::vector<int16_t> reg, free_regs;
};

/// Relaxed atomic add, load and store on a plain counter: std::atomic_ref where the standard
/// library has it, else the __atomic builtins it is made of (libc++ 13: WebAssembly).
inline void counter_add(int64_t& c, int64_t n) {
#if defined(__cpp_lib_atomic_ref)
  std::atomic_ref<int64_t>(c).fetch_add(n, std::memory_order_relaxed);
#else
  __atomic_fetch_add(&c, n, __ATOMIC_RELAXED);
#endif
}
inline int64_t counter_load(int64_t& c) {
#if defined(__cpp_lib_atomic_ref)
  return std::atomic_ref<int64_t>(c).load(std::memory_order_relaxed);
#else
  return __atomic_load_n(&c, __ATOMIC_RELAXED);
#endif
}
inline void counter_store(int64_t& c, int64_t v) {
#if defined(__cpp_lib_atomic_ref)
  std::atomic_ref<int64_t>(c).store(v, std::memory_order_relaxed);
#else
  __atomic_store_n(&c, v, __ATOMIC_RELAXED);
#endif
}

/// Adds n to a counter of fusion::stats() (relaxed: no lock per recorded op).
inline void bump(int64_t Stats::*field, int64_t n = 1) { counter_add(g_stats.*field, n); }

inline std::atomic<int> g_program{-1};  // -1: from KILN_FUSION_PROGRAM on first use

/// Rewrites op, a copy of the row op orig (reducing the trailing k dims of its input, of shape
/// S), to work on `rows` rows of contiguous input and outputs (plan.cpp).
void rows_op(ir::Op& op, const ir::Op& orig, const Shape& S, int64_t k, int64_t rows);
/// Compiles the steps of g into w.prog, with the steps ex runs as program instructions (plan.cpp).
void build_program(const Executor& ex, const std::vector<Rec>& s, const Group& g, int tail_in, GroupScratch& w);
/// The shape-relative signature of a group (plan.cpp).
void signature(const std::vector<Rec>& s, const Group& g, const std::vector<char>& store, std::string& os);

}  // namespace kiln::fusion
