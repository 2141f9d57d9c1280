// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/dtype.h"

#include <string>

namespace kiln {

std::string_view dtype_name(DType t) {
  constexpr std::string_view names[] = {"bool", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"};
  return names[static_cast<int>(t)];
}

std::string to_string(DType t) { return std::string(dtype_name(t)); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // PyTorch's table: bool < ints < floats; u8 with a signed int widens to the next signed type;
  // f16 with bf16 gives f32.
  constexpr DType B = DType::Bool, U = DType::U8, I8_ = DType::I8, I16_ = DType::I16, I32_ = DType::I32,
                  I64_ = DType::I64, H = DType::F16, BF = DType::BF16, F = DType::F32, D = DType::F64;
  constexpr DType table[kNumDTypes][kNumDTypes] = {
      /*        b    u8   i8    i16   i32   i64   f16 bf16 f32 f64 */
      /*b  */ {B, U, I8_, I16_, I32_, I64_, H, BF, F, D},
      /*u8 */ {U, U, I16_, I16_, I32_, I64_, H, BF, F, D},
      /*i8 */ {I8_, I16_, I8_, I16_, I32_, I64_, H, BF, F, D},
      /*i16*/ {I16_, I16_, I16_, I16_, I32_, I64_, H, BF, F, D},
      /*i32*/ {I32_, I32_, I32_, I32_, I32_, I64_, H, BF, F, D},
      /*i64*/ {I64_, I64_, I64_, I64_, I64_, I64_, H, BF, F, D},
      /*f16*/ {H, H, H, H, H, H, H, F, F, D},
      /*bf16*/ {BF, BF, BF, BF, BF, BF, F, BF, F, D},
      /*f32*/ {F, F, F, F, F, F, F, F, F, D},
      /*f64*/ {D, D, D, D, D, D, D, D, D, D},
  };
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

}  // namespace kiln
