// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Dtype switches for CPU kernels: KILN_SWITCH_*(dtype, T, body) runs body with T bound to the
// C++ element type. Half types compute in float (acc_t).
#include <type_traits>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::cpu {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
/// The type arithmetic on T is done in.
template <class T>
using acc_t = std::conditional_t<is_half_v<T>, float, T>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;
/// x < 0, without the always-false comparison (and its warning) for unsigned types.
template <class A>
constexpr bool below_zero(A x) {
  if constexpr (std::is_unsigned_v<A>)
    return false;
  else
    return x < A(0);
}

}  // namespace kiln::cpu

#define KILN_CASE_(enumv, type, T, ...) \
  case ::kiln::DType::enumv: {          \
    using T = type;                     \
    __VA_ARGS__;                        \
    break;                              \
  }
#define KILN_BAD_DTYPE_(dt, what) \
  default:                        \
    KILN_CHECK(false, what, "unsupported dtype " << ::kiln::dtype_name(dt).data());

// The case lists, each type once; the switches below combine them.
#define KILN_FLOAT_CASES_(T, ...)               \
  KILN_CASE_(F32, float, T, __VA_ARGS__)        \
  KILN_CASE_(F64, double, T, __VA_ARGS__)       \
  KILN_CASE_(F16, ::kiln::Half, T, __VA_ARGS__) \
  KILN_CASE_(BF16, ::kiln::BFloat16, T, __VA_ARGS__)
#define KILN_INT_CASES_(T, ...)             \
  KILN_CASE_(U8, uint8_t, T, __VA_ARGS__)   \
  KILN_CASE_(U16, uint16_t, T, __VA_ARGS__) \
  KILN_CASE_(U32, uint32_t, T, __VA_ARGS__) \
  KILN_CASE_(U64, uint64_t, T, __VA_ARGS__) \
  KILN_CASE_(I8, int8_t, T, __VA_ARGS__)    \
  KILN_CASE_(I16, int16_t, T, __VA_ARGS__)  \
  KILN_CASE_(I32, int32_t, T, __VA_ARGS__)  \
  KILN_CASE_(I64, int64_t, T, __VA_ARGS__)

#define KILN_SWITCH_FLOAT(dt, what, T, ...) \
  switch (dt) {                             \
    KILN_FLOAT_CASES_(T, __VA_ARGS__)       \
    KILN_BAD_DTYPE_(dt, what)               \
  }
#define KILN_SWITCH_INT(dt, what, T, ...) \
  switch (dt) {                           \
    KILN_INT_CASES_(T, __VA_ARGS__)       \
    KILN_BAD_DTYPE_(dt, what)             \
  }
#define KILN_SWITCH_INT_BOOL(dt, what, T, ...) \
  switch (dt) {                                \
    KILN_CASE_(Bool, bool, T, __VA_ARGS__)     \
    KILN_INT_CASES_(T, __VA_ARGS__)            \
    KILN_BAD_DTYPE_(dt, what)                  \
  }
#define KILN_SWITCH_NUMERIC(dt, what, T, ...) \
  switch (dt) {                               \
    KILN_INT_CASES_(T, __VA_ARGS__)           \
    KILN_FLOAT_CASES_(T, __VA_ARGS__)         \
    KILN_BAD_DTYPE_(dt, what)                 \
  }
#define KILN_SWITCH_ALL(dt, what, T, ...)  \
  switch (dt) {                            \
    KILN_CASE_(Bool, bool, T, __VA_ARGS__) \
    KILN_INT_CASES_(T, __VA_ARGS__)        \
    KILN_FLOAT_CASES_(T, __VA_ARGS__)      \
    KILN_BAD_DTYPE_(dt, what)              \
  }
