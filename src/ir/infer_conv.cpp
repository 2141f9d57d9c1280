// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the conv family (ops.def documents the attributes).
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

void infer_conv(Op& op) { KILN_CHECK(false, op_name(op.kind).data(), "not implemented yet"); }

}  // namespace kiln::ir
