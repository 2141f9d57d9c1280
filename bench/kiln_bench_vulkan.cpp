// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan section of make bench (bench/run.sh writes its output to bench/VULKAN.md). On
// lavapipe (a CPU driver) times say nothing about a GPU, so this measures what a GPU user will
// feel and what does not depend on the driver's speed: dispatches per submit, submits and
// dispatches per training step, ops that still fall back to the CPU per step, bytes of
// parameters uploaded per dispatch, and the pipeline cache (built once, then hits). The one
// time printed is the host's cost of recording a dispatch, which is the backend's own code.
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/vulkan/context.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  explicit Mlp(const Device& d)
      : fc1({.in_features = 64, .out_features = 128}, d), fc2({.in_features = 128, .out_features = 10}, d) {}
  Tensor forward(const Tensor& x) { return fc2(relu(fc1(x))); }
  KILN_VISIT(Mlp, fc1, fc2)
};

vulkan::Stats diff(const vulkan::Stats& a, const vulkan::Stats& b) {
  vulkan::Stats d;
  d.dispatches = b.dispatches - a.dispatches;
  d.submits = b.submits - a.submits;
  d.pipelines = b.pipelines - a.pipelines;
  d.spirv_compiled = b.spirv_compiled - a.spirv_compiled;
  d.spirv_from_disk = b.spirv_from_disk - a.spirv_from_disk;
  d.pipeline_hits = b.pipeline_hits - a.pipeline_hits;
  d.upload_bytes = b.upload_bytes - a.upload_bytes;
  return d;
}

int64_t fallback_ops() {
  int64_t n = 0;
  for (const auto& [what, c] : fallback_counts())
    if (what.rfind("vulkan", 0) == 0) n += c;
  return n;
}

}  // namespace

/// Milliseconds of the best of `reps` runs of fn on device d (each synced before and after).
template <class Fn>
double best_ms(const Device& d, int reps, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    sync(d);
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    sync(d);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

/// Kernels and best-of-3 milliseconds of the work `make(device)` returns, run one kernel per
/// op (plain) and fused (Device::vulkan()), with the same bits (checked), as two table rows.
template <class Make>
void compare_fused(vulkan::Context& ctx, const Device& plain, const char* what, Make&& make) {
  double ms[2];
  int64_t kernels[2];
  Tensor out[2];
  for (int which = 0; which < 2; ++which) {
    const Device dev = which == 0 ? plain : Device::vulkan();
    auto run = make(dev);
    out[which] = run().to(Device::cpu());  // the first run compiles
    sync(dev);
    const vulkan::Stats s0 = ctx.stats();
    Tensor keep = run();  // held: the fused device skips work whose result nothing holds
    sync(dev);
    kernels[which] = diff(s0, ctx.stats()).dispatches;
    ms[which] = best_ms(dev, 3, [&] { keep = run(); });
  }
  std::printf("| %s: kernels, one per op / fused | %lld / %lld |\n", what, static_cast<long long>(kernels[0]),
              static_cast<long long>(kernels[1]));
  std::printf("| %s: ms, one per op / fused (ratio; same bits: %s) | %.1f / %.1f (%.2fx) |\n", what,
              out[0].equal(out[1]) ? "yes" : "NO", ms[0], ms[1], ms[0] / ms[1]);
}

/// " (12% of the peak)" when the environment variable `peak` gives one, else "".
std::string share(double v, const char* peak) {
  const char* e = std::getenv(peak);
  const double p = e ? std::atof(e) : 0;
  if (p <= 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.0f%% of %.0f)", 100 * v / p, p);
  return buf;
}

/// --gpu (scripts/gpu-check.sh, on a real GPU): f32 matmul GFLOP/s at the sizes of
/// KILN_GPU_MATMUL (default 1024,2048,4096) and the bandwidth of an elementwise add over
/// KILN_GPU_ELEMS floats (default 2^26), as shares of KILN_GPU_PEAK_GFLOPS / KILN_GPU_PEAK_GBPS.
void gpu_speed() {
  const Device vk = Device::vulkan();
  std::printf("\n## Speed\n\n| measure | value |\n|---|---|\n");
  const char* sizes = std::getenv("KILN_GPU_MATMUL");
  std::string list = sizes && *sizes ? sizes : "1024,2048,4096";
  for (size_t at = 0; at < list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const int64_t n = std::atoll(list.substr(at, comma - at).c_str());
    at = comma + 1;
    if (n <= 0) continue;
    const Tensor a = randn({n, n}).to(vk), b = randn({n, n}).to(vk);
    Tensor c;
    (void)matmul(a, b).sum().item<float>();  // first use: pipelines, autotuning
    const double ms = best_ms(vk, 5, [&] { c = matmul(a, b); });
    const double gflops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / ms / 1e6;
    std::printf("| f32 matmul %lld x %lld x %lld | %.0f GFLOP/s%s |\n", static_cast<long long>(n),
                static_cast<long long>(n), static_cast<long long>(n), gflops,
                share(gflops, "KILN_GPU_PEAK_GFLOPS").c_str());
  }
  const char* elems = std::getenv("KILN_GPU_ELEMS");
  const int64_t n = elems && std::atoll(elems) > 0 ? std::atoll(elems) : int64_t{1} << 26;
  const Tensor a = randn({n}).to(vk), b = randn({n}).to(vk);
  Tensor c = a + b;
  const double ms = best_ms(vk, 5, [&] { c = a + b; });
  const double gbps = 3.0 * 4.0 * static_cast<double>(n) / ms / 1e6;
  std::printf("| f32 add over %lld elements (read 2, write 1) | %.0f GB/s%s |\n", static_cast<long long>(n), gbps,
              share(gbps, "KILN_GPU_PEAK_GBPS").c_str());
}

/// --first-step (a fresh process, on the kernel cache folder it is given): the time from
/// opening the device to the end of the first fused MLP training step, and the SPIR-V
/// modules it compiled, printed as "<ms> <compiled>".
int first_step() {
  const auto t0 = std::chrono::steady_clock::now();
  const Device dev = Device::vulkan();
  vulkan::Context& ctx = vulkan::Context::get(0);
  manual_seed(0);
  Mlp net(Device::cpu().autodiff());
  net.to(dev.autodiff());
  optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  Tensor xb = randn({64, 64}).to(dev), yb = randint(0, 10, {64}).to(dev);
  Tensor loss = F::cross_entropy(net.forward(xb), yb);
  opt.step(loss.backward());
  (void)loss.item<double>();
  sync(dev);
  std::printf("%.3f %lld\n", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
              static_cast<long long>(ctx.stats().spirv_compiled));
  return 0;
}

/// The first training step of a fresh process on an empty kernel cache, with the GLSL compiler
/// in the process and with glslc as a process (KILN_GLSLC=glslc): "<ms> <compiled>", or "".
std::string cold_first_step(const char* self, bool tool) {
  const std::string dir = "/tmp/kiln_bench_vulkan_cold_" + std::to_string(::getpid()) + (tool ? "_tool" : "");
  const std::string cmd = "rm -rf " + dir + " && KILN_CACHE_DIR=" + dir + (tool ? " KILN_GLSLC=glslc" : "") + " \"" +
                          self + "\" --first-step; rm -rf " + dir;
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[128] = {0};
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--first-step") return first_step();
  std::string why;
  if (vulkan::Context::count(&why) == 0) {
    std::printf("# Vulkan\n\nNo Vulkan device on this machine: %s\n", why.c_str());
    return 0;
  }
  const Device vk = Device::vulkan().without_fusion();  // dispatch costs: one kernel per op
  vulkan::Context& ctx = vulkan::Context::get(0);
  std::printf("# Vulkan (%s)\n\nCounters, not speed: this driver may run on the CPU.\n\n", ctx.name().c_str());
  std::printf("| measure | value |\n|---|---|\n");

  // A chain of 1000 elementwise ops: recorded into batches, submitted at the one sync point
  // (and whenever a batch fills).
  Tensor x = ones({4096}).to(vk);
  sync(vk);
  vulkan::Stats s0 = ctx.stats();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) x = x * 1.0001f + 0.5f;
  const auto t1 = std::chrono::steady_clock::now();
  sync(vk);
  vulkan::Stats d = diff(s0, ctx.stats());
  std::printf("| elementwise chain: dispatches / submits | %lld / %lld (%.0f per submit) |\n",
              static_cast<long long>(d.dispatches), static_cast<long long>(d.submits),
              static_cast<double>(d.dispatches) / static_cast<double>(std::max<int64_t>(d.submits, 1)));
  std::printf(
      "| host time per dispatch over the chain (each full batch submitted, the next recorded while it runs) | %.1f us "
      "|\n",
      std::chrono::duration<double, std::micro>(t1 - t0).count() / static_cast<double>(d.dispatches));
  // The backend's own cost: chains of 200 dispatches, shorter than a batch, so nothing is
  // submitted while they are recorded (the driver's execution is outside the timed part);
  // best of 5.
  double record_us = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto r0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) x = x * 1.0001f + 0.5f;
    const auto r1 = std::chrono::steady_clock::now();
    sync(vk);
    record_us = std::min(record_us, std::chrono::duration<double, std::micro>(r1 - r0).count() / 200);
  }
  std::printf("| host time to record one dispatch (op call included; target <= 5 us) | %.1f us |\n", record_us);
  std::printf("| parameter bytes uploaded per dispatch | %.0f |\n",
              static_cast<double>(d.upload_bytes) / static_cast<double>(std::max<int64_t>(d.dispatches, 1)));

  // Training steps of an MLP (SGD): one step's submits (the loss read is the sync point), one
  // kernel per op and fused.
  for (const Device& dev : {vk, Device::vulkan()}) {
    const char* how = dev.has_fusion() ? "fused" : "one kernel per op";
    manual_seed(0);
    Mlp net(Device::cpu().autodiff());
    net.to(dev.autodiff());
    optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
    Tensor xb = randn({64, 64}).to(dev), yb = randint(0, 10, {64}).to(dev);
    const auto step = [&] {
      Tensor loss = F::cross_entropy(net.forward(xb), yb);
      opt.step(loss.backward());
      return loss.item<double>();
    };
    step();  // first use: pipelines built
    const int steps = 10;
    reset_fallback_counts();
    s0 = ctx.stats();
    for (int i = 0; i < steps; ++i) step();
    d = diff(s0, ctx.stats());
    std::printf("| MLP training step, %s: submits / dispatches | %.1f / %.1f |\n", how,
                static_cast<double>(d.submits) / steps, static_cast<double>(d.dispatches) / steps);
    std::printf("| MLP training step, %s: ops run on the CPU (fallback) | %.1f |\n", how,
                static_cast<double>(fallback_ops()) / steps);
    std::printf("| MLP training step, %s: pipelines built / cache hits | %lld / %lld |\n", how,
                static_cast<long long>(d.pipelines), static_cast<long long>(d.pipeline_hits));
  }
  // Fusion, one kernel per op and fused (the same bits): a chain of 8 elementwise ops over 4M
  // f32; a linear layer with its bias and activation (the product's epilogue); attention's
  // scores scaled, masked and softmaxed (the chain in the softmax's kernel); a residual add and
  // layer norm. On a CPU driver the time is memory traffic and the driver's threads; best of 3.
  const Tensor big = randn({1 << 22}), xs = randn({2048, 512}), w = randn({512, 512}), b = randn({512});
  const Tensor q = randn({8, 4, 128, 64}), k = randn({8, 4, 128, 64}), mask = randn({128, 128});
  const Tensor h = randn({4096, 512}), r = randn({4096, 512});
  compare_fused(ctx, vk, "8-op elementwise chain over 4M f32", [&](const Device& d) {
    const Tensor a = big.to(d);
    return [a] { return ((a * 1.5f + 0.25f).sigmoid() * a - 0.5f).abs().sqrt() * 2.0f; };
  });
  compare_fused(ctx, vk, "relu(x @ w + b), [2048, 512] x [512, 512]", [&](const Device& d) {
    const Tensor xd = xs.to(d), wd = w.to(d), bd = b.to(d);
    return [=] { return relu(matmul(xd, wd) + bd); };
  });
  compare_fused(ctx, vk, "softmax(q k^T / 8 + mask), [8, 4, 128, 128]", [&](const Device& d) {
    const Tensor qd = q.to(d), kd = k.to(d).transpose(-2, -1).contiguous(), md = mask.to(d);
    return [=] { return softmax(matmul(qd, kd) * 0.125f + md, -1); };
  });
  compare_fused(ctx, vk, "layer_norm(h + r), [4096, 512]", [&](const Device& d) {
    const Tensor hd = h.to(d), rd = r.to(d);
    return [=] { return nn::functional::layer_norm(hd + rd, {512}); };
  });
  // Host cost of a small fused group, at a sync point each time: queueing 8 ops, planning the
  // group, its launch and recording it, then submitting and waiting (the device's run of 1K
  // elements is small), against the same 8 ops one kernel per op; best of 5 runs of 200.
  const Tensor small = randn({1024});
  double step_us[2];
  for (int which = 0; which < 2; ++which) {
    const Device dev = which == 0 ? vk : Device::vulkan();
    const Tensor a = small.to(dev);
    Tensor keep;
    step_us[which] = best_ms(dev, 5,
                             [&] {
                               for (int i = 0; i < 200; ++i) {
                                 keep = ((a * 1.5f + 0.25f).sigmoid() * a - 0.5f).abs().sqrt() * 2.0f;
                                 sync(dev);
                               }
                             }) *
                     1e3 / 200;
  }
  std::printf("| 8-op chain over 1K f32 then a sync: host us per step, one kernel per op / fused | %.1f / %.1f |\n",
              step_us[0], step_us[1]);
  const vulkan::Stats all = ctx.stats();
  std::printf("| whole run: pipelines built, SPIR-V compiled / from the disk cache | %lld, %lld / %lld |\n",
              static_cast<long long>(all.pipelines), static_cast<long long>(all.spirv_compiled),
              static_cast<long long>(all.spirv_from_disk));
  {
    double ms[2] = {0, 0};
    long long compiled[2] = {0, 0};
    for (int tool = 0; tool < 2; ++tool)
      std::sscanf(cold_first_step(argv[0], tool == 1).c_str(), "%lf %lld", &ms[tool], &compiled[tool]);
    std::printf(
        "| first fused MLP training step of a fresh process on an empty kernel cache (SPIR-V modules compiled): "
        "GLSL compiled in process / by glslc processes | %.0f ms / %.0f ms (%lld / %lld) |\n",
        ms[0], ms[1], compiled[0], compiled[1]);
  }
  std::printf("\nFallbacks of one run of the steps:");
  for (const auto& [what, c] : fallback_counts()) std::printf(" %s x%lld;", what.c_str(), static_cast<long long>(c));
  std::printf("\n");
  if (argc > 1 && std::string(argv[1]) == "--gpu") gpu_speed();
  return 0;
}
