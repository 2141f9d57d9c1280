// SPDX-License-Identifier: MIT OR Apache-2.0
// Math functions of the library (kernel/library.h) in the CPU's polynomial forms, written with
// plain f32 arithmetic, so every target meets the CPU's stated bounds (docs/tensors.md,
// Accuracy) where its built-ins would not. Scalings by powers of two are built from exponent
// bits, not left to the target's exp2 or ldexp.
#include <array>
#include <cmath>
#include <limits>

#include "kernel/library.h"

namespace kiln::kernel::lib {

// exp(x) to ~1 ulp: Cephes' expf polynomial after a two-constant ln 2 reduction, as the CPU's
// ExpSafe (src/backends/cpu/vec_math-inl.h), with separate multiplies and adds: fused
// multiply-adds would round differently on a driver that splits them (lavapipe does), and every
// target gives the same bits (tests/unit/kernel_suite_cases.h). The body clamps x to
// [-104, 89] and applies the scale 2^n in two halves, so results reach +inf and the subnormals
// out of the arithmetic itself (a device that flushes subnormal results gives 0 there, below
// 2^-126); NaN passes through. Where |x| < 87.5 (the guard) neither is needed: the fast form
// scales once, with the same bits.
static Val exp_f32_poly(Val xc, Val& n) {
  n = floor(xc * 1.44269504088896341f + 0.5f);
  Val r = xc - n * 0.693359375f;  // exact: the constant has 9 significant bits
  r = r - n * -2.12194440e-4f;
  Val p = Val(1.9875691500e-4f);
  for (const float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = p * r + c;
  return p * (r * r) + (r + 1.0f);
}
static Val exp_f32_impl(Val x) {
  const Val xc = min(max(x, Val(-104.0f)), Val(89.0f));
  Val n;
  const Val y = exp_f32_poly(xc, n);
  const Val ni = cast(n, Type::I32), n1 = ni >> 1, n2 = ni - n1;
  const Val s1 = bitcast((n1 + 127) << 23, Type::F32), s2 = bitcast((n2 + 127) << 23, Type::F32);
  return select(x != x, x, y * s1 * s2);
}
static Val exp_f32_fast(Val x) {
  Val n;
  const Val y = exp_f32_poly(x, n);
  return y * bitcast((cast(n, Type::I32) + 127) << 23, Type::F32);
}

namespace {

/// c[0] + c[1] y + ... by Horner's rule (coefficients low to high), as the CPU's Poly.
template <size_t N>
Val poly(Val y, const float (&c)[N]) {
  Val p = Val(c[N - 1]);
  for (size_t i = N - 1; i-- > 0;) p = p * y + c[i];
  return p;
}

}  // namespace

// tanh(x) as the CPU's odd rational x P(x^2) / Q(x^2) on x clamped to +-7.905, +-1 from |x| >= 9;
// |x| < 2^-40 is x itself (tanh(x) rounds to x there, and a device that flushes subnormal
// arithmetic keeps a subnormal x this way); NaN passes through.
static Val tanh_f32_impl(Val x) {
  static constexpr float kP[] = {4.89352455891786e-03f, 6.37261928875436e-04f,  1.48572235717979e-05f,
                                 5.12229709037114e-08f, -8.60467152213735e-11f, 2.00018790482477e-13f,
                                 -2.76076847742355e-16f};
  static constexpr float kQ[] = {4.89352518554385e-03f, 2.26843463243900e-03f, 1.18534705686654e-04f,
                                 1.19825839466702e-06f};
  const float lim = 7.90531110763549805f;
  const Val xc = min(max(x, Val(-lim)), Val(lim));
  const Val x2 = xc * xc;
  const Val r = xc * poly(x2, kP) / poly(x2, kQ);
  const Val one = select(x < 0.0f, Val(-1.0f), Val(1.0f));
  return select(x != x || abs(x) < 9.094947e-13f, x, select(abs(x) >= 9.0f, one, r));
}

// log(x) as the CPU's (Highway's musl-derived Log: the exponent from the bits, log of the
// mantissa in [sqrt(2)/2, sqrt(2)) as z = (m - 1) / (m + 1) and a polynomial in z^2), with the
// CPU's special values: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN passes. A
// subnormal x is read from its bits (its mantissa as an integer), so a device that flushes
// subnormal arithmetic still gets its logarithm.
static Val log_f32_impl(Val x) {
  const Val bits = bitcast(x, Type::I32);
  const Val mant = bits & 0x7fffff, expo = bits & 0x7f800000;
  const Val sub = expo == 0 && mant != 0;
  const Val xs = select(sub, cast(mant, Type::F32) * 4.70197740328915e-38f, x);  // m * 2^-124 = x * 2^25
  const Val eb = bitcast(xs, Type::I32) + (0x3F800000 - 0x3F3504F3);
  const Val e = cast((eb >> 23) - 127 + select(sub, Val(-25), Val(0)), Type::F32);
  const Val y = bitcast((eb & 0x7FFFFF) + 0x3F3504F3, Type::F32);
  const Val ym1 = y - 1.0f;
  const Val z = ym1 / (y + 1.0f);
  const Val z2 = z * z, z4 = z2 * z2;
  const Val p = (z4 * 0.28498786688f + 0.66666662693f) * z2 + (z4 * 0.24279078841f + 0.40000972152f) * z4;
  const Val inner = z * (ym1 - p) - e * 9.0580006145e-6f;
  const Val r = e * 0.69313812256f - (inner - ym1);
  const Val zero = (bits & 0x7fffffff) == 0;
  const float inf = std::numeric_limits<float>::infinity();
  return select(
      x != x, x,
      select(zero, Val(-inf), select(bits < 0, Val(std::numeric_limits<float>::quiet_NaN()), select(x == inf, x, r))));
}

namespace {

/// 2^k for an I32 k in [-1023, 1023], exact: a product of the powers 2^(+-2^j) its bits select
/// (f64 has no 64-bit bitcast here to build it from exponent bits).
Val pow2_f64(Val k) {
  const Val a = select(k < 0, -k, k);
  Val s = Val::constant(1, Type::F64);
  for (int j = 0; j < 10; ++j) {
    const double up = std::ldexp(1.0, 1 << j), down = std::ldexp(1.0, -(1 << j));
    const Val c = select(k < 0, Val::constant(down, Type::F64), Val::constant(up, Type::F64));
    s = s * select((a & (1 << j)) != 0, c, Val::constant(1, Type::F64));
  }
  return s;
}

}  // namespace

// exp(x) of an F64 value to about 1 ulp: x = n ln 2 + r with a two-constant ln 2 (the high
// part exact in n * ln2_hi), exp(r) by its Taylor series to r^13 (|r| <= ln 2 / 2: the rest is
// below 0.05 ulp), the scale 2^n in two halves; +inf past 709.79, 0 below -745.2, NaN passes.
static Val exp_f64_impl(Val x) {
  const Val xc = min(max(x, Val::constant(-746.0, Type::F64)), Val::constant(710.0, Type::F64));
  const Val n = floor(xc * 1.4426950408889634 + 0.5);
  Val r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  double fact = 1;
  for (int k = 1; k <= 13; ++k) fact *= k;
  Val p = Val::constant(1.0 / fact, Type::F64);
  for (int k = 12; k >= 0; --k) {
    fact /= (k + 1);  // now k!
    p = p * r + 1.0 / fact;
  }
  const Val ni = cast(n, Type::I32), n1 = ni / 2, n2 = ni - n1;
  return select(x != x, x, p * pow2_f64(n1) * pow2_f64(n2));
}

// log(x) of an F64 value to about 1 ulp: x = 2^e m with m in [sqrt(2)/2, sqrt(2)) found by
// exact power-of-two steps (a binary search over the exponent), log(m) = 2 atanh(z) with
// z = (m - 1) / (m + 1) by its series to z^23, plus e ln 2 in two parts. log(0) = -inf,
// log(x < 0) = NaN, log(inf) = inf, NaN passes (as std::log).
static Val log_f64_impl(Val x) {
  auto d = [](double v) { return Val::constant(v, Type::F64); };
  Var m(x);
  Var e(Val(0));
  for (int s = 512; s >= 1; s /= 2) {
    const Val up = Val(m) >= d(std::ldexp(1.0, s)), down = Val(m) < d(std::ldexp(1.0, -s + 1));
    m = select(up, Val(m) * d(std::ldexp(1.0, -s)), select(down, Val(m) * d(std::ldexp(1.0, s)), Val(m)));
    e = select(up, Val(e) + s, select(down, Val(e) - s, Val(e)));
  }
  // m in [1, 2) now (or [0.5, 1) after the last step down); centre it on 1
  const Val big = Val(m) > d(1.4142135623730951), small = Val(m) < d(0.7071067811865476);
  const Val mc = select(big, Val(m) * 0.5, select(small, Val(m) * 2.0, Val(m)));
  const Val ef = cast(select(big, Val(e) + 1, select(small, Val(e) - 1, Val(e))), Type::F64);
  const Val z = (mc - 1.0) / (mc + 1.0), z2 = z * z;
  Val s = d(1.0 / 23);
  for (int k = 21; k >= 1; k -= 2) s = s * z2 + 1.0 / k;
  const Val lm = 2.0 * z * s;
  const Val r = ef * 6.93147180369123816490e-01 + (ef * 1.90821492927058770002e-10 + lm);
  const double inf = std::numeric_limits<double>::infinity();
  return select(
      x != x, x,
      select(x == 0.0, d(-inf), select(x < 0.0, d(std::numeric_limits<double>::quiet_NaN()), select(x == inf, x, r))));
}

namespace {

/// Whether the F32 x is a subnormal or zero (from its bits: a device may flush them).
Val tiny_f32(Val x) { return (bitcast(x, Type::I32) & 0x7f800000) == 0; }

/// The F32 x as F64, exact for subnormals too (their mantissa read as an integer).
Val exact_f64(Val x) {
  const Val bits = bitcast(x, Type::I32);
  const Val m = cast(bits & 0x7fffff, Type::F64) * std::ldexp(1.0, -149);
  return select(tiny_f32(x), select(bits < 0, -m, m), cast(x, Type::F64));
}

}  // namespace

static Val via_f64_impl(kiln::ir::OpKind kind, Val x) {
  using kiln::ir::OpKind;
  const Val d = exact_f64(x);
  const bool small_is_x = kind == OpKind::Expm1 || kind == OpKind::Log1p || kind == OpKind::Sinh ||
                          kind == OpKind::Asinh || kind == OpKind::Atanh;
  const Val near0 = abs(d) < std::ldexp(1.0, -20);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Val r;
  switch (kind) {
    case OpKind::Exp2:
      r = exp_f64(d * 0.69314718055994530942);
      break;
    case OpKind::Log2:
      r = log_f64(d) * 1.44269504088896340736;
      break;
    case OpKind::Log10:
      r = log_f64(d) * 0.43429448190325182765;
      break;
    case OpKind::Expm1: {  // Taylor near 0, where exp(x) - 1 would cancel
      const Val t = d + d * d * (0.5 + d * (1.0 / 6));
      r = select(abs(d) < std::ldexp(1.0, -20), t, exp_f64(d) - 1.0);
      break;
    }
    case OpKind::Log1p: {
      const Val t = d - d * d * (0.5 - d * (1.0 / 3));
      r = select(abs(d) < std::ldexp(1.0, -20), t, log_f64(d + 1.0));
      break;
    }
    case OpKind::Sinh: {  // Taylor near 0, where the difference would cancel
      const Val t = d + d * d * d * (1.0 / 6);
      r = select(abs(d) < std::ldexp(1.0, -10), t + d * d * d * d * d * (1.0 / 120), (exp_f64(d) - exp_f64(-d)) * 0.5);
      break;
    }
    case OpKind::Cosh:
      r = (exp_f64(d) + exp_f64(-d)) * 0.5;
      break;
    case OpKind::Asinh: {
      const Val a = abs(d), l = log_f64(a + sqrt(a * a + 1.0));
      r = select(near0, d, select(d < 0.0, -l, l));
      break;
    }
    case OpKind::Acosh:  // NaN below 1 (sqrt of a negative is not defined on every target)
      r = select(d < 1.0, Val::constant(nan, Type::F64),
                 log_f64(d + sqrt(max(d * d - 1.0, Val::constant(0, Type::F64)))));
      break;
    case OpKind::Atanh:
      r = select(near0, d + d * d * d * (1.0 / 3), log_f64((d + 1.0) / (1.0 - d)) * 0.5);
      break;
    default:
      return x;
  }
  // a subnormal x: expm1 and log1p are x itself (the bits moved, not computed)
  return small_is_x ? select(tiny_f32(x), x, cast(r, Type::F32)) : cast(r, Type::F32);
}

namespace {

Val f64c(double v) { return Val::constant(v, Type::F64); }

/// The F32 value of an F64 value that F32 holds exactly (a remainder of two F32 values): its
/// bits built from the value, a subnormal's from its mantissa as an integer, so a device that
/// flushes subnormal arithmetic still gets it; the sign bit from `sign` (an I32 of x's bits).
Val exact_f32(Val r, Val sign) {
  const Val sub = cast(r * std::ldexp(1.0, 149), Type::I32);
  const Val bits = select(r < std::ldexp(1.0, -126), sub, bitcast(cast(r, Type::F32), Type::I32));
  return bitcast(bits | (sign & static_cast<int32_t>(0x80000000u)), Type::F32);
}

/// 2/pi in 24-bit pieces, piece i scaled by 2^-24(i+1): each product with an F32 value is exact.
constexpr double kTwoOverPi[] = {0xa2f983p-24,  0x6e4e44p-48,  0x1529fcp-72,  0x2757d1p-96,
                                 0xf534ddp-120, 0xc0db62p-144, 0x95993cp-168, 0x439041p-192,
                                 0xfe5163p-216, 0xabdebbp-240, 0xc561b7p-264, 0x246e3ap-288};

/// A finite a >= 0 (an F32 value as F64) as k pi/2 + theta, |theta| <= pi/4 (about): k modulo 4
/// (F64) and theta (F64) to about 2^-52 relative, however near a is to a multiple of pi/2. Each
/// piece's product a c_i is exact and so is its value modulo 4; the sum of those is kept as an
/// exact pair (two-sum), so the rounding happens only after the cancellation.
std::pair<Val, Val> reduce_half_pi(Val a) {
  Val hi = f64c(0), lo = f64c(0);
  for (double c : kTwoOverPi) {
    const Val t = a * f64c(c);
    const Val f = t - floor(t * 0.25) * 4.0;
    const Val s = hi + f, back = s - hi;
    lo = lo + ((hi - (s - back)) + (f - back));
    hi = s;
  }
  const Val k = floor(hi + 0.5);
  const Val r = (hi - k) + lo;
  return {k - floor(k * 0.25) * 4.0, r * 1.5707963267948966};
}

}  // namespace

// sin, cos and tan of an F32 value through f64 over the whole F32 range: the reduction by pi/2
// above, then the Taylor series of sin and cos on [-pi/4, pi/4] (to theta^21 and theta^22: the
// rest is below 2^-70) and the quadrant. Rounded once to F32: within 1 ulp of the correctly
// rounded value (tested); a subnormal x gives x for sin and tan; inf and NaN give NaN.
static Val trig_f32_impl(kiln::ir::OpKind kind, Val x) {
  using kiln::ir::OpKind;
  const Val a = abs(exact_f64(x));
  const double inf = std::numeric_limits<double>::infinity();
  const Val finite = a < inf;
  const auto [q, theta] = reduce_half_pi(select(finite, a, f64c(0)));
  const Val t2 = theta * theta;
  auto term = [](int k) {  // (-1)^(k/2) / k!
    double f = 1;
    for (int i = 2; i <= k; ++i) f *= i;
    return (k / 2) % 2 ? -1.0 / f : 1.0 / f;
  };
  Val ps = f64c(term(21)), pc = f64c(term(22));
  for (int k = 19; k >= 1; k -= 2) ps = ps * t2 + term(k);
  for (int k = 20; k >= 0; k -= 2) pc = pc * t2 + term(k);
  const Val s = theta * ps, c = pc;
  const Val q0 = q == 0.0, q1 = q == 1.0, q2 = q == 2.0;
  Val v;
  if (kind == OpKind::Cos) {
    v = select(q0, c, select(q1, -s, select(q2, -c, s)));
  } else {
    v = kind == OpKind::Sin ? select(q0, s, select(q1, c, select(q2, -s, -c))) : select(q0 || q2, s / c, -c / s);
    v = select(x < 0.0f, -v, v);
  }
  const Val r = cast(v, Type::F32);
  const Val nan = Val(std::numeric_limits<float>::quiet_NaN());
  return select(finite, kind == OpKind::Cos ? r : select(tiny_f32(x), x, r), nan);
}

namespace {

/// The bits of 2/pi as 32-bit words after one zero word: word i + 1 holds bits 32 i .. 32 i + 31
/// after the binary point (the pieces of kTwoOverPi).
constexpr uint32_t kTwoOverPiWords[] = {0,          0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0,
                                        0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561, 0xb7246e3a};

Val u32c(uint32_t v) { return Val::constant(v, Type::U32); }

/// Word i of kTwoOverPiWords for a run-time i in [0, 8] (a chain of selects: no arrays in the IR).
Val two_over_pi_word(Val i) {
  Val w = u32c(kTwoOverPiWords[9]);
  for (int k = 8; k >= 0; --k) w = select(i == static_cast<int32_t>(k), u32c(kTwoOverPiWords[k]), w);
  return w;
}

}  // namespace

// a >= 0 finite F32 (above pi/4) as q pi/2 + r, |r| <= pi/4, in integer and F32 arithmetic only
// (Payne-Hanek): with a = m 2^s (m < 2^24), the 96 bits of 2/pi that can reach the two integer
// bits and the fraction of a 2/pi are multiplied by m exactly in 16-bit limbs; the fraction's
// top 64 bits, taken to [-1/2, 1/2), become r as an F32 pair (hi + lo) times pi/2 as a pair.
std::array<Val, 3> reduce_half_pi_f32(Val a) {
  const Val bits = bitcast(a, Type::U32);
  const Val e = cast(bits >> 23u, Type::I32), m = (bits & 0x7fffffu) | 0x800000u;
  const Val o = e - 120;  // the window's first bit in the padded table: s + 30, s = e - 150
  const Val wi = o >> 5, sh = cast(o & 31, Type::U32);
  Val win[3];  // most significant first
  for (int j = 0; j < 3; ++j) {
    const Val t0 = two_over_pi_word(wi + j), t1 = two_over_pi_word(wi + j + 1);
    win[j] = (t0 << sh) | ((t1 >> 1u) >> (31u - sh));  // no shift by 32
  }
  Val limb[6];  // 16-bit limbs of the window, lowest first
  for (int j = 0; j < 3; ++j) {
    limb[2 * (2 - j)] = win[j] & 0xffffu;
    limb[2 * (2 - j) + 1] = win[j] >> 16u;
  }
  const Val ml = m & 0xffffu, mh = m >> 16u;
  Val col[8];
  for (auto& c : col) c = u32c(0);
  for (int k = 0; k < 6; ++k) {
    const Val pl = ml * limb[k], ph = mh * limb[k];
    col[k] = col[k] + (pl & 0xffffu);
    col[k + 1] = col[k + 1] + (pl >> 16u) + (ph & 0xffffu);
    col[k + 2] = col[k + 2] + (ph >> 16u);
  }
  Val d[8], carry = u32c(0);
  for (int c = 0; c < 8; ++c) {
    const Val v = col[c] + carry;
    d[c] = v & 0xffffu;
    carry = v >> 16u;
  }
  // The product's binary point is at bit 94: q = bits 94-95, the fraction bits 93 down to 30.
  Val q = (d[5] >> 14u) & 3u;
  const Val f_hi = ((d[5] & 0x3fffu) << 18u) | (d[4] << 2u) | (d[3] >> 14u);
  const Val f_lo = ((d[3] & 0x3fffu) << 18u) | (d[2] << 2u) | (d[1] >> 14u);
  const Val neg = f_hi >= 0x80000000u;  // fraction >= 1/2: the next multiple, r negative
  q = (q + select(neg, u32c(1), u32c(0))) & 3u;
  const Val n_lo = (f_lo ^ 0xffffffffu) + 1u, n_hi = (f_hi ^ 0xffffffffu) + select(n_lo == 0u, u32c(1), u32c(0));
  const Val m_hi = select(neg, n_hi, f_hi), m_lo = select(neg, n_lo, f_lo);
  // |fraction| = m_hi 2^-32 + m_lo 2^-64 as a pair: m_hi's top and bottom 16 bits are exact F32.
  const Val a1 = cast(m_hi & 0xffff0000u, Type::F32) * 0x1p-32f;
  const Val a2 = cast(m_hi & 0xffffu, Type::F32) * 0x1p-32f + cast(m_lo, Type::F32) * 0x1p-64f;
  const Val fh = a1 + a2, fl = a2 - (fh - a1);
  // times pi/2 = P1 + P2, P1 with 12 bits so that fh's halves times P1 are exact.
  constexpr float kP1 = 1.5703125f, kP2 = 4.8382679e-4f;  // pi/2 - kP1, rounded
  const Val fh_hi = bitcast(bitcast(fh, Type::U32) & 0xfffff000u, Type::F32), fh_lo = fh - fh_hi;
  const Val p1 = fh_hi * kP1, p2 = fh_lo * kP1;  // exact
  const Val rh = p1 + p2, rl = (p2 - (rh - p1)) + (fh * kP2 + fl * 1.5707964f);
  const Val r = rh + rl, r_lo = rl - (r - rh);
  const Val sign = select(neg, Val(-1.0f), Val(1.0f));
  return {cast(q, Type::I32), r * sign, r_lo * sign};
}

// sin and cos of an F32 value in F32 and integer arithmetic only (no f64: WGSL): |x| <= pi/4 as
// is, else reduce_half_pi_f32; Cephes' minimax polynomials on [-pi/4, pi/4] with the reduction's
// low part as a first-order correction. inf and NaN give NaN.
static Val sin_cos_f32_impl(bool cosine, Val x) {
  const Val a = abs(x);
  const Val finite = a < std::numeric_limits<float>::infinity();
  const Val small = a <= 0.78539816f;
  const auto [q_big, r_big, l_big] = reduce_half_pi_f32(select(finite && !small, a, Val(1.0f)));
  const Val q = select(small, Val(0), q_big), r = select(small, a, r_big), l = select(small, Val(0.0f), l_big);
  const Val z = r * r;
  const Val sn =
      r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f)) + l * (1.0f - 0.5f * z);
  const Val cs =
      (1.0f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f))) -
      l * r;
  Val v;
  if (cosine) {
    v = select(q == 0, cs, select(q == 1, -sn, select(q == 2, -cs, sn)));
  } else {
    v = select(q == 0, sn, select(q == 1, cs, select(q == 2, -sn, -cs)));
    v = select(x < 0.0f, -v, select(x == 0.0f, x, v));  // sin(-0) = -0
  }
  return select(finite, v, Val(std::numeric_limits<float>::quiet_NaN()));
}

namespace {

constexpr double kPi = 3.141592653589793, kHalfPi = 1.5707963267948966;

/// atan of an F64 value to about 2^-52 relative: |d| > 1 as pi/2 - atan(1/|d|), then above
/// tan(pi/8) as pi/4 + atan((u - 1) / (u + 1)), leaving |v| <= tan(pi/8), where the Taylor
/// series to v^47 leaves less than 2^-60; the sign of d; inf gives pi/2, NaN passes.
Val atan_f64(Val d) {
  const Val a = abs(d), inv = a > 1.0;
  const Val u = select(inv, 1.0 / a, a), mid = u > 0.41421356237309503;
  const Val v = select(mid, (u - 1.0) / (u + 1.0), u), v2 = v * v;
  Val p = f64c(-1.0 / 47);
  for (int k = 45; k >= 1; k -= 2) p = p * v2 + ((k / 2) % 2 ? -1.0 / k : 1.0 / k);
  Val r = v * p;
  r = select(mid, r + kPi / 4, r);
  r = select(inv, kHalfPi - r, r);
  return select(d < 0.0, -r, r);
}

}  // namespace

// asin, acos and atan of an F32 value through f64 (see atan_f64): asin x = atan(x / sqrt((1 -
// x)(1 + x))), acos x = 2 atan(sqrt((1 - x) / (1 + x))), both exact in their differences and
// NaN beyond [-1, 1]. Rounded once: within 1 ulp; a subnormal x gives x for asin and atan.
static Val inverse_trig_f32_impl(kiln::ir::OpKind kind, Val x) {
  using kiln::ir::OpKind;
  const Val d = exact_f64(x), one = f64c(1);
  Val r;
  if (kind == OpKind::Atan) {
    r = atan_f64(d);
  } else {
    const Val lo = one - d, hi = one + d;
    r = kind == OpKind::Asin ? atan_f64(d / sqrt(lo * hi)) : 2.0 * atan_f64(sqrt(lo / hi));
    r = select(abs(d) > 1.0, f64c(std::numeric_limits<double>::quiet_NaN()), r);
  }
  const Val out = cast(r, Type::F32);
  return kind == OpKind::Acos ? out : select(tiny_f32(x), x, out);
}

// atan2(y, x) of F32 values through f64 as atan(|y| / |x|), then pi minus it for a negative x
// (its sign bit: -0 too) and y's sign, with IEEE's special cases: both zero gives 0 or pi, both
// infinite pi/4 or 3 pi/4, NaN passes. Within 1 ulp.
static Val atan2_f32_impl(Val y, Val x) {
  const Val a = abs(exact_f64(y)), b = abs(exact_f64(x));
  const double inf = std::numeric_limits<double>::infinity();
  const Val q = select(a == 0.0 && b == 0.0, f64c(0), select(a == inf && b == inf, f64c(1), a / b));
  Val r = atan_f64(q);
  r = select(bitcast(x, Type::I32) < 0, kPi - r, r);
  r = select(bitcast(y, Type::I32) < 0, -r, r);
  const Val nan = Val(std::numeric_limits<float>::quiet_NaN());
  return select(x != x || y != y, nan, cast(r, Type::F32));
}

namespace {

/// erf of an F64 value below 2 in magnitude by its Taylor series (to x^91: within 1e-15).
Val erf_series_f64(Val x) {
  const Val x2 = x * x;
  Val p = f64c(0);
  for (int n = 45; n >= 0; --n) {
    double f = 1;
    for (int k = 2; k <= n; ++k) f *= k;
    p = p * x2 + (n % 2 ? -1.0 : 1.0) / (f * (2 * n + 1));
  }
  return 1.1283791670955126 * x * p;
}

/// erfc of an F64 value a >= 2 by its continued fraction (60 levels: within 4e-15 relative).
Val erfc_fraction_f64(Val a) {
  Val t = a;
  for (int k = 60; k >= 1; --k) t = a + (k * 0.5) / t;
  return exp_f64(-(a * a)) / (1.7724538509055160 * t);
}

/// One of the CPU's erfinv polynomials (Giles) in w.
Val giles(Val w, const double* c, int n) {
  Val p = f64c(c[0]);
  for (int i = 1; i < n; ++i) p = p * w + c[i];
  return p;
}

}  // namespace

// erfinv of an F32 value as the CPU's (src/backends/cpu/math.h): Giles' polynomials in
// w = -log((1 - x)(1 + x)) for a start, then two Newton steps in f64 whose erf(r) - x is taken
// as s ((1 - s x) - erfc(|r|)) beyond |r| = 2, free of the cancellation near +-1; rounded once
// (bit for bit the CPU's over 4 million sampled inputs). +-1 gives +-inf, beyond them NaN.
static Val erfinv_f32_impl(Val y) {
  static constexpr double kLow[] = {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                                    -0.00125372503, -0.00417768164, 0.246640727,    1.50140941};
  static constexpr double kHigh[] = {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                                     -0.0076224613,   0.00943887047,  1.00167406,    2.83297682};
  const Val x = exact_f64(y), one = f64c(1);
  const Val inside = abs(x) < 1.0;  // false for NaN
  const Val xs = select(inside, x, f64c(0));
  const Val w = -log_f64((one - xs) * (one + xs));
  const Val p = select(w < 5.0, giles(w - 2.5, kLow, 9), giles(sqrt(w) - 3.0, kHigh, 9));
  Val r = p * xs;
  for (int i = 0; i < 2; ++i) {
    const Val a = abs(r), s = select(r < 0.0, f64c(-1), one);
    const Val e = select(a < 2.0, erf_series_f64(r) - xs, s * ((one - s * xs) - erfc_fraction_f64(max(a, f64c(2)))));
    r = r - e / (1.1283791670955126 * exp_f64(-(r * r)));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const Val edge =
      select(x == 1.0, Val(inf), select(x == -1.0, Val(-inf), Val(std::numeric_limits<float>::quiet_NaN())));
  return select(inside, cast(r, Type::F32), edge);
}

// std::fmod of F32 values, exact as std::fmod is: |x| is reduced in f64 by |y| 2^(24 j) for
// j = 11 down to 0 (|x| / |y| < 2^277 < 2^288), one quotient below 2^24 each, so that each
// step's product and difference is exact; a quotient one too high or too low (the division's
// rounding) is corrected. Straight-line code: no loop whose trip count differs between threads.
// The result has x's sign; NaN for an infinite x, a zero y or a NaN; x itself for an infinite y.
static Val fmod_f32_impl(Val x, Val y) {
  const Val a = abs(exact_f64(x)), b = abs(exact_f64(y));
  const double inf = std::numeric_limits<double>::infinity();
  const Val defined = a < inf && b > 0.0;  // false for NaNs too
  Val r = select(defined, a, f64c(0));
  for (int j = 11; j >= 0; --j) {
    const Val t = b * std::ldexp(1.0, 24 * j);
    Val rem = r - floor(r / t) * t;
    rem = select(rem < 0.0, rem + t, select(rem >= t, rem - t, rem));
    r = select(r >= t, rem, r);
  }
  const Val out = exact_f32(r, bitcast(x, Type::I32));
  return select(defined, out, Val(std::numeric_limits<float>::quiet_NaN()));
}

// Python's remainder of F32 values as the CPU's: fmod, moved by y when the signs differ.
static Val remainder_f32_impl(Val x, Val y) {
  const Val r = fmod_f32(x, y);
  return select(r != 0.0f && ((r < 0.0f) != (y < 0.0f)), r + y, r);
}

// Floor division of F32 values as the CPU's (PyTorch's): through fmod, so that the quotient is
// exact; a zero divisor gives x / y; a zero quotient takes the sign of x / y.
static Val floor_div_f32_impl(Val x, Val y) {
  const Val mod = fmod_f32(x, y);
  const Val d0 = (x - mod) / y;
  const Val div = select(mod != 0.0f && ((y < 0.0f) != (mod < 0.0f)), d0 - 1.0f, d0);
  const Val fl = floor(div);
  const Val up = select(div - fl > 0.5f, fl + 1.0f, fl);
  const Val q = x / y;
  const Val zero = bitcast(bitcast(q, Type::I32) & static_cast<int32_t>(0x80000000u), Type::F32);
  return select(y == 0.0f, q, select(div != 0.0f, up, zero));
}

// x^y of F32 values as exp(y log|x|) in f64, rounded (within an ulp of std::pow), with IEEE
// pow's special cases: y = 0 or x = 1 give 1 (NaN too), x = -1 with y = +-inf gives 1, a
// negative finite x with a non-integer y is NaN, an odd integer y keeps x's sign (-0 too).
static Val pow_f32_impl(Val x, Val y) {
  const Val a = exact_f64(x), b = exact_f64(y);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Val one = Val::constant(1, Type::F64);
  Val r = exp_f64(b * log_f64(abs(a)));
  const Val integer = floor(b) == b, half = b * 0.5;
  const Val odd = integer && floor(half) != half;
  r = select(bitcast(x, Type::I32) < 0 && odd, -r, r);
  r = select(a < 0.0 && a > -inf && !integer && abs(b) < inf, Val::constant(nan, Type::F64), r);
  r = select(abs(a) == 1.0 && abs(b) == inf, one, r);
  r = select(a != a || b != b, Val::constant(nan, Type::F64), r);
  r = select(b == 0.0 || a == 1.0, one, r);
  return cast(r, Type::F32);
}

namespace {

/// An unevaluated sum hi + lo of F32 values (about 48 bits).
struct Pair {
  Val hi, lo;
};

/// a + b exactly (Knuth's two-sum).
Pair two_sum(Val a, Val b) {
  const Val s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

/// The top 12 significant bits of an F32 value (the rest, a - hi, has at most 12 more).
Val top12(Val a) { return bitcast(bitcast(a, Type::U32) & 0xfffff000u, Type::F32); }

/// a b exactly (Dekker's product, the 12-bit halves by masking: every partial product is exact,
/// so a target that fuses a multiply and an add gets the same result).
Pair two_prod(Val a, Val b) {
  const Val ah = top12(a), al = a - ah, bh = top12(b), bl = b - bh, p = a * b;
  return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

Pair renorm(Val hi, Val lo) {
  const Val s = hi + lo;
  return {s, lo - (s - hi)};
}

/// log2 of a positive finite normal F32 value as a pair (about 2^-40 relative): x = 2^e m with
/// m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m - 1) / (m + 1) as a pair.
Pair log2_pair(Val x) {
  const Val bits = bitcast(x, Type::I32);
  Val e = cast((bits >> 23) - 127, Type::F32);
  Val m = bitcast((bits & 0x7fffff) | 0x3f800000, Type::F32);
  const Val big = m > 1.41421356f;
  m = select(big, m * 0.5f, m);
  e = select(big, e + 1.0f, e);
  const Val num = m - 1.0f;  // exact
  const Pair den = two_sum(m, Val(1.0f));
  const Val s = num / den.hi;
  const Pair sd = two_prod(s, den.hi);
  const Val s_lo = (((num - sd.hi) - sd.lo) - s * den.lo) / den.hi;
  const Val z = s * s;
  Val t = Val(1.0f / 17);
  for (int k = 15; k >= 3; k -= 2) t = t * z + Val(1.0f / k);
  const Pair u = two_sum(s, s * z * t);  // atanh(s)
  const Pair ln = renorm(u.hi * 2.0f, (u.lo + s_lo) * 2.0f);
  constexpr float kL = 1.44269502f, kLlo = 1.9259630e-8f;  // 1 / ln 2 = kL + kLlo
  const Pair p = two_prod(ln.hi, Val(kL));
  const Pair lg = renorm(p.hi, p.lo + ln.hi * kLlo + ln.lo * kL);
  const Pair w = two_sum(e, lg.hi);
  return renorm(w.hi, w.lo + lg.lo);
}

}  // namespace

// x^y of F32 values in F32 arithmetic only (no f64, for WGSL): y log2|x| as a pair, then
// 2^k (k its nearest integer) times exp of the rest, scaled in two steps so that subnormal
// results come out; IEEE pow's special cases as pow_f32.
static Val pow_f32_nof64_impl(Val x, Val y) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Val ax = abs(x), tiny = tiny_f32(x);
  const Val xs = select(tiny, ax * 16777216.0f, select(ax < inf && ax > 0.0f, ax, Val(1.0f)));
  Pair lg = log2_pair(xs);
  const Pair sh = two_sum(lg.hi, select(tiny, Val(-24.0f), Val(0.0f)));  // undo the scaling
  lg = renorm(sh.hi, sh.lo + lg.lo);
  const Pair t0 = two_prod(y, lg.hi);
  const Pair t = renorm(t0.hi, t0.lo + y * lg.lo);
  const Val th = min(max(t.hi, Val(-160.0f)), Val(140.0f));  // beyond: 0 or inf either way
  const Val k = floor(th + 0.5f);
  const Val f = (th - k) + select(th == t.hi, t.lo, Val(0.0f));  // a clamped t saturates anyway
  const Val ki = cast(k, Type::I32), k1 = ki >> 1, k2 = ki - k1;
  auto pow2 = [](Val n) { return bitcast((n + 127) << 23, Type::F32); };  // n in [-126, 127]
  Val r = exp_f32(f * 0.693147182f) * pow2(k1) * pow2(k2);
  // Special values.
  const Val integer = floor(y) == y, odd = integer && floor(y * 0.5f) != y * 0.5f;
  const Val yinf = abs(y) == inf;
  r = select(ax == 0.0f || ax == inf, select((ax == 0.0f) == (y < 0.0f), Val(inf), Val(0.0f)), r);
  r = select(yinf, select((ax > 1.0f) == (y > 0.0f), Val(inf), Val(0.0f)), r);
  r = select(x < 0.0f && odd, -r, r);
  r = select(bitcast(x, Type::I32) < 0 && odd && ax == 0.0f, -r, r);  // -0 to an odd power
  r = select(x < 0.0f && x > -inf && !integer && !yinf, Val(nan), r);
  r = select(ax == 1.0f && yinf, Val(1.0f), r);
  r = select(x != x || y != y, Val(nan), r);
  return select(y == 0.0f || x == 1.0f, Val(1.0f), r);
}

// x^y of I32 or I64 values as the CPU: y < 0 gives 0 but for x = 1 (1) and x = -1 (+-1);
// otherwise squaring and multiplying, wrapping.
Val pow_int(Val x, Val y) {
  const Type t = x.type;
  Var acc(Val::constant(1, t)), base(x), e(y);
  while_([&] { return Val(e) > Val::constant(0, t); },
         [&] {
           acc = select((Val(e) & Val::constant(1, t)) != Val::constant(0, t), Val(acc) * Val(base), Val(acc));
           base = Val(base) * Val(base);
           e = Val(e) / Val::constant(2, t);
         });
  const Val zero = Val::constant(0, t), one = Val::constant(1, t);
  const Val odd = (y & one) != zero;
  const Val neg = select(x == one, one, select(x == -one, select(odd, -one, one), zero));
  return select(y < zero, neg, Val(acc));
}

// erf(x) as the CPU's odd rational x P(x^2) / Q(x^2) on x clamped to +-4, +-1 beyond (without
// exact_subnormals: x (P(x^2) / Q(x^2))); with exact_subnormals, a subnormal x gives 2/sqrt(pi) x built from its
// mantissa as an integer (bits = m for m < 2^24, normal or not), so a device that flushes subnormals still gets it; NaN
// passes.
static Val erf_f32_impl(Val x, bool exact_subnormals) {
  static constexpr float kP[] = {-1.60960333262415e-02f, -2.95459980854025e-03f, -7.34990630326855e-04f,
                                 -5.69250639462346e-05f, -2.10102402082508e-06f, 2.77068142495902e-08f,
                                 -2.72614225801306e-10f};
  static constexpr float kQ[] = {-1.42647390514189e-02f, -7.37332916720468e-03f, -1.68282697438203e-03f,
                                 -2.13374055278905e-04f, -1.45660718464996e-05f};
  const Val xc = min(max(x, Val(-4.0f)), Val(4.0f));
  const Val x2 = xc * xc;
  const Val r = xc * poly(x2, kP) / poly(x2, kQ);
  const Val one = select(x < 0.0f, Val(-1.0f), Val(1.0f));
  // Without f64: x times P / Q, whose product cannot underflow before the last rounding (x P
  // does for |x| below about 2^-120).
  if (!exact_subnormals) return select(x != x, x, select(abs(x) >= 4.0f, one, xc * (poly(x2, kP) / poly(x2, kQ))));
  const Val bits = bitcast(x, Type::I32);
  const Val m = cast(floor(cast(bits & 0x7fffff, Type::F64) * 1.1283791670955126 + 0.5), Type::I32);
  const Val sub = bitcast((bits & static_cast<int32_t>(0x80000000u)) | m, Type::F32);
  return select(x != x, x, select(tiny_f32(x), sub, select(abs(x) >= 4.0f, one, r)));
}

// 1 / (1 + exp(-x)), as the CPU: exp(-x) = +inf for very negative x gives 0.
static Val sigmoid_f32_impl(Val x) { return 1.0f / (1.0f + exp_f32(-x)); }

// ---- the functions above as kernel functions (one call op each; call_library) ----

namespace {
using Args = std::vector<Val>;
std::string kind_name(const char* stem, kiln::ir::OpKind kind) {
  return std::string(stem) + "_" + std::to_string(static_cast<int>(kind));
}
}  // namespace

Val exp_f32(Val x) {
  return call_library(
      "exp_f32", {x}, [](const Args& a) { return exp_f32_impl(a[0]); }, [](const Args& a) { return abs(a[0]) < 87.5f; },
      [](const Args& a) { return exp_f32_fast(a[0]); });
}
Val sigmoid_f32(Val x) {
  return call_library("sigmoid_f32", {x}, [](const Args& a) { return sigmoid_f32_impl(a[0]); });
}
Val tanh_f32(Val x) {
  return call_library("tanh_f32", {x}, [](const Args& a) { return tanh_f32_impl(a[0]); });
}
Val log_f32(Val x) {
  return call_library("log_f32", {x}, [](const Args& a) { return log_f32_impl(a[0]); });
}
Val erf_f32(Val x, bool exact_subnormals) {
  return call_library(exact_subnormals ? "erf_f32_exact" : "erf_f32", {x},
                      [exact_subnormals](const Args& a) { return erf_f32_impl(a[0], exact_subnormals); });
}
Val exp_f64(Val x) {
  return call_library("exp_f64", {x}, [](const Args& a) { return exp_f64_impl(a[0]); });
}
Val log_f64(Val x) {
  return call_library("log_f64", {x}, [](const Args& a) { return log_f64_impl(a[0]); });
}
Val via_f64(kiln::ir::OpKind kind, Val x) {
  return call_library(kind_name("via_f64", kind), {x}, [kind](const Args& a) { return via_f64_impl(kind, a[0]); });
}
Val pow_f32(Val x, Val y) {
  return call_library("pow_f32", {x, y}, [](const Args& a) { return pow_f32_impl(a[0], a[1]); });
}
Val pow_f32_nof64(Val x, Val y) {
  return call_library("pow_f32_nof64", {x, y}, [](const Args& a) { return pow_f32_nof64_impl(a[0], a[1]); });
}
Val trig_f32(kiln::ir::OpKind kind, Val x) {
  return call_library(kind_name("trig_f32", kind), {x}, [kind](const Args& a) { return trig_f32_impl(kind, a[0]); });
}
Val sin_cos_f32(bool cosine, Val x) {
  return call_library(cosine ? "cos_f32" : "sin_f32", {x},
                      [cosine](const Args& a) { return sin_cos_f32_impl(cosine, a[0]); });
}
Val inverse_trig_f32(kiln::ir::OpKind kind, Val x) {
  return call_library(kind_name("inverse_trig_f32", kind), {x},
                      [kind](const Args& a) { return inverse_trig_f32_impl(kind, a[0]); });
}
Val atan2_f32(Val y, Val x) {
  return call_library("atan2_f32", {y, x}, [](const Args& a) { return atan2_f32_impl(a[0], a[1]); });
}
Val erfinv_f32(Val y) {
  return call_library("erfinv_f32", {y}, [](const Args& a) { return erfinv_f32_impl(a[0]); });
}
Val fmod_f32(Val x, Val y) {
  return call_library("fmod_f32", {x, y}, [](const Args& a) { return fmod_f32_impl(a[0], a[1]); });
}
Val remainder_f32(Val x, Val y) {
  return call_library("remainder_f32", {x, y}, [](const Args& a) { return remainder_f32_impl(a[0], a[1]); });
}
Val floor_div_f32(Val x, Val y) {
  return call_library("floor_div_f32", {x, y}, [](const Args& a) { return floor_div_f32_impl(a[0], a[1]); });
}

}  // namespace kiln::kernel::lib
