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
  const size_t geometry = ir::conv_geometry_ints(op.attrs.ints[1]);
  ir::Op plain = detail::make_op(ir::OpKind::Conv);
  plain.attrs.ints.assign(op.attrs.ints.begin(), op.attrs.ints.begin() + static_cast<ptrdiff_t>(geometry));
  const bool bias = ir::conv_has_bias(op);
  std::vector<Tensor> conv_in{in[0], in[1]};
  if (bias) conv_in.push_back(in[2]);
  Tensor y = detail::run("conv", plain, in[0].device(), conv_in)[0];
  Shape per_channel{y.size(1)};  // [O] as [O, 1, ...] over y's spatial dims
  for (int64_t d = 2; d < y.dim(); ++d) per_channel.push_back(1);
  size_t k = ir::conv_scale_input(op);
  if (ir::conv_has_scale(op)) y = y * in[k++].view(per_channel);
  if (ir::conv_has_shift(op)) y = y + in[k++].view(per_channel);
  if (ir::conv_has_residual(op)) y = y + in[k++];
  const int64_t act = ir::conv_activation(op);
  if (act == 1) y = relu(y);
  if (act == 2) y = clamp(y, Scalar(op.attrs.reals[0]), Scalar(op.attrs.reals[1]));
  if (ir::conv_has_pool(op)) {
    const int64_t* p = ir::conv_pool_ints(op);
    y = nn::functional::max_pool2d(y, Dims{p[0], p[1]}, {.stride = Dims{p[2], p[3]}, .padding = Dims{p[4], p[5]}});
  }
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
