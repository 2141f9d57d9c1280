// SPDX-License-Identifier: MIT OR Apache-2.0
// The checks every launcher runs on a launch's arguments before touching memory.
#pragma once
#include <vector>

#include "kernel/ir.h"
#include "kiln/kernel.h"

namespace kiln::kernel::detail {

/// Throws kiln::Error naming the kernel unless `args` are k's buffers then scalars, in order and
/// of their types, no buffer with elements is null, and each of `groups` lies in 0 .. 2^31 - 1
/// (`max_yz` lower for y and z where the device limits them).
void check_launch(const ir::Kernel& k, Dim3 groups, const std::vector<Arg>& args, int64_t max_yz = INT32_MAX);

}  // namespace kiln::kernel::detail
