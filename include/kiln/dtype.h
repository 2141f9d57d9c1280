// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/half.h"

namespace kiln {

/// Element types. The first ten are in the order of PyTorch's promotion lattice within each
/// category; the wider unsigned types come last so that the codes of the others (stored in IR,
/// reference data and caches) stay what they were.
enum class DType : uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64, U16, U32, U64 };
inline constexpr int kNumDTypes = 13;

inline constexpr DType bool_ = DType::Bool;
inline constexpr DType u8 = DType::U8;
inline constexpr DType u16 = DType::U16;
inline constexpr DType u32 = DType::U32;
inline constexpr DType u64 = DType::U64;
inline constexpr DType i8 = DType::I8;
inline constexpr DType i16 = DType::I16;
inline constexpr DType i32 = DType::I32;
inline constexpr DType i64 = DType::I64;
inline constexpr DType f16 = DType::F16;
inline constexpr DType bf16 = DType::BF16;
inline constexpr DType f32 = DType::F32;
inline constexpr DType f64 = DType::F64;

/// True when t is one of the enumerators above (a DType cast from an arbitrary integer may not be).
constexpr bool is_valid_dtype(DType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kNumDTypes); }
namespace detail {
/// Throws kiln::Error("[op] invalid dtype value N"); defined in src/core/dtype.cpp.
[[noreturn]] void throw_invalid_dtype(DType t, const char* op);
}  // namespace detail
/// Throws kiln::Error("[op] invalid dtype value N") unless t is a valid DType.
inline void check_dtype(DType t, const char* op) {
  if (!is_valid_dtype(t)) [[unlikely]]
    detail::throw_invalid_dtype(t, op);
}
/// Size of one element in bytes; throws kiln::Error for a DType outside the enumerators.
constexpr size_t dtype_size(DType t) {
  constexpr size_t s[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 2, 4, 8};
  if (!is_valid_dtype(t)) [[unlikely]]
    detail::throw_invalid_dtype(t, "dtype_size");
  return s[static_cast<unsigned>(t)];
}
constexpr bool is_floating(DType t) { return t >= DType::F16 && t <= DType::F64; }
/// u16, u32, u64: the unsigned types wider than a byte (PyTorch's "limited support" types).
constexpr bool is_wide_unsigned(DType t) { return t >= DType::U16 && t <= DType::U64; }
/// True when promote_types(a, b) throws: u64 with a signed integer type (no type holds both).
constexpr bool promotion_refused(DType a, DType b) {
  auto signed_int = [](DType t) { return t >= DType::I8 && t <= DType::I64; };
  return (a == DType::U64 && signed_int(b)) || (b == DType::U64 && signed_int(a));
}
constexpr bool is_integral(DType t, bool include_bool = false) {
  return (t >= DType::U8 && t <= DType::I64) || is_wide_unsigned(t) || (include_bool && t == DType::Bool);
}
constexpr bool is_signed(DType t) { return t != DType::Bool && t != DType::U8 && !is_wide_unsigned(t); }
/// "f32", "i64", ... as used in error messages and printing ("dtype(N)" for an invalid value).
std::string_view dtype_name(DType t);
std::string to_string(DType t);
/// Result type of a binary op between tensors of types a and b (PyTorch's promote_types).
DType promote_types(DType a, DType b);
/// The default floating dtype (f32), used for integer inputs of float-only ops.
inline constexpr DType kDefaultFloat = DType::F32;

/// Maps a C++ element type to its DType.
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::U8;
};
template <>
struct dtype_of<uint16_t> {
  static constexpr DType value = DType::U16;
};
template <>
struct dtype_of<uint32_t> {
  static constexpr DType value = DType::U32;
};
template <>
struct dtype_of<uint64_t> {
  static constexpr DType value = DType::U64;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = DType::I8;
};
template <>
struct dtype_of<int16_t> {
  static constexpr DType value = DType::I16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::F16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::BF16;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace kiln
