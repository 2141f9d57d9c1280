// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Unary family (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h). The formulas
// follow PyTorch's derivatives.yaml: abs'(0) = 0, relu'(0) = 0, clamp passes the gradient at its
// bounds, sqrt'(0) = inf. Piecewise-constant ops (sign, floor, round, ...) are not
// differentiable: their outputs never require grad.
#include <cmath>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/ops.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;

/// g where mask holds, 0 elsewhere.
Tensor keep(const Tensor& mask, const Tensor& g) { return where(mask, g, 0); }
}  // namespace

void register_unary_grads() {
  using K = ir::OpKind;
  // ---- arithmetic -----------------------------------------------------------------------------
  rule(K::Neg, kSaveNothing, [](C c) -> V { return {-c.grads[0]}; });
  rule(K::Abs, kSaveInputs, [](C c) -> V { return {c.grads[0] * sign(c.inputs[0])}; });
  rule(K::Square, kSaveInputs, [](C c) -> V { return {c.grads[0] * c.inputs[0] * 2}; });
  rule(K::Reciprocal, kSaveOutputs, [](C c) -> V { return {-c.grads[0] * square(c.outputs[0])}; });
  rule(K::Sqrt, kSaveOutputs, [](C c) -> V { return {c.grads[0] / (c.outputs[0] * 2)}; });
  rule(K::Rsqrt, kSaveOutputs, [](C c) -> V {
    const Tensor& y = c.outputs[0];
    return {c.grads[0] * y * square(y) * -0.5};
  });
  rule(K::Frac, kSaveNothing, [](C c) -> V { return {c.grads[0]}; });
  // ---- exponentials and logarithms -------------------------------------------------------------
  rule(K::Exp, kSaveOutputs, [](C c) -> V { return {c.grads[0] * c.outputs[0]}; });
  rule(K::Exp2, kSaveOutputs, [](C c) -> V { return {c.grads[0] * c.outputs[0] * kLn2}; });
  rule(K::Expm1, kSaveOutputs, [](C c) -> V { return {c.grads[0] * (c.outputs[0] + 1)}; });
  rule(K::Log, kSaveInputs, [](C c) -> V { return {c.grads[0] / c.inputs[0]}; });
  rule(K::Log2, kSaveInputs, [](C c) -> V { return {c.grads[0] / (c.inputs[0] * kLn2)}; });
  rule(K::Log10, kSaveInputs, [](C c) -> V { return {c.grads[0] / (c.inputs[0] * kLn10)}; });
  rule(K::Log1p, kSaveInputs, [](C c) -> V { return {c.grads[0] / (c.inputs[0] + 1)}; });
  // ---- trigonometric and hyperbolic -------------------------------------------------------------
  rule(K::Sin, kSaveInputs, [](C c) -> V { return {c.grads[0] * cos(c.inputs[0])}; });
  rule(K::Cos, kSaveInputs, [](C c) -> V { return {-c.grads[0] * sin(c.inputs[0])}; });
  rule(K::Tan, kSaveOutputs, [](C c) -> V { return {c.grads[0] * (square(c.outputs[0]) + 1)}; });
  rule(K::Asin, kSaveInputs, [](C c) -> V { return {c.grads[0] * rsqrt(1 - square(c.inputs[0]))}; });
  rule(K::Acos, kSaveInputs, [](C c) -> V { return {-c.grads[0] * rsqrt(1 - square(c.inputs[0]))}; });
  rule(K::Atan, kSaveInputs, [](C c) -> V { return {c.grads[0] / (square(c.inputs[0]) + 1)}; });
  rule(K::Sinh, kSaveInputs, [](C c) -> V { return {c.grads[0] * cosh(c.inputs[0])}; });
  rule(K::Cosh, kSaveInputs, [](C c) -> V { return {c.grads[0] * sinh(c.inputs[0])}; });
  rule(K::Tanh, kSaveOutputs, [](C c) -> V { return {c.grads[0] * (1 - square(c.outputs[0]))}; });
  rule(K::Asinh, kSaveInputs, [](C c) -> V { return {c.grads[0] * rsqrt(square(c.inputs[0]) + 1)}; });
  rule(K::Acosh, kSaveInputs, [](C c) -> V { return {c.grads[0] * rsqrt(square(c.inputs[0]) - 1)}; });
  rule(K::Atanh, kSaveInputs, [](C c) -> V { return {c.grads[0] / (1 - square(c.inputs[0]))}; });
  // ---- special functions ------------------------------------------------------------------------
  rule(K::Erf, kSaveInputs, [](C c) -> V { return {c.grads[0] * exp(-square(c.inputs[0])) * (2 / std::sqrt(kPi))}; });
  rule(K::Erfinv, kSaveOutputs,
       [](C c) -> V { return {c.grads[0] * exp(square(c.outputs[0])) * (std::sqrt(kPi) / 2)}; });
  rule(K::Sigmoid, kSaveOutputs, [](C c) -> V {
    const Tensor& y = c.outputs[0];
    return {c.grads[0] * y * (1 - y)};
  });
  // Logit reals={eps}: with eps >= 0 the input was clamped to [eps, 1 - eps]; outside it the
  // gradient is 0 (PyTorch's logit_backward).
  rule(K::Logit, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const double eps = ir::UnaryAttrs::decode(c.op).eps;
    Tensor g = c.grads[0] / (x * (1 - x));
    if (eps < 0) return {g};
    return {keep(logical_and(ge(x, eps), le(x, 1 - eps)), g)};
  });
  // ---- activations -----------------------------------------------------------------------------
  rule(K::Relu, kSaveOutputs, [](C c) -> V { return {keep(gt(c.outputs[0], 0), c.grads[0])}; });
  rule(K::LeakyRelu, kSaveInputs, [](C c) -> V {
    return {where(gt(c.inputs[0], 0), c.grads[0], c.grads[0] * ir::UnaryAttrs::decode(c.op).slope)};
  });
  // Elu reals={alpha, scale, input_scale}: scale * x for x > 0, else
  // scale * alpha * (exp(x * input_scale) - 1).
  rule(K::Elu, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const ir::UnaryAttrs u = ir::UnaryAttrs::decode(c.op);
    const double alpha = u.alpha, scale = u.scale, in_scale = u.input_scale;
    Tensor neg = c.grads[0] * exp(x * in_scale) * (scale * alpha * in_scale);
    return {where(gt(x, 0), c.grads[0] * scale, neg)};
  });
  // Gelu: x * Phi(x); d/dx = Phi(x) + x * phi(x).
  rule(K::Gelu, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    Tensor cdf = (erf(x * (1 / std::sqrt(2.0))) + 1) * 0.5;
    Tensor pdf = exp(square(x) * -0.5) * (1 / std::sqrt(2 * kPi));
    return {c.grads[0] * (cdf + x * pdf)};
  });
  // GeluTanh: 0.5 x (1 + tanh(k (x + 0.044715 x^3))).
  rule(K::GeluTanh, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const double k = std::sqrt(2 / kPi), a = 0.044715;
    Tensor x2 = square(x);
    Tensor t = tanh((x + x * x2 * a) * k);
    Tensor d = (t + 1) * 0.5 + x * (1 - square(t)) * (x2 * (3 * a) + 1) * (0.5 * k);
    return {c.grads[0] * d};
  });
  rule(K::Silu, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    Tensor s = sigmoid(x);
    return {c.grads[0] * s * (x * (1 - s) + 1)};
  });
  // Mish: x * tanh(softplus(x)); d/dx = t + x * sigmoid(x) * (1 - t^2).
  rule(K::Mish, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    Tensor t = tanh(softplus(x));
    return {c.grads[0] * (t + x * sigmoid(x) * (1 - square(t)))};
  });
  // Softplus reals={beta, threshold}: linear (gradient 1) where x * beta > threshold.
  rule(K::Softplus, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const ir::UnaryAttrs u = ir::UnaryAttrs::decode(c.op);
    Tensor xb = x * u.beta;
    return {where(gt(xb, u.threshold), c.grads[0], c.grads[0] * sigmoid(xb))};
  });
  rule(K::Softsign, kSaveInputs, [](C c) -> V { return {c.grads[0] / square(abs(c.inputs[0]) + 1)}; });
  rule(K::Hardsigmoid, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    return {keep(logical_and(gt(x, -3), lt(x, 3)), c.grads[0] * (1.0 / 6))};
  });
  // Hardswish: 0 below -3, x (x + 3) / 6 up to 3, x above (PyTorch's boundary choices).
  rule(K::Hardswish, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const Tensor& g = c.grads[0];
    return {where(lt(x, -3), 0, where(le(x, 3), g * (x * (1.0 / 3) + 0.5), g))};
  });
  // Clamp ints={has_min, has_max} reals={min, max}: the gradient passes where min <= x <= max
  // (boundaries included, NaN excluded).
  rule(K::Clamp, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const ir::ClampAttrs a = ir::ClampAttrs::decode(c.op);
    Tensor mask;
    if (a.has_min) mask = ge(x, a.min);
    if (a.has_max) mask = mask.defined() ? logical_and(mask, le(x, a.max)) : le(x, a.max);
    if (!mask.defined()) mask = eq(x, x);
    return {keep(mask, c.grads[0])};
  });
  // NanToNum replaces non-finite values by constants: no gradient reaches them.
  rule(K::NanToNum, kSaveInputs, [](C c) -> V { return {keep(isfinite(c.inputs[0]), c.grads[0])}; });
  // ---- conversions ------------------------------------------------------------------------------
  rule(K::Cast, kSaveNothing, [](C c) -> V { return {c.grads[0].to(c.op.inputs[0].dtype)}; });
  rule(K::Copy, kSaveNothing, [](C c) -> V { return {sum_to(c.grads[0], c.op.inputs[0].shape)}; });
  // ---- not differentiable -----------------------------------------------------------------------
  for (K k : {K::Sign, K::Floor, K::Ceil, K::Round, K::Trunc, K::IsNan, K::IsInf, K::IsFinite, K::LogicalNot,
              K::BitwiseNot, K::Bernoulli})
    nondiff(k);
  // Creation ops have no inputs, so nothing is ever recorded for them.
  for (K k : {K::Fill, K::Arange, K::RandUniform, K::RandNormal, K::RandInt}) nondiff(k);
}

}  // namespace kiln::autodiff
