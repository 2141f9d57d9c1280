// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the nn ops (ops.def), written with public ops so they are
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

void register_nn_grads() {
  using K = ir::OpKind;
  // MatMul [B, M, K] x [B, K, N]; a batch stride 0 (broadcast) input gets its gradient summed.
  rule(K::MatMul, kSaveInputs, [](C c) -> V {
    const Tensor& g = c.grads[0];
    return {c.needs(0) ? sum_to(matmul(g, c.inputs[1].mT()), c.op.inputs[0].shape) : Tensor(),
            c.needs(1) ? sum_to(matmul(c.inputs[0].mT(), g), c.op.inputs[1].shape) : Tensor()};
  });
}

}  // namespace kiln::autodiff
