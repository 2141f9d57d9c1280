// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: to be implemented.
#include "backends/cpu/kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

void k_Cat(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Cat", "not implemented on the CPU yet"); }
void k_Pad(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Pad", "not implemented on the CPU yet"); }

}  // namespace kiln::cpu
