// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the fft ops (ops.def), written with public ops so they are
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

void register_fft_grads() {}

}  // namespace kiln::autodiff
