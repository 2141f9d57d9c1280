// SPDX-License-Identifier: MIT OR Apache-2.0
// Sort along one dim (values and i64 indices) as the CPU's stable sort: a bitonic network in
// shared memory, one group per line, over (key, index) pairs padded to a power of two. The
// order compares keys with NaN as the largest value (first when descending) and breaks ties
// by the index, which makes the network's result the stable one, identical to the CPU's.
#include <algorithm>
#include <bit>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

/// Whether (ka, ia) comes before (kb, ib): indices from `len` on are padding, after every
/// element; keys in order (NaN largest), equal keys by index.
Val before(Val ka, Val ia, Val kb, Val ib, Val len, bool descending) {
  const bool fl = is_float(ka.type);
  const Val na = fl ? ka != ka : Val(false), nb = fl ? kb != kb : Val(false);
  const Val by_key = descending ? select(na, !nb, !nb && ka > kb) : !na && (nb || ka < kb);
  const Val same = (na && nb) || ka == kb;
  const Val r = by_key || (same && ia < ib);
  const Val pa = ia >= len, pb = ib >= len;
  return select(pa != pb, pb, select(pa, ia < ib, r));
}

}  // namespace

std::optional<Sort> sort_of(const kiln::ir::Op& op) {
  if (op.kind != kiln::ir::OpKind::Sort || op.inputs.size() != 1 || op.outputs.size() != 2) return std::nullopt;
  const kiln::ir::TensorDesc &x = op.inputs[0], &v = op.outputs[0], &ix = op.outputs[1];
  if (v.dtype != x.dtype || ix.dtype != DType::I64 || v.shape != x.shape || ix.shape != x.shape ||
      v.offset != ix.offset || v.strides != ix.strides || !fits_i32(x) || !fits_i32(v) || !fits_i32(ix))
    return std::nullopt;
  const std::optional<Store> s = storage_of(x.dtype, false);
  if (!s || *s == Store::X64 || x.shape.empty()) return std::nullopt;
  const kiln::ir::ScanAttrs a = kiln::ir::ScanAttrs::decode(op);
  const int64_t r = static_cast<int64_t>(x.shape.size()), dim = a.dim < 0 ? a.dim + r : a.dim;
  if (dim < 0 || dim >= r) return std::nullopt;
  const int64_t len = x.shape[static_cast<size_t>(dim)];
  if (len > kMaxSort) return std::nullopt;
  Sort out;
  out.value = *s;
  out.descending = a.descending;
  out.padded = static_cast<uint32_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(len, 1))));
  out.name =
      std::string("sort_") + store_name(out.value) + (out.descending ? "_desc_" : "_") + std::to_string(out.padded);
  return out;
}

Kernel trace_sort(const Sort& spec, const Limits& limits) {
  return trace(
      spec.name,
      [&](Builder& b) {
        const uint32_t P = spec.padded, G = std::clamp<uint32_t>(P / 2, 1, 256);
        b.group_size(G);
        const Memory out = declare_store(b, spec.value, "values", true);
        const Buffer<int64_t> oidx = b.output<int64_t>("indices");
        const Memory in = declare_store(b, spec.value, "in", false);
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Type vt = value_type(spec.value), kt = vt == Type::Bool ? Type::I32 : vt;
        const Memory keys = shared_of(b, kt, "keys", P);
        const Shared<int32_t> ids = b.shared<int32_t>("ids", P);
        const Val t = thread_id(0);
        const Val line = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = line < meta[kOut];
        Var base(meta[kInOffset]), obase(meta[kOutOffset]);
        line_offsets(meta, select(valid, line, Val(0)), base, obase);
        const Val len = select(valid, meta[kRed], Val(0));
        const Val sx = meta[kRedShape + kMaxRank], so = meta[kRedShape + 1];
        const int g = static_cast<int>(G);
        for_(t, Val(static_cast<int>(P)), g, [&](Val i) {
          ids[i] = i;
          if_(i < len, [&] {
            const Val v = load_store(in, spec.value, base + i * sx);
            keys[i] = vt == Type::Bool ? select(v, Val(1), Val(0)) : v;
          }).else_([&] { keys[i] = Val::constant(0, kt); });
        });
        barrier();
        // The bitonic network's stages as loops (width w = 2, 4, ..., P, lw = log2 w; span h = w /
        // 2, ..., 1, lh = log2 h): a few operations whatever P, where unrolled stages would trace
        // a copy each.
        Var w(2), lw(1);
        while_([&] { return Val(w) <= static_cast<int>(P); },
               [&] {
                 Var h(Val(w) >> 1), lh(Val(lw) - 1);
                 while_([&] { return Val(h) >= 1; },
                        [&] {
                          for_(t, Val(static_cast<int>(P / 2)), g, [&](Val p) {
                            const Val i = ((p >> Val(lh)) << (Val(lh) + 1)) + (p & (Val(h) - 1));
                            const Val l = i + Val(h);
                            const Val up = (i & Val(w)) == 0;
                            const Val ka = keys[i], kb = keys[l], ia = ids[i], ib = ids[l];
                            const Val swap = select(up, before(kb, ib, ka, ia, len, spec.descending),
                                                    before(ka, ia, kb, ib, len, spec.descending));
                            if_(swap, [&] {
                              keys[i] = kb;
                              keys[l] = ka;
                              ids[i] = ib;
                              ids[l] = ia;
                            });
                          });
                          barrier();
                          h = Val(h) >> 1;
                          lh = Val(lh) - 1;
                        });
                 w = Val(w) << 1;
                 lw = Val(lw) + 1;
               });
        for_(t, len, g, [&](Val i) {
          const Val k = keys[i];
          store_store(out, spec.value, obase + i * so, vt == Type::Bool ? k != 0 : k);
          oidx[obase + i * so] = cast(Val(ids[i]), Type::I64);
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
