// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// oneDNN glue for the CPU kernels (builds with KILN_WITH_ONEDNN=1): one engine and stream,
// and a run-time switch so one binary can run, and tests can compare, both the oneDNN path
// and Kiln's portable kernels.
namespace kiln::cpu::onednn {

/// True when built with oneDNN and the path is on: KILN_ONEDNN=0 in the environment or
/// set_enabled(false) selects the portable kernels.
bool enabled();
/// Switches the oneDNN path on or off (no effect in builds without oneDNN).
void set_enabled(bool on);

}  // namespace kiln::cpu::onednn

#if KILN_WITH_ONEDNN
#include <dnnl.hpp>

namespace kiln::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& stream();

}  // namespace kiln::cpu::onednn
#endif
