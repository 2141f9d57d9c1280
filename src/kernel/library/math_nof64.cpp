// SPDX-License-Identifier: MIT OR Apache-2.0
// The library's math functions of F32 values that Vulkan computes through f64 (library/math.cpp),
// in F32 and integer arithmetic only, for devices without f64 (WebGPU: WGSL has none). Within a
// few ulps: the classic f32 forms (Kahan's expm1 and log1p, Cephes' single-precision atan and
// asin polynomials), built on exp_f32, log_f32 and sin_cos_f32. IEEE special values as the CPU:
// NaN passes, the sign of zero is kept, domain errors give NaN.
#include <limits>

#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kLn2 = 0.693147180559945f, kPi = 3.14159265358979f, kHalfPi = 1.57079632679490f;

/// x where it is zero (keeping its sign), else r.
Val keep_zero(Val x, Val r) { return select(x == 0.0f, x, r); }

/// r with the sign of x (x < 0: -r).
Val sign_of(Val x, Val r) { return select(x < 0.0f, -r, r); }

/// atan of |x| <= tan(pi/8) after Cephes' reduction, as atan_nof64 uses it.
Val atan_poly(Val t) {
  const Val z = t * t;
  return (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z - 3.33329491539e-1f) * z * t + t;
}

/// asin of |t| <= 0.5 (Cephes' asinf polynomial).
Val asin_poly(Val t) {
  const Val z = t * t;
  const Val p = (((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z + 7.4953002686e-2f) * z +
                1.6666752422e-1f;
  return t + t * z * p;
}

}  // namespace

static Val log1p_nof64_impl(Val x) {  // log(u) x / (u - 1) with u = 1 + x rounded (Kahan): the rounding cancels
  const Val u = 1.0f + x;
  return select(u == 1.0f, x, select(u == kInf, u, log_f32(u) * (x / (u - 1.0f))));
}

static Val expm1_nof64_impl(Val x) {  // (u - 1) x / log(u) with u = exp(x) rounded (Kahan)
  const Val u = exp_f32(x), um1 = u - 1.0f;
  return select(u == 1.0f, x, select(um1 == -1.0f, Val(-1.0f), select(u == kInf, u, um1 * (x / log_f32(u)))));
}

static Val exp2_nof64_impl(Val x) {  // exp(f ln 2) 2^n1 2^n2, n = round(x) = n1 + n2, f = x - n exact
  const Val xc = select(x < -160.0f, Val(-160.0f), select(x > 130.0f, Val(130.0f), x));
  const Val n = floor(xc + 0.5f), f = xc - n;
  const Val ni = cast(select(x == x, n, Val(0.0f)), Type::I32), n1 = ni >> 1, n2 = ni - n1;
  const Val r = exp_f32(f * kLn2) * bitcast((n1 + 127) << 23, Type::F32) * bitcast((n2 + 127) << 23, Type::F32);
  return select(x == x, r, x);
}

namespace {

/// e^a / 2 for a > 88 (beyond exp_f32's range near the top): (e^(a/2) / 2) e^(a/2).
Val half_exp_big(Val a) {
  const Val e = exp_f32(0.5f * a);
  return (0.5f * e) * e;
}

}  // namespace

static Val unary_nof64_impl(kiln::ir::OpKind kind, Val x) {
  using kiln::ir::OpKind;
  const Val a = abs(x);
  switch (kind) {
    case OpKind::Sin:
      return sin_cos_f32(false, x);
    case OpKind::Cos:
      return sin_cos_f32(true, x);
    case OpKind::Tan:
      return keep_zero(x, sin_cos_f32(false, x) / sin_cos_f32(true, x));
    case OpKind::Exp2:
      return exp2_nof64(x);
    case OpKind::Expm1:
      return expm1_nof64(x);
    case OpKind::Log2:
      return log_f32(x) * 1.44269504088896f;
    case OpKind::Log10:
      return log_f32(x) * 0.434294481903252f;
    case OpKind::Log1p:
      return log1p_nof64(x);
    case OpKind::Sinh: {  // (t + t / (t + 1)) / 2 with t = expm1|x|; e^|x| / 2 beyond 88
      const Val t = expm1_nof64(a);
      const Val r = select(a > 88.0f, half_exp_big(a), 0.5f * (t + t / (t + 1.0f)));
      return keep_zero(x, sign_of(x, r));
    }
    case OpKind::Cosh: {
      const Val e = exp_f32(a);
      return select(a > 88.0f, half_exp_big(a), 0.5f * (e + 1.0f / e));
    }
    case OpKind::Asinh: {  // log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log|x| + ln 2 beyond 2^12
      const Val r = select(a > 4096.0f, log_f32(a) + kLn2, log1p_nof64(a + a * a / (1.0f + sqrt(1.0f + a * a))));
      return keep_zero(x, sign_of(x, r));
    }
    case OpKind::Acosh: {  // log1p(t + sqrt(2t + t^2)), t = x - 1 (exact near 1); log x + ln 2 beyond 2^12
      const Val t = x - 1.0f;
      const Val r = select(x > 4096.0f, log_f32(x) + kLn2, log1p_nof64(t + sqrt(2.0f * t + t * t)));
      return select(x < 1.0f, Val(kNaN), r);
    }
    case OpKind::Atanh: {  // log1p(2|x| / (1 - |x|)) / 2
      const Val r = 0.5f * log1p_nof64(2.0f * a / (1.0f - a));
      return select(a > 1.0f, Val(kNaN), keep_zero(x, sign_of(x, r)));
    }
    case OpKind::Atan: {  // pi/2 + atan(-1/|x|) beyond tan(3pi/8), pi/4 + atan((|x|-1)/(|x|+1)) beyond tan(pi/8)
      const Val big = a > 2.414213562373095f, mid = a > 0.4142135623730950f;
      const Val t = select(big, -1.0f / a, select(mid, (a - 1.0f) / (a + 1.0f), a));
      const Val r = select(big, Val(kHalfPi), select(mid, Val(kPi / 4), Val(0.0f))) + atan_poly(t);
      return keep_zero(x, sign_of(x, r));
    }
    case OpKind::Asin: {  // beyond 1/2: pi/2 - 2 asin(sqrt((1 - |x|) / 2))
      const Val s = sqrt(0.5f * (1.0f - a));
      const Val r = select(a > 0.5f, kHalfPi - 2.0f * asin_poly(s), asin_poly(a));
      return select(a > 1.0f, Val(kNaN), keep_zero(x, sign_of(x, r)));
    }
    case OpKind::Acos: {  // 2 asin(sqrt((1 -+ x) / 2)) near +-1, pi/2 - asin(x) between
      const Val s = sqrt(0.5f * (1.0f - a));
      const Val r =
          select(x > 0.5f, 2.0f * asin_poly(s), select(x < -0.5f, kPi - 2.0f * asin_poly(s), kHalfPi - asin_poly(x)));
      return select(a > 1.0f, Val(kNaN), r);
    }
    case OpKind::Erf:
      return erf_f32(x, false);
    default:
      return Val(kNaN);
  }
}

static Val atan2_nof64_impl(Val y, Val x) {
  const Val ax = abs(x), ay = abs(y);
  const Val hi = select(ax < ay, ay, ax), lo = select(ax < ay, ax, ay);
  // both infinite: pi/4; both zero: 0; else atan of the ratio in [0, 1]
  const Val t = select(hi == kInf, select(lo == kInf, Val(kPi / 4), Val(0.0f)),
                       select(hi == 0.0f, Val(0.0f), unary_nof64(kiln::ir::OpKind::Atan, lo / hi)));
  Val r = select(ay > ax, kHalfPi - t, t);
  const Val x_negative = (bitcast(x, Type::U32) >> 31) == 1u;  // -0 too: atan2(0, -0) = pi
  r = select(x_negative, kPi - r, r);
  r = select((bitcast(y, Type::U32) >> 31) == 1u, -r, r);
  return select(x == x && y == y, r, x + y);
}

static Val hypot_nof64_impl(Val x, Val y) {  // hi sqrt(1 + (lo / hi)^2): no overflow; inf wins over NaN
  const Val ax = abs(x), ay = abs(y);
  const Val hi = select(ax < ay, ay, ax), lo = select(ax < ay, ax, ay), q = lo / hi;
  const Val h = select(hi == 0.0f, Val(0.0f), hi * sqrt(1.0f + q * q));
  return select(ax == kInf || ay == kInf, Val(kInf), select(x == x && y == y, h, x + y));
}

// ---- the functions above as kernel functions (one call op each; call_library) ----

namespace {
using Args = std::vector<Val>;
}  // namespace

Val log1p_nof64(Val x) {
  return call_library("log1p_nof64", {x}, [](const Args& a) { return log1p_nof64_impl(a[0]); });
}
Val expm1_nof64(Val x) {
  return call_library("expm1_nof64", {x}, [](const Args& a) { return expm1_nof64_impl(a[0]); });
}
Val exp2_nof64(Val x) {
  return call_library("exp2_nof64", {x}, [](const Args& a) { return exp2_nof64_impl(a[0]); });
}
Val unary_nof64(kiln::ir::OpKind kind, Val x) {
  return call_library("unary_nof64_" + std::to_string(static_cast<int>(kind)), {x},
                      [kind](const Args& a) { return unary_nof64_impl(kind, a[0]); });
}
Val atan2_nof64(Val y, Val x) {
  return call_library("atan2_nof64", {y, x}, [](const Args& a) { return atan2_nof64_impl(a[0], a[1]); });
}
Val hypot_nof64(Val x, Val y) {
  return call_library("hypot_nof64", {x, y}, [](const Args& a) { return hypot_nof64_impl(a[0], a[1]); });
}

}  // namespace kiln::kernel::lib
