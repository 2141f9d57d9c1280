// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Shared pieces of the kiln_bench executable (kiln_bench.cpp and the kiln_bench_*.cpp blocks
// linked into it): options, timing, the output line format and the per-block entry points.
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

namespace bench {

/// Command-line options of kiln_bench.
struct Options {
  int threads = 1;     ///< intra-op threads (Kiln, OpenMP), pinned like PyTorch's
  bool smoke = false;  ///< tiny sizes, one call, no warm-up (the ctest bench_smoke)
  int reps = 10;       ///< best of `reps` calls
};

/// Best time of `reps` calls of f after `warmup` calls, in seconds.
double best_of(const std::function<void()>& f, int reps, int warmup = 2);

/// Prints one result line: `id \t seconds \t bytes \t status` (bytes: bytes moved, flops or
/// another count, as the id's block documents).
void emit(const std::string& id, double seconds, double bytes, const std::string& status = "ok");

/// Prints `id` as skipped with the exception's message (tabs and newlines blanked).
void emit_skip(const std::string& id, const std::exception& e, double bytes = 0);

/// True when BENCH_ONLY is unset or `id` starts with it.
bool selected(const std::string& id);

/// Runs one Kiln case (best of o.reps samples of `inner` calls, device synced per sample) and
/// emits seconds per call; an exception is reported as skipped.
void kiln_case(const std::string& id, double bytes, const Options& o, const std::function<void()>& f, int inner = 1);

/// Register-blocked f32 FMA loop on o.threads threads (AVX-512, else AVX2+FMA, else SSE
/// mul+add): emits calib/fma_peak (bytes field = flops per call) and returns GFLOP/s.
double fma_peak(const Options& o);

/// kiln_bench_ops.cpp: erf-GELU composite, reductions over the middle axis, attention, conv2d
/// through autodiff, per-op overhead with autodiff.
void run_ops_block(const Options& o);

/// kiln_bench_train.cpp: Fashion-MNIST loading, MLP and CNN training steps, batch-1 inference.
void run_train_block(const Options& o);

/// kiln_bench_train.cpp: `--memory <mlp|cnn> <steps>` in a fresh process: peak RSS growth and
/// allocator peak of the first training steps, and in-use / RSS after step 10 vs the last step.
int run_memory_mode(const std::string& model, int steps, const Options& o);

/// kiln_bench_callgrind.cpp: `--callgrind-overhead <op> [iters]`: runs one overhead op `iters`
/// times with callgrind instrumentation on only around the loop (when <valgrind/callgrind.h>
/// exists). Ops: add, exp, sum, add_ad, exp_ad, sum_ad.
int run_callgrind_overhead(const std::string& op, int iters);

}  // namespace bench
