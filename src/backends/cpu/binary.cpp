// SPDX-License-Identifier: MIT OR Apache-2.0
// Binary and ternary elementwise kernels (inputs share one dtype; the frontend promotes).
#include <cmath>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/math.h"
#include "backends/cpu/vec.h"

namespace kiln::cpu {

namespace {

template <class To, class T, class F>
void apply2(const ir::Op& op, void* const* in, void* const* out, const F& f) {
  auto loop = binary_loop(op, in, out);
  loop.run([&](const std::array<char*, 3>& p, const int64_t* st, int64_t n) {
    if constexpr (std::is_same_v<To, float> && std::is_same_v<T, float>) {
      if (st[0] == 4 && (st[1] == 4 || st[1] == 0) && (st[2] == 4 || st[2] == 0) &&
          vec::binary_f32(op.kind, reinterpret_cast<const float*>(p[1]), st[1] / 4,
                          reinterpret_cast<const float*>(p[2]), st[2] / 4, reinterpret_cast<float*>(p[0]), n))
        return;
    }
    using A = acc_t<T>;
    if (st[0] == sizeof(To) && st[1] == sizeof(T) && st[2] == sizeof(T)) {
      To* o = reinterpret_cast<To*>(p[0]);
      const T* a = reinterpret_cast<const T*>(p[1]);
      const T* b = reinterpret_cast<const T*>(p[2]);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<To>(f(static_cast<A>(a[k]), static_cast<A>(b[k])));
      return;
    }
    char* o = p[0];
    const char* a = p[1];
    const char* b = p[2];
    for (int64_t k = 0; k < n; ++k, o += st[0], a += st[1], b += st[2])
      *reinterpret_cast<To*>(o) = static_cast<To>(
          f(static_cast<A>(*reinterpret_cast<const T*>(a)), static_cast<A>(*reinterpret_cast<const T*>(b))));
  });
}

template <class T>
constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

}  // namespace

// Scalar definitions, templated so that `if constexpr` discards what a dtype cannot compile.
namespace f {
template <class A>
A add(A a, A b) {
  if constexpr (std::is_same_v<A, bool>)
    return a || b;
  else
    return A(a + b);
}
template <class A>
A sub(A a, A b) {
  return A(a - b);
}
template <class A>
A mul(A a, A b) {
  if constexpr (std::is_same_v<A, bool>)
    return a && b;
  else
    return A(a * b);
}
template <class A>
A div(A a, A b) {
  return a / b;
}
template <class A>
A floordiv(A a, A b) {
  if constexpr (std::is_same_v<A, bool>)
    return a;
  else
    return math::floor_div(a, b);
}
template <class A>
A truncdiv(A a, A b) {
  if constexpr (is_int_v<A>)
    return b == 0 ? A(0) : A(a / b);
  else if constexpr (std::is_same_v<A, bool>)
    return a;
  else
    return std::trunc(a / b);
}
template <class A>
A remainder(A a, A b) {
  if constexpr (std::is_same_v<A, bool>)
    return false;
  else
    return math::remainder(a, b);
}
template <class A>
A fmod(A a, A b) {
  if constexpr (is_int_v<A>)
    return b == 0 ? A(0) : A(a % b);
  else if constexpr (std::is_same_v<A, bool>)
    return false;
  else
    return std::fmod(a, b);
}
template <class A>
A pow(A x, A y) {
  if constexpr (is_int_v<A>) {
    if (y < 0) return x == 1 ? A(1) : x == A(-1) ? A((y % 2) ? -1 : 1) : A(0);
    using U = std::make_unsigned_t<A>;
    U base = static_cast<U>(x), acc = 1;
    for (A e = y; e > 0; e = A(e >> 1)) {
      if (e & 1) acc = static_cast<U>(acc * base);
      base = static_cast<U>(base * base);
    }
    return static_cast<A>(acc);
  } else if constexpr (std::is_same_v<A, bool>) {
    return x || !y;
  } else {
    return std::pow(x, y);
  }
}
template <class A>
A atan2(A a, A b) {
  return std::atan2(a, b);
}
template <class A>
A maximum(A x, A y) {
  if constexpr (std::is_floating_point_v<A>)
    if (std::isnan(x) || std::isnan(y)) return x + y;
  return x > y ? x : y;
}
template <class A>
A minimum(A x, A y) {
  if constexpr (std::is_floating_point_v<A>)
    if (std::isnan(x) || std::isnan(y)) return x + y;
  return x < y ? x : y;
}
template <class A>
A fmax(A x, A y) {
  if constexpr (std::is_floating_point_v<A>)
    return std::fmax(x, y);
  else
    return x > y ? x : y;
}
template <class A>
A fmin(A x, A y) {
  if constexpr (std::is_floating_point_v<A>)
    return std::fmin(x, y);
  else
    return x < y ? x : y;
}
template <class A>
A hypot(A a, A b) {
  return std::hypot(a, b);
}
template <class A>
A logaddexp(A x, A y) {
  if (std::isinf(x) && x == y) return x;
  A m = std::max(x, y);
  return m + std::log1p(std::exp(-std::abs(x - y)));
}
template <class T>
T band(T a, T b) {
  return static_cast<T>(a & b);
}
template <class T>
T bor(T a, T b) {
  return static_cast<T>(a | b);
}
template <class T>
T bxor(T a, T b) {
  return static_cast<T>(a ^ b);
}
// Shifts: PyTorch gives 0 (or -1 for negative right shifts) once the count reaches the width.
template <class T>
T shl(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x && !y;
  else {
    using U = std::make_unsigned_t<T>;
    if (y < 0 || y >= static_cast<T>(sizeof(T) * 8)) return 0;
    return static_cast<T>(static_cast<U>(x) << y);
  }
}
template <class T>
T shr(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x && !y;
  else {
    if (y < 0 || y >= static_cast<T>(sizeof(T) * 8)) return x < 0 ? T(-1) : T(0);
    return static_cast<T>(x >> y);
  }
}
template <class A>
bool land(A a, A b) {
  return a != A(0) && b != A(0);
}
template <class A>
bool lor(A a, A b) {
  return a != A(0) || b != A(0);
}
template <class A>
bool lxor(A a, A b) {
  return (a != A(0)) != (b != A(0));
}
template <class A>
bool eq(A a, A b) {
  return a == b;
}
template <class A>
bool ne(A a, A b) {
  return a != b;
}
template <class A>
bool lt(A a, A b) {
  return a < b;
}
template <class A>
bool le(A a, A b) {
  return a <= b;
}
template <class A>
bool gt(A a, A b) {
  return a > b;
}
template <class A>
bool ge(A a, A b) {
  return a >= b;
}
}  // namespace f

#define KILN_BINARY_KERNEL(Name, SWITCH, fn, Out)                         \
  void k_##Name(const ir::Op& op, void* const* in, void* const* out) {    \
    SWITCH(op.inputs[0].dtype, #Name, T, {                                \
      using A = acc_t<T>;                                                 \
      using O = std::conditional_t<std::is_same_v<Out, void>, T, Out>;    \
      apply2<O, T>(op, in, out, [](A a, A b) { return f::fn<A>(a, b); }); \
    });                                                                   \
  }

KILN_BINARY_KERNEL(Add, KILN_SWITCH_ALL, add, void)
KILN_BINARY_KERNEL(Sub, KILN_SWITCH_ALL, sub, void)
KILN_BINARY_KERNEL(Mul, KILN_SWITCH_ALL, mul, void)
KILN_BINARY_KERNEL(Div, KILN_SWITCH_FLOAT, div, void)
KILN_BINARY_KERNEL(FloorDiv, KILN_SWITCH_ALL, floordiv, void)
KILN_BINARY_KERNEL(TruncDiv, KILN_SWITCH_ALL, truncdiv, void)
KILN_BINARY_KERNEL(Remainder, KILN_SWITCH_ALL, remainder, void)
KILN_BINARY_KERNEL(Fmod, KILN_SWITCH_ALL, fmod, void)
KILN_BINARY_KERNEL(Pow, KILN_SWITCH_ALL, pow, void)
KILN_BINARY_KERNEL(Atan2, KILN_SWITCH_FLOAT, atan2, void)
KILN_BINARY_KERNEL(Maximum, KILN_SWITCH_ALL, maximum, void)
KILN_BINARY_KERNEL(Minimum, KILN_SWITCH_ALL, minimum, void)
KILN_BINARY_KERNEL(Fmax, KILN_SWITCH_ALL, fmax, void)
KILN_BINARY_KERNEL(Fmin, KILN_SWITCH_ALL, fmin, void)
KILN_BINARY_KERNEL(Hypot, KILN_SWITCH_FLOAT, hypot, void)
KILN_BINARY_KERNEL(LogAddExp, KILN_SWITCH_FLOAT, logaddexp, void)
KILN_BINARY_KERNEL(BitwiseAnd, KILN_SWITCH_INT_BOOL, band, void)
KILN_BINARY_KERNEL(BitwiseOr, KILN_SWITCH_INT_BOOL, bor, void)
KILN_BINARY_KERNEL(BitwiseXor, KILN_SWITCH_INT_BOOL, bxor, void)
KILN_BINARY_KERNEL(ShiftLeft, KILN_SWITCH_INT_BOOL, shl, void)
KILN_BINARY_KERNEL(ShiftRight, KILN_SWITCH_INT_BOOL, shr, void)
KILN_BINARY_KERNEL(LogicalAnd, KILN_SWITCH_ALL, land, bool)
KILN_BINARY_KERNEL(LogicalOr, KILN_SWITCH_ALL, lor, bool)
KILN_BINARY_KERNEL(LogicalXor, KILN_SWITCH_ALL, lxor, bool)
KILN_BINARY_KERNEL(Eq, KILN_SWITCH_ALL, eq, bool)
KILN_BINARY_KERNEL(Ne, KILN_SWITCH_ALL, ne, bool)
KILN_BINARY_KERNEL(Lt, KILN_SWITCH_ALL, lt, bool)
KILN_BINARY_KERNEL(Le, KILN_SWITCH_ALL, le, bool)
KILN_BINARY_KERNEL(Gt, KILN_SWITCH_ALL, gt, bool)
KILN_BINARY_KERNEL(Ge, KILN_SWITCH_ALL, ge, bool)
#undef KILN_BINARY_KERNEL

void k_Where(const ir::Op& op, void* const* in, void* const* out) {
  auto loop = ternary_loop(op, in, out);
  switch (dtype_size(op.outputs[0].dtype)) {
#define KILN_WHERE_CASE(S, U)                                                                                    \
  case S:                                                                                                        \
    loop.run([](const std::array<char*, 4>& p, const int64_t* st, int64_t n) {                                   \
      char* o = p[0];                                                                                            \
      const char *c = p[1], *a = p[2], *b = p[3];                                                                \
      for (int64_t k = 0; k < n; ++k, o += st[0], c += st[1], a += st[2], b += st[3])                            \
        *reinterpret_cast<U*>(o) =                                                                               \
            *reinterpret_cast<const bool*>(c) ? *reinterpret_cast<const U*>(a) : *reinterpret_cast<const U*>(b); \
    });                                                                                                          \
    break;
    KILN_WHERE_CASE(1, uint8_t)
    KILN_WHERE_CASE(2, uint16_t)
    KILN_WHERE_CASE(4, uint32_t)
    KILN_WHERE_CASE(8, uint64_t)
#undef KILN_WHERE_CASE
  }
}

void k_Lerp(const ir::Op& op, void* const* in, void* const* out) {
  auto loop = ternary_loop(op, in, out);
  KILN_SWITCH_FLOAT(op.outputs[0].dtype, "lerp", T, {
    using A = acc_t<T>;
    loop.run([](const std::array<char*, 4>& p, const int64_t* st, int64_t n) {
      char* o = p[0];
      const char *s = p[1], *e = p[2], *w = p[3];
      for (int64_t k = 0; k < n; ++k, o += st[0], s += st[1], e += st[2], w += st[3]) {
        A a = load<T>(s), b = load<T>(e), t = load<T>(w);
        // PyTorch's formula: exact at both ends.
        *reinterpret_cast<T*>(o) = static_cast<T>(std::abs(t) < A(0.5) ? a + t * (b - a) : b - (b - a) * (A(1) - t));
      }
    });
  });
}

}  // namespace kiln::cpu
