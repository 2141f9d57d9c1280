// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the reduce ops (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
#include "autodiff/rules.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
[[maybe_unused]] void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
[[maybe_unused]] void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }
}  // namespace

void register_reduce_grads() {
  using K = ir::OpKind;
  // Sum over ints[1..] (ints[0] = keepdim): broadcast the gradient back.
  rule(K::Sum, kSaveNothing, [](C c) -> V {
    const Shape& in = c.op.inputs[0].shape;
    Tensor g = c.grads[0];
    if (c.op.attrs.ints[0] == 0 && !in.empty())
      for (size_t i = 1; i < c.op.attrs.ints.size(); ++i) g = g.unsqueeze(c.op.attrs.ints[i]);
    return {g.expand(in).to(c.op.inputs[0].dtype)};
  });
}

}  // namespace kiln::autodiff
