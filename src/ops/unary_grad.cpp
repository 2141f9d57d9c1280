// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Unary family (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
#include "autodiff/rules.h"
#include "kiln/ops.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }
}  // namespace

void register_unary_grads() {
  using K = ir::OpKind;
  rule(K::Neg, kSaveNothing, [](C c) -> V { return {-c.grads[0]}; });
  rule(K::Exp, kSaveOutputs, [](C c) -> V { return {c.grads[0] * c.outputs[0]}; });
  rule(K::Log, kSaveInputs, [](C c) -> V { return {c.grads[0] / c.inputs[0]}; });
  rule(K::Relu, kSaveOutputs,
       [](C c) -> V { return {where(gt(c.outputs[0], 0), c.grads[0], zeros_like(c.grads[0]))}; });
  rule(K::Tanh, kSaveOutputs, [](C c) -> V { return {c.grads[0] * (1 - square(c.outputs[0]))}; });
  rule(K::Cast, kSaveNothing, [](C c) -> V { return {c.grads[0].to(c.op.inputs[0].dtype)}; });
  rule(K::Copy, kSaveNothing, [](C c) -> V { return {sum_to(c.grads[0], c.op.inputs[0].shape)}; });
  for (K k :
       {K::Sign, K::Floor, K::Ceil, K::Round, K::Trunc, K::IsNan, K::IsInf, K::IsFinite, K::LogicalNot, K::BitwiseNot})
    nondiff(k);
}

}  // namespace kiln::autodiff
