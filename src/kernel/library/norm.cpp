// SPDX-License-Identifier: MIT OR Apache-2.0
// LayerNorm, RMSNorm and GroupNorm (the LayerNorm op, ops.def) of the library on f32: one group
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

/// Sums sh[0..kGroup) into sh[0] (every thread reaches every barrier).
void tree_sum(const Shared<double>& sh, Val t) {
  for (uint32_t s = kGroup / 2; s > 0; s /= 2) {
    if_(t < static_cast<int>(s), [&] {
      const Val a = sh[t], b = sh[t + static_cast<int>(s)];
      sh[t] = a + b;
    });
    barrier();
  }
}

/// The one stride of dims [from, end) of d when they are laid out as one run (size-1 dims
/// aside): 1 for an empty run; false when they are not.
bool run_stride(const kiln::ir::TensorDesc& d, size_t from, int64_t* stride) {
  int64_t s = 0, span = 1;
  for (size_t q = d.shape.size(); q-- > from;) {
    if (d.shape[q] == 1) continue;
    if (s == 0)
      s = d.strides[q];
    else if (d.strides[q] != s * span)
      return false;
    span *= d.shape[q];
  }
  *stride = s == 0 ? 1 : s;
  return true;
}

}  // namespace

std::optional<Norm> norm_of(const kiln::ir::Op& op) {
  if (op.kind != kiln::ir::OpKind::LayerNorm || op.outputs.size() != 3 || op.inputs.empty()) return std::nullopt;
  auto f32 = [](const kiln::ir::TensorDesc& d) { return d.dtype == DType::F32 && fits_i32(d); };
  if (!std::all_of(op.inputs.begin(), op.inputs.end(), f32) || !std::all_of(op.outputs.begin(), op.outputs.end(), f32))
    return std::nullopt;
  const kiln::ir::NormAttrs a = kiln::ir::NormAttrs::decode(op);
  Norm n;
  n.rms = a.rms;
  n.group = a.groups > 0;
  n.weight = a.has_weight;
  n.bias = a.has_bias;
  if (op.inputs.size() != 1u + n.weight + n.bias) return std::nullopt;
  n.name = std::string(n.rms     ? "rms_norm"
                       : n.group ? "group_norm"
                                 : "layer_norm") +
           (n.weight ? "_w" : "") + (n.bias ? "_b" : "") + "_f32";
  n.push = {Arg(a.eps)};
  return n;
}

bool norm_meta(const kiln::ir::Op& op, int32_t* meta) {
  std::fill(meta, meta + kNormMetaInts, 0);
  const kiln::ir::NormAttrs a = kiln::ir::NormAttrs::decode(op);
  const kiln::ir::TensorDesc &x = op.inputs[0], &y = op.outputs[0], &m = op.outputs[1], &r = op.outputs[2];
  const size_t rank = x.shape.size();
  if (y.shape != x.shape || !m.is_contiguous() || !r.is_contiguous()) return false;
  if (a.groups > 0) {  // rows (n, g) of C/G channels x spatial: x and y contiguous
    if (rank < 2 || !x.is_contiguous() || !y.is_contiguous() || x.shape[1] % a.groups != 0) return false;
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
    if (!run_stride(x, from, &sx) || !run_stride(y, from, &sy)) return false;
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

Kernel trace_norm(const Norm& spec, const Limits& limits) {
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Buffer<float> y = b.output<float>("y"), mean = b.output<float>("mean"), rstd = b.output<float>("rstd");
        const Buffer<float> x = b.input<float>("x");
        std::optional<Buffer<float>> w, bias;
        if (spec.weight) w = b.input<float>("weight");
        if (spec.bias) bias = b.input<float>("bias");
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Val eps = b.scalar<double>("eps");
        const Shared<double> sh = b.shared<double>("sh", kGroup);
        const Val t = thread_id(0);
        const Val row = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = row < meta[kNmRows];
        Var xb(meta[kNmXOff]), yb(meta[kNmYOff]);
        {
          Var rem(select(valid, row, Val(0)));
          const Val nk = meta[kNmKept];
          for_(0, nk, [&](Val j) {
            const Val d = nk - 1 - j;
            const Val size = meta[kNmKeptShape + d];
            const Val idx = rem % size;
            rem = rem / size;
            xb = xb + idx * meta[kNmKeptShape + kMaxRank + d];
            yb = yb + idx * meta[kNmKeptShape + 2 * kMaxRank + d];
          });
        }
        const Val n = select(valid, meta[kNmN], Val(0));
        const Val sx = meta[kNmXs], sy = meta[kNmYs];
        const Val zero = Val::constant(0, Type::F64), nf = cast(n, Type::F64);
        auto row_sum = [&](const std::function<Val(Val)>& term) {
          Var s(zero);
          for_(t, n, static_cast<int>(kGroup), [&](Val i) { s = s + term(cast(x[xb + i * sx], Type::F64)); });
          sh[t] = Val(s);
          barrier();
          tree_sum(sh, t);
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
        const Val m = cast(mu, Type::F32), ml = cast(mu - cast(m, Type::F64), Type::F32);
        const Val rs = cast(1.0 / sqrt(var + eps), Type::F32);
        const float nan = std::numeric_limits<float>::quiet_NaN();
        if_(valid && t == 0, [&] {
          mean[meta[kNmMOff] + row] = spec.rms ? Val(0.0f) : select(n == 0, Val(nan), m);
          rstd[meta[kNmROff] + row] = select(n == 0, Val(nan), rs);
        });
        for_(t, n, static_cast<int>(kGroup), [&](Val i) {
          const Val d = (x[xb + i * sx] - m) - ml;
          Val out;
          if (spec.group) {  // per channel: the weight folded into rstd first, as the CPU does
            const Val c = (row % meta[kNmGroups]) * meta[kNmCg] + i / meta[kNmSpatial];
            const Val scale = w ? rs * (*w)[meta[kNmParamOff] + c * meta[kNmParamOff + 1]] : rs;
            out = d * scale;
          } else {
            out = d * rs;
            if (w) out = out * (*w)[meta[kNmParamOff] + i * meta[kNmParamOff + 1]];
          }
          const int bi = spec.weight ? 2 : 0;
          const Val at = spec.group ? (row % meta[kNmGroups]) * meta[kNmCg] + i / meta[kNmSpatial] : i;
          out = out + (bias ? (*bias)[meta[kNmParamOff + bi] + at * meta[kNmParamOff + bi + 1]] : Val(0.0f));
          y[yb + i * sy] = out;
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
