// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the contraction family (ops.def documents the attributes).
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

void infer_contract(Op& op) {
  const char* name = op_name(op.kind).data();
  KILN_CHECK(op.inputs.size() == 2 || op.inputs.size() == 3, name, "expects 2 or 3 inputs");
  const TensorDesc &a = op.inputs[0], &b = op.inputs[1];
  KILN_CHECK(a.shape.size() == 3 && b.shape.size() == 3, name,
             "expects rank-3 operands [B, M, K] and [B, K, N], got " << a.shape << " and " << b.shape);
  KILN_CHECK(a.shape[0] == b.shape[0] && a.shape[2] == b.shape[1], name,
             "shapes " << a.shape << " and " << b.shape << " cannot be multiplied");
  KILN_CHECK(
      a.dtype == b.dtype, name,
      "operands must share a dtype, got " << dtype_name(a.dtype).data() << " and " << dtype_name(b.dtype).data());
  if (op.inputs.size() == 3) {
    const TensorDesc& bias = op.inputs[2];
    KILN_CHECK(bias.shape.size() == 1 && bias.shape[0] == b.shape[2], name,
               "bias must be [" << b.shape[2] << "] for the product of " << a.shape << " and " << b.shape << ", got "
                                << bias.shape);
    KILN_CHECK(bias.dtype == a.dtype && (a.dtype == DType::F32 || a.dtype == DType::F64), name,
               "bias must be f32 or f64 and share the operands' dtype, got " << dtype_name(bias.dtype).data() << " and "
                                                                             << dtype_name(a.dtype).data());
  }
  op.outputs = {contiguous_desc(Shape{a.shape[0], a.shape[1], b.shape[2]}, a.dtype)};
}

}  // namespace kiln::ir
