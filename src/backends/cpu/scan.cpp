// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: to be implemented.
#include "backends/cpu/kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

void k_CumSum(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "CumSum", "not implemented on the CPU yet"); }
void k_CumProd(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "CumProd", "not implemented on the CPU yet"); }
void k_CumMax(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "CumMax", "not implemented on the CPU yet"); }
void k_CumMin(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "CumMin", "not implemented on the CPU yet"); }
void k_Sort(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Sort", "not implemented on the CPU yet"); }
void k_Softmax(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Softmax", "not implemented on the CPU yet"); }
void k_LogSoftmax(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "LogSoftmax", "not implemented on the CPU yet"); }

}  // namespace kiln::cpu
