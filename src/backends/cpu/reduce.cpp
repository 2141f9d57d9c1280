// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: to be implemented.
#include "backends/cpu/kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

void k_Sum(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Sum", "not implemented on the CPU yet"); }
void k_Prod(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Prod", "not implemented on the CPU yet"); }
void k_Mean(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Mean", "not implemented on the CPU yet"); }
void k_Max(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Max", "not implemented on the CPU yet"); }
void k_Min(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Min", "not implemented on the CPU yet"); }
void k_ArgMax(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "ArgMax", "not implemented on the CPU yet"); }
void k_ArgMin(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "ArgMin", "not implemented on the CPU yet"); }
void k_Any(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Any", "not implemented on the CPU yet"); }
void k_All(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "All", "not implemented on the CPU yet"); }
void k_Var(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Var", "not implemented on the CPU yet"); }

}  // namespace kiln::cpu
