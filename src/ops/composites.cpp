// SPDX-License-Identifier: MIT OR Apache-2.0
// Note [Composite fallback]: primitives that have a form in other primitives. A backend that
// does not support one of these runs its composite on the device (execute_op,
// src/ops/fallback.cpp), so the data stays there and only the pieces it lacks fall back to the
// CPU. Results agree with the primitive's within the op's tolerance, not bit for bit. The same
// mechanism makes a CPU library's fused forms optional capabilities: a Conv with an epilogue
// (set by nn::conv_bn, conv_act and the fusion decorator) reaches a backend without it as the
// unfused op sequence.
#include <vector>

#include "core/backend.h"
#include "ir/attrs.h"
#include "kiln/nn/functional.h"
#include "ops/dispatch.h"

namespace kiln {
namespace {

/// Softmax / LogSoftmax along their dim, in f32 for f16 and bf16 inputs (as the CPU kernel).
std::vector<Tensor> softmax_composite(const ir::Op& op, const std::vector<Tensor>& in) {
  const int64_t d = ir::ScanAttrs::decode(op).dim;
  const DType out = op.outputs[0].dtype;
  const Tensor x = (out == DType::F16 || out == DType::BF16) ? in[0].to(DType::F32) : in[0];
  const Tensor shifted = x - amax(x, {d}, /*keepdim=*/true);
  const Tensor e = exp(shifted);
  const Tensor r =
      op.kind == ir::OpKind::Softmax ? e / e.sum({d}, /*keepdim=*/true) : shifted - log(e.sum({d}, /*keepdim=*/true));
  return {r.to(out)};
}

/// A Conv with a fused epilogue (ops.def: a CPU library's optional capability) as the op
/// sequence it stands for: the plain Conv, then scale, shift, residual, activation and max pool,
/// each its own op, so a backend without the fused form runs (or falls back for) each piece.
std::vector<Tensor> conv_epilogue_composite(const ir::Op& op, const std::vector<Tensor>& in) {
  const ir::ConvAttrs a = ir::ConvAttrs::decode(op);
  ir::Op plain = detail::make_op(ir::OpKind::Conv);
  ir::ConvAttrs geometry = a;
  geometry.has_epilogue = false;
  geometry.encode(plain);
  const bool bias = ir::conv_has_bias(op);
  std::vector<Tensor> conv_in{in[0], in[1]};
  if (bias) conv_in.push_back(in[2]);
  Tensor y = detail::run("conv", plain, in[0].device(), conv_in)[0];
  Shape per_channel{y.size(1)};  // [O] as [O, 1, ...] over y's spatial dims
  for (int64_t d = 2; d < y.dim(); ++d) per_channel.push_back(1);
  size_t k = ir::conv_scale_input(op);
  if (a.has_scale()) y = y * in[k++].view(per_channel);
  if (a.has_shift()) y = y + in[k++].view(per_channel);
  if (a.has_residual()) y = y + in[k++];
  const int64_t act = a.activation();
  if (act == 1) y = relu(y);
  if (act == 2) y = clamp(y, Scalar(a.clamp_lo), Scalar(a.clamp_hi));
  if (a.has_pool())
    y = nn::functional::max_pool2d(y, a.pool_kernel, {.stride = a.pool_stride, .padding = a.pool_padding});
  return {y};
}

}  // namespace

Composite composite_of(const ir::Op& op) {
  switch (op.kind) {
    case ir::OpKind::Softmax:
    case ir::OpKind::LogSoftmax:
      return softmax_composite;
    case ir::OpKind::Conv:
      return ir::conv_epilogue(op) ? conv_epilogue_composite : nullptr;
    default:
      return nullptr;
  }
}

}  // namespace kiln
