// SPDX-License-Identifier: MIT OR Apache-2.0
// LayerNorm, RMSNorm and GroupNorm (the LayerNorm op, ops.def) of the library on f32, f64, f16
// and bf16 (f16 and bf16 computed in f32, as the CPU does): one group
// per row, the row's sum and then its squared deviations from the mean accumulated in f64 and
// combined in a fixed shared-memory tree (deterministic), then each element normalised as the
// CPU's kernel does (src/backends/cpu/norm.cpp): ((x - mean) - mean_lo) * rstd, times the
// weight, plus the bias (or 0), with mean, mean_lo and rstd rounded to f32 from f64 values.
#include <algorithm>
#include <limits>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

constexpr uint32_t kGroup = 128;

Val add(Val a, Val b) { return a + b; }

/// The one stride of dims [from, end) of d when they are laid out as one run (size-1 dims
/// aside; a broadcast run has stride 0): 1 for an empty run; false when they are not.
bool run_stride(const kiln::ir::TensorDesc& d, size_t from, int64_t* stride) {
  int64_t s = 1, span = 1;
  bool first = true;
  for (size_t q = d.shape.size(); q-- > from;) {
    if (d.shape[q] == 1) continue;
    if (first)
      s = d.strides[q], first = false;
    else if (d.strides[q] != s * span)
      return false;
    span *= d.shape[q];
  }
  *stride = s;
  return true;
}

/// Whether x's normalised elements are laid out as the kernel reads them without gathering:
/// one run per row (GroupNorm: x contiguous).
bool x_in_runs(const kiln::ir::Op& op) {
  const kiln::ir::NormAttrs a = kiln::ir::NormAttrs::decode(op);
  const kiln::ir::TensorDesc& x = op.inputs[0];
  if (a.groups > 0) return x.is_contiguous();
  int64_t s = 0;
  return a.ndims >= 1 && static_cast<size_t>(a.ndims) <= x.shape.size() &&
         run_stride(x, x.shape.size() - static_cast<size_t>(a.ndims), &s);
}

}  // namespace

std::optional<Norm> norm_of(const kiln::ir::Op& op) {
  if (op.kind != kiln::ir::OpKind::LayerNorm || op.outputs.size() != 3 || op.inputs.empty()) return std::nullopt;
  auto store = [](const kiln::ir::TensorDesc& d) -> std::optional<Store> {
    if (!fits_i32(d)) return std::nullopt;
    switch (d.dtype) {
      case DType::F32:
        return Store::F32;
      case DType::F64:
        return Store::F64;
      case DType::F16:
        return Store::F16;
      case DType::BF16:
        return Store::BF16;
      default:
        return std::nullopt;
    }
  };
  const kiln::ir::NormAttrs a = kiln::ir::NormAttrs::decode(op);
  Norm n;
  n.rms = a.rms;
  n.group = a.groups > 0;
  n.weight = a.has_weight;
  n.bias = a.has_bias;
  if (op.inputs.size() != 1u + n.weight + n.bias) return std::nullopt;
  const std::optional<Store> x = store(op.inputs[0]), y = store(op.outputs[0]), m = store(op.outputs[1]),
                             r = store(op.outputs[2]);
  if (!x || y != x || !m || r != m || (*m != Store::F32 && *m != Store::F64)) return std::nullopt;
  n.x = *x;
  n.stats = *m;
  n.gather_x = !x_in_runs(op);
  n.name = std::string(n.rms     ? "rms_norm"
                       : n.group ? "group_norm"
                                 : "layer_norm") +
           "_" + store_name(n.x) + (n.gather_x ? "_gx" : "");
  for (size_t q = 1; q < op.inputs.size(); ++q) {
    const std::optional<Store> p = store(op.inputs[q]);
    if (!p) return std::nullopt;
    n.params.push_back(*p);
    n.name += std::string(q == 1 && n.weight ? "_w" : "_b") + store_name(*p);
  }
  n.push = {Arg(a.eps)};
  return n;
}

bool norm_meta(const kiln::ir::Op& op, int32_t* meta) {
  std::fill(meta, meta + kNormMetaInts, 0);
  const kiln::ir::NormAttrs a = kiln::ir::NormAttrs::decode(op);
  const kiln::ir::TensorDesc &x = op.inputs[0], &y = op.outputs[0], &m = op.outputs[1], &r = op.outputs[2];
  const size_t rank = x.shape.size();
  if (y.shape != x.shape || !m.is_contiguous() || !r.is_contiguous()) return false;
  // A gathered x: its rank, shape and strides.
  const bool gather = !x_in_runs(op);
  if (gather) {
    if (rank > static_cast<size_t>(kMaxRank)) return false;
    meta[kNmXRank] = static_cast<int32_t>(rank);
    for (size_t q = 0; q < rank; ++q) {
      meta[kNmXShape + q] = static_cast<int32_t>(x.shape[q]);
      meta[kNmXShape + kMaxRank + q] = static_cast<int32_t>(x.strides[q]);
    }
  }
  if (a.groups > 0) {  // rows (n, g) of C/G channels x spatial: y (and x unless gathered) contiguous
    if (rank < 2 || (!gather && !x.is_contiguous()) || !y.is_contiguous() || x.shape[1] % a.groups != 0) return false;
    const int64_t rows = x.shape[0] * a.groups, n = rows == 0 ? 0 : x.numel() / rows;
    meta[kNmRows] = static_cast<int32_t>(rows);
    meta[kNmN] = static_cast<int32_t>(n);
    meta[kNmKept] = 1;
    meta[kNmKeptShape] = static_cast<int32_t>(rows);
    meta[kNmKeptShape + kMaxRank] = meta[kNmKeptShape + 2 * kMaxRank] = static_cast<int32_t>(n);
    meta[kNmXs] = meta[kNmYs] = 1;
    meta[kNmCg] = static_cast<int32_t>(x.shape[1] / a.groups);
    meta[kNmGroups] = static_cast<int32_t>(a.groups);
    meta[kNmSpatial] = static_cast<int32_t>(meta[kNmCg] == 0 || n == 0 ? 1 : n / meta[kNmCg]);
  } else {
    if (a.ndims < 1 || static_cast<size_t>(a.ndims) > rank) return false;
    const size_t from = rank - static_cast<size_t>(a.ndims);
    int64_t sx = 0, sy = 0, rows = 1, n = 1;
    if ((!gather && !run_stride(x, from, &sx)) || !run_stride(y, from, &sy)) return false;
    for (size_t q = 0; q < from; ++q) {
      meta[kNmKeptShape + q] = static_cast<int32_t>(x.shape[q]);
      meta[kNmKeptShape + kMaxRank + q] = static_cast<int32_t>(x.strides[q]);
      meta[kNmKeptShape + 2 * kMaxRank + q] = static_cast<int32_t>(y.strides[q]);
      rows *= x.shape[q];
    }
    for (size_t q = from; q < rank; ++q) n *= x.shape[q];
    meta[kNmRows] = static_cast<int32_t>(rows);
    meta[kNmN] = static_cast<int32_t>(n);
    meta[kNmKept] = static_cast<int32_t>(from);
    meta[kNmXs] = static_cast<int32_t>(sx);
    meta[kNmYs] = static_cast<int32_t>(sy);
  }
  // weight and bias: the normalised shape (per channel in group mode) as one run
  for (size_t q = 1; q < op.inputs.size(); ++q) {
    int64_t s = 0;
    if (!run_stride(op.inputs[q], 0, &s)) return false;
    meta[kNmParamOff + 2 * (q - 1)] = static_cast<int32_t>(op.inputs[q].offset);
    meta[kNmParamOff + 2 * (q - 1) + 1] = static_cast<int32_t>(s);
  }
  meta[kNmXOff] = static_cast<int32_t>(x.offset);
  meta[kNmYOff] = static_cast<int32_t>(y.offset);
  meta[kNmMOff] = static_cast<int32_t>(m.offset);
  meta[kNmROff] = static_cast<int32_t>(r.offset);
  return true;
}

Kernel trace_norm(const Norm& spec, const Limits& limits) { return trace_norm_from(spec, limits, *buffer_source()); }

Kernel trace_norm_from(const Norm& spec, const Limits& limits, Source& src) {
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory y = declare_store(b, spec.x, "y", true), mean = declare_store(b, spec.stats, "mean", true),
                     rstd = declare_store(b, spec.stats, "rstd", true);
        src.outputs(b);
        src.inputs(b, spec.x, "x");
        std::vector<Memory> params;
        for (size_t q = 0; q < spec.params.size(); ++q)
          params.push_back(declare_store(b, spec.params[q], q == 0 && spec.weight ? "weight" : "bias", false));
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        src.scalars(b, meta);
        const Val eps = b.scalar<double>("eps");
        const Shared<double> sh = b.shared<double>("sh", kGroup);
        const Type at = value_type(spec.x), st = value_type(spec.stats);
        auto to = [](Val v, Type t) { return v.type == t ? v : cast(v, t); };
        auto param = [&](int q, Val i) {  // parameter q at index i, in the arithmetic type
          return to(load_store(params[static_cast<size_t>(q)], spec.params[static_cast<size_t>(q)],
                               meta[kNmParamOff + 2 * q] + i * meta[kNmParamOff + 2 * q + 1]),
                    at);
        };
        const Val t = thread_id(0);
        const Val row = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = row < meta[kNmRows];
        Var xb(meta[kNmXOff]), yb(meta[kNmYOff]);
        line_offsets(meta, select(valid, row, Val(0)), xb, yb, kNmKept, kNmKeptShape, kNmKeptShape + kMaxRank,
                     kNmKeptShape + 2 * kMaxRank);
        const Val n = select(valid, meta[kNmN], Val(0));
        const Val sx = meta[kNmXs], sy = meta[kNmYs];
        // the first pass reads each element once: a fused chain stores its steps then
        bool first = true;
        // Gathered: element row * n + i of x in order, unravelled over its shape.
        auto x_at = [&](Val i) -> Val {
          if (!spec.gather_x) return xb + i * sx;
          Var off(meta[kNmXOff]);
          unravel(meta, meta[kNmXRank], kNmXShape, select(valid, row, Val(0)) * meta[kNmN] + i, off);
          return off;
        };
        auto load_x = [&](Val i) { return src.at(x_at(i), first ? &valid : nullptr); };
        const Val zero = Val::constant(0, Type::F64), nf = cast(n, Type::F64);
        auto row_sum = [&](const std::function<Val(Val)>& term) {
          Var s(zero);
          for_(t, n, static_cast<int>(kGroup), [&](Val i) { s = s + term(to(load_x(i), Type::F64)); });
          sh[t] = Val(s);
          barrier();
          first = false;
          tree_fold(sh, t, kGroup, add);
          const Val total = sh[0];
          barrier();
          return total;
        };
        Val mu = zero, var;
        if (spec.rms) {
          var = row_sum([](Val v) { return v * v; }) / nf;
        } else {
          mu = row_sum([](Val v) { return v; }) / nf;
          var = row_sum([&](Val v) { return (v - mu) * (v - mu); }) / nf;
        }
        // mean and rstd as the CPU rounds them: to the statistics' type; the arithmetic takes
        // the mean in two parts (mean + mean_lo) so that no precision of the f64 mean is lost
        const Val m = to(to(mu, st), at), ml = to(mu - to(m, Type::F64), at);
        const Val rs = to(to(1.0 / sqrt(var + eps), st), at);
        const Val nan = Val::constant(std::numeric_limits<double>::quiet_NaN(), st);
        if_(valid && t == 0, [&] {
          store_store(mean, spec.stats, meta[kNmMOff] + row,
                      spec.rms ? Val::constant(0, st) : select(n == 0, nan, to(mu, st)));
          store_store(rstd, spec.stats, meta[kNmROff] + row, select(n == 0, nan, to(rs, st)));
        });
        for_(t, n, static_cast<int>(kGroup), [&](Val i) {
          const Val d = (to(load_x(i), at) - m) - ml;
          // group mode: per channel, the weight folded into rstd first, as the CPU does
          const Val at_i = spec.group ? (row % meta[kNmGroups]) * meta[kNmCg] + i / meta[kNmSpatial] : i;
          Val out = spec.group && spec.weight ? d * (rs * param(0, at_i)) : d * rs;
          if (!spec.group && spec.weight) out = out * param(0, at_i);
          out = out + (spec.bias ? param(spec.weight ? 1 : 0, at_i) : Val::constant(0, at));
          store_store(y, spec.x, yb + i * sy, to(out, value_type(spec.x)));
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
