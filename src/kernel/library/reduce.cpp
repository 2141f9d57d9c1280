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
  if (va.type != Type::F32) {
    const Val strict = mx ? vb > va : vb < va;
    return strict || (vb == va && ib < ia);
  }
  const Val na = is_nan(va), nb = is_nan(vb);
  const Val strict = mx ? vb > va : vb < va;
  return (nb && !na) || (!na && !nb && strict) || ((vb == va || (na && nb)) && ib < ia);
}

/// The combination of two partial values of a value reduction.
Val combine(OpKind kind, Val a, Val b) {
  switch (kind) {
    case OpKind::Prod:
      return a * b;
    case OpKind::Max:
    case OpKind::Min: {
      const Val pick = select(kind == OpKind::Max ? b > a : b < a, b, a);
      return a.type == Type::F32 ? select(is_nan(a), a, select(is_nan(b), b, pick)) : pick;
    }
    default:  // Sum, Mean
      return a + b;
  }
}

Val identity(OpKind kind, Type t) {
  if (kind == OpKind::Prod) return Val::constant(1, t);
  if (kind == OpKind::Max || kind == OpKind::Min) {
    const bool mx = kind == OpKind::Max;
    if (t == Type::F32)
      return Val::constant(mx ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), t);
    if (t == Type::I64) return Val(static_cast<long long>(mx ? INT64_MIN : INT64_MAX));
    return Val::constant(mx ? INT32_MIN : INT32_MAX, t);
  }
  return Val::constant(0, t);
}

/// Walks `n` dims of meta from `at` (shape at at, strides at at + kMaxRank, and a second set of
/// strides at at2 when >= 0) for linear index `lin`: adds the offsets to off (and off2).
void decode(const Buffer<int32_t>& meta, Val n, int at, Val lin, Var& off, Var* off2, int at2) {
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

}  // namespace

std::optional<Reduce> reduce_of(const kiln::ir::Op& op) {
  if (op.inputs.size() != 1 || op.outputs.size() != 1) return std::nullopt;
  const DType it = op.inputs[0].dtype, ot = op.outputs[0].dtype;
  Reduce r;
  r.kind = op.kind;
  switch (op.kind) {
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Prod:
      if (it != DType::F32 || ot != DType::F32) return std::nullopt;
      r.type = Type::F32;
      break;
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      if (it != DType::F32 && it != DType::I32 && it != DType::I64) return std::nullopt;
      if (ot != ((op.kind == OpKind::Max || op.kind == OpKind::Min) ? it : DType::I64)) return std::nullopt;
      r.type = it == DType::F32 ? Type::F32 : it == DType::I32 ? Type::I32 : Type::I64;
      break;
    default:
      return std::nullopt;
  }
  r.name = std::string("reduce_") + std::string(kiln::ir::op_name(op.kind)) + "_" + std::string(type_name(r.type));
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

Kernel trace_reduce(const Reduce& spec, const Limits& limits) {
  const bool arg = spec.kind == OpKind::ArgMax || spec.kind == OpKind::ArgMin;
  const bool mx = spec.kind == OpKind::ArgMax;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Type vt = spec.type;
        const Memory out = arg || vt == Type::I64 ? Memory(b.output<int64_t>("out"))
                           : vt == Type::F32      ? Memory(b.output<float>("out"))
                                                  : Memory(b.output<int32_t>("out"));
        const Memory in = vt == Type::F32   ? Memory(b.input<float>("in"))
                          : vt == Type::I32 ? Memory(b.input<int32_t>("in"))
                                            : Memory(b.input<int64_t>("in"));
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Memory vals = vt == Type::F32   ? Memory(b.shared<float>("vals", kGroup))
                            : vt == Type::I32 ? Memory(b.shared<int32_t>("vals", kGroup))
                                              : Memory(b.shared<int64_t>("vals", kGroup));
        const Shared<int32_t> idx = b.shared<int32_t>("idx", kGroup);
        const Val t = thread_id(0);
        const Val gid = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = gid < meta[kOut];
        Var base(meta[kInOffset]), obase(meta[kOutOffset]);
        decode(meta, meta[kKept], kKeptShape, select(valid, gid, Val(0)), base, &obase, kOutStrides);
        const Val first = arg ? identity(mx ? OpKind::Max : OpKind::Min, spec.type) : identity(spec.kind, spec.type);
        Var acc(first);
        Var ai(Val(INT32_MAX));
        for_(t, meta[kRed], static_cast<int>(kGroup), [&](Val r) {
          Var off = Var(Val(base));
          decode(meta, meta[kNRed], kRedShape, r, off, nullptr, -1);
          const Val x = in[off];
          if (arg) {
            const Val better = arg_better(mx, acc, ai, x, r);
            acc = select(better, x, Val(acc));
            ai = select(better, r, Val(ai));
          } else {
            acc = combine(spec.kind, acc, x);
          }
        });
        vals[t] = Val(acc);
        if (arg) idx[t] = Val(ai);
        barrier();
        for (uint32_t s = kGroup / 2; s > 0; s /= 2) {
          if_(t < static_cast<int>(s), [&] {
            const Val va = vals[t], vb = vals[t + static_cast<int>(s)];
            if (arg) {
              const Val ia = idx[t], ib = idx[t + static_cast<int>(s)];
              const Val better = arg_better(mx, va, ia, vb, ib);
              vals[t] = select(better, vb, va);
              idx[t] = select(better, ib, ia);
            } else {
              vals[t] = combine(spec.kind, va, vb);
            }
          });
          barrier();
        }
        if_(valid && t == 0, [&] {
          const Val v = vals[0];
          if (arg) {
            const Val i = idx[0];
            out[obase] = cast(select(i == INT32_MAX, Val(0), i), Type::I64);
          } else if (spec.kind == OpKind::Mean) {
            out[obase] = v / cast(meta[kRed], Type::F32);
          } else {
            out[obase] = v;
          }
        });
      },
      limits);
}

std::array<uint32_t, 3> reduce_groups(int64_t nout) {
  const int64_t g = std::max<int64_t>(nout, 1);
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(g, 65535));
  return {gx, static_cast<uint32_t>((g + gx - 1) / gx), 1};
}

}  // namespace kiln::kernel::lib
