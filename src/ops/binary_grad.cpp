// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Binary and Ternary families (ops.def). Inputs may have been broadcast:
// each gradient is summed back to its input's shape with sum_to.
#include "autodiff/rules.h"
#include "kiln/ops.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }
/// g summed to input i's shape (undefined when input i needs no gradient).
Tensor to_input(C c, size_t i, const Tensor& g) { return c.needs(i) ? sum_to(g, c.op.inputs[i].shape) : Tensor(); }
}  // namespace

void register_binary_grads() {
  using K = ir::OpKind;
  rule(K::Add, kSaveNothing, [](C c) -> V { return {to_input(c, 0, c.grads[0]), to_input(c, 1, c.grads[0])}; });
  rule(K::Sub, kSaveNothing, [](C c) -> V { return {to_input(c, 0, c.grads[0]), to_input(c, 1, -c.grads[0])}; });
  rule(K::Mul, kSaveInputs, [](C c) -> V {
    return {c.needs(0) ? to_input(c, 0, c.grads[0] * c.inputs[1]) : Tensor(),
            c.needs(1) ? to_input(c, 1, c.grads[0] * c.inputs[0]) : Tensor()};
  });
  rule(K::Div, kSaveInputs, [](C c) -> V {
    const Tensor& a = c.inputs[0];
    const Tensor& b = c.inputs[1];
    return {c.needs(0) ? to_input(c, 0, c.grads[0] / b) : Tensor(),
            c.needs(1) ? to_input(c, 1, -c.grads[0] * a / square(b)) : Tensor()};
  });
  for (K k :
       {K::Eq, K::Ne, K::Lt, K::Le, K::Gt, K::Ge, K::LogicalAnd, K::LogicalOr, K::LogicalXor, K::FloorDiv, K::TruncDiv})
    nondiff(k);
}

}  // namespace kiln::autodiff
