// SPDX-License-Identifier: MIT OR Apache-2.0
// Index kernels of the library (kernel/library.h): one thread per output element. IndexSelect
// and Gather read through the index; Scatter (no reduction, or a sum), IndexAdd and IndexCopy
// scan the index in order for the positions that land on the thread's element, so duplicates
// resolve exactly as on the CPU (the last write wins, sums in index order) on every run.
#include <algorithm>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

using kiln::ir::OpKind;
using kiln::ir::TensorDesc;

bool scans(OpKind k) { return k == OpKind::Scatter || k == OpKind::IndexAdd || k == OpKind::IndexCopy; }

int64_t op_dim(const kiln::ir::Op& op) {
  const int64_t d =
      op.kind == OpKind::Scatter ? kiln::ir::ScatterAttrs::decode(op).dim : kiln::ir::IndexAttrs::decode(op).dim;
  const int64_t r = static_cast<int64_t>(op.outputs[0].shape.size());
  return d < 0 ? d + r : d;
}

/// d's strides over the output's dims (same rank), `skip` zeroed.
void strides_of(const TensorDesc& d, size_t rank, int64_t skip, int32_t* st) {
  for (size_t k = 0; k < rank; ++k)
    st[k] = static_cast<int64_t>(k) == skip || k >= d.strides.size() ? 0 : static_cast<int32_t>(d.strides[k]);
}

/// Scatter's reductions of two values as the CPU's (src/backends/cpu/index.cpp, combine): sum
/// and mean add, prod multiplies, amax and amin keep a NaN (the first one).
Val scatter_combine(int64_t reduce, Val a, Val b) {
  using A = kiln::ir::ScatterAttrs;
  if (reduce == A::kProd) return a * b;
  if (reduce == A::kAmax || reduce == A::kAmin) {
    const Val pick = reduce == A::kAmax ? select(a < b, b, a) : select(b < a, b, a);
    if (!is_float(a.type)) return pick;
    return select(a != a, a, select(b != b, b, pick));
  }
  return a + b;
}

/// A sum over n values as the CPU's mean: true division for floats, floor division for integers.
Val mean_of(Val sum, Val n) {
  if (is_float(sum.type)) return sum / cast(n, sum.type);
  const Val c = cast(n, sum.type), q = sum / c;
  return select(sum - q * c != Val::constant(0, sum.type) && sum < Val::constant(0, sum.type),
                q - Val::constant(1, sum.type), q);
}

}  // namespace

std::optional<Index> index_of(const kiln::ir::Op& op) {
  if (op.outputs.size() != 1 || op.inputs.size() < 2) return std::nullopt;
  const OpKind k = op.kind;
  if (k != OpKind::IndexSelect && k != OpKind::Gather && !scans(k)) return std::nullopt;
  if (op.inputs[1].dtype != DType::I64 || op.outputs[0].shape.empty()) return std::nullopt;
  Index ix;
  ix.kind = k;
  const DType vt = op.outputs[0].dtype;
  int64_t reduce = kiln::ir::ScatterAttrs::kNone;
  if (k == OpKind::Scatter) {
    const kiln::ir::ScatterAttrs a = kiln::ir::ScatterAttrs::decode(op);
    reduce = a.reduce;
    ix.include_self = a.include_self;
    if (reduce < kiln::ir::ScatterAttrs::kNone || reduce > kiln::ir::ScatterAttrs::kAmin) return std::nullopt;
  }
  ix.reduce = reduce;
  ix.sum = reduce == kiln::ir::ScatterAttrs::kSum || k == OpKind::IndexAdd;
  // a reduction computes in the value's type (f16 and bf16 would round at each step on the
  // CPU); moving values needs only their bits
  const bool computes = ix.sum || reduce != kiln::ir::ScatterAttrs::kNone;
  const std::optional<Store> s = storage_of(vt, !computes);
  if (!s || (computes && *s != Store::F32 && *s != Store::F64 && *s != Store::I32 && *s != Store::I64))
    return std::nullopt;
  ix.value = *s;
  if (k == OpKind::IndexAdd) {
    const double alpha = kiln::ir::IndexAttrs::decode(op).alpha;
    if (*s == Store::F32 || *s == Store::F64) {
      ix.push = {*s == Store::F64 ? Arg(alpha) : Arg(static_cast<float>(alpha))};
    } else if (alpha != 1) {
      return std::nullopt;
    }
  }
  static const char* reduce_names[] = {"", "_sum", "_prod", "_mean", "_amax", "_amin"};
  ix.name = "index_" + std::string(kiln::ir::op_name(k)) + "_" + store_name(*s) +
            (k == OpKind::IndexAdd ? "_sum" : reduce_names[reduce]) + (ix.include_self ? "" : "_noself");
  return ix;
}

bool index_meta(const kiln::ir::Op& op, int32_t* meta) {
  const TensorDesc &o = op.outputs[0], &x = op.inputs[0], &idx = op.inputs[1];
  const size_t r = o.shape.size();
  if (r == 0 || r > static_cast<size_t>(kMaxRank)) return false;
  for (const TensorDesc& d : op.inputs)
    if (!fits_i32(d)) return false;
  if (!fits_i32(o) || x.shape.size() != r) return false;
  const int64_t dim = op_dim(op);
  if (dim < 0 || dim >= static_cast<int64_t>(r)) return false;
  const bool gather = op.kind == OpKind::Gather, scatter = op.kind == OpKind::Scatter;
  if ((gather || scatter) && idx.shape.size() != r) return false;
  if (!gather && !scatter && idx.shape.size() > 1) return false;
  std::fill(meta, meta + kIndexMetaInts, 0);
  meta[kIxRank] = static_cast<int32_t>(r);
  meta[kIxCount] = static_cast<int32_t>(o.numel());
  meta[kIxDim] = static_cast<int32_t>(dim);
  meta[kIxDimSize] = static_cast<int32_t>(scans(op.kind) ? o.shape[static_cast<size_t>(dim)] : x.shape[dim]);
  meta[kIxWrap] = !gather && !scatter && kiln::ir::IndexAttrs::decode(op).wrap ? 1 : 0;
  meta[kIxOffsets + 0] = static_cast<int32_t>(o.offset);
  meta[kIxOffsets + 1] = static_cast<int32_t>(x.offset);
  meta[kIxOffsets + 2] = static_cast<int32_t>(idx.offset);
  for (size_t k = 0; k < r; ++k) meta[kIxShape + k] = static_cast<int32_t>(o.shape[k]);
  strides_of(o, r, -1, meta + kIxStrides);
  // x: read at the thread's own element by the scans, through the index by the others
  strides_of(x, r, scans(op.kind) ? -1 : dim, meta + kIxStrides + kMaxRank);
  meta[kIxDimStrides] = static_cast<int32_t>(x.strides[static_cast<size_t>(dim)]);
  const int32_t idim = idx.shape.empty() ? 0 : static_cast<int32_t>(idx.strides[gather || scatter ? dim : 0]);
  if (gather) {
    strides_of(idx, r, -1, meta + kIxStrides + 2 * kMaxRank);
  } else if (scatter) {
    strides_of(idx, r, dim, meta + kIxStrides + 2 * kMaxRank);
  } else if (op.kind == OpKind::IndexSelect) {
    meta[kIxStrides + 2 * kMaxRank + dim] = idim;
  }
  meta[kIxDimStrides + 1] = idim;
  if (scans(op.kind)) {
    const TensorDesc& src = op.inputs[2];
    if (src.shape.size() != r) return false;
    strides_of(src, r, dim, meta + kIxStrides + 3 * kMaxRank);
    meta[kIxDimStrides + 2] = static_cast<int32_t>(src.strides[static_cast<size_t>(dim)]);
    meta[kIxOffsets + 3] = static_cast<int32_t>(src.offset);
    meta[kIxN] = static_cast<int32_t>(scatter ? idx.shape[static_cast<size_t>(dim)] : idx.numel());
    // the index positions that exist along the other dims (a scatter's index may be smaller)
    for (size_t k = 0; k < r; ++k)
      meta[kIxIdxShape + k] = scatter && static_cast<int64_t>(k) != dim ? static_cast<int32_t>(idx.shape[k])
                                                                        : static_cast<int32_t>(o.shape[k]);
  }
  return true;
}

IndexCheck index_check_of(const kiln::ir::Op& op) {
  const int64_t dim = op_dim(op);
  const bool wrap = op.kind != OpKind::Gather && op.kind != OpKind::Scatter && kiln::ir::IndexAttrs::decode(op).wrap;
  const TensorDesc& sized = scans(op.kind) ? op.outputs[0] : op.inputs[0];
  return {dim, sized.shape[static_cast<size_t>(dim)], wrap};
}

Kernel trace_index(const Index& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  const bool scan = scans(spec.kind);
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.value, "out", true);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Buffer<int64_t> index = b.input<int64_t>("index");
        const Memory src = scan ? declare_store(b, spec.value, "src", false) : Memory(0, false);
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Type vt = value_type(spec.value);
        Val alpha;
        if (!spec.push.empty()) alpha = vt == Type::F64 ? b.scalar<double>("alpha") : b.scalar<float>("alpha");
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kIxCount], [&] {
          const Val rank = meta[kIxRank], dim = meta[kIxDim], dsize = meta[kIxDimSize];
          Var rem(i), cd(Val(0)), inside(Val(true));
          std::vector<Var> off;
          off.reserve(4);  // Vars are not moved: a copy would be a new variable
          for (int q = 0; q < 4; ++q) off.emplace_back(q < 3 || scan ? Val(meta[kIxOffsets + q]) : Val(0));
          for_(0, rank, [&](Val j) {
            const Val d = rank - 1 - j;
            const Val size = meta[kIxShape + d];
            const Val c = rem % size;
            rem = rem / size;
            for (int q = 0; q < (scan ? 4 : 3); ++q)
              off[static_cast<size_t>(q)] = off[static_cast<size_t>(q)] + c * meta[kIxStrides + q * kMaxRank + d];
            if_(d == dim, [&] { cd = c; });
            if (scan) inside = Val(inside) && (d == dim || c < meta[kIxIdxShape + d]);
          });
          // An index value as a position along dim (negative ones count from the end with wrap).
          auto position = [&](Val at) {
            const Val v = index[at];
            return select(meta[kIxWrap] != 0 && v < 0ll, v + cast(dsize, Type::I64), v);
          };
          if (!scan) {
            const Val p = cast(position(off[2]), Type::I32);
            store_store(out, spec.value, off[0], load_store(x, spec.value, off[1] + p * meta[kIxDimStrides]));
            return;
          }
          Var acc(load_store(x, spec.value, off[1]));
          Var hit(Val(false));
          Var count(Val(0));
          if_(Val(inside), [&] {
            const Val want = cast(Val(cd), Type::I64);
            for_(0, meta[kIxN], [&](Val j) {
              if_(position(off[2] + j * meta[kIxDimStrides + 1]) == want, [&] {
                Val s = load_store(src, spec.value, off[3] + j * meta[kIxDimStrides + 2]);
                if (!spec.push.empty()) s = s * alpha;
                if (spec.sum || spec.reduce != 0) {
                  const Val c = scatter_combine(spec.reduce == 0 ? 1 : spec.reduce, Val(acc), s);
                  acc = spec.include_self ? c : select(Val(hit), c, s);
                } else {
                  acc = s;
                }
                hit = Val(true);
                count = Val(count) + 1;
              });
            });
          });
          if (spec.reduce == kiln::ir::ScatterAttrs::kMean)  // over the values and x when included
            acc = select(Val(count) > 0, mean_of(Val(acc), Val(count) + (spec.include_self ? 1 : 0)), Val(acc));
          store_store(out, spec.value, off[0], acc);
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
