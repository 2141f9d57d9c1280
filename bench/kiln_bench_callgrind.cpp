// SPDX-License-Identifier: MIT OR Apache-2.0
// `kiln_bench --callgrind-overhead <op> [iters]`: the per-op overhead cases under
// `valgrind --tool=callgrind --instr-atstart=no`, instrumentation switched on only around the
// timed loop, so the instruction count (Ir) of the output file divided by `iters` is the
// instructions per op: repeatable on a shared machine where times are not. run.sh runs it for
// each op and bench/report.py prints the counts. Ops: add, exp, sum on 4 f32 elements, and
// add_ad, exp_ad, sum_ad the same requiring grad on Device::cpu().autodiff().
#include <kiln/kiln.h>

#include <cstdio>
#include <string>

#include "bench_util.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define KILN_BENCH_CALLGRIND 1
#endif
#endif
#ifndef KILN_BENCH_CALLGRIND
#define KILN_BENCH_CALLGRIND 0
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

namespace bench {

int run_callgrind_overhead(const std::string& op, int iters) {
  using namespace kiln;
  const bool ad = op.size() > 3 && op.compare(op.size() - 3, 3, "_ad") == 0;
  const std::string base = ad ? op.substr(0, op.size() - 3) : op;
  if (base != "add" && base != "exp" && base != "sum") {
    std::fprintf(stderr, "kiln_bench --callgrind-overhead: unknown op '%s'\n", op.c_str());
    return 2;
  }
  const Device dev = ad ? Device::cpu().autodiff() : Device::cpu();
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, dev), b = tensor({0.5f, 0.25f, 2.f, 1.f}, dev), r;
  if (ad) {
    a = a.require_grad();
    b = b.require_grad();
  }
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) r = base == "add" ? a + b : base == "exp" ? a.exp() : a.sum();
  };
  run(100);  // warm-up: caches, allocator free lists, lazy initialisation
  CALLGRIND_START_INSTRUMENTATION;
  run(iters);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("callgrind_overhead\t%s\t%d\t%s\n", op.c_str(), iters,
              KILN_BENCH_CALLGRIND ? "instrumented loop" : "no callgrind.h: whole program");
  return 0;
}

}  // namespace bench
