// SPDX-License-Identifier: MIT OR Apache-2.0
#include "backends/cpu/onednn.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/machine.h"
#include "kiln/device.h"
#include "kiln/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#if KILN_WITH_ONEDNN
#include <dnnl.h>
#endif

namespace kiln::cpu::onednn {

namespace {
std::atomic<bool>& flag() {
  static std::atomic<bool> on = [] {
    const char* e = std::getenv("KILN_ONEDNN");
    return KILN_WITH_ONEDNN && !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
}  // namespace

bool enabled() { return KILN_WITH_ONEDNN && flag().load(std::memory_order_relaxed); }
void set_enabled(bool on) { flag().store(on && KILN_WITH_ONEDNN, std::memory_order_relaxed); }

ThreadScope::ThreadScope(int threads) {
#ifdef _OPENMP
  if (omp_in_parallel()) return;
  if (threads <= 0) threads = num_threads();
  saved_ = omp_get_max_threads();
  if (saved_ != threads) omp_set_num_threads(threads);
#endif
}
ThreadScope::~ThreadScope() {
#ifdef _OPENMP
  if (saved_ > 0 && saved_ != omp_get_max_threads()) omp_set_num_threads(saved_);
#endif
}

namespace {
// A row-major operand of dnnl_sgemm: transpose flag and leading dimension for a rows x cols
// view with strides (rs, cs); false when neither stride can be the unit one.
[[maybe_unused]] bool layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char& trans, int64_t& ld) {
  if (cs == 1 && (rows == 1 || rs >= cols)) {
    trans = 'N';
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if (rs == 1 && (cols == 1 || cs >= rows)) {
    trans = 'T';
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}
}  // namespace

bool sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
           int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
#if KILN_WITH_ONEDNN
  if (!enabled() || M <= 0 || N <= 0 || K <= 0) return false;
  // A column-major C is the row-major C^T = B^T A^T.
  if (!(csc == 1 && (M == 1 || rsc >= N)) && rsc == 1 && (N == 1 || csc >= M)) {
    std::swap(M, N);
    std::swap(A, B);
    std::swap(rsa, csb);
    std::swap(csa, rsb);
    std::swap(rsc, csc);
  }
  char ta, tb, tc;
  int64_t lda, ldb, ldc;
  if (!layout(M, K, rsa, csa, ta, lda) || !layout(K, N, rsb, csb, tb, ldb) || !layout(M, N, rsc, csc, tc, ldc) ||
      tc != 'N')
    return false;
  // Small products lose more to waking threads than they gain (measured: 64^3 on 2 threads).
  ThreadScope threads(double(M) * double(N) * double(K) < tuning().onednn_one_thread_work ? 1 : 0);
  return dnnl_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == dnnl_success;
#else
  return false;
#endif
}

#if KILN_WITH_ONEDNN
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());  // per thread: batch chunks run primitives concurrently
  return s;
}

void execute(const dnnl::primitive& prim, std::initializer_list<Arg> args) {
  dnnl_exec_arg_t a[8];
  int n = 0;
  for (const Arg& x : args) {
    if (!x.mem || !*x.mem) continue;
    KILN_CHECK(n < 8, "onednn", "execute takes at most 8 arguments");
    a[n++] = {x.id, x.mem->get()};
  }
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream().get(), n, a), "could not execute a primitive");
}

void reorder(const dnnl::primitive& r, const dnnl::memory& from, const dnnl::memory& to) {
  execute(r, {{DNNL_ARG_FROM, &from}, {DNNL_ARG_TO, &to}});
}
#endif

}  // namespace kiln::cpu::onednn
