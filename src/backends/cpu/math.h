// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Scalar math shared by CPU kernels (the reference for the vectorised paths).
#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln::cpu::math {

/// std::acosh: NaN below 1. musl's acosh (the WebAssembly build's C library) returns numbers
/// there (acosh(-100) = -2.2), so that build checks the domain first.
template <class T>
inline T acosh(T x) {
#ifdef __EMSCRIPTEN__
  if (x < T(1)) return std::numeric_limits<T>::quiet_NaN();
#endif
  return std::acosh(x);
}

/// Inverse error function: Giles' single-precision approximation, then two Newton steps.
template <class T>
inline T erfinv(T y) {
  if (y <= T(-1)) return y == T(-1) ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
  if (y >= T(1)) return y == T(1) ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
  if (std::isnan(y)) return y;
  double x = static_cast<double>(y);
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double r = p * x;
  constexpr double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) r -= (std::erf(r) - x) / (two_over_sqrt_pi * std::exp(-r * r));
  return static_cast<T>(r);
}

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
inline T softplus(T x, T beta, T threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

template <class T>
inline T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}

template <class T>
inline T gelu_tanh(T x) {
  const T k = T(0.79788456080286535588);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}

/// Round half to even with an optional number of decimals (PyTorch's rule).
template <class T>
inline T round_decimals(T x, int64_t decimals) {
  if (decimals == 0) return std::nearbyint(x);
  if (decimals > 0) {
    T s = static_cast<T>(std::pow(10.0, static_cast<double>(decimals)));
    return std::nearbyint(x * s) / s;
  }
  T s = static_cast<T>(std::pow(10.0, static_cast<double>(-decimals)));
  return std::nearbyint(x / s) * s;
}

/// -a with two's-complement wrap: -INT_MIN is INT_MIN (no signed overflow).
template <class T>
inline T wrap_neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}

/// Python-style remainder (sign of the divisor). Integers: b == 0 gives 0 (the kernel raises
/// before the result is seen), b == -1 gives 0 (INT_MIN % -1 traps in hardware).
template <class T>
inline T remainder(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return 0;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    T r = std::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
}

/// Floor division (PyTorch's rounding_mode="floor"). Integers: b == 0 gives 0 (the kernel
/// raises before the result is seen), INT_MIN / -1 wraps to INT_MIN (two's complement).
template <class T>
inline T floor_div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return wrap_neg(a);
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  } else {
    // PyTorch: floor of true division computed through fmod to stay exact.
    if (b == 0) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
    T fl;
    if (div != 0) {
      fl = std::floor(div);
      if (div - fl > T(0.5)) fl += T(1);
    } else {
      fl = std::copysign(T(0), a / b);
    }
    return fl;
  }
}

}  // namespace kiln::cpu::math
