// SPDX-License-Identifier: MIT OR Apache-2.0
// Binary and ternary elementwise kernels (inputs share one dtype; the frontend promotes).
#include <atomic>
#include <cmath>
#include <vector>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/math.h"
#include "backends/cpu/vec.h"
#include "core/machine.h"

namespace kiln::cpu {

namespace {

/// Copies an rn x cn tile of U elements, src walked with byte strides (s0 rows, s1 columns),
/// into the contiguous row-major dst; the inner loop runs along rows (the dense direction).
template <class U>
void gather_tile(char* dst, const char* src, int64_t s0, int64_t s1, int64_t rn, int64_t cn) {
  U* d = reinterpret_cast<U*>(dst);
  int64_t j0 = 0;
#if defined(__SSE2__)
  if constexpr (sizeof(U) == 4) {
    if (s0 == 4) {  // rows dense: 4x4 blocks through an SSE transpose
      const int64_t r4 = rn & ~int64_t{3};
      for (; j0 + 4 <= cn; j0 += 4) {
        const char* q = src + j0 * s1;
        for (int64_t i = 0; i < r4; i += 4) {
          __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(q + i * 4));
          __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(q + s1 + i * 4));
          __m128 c = _mm_loadu_ps(reinterpret_cast<const float*>(q + 2 * s1 + i * 4));
          __m128 e = _mm_loadu_ps(reinterpret_cast<const float*>(q + 3 * s1 + i * 4));
          _MM_TRANSPOSE4_PS(a, b, c, e);
          float* o = reinterpret_cast<float*>(d) + i * cn + j0;
          _mm_storeu_ps(o, a);
          _mm_storeu_ps(o + cn, b);
          _mm_storeu_ps(o + 2 * cn, c);
          _mm_storeu_ps(o + 3 * cn, e);
        }
        for (int64_t j = j0; j < j0 + 4; ++j)
          for (int64_t i = r4; i < rn; ++i) d[i * cn + j] = *reinterpret_cast<const U*>(src + j * s1 + i * s0);
      }
    }
  }
#endif
  for (int64_t j = j0; j < cn; ++j) {
    const char* q = src + j * s1;
    for (int64_t i = 0; i < rn; ++i) d[i * cn + j] = *reinterpret_cast<const U*>(q + i * s0);
  }
}
template <class U>
void scatter_tile(char* dst, const char* src, int64_t s0, int64_t s1, int64_t rn, int64_t cn) {
  const U* sp = reinterpret_cast<const U*>(src);
  for (int64_t j = 0; j < cn; ++j) {
    char* q = dst + j * s1;
    for (int64_t i = 0; i < rn; ++i) *reinterpret_cast<U*>(q + i * s0) = sp[i * cn + j];
  }
}
void copy_tile(bool gather, int es, char* buf, char* mem, int64_t s0, int64_t s1, int64_t rn, int64_t cn) {
  switch (es) {
#define KILN_TILE_CASE(S, U)                     \
  case S:                                        \
    if (gather)                                  \
      gather_tile<U>(buf, mem, s0, s1, rn, cn);  \
    else                                         \
      scatter_tile<U>(mem, buf, s0, s1, rn, cn); \
    break;
    KILN_TILE_CASE(1, uint8_t)
    KILN_TILE_CASE(2, uint16_t)
    KILN_TILE_CASE(4, uint32_t)
    KILN_TILE_CASE(8, uint64_t)
#undef KILN_TILE_CASE
  }
}

/// A 2-D loop where some operand is a transposed view (dense along the outer loop dim, strided
/// along the inner one) walks that operand across cache lines element by element. Runs the
/// loop tile by tile instead, copying such operands through small contiguous per-tile buffers
/// (inputs gathered before fn, the output scattered after), so fn sees contiguous rows and
/// takes its vectorised path. Elementwise, so results are identical to the plain loop.
/// esz: element size in bytes per operand (operand 0 is the output). Returns false, doing
/// nothing, when the layout is not of that kind or the loop is small.
template <int N, class F>
bool run_transposed_tiles(const StridedLoop<N>& L, const std::array<int, N>& esz, const F& fn) {
  if (L.ndim != 2 || L.numel < 4096) return false;
  std::array<bool, N> tr{};
  bool any = false;
  for (int k = 0; k < N; ++k) {
    tr[k] = L.strides[k][1] != esz[k] && L.strides[k][1] != 0 && L.strides[k][0] == esz[k];
    any |= tr[k];
  }
  if (!any) return false;
  constexpr int64_t TR = 32, TC = 64;
  const int64_t R = L.shape[0], C = L.shape[1];
  const int64_t ntiles = (R + TR - 1) / TR;
  parallel_for(ntiles, std::max<int64_t>(1, kGrain / (TR * C)), [&](int64_t tb, int64_t te) {
    std::vector<char> storage(static_cast<size_t>(N * TR * TC * 8));
    for (int64_t t = tb; t < te; ++t) {
      const int64_t r0 = t * TR, rn = std::min(TR, R - r0);
      for (int64_t c0 = 0; c0 < C; c0 += TC) {
        const int64_t cn = std::min(TC, C - c0);
        std::array<char*, N> tile;
        std::array<int64_t, N> st;
        for (int k = 0; k < N; ++k) {
          tile[k] = L.base[k] + r0 * L.strides[k][0] + c0 * L.strides[k][1];
          st[k] = tr[k] ? esz[k] : L.strides[k][1];
          if (tr[k] && k > 0)
            copy_tile(true, esz[k], storage.data() + k * TR * TC * 8, tile[k], L.strides[k][0], L.strides[k][1], rn,
                      cn);
        }
        for (int64_t i = 0; i < rn; ++i) {
          std::array<char*, N> p;
          for (int k = 0; k < N; ++k)
            p[k] = tr[k] ? storage.data() + k * TR * TC * 8 + i * cn * esz[k] : tile[k] + i * L.strides[k][0];
          fn(p, st.data(), cn);
        }
        if (tr[0]) copy_tile(false, esz[0], storage.data(), tile[0], L.strides[0][0], L.strides[0][1], rn, cn);
      }
    }
  });
  return true;
}

template <class To, class T, class F>
void apply2(const ir::Op& op, void* const* in, void* const* out, const F& f) {
  auto loop = binary_loop(op, in, out);
  const bool stream = stream_stores(op.outputs[0].numel() * static_cast<int64_t>(sizeof(To)));
  auto row = [&](const std::array<char*, 3>& p, const int64_t* st, int64_t n) {
    if constexpr (std::is_same_v<To, float> && std::is_same_v<T, float>) {
      if (st[0] == 4 && (st[1] == 4 || st[1] == 0) && (st[2] == 4 || st[2] == 0) &&
          vec::binary_f32(op.kind, reinterpret_cast<const float*>(p[1]), st[1] / 4,
                          reinterpret_cast<const float*>(p[2]), st[2] / 4, reinterpret_cast<float*>(p[0]), n, stream))
        return;
    }
    using A = acc_t<T>;
    if (st[0] == sizeof(To)) {
      To* o = reinterpret_cast<To*>(p[0]);
      const T* a = reinterpret_cast<const T*>(p[1]);
      const T* b = reinterpret_cast<const T*>(p[2]);
      if (st[1] == sizeof(T) && st[2] == sizeof(T)) {
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<To>(f(static_cast<A>(a[k]), static_cast<A>(b[k])));
        return;
      }
      if (st[1] == sizeof(T) && st[2] == 0) {  // tensor op scalar (e.g. x > 0)
        const A bv = static_cast<A>(*b);
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<To>(f(static_cast<A>(a[k]), bv));
        return;
      }
      if (st[1] == 0 && st[2] == sizeof(T)) {
        const A av = static_cast<A>(*a);
        for (int64_t k = 0; k < n; ++k) o[k] = static_cast<To>(f(av, static_cast<A>(b[k])));
        return;
      }
    }
    char* o = p[0];
    const char* a = p[1];
    const char* b = p[2];
    for (int64_t k = 0; k < n; ++k, o += st[0], a += st[1], b += st[2])
      *reinterpret_cast<To*>(o) = static_cast<To>(
          f(static_cast<A>(*reinterpret_cast<const T*>(a)), static_cast<A>(*reinterpret_cast<const T*>(b))));
  };
  if (run_transposed_tiles<3>(loop, {int(sizeof(To)), int(sizeof(T)), int(sizeof(T))}, row)) return;
  if constexpr (std::is_same_v<To, float> && std::is_same_v<T, float>) {
    // Rows of a 2-d loop in one call per block of rows (a per-channel operand over small planes:
    // a batch norm's scale on [N, C, 8, 8] is N * C rows of 64).
    const auto& s = loop.strides;
    const bool arith = op.kind == ir::OpKind::Add || op.kind == ir::OpKind::Sub || op.kind == ir::OpKind::Mul ||
                       op.kind == ir::OpKind::Div;
    if (arith && loop.ndim == 2 && s[0][1] == 4 && (s[1][1] == 4 || s[1][1] == 0) && (s[2][1] == 4 || s[2][1] == 0) &&
        s[0][0] % 4 == 0 && s[1][0] % 4 == 0 && s[2][0] % 4 == 0) {
      const int64_t rows = loop.shape[0], n = loop.shape[1];
      bool ok = true;
      parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
        if (!vec::binary_rows_f32(op.kind, reinterpret_cast<const float*>(loop.base[1] + r0 * s[1][0]), s[1][1] / 4,
                                  s[1][0] / 4, reinterpret_cast<const float*>(loop.base[2] + r0 * s[2][0]), s[2][1] / 4,
                                  s[2][0] / 4, reinterpret_cast<float*>(loop.base[0] + r0 * s[0][0]), s[0][0] / 4,
                                  r1 - r0, n, stream))
          ok = false;
      });
      if (ok) return;
    }
  }
  loop.run(row);
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
// Integer division and remainder: a zero divisor gives 0 here and the kernel raises (see
// KILN_INT_DIV_KERNEL); INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0 (two's complement;
// the hardware instruction would trap).
template <class A>
A truncdiv(A a, A b) {
  if constexpr (is_int_v<A>) {
    if constexpr (std::is_signed_v<A>)
      if (b == A(-1)) return math::wrap_neg(a);
    return b == 0 ? A(0) : A(a / b);
  } else if constexpr (std::is_same_v<A, bool>)
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
  if constexpr (is_int_v<A>) {
    if constexpr (std::is_signed_v<A>)
      if (b == A(-1)) return A(0);
    return b == 0 ? A(0) : A(a % b);
  } else if constexpr (std::is_same_v<A, bool>)
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
// Integer division and remainder raise kiln::Error("[api] ...") when a divisor is 0 (PyTorch's
// ZeroDivisionError): each element that divides by 0 raises a flag (the loop may run in
// parallel, so nothing is thrown inside it) and the kernel throws once the loop is done. The
// output then holds 0 there, but the error reaches the caller before it can be read.
#define KILN_INT_DIV_KERNEL(Name, fn, api)                                                                    \
  void k_##Name(const ir::Op& op, void* const* in, void* const* out) {                                        \
    std::atomic<bool> zero{false};                                                                            \
    KILN_SWITCH_ALL(op.inputs[0].dtype, #Name, T, {                                                           \
      using A = acc_t<T>;                                                                                     \
      if constexpr (is_int_v<A>) {                                                                            \
        apply2<T, T>(op, in, out, [&zero](A a, A b) {                                                         \
          if (b == A(0)) [[unlikely]] {                                                                       \
            zero.store(true, std::memory_order_relaxed);                                                      \
            return A(0);                                                                                      \
          }                                                                                                   \
          return f::fn<A>(a, b);                                                                              \
        });                                                                                                   \
      } else {                                                                                                \
        apply2<T, T>(op, in, out, [](A a, A b) { return f::fn<A>(a, b); });                                   \
      }                                                                                                       \
    });                                                                                                       \
    KILN_CHECK(!zero.load(), api,                                                                             \
               "integer division by zero (" << dtype_name(op.inputs[0].dtype).data() << " divisor holds 0)"); \
  }

KILN_INT_DIV_KERNEL(FloorDiv, floordiv, "div")
KILN_INT_DIV_KERNEL(TruncDiv, truncdiv, "div")
KILN_INT_DIV_KERNEL(Remainder, remainder, "remainder")
KILN_INT_DIV_KERNEL(Fmod, fmod, "fmod")
#undef KILN_INT_DIV_KERNEL
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

/// Rows of where(c, a, b) over U-sized elements: a bit select (identical to the ternary) in
/// the contiguous and broadcast-scalar cases, which vectorises; a plain strided loop otherwise.
template <class U>
void where_row(const std::array<char*, 4>& p, const int64_t* st, int64_t n) {
  constexpr int64_t S = sizeof(U);
  if (st[0] == S && st[1] == 1 && (st[2] == S || st[2] == 0) && (st[3] == S || st[3] == 0)) {
    U* o = reinterpret_cast<U*>(p[0]);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(p[1]);
    const U* a = reinterpret_cast<const U*>(p[2]);
    const U* b = reinterpret_cast<const U*>(p[3]);
    const int64_t sa = st[2] / S, sb = st[3] / S;
    if (sa == 1 && sb == 0) {
      const U bv = *b;
      for (int64_t k = 0; k < n; ++k) {
        const U m = static_cast<U>(U(0) - static_cast<U>(c[k] != 0));
        o[k] = static_cast<U>((a[k] & m) | (bv & static_cast<U>(~m)));
      }
    } else if (sa == 0 && sb == 1) {
      const U av = *a;
      for (int64_t k = 0; k < n; ++k) {
        const U m = static_cast<U>(U(0) - static_cast<U>(c[k] != 0));
        o[k] = static_cast<U>((av & m) | (b[k] & static_cast<U>(~m)));
      }
    } else {
      for (int64_t k = 0; k < n; ++k) {
        const U m = static_cast<U>(U(0) - static_cast<U>(c[k] != 0));
        o[k] = static_cast<U>((a[k * sa] & m) | (b[k * sb] & static_cast<U>(~m)));
      }
    }
    return;
  }
  char* o = p[0];
  const char *c = p[1], *a = p[2], *b = p[3];
  for (int64_t k = 0; k < n; ++k, o += st[0], c += st[1], a += st[2], b += st[3])
    *reinterpret_cast<U*>(o) =
        *reinterpret_cast<const bool*>(c) ? *reinterpret_cast<const U*>(a) : *reinterpret_cast<const U*>(b);
}

void k_Where(const ir::Op& op, void* const* in, void* const* out) {
  auto loop = ternary_loop(op, in, out);
  const int es = static_cast<int>(dtype_size(op.outputs[0].dtype));
  const std::array<int, 4> esz{es, 1, es, es};
  switch (es) {
#define KILN_WHERE_CASE(S, U)                                                      \
  case S:                                                                          \
    if (!run_transposed_tiles<4>(loop, esz, where_row<U>)) loop.run(where_row<U>); \
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
