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

/// The kernel of each op, indexed by ir::OpKind (the order of ops.def): the CPU backend's
/// dispatch, and the fusion decorator's when it runs CPU kernels itself.
inline constexpr Kernel kKernels[] = {
#define KILN_OP(name, family, nin, nout) &k_##name,
#include "ir/ops.def"
#undef KILN_OP
};
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == ir::kNumOps, "every op in ops.def needs a CPU kernel");

}  // namespace kiln::cpu
