// SPDX-License-Identifier: MIT OR Apache-2.0
// Convolution of the library (kernel/library.h): Conv forward over 1 to 3 spatial dims viewed
// as [D, H, W], with groups, stride, padding and dilation, as one thread per output element
// summing its window in f64 (the device needs f64) and rounding once, so the result is within
// the rounding of the exact sum whatever order the CPU's GEMM takes.
#include <algorithm>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {

using kiln::ir::OpKind;
using kiln::ir::TensorDesc;

std::optional<Conv> conv_of(const kiln::ir::Op& op) {
  if (op.kind != OpKind::Conv || op.outputs.size() != 1 || op.inputs.size() < 2 || op.inputs.size() > 3)
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
  c.bias = op.inputs.size() == 3;
  c.name = std::string("conv_") + store_name(c.value) + (c.bias ? "_bias" : "");
  return c;
}

bool conv_meta(const kiln::ir::Op& op, int32_t* meta) {
  const TensorDesc &x = op.inputs[0], &w = op.inputs[1], &y = op.outputs[0];
  const kiln::ir::ConvAttrs a = kiln::ir::ConvAttrs::decode(op);
  const int64_t nsp = a.nsp, lead = 3 - nsp;
  const size_t r = static_cast<size_t>(nsp + 2);
  if (nsp < 1 || nsp > 3 || x.shape.size() != r || w.shape.size() != r || y.shape.size() != r) return false;
  if (a.stride.size() != static_cast<size_t>(nsp) || a.padding.size() != static_cast<size_t>(nsp) ||
      a.dilation.size() != static_cast<size_t>(nsp) || a.groups < 1)
    return false;
  if (!fits_i32(x) || !fits_i32(w) || !fits_i32(y) || !y.is_contiguous()) return false;
  const int64_t C = x.shape[1], O = y.shape[1];
  if (C % a.groups != 0 || O % a.groups != 0 || w.shape[0] != O || w.shape[1] * a.groups != C) return false;
  std::fill(meta, meta + kConvMetaInts, 0);
  meta[kCvCount] = static_cast<int32_t>(y.numel());
  meta[kCvCpg] = static_cast<int32_t>(C / a.groups);
  meta[kCvOpg] = static_cast<int32_t>(std::max<int64_t>(O / a.groups, 1));
  meta[kCvO] = static_cast<int32_t>(std::max<int64_t>(O, 1));
  meta[kCvXOff] = static_cast<int32_t>(x.offset);
  meta[kCvWOff] = static_cast<int32_t>(w.offset);
  meta[kCvYOff] = static_cast<int32_t>(y.offset);
  meta[kCvXs] = static_cast<int32_t>(x.strides[0]);
  meta[kCvXs + 1] = static_cast<int32_t>(x.strides[1]);
  meta[kCvWs] = static_cast<int32_t>(w.strides[0]);
  meta[kCvWs + 1] = static_cast<int32_t>(w.strides[1]);
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
  for (int64_t d = 0; d < nsp; ++d) {
    const size_t q = static_cast<size_t>(2 + d);
    const int64_t at = lead + d;
    if (a.stride[d] < 1 || a.dilation[d] < 1) return false;
    meta[kCvIn + at] = static_cast<int32_t>(x.shape[q]);
    meta[kCvOut + at] = static_cast<int32_t>(y.shape[q]);
    meta[kCvK + at] = static_cast<int32_t>(w.shape[q]);
    meta[kCvS + at] = static_cast<int32_t>(a.stride[d]);
    meta[kCvP + at] = static_cast<int32_t>(a.padding[d]);
    meta[kCvDl + at] = static_cast<int32_t>(a.dilation[d]);
    meta[kCvXs + 2 + at] = static_cast<int32_t>(x.strides[q]);
    meta[kCvWs + 2 + at] = static_cast<int32_t>(w.strides[q]);
  }
  return true;
}

Kernel trace_conv(const Conv& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.value, "out", true);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Memory w = declare_store(b, spec.value, "w", false);
        const Memory bias = spec.bias ? declare_store(b, spec.value, "bias", false) : Memory(0, false);
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kCvCount], [&] {
          Var r(i);
          Val o[3];
          for (int d = 2; d >= 0; --d) {
            o[d] = Val(r) % meta[kCvOut + d];
            r = Val(r) / meta[kCvOut + d];
          }
          const Val oc = Val(r) % meta[kCvO], n = Val(r) / meta[kCvO];
          const Val g = oc / meta[kCvOpg], cpg = meta[kCvCpg];
          Val start[3];
          for (int d = 0; d < 3; ++d) start[d] = o[d] * meta[kCvS + d] - meta[kCvP + d];
          const Val xb = meta[kCvXOff] + n * meta[kCvXs] + g * cpg * meta[kCvXs + 1];
          const Val wb = meta[kCvWOff] + oc * meta[kCvWs];
          Var acc(Val::constant(0, Type::F64));
          for_(0, cpg, [&](Val c) {
            const Val xc = xb + c * meta[kCvXs + 1], wc = wb + c * meta[kCvWs + 1];
            for_(0, meta[kCvK], [&](Val kd) {
              const Val id = start[0] + kd * meta[kCvDl];
              if_(id >= 0 && id < meta[kCvIn], [&] {
                for_(0, meta[kCvK + 1], [&](Val kh) {
                  const Val ih = start[1] + kh * meta[kCvDl + 1];
                  if_(ih >= 0 && ih < meta[kCvIn + 1], [&] {
                    for_(0, meta[kCvK + 2], [&](Val kw) {
                      const Val iw = start[2] + kw * meta[kCvDl + 2];
                      if_(iw >= 0 && iw < meta[kCvIn + 2], [&] {
                        const Val xv = load_store(
                            x, spec.value, xc + id * meta[kCvXs + 2] + ih * meta[kCvXs + 3] + iw * meta[kCvXs + 4]);
                        const Val wv = load_store(
                            w, spec.value, wc + kd * meta[kCvWs + 2] + kh * meta[kCvWs + 3] + kw * meta[kCvWs + 4]);
                        acc = Val(acc) + cast(xv, Type::F64) * cast(wv, Type::F64);
                      });
                    });
                  });
                });
              });
            });
          });
          Val sum = acc;
          if (spec.bias)
            sum = sum + cast(load_store(bias, spec.value, meta[kCvBOff] + oc * meta[kCvBStride]), Type::F64);
          const Type vt = value_type(spec.value);
          store_store(out, spec.value, meta[kCvYOff] + i, vt == Type::F64 ? sum : cast(sum, Type::F32));
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
