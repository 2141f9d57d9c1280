// SPDX-License-Identifier: MIT OR Apache-2.0
// Kernels of this family (ops.def documents the attributes). Placeholder: not implemented yet.
#include "backends/cpu/kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

void k_MaxPool(const ir::Op& op, void* const*, void* const*) {
  KILN_CHECK(false, ir::op_name(op.kind).data(), "not implemented yet");
}
void k_AvgPool(const ir::Op& op, void* const*, void* const*) {
  KILN_CHECK(false, ir::op_name(op.kind).data(), "not implemented yet");
}
void k_AdaptiveAvgPool(const ir::Op& op, void* const*, void* const*) {
  KILN_CHECK(false, ir::op_name(op.kind).data(), "not implemented yet");
}
void k_AdaptiveMaxPool(const ir::Op& op, void* const*, void* const*) {
  KILN_CHECK(false, ir::op_name(op.kind).data(), "not implemented yet");
}
void k_MaxUnpool(const ir::Op& op, void* const*, void* const*) {
  KILN_CHECK(false, ir::op_name(op.kind).data(), "not implemented yet");
}

}  // namespace kiln::cpu
