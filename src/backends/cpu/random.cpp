// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: to be implemented.
#include "backends/cpu/kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

void k_RandUniform(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "RandUniform", "not implemented on the CPU yet"); }
void k_RandNormal(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "RandNormal", "not implemented on the CPU yet"); }
void k_RandInt(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "RandInt", "not implemented on the CPU yet"); }
void k_Bernoulli(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Bernoulli", "not implemented on the CPU yet"); }

}  // namespace kiln::cpu
