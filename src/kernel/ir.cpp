// SPDX-License-Identifier: MIT OR Apache-2.0
// The IR's names, the checks run when tracing ends, the divergence analysis and the IR dump.
#include "kernel/ir.h"

#include <cmath>
#include <cstring>
#include <functional>

namespace kiln::kernel {

std::string_view type_name(Type t) {
  static constexpr const char* n[] = {"bool", "i32", "u32", "i64", "f16", "bf16", "f32", "f64"};
  return static_cast<unsigned>(t) < 8 ? n[static_cast<unsigned>(t)] : "type?";
}
std::string_view target_name(Target t) {
  static constexpr const char* n[] = {"cpp", "cuda", "glsl", "wgsl"};
  return static_cast<unsigned>(t) < 4 ? n[static_cast<unsigned>(t)] : "target?";
}
std::string Limits::str() const {
  return "shared=" + std::to_string(shared_bytes) + ",threads=" + std::to_string(max_group_threads) +
         ",subgroup=" + std::to_string(subgroups ? subgroup_size : 1);
}

const std::string& Kernel::name() const { return k_->name; }
const std::string& Kernel::specialisation() const { return k_->spec; }
const Limits& Kernel::limits() const { return k_->limits; }
std::array<uint32_t, 3> Kernel::group_size() const { return k_->group; }
std::string Kernel::key(Target t) const {
  return k_->name + "|" + k_->spec + "|" + std::string(target_name(t)) + "|" + k_->limits.str();
}

namespace ir {

const char* unary_name(UnaryFn f) {
  static constexpr const char* n[] = {"neg",     "not", "exp",   "log",  "sqrt", "rsqrt", "tanh",      "erf",
                                      "sigmoid", "abs", "floor", "ceil", "sin",  "cos",   "round_f16", "round_bf16"};
  return n[static_cast<unsigned>(f)];
}
const char* binary_name(BinaryFn f) {
  static constexpr const char* n[] = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "min", "max", "pow"};
  return n[static_cast<unsigned>(f)];
}
const char* cmp_name(CmpFn f) {
  static constexpr const char* n[] = {"<", "<=", ">", ">=", "==", "!="};
  return n[static_cast<unsigned>(f)];
}

std::vector<uint32_t> use_counts(const Kernel& k) {
  std::vector<uint32_t> n(k.ops.size(), 0);
  for_each_op(k, 0, [&](uint32_t id) {
    const Op& op = k.ops[id];
    for (uint8_t i = 0; i < op.nin; ++i) ++n[op.in[i]];
  });
  return n;
}

namespace {

struct Divergence {
  const Kernel& k;
  Flags div;
  Flags local;
  /// A flag read before this walk set it flipped (a local, or a while's condition read by its
  /// condition region): the walk must run again. A value's own flag is final in one walk, as
  /// its operands come before it.
  bool changed = false;

  static bool set(Flags& v, size_t i, bool x) {
    if (!x || v[i]) return false;
    v[i] = true;
    return true;
  }

  void walk(uint32_t r, bool ctx) {
    if (r == kNone) return;
    for (uint32_t id : k.regions[r].ops) {
      const Op& op = k.ops[id];
      bool any = false;
      for (uint8_t i = 0; i < op.nin; ++i) any = any || div[op.in[i]];
      switch (op.kind) {
        case Kind::Builtin:
          set(div, id,
              op.attr == static_cast<uint8_t>(Builtin::ThreadId) || op.attr == static_cast<uint8_t>(Builtin::LaneId));
          break;
        case Kind::Atomic:
        case Kind::Subgroup:
          set(div, id, true);
          break;
        case Kind::LocalLoad:
          set(div, id, local[op.obj]);
          break;
        case Kind::LocalStore:
          changed = set(local, op.obj, any || ctx) || changed;
          break;
        case Kind::If:
          set(div, id, any);
          walk(op.region[0], ctx || any);
          walk(op.region[1], ctx || any);
          break;
        case Kind::For:
          set(div, id, any);
          walk(op.region[0], ctx || any);
          break;
        case Kind::While: {
          const auto& cond = k.regions[op.region[0]].ops;
          walk(op.region[0], ctx || div[id]);
          changed = set(div, id, !cond.empty() && div[k.ops[cond.back()].in[0]]) || changed;
          walk(op.region[1], ctx || div[id]);
          break;
        }
        default:
          set(div, id, any);
      }
    }
  }
};

}  // namespace

Flags divergence(const Kernel& k, Flags* locals) {
  Divergence d{k, Flags(k.ops.size(), 0), Flags(k.locals.size(), 0)};
  do {
    d.changed = false;
    d.walk(0, false);
  } while (d.changed);
  if (locals) *locals = d.local;
  return d.div;
}

void validate(const Kernel& k) {
  uint64_t bytes = 0;
  for (const SharedDecl& s : k.shared) {
    uint64_t es = s.type == Type::I64 || s.type == Type::F64      ? 8
                  : (s.type == Type::F16 || s.type == Type::BF16) ? 2
                                                                  : 4;
    bytes += es * s.count;
  }
  if (bytes > k.limits.shared_bytes)
    throw Error(k.prefix() + "shared arrays take " + std::to_string(bytes) + " bytes, over the limit of " +
                std::to_string(k.limits.shared_bytes) + " bytes per group");
  if (!k.uses_barrier) return;
  Flags div = divergence(k);
  std::function<void(uint32_t, uint32_t)> walk = [&](uint32_t r, uint32_t div_loc) {
    if (r == kNone) return;
    for (uint32_t id : k.regions[r].ops) {
      const Op& op = k.ops[id];
      if (op.kind == Kind::Barrier && div_loc != kNone)
        throw Error(k.prefix() + "barrier()" + k.where(op.loc) +
                    " inside control flow that depends on the thread (the block at " + k.loc_text(div_loc) +
                    "): every thread of a group must reach it");
      bool d = false;
      if (op.kind == Kind::If || op.kind == Kind::For) d = div[id];
      if (op.kind == Kind::While) d = div[id];
      uint32_t inner = div_loc != kNone ? div_loc : (d ? op.loc : kNone);
      if (op.kind == Kind::While)
        walk(op.region[0], div_loc);
      else
        walk(op.region[0], inner);
      walk(op.region[1], inner);
    }
  };
  walk(0, kNone);
}

}  // namespace ir

namespace {

std::string const_text(const ir::Op& op) {
  if (op.type == Type::F32 || op.type == Type::F64) {
    char b[48];
    std::snprintf(b, sizeof b, op.type == Type::F64 ? "%.17g" : "%.9g", op.f);
    return b;
  }
  return std::to_string(op.i);
}

void dump_region(const ir::Kernel& k, uint32_t r, int depth, std::string& out) {
  using ir::Kind;
  if (r == ir::kNone) return;
  std::string pad(static_cast<size_t>(depth) * 2, ' ');
  for (uint32_t id : k.regions[r].ops) {
    const ir::Op& op = k.ops[id];
    std::string line = pad;
    if (op.has_value() && op.kind != Kind::For)
      line += "%" + std::to_string(id) + ":" + std::string(type_name(op.type)) + " = ";
    std::string args;
    for (uint8_t i = 0; i < op.nin; ++i) args += (i ? ", %" : "%") + std::to_string(op.in[i]);
    switch (op.kind) {
      case Kind::Const:
        line += "const " + const_text(op);
        break;
      case Kind::Scalar:
        line += "scalar " + k.scalars[op.obj].name;
        break;
      case Kind::Builtin: {
        static const char* n[] = {"thread_id", "group_id", "num_groups", "lane_id"};
        line += std::string(n[op.attr]) + "." + "xyz"[op.axis];
        break;
      }
      case Kind::Unary:
        line += std::string(ir::unary_name(static_cast<ir::UnaryFn>(op.attr))) + " " + args;
        break;
      case Kind::Binary:
        line += std::string(ir::binary_name(static_cast<ir::BinaryFn>(op.attr))) + " " + args;
        break;
      case Kind::Compare:
        line += std::string(ir::cmp_name(static_cast<ir::CmpFn>(op.attr))) + " " + args;
        break;
      case Kind::Select:
        line += "select " + args;
        break;
      case Kind::Fma:
        line += "fma " + args;
        break;
      case Kind::Cast:
        line += (op.attr ? "bitcast " : "cast ") + args;
        break;
      case Kind::Load:
      case Kind::LoadVec:
      case Kind::Store:
      case Kind::StoreVec:
      case Kind::Atomic: {
        static const char* n[] = {"load", "store", "loadvec", "extract", "storevec", "atomic"};
        line += std::string(n[static_cast<int>(op.kind) - static_cast<int>(Kind::Load)]);
        if (op.lanes > 1) line += std::to_string(op.lanes);
        line += " " + (op.shared ? k.shared[op.obj].name : k.buffers[op.obj].name) + "[" + args + "]";
        break;
      }
      case Kind::Extract:
        line += "extract " + args + "." + std::to_string(op.axis);
        break;
      case Kind::LocalLoad:
        line += "local " + std::to_string(op.obj);
        break;
      case Kind::LocalStore:
        line += "local " + std::to_string(op.obj) + " = " + args;
        break;
      case Kind::If:
        line += "if " + args;
        break;
      case Kind::For:
        line += "for %" + std::to_string(id) + " in " + args;
        break;
      case Kind::While:
        line += "while";
        break;
      case Kind::Yield:
        line += "yield " + args;
        break;
      case Kind::Barrier:
        line += "barrier";
        break;
      case Kind::Subgroup:
        line += "subgroup" + std::to_string(op.attr) + " " + args;
        break;
      case Kind::Call:
        line += "call " + k.functions[op.obj]->name + " " + args;
        break;
    }
    out += line + "\n";
    if (op.region[0] != ir::kNone) dump_region(k, op.region[0], depth + 1, out);
    if (op.region[1] != ir::kNone) {
      out += pad + (op.kind == Kind::While ? "do\n" : "else\n");
      dump_region(k, op.region[1], depth + 1, out);
    }
  }
}

}  // namespace

namespace ir {

Function::Uses function_uses(const Kernel& body) {
  Function::Uses u;
  for (const Region& r : body.regions)
    for (uint32_t id : r.ops) {
      const Op& op = body.ops[id];
      u.types |= 1u << static_cast<int>(op.type);
      if (op.kind == Kind::Unary) u.unary |= 1u << op.attr;
      if (op.kind == Kind::Unary && op.type == Type::F32) u.unary_f32 |= 1u << op.attr;
      u.fma_f32 = u.fma_f32 || (op.kind == Kind::Fma && op.type == Type::F32);
      u.special = u.special || (op.kind == Kind::Const && is_float(op.type) && !std::isfinite(op.f));
      u.float_compare = u.float_compare || (op.kind == Kind::Compare && is_float(body.ops[op.in[0]].type));
    }
  for (const ScalarDecl& p : body.scalars) u.types |= 1u << static_cast<int>(p.type);
  for (Type t : body.locals) u.types |= 1u << static_cast<int>(t);
  for (const auto& f : body.functions) u |= f->uses;
  return u;
}

}  // namespace ir

std::string dump(const Kernel& kernel) {
  const ir::Kernel& k = kernel.ir();
  std::string out = "kernel " + k.name + " [" + k.spec + "] group " + std::to_string(k.group[0]) + "x" +
                    std::to_string(k.group[1]) + "x" + std::to_string(k.group[2]) + "\n";
  dump_region(k, 0, 1, out);
  return out;
}

}  // namespace kiln::kernel
