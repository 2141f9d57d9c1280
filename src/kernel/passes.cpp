// SPDX-License-Identifier: MIT OR Apache-2.0
// Passes over the kernel IR: constant folding, loop unrolling by compile-time count, common
// subexpressions, dead code, and the lowering of subgroup operations to one-lane subgroups.
// Each pass keeps op ids stable: a replaced value is redirected (its uses renamed) and the op
// leaves its region, so ids index `ops` for the kernel's life.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "kernel/ir.h"
#include "kernel/value_table.h"
#include "kiln/half.h"

namespace kiln::kernel::ir {
namespace {

/// Renames operands through `repl` (chains followed), in every reachable op.
void apply(Kernel& k, std::vector<uint32_t>& repl) {
  auto find = [&](uint32_t v) {
    while (repl[v] != kNone) v = repl[v];
    return v;
  };
  for (Op& op : k.ops)
    for (uint8_t i = 0; i < op.nin; ++i) op.in[i] = find(op.in[i]);
}

int64_t wrap(int64_t v, Type t) {
  if (t == Type::I32) return static_cast<int32_t>(v);
  if (t == Type::U32) return static_cast<uint32_t>(v);
  if (t == Type::Bool) return v != 0;
  return v;
}

/// Folds `op` whose operands are the constants `a` (and `b`); false when it cannot.
bool fold(Op& op, const Op* a, const Op* b, const Op* c) {
  const Type t = a->type;
  const bool fl = t == Type::F32;
  // f64 is not folded (the folds below compute in f32 or integers); a select is a copy
  if (op.kind != Kind::Select && (t == Type::F64 || op.type == Type::F64)) return false;
  auto as_f = [](const Op* o) { return static_cast<float>(o->f); };
  Op r;
  r.kind = Kind::Const;
  r.type = op.type;
  switch (op.kind) {
    case Kind::Binary: {
      auto f = static_cast<BinaryFn>(op.attr);
      if (fl) {
        float x = as_f(a), y = as_f(b), z;
        switch (f) {
          case BinaryFn::Add:
            z = x + y;
            break;
          case BinaryFn::Sub:
            z = x - y;
            break;
          case BinaryFn::Mul:
            z = x * y;
            break;
          case BinaryFn::Div:
            z = x / y;
            break;
          case BinaryFn::Min:
            z = std::fmin(x, y);
            break;
          case BinaryFn::Max:
            z = std::fmax(x, y);
            break;
          default:
            return false;
        }
        r.f = z;
      } else {
        int64_t x = a->i, y = b->i, z;
        bool u = t == Type::U32;
        switch (f) {
          case BinaryFn::Add:  // integers wrap, as on every target
            z = static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
            break;
          case BinaryFn::Sub:
            z = static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
            break;
          case BinaryFn::Mul:
            z = static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
            break;
          case BinaryFn::Div:
            if (y == 0 || (y == -1 && t != Type::U32)) return false;
            z = x / y;
            break;
          case BinaryFn::Mod:
            if (y == 0 || (y == -1 && t != Type::U32)) return false;
            z = x % y;
            break;
          case BinaryFn::And:
            z = x & y;
            break;
          case BinaryFn::Or:
            z = x | y;
            break;
          case BinaryFn::Xor:
            z = x ^ y;
            break;
          case BinaryFn::Shl:
            if (y < 0 || y >= (t == Type::I64 ? 64 : 32)) return false;
            z = static_cast<int64_t>(static_cast<uint64_t>(x) << y);
            break;
          case BinaryFn::Shr:
            if (y < 0 || y >= (t == Type::I64 ? 64 : 32)) return false;
            z = u ? static_cast<int64_t>(static_cast<uint64_t>(x) >> y) : x >> y;
            break;
          case BinaryFn::Min:
            z = std::min(x, y);
            break;
          case BinaryFn::Max:
            z = std::max(x, y);
            break;
          default:
            return false;
        }
        r.i = wrap(z, t);
      }
      break;
    }
    case Kind::Compare: {
      auto f = static_cast<CmpFn>(op.attr);
      double x = fl ? a->f : static_cast<double>(a->i), y = fl ? b->f : static_cast<double>(b->i);
      if (!fl && (a->i > (int64_t{1} << 52) || b->i > (int64_t{1} << 52))) return false;
      bool z = f == CmpFn::Lt   ? x < y
               : f == CmpFn::Le ? x <= y
               : f == CmpFn::Gt ? x > y
               : f == CmpFn::Ge ? x >= y
               : f == CmpFn::Eq ? x == y
                                : x != y;
      r.i = z;
      break;
    }
    case Kind::Unary: {
      auto f = static_cast<UnaryFn>(op.attr);
      if (f == UnaryFn::Neg) {
        if (fl)
          r.f = -as_f(a);
        else
          r.i = wrap(static_cast<int64_t>(0 - static_cast<uint64_t>(a->i)), t);
      } else if (f == UnaryFn::Not && t == Type::Bool) {
        r.i = !a->i;
      } else if (f == UnaryFn::RoundF16 && fl) {
        r.f = static_cast<float>(Half(as_f(a)));
      } else if (f == UnaryFn::RoundBF16 && fl) {
        r.f = static_cast<float>(BFloat16(as_f(a)));
      } else {
        return false;
      }
      break;
    }
    case Kind::Select:
      r = a->i ? *b : *c;
      break;
    case Kind::Fma:
      r.f = std::fma(as_f(a), as_f(b), as_f(c));
      break;
    case Kind::Cast:
      if (op.attr) return false;  // a bitcast
      if (op.type == Type::F32)
        r.f = fl ? a->f : static_cast<double>(static_cast<float>(a->i));
      else if (fl) {
        if (!(std::fabs(a->f) < 2147483647.0)) return false;
        r.i = wrap(static_cast<int64_t>(a->f), op.type);
      } else
        r.i = wrap(a->i, op.type);
      break;
    default:
      return false;
  }
  r.loc = op.loc;
  op = r;
  return true;
}

bool is_const(const Kernel& k, uint32_t v) { return k.ops[v].kind == Kind::Const; }
bool const_is(const Kernel& k, uint32_t v, double x) {
  const Op& o = k.ops[v];
  return o.kind == Kind::Const && (is_float(o.type) ? o.f == x : static_cast<double>(o.i) == x);
}

}  // namespace

uint32_t fold_op(const Kernel& k, const Op& op, Op& out) {
  if (!op.pure() || op.kind == Kind::Const || op.nin == 0) return kNone;
  bool all = true;
  for (uint8_t i = 0; i < op.nin; ++i) all = all && is_const(k, op.in[i]);
  if (op.kind == Kind::Select && is_const(k, op.in[0])) return k.ops[op.in[0]].i ? op.in[1] : op.in[2];
  if (all) {
    const Op* a = &k.ops[op.in[0]];
    const Op* b = op.nin > 1 ? &k.ops[op.in[1]] : nullptr;
    const Op* c = op.nin > 2 ? &k.ops[op.in[2]] : nullptr;
    out = op;
    return fold(out, a, b, c) ? kFolded : kNone;
  }
  if (op.kind != Kind::Binary) return kNone;
  const auto f = static_cast<BinaryFn>(op.attr);
  if (!is_float(op.type)) {  // integer identities: x+0, x-0, x*1, x/1, x|0, x^0, x<<0, x>>0
    if ((f == BinaryFn::Add || f == BinaryFn::Or || f == BinaryFn::Xor) && const_is(k, op.in[0], 0)) return op.in[1];
    if ((f == BinaryFn::Add || f == BinaryFn::Sub || f == BinaryFn::Or || f == BinaryFn::Xor || f == BinaryFn::Shl ||
         f == BinaryFn::Shr) &&
        const_is(k, op.in[1], 0))
      return op.in[0];
    if ((f == BinaryFn::Mul || f == BinaryFn::Div) && const_is(k, op.in[1], 1)) return op.in[0];
    if (f == BinaryFn::Mul && const_is(k, op.in[0], 1)) return op.in[1];
    return kNone;
  }
  if (f == BinaryFn::Mul && const_is(k, op.in[1], 1)) return op.in[0];
  if (f == BinaryFn::Mul && const_is(k, op.in[0], 1)) return op.in[1];
  return kNone;
}

void fold_constants(Kernel& k) {
  std::vector<uint32_t> repl(k.ops.size(), kNone);
  bool any = false;  // a value replaced by another
  for_each_op(k, 0, [&](uint32_t id) {
    Op& op = k.ops[id];
    for (uint8_t i = 0; i < op.nin; ++i)
      while (repl[op.in[i]] != kNone) op.in[i] = repl[op.in[i]];
    Op folded;
    const uint32_t r = fold_op(k, op, folded);
    if (r == kFolded) {
      k.ops[id] = folded;
    } else if (r != kNone) {
      repl[id] = r;
      any = true;
    }
  });
  if (any) apply(k, repl);
}

namespace {

/// A for loop whose begin, end and step are constants (what the unroller may unroll).
bool constant_bounds(const Kernel& k, const Op& op) {
  return op.kind == Kind::For && is_const(k, op.in[0]) && is_const(k, op.in[1]) && is_const(k, op.in[2]);
}

struct Unroller {
  Kernel& k;
  uint32_t max_count;
  bool unrolled = false;

  size_t size(uint32_t r) {
    if (r == kNone) return 0;
    size_t n = 0;
    for (uint32_t id : k.regions[r].ops) n += 1 + size(k.ops[id].region[0]) + size(k.ops[id].region[1]);
    return n;
  }

  /// Copies the ops of region `r` to the end of `out`, renaming through `map`.
  void clone(uint32_t r, std::map<uint32_t, uint32_t>& map, std::vector<uint32_t>& out) {
    std::vector<uint32_t> src = k.regions[r].ops;
    for (uint32_t id : src) {
      Op op = k.ops[id];
      for (uint8_t i = 0; i < op.nin; ++i)
        if (auto it = map.find(op.in[i]); it != map.end()) op.in[i] = it->second;
      uint32_t nid = static_cast<uint32_t>(k.ops.size());
      k.ops.push_back(op);
      map[id] = nid;
      for (int j = 0; j < 2; ++j) {
        if (op.region[j] == kNone) continue;
        uint32_t nr = static_cast<uint32_t>(k.regions.size());
        k.regions.emplace_back();
        std::vector<uint32_t> inner;
        clone(op.region[j], map, inner);
        k.regions[nr].ops = std::move(inner);
        k.ops[nid].region[j] = nr;
      }
      out.push_back(nid);
    }
  }

  void walk(uint32_t r) {
    if (r == kNone) return;
    std::vector<uint32_t> out;
    std::vector<uint32_t> src = k.regions[r].ops;
    for (uint32_t id : src) {
      walk(k.ops[id].region[0]);
      walk(k.ops[id].region[1]);
      const Op op = k.ops[id];
      if (constant_bounds(k, op)) {
        int64_t b = k.ops[op.in[0]].i, e = k.ops[op.in[1]].i, s = k.ops[op.in[2]].i;
        int64_t n = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : -1;
        if (n >= 0 && n <= max_count && static_cast<size_t>(n) * size(op.region[0]) <= 1024) {
          unrolled = true;
          for (int64_t it = 0; it < n; ++it) {
            Op c;
            c.kind = Kind::Const;
            c.type = op.type;
            c.i = wrap(b + it * s, op.type);
            uint32_t cid = static_cast<uint32_t>(k.ops.size());
            k.ops.push_back(c);
            out.push_back(cid);
            std::map<uint32_t, uint32_t> map{{id, cid}};
            clone(op.region[0], map, out);
          }
          continue;
        }
      }
      out.push_back(id);
    }
    k.regions[r].ops = std::move(out);
  }
};

}  // namespace

bool unroll_loops(Kernel& k, uint32_t max_count) {
  // Most kernels have no loop with constant bounds: then there is nothing to walk.
  if (std::none_of(k.ops.begin(), k.ops.end(), [&](const Op& op) { return constant_bounds(k, op); })) return false;
  Unroller u{k, max_count};
  u.walk(0);
  return u.unrolled;
}

namespace {

struct Cse {
  Kernel& k;
  std::vector<uint32_t> repl;
  ValueTable table;

  void walk(uint32_t r) {
    if (r == kNone) return;
    const size_t mark = table.mark();
    std::vector<uint32_t>& ops = k.regions[r].ops;
    size_t kept = 0;
    for (size_t n = 0; n < ops.size(); ++n) {
      const uint32_t id = ops[n];
      Op& op = k.ops[id];
      for (uint8_t i = 0; i < op.nin; ++i)
        while (repl[op.in[i]] != kNone) op.in[i] = repl[op.in[i]];
      if (op.pure()) {
        if (uint32_t found = table.find_or_add(id); found != kNone) {
          repl[id] = found;
          continue;
        }
      }
      ops[kept++] = id;
      walk(op.region[0]);
      walk(op.region[1]);
    }
    k.regions[r].ops.resize(kept);
    table.drop_to(mark);
  }
};

}  // namespace

void eliminate_common(Kernel& k) {
  Cse cse{k, std::vector<uint32_t>(k.ops.size(), kNone), ValueTable(k)};
  cse.walk(0);
  apply(k, cse.repl);
}

namespace {

/// An op that may go when nothing uses its value.
bool droppable(const Op& op) {
  return op.pure() || op.kind == Kind::Load || op.kind == Kind::LoadVec || op.kind == Kind::LocalLoad ||
         op.kind == Kind::Subgroup;
}

}  // namespace

void eliminate_dead(Kernel& k) {
  // Use counts are kept up to date as ops go, so one pass over a worklist finds every value
  // that becomes unused (and every store to a local that is no longer read). Only an if whose
  // regions became empty sends the pass round again.
  std::vector<uint32_t> uses(k.ops.size(), 0);  // use_counts(k), in the walk below
  std::vector<uint8_t> dead(k.ops.size(), 0);
  std::vector<uint32_t> local_reads(k.locals.size(), 0);
  std::vector<uint32_t> local_stores;  // every LocalStore (one list: a local rarely dies)
  std::vector<uint32_t> reachable;     // in program order (ops only leave it)
  reachable.reserve(k.ops.size());
  for_each_op(k, 0, [&](uint32_t id) {
    const Op& op = k.ops[id];
    reachable.push_back(id);
    for (uint8_t i = 0; i < op.nin; ++i) ++uses[op.in[i]];
    if (op.kind == Kind::LocalLoad) ++local_reads[op.obj];
    if (op.kind == Kind::LocalStore) local_stores.push_back(id);
  });
  std::vector<uint32_t> work;
  size_t dropped = 0, erased = 0;  // ops dropped, and dropped when the regions were last rewritten
  auto drop = [&](uint32_t id) {
    if (dead[id]) return;
    dead[id] = 1;
    ++dropped;
    work.push_back(id);
  };
  for (bool again = true; again;) {
    again = false;
    for (uint32_t id : reachable) {
      const Op& op = k.ops[id];
      if ((droppable(op) && uses[id] == 0) || (op.kind == Kind::LocalStore && local_reads[op.obj] == 0)) drop(id);
    }
    while (!work.empty()) {
      const Op& op = k.ops[work.back()];
      work.pop_back();
      for (uint8_t i = 0; i < op.nin; ++i)
        if (--uses[op.in[i]] == 0 && droppable(k.ops[op.in[i]])) drop(op.in[i]);
      if (op.kind == Kind::LocalLoad && --local_reads[op.obj] == 0)
        for (uint32_t s : local_stores)
          if (k.ops[s].obj == op.obj) drop(s);
    }
    if (dropped != erased) {  // most kernels as traced: nothing to drop, nothing to rewrite
      for (Region& r : k.regions) std::erase_if(r.ops, [&](uint32_t id) { return dead[id] != 0; });
      std::erase_if(reachable, [&](uint32_t id) { return dead[id] != 0; });
      erased = dropped;
    }
    auto empty = [&](uint32_t r) { return r == kNone || k.regions[r].ops.empty(); };
    for (uint32_t id : reachable) {
      const Op& op = k.ops[id];
      if (op.kind == Kind::If && empty(op.region[0]) && empty(op.region[1])) {
        drop(id);
        again = true;
      }
    }
  }
}

bool lower_subgroups(Kernel& k) {
  if (k.limits.subgroups) return false;
  bool lane = false;
  std::vector<uint32_t> repl;
  for (uint32_t id = 0; id < k.ops.size(); ++id) {
    Op& op = k.ops[id];
    if (op.kind == Kind::Subgroup) {
      if (repl.empty()) repl.assign(k.ops.size(), kNone);
      repl[id] = op.in[0];
    } else if (op.kind == Kind::Builtin && op.attr == static_cast<uint8_t>(Builtin::LaneId)) {
      op = Op{};
      op.kind = Kind::Const;
      op.type = Type::I32;
      lane = true;
    }
  }
  if (!repl.empty()) apply(k, repl);
  return lane || !repl.empty();
}

void optimize(Kernel& k) {
  // The tracer folds each op and merges it with an earlier equal one as it records it, and
  // merging equal values makes nothing newly constant: folding and merging run again only where
  // lowering or unrolling made new constants and copies.
  const bool lowered = lower_subgroups(k);
  if (lowered) fold_constants(k);
  const bool unrolled = unroll_loops(k, 16);
  if (unrolled) fold_constants(k);
  if (lowered || unrolled) eliminate_common(k);
  eliminate_dead(k);
}

}  // namespace kiln::kernel::ir
