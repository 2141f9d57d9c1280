// SPDX-License-Identifier: MIT OR Apache-2.0
// What each elementwise op of ops.def computes, in the kernel language, for the storages of
// kernel/library.h: f32, f64, i32, i64 and bool (and copies of any 1-, 4- or 8-byte dtype). Each
// function follows the CPU backend's definition (src/backends/cpu/unary.cpp, binary.cpp),
// including NaN handling. Ops whose GPU built-ins miss the CPU's accuracy are not here.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
const char* store_name(Store s) {
  static const char* n[] = {"f32", "i32", "i64", "b8", "x64", "u8", "f64", "i8", "i16", "u16", "f16", "bf16", "u32"};
  return n[static_cast<int>(s)];
}

Type value_type(Store s) {
  switch (s) {
    case Store::F32:
    case Store::F16:
    case Store::BF16:
      return Type::F32;
    case Store::F64:
      return Type::F64;
    case Store::I32:
    case Store::I8:
    case Store::I16:
      return Type::I32;
    case Store::I64:
    case Store::X64:
      return Type::I64;
    case Store::B8:
      return Type::Bool;
    case Store::U8:
    case Store::U16:
    case Store::U32:
      return Type::U32;
  }
  return Type::F32;
}

namespace {

using kiln::ir::OpKind;
using Fn = std::function<Val(const Val*, const Val*)>;

Val is_nan(Val x) { return x != x; }
/// Zero of x's type (a literal takes the value's type).
Val zero_of(Val x) { return Val::constant(0, x.type); }
Val truthy(Val x) { return x.type == Type::Bool ? x : x != zero_of(x); }
Val trunc(Val x) { return select(x < 0.0f, ceil(x), floor(x)); }
Val num(double v, Val like) { return Val::constant(v, like.type); }

/// An attribute as a push constant of an op on f32 (rounded) or f64 (exact).
Arg real_arg(double v, bool wide) { return wide ? Arg(v) : Arg(static_cast<float>(v)); }

/// Whether op's f32 function computes through f64 (library/math.cpp): the device needs f64.
bool computes_in_f64(OpKind k) {
  switch (k) {
    case OpKind::Exp2:
    case OpKind::Expm1:
    case OpKind::Log2:
    case OpKind::Log10:
    case OpKind::Log1p:
    case OpKind::Elu:
    case OpKind::Softplus:
    case OpKind::Sinh:
    case OpKind::Cosh:
    case OpKind::Asinh:
    case OpKind::Acosh:
    case OpKind::Atanh:
    case OpKind::Erf:
    case OpKind::Gelu:
    case OpKind::Mish:
    case OpKind::Hypot:
    case OpKind::LogAddExp:
    case OpKind::Pow:
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Tan:
    case OpKind::Erfinv:
    case OpKind::Asin:
    case OpKind::Acos:
    case OpKind::Atan:
    case OpKind::Atan2:
    case OpKind::Fmod:
    case OpKind::Remainder:
    case OpKind::FloorDiv:
      return true;
    default:
      return false;
  }
}

/// The math functions of a float value (f32, f16, bf16; exp and log also f64) in the library's
/// forms (library/math.cpp); nullptr for other ops.
Fn unary_math(const kiln::ir::Op& op, bool wide, int& reals, std::vector<Arg>& push) {
  switch (op.kind) {
    case OpKind::Exp:  // the CPU's polynomial; f64 its own (the CPU calls std::exp there)
      if (wide) return [](const Val* x, const Val*) { return exp_f64(x[0]); };
      return [](const Val* x, const Val*) { return exp_f32(x[0]); };
    case OpKind::Sigmoid:
      if (wide) return nullptr;
      return [](const Val* x, const Val*) { return sigmoid_f32(x[0]); };
    case OpKind::Log:
      if (wide) return [](const Val* x, const Val*) { return log_f64(x[0]); };
      return [](const Val* x, const Val*) { return log_f32(x[0]); };
    // std::min / std::max as the CPU writes them: a NaN passes through both
    case OpKind::Hardsigmoid:
      return [](const Val* x, const Val*) {
        const Val v = x[0] / 6.0f + 0.5f, lo = select(v < 0.0f, num(0, v), v);
        return select(1.0f < lo, num(1, v), lo);
      };
    case OpKind::Hardswish:
      return [](const Val* x, const Val*) {
        const Val v = x[0] + 3.0f, lo = select(v < 0.0f, num(0, v), v);
        return x[0] * select(6.0f < lo, num(6, v), lo) / 6.0f;
      };
    case OpKind::Logit: {
      if (wide) return nullptr;
      // one kernel with or without eps: no eps clamps to +-inf, which keeps every x
      const double eps = kiln::ir::UnaryAttrs::decode(op).eps;
      const float inf = std::numeric_limits<float>::infinity();
      reals = 2;
      push = {Arg(eps < 0 ? -inf : static_cast<float>(eps)), Arg(eps < 0 ? inf : static_cast<float>(1 - eps))};
      return [](const Val* x, const Val* r) {
        const Val c = select(x[0] < r[0], r[0], select(r[1] < x[0], r[1], x[0]));  // std::clamp
        return log_f32(c / (1.0f - c));
      };
    }
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Tan: {
      if (wide) return nullptr;
      const OpKind k = op.kind;
      return [k](const Val* x, const Val*) { return trig_f32(k, x[0]); };
    }
    case OpKind::Asin:
    case OpKind::Acos:
    case OpKind::Atan: {
      if (wide) return nullptr;
      const OpKind k = op.kind;
      return [k](const Val* x, const Val*) { return inverse_trig_f32(k, x[0]); };
    }
    case OpKind::Exp2:
    case OpKind::Expm1:
    case OpKind::Log2:
    case OpKind::Log10:
    case OpKind::Log1p:
    case OpKind::Sinh:
    case OpKind::Cosh:
    case OpKind::Asinh:
    case OpKind::Acosh:
    case OpKind::Atanh: {
      if (wide) return nullptr;
      const OpKind k = op.kind;
      return [k](const Val* x, const Val*) { return via_f64(k, x[0]); };
    }
    case OpKind::Elu: {  // as the CPU: scale * x, or (scale * alpha) * expm1(x * input_scale)
      if (wide) return nullptr;
      const kiln::ir::UnaryAttrs a = kiln::ir::UnaryAttrs::decode(op);
      reals = 3;
      push = {Arg(static_cast<float>(a.alpha)), Arg(static_cast<float>(a.scale)),
              Arg(static_cast<float>(a.input_scale))};
      return [](const Val* x, const Val* r) {
        const Val neg = r[1] * r[0] * via_f64(OpKind::Expm1, x[0] * r[2]);
        return select(x[0] > 0.0f, r[1] * x[0], neg);
      };
    }
    case OpKind::Softplus: {  // x * beta > threshold ? x : log1p(exp(x * beta)) / beta
      if (wide) return nullptr;
      const kiln::ir::UnaryAttrs a = kiln::ir::UnaryAttrs::decode(op);
      reals = 2;
      push = {Arg(static_cast<float>(a.beta)), Arg(static_cast<float>(a.threshold))};
      return [](const Val* x, const Val* r) {
        const Val bx = x[0] * r[0];
        return select(bx > r[1], x[0], via_f64(OpKind::Log1p, exp_f32(bx)) / r[0]);
      };
    }
    case OpKind::Erfinv:
      if (wide) return nullptr;
      return [](const Val* x, const Val*) { return erfinv_f32(x[0]); };
    case OpKind::Erf:
      if (wide) return nullptr;
      return [](const Val* x, const Val*) { return erf_f32(x[0]); };
    case OpKind::GeluTanh:  // as the CPU's vector form: h tanh(sqrt(2/pi) (x + 0.044715 x^3)) + h
      if (wide) return nullptr;
      return [](const Val* x, const Val*) {
        const Val h = x[0] * 0.5f, x3 = x[0] * x[0] * x[0];
        return h * tanh_f32((x3 * 0.044715f + x[0]) * 0.7978845608f) + h;
      };
    case OpKind::Gelu:  // as the CPU's vector form: h erf(x / sqrt 2) + h, h = x / 2
      if (wide) return nullptr;
      return [](const Val* x, const Val*) {
        const Val h = x[0] * 0.5f;
        return h * erf_f32(x[0] * 0.70710678f) + h;
      };
    case OpKind::Mish:  // x tanh(softplus(x)), softplus with beta 1 and threshold 20
      if (wide) return nullptr;
      return [](const Val* x, const Val*) {
        const Val sp = select(x[0] > 20.0f, x[0], via_f64(OpKind::Log1p, exp_f32(x[0])));
        return x[0] * tanh_f32(sp);
      };
    case OpKind::Tanh:
      if (wide) return nullptr;
      return [](const Val* x, const Val*) { return tanh_f32(x[0]); };
    case OpKind::Silu:
      if (wide) return nullptr;
      return [](const Val* x, const Val*) { return x[0] * sigmoid_f32(x[0]); };
    default:
      return nullptr;
  }
}

/// Round half to even of a float value: from floor(x) and the exact x - floor(x); |x| >= 2^23
/// (2^52 for f64) is an integer already, and so are inf and NaN. Zero keeps x's sign.
Val round_half_even(Val x) {
  const double big = x.type == Type::F64 ? 4503599627370496.0 : 8388608.0;
  const Val r = floor(x), d = x - r;
  const Val even = floor(r * 0.5) * 2.0 == r;
  const Val up = d > 0.5 || (d == 0.5 && !even);
  const Val v = select(up, r + 1.0, r);
  const Val sv = select(v == 0.0, x * 0.0, v);
  return select(abs(x) < big, sv, x);
}

/// Round with decimals as the CPU's: x times (or divided by) 10^|decimals| in f64, rounded half
/// to even, divided back, rounded once to the value's type (the device needs f64).
std::optional<Elementwise> round_decimals_of(const kiln::ir::Op& op, Elementwise e) {
  const int64_t d = kiln::ir::UnaryAttrs::decode(op).decimals;
  e.reals = 1;
  e.real_types = {Type::F64};
  e.push = {Arg(std::pow(10.0, static_cast<double>(d < 0 ? -d : d)))};
  e.needs_f64 = true;
  const bool up = d > 0;
  e.tag = up ? "_decimals" : "_tens";
  e.fn = [up](const Val* x, const Val* r) {
    const Val v = cast(x[0], Type::F64);
    const Val n = round_half_even(up ? v * r[0] : v / r[0]);
    const Val out = up ? n / r[0] : n * r[0];
    return x[0].type == Type::F64 ? out : cast(out, x[0].type);
  };
  return e;
}

/// Unary functions on a float value (f32, or f64 when `wide`).
Fn unary_float(const kiln::ir::Op& op, bool wide, int& reals, std::vector<Arg>& push) {
  switch (op.kind) {
    case OpKind::Abs:
      return [](const Val* x, const Val*) { return abs(x[0]); };
    case OpKind::Neg:
      return [](const Val* x, const Val*) { return -x[0]; };
    case OpKind::Square:
      return [](const Val* x, const Val*) { return x[0] * x[0]; };
    case OpKind::Reciprocal:
      return [](const Val* x, const Val*) { return 1.0f / x[0]; };
    case OpKind::Sqrt:
      return [](const Val* x, const Val*) { return sqrt(x[0]); };
    case OpKind::Rsqrt:  // as the CPU: 1 / sqrt(x), both correctly rounded
      return [](const Val* x, const Val*) { return 1.0f / sqrt(x[0]); };
    case OpKind::Round: {
      // Round half to even (decimals 0): from floor(x) and the exact x - floor(x); |x| >= 2^23
      // (2^52 for f64) is an integer already, and so are inf and NaN. Zero keeps x's sign.
      if (kiln::ir::UnaryAttrs::decode(op).decimals != 0) return nullptr;  // round_decimals_of
      return [](const Val* x, const Val*) { return round_half_even(x[0]); };
    }
    case OpKind::Floor:
      return [](const Val* x, const Val*) { return floor(x[0]); };
    case OpKind::Ceil:
      return [](const Val* x, const Val*) { return ceil(x[0]); };
    case OpKind::Trunc:
      return [](const Val* x, const Val*) { return trunc(x[0]); };
    case OpKind::Frac:
      return [](const Val* x, const Val*) { return x[0] - trunc(x[0]); };
    case OpKind::Sign:
      return [](const Val* x, const Val*) {
        return select(x[0] > 0.0f, num(1, x[0]), select(x[0] < 0.0f, num(-1, x[0]), num(0, x[0])));
      };
    // x < 0 is false for NaN, which passes through as on the CPU.
    case OpKind::Relu:
      return [](const Val* x, const Val*) { return select(x[0] < 0.0f, num(0, x[0]), x[0]); };
    case OpKind::Softsign:
      return [](const Val* x, const Val*) { return x[0] / (1.0f + abs(x[0])); };
    case OpKind::LeakyRelu:
      reals = 1;
      push = {real_arg(kiln::ir::UnaryAttrs::decode(op).slope, wide)};
      return [](const Val* x, const Val* r) { return select(x[0] > 0.0f, x[0], x[0] * r[0]); };
    case OpKind::Clamp: {
      // min(max(x, lo), hi) as the CPU writes it: a NaN x stays (its comparisons are false).
      const kiln::ir::ClampAttrs c = kiln::ir::ClampAttrs::decode(op);
      const double inf = std::numeric_limits<double>::infinity();
      reals = 2;
      push = {real_arg(c.has_min ? c.min : -inf, wide), real_arg(c.has_max ? c.max : inf, wide)};
      return [](const Val* x, const Val* r) {
        const Val lo = select(x[0] < r[0], r[0], x[0]);
        return select(r[1] < lo, r[1], lo);
      };
    }
    default:
      return unary_math(op, wide, reals, push);
  }
}

/// Unary functions on an integer value (i32, i64, u32).
Fn unary_int(OpKind kind) {
  switch (kind) {
    case OpKind::Abs:
      return [](const Val* x, const Val*) {
        if (x[0].type == Type::U32) return x[0];  // never negative
        return select(x[0] < zero_of(x[0]), -x[0], x[0]);
      };
    case OpKind::Neg:  // u32 wraps as 0 - x (the language has no negation of unsigned values)
      return [](const Val* x, const Val*) { return x[0].type == Type::U32 ? zero_of(x[0]) - x[0] : -x[0]; };
    case OpKind::Relu:
      return [](const Val* x, const Val*) { return select(x[0] < zero_of(x[0]), zero_of(x[0]), x[0]); };
    case OpKind::Square:
      return [](const Val* x, const Val*) { return x[0] * x[0]; };
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Trunc:
    case OpKind::Round:
      return [](const Val* x, const Val*) { return x[0]; };
    case OpKind::BitwiseNot:
      return [](const Val* x, const Val*) { return x[0] ^ Val::constant(-1, x[0].type); };
    case OpKind::Sign:  // as the CPU: (0 < x) - (x < 0)
      return [](const Val* x, const Val*) {
        const Val z = zero_of(x[0]), one = Val::constant(1, x[0].type);
        if (x[0].type == Type::U32) return select(z < x[0], one, z);
        return select(z < x[0], one, select(x[0] < z, -one, z));
      };
    default:
      return nullptr;
  }
}

/// Integer floor, trunc division, remainder and fmod as the CPU's (a zero divisor is checked on
/// the host first and gives 0 here): a divisor of 0 or -1 is replaced by 1 so that the target's
/// division stays defined, and -1 divides by negation (wrapping) with remainder 0.
Val int_division(OpKind kind, Val a, Val b) {
  const Type t = a.type;
  const bool sgn = t != Type::U32;
  const Val zero = zero_of(a), one = Val::constant(1, t);
  const Val minus = sgn ? b == Val::constant(-1, t) : Val(false);
  const Val d = select(b == zero || minus, one, b);
  const Val q = a / d, r = a - q * d;  // the truncated quotient and C's remainder
  const bool div = kind == OpKind::FloorDiv || kind == OpKind::TruncDiv;
  Val res = kind == OpKind::TruncDiv ? q : kind == OpKind::Fmod ? r : Val();
  if (kind == OpKind::FloorDiv) res = sgn ? select(r != zero && ((a < zero) != (d < zero)), q - one, q) : q;
  if (kind == OpKind::Remainder) res = sgn ? select(r != zero && ((r < zero) != (d < zero)), r + d, r) : r;
  if (sgn) res = select(minus, div ? zero - a : zero, res);
  return select(b == zero, zero, res);
}

/// Unary ops whose output is bool, on any storage.
Fn unary_to_bool(OpKind kind, bool floating) {
  switch (kind) {
    case OpKind::LogicalNot:
      return [](const Val* x, const Val*) { return !truthy(x[0]); };
    case OpKind::IsNan:
      if (floating) return [](const Val* x, const Val*) { return is_nan(x[0]); };
      return [](const Val*, const Val*) { return Val(false); };
    case OpKind::IsFinite:
      if (floating) return [](const Val* x, const Val*) { return abs(x[0]) < std::numeric_limits<float>::infinity(); };
      return [](const Val*, const Val*) { return Val(true); };
    default:
      return nullptr;
  }
}

/// A shift of values `bits` wide (0: the value type's width) as the CPU's: a count outside
/// [0, bits) gives 0, or -1 for a negative value shifted right; the count a target shifts by
/// stays in range. 1- and 2-byte integers shift in 32 bits and keep their low bits.
Fn shift_fn(bool left, int bits) {
  return [left, bits](const Val* x, const Val*) {
    const int w = bits ? bits : x[0].type == Type::I64 ? 64 : 32;
    const Val zero = zero_of(x[0]), width = Val::constant(w, x[0].type);
    const Val ok = !(x[1] < zero) && x[1] < width;
    const Val n = select(ok, x[1], zero);
    if (left) return select(ok, x[0] << n, zero);
    const Val out = select(x[0] < zero, Val::constant(-1, x[0].type), zero);
    return select(ok, x[0] >> n, out);
  };
}

/// Binary arithmetic of one numeric type.
Fn binary_arith(OpKind kind, bool floating) {
  switch (kind) {
    case OpKind::Add:
      return [](const Val* x, const Val*) { return x[0] + x[1]; };
    case OpKind::Sub:
      return [](const Val* x, const Val*) { return x[0] - x[1]; };
    case OpKind::Mul:
      return [](const Val* x, const Val*) { return x[0] * x[1]; };
    case OpKind::Div:
      if (floating) return [](const Val* x, const Val*) { return x[0] / x[1]; };
      return nullptr;
    case OpKind::TruncDiv:  // floats as the CPU's trunc(x / y)
      if (floating) return [](const Val* x, const Val*) { return trunc(x[0] / x[1]); };
      return [](const Val* x, const Val*) { return int_division(OpKind::TruncDiv, x[0], x[1]); };
    // NaN-propagating (Maximum) and NaN-ignoring (Fmax) extremes, as std::fmax and its kin.
    case OpKind::Maximum:
    case OpKind::Minimum: {
      const bool mx = kind == OpKind::Maximum;
      return [mx, floating](const Val* x, const Val*) {
        const Val pick = select(mx ? x[0] > x[1] : x[0] < x[1], x[0], x[1]);
        return floating ? select(is_nan(x[0]), x[0], select(is_nan(x[1]), x[1], pick)) : pick;
      };
    }
    case OpKind::Fmax:
    case OpKind::Fmin: {
      const bool mx = kind == OpKind::Fmax;
      return [mx, floating](const Val* x, const Val*) {
        const Val pick = select(mx ? x[0] > x[1] : x[0] < x[1], x[0], x[1]);
        return floating ? select(is_nan(x[0]), x[1], select(is_nan(x[1]), x[0], pick)) : pick;
      };
    }
    case OpKind::BitwiseAnd:
      if (!floating) return [](const Val* x, const Val*) { return x[0] & x[1]; };
      return nullptr;
    case OpKind::Hypot:  // in f64 and rounded (f32 values): inf wins over NaN, as std::hypot
      if (!floating) return nullptr;
      return [](const Val* x, const Val*) {
        const Val a = cast(x[0], Type::F64), b = cast(x[1], Type::F64);
        const float inf = std::numeric_limits<float>::infinity();
        const Val h = cast(sqrt(a * a + b * b), Type::F32);
        return select(abs(x[0]) == inf || abs(x[1]) == inf, Val(inf), h);
      };
    case OpKind::LogAddExp:  // as the CPU: max + log1p(exp(-|x - y|)), equal infinities kept
      if (!floating) return nullptr;
      return [](const Val* x, const Val*) {
        const Val m = select(x[0] < x[1], x[1], x[0]);  // std::max
        const Val r = m + via_f64(OpKind::Log1p, exp_f32(-abs(x[0] - x[1])));
        const float inf = std::numeric_limits<float>::infinity();
        return select(abs(x[0]) == inf && x[0] == x[1], x[0], r);
      };
    case OpKind::Atan2:
      if (floating) return [](const Val* x, const Val*) { return atan2_f32(x[0], x[1]); };
      return nullptr;
    // floats through f64, exact as the CPU's std::fmod (library/math.cpp); integers by
    // int_division, their zero divisors checked on the host (Launch::host_check)
    case OpKind::Fmod:
    case OpKind::Remainder:
    case OpKind::FloorDiv:
      if (!floating) return [kind](const Val* x, const Val*) { return int_division(kind, x[0], x[1]); };
      if (kind == OpKind::Fmod) return [](const Val* x, const Val*) { return fmod_f32(x[0], x[1]); };
      if (kind == OpKind::Remainder) return [](const Val* x, const Val*) { return remainder_f32(x[0], x[1]); };
      return [](const Val* x, const Val*) { return floor_div_f32(x[0], x[1]); };
    case OpKind::Pow:  // f32 through f64; integers by squaring (library/math.cpp)
      if (floating) return [](const Val* x, const Val*) { return pow_f32(x[0], x[1]); };
      return [](const Val* x, const Val*) { return pow_int(x[0], x[1]); };
    case OpKind::BitwiseOr:
      if (!floating) return [](const Val* x, const Val*) { return x[0] | x[1]; };
      return nullptr;
    case OpKind::BitwiseXor:
      if (!floating) return [](const Val* x, const Val*) { return x[0] ^ x[1]; };
      return nullptr;
    // As the CPU (PyTorch): a count outside [0, width) gives 0, or -1 for a negative value
    // shifted right; the count a target shifts by stays in range.
    case OpKind::ShiftLeft:
    case OpKind::ShiftRight:
      if (floating) return nullptr;
      return shift_fn(kind == OpKind::ShiftLeft, 0);
    default:
      return nullptr;
  }
}

/// Comparisons and logical ops: any storage in, bool out.
Fn binary_to_bool(OpKind kind) {
  switch (kind) {
    case OpKind::Eq:
      return [](const Val* x, const Val*) { return x[0] == x[1]; };
    case OpKind::Ne:
      return [](const Val* x, const Val*) { return x[0] != x[1]; };
    case OpKind::Lt:
      return [](const Val* x, const Val*) { return x[0] < x[1]; };
    case OpKind::Le:
      return [](const Val* x, const Val*) { return x[0] <= x[1]; };
    case OpKind::Gt:
      return [](const Val* x, const Val*) { return x[0] > x[1]; };
    case OpKind::Ge:
      return [](const Val* x, const Val*) { return x[0] >= x[1]; };
    case OpKind::LogicalAnd:
      return [](const Val* x, const Val*) { return truthy(x[0]) && truthy(x[1]); };
    case OpKind::LogicalOr:
      return [](const Val* x, const Val*) { return truthy(x[0]) || truthy(x[1]); };
    case OpKind::LogicalXor:
      return [](const Val* x, const Val*) { return truthy(x[0]) != truthy(x[1]); };
    default:
      return nullptr;
  }
}

/// Cast between value types as the CPU's static_cast (to bool: nonzero, NaN included).
Fn cast_fn(Store from, Store to) {
  const Type t = value_type(to);
  if (to == Store::B8) return [](const Val* x, const Val*) { return truthy(x[0]); };
  if (from == Store::B8)
    return [t](const Val* x, const Val*) { return select(x[0], Val::constant(1, t), Val::constant(0, t)); };
  // A float to a small integer goes through i32 (then wraps), as the CPU's conversion does
  const bool small = to == Store::U8 || to == Store::I8 || to == Store::I16 || to == Store::U16;
  return [t, small](const Val* x, const Val*) {
    const Val v = small && is_float(x[0].type) ? cast(x[0], Type::I32) : x[0];
    return v.type == t ? v : cast(v, t);
  };
}

/// NanToNum as the CPU's: NaN, +inf and -inf replaced by push constants, the bounds clamped to
/// the dtype's finite range (f16's and bf16's own); integers unchanged.
std::optional<Elementwise> nan_to_num_of(const kiln::ir::Op& op, Elementwise e, Store in) {
  if (in == Store::B8) return std::nullopt;
  if (in != Store::F32 && in != Store::F64 && in != Store::F16 && in != Store::BF16) {
    e.fn = [](const Val* x, const Val*) { return x[0]; };
    return e;
  }
  const kiln::ir::UnaryAttrs u = kiln::ir::UnaryAttrs::decode(op);
  const bool wide = in == Store::F64;
  const double top = in == Store::F16    ? 65504.0
                     : in == Store::BF16 ? 3.3895313892515355e38
                     : wide              ? std::numeric_limits<double>::max()
                                         : std::numeric_limits<float>::max();
  e.reals = 3;
  e.push = {real_arg(u.nan, wide), real_arg(std::min(u.posinf, top), wide), real_arg(std::max(u.neginf, -top), wide)};
  e.fn = [](const Val* x, const Val* r) {
    const Val inf = abs(x[0]) == std::numeric_limits<double>::infinity();
    return select(is_nan(x[0]), r[0], select(inf, select(x[0] > 0.0f, r[1], r[2]), x[0]));
  };
  return e;
}

/// Whether op, on 1- and 2-byte integers computed in 32 bits, gives the CPU's result once
/// truncated to the storage (wrapping arithmetic, comparisons, bitwise and logical ops, shifts
/// with the storage's width, clamp).
bool small_int_op(OpKind k) {
  switch (k) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Square:
    case OpKind::Relu:
    case OpKind::Sign:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Trunc:
    case OpKind::Round:
    case OpKind::Pow:
    case OpKind::FloorDiv:
    case OpKind::TruncDiv:
    case OpKind::Remainder:
    case OpKind::Fmod:
    case OpKind::BitwiseAnd:
    case OpKind::BitwiseOr:
    case OpKind::BitwiseXor:
    case OpKind::BitwiseNot:
    case OpKind::ShiftLeft:  // with the storage's width (spec_of)
    case OpKind::ShiftRight:
    case OpKind::Clamp:  // compared in f64, the result's low bits kept
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Fmax:
    case OpKind::Fmin:
    case OpKind::Eq:
    case OpKind::Ne:
    case OpKind::Lt:
    case OpKind::Le:
    case OpKind::Gt:
    case OpKind::Ge:
    case OpKind::LogicalAnd:
    case OpKind::LogicalOr:
    case OpKind::LogicalXor:
    case OpKind::LogicalNot:
    case OpKind::IsNan:
    case OpKind::IsInf:
    case OpKind::IsFinite:
    case OpKind::Where:
      return true;
    default:
      return false;
  }
}

/// Arange: start + i * step, computed in f64 as the CPU does (integers: in i64, wrapping).
std::optional<Elementwise> arange_of(const kiln::ir::Op& op, Store out) {
  if (out == Store::B8 || out == Store::X64) return std::nullopt;  // f16, bf16: rounded; small integers: wrapped
  const kiln::ir::CreationAttrs c = kiln::ir::CreationAttrs::decode(op);
  Elementwise e;
  e.output = out;
  e.reals = 2;
  e.real_type = Type::F64;
  e.needs_f64 = true;
  e.with_index = true;
  e.push = {Arg(c.start), Arg(c.step)};
  const Type t = value_type(out);
  if (is_float(t))
    e.fn = [t](const Val* x, const Val* r) { return cast(r[0] + cast(x[0], Type::F64) * r[1], t); };
  else
    e.fn = [t](const Val* x, const Val* r) {
      const Val v = cast(r[0], Type::I64) + cast(x[0], Type::I64) * cast(r[1], Type::I64);
      return t == Type::I64 ? v : cast(v, t);
    };
  return e;
}

/// Fill: the value from the push constants (f32 as a real, integers and bool exactly).
std::optional<Elementwise> fill_of(const kiln::ir::Op& op, Store out) {
  if (out == Store::X64) return std::nullopt;
  const kiln::ir::CreationAttrs c = kiln::ir::CreationAttrs::decode(op);
  Elementwise e;
  e.output = out;
  const int64_t iv = c.has_int ? c.int_value : static_cast<int64_t>(c.value);
  switch (out) {
    case Store::F32:
    case Store::F64:
    case Store::F16:
    case Store::BF16:
      e.reals = 1;
      e.real_type = out == Store::F64 ? Type::F64 : Type::F32;
      e.push = {real_arg(c.has_int ? static_cast<double>(c.int_value) : c.value, out == Store::F64)};
      e.fn = [](const Val*, const Val* r) { return r[0]; };
      break;
    case Store::I64:
      e.push = {Arg(iv)};
      e.fn = [](const Val*, const Val* r) { return r[0]; };
      break;
    case Store::I32:
    case Store::I8:
    case Store::I16:
    case Store::U8:
    case Store::U16:
    case Store::U32:  // the low 32 bits (the store keeps the low 8 or 16)
      e.push = {Arg(static_cast<int32_t>(static_cast<uint32_t>(iv)))};
      e.fn = [](const Val*, const Val* r) { return r[0]; };
      break;
    default:  // bool: nonzero is true
      e.push = {Arg(static_cast<int32_t>(c.has_int ? iv != 0 : c.value != 0))};
      e.fn = [](const Val*, const Val* r) { return r[0] != 0; };
      break;
  }
  return e;
}

/// The storages of op's operands and the function it computes (no name yet).
std::optional<Elementwise> spec_of(const kiln::ir::Op& op) {
  if (op.outputs.size() != 1) return std::nullopt;
  const DType od = op.outputs[0].dtype;
  const kiln::ir::Family fam = kiln::ir::op_family(op.kind);
  const bool copy = op.kind == OpKind::Copy || (op.kind == OpKind::Cast && op.inputs[0].dtype == od);
  const std::optional<Store> out = storage_of(od, copy);
  if (!out) return std::nullopt;
  if (op.kind == OpKind::Fill) return fill_of(op, *out);
  if (op.kind == OpKind::Arange) return arange_of(op, *out);
  if (op.kind == OpKind::RandUniform || op.kind == OpKind::RandNormal) return random_of(op);
  if (op.kind == OpKind::Bernoulli) return bernoulli_of(op);
  Elementwise e;
  e.output = *out;
  for (const auto& d : op.inputs) {
    const std::optional<Store> s = storage_of(d.dtype, copy);
    if (!s) return std::nullopt;
    e.inputs.push_back(*s);
  }
  if (copy) {
    e.fn = [](const Val* x, const Val*) { return x[0]; };
    return e;
  }
  // 1- and 2-byte integers compute in 32 bits and keep the low bits, which is what the CPU's
  // wrapping arithmetic gives for the ops of small_int_op; f16 and bf16 compute in f32 and
  // round, as the CPU does
  auto small = [](Store s) { return s == Store::U8 || s == Store::I8 || s == Store::I16 || s == Store::U16; };
  if (op.kind != OpKind::Cast && (small(*out) || std::any_of(e.inputs.begin(), e.inputs.end(), small)) &&
      !small_int_op(op.kind))
    return std::nullopt;
  const Store in0 = e.inputs.empty() ? *out : e.inputs[0];
  const bool floating = in0 == Store::F32 || in0 == Store::F64 || in0 == Store::F16 || in0 == Store::BF16;
  const bool wide = in0 == Store::F64;
  if (wide) e.real_type = Type::F64;
  if (op.kind == OpKind::Cast) {
    e.fn = cast_fn(in0, *out);
    return e;
  }
  if (fam == kiln::ir::Family::Unary && e.inputs.size() == 1) {
    if (*out == Store::B8 && (e.fn = unary_to_bool(op.kind, floating))) return e;
    if (*out == Store::B8 && op.kind == OpKind::IsInf) {
      // which: 0 either sign, 1 +inf only, -1 -inf only (a push constant)
      e.reals = 1;
      e.real_type = Type::F32;
      e.push = {Arg(static_cast<float>(kiln::ir::UnaryAttrs::decode(op).which))};
      if (floating)
        e.fn = [](const Val* x, const Val* r) {
          const Val inf = abs(x[0]) == std::numeric_limits<float>::infinity();
          return inf && (r[0] == 0.0f || (r[0] > 0.0f) == (x[0] > 0.0f));
        };
      else
        e.fn = [](const Val*, const Val*) { return Val(false); };
      return e;
    }
    if (*out != in0) return std::nullopt;
    if (op.kind == OpKind::BitwiseNot && in0 == Store::B8) {
      e.fn = [](const Val* x, const Val*) { return !x[0]; };
      return e;
    }
    if (op.kind == OpKind::Clamp && !floating && in0 != Store::B8) {
      // Integers compare against the bounds in f64 and convert back, as the CPU does (a bound
      // outside the type's range does not wrap).
      const kiln::ir::ClampAttrs c = kiln::ir::ClampAttrs::decode(op);
      const double inf = std::numeric_limits<double>::infinity();
      e.reals = 2;
      e.real_type = Type::F64;
      e.needs_f64 = true;
      e.push = {Arg(c.has_min ? c.min : -inf), Arg(c.has_max ? c.max : inf)};
      e.fn = [](const Val* x, const Val* r) {
        const Val v = cast(x[0], Type::F64), lo = select(v < r[0], r[0], v);
        return cast(select(r[1] < lo, r[1], lo), x[0].type);
      };
      return e;
    }
    if (op.kind == OpKind::NanToNum) return nan_to_num_of(op, std::move(e), in0);
    if (op.kind == OpKind::Round && floating && kiln::ir::UnaryAttrs::decode(op).decimals != 0)
      return round_decimals_of(op, std::move(e));
    e.fn = floating ? unary_float(op, wide, e.reals, e.push) : in0 == Store::B8 ? nullptr : unary_int(op.kind);
    e.needs_f64 = floating && computes_in_f64(op.kind);
    if (!floating && !op.attrs.reals.empty()) return std::nullopt;
  } else if (fam == kiln::ir::Family::Binary && e.inputs.size() == 2) {
    if (e.inputs[1] != in0) return std::nullopt;
    const bool ordered =
        op.kind == OpKind::Lt || op.kind == OpKind::Le || op.kind == OpKind::Gt || op.kind == OpKind::Ge;
    if (*out == Store::B8 && ordered && in0 == Store::B8) {  // bools ordered as 0 < 1
      const OpKind k = op.kind;
      e.fn = [k](const Val* x, const Val*) {
        const Val a = select(x[0], Val(1), Val(0)), b = select(x[1], Val(1), Val(0));
        return k == OpKind::Lt ? a < b : k == OpKind::Le ? a <= b : k == OpKind::Gt ? a > b : a >= b;
      };
      return e;
    }
    if (*out == Store::B8 && (e.fn = binary_to_bool(op.kind))) return e;
    if (*out != in0) return std::nullopt;
    if (in0 == Store::B8) {  // bitwise ops on bools; +, max as or, *, min as and, as the CPU's
      const OpKind k = op.kind;
      if (k == OpKind::BitwiseAnd || k == OpKind::Mul || k == OpKind::Minimum)
        e.fn = [](const Val* x, const Val*) { return x[0] && x[1]; };
      if (k == OpKind::BitwiseOr || k == OpKind::Add || k == OpKind::Maximum)
        e.fn = [](const Val* x, const Val*) { return x[0] || x[1]; };
      if (k == OpKind::BitwiseXor) e.fn = [](const Val* x, const Val*) { return x[0] != x[1]; };
    } else if (!(wide && computes_in_f64(op.kind))) {
      e.fn = binary_arith(op.kind, floating);
      e.needs_f64 = floating && computes_in_f64(op.kind);
      if ((op.kind == OpKind::ShiftLeft || op.kind == OpKind::ShiftRight) && small(in0))
        e.fn = shift_fn(op.kind == OpKind::ShiftLeft, in0 == Store::U8 || in0 == Store::I8 ? 8 : 16);
    }
  } else if (op.kind == OpKind::Where && e.inputs.size() == 3) {
    if (e.inputs[0] != Store::B8 || e.inputs[1] != *out || e.inputs[2] != *out) return std::nullopt;
    e.fn = [](const Val* x, const Val*) { return select(x[0], x[1], x[2]); };
  } else if (op.kind == OpKind::Lerp && e.inputs.size() == 3 && floating) {
    if (e.inputs[1] != *out || e.inputs[2] != *out || value_type(*out) != Type::F32) return std::nullopt;
    // As the CPU: from the nearer end, so that weight 0 and 1 give start and end exactly.
    e.fn = [](const Val* x, const Val*) {
      const Val d = x[1] - x[0];
      return select(abs(x[2]) < 0.5f, x[0] + x[2] * d, x[1] - d * (1.0f - x[2]));
    };
  }
  if (!e.fn) return std::nullopt;
  return e;
}

/// The F32-only function (library/math_nof64.cpp) of an op whose f32 function computes through
/// f64, with the same inputs and reals, for a device without f64; nullptr where there is none
/// (Erfinv, Fmod, Remainder, FloorDiv).
Fn nof64_fn(OpKind kind) {
  switch (kind) {
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Tan:
    case OpKind::Exp2:
    case OpKind::Expm1:
    case OpKind::Log2:
    case OpKind::Log10:
    case OpKind::Log1p:
    case OpKind::Sinh:
    case OpKind::Cosh:
    case OpKind::Asinh:
    case OpKind::Acosh:
    case OpKind::Atanh:
    case OpKind::Atan:
    case OpKind::Asin:
    case OpKind::Acos:
    case OpKind::Erf:
      return [kind](const Val* x, const Val*) { return unary_nof64(kind, x[0]); };
    case OpKind::Elu:  // as unary_math's, with expm1_nof64
      return [](const Val* x, const Val* r) {
        return select(x[0] > 0.0f, r[1] * x[0], r[1] * r[0] * expm1_nof64(x[0] * r[2]));
      };
    case OpKind::Softplus:
      return [](const Val* x, const Val* r) {
        const Val bx = x[0] * r[0];
        return select(bx > r[1], x[0], log1p_nof64(exp_f32(bx)) / r[0]);
      };
    case OpKind::Mish:
      return [](const Val* x, const Val*) {
        return x[0] * tanh_f32(select(x[0] > 20.0f, x[0], log1p_nof64(exp_f32(x[0]))));
      };
    case OpKind::Gelu:
      return [](const Val* x, const Val*) {
        const Val h = x[0] * 0.5f;
        return h * erf_f32(x[0] * 0.70710678f, false) + h;
      };
    case OpKind::Hypot:
      return [](const Val* x, const Val*) { return hypot_nof64(x[0], x[1]); };
    case OpKind::LogAddExp:
      return [](const Val* x, const Val*) {
        const Val m = select(x[0] < x[1], x[1], x[0]);
        const Val r = m + log1p_nof64(exp_f32(-abs(x[0] - x[1])));
        return select(abs(x[0]) == std::numeric_limits<float>::infinity() && x[0] == x[1], x[0], r);
      };
    case OpKind::Atan2:
      return [](const Val* x, const Val*) { return atan2_nof64(x[0], x[1]); };
    case OpKind::Pow:
      return [](const Val* x, const Val*) { return pow_f32_nof64(x[0], x[1]); };
    default:
      return nullptr;
  }
}

}  // namespace

std::optional<Elementwise> elementwise_of(const kiln::ir::Op& op, bool float64) {
  std::optional<Elementwise> e = spec_of(op);
  if (!e) return e;
  const bool f32 = value_type(e->output) == Type::F32 && e->real_type == Type::F32 && e->real_types.empty() &&
                   std::all_of(e->inputs.begin(), e->inputs.end(), [](Store s) { return value_type(s) == Type::F32; });
  if (!float64 && e->needs_f64 && f32) {
    if (Fn f = nof64_fn(op.kind)) {
      e->fn = std::move(f);
      e->needs_f64 = false;
      e->tag += "_nof64";
    }
  }
  e->name = std::string(kiln::ir::op_name(op.kind));
  for (Store s : e->inputs) e->name += std::string("_") + store_name(s);
  e->name += std::string("_to_") + store_name(e->output) + e->tag;
  if (op.kind == OpKind::Copy) e->name = std::string("copy_") + store_name(e->output);
  return e;
}

}  // namespace kiln::kernel::lib
