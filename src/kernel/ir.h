// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel IR: a list of operations, each defining at most one SSA value (its own index),
// grouped into regions for structured control flow (if, for, while). Mutable locals (Var) are
// slots read and written by LocalLoad and LocalStore, so every region is a plain list.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kernel.h"

namespace kiln::kernel::ir {

inline constexpr uint32_t kNone = UINT32_MAX;

enum class Kind : uint8_t {
  Const,       ///< f or i by type
  Scalar,      ///< scalar parameter `obj`
  Builtin,     ///< attr: Builtin, axis in `axis`
  Unary,       ///< attr: UnaryFn
  Binary,      ///< attr: BinaryFn
  Compare,     ///< attr: CmpFn; type Bool
  Select,      ///< in: cond, a, b
  Fma,         ///< in: a, b, c; a * b + c rounded once (float types)
  Cast,        ///< in: x; attr 1: a bitcast (32-bit types)
  Load,        ///< memory `obj` (shared if `shared`), in: index
  Store,       ///< in: index, value
  LoadVec,     ///< lanes in `lanes`, in: index; the value is a vector
  Extract,     ///< in: vector, lane in `axis`
  StoreVec,    ///< in: index, lane values...
  Atomic,      ///< attr: AtomicFn, in: index, value; returns the old value
  LocalLoad,   ///< local slot `obj`
  LocalStore,  ///< local slot `obj`, in: value
  If,          ///< in: cond; regions: then, else (kNone when absent)
  For,         ///< in: begin, end, step; regions: body; the op's value is the induction variable
  While,       ///< regions: cond (ends with Yield), body
  Yield,       ///< in: the condition of a while
  Barrier,
  Subgroup,  ///< attr: SubgroupFn, in: value (and lane or mask)
  Call,      ///< function `obj` of Kernel::functions, in: its arguments; the value: its result
};

enum class Builtin : uint8_t { ThreadId, GroupId, NumGroups, LaneId };
/// RoundF16 / RoundBF16: an f32 rounded to the nearest f16 / bf16 value (ties to even), as f32.
enum class UnaryFn : uint8_t {
  Neg,
  Not,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Erf,
  Sigmoid,
  Abs,
  Floor,
  Ceil,
  Sin,
  Cos,
  RoundF16,
  RoundBF16
};
enum class BinaryFn : uint8_t { Add, Sub, Mul, Div, Mod, And, Or, Xor, Shl, Shr, Min, Max, Pow };
enum class CmpFn : uint8_t { Lt, Le, Gt, Ge, Eq, Ne };
enum class AtomicFn : uint8_t { Add, Min, Max };
enum class SubgroupFn : uint8_t { Add, Min, Max, Shuffle, ShuffleXor };

const char* unary_name(UnaryFn f);
const char* binary_name(BinaryFn f);
const char* cmp_name(CmpFn f);

struct Op {
  Kind kind = Kind::Const;
  uint8_t attr = 0;
  Type type = Type::F32;  ///< of the value (element type for a vector)
  uint8_t lanes = 1;      ///< >1: a vector value (LoadVec) or a vector store
  uint8_t nin = 0;
  bool shared = false;  ///< Load/Store/LoadVec/StoreVec/Atomic: on a shared array
  uint8_t axis = 0;
  std::array<uint32_t, 5> in{};
  uint32_t obj = kNone;  ///< buffer, shared array, scalar or local
  std::array<uint32_t, 2> region{kNone, kNone};
  double f = 0;            ///< Const of a float type
  int64_t i = 0;           ///< Const of an integer or Bool type
  uint32_t loc = kNone;    ///< index into Kernel::locs
  bool has_value() const;  ///< defines an SSA value
  bool pure() const;       ///< no effects: may be merged, moved or dropped
};

inline bool Op::has_value() const {
  switch (kind) {
    case Kind::Store:
    case Kind::StoreVec:
    case Kind::LocalStore:
    case Kind::If:
    case Kind::While:
    case Kind::Yield:
    case Kind::Barrier:
      return false;
    default:
      return true;
  }
}

inline bool Op::pure() const {
  switch (kind) {
    case Kind::Const:
    case Kind::Scalar:
    case Kind::Builtin:
    case Kind::Unary:
    case Kind::Binary:
    case Kind::Compare:
    case Kind::Select:
    case Kind::Fma:
    case Kind::Cast:
    case Kind::Extract:
    case Kind::Call:
      return true;
    default:
      return false;
  }
}

struct Region {
  std::vector<uint32_t> ops;
};

struct BufferDecl {
  std::string name;
  Type type;
  Access access;
};
struct ScalarDecl {
  std::string name;
  Type type;
};
struct SharedDecl {
  std::string name;
  Type type;
  uint32_t count;
};

struct Function;

struct Kernel {
  std::string name, spec;
  Limits limits;
  std::array<uint32_t, 3> group{64, 1, 1};
  std::vector<BufferDecl> buffers;
  std::vector<ScalarDecl> scalars;
  std::vector<SharedDecl> shared;
  std::vector<Type> locals;
  std::vector<Op> ops;
  std::vector<Region> regions;                             ///< regions[0]: the kernel body
  std::vector<Loc> locs;                                   ///< the statements that recorded a place
  std::vector<std::shared_ptr<const Function>> functions;  ///< what Call ops call (by index)
  bool uses_barrier = false;
  bool is_function = false;  ///< a Function's body

  uint32_t threads() const { return group[0] * group[1] * group[2]; }
  /// "[kernel 'name'] " (or "[function 'name'] ") for error messages.
  std::string prefix() const { return (is_function ? "[function '" : "[kernel '") + name + "'] "; }
  /// "file:line" of a recorded place (the file's name without its folder).
  std::string loc_text(uint32_t loc) const {
    std::string f = locs[loc].file_name();
    if (auto s = f.rfind('/'); s != std::string::npos) f = f.substr(s + 1);
    return f + ":" + std::to_string(locs[loc].line());
  }
  std::string where(uint32_t loc) const { return loc == kNone ? "" : " (" + loc_text(loc) + ")"; }
};

/// A kernel function (kiln::kernel::Function) as traced: its body is a kernel whose scalars are
/// the parameters and whose region 0 ends with a Yield of the result; straight-line code (no
/// memory, control flow, barriers, subgroups or thread indices), optimised once.
struct Function {
  std::string name;  ///< unique in a process: the generated sources name it after this
  std::vector<Type> params;
  Type result = Type::F32;
  Kernel body;
  /// The fast form (kiln::kernel::Function's guard and fast bodies), or none: where guard (a
  /// bool) holds, fast gives body's bits.
  std::shared_ptr<const Function> guard, fast;
  /// What the body and the functions it calls hold, for the renderers' preludes (so that they
  /// need not walk the bodies for every kernel): value types (bit per Type), unary functions
  /// (bit per UnaryFn; unary_f32: those of f32 values), f32 fma, non-finite float constants and
  /// float comparisons.
  struct Uses {
    uint32_t types = 0, unary = 0, unary_f32 = 0;
    bool fma_f32 = false, special = false, float_compare = false;
    /// Adds what another body (a callee, a fast form) holds.
    Uses& operator|=(const Uses& o) {
      types |= o.types;
      unary |= o.unary;
      unary_f32 |= o.unary_f32;
      fma_f32 = fma_f32 || o.fma_f32;
      special = special || o.special;
      float_compare = float_compare || o.float_compare;
      return *this;
    }
  } uses;
  /// The type of the IR value of a call (f16 and bf16 values are f32 values in the IR).
  Type value_type() const { return result == Type::F16 || result == Type::BF16 ? Type::F32 : result; }
  /// Its definition per target (index: Target; 4: the C++ target's vector form), rendered on
  /// first use.
  mutable std::mutex text_mu;
  mutable std::string text[5];
};

/// The Uses of a function whose body is `body` (its own ops and those of the functions it calls).
Function::Uses function_uses(const Kernel& body);

/// Calls f(id) for every op reachable from region r of kernel k (an ir::Kernel, const or not),
/// in program order: an op before the ops of its regions. f may change ops, not regions.
template <class K, class F>
void for_each_op(K& k, uint32_t r, F&& f) {
  if (r == kNone) return;
  for (uint32_t id : k.regions[r].ops) {
    f(id);
    const auto& reg = k.ops[id].region;
    if (reg[0] == kNone) continue;  // most ops hold no region: no call
    for_each_op(k, reg[0], f);
    for_each_op(k, reg[1], f);
  }
}

/// fold_op's answer when op folds to a constant.
inline constexpr uint32_t kFolded = UINT32_MAX - 1;
/// What constant folding makes of op, given the ops its operands are: kNone (nothing), the id of
/// an operand whose value it is (x + 0, a select on a constant), or kFolded with `out` the
/// constant (the tracer folds as it records; fold_constants after lowering and unrolling).
uint32_t fold_op(const Kernel& k, const Op& op, Op& out);

/// The passes, in the order optimize() runs them.
void fold_constants(Kernel& k);
bool unroll_loops(Kernel& k, uint32_t max_count);  ///< true when a loop was unrolled
void eliminate_common(Kernel& k);
void eliminate_dead(Kernel& k);
bool lower_subgroups(Kernel& k);  ///< without Limits::subgroups: subgroups of one lane (true: changed)
void optimize(Kernel& k);

/// Checks run when tracing ends (barriers in divergent control flow, shared memory size).
void validate(const Kernel& k);
/// One flag (0 or 1) per op or local: a byte each, not std::vector<bool>'s bits, as the planners
/// read them on every op.
using Flags = std::vector<uint8_t>;
/// For every op: does its value (or, for control flow, its condition) vary between the threads
/// of a group? Index: op id. `locals` (when given) receives the same for each local slot.
Flags divergence(const Kernel& k, Flags* locals = nullptr);

/// Uses of each value (op id -> number of operand uses, in reachable regions).
std::vector<uint32_t> use_counts(const Kernel& k);

}  // namespace kiln::kernel::ir
