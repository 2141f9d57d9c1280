// SPDX-License-Identifier: MIT OR Apache-2.0
// Convolution of the library (kernel/library.h): Conv, ConvTranspose (the gradient of the input)
// and ConvWeightGrad over 1 to 3 spatial dims viewed as [D, H, W], with groups, stride, padding
// and dilation, as one thread per output element summing its terms in the value's arithmetic
// type (f32 for f32, f16 and bf16: a device without f64 runs them, and a GPU's f64 rate is a
// fraction of its f32 rate), in a fixed order.
#include <algorithm>
#include <array>
#include <functional>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {

using kiln::ir::OpKind;
using kiln::ir::TensorDesc;

std::optional<Conv> conv_of(const kiln::ir::Op& op) {
  const bool grad = op.kind == OpKind::ConvWeightGrad;
  if ((op.kind != OpKind::Conv && op.kind != OpKind::ConvTranspose && !grad) || op.outputs.size() != 1 ||
      op.inputs.size() < 2 || op.inputs.size() > (grad ? 2u : 3u))
    return std::nullopt;
  const kiln::ir::ConvAttrs a = kiln::ir::ConvAttrs::decode(op);
  if (a.has_epilogue && a.epilogue != 0) return std::nullopt;
  const DType t = op.outputs[0].dtype;
  Conv c;
  switch (t) {
    case DType::F32:
      c.value = Store::F32;
      break;
    case DType::F64:
      c.value = Store::F64;
      break;
    case DType::F16:
      c.value = Store::F16;
      break;
    case DType::BF16:
      c.value = Store::BF16;
      break;
    default:
      return std::nullopt;
  }
  for (const TensorDesc& d : op.inputs)
    if (d.dtype != t) return std::nullopt;
  c.kind = op.kind;
  c.bias = op.inputs.size() == 3;
  c.name = std::string(grad                               ? "conv_weight_grad_"
                       : op.kind == OpKind::ConvTranspose ? "conv_transpose_"
                                                          : "conv_") +
           store_name(c.value) + (c.bias ? "_bias" : "");
  return c;
}

bool conv_meta(const kiln::ir::Op& op, int32_t* meta) {
  // The geometry in the forward convolution's terms (in, out and kernel spatial sizes), whose
  // input is the output of ConvTranspose and whose weight is the output of ConvWeightGrad.
  // C counts the channels of the first input, O those of the other side (ops.def).
  const TensorDesc &a0 = op.inputs[0], &a1 = op.inputs[1], &y = op.outputs[0];
  const kiln::ir::ConvAttrs a = kiln::ir::ConvAttrs::decode(op);
  const int64_t nsp = a.nsp, lead = 3 - nsp;
  const size_t r = static_cast<size_t>(nsp + 2);
  if (nsp < 1 || nsp > 3 || a0.shape.size() != r || a1.shape.size() != r || y.shape.size() != r) return false;
  if (a.stride.size() != static_cast<size_t>(nsp) || a.padding.size() != static_cast<size_t>(nsp) ||
      a.dilation.size() != static_cast<size_t>(nsp) || a.groups < 1)
    return false;
  if (!fits_i32(a0) || !fits_i32(a1) || !fits_i32(y) || !y.is_contiguous()) return false;
  // C: channels of the data input a0 (grouped by cpg), O: of the other side (grouped by opg)
  const bool transpose = op.kind == OpKind::ConvTranspose, grad = op.kind == OpKind::ConvWeightGrad;
  const int64_t C = a0.shape[1], O = grad ? a1.shape[1] : y.shape[1];
  if (C % a.groups != 0 || O % a.groups != 0) return false;
  if (transpose ? a1.shape[0] != C || a1.shape[1] * a.groups != O
      : grad    ? y.shape[0] != O || y.shape[1] * a.groups != C || a1.shape[0] != a0.shape[0]
                : a1.shape[0] != O || a1.shape[1] * a.groups != C)
    return false;
  std::fill(meta, meta + kConvMetaInts, 0);
  meta[kCvCount] = static_cast<int32_t>(y.numel());
  meta[kCvCpg] = static_cast<int32_t>(std::max<int64_t>(C / a.groups, 1));
  meta[kCvOpg] = static_cast<int32_t>(std::max<int64_t>(O / a.groups, 1));
  meta[kCvO] = static_cast<int32_t>(std::max<int64_t>(O, 1));
  meta[kCvN] = static_cast<int32_t>(a0.shape[0]);
  meta[kCvXOff] = static_cast<int32_t>(a0.offset);
  meta[kCvWOff] = static_cast<int32_t>(a1.offset);
  meta[kCvYOff] = static_cast<int32_t>(y.offset);
  for (int q = 0; q < 2; ++q) {
    meta[kCvXs + q] = static_cast<int32_t>(a0.strides[static_cast<size_t>(q)]);
    meta[kCvWs + q] = static_cast<int32_t>(a1.strides[static_cast<size_t>(q)]);
  }
  if (op.inputs.size() == 3) {
    const TensorDesc& b = op.inputs[2];
    if (b.shape.size() != 1 || b.shape[0] != O || !fits_i32(b)) return false;
    meta[kCvBOff] = static_cast<int32_t>(b.offset);
    meta[kCvBStride] = static_cast<int32_t>(b.strides[0]);
  }
  for (int d = 0; d < 3; ++d) {
    meta[kCvIn + d] = meta[kCvOut + d] = meta[kCvK + d] = meta[kCvS + d] = meta[kCvDl + d] = 1;
    meta[kCvP + d] = 0;
  }
  // the spatial sizes of the forward's input, output and kernel, from whichever tensor has them
  const TensorDesc &in = transpose ? y : a0, &out = transpose ? a0 : grad ? a1 : y, &k = grad ? y : a1;
  for (int64_t d = 0; d < nsp; ++d) {
    const size_t q = static_cast<size_t>(2 + d);
    const int64_t at = lead + d;
    if (a.stride[d] < 1 || a.dilation[d] < 1) return false;
    meta[kCvIn + at] = static_cast<int32_t>(in.shape[q]);
    meta[kCvOut + at] = static_cast<int32_t>(out.shape[q]);
    meta[kCvK + at] = static_cast<int32_t>(k.shape[q]);
    meta[kCvS + at] = static_cast<int32_t>(a.stride[d]);
    meta[kCvP + at] = static_cast<int32_t>(a.padding[d]);
    meta[kCvDl + at] = static_cast<int32_t>(a.dilation[d]);
    meta[kCvXs + 2 + at] = static_cast<int32_t>(a0.strides[q]);
    meta[kCvWs + 2 + at] = static_cast<int32_t>(a1.strides[q]);
  }
  return true;
}

namespace {

/// The parameter block read once at the kernel's start: its values are then registers, not
/// loads repeated in the inner loops (a compiler cannot hoist them past the output's stores).
using Meta = std::vector<Val>;
Meta load_meta(const Buffer<int32_t>& buffer) {
  Meta m;
  for (int q = 0; q < kConvMetaInts; ++q) m.push_back(buffer[q]);
  return m;
}

/// The spatial position of flat index r over dims `size` [D, H, W]; r becomes what is left.
std::array<Val, 3> unflatten(Var& r, const Meta& meta, int size) {
  std::array<Val, 3> p;
  for (int d = 2; d >= 0; --d) {
    p[static_cast<size_t>(d)] = Val(r) % meta[size + d];
    r = Val(r) / meta[size + d];
  }
  return p;
}

/// body(k) for every kernel position k whose forward input position start + k * dilation is
/// inside the input, with that position (Conv and ConvWeightGrad).
void over_window(const Meta& meta, const std::array<Val, 3>& start, int extent, int bound,
                 const std::function<void(const std::array<Val, 3>&, const std::array<Val, 3>&)>& body) {
  std::array<Val, 3> k, at;
  std::function<void(int)> level = [&](int d) {
    if (d == 3) return body(k, at);
    for_(0, meta[extent + d], [&](Val kd) {
      const Val pos = start[static_cast<size_t>(d)] + kd * meta[kCvDl + d];
      if_(pos >= 0 && pos < meta[bound + d], [&] {
        k[static_cast<size_t>(d)] = kd;
        at[static_cast<size_t>(d)] = pos;
        level(d + 1);
      });
    });
  };
  level(0);
}

Val offset(const Meta& meta, int strides, Val base, const std::array<Val, 3>& p) {
  return base + p[0] * meta[strides + 2] + p[1] * meta[strides + 3] + p[2] * meta[strides + 4];
}

}  // namespace

namespace {

/// ConvWeightGrad: one group per weight element [O, C/g, *k], its threads striding over the
/// (n, output position) terms x[n, c, q s - pad + k dl] gy[n, o, q], summed and combined
/// in a fixed shared-memory tree (deterministic).
Kernel trace_conv_weight_grad(const Conv& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 32;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.value, "out", true);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Memory gy = declare_store(b, spec.value, "grad_out", false);
        const Meta meta = load_meta(b.input<int32_t>("meta"));
        const Memory sh = shared_of(b, value_type(spec.value), "sh", kGroup);
        const Val t = thread_id(0);
        const Val e = group_id(1) * num_groups(0) + group_id(0);
        const Val valid = e < meta[kCvCount];
        Var r(select(valid, e, Val(0)));
        const std::array<Val, 3> k = unflatten(r, meta, kCvK);
        const Val cpg = meta[kCvCpg], cl = Val(r) % cpg, o = Val(r) / cpg, g = o / meta[kCvOpg];
        const Val spatial = meta[kCvOut] * meta[kCvOut + 1] * meta[kCvOut + 2];
        const Val terms = select(valid, meta[kCvN] * spatial, Val(0));
        const Type at_t = value_type(spec.value);
        Var acc(Val::constant(0, at_t));
        for_(t, terms, static_cast<int>(kGroup), [&](Val j) {
          Var rj(j);
          const std::array<Val, 3> q = unflatten(rj, meta, kCvOut);
          const Val n = rj;
          std::array<Val, 3> at;
          Val inside = Val(true);
          for (size_t d = 0; d < 3; ++d) {
            const int m = static_cast<int>(d);
            at[d] = q[d] * meta[kCvS + m] - meta[kCvP + m] + k[d] * meta[kCvDl + m];
            inside = inside && at[d] >= 0 && at[d] < meta[kCvIn + m];
          }
          if_(inside, [&] {
            const Val xc = meta[kCvXOff] + n * meta[kCvXs] + (g * cpg + cl) * meta[kCvXs + 1];
            const Val gc = meta[kCvWOff] + n * meta[kCvWs] + o * meta[kCvWs + 1];
            const Val xv = load_store(x, spec.value, offset(meta, kCvXs, xc, at));
            const Val gv = load_store(gy, spec.value, offset(meta, kCvWs, gc, q));
            acc = Val(acc) + xv * gv;
          });
        });
        sh[t] = Val(acc);
        barrier();
        tree_fold(sh, t, kGroup, [](Val a, Val c) { return a + c; });
        if_(valid && t == 0, [&] {
          const Val sum = sh[0];
          store_store(out, spec.value, meta[kCvYOff] + e, sum);
        });
      },
      limits);
}

}  // namespace

Kernel trace_conv(const Conv& spec, const Limits& limits) {
  if (spec.kind == OpKind::ConvWeightGrad) return trace_conv_weight_grad(spec, limits);
  return trace_conv_into(spec, limits, *no_source(), true);
}

Kernel trace_conv_into(const Conv& spec, const Limits& limits, Source& src, bool keep) {
  constexpr uint32_t kGroup = 256;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = keep ? declare_store(b, spec.value, "out", true) : Memory(0, false);
        src.outputs(b);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Memory w = declare_store(b, spec.value, "w", false);
        const Memory bias = spec.bias ? declare_store(b, spec.value, "bias", false) : Memory(0, false);
        src.inputs(b, spec.value, "in");
        const Buffer<int32_t> meta_buf = b.input<int32_t>("meta");
        src.scalars(b, meta_buf);
        const Meta meta = load_meta(meta_buf);
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        auto product = [&](Val xi, Val wi) { return load_store(x, spec.value, xi) * load_store(w, spec.value, wi); };
        if_(i < meta[kCvCount], [&] {
          Var acc(Val::constant(0, value_type(spec.value)));
          Var r(i);
          Val oc;  // the output channel of a bias
          const Val cpg = meta[kCvCpg];
          if (spec.kind == OpKind::Conv) {  // y [N, O, *out]: x's window times w
            const std::array<Val, 3> o = unflatten(r, meta, kCvOut);
            oc = Val(r) % meta[kCvO];
            const Val n = Val(r) / meta[kCvO], g = oc / meta[kCvOpg];
            std::array<Val, 3> start;
            for (int d = 0; d < 3; ++d)
              start[static_cast<size_t>(d)] = o[static_cast<size_t>(d)] * meta[kCvS + d] - meta[kCvP + d];
            for_(0, cpg, [&](Val c) {
              const Val xc = meta[kCvXOff] + n * meta[kCvXs] + (g * cpg + c) * meta[kCvXs + 1];
              const Val wc = meta[kCvWOff] + oc * meta[kCvWs] + c * meta[kCvWs + 1];
              over_window(meta, start, kCvK, kCvIn, [&](const auto& k, const auto& at) {
                acc = Val(acc) + product(offset(meta, kCvXs, xc, at), offset(meta, kCvWs, wc, k));
              });
            });
          } else {                                                   // y [N, O, *in]: the positions q of x
            const std::array<Val, 3> p = unflatten(r, meta, kCvIn);  // with q s - pad + k dl = p
            oc = Val(r) % meta[kCvO];
            const Val n = Val(r) / meta[kCvO], g = oc / meta[kCvOpg], ol = oc % meta[kCvOpg];
            for_(0, cpg, [&](Val c) {
              const Val ch = g * cpg + c;
              const Val xc = meta[kCvXOff] + n * meta[kCvXs] + ch * meta[kCvXs + 1];
              const Val wc = meta[kCvWOff] + ch * meta[kCvWs] + ol * meta[kCvWs + 1];
              std::array<Val, 3> k, q;
              std::function<void(int)> level = [&](int d) {
                if (d == 3) {
                  acc = Val(acc) + product(offset(meta, kCvXs, xc, q), offset(meta, kCvWs, wc, k));
                  return;
                }
                for_(0, meta[kCvK + d], [&](Val kd) {
                  const Val num = p[static_cast<size_t>(d)] + meta[kCvP + d] - kd * meta[kCvDl + d];
                  const Val safe = select(num >= 0, num, Val(0)), qd = safe / meta[kCvS + d];
                  if_(num >= 0 && safe % meta[kCvS + d] == 0 && qd < meta[kCvOut + d], [&] {
                    k[static_cast<size_t>(d)] = kd;
                    q[static_cast<size_t>(d)] = qd;
                    level(d + 1);
                  });
                });
              };
              level(0);
            });
          }
          Val sum = acc;
          if (spec.bias) sum = sum + load_store(bias, spec.value, meta[kCvBOff] + oc * meta[kCvBStride]);
          if (keep) store_store(out, spec.value, meta[kCvYOff] + i, sum);
          src.epilogue(i, round_trip(spec.value, sum));  // element i of the contiguous result
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
