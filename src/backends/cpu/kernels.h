// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// One CPU kernel per primitive in ops.def, defined in the family files of this folder. A
// kernel reads op.inputs / op.outputs descriptors and the raw buffers in[i] / out[i] (the
// descriptor offsets still apply: use base_ptr).
#include "ir/op.h"

namespace kiln::cpu {

using Kernel = void (*)(const ir::Op& op, void* const* in, void* const* out);

#define KILN_OP(name, family, nin, nout) void k_##name(const ir::Op& op, void* const* in, void* const* out);
#include "ir/ops.def"
#undef KILN_OP

}  // namespace kiln::cpu
