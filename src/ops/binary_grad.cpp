// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Binary and Ternary families (ops.def). Inputs may have been broadcast:
// each gradient is summed back to its input's shape with sum_to. The formulas follow PyTorch's
// derivatives.yaml (maximum/minimum split the gradient evenly on ties, fmax/fmin send it to the
// input they returned, pow's exponent gradient is 0 where the base is 0 and the exponent >= 0).
#include "autodiff/rules.h"
#include "kiln/ops.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn, uint32_t input_mask = ~0u) {
  set_rule(k, GradRule{std::move(fn), save, true, input_mask});
}
void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }
/// g summed to input i's shape (undefined when input i needs no gradient).
Tensor to_input(C c, size_t i, const Tensor& g) { return c.needs(i) ? sum_to(g, c.op.inputs[i].shape) : Tensor(); }
/// Calls make() for the gradient of input i only when that input needs one.
template <class F>
Tensor grad_of(C c, size_t i, F make) {
  return c.needs(i) ? sum_to(make(), c.op.inputs[i].shape) : Tensor();
}
/// maximum / minimum: the selected input gets the gradient, ties share it evenly.
/// `wins0` is where input 0 strictly wins, `wins1` where input 1 does.
V extremum_grad(C c, const Tensor& wins0, const Tensor& wins1) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  Tensor shared = where(eq(a, b), c.grads[0] * 0.5, c.grads[0]);
  return {grad_of(c, 0, [&] { return where(wins1, 0, shared); }),
          grad_of(c, 1, [&] { return where(wins0, 0, shared); })};
}
}  // namespace

void register_binary_grads() {
  using K = ir::OpKind;
  rule(K::Add, kSaveNothing, [](C c) -> V { return {to_input(c, 0, c.grads[0]), to_input(c, 1, c.grads[0])}; });
  rule(K::Sub, kSaveNothing, [](C c) -> V {
    return {to_input(c, 0, c.grads[0]), grad_of(c, 1, [&] { return -c.grads[0]; })};
  });
  rule(K::Mul, kSaveInputs, [](C c) -> V {
    return {grad_of(c, 0, [&] { return c.grads[0] * c.inputs[1]; }),
            grad_of(c, 1, [&] { return c.grads[0] * c.inputs[0]; })};
  });
  rule(K::Div, kSaveInputs, [](C c) -> V {
    const Tensor& a = c.inputs[0];
    const Tensor& b = c.inputs[1];
    return {grad_of(c, 0, [&] { return c.grads[0] / b; }), grad_of(c, 1, [&] { return -c.grads[0] * a / square(b); })};
  });
  // a - floor(a / b) * b and a - trunc(a / b) * b: d/db = -floor(a / b) (resp. trunc).
  rule(K::Remainder, kSaveInputs, [](C c) -> V {
    return {to_input(c, 0, c.grads[0]),
            grad_of(c, 1, [&] { return -c.grads[0] * div(c.inputs[0], c.inputs[1], "floor"); })};
  });
  rule(K::Fmod, kSaveInputs, [](C c) -> V {
    return {to_input(c, 0, c.grads[0]),
            grad_of(c, 1, [&] { return -c.grads[0] * div(c.inputs[0], c.inputs[1], "trunc"); })};
  });
  rule(K::Pow, kSaveInputs, [](C c) -> V {
    const Tensor& a = c.inputs[0];
    const Tensor& b = c.inputs[1];
    return {grad_of(c, 0,
                    [&] {
                      // exponent 0 gives 0 even where a^-1 is infinite.
                      return where(eq(b, 0), 0, c.grads[0] * b * pow(a, b - 1));
                    }),
            grad_of(c, 1, [&] {
              Tensor d = pow(a, b) * log(a);
              return c.grads[0] * where(logical_and(eq(a, 0), ge(b, 0)), 0, d);
            })};
  });
  rule(K::Atan2, kSaveInputs, [](C c) -> V {
    const Tensor& a = c.inputs[0];
    const Tensor& b = c.inputs[1];
    Tensor r2 = square(a) + square(b);
    return {grad_of(c, 0, [&] { return c.grads[0] * b / r2; }), grad_of(c, 1, [&] { return -c.grads[0] * a / r2; })};
  });
  rule(K::Hypot, kSaveBoth, [](C c) -> V {
    const Tensor& r = c.outputs[0];
    return {grad_of(c, 0, [&] { return c.grads[0] * c.inputs[0] / r; }),
            grad_of(c, 1, [&] { return c.grads[0] * c.inputs[1] / r; })};
  });
  rule(K::LogAddExp, kSaveInputs, [](C c) -> V {
    const Tensor& a = c.inputs[0];
    const Tensor& b = c.inputs[1];
    return {grad_of(c, 0, [&] { return c.grads[0] * sigmoid(a - b); }),
            grad_of(c, 1, [&] { return c.grads[0] * sigmoid(b - a); })};
  });
  rule(K::Maximum, kSaveInputs,
       [](C c) -> V { return extremum_grad(c, gt(c.inputs[0], c.inputs[1]), lt(c.inputs[0], c.inputs[1])); });
  rule(K::Minimum, kSaveInputs,
       [](C c) -> V { return extremum_grad(c, lt(c.inputs[0], c.inputs[1]), gt(c.inputs[0], c.inputs[1])); });
  // fmax/fmin ignore NaN: input 0 is returned where it wins or ties, or where input 1 is NaN.
  rule(K::Fmax, kSaveInputs, [](C c) -> V {
    Tensor first = logical_or(ge(c.inputs[0], c.inputs[1]), isnan(c.inputs[1]));
    return {grad_of(c, 0, [&] { return where(first, c.grads[0], 0); }),
            grad_of(c, 1, [&] { return where(first, 0, c.grads[0]); })};
  });
  rule(K::Fmin, kSaveInputs, [](C c) -> V {
    Tensor first = logical_or(le(c.inputs[0], c.inputs[1]), isnan(c.inputs[1]));
    return {grad_of(c, 0, [&] { return where(first, c.grads[0], 0); }),
            grad_of(c, 1, [&] { return where(first, 0, c.grads[0]); })};
  });
  // ---- ternary ------------------------------------------------------------------------------------
  rule(
      K::Where, kSaveInputs,
      [](C c) -> V {
        const Tensor& cond = c.inputs[0];
        return {Tensor(), grad_of(c, 1, [&] { return where(cond, c.grads[0], 0); }),
                grad_of(c, 2, [&] { return where(cond, 0, c.grads[0]); })};
      },
      /*input_mask=*/1u);  // only the condition: writes into the branches (masked_fill_) stay valid
  rule(K::Lerp, kSaveInputs, [](C c) -> V {
    const Tensor& w = c.inputs[2];
    return {grad_of(c, 0, [&] { return c.grads[0] * (1 - w); }), grad_of(c, 1, [&] { return c.grads[0] * w; }),
            grad_of(c, 2, [&] { return c.grads[0] * (c.inputs[1] - c.inputs[0]); })};
  });
  // ---- not differentiable (integer results, rounding, comparisons, logic) --------------------------
  for (K k : {K::FloorDiv, K::TruncDiv, K::BitwiseAnd, K::BitwiseOr, K::BitwiseXor, K::ShiftLeft, K::ShiftRight,
              K::LogicalAnd, K::LogicalOr, K::LogicalXor, K::Eq, K::Ne, K::Lt, K::Le, K::Gt, K::Ge})
    nondiff(k);
}

}  // namespace kiln::autodiff
