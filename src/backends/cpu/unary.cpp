// SPDX-License-Identifier: MIT OR Apache-2.0
// Unary elementwise kernels. Contiguous f32 rows take the vectorised path (unary_hwy.cpp);
// everything else runs the scalar functors below, which are also its reference.
#include <cmath>
#include <limits>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/math.h"
#include "backends/cpu/vec.h"
#include "core/machine.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

/// Applies f elementwise: out[i] = To(f(acc(in[i]))).
template <class To, class From, class F>
void apply(const ir::Op& op, void* const* in, void* const* out, const F& f, bool try_vec = false) {
  auto loop = unary_loop(op, in, out);
  const bool stream = stream_stores(op.outputs[0].numel() * static_cast<int64_t>(sizeof(To)));
  loop.run([&](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
    if constexpr (std::is_same_v<To, float> && std::is_same_v<From, float>) {
      // (one element: any strides; so 0-d and 1-element tensors get the same bits as longer ones)
      if (try_vec && ((st[0] == 4 && st[1] == 4) || n == 1) &&
          vec::unary_f32(op, reinterpret_cast<const float*>(p[1]), reinterpret_cast<float*>(p[0]), n, stream))
        return;
    }
    char* o = p[0];
    const char* i = p[1];
    if (st[0] == sizeof(To) && st[1] == sizeof(From)) {
      To* oo = reinterpret_cast<To*>(o);
      const From* ii = reinterpret_cast<const From*>(i);
      for (int64_t k = 0; k < n; ++k) oo[k] = static_cast<To>(f(static_cast<acc_t<From>>(ii[k])));
      return;
    }
    for (int64_t k = 0; k < n; ++k, o += st[0], i += st[1])
      *reinterpret_cast<To*>(o) = static_cast<To>(f(static_cast<acc_t<From>>(*reinterpret_cast<const From*>(i))));
  });
}

}  // namespace

// Float-only ops (the frontend casts integer inputs to f32 first).
#define KILN_FLOAT_UNARY(Name, expr)                                      \
  void k_##Name(const ir::Op& op, void* const* in, void* const* out) {    \
    [[maybe_unused]] const ir::UnaryAttrs P = ir::UnaryAttrs::decode(op); \
    KILN_SWITCH_FLOAT(op.inputs[0].dtype, #Name, T, {                     \
      using A = acc_t<T>;                                                 \
      apply<T, T>(                                                        \
          op, in, out, [&](A x) -> A { return expr; }, true);             \
    });                                                                   \
  }

// Ops defined on every numeric dtype (and bool where it makes sense).
#define KILN_NUMERIC_UNARY(Name, expr)                                    \
  void k_##Name(const ir::Op& op, void* const* in, void* const* out) {    \
    [[maybe_unused]] const ir::UnaryAttrs P = ir::UnaryAttrs::decode(op); \
    KILN_SWITCH_NUMERIC(op.inputs[0].dtype, #Name, T, {                   \
      using A = acc_t<T>;                                                 \
      apply<T, T>(                                                        \
          op, in, out, [&](A x) -> A { return expr; }, true);             \
    });                                                                   \
  }

KILN_NUMERIC_UNARY(Abs, below_zero(x) ? A(-x) : x)
KILN_NUMERIC_UNARY(Neg, A(-x))
KILN_NUMERIC_UNARY(Sign, A((A(0) < x) - below_zero(x)))
KILN_NUMERIC_UNARY(Square, A(x* x))
KILN_FLOAT_UNARY(Exp, std::exp(x))
KILN_FLOAT_UNARY(Exp2, std::exp2(x))
KILN_FLOAT_UNARY(Expm1, std::expm1(x))
KILN_FLOAT_UNARY(Log, std::log(x))
KILN_FLOAT_UNARY(Log2, std::log2(x))
KILN_FLOAT_UNARY(Log10, std::log10(x))
KILN_FLOAT_UNARY(Log1p, std::log1p(x))
KILN_FLOAT_UNARY(Sqrt, std::sqrt(x))
KILN_FLOAT_UNARY(Rsqrt, A(1) / std::sqrt(x))
KILN_FLOAT_UNARY(Reciprocal, A(1) / x)
KILN_FLOAT_UNARY(Sin, std::sin(x))
KILN_FLOAT_UNARY(Cos, std::cos(x))
KILN_FLOAT_UNARY(Tan, std::tan(x))
KILN_FLOAT_UNARY(Asin, std::asin(x))
KILN_FLOAT_UNARY(Acos, std::acos(x))
KILN_FLOAT_UNARY(Atan, std::atan(x))
KILN_FLOAT_UNARY(Sinh, std::sinh(x))
KILN_FLOAT_UNARY(Cosh, std::cosh(x))
KILN_FLOAT_UNARY(Tanh, std::tanh(x))
KILN_FLOAT_UNARY(Asinh, std::asinh(x))
KILN_FLOAT_UNARY(Acosh, math::acosh(x))
KILN_FLOAT_UNARY(Atanh, std::atanh(x))
KILN_FLOAT_UNARY(Erf, std::erf(x))
KILN_FLOAT_UNARY(Erfinv, math::erfinv(x))
KILN_NUMERIC_UNARY(Floor, std::is_integral_v<A> ? x : A(std::floor(x)))
KILN_NUMERIC_UNARY(Ceil, std::is_integral_v<A> ? x : A(std::ceil(x)))
KILN_NUMERIC_UNARY(Round, std::is_integral_v<A> ? x : A(math::round_decimals(double(x), P.decimals)))
KILN_NUMERIC_UNARY(Trunc, std::is_integral_v<A> ? x : A(std::trunc(x)))
KILN_FLOAT_UNARY(Frac, x - std::trunc(x))
KILN_FLOAT_UNARY(Sigmoid, math::sigmoid(x))
KILN_FLOAT_UNARY(Logit, P.eps < 0 ? std::log(x / (A(1) - x))
                                  : std::log(std::clamp(x, A(P.eps), A(1 - P.eps)) /
                                             (A(1) - std::clamp(x, A(P.eps), A(1 - P.eps)))))
KILN_NUMERIC_UNARY(Relu, below_zero(x) ? A(0) : x)  // NaN passes through, as in PyTorch
KILN_FLOAT_UNARY(LeakyRelu, x > A(0) ? x : A(x * A(P.slope)))
KILN_FLOAT_UNARY(Elu, x > A(0) ? A(P.scale) * x : A(P.scale) * A(P.alpha) * std::expm1(x * A(P.input_scale)))
KILN_FLOAT_UNARY(Gelu, math::gelu(x))
KILN_FLOAT_UNARY(GeluTanh, math::gelu_tanh(x))
KILN_FLOAT_UNARY(Silu, x* math::sigmoid(x))
KILN_FLOAT_UNARY(Mish, x* std::tanh(math::softplus(x, A(1), A(20))))
KILN_FLOAT_UNARY(Softplus, math::softplus(x, A(P.beta), A(P.threshold)))
KILN_FLOAT_UNARY(Softsign, x / (A(1) + std::abs(x)))
KILN_FLOAT_UNARY(Hardsigmoid, std::min(std::max(x / A(6) + A(0.5), A(0)), A(1)))
KILN_FLOAT_UNARY(Hardswish, x* std::min(std::max(x + A(3), A(0)), A(6)) / A(6))

// clamp(x, min, max) = min(max(x, lo), hi); NaN stays NaN. Integer inputs compare against the
// bounds in a wide type, so a bound outside the dtype's range (u8 with min -1) does not wrap.
namespace {
template <class T>
void clamp_impl(const ir::Op& op, void* const* in, void* const* out) {
  using A = acc_t<T>;
  const ir::ClampAttrs at = ir::ClampAttrs::decode(op);
  bool has_lo = at.has_min, has_hi = at.has_max;
  using C = std::conditional_t<std::is_integral_v<A>, double, A>;
  C lo = static_cast<C>(at.min), hi = static_cast<C>(at.max);
  if constexpr (std::is_floating_point_v<A>) {
    // Branch-free so the loop vectorises: std::max(x, lo) is (x < lo ? lo : x), which keeps a
    // NaN x (the comparison is false), and likewise std::min; a missing bound is infinite.
    const A l = has_lo ? static_cast<A>(lo) : -std::numeric_limits<A>::infinity();
    const A h = has_hi ? static_cast<A>(hi) : std::numeric_limits<A>::infinity();
    apply<T, T>(op, in, out, [l, h](A x) -> A { return std::min(std::max(x, l), h); });
    return;
  }
  apply<T, T>(op, in, out, [&](A x) -> A {
    C v = static_cast<C>(x);
    if (has_lo && v < lo) v = lo;
    if (has_hi && v > hi) v = hi;
    return static_cast<A>(v);
  });
}
}  // namespace

void k_Clamp(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_NUMERIC(op.inputs[0].dtype, "clamp", T, clamp_impl<T>(op, in, out));
}

namespace {
template <class T>
void nan_to_num_impl(const ir::Op& op, void* const* in, void* const* out) {
  using A = acc_t<T>;
  if constexpr (is_float_v<T>) {
    // Bounds default to the limits of T itself (for f16/bf16 not of float).
    double tmax = std::is_same_v<T, Half>       ? 65504.0
                  : std::is_same_v<T, BFloat16> ? 3.3895313892515355e38
                                                : double(std::numeric_limits<A>::max());
    const ir::UnaryAttrs u = ir::UnaryAttrs::decode(op);
    A nan = static_cast<A>(u.nan);
    A pos = static_cast<A>(std::min(u.posinf, tmax));
    A neg = static_cast<A>(std::max(u.neginf, -tmax));
    apply<T, T>(op, in, out, [&](A x) -> A {
      if (std::isnan(x)) return nan;
      if (std::isinf(x)) return x > 0 ? pos : neg;
      return x;
    });
  } else {
    apply<T, T>(op, in, out, [](A x) -> A { return x; });
  }
}
}  // namespace

void k_NanToNum(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_NUMERIC(op.inputs[0].dtype, "nan_to_num", T, nan_to_num_impl<T>(op, in, out));
}

namespace {
template <class T>
void bitwise_not_impl(const ir::Op& op, void* const* in, void* const* out) {
  if constexpr (std::is_same_v<T, bool>)
    apply<bool, bool>(op, in, out, [](bool x) { return !x; });
  else
    apply<T, T>(op, in, out, [](T x) { return static_cast<T>(~x); });
}
}  // namespace

void k_BitwiseNot(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_INT_BOOL(op.inputs[0].dtype, "bitwise_not", T, bitwise_not_impl<T>(op, in, out));
}

void k_LogicalNot(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, "logical_not", T,
                  { apply<bool, T>(op, in, out, [](acc_t<T> x) { return x == acc_t<T>(0); }); });
}

void k_IsNan(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, "isnan", T, {
    apply<bool, T>(op, in, out, [](acc_t<T> x) {
      if constexpr (is_float_v<T>)
        return std::isnan(x);
      else
        return false;
    });
  });
}

void k_IsInf(const ir::Op& op, void* const* in, void* const* out) {
  int64_t which = ir::UnaryAttrs::decode(op).which;
  KILN_SWITCH_ALL(op.inputs[0].dtype, "isinf", T, {
    apply<bool, T>(op, in, out, [=](acc_t<T> x) {
      if constexpr (is_float_v<T>)
        return std::isinf(x) && (which == 0 || (which > 0) == (x > 0));
      else
        return false;
    });
  });
}

void k_IsFinite(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, "isfinite", T, {
    apply<bool, T>(op, in, out, [](acc_t<T> x) {
      if constexpr (is_float_v<T>)
        return std::isfinite(x);
      else
        return true;
    });
  });
}

}  // namespace kiln::cpu
