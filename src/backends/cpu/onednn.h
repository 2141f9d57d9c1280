// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// oneDNN glue for the CPU kernels (builds with KILN_WITH_ONEDNN=1): one engine and stream,
// and a run-time switch so one binary can run, and tests can compare, both the oneDNN path
// and Kiln's portable kernels.
#include <cstdint>

namespace kiln::cpu::onednn {

/// True when built with oneDNN and the path is on: KILN_ONEDNN=0 in the environment or
/// set_enabled(false) selects the portable kernels.
bool enabled();
/// Switches the oneDNN path on or off (no effect in builds without oneDNN).
void set_enabled(bool on);

/// While alive, oneDNN's OpenMP regions use `threads` threads, by default kiln::num_threads()
/// (oneDNN reads omp_get_max_threads(), which kiln::set_num_threads does not change). No-op
/// inside a parallel region, where oneDNN runs single-threaded anyway.
class ThreadScope {
 public:
  explicit ThreadScope(int threads = 0);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_ = 0;
};

/// C = alpha * A B + beta * C through dnnl_sgemm, same contract as cpu::gemm_f32 (gemm.h).
/// Returns false (and does nothing) when oneDNN is unavailable or disabled, or when a layout
/// has no unit stride (each of A, B, C must be row- or column-major with leading dimension >=
/// its extent); the caller then uses gemm_f32.
bool sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
           int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);

}  // namespace kiln::cpu::onednn

#if KILN_WITH_ONEDNN
#include <dnnl.hpp>
#include <initializer_list>

namespace kiln::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& stream();

/// One argument of execute(): a DNNL_ARG_* id and its memory.
struct Arg {
  int id;
  const dnnl::memory* mem;
};
/// Runs `prim` on this thread's stream with up to 8 arguments, without the std::unordered_map
/// that dnnl::primitive::execute takes (building one costs about as much as a small reorder).
void execute(const dnnl::primitive& prim, std::initializer_list<Arg> args);
/// Runs the reorder `r` from `from` into `to` (execute with DNNL_ARG_FROM / DNNL_ARG_TO).
void reorder(const dnnl::primitive& r, const dnnl::memory& from, const dnnl::memory& to);

}  // namespace kiln::cpu::onednn
#endif
