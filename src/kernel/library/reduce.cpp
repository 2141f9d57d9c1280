// SPDX-License-Identifier: MIT OR Apache-2.0
// Reductions of the library (kernel/library.h): one group per output element. Each thread
// folds a strided share of the reduced range in index order, then the group combines the
// partial results in a fixed shared-memory tree, so the result is the same on every run.
// Arg-reductions carry the index and break ties by the smaller one (the first occurrence);
// NaN is the extreme of max and min and of their arg forms, as on the CPU.
#include <algorithm>
#include <limits>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

using kiln::ir::OpKind;
constexpr uint32_t kGroup = 128;

Val is_nan(Val x) { return x != x; }

/// Whether (vb, ib) replaces (va, ia) as the extreme (max when mx) of an arg-reduction.
Val arg_better(bool mx, Val va, Val ia, Val vb, Val ib) {
  if (!is_float(va.type)) {
    const Val strict = mx ? vb > va : vb < va;
    return strict || (vb == va && ib < ia);
  }
  const Val na = is_nan(va), nb = is_nan(vb);
  const Val strict = mx ? vb > va : vb < va;
  return (nb && !na) || (!na && !nb && strict) || ((vb == va || (na && nb)) && ib < ia);
}

/// The combination of two partial values of a value reduction (Any, All: 0/1 in i32).
Val combine(OpKind kind, Val a, Val b) {
  switch (kind) {
    case OpKind::Prod:
      return a * b;
    case OpKind::Any:
      return a | b;
    case OpKind::All:
      return a & b;
    case OpKind::Max:
    case OpKind::Min: {
      const Val pick = select(kind == OpKind::Max ? b > a : b < a, b, a);
      return is_float(a.type) ? select(is_nan(a), a, select(is_nan(b), b, pick)) : pick;
    }
    default:  // Sum, Mean, Var
      return a + b;
  }
}

Val identity(OpKind kind, Type t) {
  if (kind == OpKind::Prod || kind == OpKind::All) return Val::constant(1, t);
  if (kind == OpKind::Max || kind == OpKind::Min) {
    const bool mx = kind == OpKind::Max;
    if (is_float(t))
      return Val::constant(mx ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), t);
    if (t == Type::I64) return Val(static_cast<long long>(mx ? INT64_MIN : INT64_MAX));
    return Val::constant(mx ? INT32_MIN : INT32_MAX, t);
  }
  return Val::constant(0, t);
}

/// A loaded input value as the accumulator's type (Any, All: whether it is nonzero, as 0/1).
Val to_acc(OpKind kind, Val x, Type acc) {
  if (kind == OpKind::Any || kind == OpKind::All) {
    const Val nz = x.type == Type::Bool ? x : x != Val::constant(0, x.type);
    return select(nz, Val::constant(1, acc), Val::constant(0, acc));
  }
  if (x.type == Type::Bool) return select(x, Val::constant(1, acc), Val::constant(0, acc));
  return x.type == acc ? x : cast(x, acc);
}

Type acc_of(Store s) {
  if (s == Store::F32 || s == Store::F16 || s == Store::BF16) return Type::F32;  // f16, bf16: in f32 as the CPU
  return s == Store::F64 ? Type::F64 : s == Store::I32 ? Type::I32 : Type::I64;
}

}  // namespace

std::optional<Reduce> reduce_of(const kiln::ir::Op& op, bool float64) {
  if (op.inputs.size() != 1 || op.outputs.size() != 1) return std::nullopt;
  const DType it = op.inputs[0].dtype, ot = op.outputs[0].dtype;
  // 1- and 2-byte integers and bool too: compared and summed in i64, stored with their low bits
  const std::optional<Store> si = storage_of(it, false), so = storage_of(ot, false);
  if (!si || !so) return std::nullopt;
  const bool fin = *si == Store::F32 || *si == Store::F64 || *si == Store::F16 || *si == Store::BF16;
  Reduce r;
  r.kind = op.kind;
  r.in = *si;
  r.out = *so;
  switch (op.kind) {
    case OpKind::Sum:
    case OpKind::Prod:
    case OpKind::Mean:
      if (fin && ot == it) {
        r.acc = acc_of(*si);
      } else if (op.kind != OpKind::Mean && !fin && (ot == DType::I64 || (ot == DType::I32 && it == DType::I32))) {
        r.acc = Type::I64;
      } else {
        return std::nullopt;
      }
      break;
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      if (ot != ((op.kind == OpKind::Max || op.kind == OpKind::Min) ? it : DType::I64)) return std::nullopt;
      r.acc = acc_of(*si);
      break;
    case OpKind::Any:
    case OpKind::All:
      if (ot != DType::Bool) return std::nullopt;
      r.acc = Type::I32;
      break;
    case OpKind::Var: {
      if (!fin || ot != it) return std::nullopt;
      const kiln::ir::ReduceAttrs a = kiln::ir::ReduceAttrs::decode(op);
      r.acc = float64 || *si == Store::F64 ? Type::F64 : Type::F32;  // both passes in f32 without f64
      r.push = {Arg(a.correction), Arg(static_cast<int32_t>(a.sqrt ? 1 : 0))};
      break;
    }
    default:
      return std::nullopt;
  }
  r.name = std::string("reduce_") + std::string(kiln::ir::op_name(op.kind)) + "_" + store_name(r.in) + "_" +
           store_name(r.out) + "_" + std::string(type_name(r.acc));
  return r;
}

bool reduce_meta(const kiln::ir::Op& op, int32_t* meta) {
  const kiln::ir::TensorDesc &x = op.inputs[0], &o = op.outputs[0];
  if (!fits_i32(x) || !fits_i32(o)) return false;
  const kiln::ir::ReduceAttrs a = kiln::ir::ReduceAttrs::decode(op);
  std::vector<bool> red(x.shape.size(), false);
  for (int64_t d : a.dims)
    if (d >= 0 && d < static_cast<int64_t>(red.size())) red[static_cast<size_t>(d)] = true;
  std::fill(meta, meta + kReduceMetaInts, 0);
  int nk = 0, nr = 0;
  int64_t R = 1, nout = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (red[d]) {
      meta[kRedShape + nr] = static_cast<int32_t>(x.shape[d]);
      meta[kRedShape + kMaxRank + nr] = static_cast<int32_t>(x.strides[d]);
      R *= x.shape[d];
      ++nr;
      continue;
    }
    // The output dim of kept dim d: the same index with keepdim, else the kept dims before it.
    const size_t od = a.keepdim ? d : static_cast<size_t>(nk);
    if (od >= o.shape.size()) return false;
    meta[kKeptShape + nk] = static_cast<int32_t>(x.shape[d]);
    meta[kKeptShape + kMaxRank + nk] = static_cast<int32_t>(x.strides[d]);
    meta[kOutStrides + nk] = static_cast<int32_t>(o.strides[od]);
    nout *= x.shape[d];
    ++nk;
  }
  if (nout != o.numel() || R > INT32_MAX) return false;
  meta[kOut] = static_cast<int32_t>(nout);
  meta[kRed] = static_cast<int32_t>(R);
  meta[kKept] = nk;
  meta[kNRed] = nr;
  meta[kInOffset] = static_cast<int32_t>(x.offset);
  meta[kOutOffset] = static_cast<int32_t>(o.offset);
  return true;
}

namespace {

/// Combines the group's partial values in vals (and indices in idx for the arg forms) in a
/// fixed tree; vals[0] (idx[0]) holds the result after the last barrier.
void group_tree(OpKind kind, bool arg, bool mx, const Memory& vals, const Shared<int32_t>& idx, Val t) {
  tree_steps(kGroup, [&](Val s) {
    if_(t < s, [&] {
      const Val va = vals[t], vb = vals[t + s];
      if (arg) {
        const Val ia = idx[t], ib = idx[t + s];
        const Val better = arg_better(mx, va, ia, vb, ib);
        vals[t] = select(better, vb, va);
        idx[t] = select(better, ib, ia);
      } else {
        vals[t] = combine(kind, va, vb);
      }
    });
  });
}

}  // namespace

Kernel trace_reduce(const Reduce& spec, const Limits& limits) {
  return trace_reduce_from(spec, limits, *buffer_source());
}

Kernel trace_reduce_from(const Reduce& spec, const Limits& limits, Source& src) {
  const bool arg = spec.kind == OpKind::ArgMax || spec.kind == OpKind::ArgMin;
  const bool mx = spec.kind == OpKind::ArgMax;
  const bool var = spec.kind == OpKind::Var;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Type at = spec.acc;
        const Memory out = arg ? Memory(b.output<int64_t>("out")) : declare_store(b, spec.out, "out", true);
        src.outputs(b);
        src.inputs(b, spec.in, "in");
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        src.scalars(b, meta);
        Val correction, take_root;
        if (var) {
          correction = at == Type::F64 ? b.scalar<double>("correction") : b.scalar<float>("correction");
          take_root = b.scalar<int32_t>("root");
        }
        const Memory vals = shared_of(b, at, "vals", kGroup);
        const Shared<int32_t> idx = b.shared<int32_t>("idx", kGroup);
        const Val t = thread_id(0);
        const Val gid = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = gid < meta[kOut];
        Var base(meta[kInOffset]), obase(meta[kOutOffset]);
        unravel(meta, meta[kKept], kKeptShape, select(valid, gid, Val(0)), base, &obase, kOutStrides);
        const OpKind folded = arg ? (mx ? OpKind::Max : OpKind::Min) : var ? OpKind::Sum : spec.kind;
        // One pass folds the inputs into acc with `fold`; given a centre, their deviations from
        // it instead: absolute (Max), else squared, after division by `scale` when given.
        auto pass = [&](const Val* centre, const Val* scale, OpKind fold) {
          Var acc(identity(fold, at));
          Var ai(Val(INT32_MAX));
          for_(t, meta[kRed], static_cast<int>(kGroup), [&](Val r) {
            Var off = Var(Val(base));
            unravel(meta, meta[kNRed], kRedShape, r, off, nullptr, -1);
            // the first pass reads each element once: a fused chain stores its steps then
            Val x = to_acc(spec.kind, src.at(off, centre ? nullptr : &valid), at);
            if (centre) {
              const Val d = scale ? (x - *centre) / *scale : x - *centre;
              x = fold == OpKind::Max ? abs(d) : d * d;
            }
            if (arg) {
              const Val better = arg_better(mx, acc, ai, x, r);
              acc = select(better, x, Val(acc));
              ai = select(better, r, Val(ai));
            } else {
              acc = combine(fold, acc, x);
            }
          });
          vals[t] = Val(acc);
          if (arg) idx[t] = Val(ai);
          barrier();
          group_tree(fold, arg, mx, vals, idx, t);
        };
        pass(nullptr, nullptr, folded);
        Val result = vals[0];
        if (var) {  // two passes in f64; in f32, the deviations scaled by the largest first (no overflow)
          const Val mean = result / cast(meta[kRed], at);
          const Val div = max(cast(meta[kRed], at) - correction, Val::constant(0, at));
          barrier();  // every thread has read vals[0] before the next pass writes it
          if (at == Type::F64) {
            pass(&mean, nullptr, OpKind::Sum);
            const Val v = vals[0] / div;
            result = select(take_root != 0, sqrt(v), v);
          } else {
            pass(&mean, nullptr, OpKind::Max);
            const Val big = vals[0];
            const Val sc = select(big > 0.0f && big < std::numeric_limits<float>::infinity(), big, Val(1.0f));
            barrier();
            pass(&mean, &sc, OpKind::Sum);
            const Val q = vals[0] / div;
            result = select(take_root != 0, sqrt(q) * sc, q * sc * sc);
          }
        }
        if_(valid && t == 0, [&] {
          if (arg) {
            const Val i = idx[0];
            out[obase] = cast(select(i == INT32_MAX, Val(0), i), Type::I64);
            return;
          }
          Val v = result;
          if (spec.kind == OpKind::Mean) v = v / cast(meta[kRed], at);
          if (spec.out == Store::B8)
            v = v != Val::constant(0, at);
          else if (value_type(spec.out) != at)
            v = cast(v, value_type(spec.out));
          store_store(out, spec.out, obase, v);
        });
      },
      limits);
}

std::array<uint32_t, 3> reduce_groups(int64_t nout) {
  const int64_t g = std::max<int64_t>(nout, 1);
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(g, 65535));
  return {gx, static_cast<uint32_t>((g + gx - 1) / gx), 1};
}

void unravel(const Buffer<int32_t>& meta, Val n, int at, Val lin, Var& off, Var* off2, int at2) {
  Var rem(lin);
  for_(0, n, [&](Val j) {
    const Val d = n - 1 - j;
    const Val size = meta[at + d];
    const Val idx = rem % size;
    rem = rem / size;
    off = off + idx * meta[at + kMaxRank + d];
    if (off2) *off2 = *off2 + idx * meta[at2 + d];
  });
}

void line_offsets(const Buffer<int32_t>& meta, Val line, Var& in, Var& out, int count, int sizes, int in_strides,
                  int out_strides) {
  Var rem(line);
  const Val nk = meta[count];
  for_(0, nk, [&](Val j) {
    const Val d = nk - 1 - j;
    const Val size = meta[sizes + d];
    const Val idx = rem % size;
    rem = rem / size;
    in = in + idx * meta[in_strides + d];
    out = out + idx * meta[out_strides + d];
  });
}

}  // namespace kiln::kernel::lib
