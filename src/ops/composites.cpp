// SPDX-License-Identifier: MIT OR Apache-2.0
// Note [Composite fallback]: primitives that have a form in other primitives. A backend that
// does not support one of these runs its composite on the device (execute_op,
// src/core/fallback.cpp), so the data stays there and only the pieces it lacks fall back to the
// CPU. Results agree with the primitive's within the op's tolerance, not bit for bit.
#include <vector>

#include "core/backend.h"
#include "ops/dispatch.h"

namespace kiln {
namespace {

/// Softmax / LogSoftmax along ints[0], in f32 for f16 and bf16 inputs (as the CPU kernel).
std::vector<Tensor> softmax_composite(const ir::Op& op, const std::vector<Tensor>& in) {
  const int64_t d = op.attrs.ints[0];
  const DType out = op.outputs[0].dtype;
  const Tensor x = (out == DType::F16 || out == DType::BF16) ? in[0].to(DType::F32) : in[0];
  const Tensor shifted = x - amax(x, {d}, /*keepdim=*/true);
  const Tensor e = exp(shifted);
  const Tensor r =
      op.kind == ir::OpKind::Softmax ? e / e.sum({d}, /*keepdim=*/true) : shifted - log(e.sum({d}, /*keepdim=*/true));
  return {r.to(out)};
}

}  // namespace

Composite composite_of(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::Softmax:
    case ir::OpKind::LogSoftmax:
      return softmax_composite;
    default:
      return nullptr;
  }
}

}  // namespace kiln
