// SPDX-License-Identifier: MIT OR Apache-2.0
// Softmax and log-softmax of the library (kernel/library.h) along one dim (f16 and bf16 in f32):
// one group per row, the row's maximum and then its sum of exp(x - max) combined in fixed
// shared-memory trees (deterministic), as the CPU computes them: exp(x - max) / sum, and
// x - max - log(sum). A NaN in the row makes the whole row NaN, as there.
#include <algorithm>
#include <limits>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

constexpr uint32_t kGroup = 128;

Val nan_max(Val a, Val b) { return select(a != a, a, select(b != b || b > a, b, a)); }
Val add(Val a, Val b) { return a + b; }

}  // namespace

std::optional<Softmax> softmax_of(const kiln::ir::Op& op) {
  using kiln::ir::OpKind;
  if ((op.kind != OpKind::Softmax && op.kind != OpKind::LogSoftmax) || op.inputs.size() != 1) return std::nullopt;
  const auto &x = op.inputs[0], &o = op.outputs[0];
  const std::optional<Store> st = storage_of(x.dtype, false);
  if (!st || (*st != Store::F32 && *st != Store::F16 && *st != Store::BF16 && *st != Store::F64) ||
      o.dtype != x.dtype || !fits_i32(x) || !fits_i32(o) || x.shape != o.shape)
    return std::nullopt;
  Softmax s;
  s.log = op.kind == OpKind::LogSoftmax;
  s.value = *st;
  s.name = std::string(s.log ? "log_softmax_" : "softmax_") + store_name(s.value);
  return s;
}

bool softmax_meta(const kiln::ir::Op& op, int32_t* meta) {
  const auto &x = op.inputs[0], &o = op.outputs[0];
  int64_t dim = kiln::ir::ScanAttrs::decode(op).dim;
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (r == 0) return false;
  if (dim < 0) dim += r;
  if (dim < 0 || dim >= r) return false;
  std::fill(meta, meta + kReduceMetaInts, 0);
  int nk = 0;
  int64_t rows = 1;
  for (int64_t d = 0; d < r; ++d) {
    const size_t u = static_cast<size_t>(d);
    if (d == dim) continue;
    meta[kKeptShape + nk] = static_cast<int32_t>(x.shape[u]);
    meta[kKeptShape + kMaxRank + nk] = static_cast<int32_t>(x.strides[u]);
    meta[kOutStrides + nk] = static_cast<int32_t>(o.strides[u]);
    rows *= x.shape[u];
    ++nk;
  }
  const size_t ud = static_cast<size_t>(dim);
  meta[kOut] = static_cast<int32_t>(rows);
  meta[kRed] = static_cast<int32_t>(x.shape[ud]);
  meta[kKept] = nk;
  meta[kNRed] = 1;
  meta[kRedShape] = static_cast<int32_t>(x.shape[ud]);
  meta[kRedShape + kMaxRank] = static_cast<int32_t>(x.strides[ud]);
  meta[kRedShape + 1] = static_cast<int32_t>(o.strides[ud]);  // the output's stride along dim
  meta[kInOffset] = static_cast<int32_t>(x.offset);
  meta[kOutOffset] = static_cast<int32_t>(o.offset);
  return true;
}

Kernel trace_softmax(const Softmax& spec, const Limits& limits) {
  return trace_softmax_from(spec, limits, *buffer_source());
}

Kernel trace_softmax_from(const Softmax& spec, const Limits& limits, Source& src) {
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Type at = spec.value == Store::F64 ? Type::F64 : Type::F32;  // f16, bf16: in f32
        const auto ex = [&](Val v) { return at == Type::F64 ? exp_f64(v) : exp(v); };
        const auto lg = [&](Val v) { return at == Type::F64 ? log_f64(v) : log(v); };
        const Memory out = declare_store(b, spec.value, "out", true);
        src.outputs(b);
        src.inputs(b, spec.value, "in");
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        src.scalars(b, meta);
        const Memory sh = shared_of(b, at, "sh", kGroup);
        const Val t = thread_id(0);
        const Val gid = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = gid < meta[kOut];
        Var base(meta[kInOffset]), obase(meta[kOutOffset]);
        line_offsets(meta, select(valid, gid, Val(0)), base, obase);
        const Val L = select(valid, meta[kRed], Val(0));
        const Val sx = meta[kRedShape + kMaxRank], so = meta[kRedShape + 1];
        Var m(Val::constant(-std::numeric_limits<double>::infinity(), at));
        for_(t, L, static_cast<int>(kGroup), [&](Val i) { m = nan_max(m, src.at(base + i * sx, &valid)); });
        sh[t] = Val(m);
        barrier();
        tree_fold(sh, t, kGroup, nan_max);
        const Val mx = sh[0];
        barrier();
        Var s(Val::constant(0, at));
        for_(t, L, static_cast<int>(kGroup), [&](Val i) {
          const Val x = src.at(base + i * sx, nullptr);
          s = s + ex(x - mx);
        });
        sh[t] = Val(s);
        barrier();
        tree_fold(sh, t, kGroup, add);
        const Val sum = sh[0];
        for_(t, L, static_cast<int>(kGroup), [&](Val i) {
          const Val x = src.at(base + i * sx, nullptr);
          store_store(out, spec.value, obase + i * so, spec.log ? x - mx - lg(sum) : ex(x - mx) / sum);
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
