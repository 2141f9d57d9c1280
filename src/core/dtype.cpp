// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/dtype.h"

#include <string>

#include "kiln/error.h"

namespace kiln {

std::string_view dtype_name(DType t) {
  constexpr std::string_view names[] = {"bool", "u8",  "i8",  "i16", "i32", "i64", "f16",
                                        "bf16", "f32", "f64", "u16", "u32", "u64"};
  if (is_valid_dtype(t)) return names[static_cast<unsigned>(t)];
  // An invalid value (a cast from an arbitrary integer) prints as "dtype(N)", never past the table.
  static constexpr auto make = [] {
    struct Table {
      char text[256][12] = {};
    } tab;
    for (int v = 0; v < 256; ++v) {
      char* p = tab.text[v];
      const char* pre = "dtype(";
      while (*pre) *p++ = *pre++;
      if (v >= 100) *p++ = static_cast<char>('0' + v / 100);
      if (v >= 10) *p++ = static_cast<char>('0' + v / 10 % 10);
      *p++ = static_cast<char>('0' + v % 10);
      *p = ')';
    }
    return tab;
  }();
  return std::string_view(make.text[static_cast<uint8_t>(t)]);
}

namespace detail {
void throw_invalid_dtype(DType t, const char* op) {
  throw_error(std::string("[") + op + "] invalid dtype value " + std::to_string(static_cast<unsigned>(t)) +
              " (valid dtypes are 0.." + std::to_string(kNumDTypes - 1) + ")");
}
}  // namespace detail

std::string to_string(DType t) { return std::string(dtype_name(t)); }

DType promote_types(DType a, DType b) {
  check_dtype(a, "promote_types");
  check_dtype(b, "promote_types");
  if (a == b) return a;
  // PyTorch's table: bool < ints < floats; u8 with a signed int widens to the next signed type;
  // f16 with bf16 gives f32. PyTorch refuses to promote u16/u32/u64 with any other type but a
  // float; Kiln extends its rule: an unsigned type with a narrower unsigned one or bool keeps
  // the wider, with a signed one widens to the next signed type that holds both, and u64 with a
  // signed type has no such type and is refused (X).
  constexpr DType B = DType::Bool, U = DType::U8, I8_ = DType::I8, I16_ = DType::I16, I32_ = DType::I32,
                  I64_ = DType::I64, H = DType::F16, BF = DType::BF16, F = DType::F32, D = DType::F64,
                  U16_ = DType::U16, U32_ = DType::U32, U64_ = DType::U64, X = static_cast<DType>(255);
  constexpr DType table[kNumDTypes][kNumDTypes] = {
      /*        b     u8    i8    i16   i32   i64   f16 bf16 f32 f64 u16   u32   u64 */
      /*b  */ {B, U, I8_, I16_, I32_, I64_, H, BF, F, D, U16_, U32_, U64_},
      /*u8 */ {U, U, I16_, I16_, I32_, I64_, H, BF, F, D, U16_, U32_, U64_},
      /*i8 */ {I8_, I16_, I8_, I16_, I32_, I64_, H, BF, F, D, I32_, I64_, X},
      /*i16*/ {I16_, I16_, I16_, I16_, I32_, I64_, H, BF, F, D, I32_, I64_, X},
      /*i32*/ {I32_, I32_, I32_, I32_, I32_, I64_, H, BF, F, D, I32_, I64_, X},
      /*i64*/ {I64_, I64_, I64_, I64_, I64_, I64_, H, BF, F, D, I64_, I64_, X},
      /*f16*/ {H, H, H, H, H, H, H, F, F, D, H, H, H},
      /*bf16*/ {BF, BF, BF, BF, BF, BF, F, BF, F, D, BF, BF, BF},
      /*f32*/ {F, F, F, F, F, F, F, F, F, D, F, F, F},
      /*f64*/ {D, D, D, D, D, D, D, D, D, D, D, D, D},
      /*u16*/ {U16_, U16_, I32_, I32_, I32_, I64_, H, BF, F, D, U16_, U32_, U64_},
      /*u32*/ {U32_, U32_, I64_, I64_, I64_, I64_, H, BF, F, D, U32_, U32_, U64_},
      /*u64*/ {U64_, U64_, X, X, X, X, H, BF, F, D, U64_, U64_, U64_},
  };
  const DType r = table[static_cast<int>(a)][static_cast<int>(b)];
  if (r == X)
    detail::throw_error(std::string("[promote_types] no integer dtype holds both ") + std::string(dtype_name(a)) +
                        " and " + std::string(dtype_name(b)) +
                        ": cast one of them explicitly (for example to i64 or f64)");
  return r;
}

}  // namespace kiln
