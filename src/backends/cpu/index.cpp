// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: to be implemented.
#include "backends/cpu/kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

void k_IndexSelect(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "IndexSelect", "not implemented on the CPU yet"); }
void k_Gather(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Gather", "not implemented on the CPU yet"); }
void k_Scatter(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "Scatter", "not implemented on the CPU yet"); }
void k_IndexAdd(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "IndexAdd", "not implemented on the CPU yet"); }
void k_IndexCopy(const ir::Op&, void* const*, void* const*) { KILN_CHECK(false, "IndexCopy", "not implemented on the CPU yet"); }

}  // namespace kiln::cpu
