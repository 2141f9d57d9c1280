// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX inference speed: the real-architecture fixtures (tests/fixtures/onnx) through Kiln's
// run-time path (kiln::onnx::Model) and through generated code (kiln-onnx), batch 1 and 16,
// 1 and 2 threads; best of N runs after warm-up. ort_bench.py prints the same lines for ONNX
// Runtime. Output: "<model> <impl> b=<batch> t=<threads> <best ms>".
//   kiln_onnx_bench [reps=20] [model] [threads] [batch]   (model/threads/batch: only that one, for profiling)
//   KILN_BENCH_RUNTIME_ONLY=1 skips generated code, KILN_BENCH_CODEGEN_ONLY=1 the run-time path
//   (the skipped path's lines then read 0.000).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/vec.h"
#include "bert.h"
#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "kiln/store.h"
#include "lstm_net.h"
#include "mobilenet.h"
#include "resnet.h"
#include "unet.h"

using namespace kiln;

namespace {

// The same inputs ort_bench.py builds (values do not matter for speed; shapes do).
std::vector<Tensor> inputs_for(const std::string& model, int64_t b) {
  if (model == "bert") {
    Tensor ids = arange(b * 16, i64, Device::cpu()).remainder(100).reshape({b, 16});
    return {ids, ones({b, 16}, {.dtype = i64})};
  }
  if (model == "lstm") return {randn({b, 16, 12})};
  return {randn({b, 3, 32, 32})};
}

double best_ms(const std::function<void()>& f, int reps) {
  f();
  f();
  // Kernels compiled in the background (large elementwise programs, first run while loading
  // weights) are loaded before timing, and their compiler does not share the cores with it.
  kiln::cpu::vec::wait_for_compiles();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

template <class M>
std::function<std::vector<Tensor>(const std::vector<Tensor>&)> generated() {
  auto m = std::make_shared<M>(Device::cpu());
  store::load(*m, M::weights_path());
  return [m](const std::vector<Tensor>& in) { return m->run(in); };
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  struct Entry {
    std::string name;
    std::function<std::vector<Tensor>(const std::vector<Tensor>&)> gen;
  };
  std::vector<Entry> models = {{"resnet", generated<ResNet>()},
                               {"mobilenet", generated<MobileNet>()},
                               {"bert", generated<Bert>()},
                               {"lstm", generated<LstmNet>()},
                               {"unet", generated<UNet>()}};
  std::string only = argc > 2 ? argv[2] : "";
  int only_threads = argc > 3 ? std::atoi(argv[3]) : 0;
  int64_t only_batch = argc > 4 ? std::atoll(argv[4]) : 0;
  for (int threads : {1, 2}) {
    if (only_threads && threads != only_threads) continue;
    set_num_threads(threads);
    for (auto& e : models) {
      if (!only.empty() && e.name != only) continue;
      onnx::Model rt(std::string(KILN_ONNX_FIXTURES) + "/" + e.name + "/model.onnx", Device::cpu());
      for (int64_t b : {1, 16}) {
        if (only_batch && b != only_batch) continue;
        auto in = inputs_for(e.name, b);
        // KILN_BENCH_RUNTIME_ONLY=1 / KILN_BENCH_CODEGEN_ONLY=1: skip the other path (profiling
        // one path alone); the skipped path's line reads 0.000.
        double a = std::getenv("KILN_BENCH_CODEGEN_ONLY") ? 0.0 : best_ms([&] { rt.run(in); }, reps);
        double g = std::getenv("KILN_BENCH_RUNTIME_ONLY") ? 0.0 : best_ms([&] { e.gen(in); }, reps);
        std::printf("%s kiln-runtime b=%lld t=%d %.3f\n", e.name.c_str(), static_cast<long long>(b), threads, a);
        std::printf("%s kiln-codegen b=%lld t=%d %.3f\n", e.name.c_str(), static_cast<long long>(b), threads, g);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
