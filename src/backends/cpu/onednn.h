// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// oneDNN glue for the CPU kernels (builds with KILN_WITH_ONEDNN=1): one engine and stream,
// and a run-time switch so one binary can run, and tests can compare, both the oneDNN path
// and Kiln's portable kernels.
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

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

/// Storage aligned to 64 bytes (a cache line, an AVX-512 vector): oneDNN's kernels move whole
/// vectors, and a buffer off the line boundary splits each of them over two lines (measured: a
/// ResNet-style model at batch 1 took 0.13-0.15 ms instead of 0.10-0.11 with such buffers).
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  friend bool operator==(const Aligned64&, const Aligned64&) { return true; }
};
/// A float buffer for oneDNN (Aligned64).
using Floats = std::vector<float, Aligned64<float>>;

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
