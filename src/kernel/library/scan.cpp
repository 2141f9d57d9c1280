// SPDX-License-Identifier: MIT OR Apache-2.0
// Scans of the library (kernel/library.h): CumSum, CumProd, CumMax, CumMin along one dim, one
// thread per line walking it in order, so every element is the CPU's: sums and products
// accumulate in f64 for floats and in i64 (wrapping) for integers and bools; CumMax and CumMin
// keep the last occurrence and let a NaN stick (src/backends/cpu/scan.cpp).
#include <algorithm>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

using kiln::ir::OpKind;

/// x (a loaded value) as type t (bools as 0 or 1).
Val as(Val x, Type t) {
  if (x.type == Type::Bool) return select(x, Val::constant(1, t), Val::constant(0, t));
  return x.type == t ? x : cast(x, t);
}

}  // namespace

std::optional<Scan> scan_of(const kiln::ir::Op& op, bool float64) {
  const OpKind k = op.kind;
  if (k != OpKind::CumSum && k != OpKind::CumProd && k != OpKind::CumMax && k != OpKind::CumMin) return std::nullopt;
  if (op.inputs.size() != 1) return std::nullopt;
  const auto &x = op.inputs[0], &o = op.outputs[0];
  // 1- and 2-byte integers too: their sums and products wrap to the same low bits in i64
  const std::optional<Store> si = storage_of(x.dtype, false), so = storage_of(o.dtype, false);
  if (!si || !so || x.shape != o.shape) return std::nullopt;
  Scan s;
  s.kind = k;
  s.in = *si;
  s.out = *so;
  const bool fl = is_float(value_type(*si));
  if (k == OpKind::CumMax || k == OpKind::CumMin) {
    if (op.outputs.size() != 2 || o.dtype != x.dtype || op.outputs[1].strides != o.strides) return std::nullopt;
    s.acc = *si == Store::B8 ? Type::I32 : value_type(*si);  // bool compared as 0 and 1
  } else {
    if (o.dtype != x.dtype && !(o.dtype == DType::I64 && !fl)) return std::nullopt;
    s.acc = !fl ? Type::I64 : float64 || *si == Store::F64 ? Type::F64 : Type::F32;  // f32: compensated sums
  }
  s.name = "scan_" + std::string(kiln::ir::op_name(k)) + "_" + store_name(s.in) + "_" + store_name(s.out) +
           (fl && s.acc == Type::F32 && !(k == OpKind::CumMax || k == OpKind::CumMin) ? "_f32acc" : "");
  return s;
}

Kernel trace_scan(const Scan& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  const bool ext = spec.kind == OpKind::CumMax || spec.kind == OpKind::CumMin;
  const bool mx = spec.kind == OpKind::CumMax;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.out, "out", true);
        const Buffer<int64_t> oidx = ext ? b.output<int64_t>("indices") : Buffer<int64_t>(0, false);
        const Memory in = declare_store(b, spec.in, "in", false);
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Val line = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(line < meta[kOut], [&] {
          Var base(meta[kInOffset]), obase(meta[kOutOffset]);
          line_offsets(meta, line, base, obase);
          const Val sx = meta[kRedShape + kMaxRank], so = meta[kRedShape + 1];
          Var acc(Val::constant(spec.kind == OpKind::CumProd ? 1 : 0, spec.acc));
          Var comp(Val::constant(0, spec.acc));  // Kahan's compensation of an f32 sum
          const bool kahan = spec.kind == OpKind::CumSum && spec.acc == Type::F32;
          Var at(Val(-1ll));
          for_(0, meta[kRed], [&](Val l) {
            const Val x = as(load_store(in, spec.in, base + l * sx), spec.acc);
            const Val o = obase + l * so;
            if (ext) {
              const Val v = acc;
              const Val nan_x = x != x, nan_v = v != v;
              const Val take = Val(at) < 0ll || nan_x || (!nan_v && (mx ? x >= v : x <= v));
              acc = select(take, x, v);
              at = select(take, cast(l, Type::I64), Val(at));
              store_store(out, spec.out, o, spec.out == Store::B8 ? Val(acc) != 0 : Val(acc));
              oidx[o] = Val(at);
              return;
            }
            if (kahan) {
              const Val y = x - Val(comp), t = Val(acc) + y;
              comp = (t - Val(acc)) - y;
              acc = t;
            } else {
              acc = spec.kind == OpKind::CumProd ? Val(acc) * x : Val(acc) + x;
            }
            const Type ot = value_type(spec.out);
            store_store(out, spec.out, o, ot == Type::Bool ? Val(acc) != Val::constant(0, spec.acc) : as(acc, ot));
          });
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
