// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The fusion decorator (Device::fusion()): records the op stream of a device lazily and runs
// chains of elementwise ops (with an optional trailing row reduction / softmax / norm) as one
// tiled kernel. See Note [Fusion design] in fusion.cpp and docs/fusion.md.
#include <cstdint>
#include <string>

#include "core/backend.h"

namespace kiln::fusion {

/// The fusion decorator over `inner` (one per inner backend, never destroyed).
Backend* fusion_backend(Backend* inner);
/// Whether `b` is a fusion decorator.
bool is_fusion(const Backend* b);

/// Whether fusion records lazily (KILN_FUSION=0 turns it off: the decorator passes every op
/// through). set_enabled flushes pending work first; for tests and benchmarks.
bool enabled();
void set_enabled(bool on);

/// Whether fused groups whose steps all have a vector form run as one elementwise program per
/// tile (default; KILN_FUSION_PROGRAM=0 turns it off) or op by op per tile, each op's row
/// kernel in turn. Both give the same bits; for tests and measurements.
bool program_enabled();
void set_program_enabled(bool on);

/// Ops whose every result has at most this many elements run at once, not queued, when no
/// queued op names their buffers: fusing them saves no memory traffic, and recording and
/// launching cost more than running them (docs/fusion.md, "Small tensors"). Default 4096;
/// KILN_FUSION_SMALL sets it, 0 queues every op. set_small_limit flushes pending work first.
int64_t small_limit();
void set_small_limit(int64_t elements);

/// Elementwise programs over at least this many elements run as compiled kernels
/// (cpu::vec::compiled_program: values stay in registers across the ops) once their kernel is
/// built; smaller ones, and all until then, run in the interpreter. Same bits either way.
/// Default 16384; KILN_FUSION_JIT_MIN sets it; KILN_FUSION_JIT=0 turns compiling off.
int64_t jit_min_elements();
void set_jit_min_elements(int64_t elements);

/// Counters over all fusion decorators since the last reset.
struct Stats {
  int64_t recorded = 0;         ///< ops queued lazily
  int64_t eager = 0;            ///< ops that could not be queued (flush, then run directly)
  int64_t dead = 0;             ///< queued ops never computed (no reader, no live tensor)
  int64_t fused_groups = 0;     ///< fused kernels launched (two or more ops each)
  int64_t program_groups = 0;   ///< of those, run as one elementwise program (cpu::vec::run_program)
  int64_t post_steps = 0;       ///< scalar +, -, *, / run inside the op before them (PInstr::Post)
  int64_t compiled_groups = 0;  ///< program groups run by a compiled kernel (jit_min_elements)
  int64_t fused_ops = 0;        ///< ops run inside fused kernels
  int64_t single_ops = 0;       ///< queued ops run alone
  int64_t flushes = 0;
  int64_t plans_built = 0;           ///< plan cache misses
  int64_t plan_hits = 0;             ///< plan cache hits
  int64_t intermediates_elided = 0;  ///< buffers produced and consumed inside a fused kernel
  int64_t epilogues = 0;             ///< convolutions with their activation, products with their epilogue
  int64_t conv_epilogue_ops = 0;     ///< ops run inside convolutions (scale, shift, residual Add, Relu)
  int64_t small_direct = 0;          ///< small ops run at once (small_limit)
  int64_t row_pipelines = 0;         ///< row ops run per block of rows with the groups reading them
  int64_t pipeline_column_sums = 0;  ///< of their stages, Sums / Means over the rows (leaves per block)
  int64_t long_reductions = 0;       ///< groups ended by a full Sum / Mean longer than a tile (leaves per tile)
};
Stats stats();
void reset_stats();

}  // namespace kiln::fusion
