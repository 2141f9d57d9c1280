// SPDX-License-Identifier: MIT OR Apache-2.0
// Unary elementwise ops: checks, dtype rules, Op construction.
#include <cmath>
#include <limits>

#include "ir/attrs.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using detail::run1;
using ir::OpKind;

namespace {

/// Float ops: integer and bool inputs compute in the default float dtype (PyTorch's rule).
Tensor float_unary(const char* api, OpKind k, const Tensor& x, const ir::UnaryAttrs& a = {}) {
  detail::check_defined(api, x);
  ir::Op op = make_op(k);
  a.encode(op);
  return run1(api, op, {is_floating(x.dtype()) ? x : cast(x, kDefaultFloat)});
}

/// Ops on any numeric dtype, keeping it; bool inputs are refused like PyTorch does.
Tensor numeric_unary(const char* api, OpKind k, const Tensor& x, const ir::UnaryAttrs& a = {}) {
  detail::check_defined(api, x);
  KILN_CHECK(x.dtype() != DType::Bool, api, "not supported for bool tensors (shape " << x.shape() << ")");
  ir::Op op = make_op(k);
  a.encode(op);
  return run1(api, op, {x});
}

/// Predicates with a bool result on any dtype.
Tensor bool_unary(const char* api, OpKind k, const Tensor& x, const ir::UnaryAttrs& a = {}) {
  detail::check_defined(api, x);
  ir::Op op = make_op(k);
  a.encode(op);
  return run1(api, op, {x});
}

}  // namespace

#define KILN_FLOAT_OP(name, Kind) \
  Tensor name(const Tensor& x) { return float_unary(#name, OpKind::Kind, x); }
#define KILN_NUMERIC_OP(name, Kind) \
  Tensor name(const Tensor& x) { return numeric_unary(#name, OpKind::Kind, x); }

KILN_NUMERIC_OP(abs, Abs)
KILN_NUMERIC_OP(neg, Neg)
KILN_NUMERIC_OP(floor, Floor)
KILN_NUMERIC_OP(ceil, Ceil)
KILN_NUMERIC_OP(trunc, Trunc)
KILN_NUMERIC_OP(relu, Relu)
KILN_FLOAT_OP(exp, Exp)
KILN_FLOAT_OP(exp2, Exp2)
KILN_FLOAT_OP(expm1, Expm1)
KILN_FLOAT_OP(log, Log)
KILN_FLOAT_OP(log2, Log2)
KILN_FLOAT_OP(log10, Log10)
KILN_FLOAT_OP(log1p, Log1p)
KILN_FLOAT_OP(sqrt, Sqrt)
KILN_FLOAT_OP(rsqrt, Rsqrt)
KILN_FLOAT_OP(reciprocal, Reciprocal)
KILN_FLOAT_OP(sin, Sin)
KILN_FLOAT_OP(cos, Cos)
KILN_FLOAT_OP(tan, Tan)
KILN_FLOAT_OP(asin, Asin)
KILN_FLOAT_OP(acos, Acos)
KILN_FLOAT_OP(atan, Atan)
KILN_FLOAT_OP(sinh, Sinh)
KILN_FLOAT_OP(cosh, Cosh)
KILN_FLOAT_OP(tanh, Tanh)
KILN_FLOAT_OP(asinh, Asinh)
KILN_FLOAT_OP(acosh, Acosh)
KILN_FLOAT_OP(atanh, Atanh)
KILN_FLOAT_OP(erf, Erf)
KILN_FLOAT_OP(erfinv, Erfinv)
KILN_FLOAT_OP(frac, Frac)
KILN_FLOAT_OP(sigmoid, Sigmoid)
KILN_FLOAT_OP(silu, Silu)
KILN_FLOAT_OP(mish, Mish)
KILN_FLOAT_OP(softsign, Softsign)
KILN_FLOAT_OP(hardsigmoid, Hardsigmoid)
KILN_FLOAT_OP(hardswish, Hardswish)
#undef KILN_FLOAT_OP
#undef KILN_NUMERIC_OP

// square(bool) is pow(bool, 2): an i64 result in PyTorch.
Tensor square(const Tensor& x) {
  detail::check_defined("square", x);
  return numeric_unary("square", OpKind::Square, x.dtype() == DType::Bool ? cast(x, DType::I64) : x);
}

Tensor sign(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x.clone();
  return numeric_unary("sign", OpKind::Sign, x);
}

Tensor round(const Tensor& x, int64_t decimals) {
  KILN_CHECK(decimals == 0 || (x.defined() && is_floating(x.dtype())), "round",
             "decimals are only supported for float tensors, got "
                 << (x.defined() ? dtype_name(x.dtype()).data() : "undefined"));
  return numeric_unary("round", OpKind::Round, x, {.decimals = decimals});
}

Tensor logit(const Tensor& x, std::optional<double> eps) {
  KILN_CHECK(!eps || (*eps >= 0 && *eps <= 0.5), "logit", "eps must be in [0, 0.5], got " << *eps);
  return float_unary("logit", OpKind::Logit, x, {.eps = eps ? *eps : -1.0});
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return float_unary("leaky_relu", OpKind::LeakyRelu, x, {.slope = negative_slope});
}

Tensor elu(const Tensor& x, double alpha) {
  return float_unary("elu", OpKind::Elu, x, {.alpha = alpha, .scale = 1.0, .input_scale = 1.0});
}

Tensor selu(const Tensor& x) {
  constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  return float_unary("selu", OpKind::Elu, x, {.alpha = alpha, .scale = scale, .input_scale = 1.0});
}

Tensor celu(const Tensor& x, double alpha) {
  KILN_CHECK(alpha != 0, "celu", "alpha must not be 0");
  return float_unary("celu", OpKind::Elu, x, {.alpha = alpha, .scale = 1.0, .input_scale = 1.0 / alpha});
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "gelu",
             "approximate must be 'none' or 'tanh', got '" << approximate << "'");
  return float_unary("gelu", approximate == "tanh" ? OpKind::GeluTanh : OpKind::Gelu, x);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  return float_unary("softplus", OpKind::Softplus, x, {.beta = beta, .threshold = threshold});
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  KILN_CHECK(min_val <= max_val, "hardtanh", "min_val " << min_val << " exceeds max_val " << max_val);
  detail::check_defined("hardtanh", x);
  if (is_integral(x.dtype()))  // integer tensors keep their dtype (PyTorch truncates the bounds)
    return clamp(x, Scalar(static_cast<int64_t>(min_val)), Scalar(static_cast<int64_t>(max_val)));
  return clamp(x, Scalar(min_val), Scalar(max_val));
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  detail::check_defined("clamp", x);
  KILN_CHECK(min || max, "clamp", "at least one of min and max must be given");
  KILN_CHECK(x.dtype() != DType::Bool, "clamp", "not supported for bool tensors");
  // A float bound on an integer tensor promotes, as in PyTorch.
  DType dt = x.dtype();
  if (min) dt = detail::result_type(x, *min);
  if (max && detail::result_type(x, *max) != x.dtype()) dt = detail::result_type(x, *max);
  ir::Op op = make_op(OpKind::Clamp);
  ir::ClampAttrs{.has_min = min.has_value(),
                 .has_max = max.has_value(),
                 .min = min ? min->to_double() : 0.0,
                 .max = max ? max->to_double() : 0.0}
      .encode(op);
  return run1("clamp", op, {detail::cast_if_needed(x, dt)});
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  Tensor r = x;
  if (min.defined()) r = maximum(r, min);
  if (max.defined()) r = minimum(r, max);
  return r;
}

Tensor clamp_min(const Tensor& x, Scalar min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, Scalar max) { return clamp(x, std::nullopt, max); }

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf, std::optional<double> neginf) {
  detail::check_defined("nan_to_num", x);
  if (!is_floating(x.dtype())) return x.clone();
  ir::Op op = make_op(OpKind::NanToNum);
  ir::UnaryAttrs{.nan = nan,
                 .posinf = posinf ? *posinf : std::numeric_limits<double>::max(),
                 .neginf = neginf ? *neginf : std::numeric_limits<double>::lowest()}
      .encode(op);
  return run1("nan_to_num", op, {x});
}

Tensor isnan(const Tensor& x) { return bool_unary("isnan", OpKind::IsNan, x); }
Tensor isinf(const Tensor& x) { return bool_unary("isinf", OpKind::IsInf, x, {.which = 0}); }
Tensor isposinf(const Tensor& x) { return bool_unary("isposinf", OpKind::IsInf, x, {.which = 1}); }
Tensor isneginf(const Tensor& x) { return bool_unary("isneginf", OpKind::IsInf, x, {.which = -1}); }
Tensor isfinite(const Tensor& x) { return bool_unary("isfinite", OpKind::IsFinite, x); }
Tensor logical_not(const Tensor& x) { return bool_unary("logical_not", OpKind::LogicalNot, x); }

Tensor bitwise_not(const Tensor& x) {
  detail::check_defined("bitwise_not", x);
  KILN_CHECK(!is_floating(x.dtype()), "bitwise_not",
             "expects an integer or bool tensor, got " << dtype_name(x.dtype()).data());
  ir::Op op = make_op(OpKind::BitwiseNot);
  return run1("bitwise_not", op, {x});
}

Tensor cast(const Tensor& x, DType dtype) {
  detail::check_defined("cast", x);
  check_dtype(dtype, "cast");
  if (x.dtype() == dtype) return x;
  ir::Op op = make_op(OpKind::Cast, {}, {}, dtype);
  return run1("cast", op, {x});
}

}  // namespace kiln
