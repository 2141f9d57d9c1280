// SPDX-License-Identifier: MIT OR Apache-2.0
// What the WebGPU device costs in a page, beside the CPU device of the same page (bench/web/
// page.html runs it; scripts/gen_web_bench.py writes the results into bench/WEB.md): a read of
// one op's result (submission, the wait, mapping), an op recorded in a batch, and moving 4 MiB
// to and from the device. Prints one JSON object.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

using namespace kiln;

namespace {

/// The best of 5 runs of `times` calls of f, in milliseconds per call.
double best_ms(const std::function<void()>& f, int times = 1) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < times; ++i) f();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ms / times);
  }
  return best;
}

/// n adds of 256 floats, each on the last one's result, then a read of the 256 values (the
/// best of 5 runs of `times` such chains, per chain).
double chain_ms(const Device& d, int n, int times) {
  const Tensor x = ones({256}).to(d);
  return best_ms(
      [&] {
        Tensor y = x;
        for (int i = 0; i < n; ++i) y = y + 1.0f;
        (void)y.to_vector<float>();
      },
      times);
}

}  // namespace

int main() {
  try {
    const Device gpu = Device::webgpu(), cpu = Device::cpu();
    chain_ms(gpu, 10, 1);  // pipelines built, first batches done
    const double gpu1 = chain_ms(gpu, 1, 20), gpu1000 = chain_ms(gpu, 1000, 1);
    const double cpu1 = chain_ms(cpu, 1, 1000), cpu1000 = chain_ms(cpu, 1000, 10);
    const Tensor big = rand({1 << 20});  // 4 MiB of f32
    const double up = best_ms([&] {
      sync(gpu);
      (void)big.to(gpu);
      sync(gpu);
    });
    const Tensor on_gpu = big.to(gpu);
    const double down = best_ms([&] { (void)on_gpu.to_vector<float>(); });
    std::printf(
        "{\"gpu_read_ms\": %.4f, \"gpu_op_ms\": %.5f, \"cpu_read_ms\": %.5f, \"cpu_op_ms\": %.5f, "
        "\"upload_4mib_ms\": %.3f, \"download_4mib_ms\": %.3f}\n",
        gpu1, (gpu1000 - gpu1) / 999, cpu1, (cpu1000 - cpu1) / 999, up, down);
    return 0;
  } catch (const std::exception& e) {
    std::printf("{\"error\": \"%s\"}\n", e.what());
    return 1;
  }
}
