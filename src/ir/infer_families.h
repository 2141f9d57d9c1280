// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Shape and dtype inference of the compute-heavy families, one file each
// (src/ir/infer_<family>.cpp). infer() in infer.cpp dispatches here. Each sets op.outputs from
// op.inputs and op.attrs, or throws kiln::Error naming the op and the shapes.
#include "ir/op.h"

namespace kiln::ir {

void infer_contract(Op& op);
void infer_conv(Op& op);
void infer_pool(Op& op);
void infer_norm(Op& op);
void infer_linalg(Op& op);
void infer_fft(Op& op);

}  // namespace kiln::ir
