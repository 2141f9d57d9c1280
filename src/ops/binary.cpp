// SPDX-License-Identifier: MIT OR Apache-2.0
// Binary and ternary elementwise ops: promotion, broadcasting checks, operators, in-place forms.
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using detail::run1;
using ir::OpKind;

namespace {

enum class Rule { Arith, Float, Bitwise, Logical, Compare };

DType common_dtype(const char* api, Rule rule, DType t) {
  switch (rule) {
    case Rule::Float:
      return is_floating(t) ? t : kDefaultFloat;
    case Rule::Bitwise:
      KILN_CHECK(!is_floating(t), api, "expects integer or bool tensors, got " << dtype_name(t).data());
      return t;
    default:
      return t;
  }
}

// Operands arrive by value: a temporary moved in by an rvalue overload can lend its buffer to
// the result (Note [Buffer reuse] in dispatch.cpp).
Tensor binary_op(const char* api, OpKind k, Rule rule, Tensor a, Tensor b) {
  detail::check_defined(api, a);
  detail::check_defined(api, b);
  detail::check_same_device(api, a, b);
  DType t = common_dtype(api, rule, detail::result_type(a, b, api));
  broadcast_shapes(a.shape(), b.shape(), api);  // shape error names the API op
  ir::Op op = make_op(k);
  if (a.dtype() != t) a = cast(a, t);
  if (b.dtype() != t) b = cast(b, t);
  return run1(api, op, {std::move(a), std::move(b)});
}

Tensor scalar_like(const Tensor& t, Scalar s, DType dt) { return detail::scalar_constant(s, dt, t.device()); }

/// Integer division or remainder by a scalar 0 raises at the call (PyTorch's ZeroDivisionError)
/// on every device, the shape-only null device included; a zero inside a divisor tensor is
/// found by the backend's kernel.
void refuse_int_div_by_zero(const char* api, OpKind k, DType t, Scalar divisor) {
  const bool int_div = k == OpKind::FloorDiv || k == OpKind::TruncDiv || k == OpKind::Remainder || k == OpKind::Fmod;
  KILN_CHECK(!(int_div && is_integral(t, false) && divisor.to_double() == 0.0), api,
             "integer division by zero (" << dtype_name(t).data() << " divided by the scalar 0)");
}

Tensor binary_op(const char* api, OpKind k, Rule rule, Tensor a, Scalar b) {
  detail::check_defined(api, a);
  DType t = common_dtype(api, rule, detail::result_type(a, b));
  refuse_int_div_by_zero(api, k, t, b);
  ir::Op op = make_op(k);
  if (a.dtype() != t) a = cast(a, t);
  Tensor s = scalar_like(a, b, t);
  return run1(api, op, {std::move(a), std::move(s)});
}

Tensor binary_op(const char* api, OpKind k, Rule rule, Scalar a, Tensor b) {
  detail::check_defined(api, b);
  DType t = common_dtype(api, rule, detail::result_type(b, a));
  ir::Op op = make_op(k);
  if (b.dtype() != t) b = cast(b, t);
  Tensor s = scalar_like(b, a, t);
  return run1(api, op, {std::move(s), std::move(b)});
}

void refuse_bool_sub(const char* api, DType t) {
  KILN_CHECK(t != DType::Bool, api, "subtraction of bool tensors is not supported; use logical_xor or ~");
}

}  // namespace

#define KILN_BINARY_FN(name, Kind, rule)                                                               \
  Tensor name(const Tensor& a, const Tensor& b) { return binary_op(#name, OpKind::Kind, rule, a, b); } \
  Tensor name(const Tensor& a, Scalar b) { return binary_op(#name, OpKind::Kind, rule, a, b); }        \
  Tensor name(Scalar a, const Tensor& b) { return binary_op(#name, OpKind::Kind, rule, a, b); }

KILN_BINARY_FN(mul, Mul, Rule::Arith)
KILN_BINARY_FN(remainder, Remainder, Rule::Arith)
KILN_BINARY_FN(fmod, Fmod, Rule::Arith)
KILN_BINARY_FN(atan2, Atan2, Rule::Float)
KILN_BINARY_FN(maximum, Maximum, Rule::Arith)
KILN_BINARY_FN(minimum, Minimum, Rule::Arith)
KILN_BINARY_FN(fmax, Fmax, Rule::Arith)
KILN_BINARY_FN(fmin, Fmin, Rule::Arith)
KILN_BINARY_FN(hypot, Hypot, Rule::Float)
KILN_BINARY_FN(logaddexp, LogAddExp, Rule::Float)
KILN_BINARY_FN(bitwise_and, BitwiseAnd, Rule::Bitwise)
KILN_BINARY_FN(bitwise_or, BitwiseOr, Rule::Bitwise)
KILN_BINARY_FN(bitwise_xor, BitwiseXor, Rule::Bitwise)
KILN_BINARY_FN(bitwise_left_shift, ShiftLeft, Rule::Bitwise)
KILN_BINARY_FN(bitwise_right_shift, ShiftRight, Rule::Bitwise)
KILN_BINARY_FN(logical_and, LogicalAnd, Rule::Logical)
KILN_BINARY_FN(logical_or, LogicalOr, Rule::Logical)
KILN_BINARY_FN(logical_xor, LogicalXor, Rule::Logical)
KILN_BINARY_FN(eq, Eq, Rule::Compare)
KILN_BINARY_FN(ne, Ne, Rule::Compare)
KILN_BINARY_FN(lt, Lt, Rule::Compare)
KILN_BINARY_FN(le, Le, Rule::Compare)
KILN_BINARY_FN(gt, Gt, Rule::Compare)
KILN_BINARY_FN(ge, Ge, Rule::Compare)
#undef KILN_BINARY_FN

// pow: integer tensors with a negative integer exponent are refused (as PyTorch does);
// x ** 2 and x ** 0.5 take the exact fast paths.
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op("pow", OpKind::Pow, Rule::Arith, a, b); }
Tensor pow(const Tensor& a, Scalar b) {
  detail::check_defined("pow", a);
  KILN_CHECK(!(is_integral(a.dtype(), true) && b.is_integral() && b.to_int() < 0), "pow",
             "integers to negative integer powers are not allowed");
  if (!b.is_bool() && b.to_double() == 2.0 && a.dtype() != DType::Bool)
    return square(detail::cast_if_needed(a, detail::result_type(a, b)));
  if (b.is_floating() && b.to_double() == 0.5) return sqrt(a);
  return binary_op("pow", OpKind::Pow, Rule::Arith, a, b);
}
Tensor pow(Scalar a, const Tensor& b) { return binary_op("pow", OpKind::Pow, Rule::Arith, a, b); }

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (!(alpha.is_integral() && alpha.to_int() == 1) && !(alpha.is_floating() && alpha.to_double() == 1.0))
    return binary_op("add", OpKind::Add, Rule::Arith, a, mul(b, alpha));
  return binary_op("add", OpKind::Add, Rule::Arith, a, b);
}
Tensor add(const Tensor& a, Scalar b) { return binary_op("add", OpKind::Add, Rule::Arith, a, b); }
Tensor add(Scalar a, const Tensor& b) { return binary_op("add", OpKind::Add, Rule::Arith, a, b); }

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  detail::check_defined("sub", a);
  detail::check_defined("sub", b);
  refuse_bool_sub("sub", detail::result_type(a, b));
  if (!(alpha.is_integral() && alpha.to_int() == 1) && !(alpha.is_floating() && alpha.to_double() == 1.0))
    return binary_op("sub", OpKind::Sub, Rule::Arith, a, mul(b, alpha));
  return binary_op("sub", OpKind::Sub, Rule::Arith, a, b);
}
Tensor sub(const Tensor& a, Scalar b) {
  detail::check_defined("sub", a);
  refuse_bool_sub("sub", detail::result_type(a, b));
  return binary_op("sub", OpKind::Sub, Rule::Arith, a, b);
}
Tensor sub(Scalar a, const Tensor& b) {
  detail::check_defined("sub", b);
  refuse_bool_sub("sub", detail::result_type(b, a));
  return binary_op("sub", OpKind::Sub, Rule::Arith, a, b);
}

namespace {
OpKind div_kind(const std::string& mode) {
  KILN_CHECK(mode.empty() || mode == "trunc" || mode == "floor", "div",
             "rounding_mode must be '', 'trunc' or 'floor', got '" << mode << "'");
  return mode.empty() ? OpKind::Div : mode == "trunc" ? OpKind::TruncDiv : OpKind::FloorDiv;
}
Rule div_rule(const std::string& mode) { return mode.empty() ? Rule::Float : Rule::Arith; }
}  // namespace

Tensor div(const Tensor& a, const Tensor& b, const std::string& m) {
  return binary_op("div", div_kind(m), div_rule(m), a, b);
}
Tensor div(const Tensor& a, Scalar b, const std::string& m) { return binary_op("div", div_kind(m), div_rule(m), a, b); }
Tensor div(Scalar a, const Tensor& b, const std::string& m) { return binary_op("div", div_kind(m), div_rule(m), a, b); }
Tensor floor_divide(const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }
Tensor floor_divide(const Tensor& a, Scalar b) { return div(a, b, "floor"); }

// ---- ternary ---------------------------------------------------------------------------------
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined("where", cond);
  detail::check_defined("where", a);
  detail::check_defined("where", b);
  KILN_CHECK(cond.dtype() == DType::Bool, "where",
             "condition must be a bool tensor, got " << dtype_name(cond.dtype()).data());
  detail::check_same_device("where", cond, a);
  detail::check_same_device("where", cond, b);
  DType t = detail::result_type(a, b, "where");
  broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  ir::Op op = make_op(OpKind::Where);
  return run1("where", op, {cond, detail::cast_if_needed(a, t), detail::cast_if_needed(b, t)});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  detail::check_defined("where", a);
  return where(cond, a, detail::scalar_constant(b, detail::result_type(a, b), a.device()));
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  detail::check_defined("where", b);
  return where(cond, detail::scalar_constant(a, detail::result_type(b, a), b.device()), b);
}
Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  detail::check_defined("where", cond);
  DType t = promote_types(a.natural_dtype(), b.natural_dtype());
  return where(cond, detail::scalar_constant(a, t, cond.device()), detail::scalar_constant(b, t, cond.device()));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  detail::check_defined("masked_fill", x);
  return masked_fill(x, mask, detail::scalar_constant(value, x.dtype(), x.device()));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  detail::check_defined("masked_fill", x);
  detail::check_defined("masked_fill", mask);
  KILN_CHECK(mask.dtype() == DType::Bool, "masked_fill", "mask must be bool, got " << dtype_name(mask.dtype()).data());
  KILN_CHECK(value.dim() == 0, "masked_fill", "value must be a 0-d tensor, got shape " << value.shape());
  Shape s = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  KILN_CHECK(s == x.shape(), "masked_fill",
             "mask of shape " << mask.shape() << " does not broadcast to the input's " << x.shape());
  ir::Op op = make_op(OpKind::Where);
  return run1("masked_fill", op, {mask, detail::cast_if_needed(value, x.dtype()), x});
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  detail::check_defined("lerp", start);
  detail::check_defined("lerp", end);
  detail::check_defined("lerp", weight);
  KILN_CHECK(is_floating(start.dtype()) && start.dtype() == end.dtype(), "lerp",
             "start and end must share a float dtype, got " << dtype_name(start.dtype()).data() << " and "
                                                            << dtype_name(end.dtype()).data());
  broadcast_shapes(broadcast_shapes(start.shape(), end.shape(), "lerp"), weight.shape(), "lerp");
  ir::Op op = make_op(OpKind::Lerp);
  return run1("lerp", op, {start, end, detail::cast_if_needed(weight, start.dtype())});
}
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight) {
  detail::check_defined("lerp", start);
  detail::check_defined("lerp", end);
  DType t = start.dtype();
  if (t == DType::F16 || t == DType::BF16) {  // the weight keeps f32 precision, as in PyTorch
    Tensor w = detail::scalar_constant(weight, DType::F32, start.device());
    return cast(
        lerp(cast(start, DType::F32), detail::cast_if_needed(end, end.dtype() == t ? DType::F32 : end.dtype()), w), t);
  }
  return lerp(start, end, detail::scalar_constant(weight, t, start.device()));
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  KILN_CHECK(rtol >= 0 && atol >= 0, "isclose", "rtol and atol must be non-negative");
  Tensor same = eq(a, b);
  DType t = detail::result_type(a, b);
  if (!is_floating(t)) return same;
  Tensor fa = detail::cast_if_needed(a, t), fb = detail::cast_if_needed(b, t);
  Tensor close = le(abs(sub(fa, fb)), add(mul(abs(fb), rtol), atol));
  Tensor r = logical_or(same, logical_and(close, logical_and(isfinite(fa), isfinite(fb))));
  if (equal_nan) r = logical_or(r, logical_and(isnan(fa), isnan(fb)));
  return r;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_defined("equal", a);
  detail::check_defined("equal", b);
  if (a.shape() != b.shape()) return false;
  return all(eq(a, b)).item<bool>();
}

// ---- operators ---------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator%(const Tensor& a, Scalar b) { return remainder(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(Tensor&& a, const Tensor& b) { return binary_op("add", OpKind::Add, Rule::Arith, std::move(a), b); }
Tensor operator+(const Tensor& a, Tensor&& b) { return binary_op("add", OpKind::Add, Rule::Arith, a, std::move(b)); }
Tensor operator+(Tensor&& a, Tensor&& b) {
  return binary_op("add", OpKind::Add, Rule::Arith, std::move(a), std::move(b));
}
Tensor operator+(Tensor&& a, Scalar b) { return binary_op("add", OpKind::Add, Rule::Arith, std::move(a), b); }
Tensor operator*(Tensor&& a, const Tensor& b) { return binary_op("mul", OpKind::Mul, Rule::Arith, std::move(a), b); }
Tensor operator*(const Tensor& a, Tensor&& b) { return binary_op("mul", OpKind::Mul, Rule::Arith, a, std::move(b)); }
Tensor operator*(Tensor&& a, Tensor&& b) {
  return binary_op("mul", OpKind::Mul, Rule::Arith, std::move(a), std::move(b));
}
Tensor operator*(Tensor&& a, Scalar b) { return binary_op("mul", OpKind::Mul, Rule::Arith, std::move(a), b); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator<<(const Tensor& a, Scalar b) { return bitwise_left_shift(a, b); }
Tensor operator>>(const Tensor& a, Scalar b) { return bitwise_right_shift(a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }

// ---- in-place forms ----------------------------------------------------------------------------
namespace {
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

/// Writes result into self; the result must broadcast to self's shape and be castable.
Tensor& assign_result(const char* api, Tensor& self, const Tensor& result) {
  KILN_CHECK(result.shape() == self.shape(), api,
             "output with shape " << self.shape() << " doesn't match the broadcast shape " << result.shape());
  KILN_CHECK(can_cast(result.dtype(), self.dtype()), api,
             "result type " << dtype_name(result.dtype()).data() << " can't be cast to the desired output type "
                            << dtype_name(self.dtype()).data()
                            << " (an in-place op keeps self's dtype: use the out-of-place op, or convert self first "
                               "with self.to("
                            << dtype_name(result.dtype()).data() << "))");
  return self.copy_(result);
}

/// self op= other, computed straight into self's buffer when that is safe.
Tensor& inplace(const char* api, OpKind k, Tensor& self, const Tensor& other) {
  detail::check_defined(api, self);
  detail::check_defined(api, other);
  bool same_type = other.dtype() == self.dtype() && detail::result_type(self, other) == self.dtype();
  bool overlap = other.is_same_storage(self) &&
                 !(other.strides() == self.strides() && other.storage_offset() == self.storage_offset() &&
                   other.shape() == self.shape());
  if (same_type && !overlap && other.device() == self.device() &&
      broadcast_shapes(self.shape(), other.shape(), api) == self.shape() &&
      !(k == OpKind::Div && !is_floating(self.dtype())) && !(k == OpKind::Sub && self.dtype() == DType::Bool)) {
    ir::Op op = make_op(k);
    detail::run_into(api, op, {self, other}, self);
    return self;
  }
  Tensor r = k == OpKind::Add   ? add(self, other)
             : k == OpKind::Sub ? sub(self, other)
             : k == OpKind::Mul ? mul(self, other)
                                : div(self, other);
  return assign_result(api, self, r);
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  bool one = (alpha.is_integral() && alpha.to_int() == 1) || (alpha.is_floating() && alpha.to_double() == 1.0);
  return inplace("add_", OpKind::Add, *this, one ? o : kiln::mul(o, alpha));
}
Tensor& Tensor::add_(Scalar o) {
  return inplace("add_", OpKind::Add, *this, detail::scalar_constant(o, detail::result_type(*this, o), device()));
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  bool one = (alpha.is_integral() && alpha.to_int() == 1) || (alpha.is_floating() && alpha.to_double() == 1.0);
  return inplace("sub_", OpKind::Sub, *this, one ? o : kiln::mul(o, alpha));
}
Tensor& Tensor::sub_(Scalar o) {
  return inplace("sub_", OpKind::Sub, *this, detail::scalar_constant(o, detail::result_type(*this, o), device()));
}
Tensor& Tensor::mul_(const Tensor& o) { return inplace("mul_", OpKind::Mul, *this, o); }
Tensor& Tensor::mul_(Scalar o) {
  return inplace("mul_", OpKind::Mul, *this, detail::scalar_constant(o, detail::result_type(*this, o), device()));
}
Tensor& Tensor::div_(const Tensor& o) { return inplace("div_", OpKind::Div, *this, o); }
Tensor& Tensor::div_(Scalar o) {
  return inplace("div_", OpKind::Div, *this, detail::scalar_constant(o, detail::result_type(*this, o), device()));
}

Tensor& Tensor::fill_(Scalar v) { return copy_(detail::scalar_constant(v, dtype(), device())); }
Tensor& Tensor::zero_() { return fill_(0); }
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar v) { return copy_(kiln::masked_fill(*this, mask, v)); }

}  // namespace kiln
