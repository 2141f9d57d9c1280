// SPDX-License-Identifier: MIT OR Apache-2.0
// Fusion benchmark: elementwise chains on the plain CPU, Device::cpu().without_fusion() (one
// kernel per op), against Device::cpu().fusion() (one tiled kernel per chain), next to the copy bandwidth of the same
// bytes (memcpy of the input into the output) measured in the same run.
//
//   kiln_bench_fusion [--threads N] [--reps R] [--smoke] [--fused-only] [--small-only]
//
// --fused-only skips the unfused runs (for profiling the fused kernels);
// --overhead-only runs only the per-op and launch overhead measurements; --small-only only the
// small-tensor chains (fusion_small_<chain>_<n>_{unfused,fused}: seconds per chain with its sync).
//
// Prints one tab-separated line per measurement:
//   <id> \t <seconds per call, best of R> \t <bytes read + written by an ideal kernel> \t ok
// ids: fusion_<chain>_<M>M_{unfused,fused} (chains: gelu_erf, chain5, gelu_sin_sum, and the row chains
// softmax_rows, softmax_grad_rows, layernorm_rows), copy_<M>M, fusion_epilogue_*,
// fusion_train_layernorm_*. bench/torch_fusion_bench.py prints the same ids with torch_ in front
// (PyTorch eager).
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/nn/functional/conv.h>
#include <kiln/nn/functional/norm.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/vec.h"  // compiled programs: a fresh cache, their compile cost
#include "fusion/fusion.h"     // small_limit: small ops run at once unless it is 0

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

double best_of(int reps, const std::function<void()>& f) {
  f();  // warm-up (allocator caches, plan cache; starts the compiles of large programs)
  kiln::cpu::vec::wait_for_compiles();
  f();  // with the compiled kernels
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

/// x * 0.5 * (1 + erf(x / sqrt(2))) as five separate ops.
kiln::Tensor gelu_erf(const kiln::Tensor& x) { return x * 0.5 * (kiln::erf(x / std::sqrt(2.0)) + 1.0); }
/// A 5-op chain: ((x * 1.5 + 0.25).relu() - x) * 0.5, then tanh... kept cheap (memory bound).
kiln::Tensor chain5(const kiln::Tensor& x) { return kiln::tanh(kiln::relu(x * 1.5 + 0.25) - x) * 0.5; }
/// A chain ended by a full sum: the reduction is the fused group's tail at any length.
kiln::Tensor gelu_sin_sum(const kiln::Tensor& x) {
  return (x * 0.5 * ((x * 0.70710678).erf() + 1.0) + x.sin() * 0.1).sum();
}
/// Row chains over rows of 1024 (row pipelines: a reduction feeding the chain).
/// softmax written out: max, sub, exp, sum, div.
kiln::Tensor softmax_by_hand(const kiln::Tensor& x) {
  kiln::Tensor r = x.reshape({-1, 1024});
  kiln::Tensor e = (r - r.amax({-1}, true)).exp();
  return e / e.sum({-1}, true);
}
/// softmax's gradient as its autodiff rule writes it, y * (g - sum(g * y)), here with g = y.
kiln::Tensor softmax_grad_rows(const kiln::Tensor& x) {
  kiln::Tensor y = x.reshape({-1, 1024});
  return y * (y - (y * y).sum({-1}, true));
}
/// layer norm written out: mean, sub, square, mean, add eps, rsqrt, mul, scale, shift.
kiln::Tensor layer_norm_by_hand(const kiln::Tensor& x) {
  kiln::Tensor r = x.reshape({-1, 1024});
  kiln::Tensor d = r - r.mean({-1}, true);
  return d * ((d * d).mean({-1}, true) + 1e-5).rsqrt() * 0.5 + 0.25;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 10;
  bool smoke = false, fused_only = false, overhead_only = false, small_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--smoke")
      smoke = true;
    else if (a == "--fused-only")
      fused_only = true;
    else if (a == "--overhead-only")
      overhead_only = true;
    else if (a == "--small-only")
      small_only = true;
  }
  kiln::set_num_threads(threads);
  // Compiled programs are built in a fresh cache folder, so that their compile cost is measured
  // (fusion_jit_compile: seconds per kernel; fusion_jit_preamble: the precompiled header, once).
  const std::filesystem::path jit_dir =
      std::filesystem::temp_directory_path() / ("kiln_bench_jit_" + std::to_string(::getpid()));
  kiln::cpu::vec::set_jit_compiler("", jit_dir.string());
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  if (smoke) reps = 1;
  std::vector<int64_t> sizes = smoke ? std::vector<int64_t>{1 << 16} : std::vector<int64_t>{8 << 20, 16 << 20};
  if (overhead_only || small_only) sizes.clear();
  const kiln::Device cpu = kiln::Device::cpu().without_fusion(), fus = cpu.fusion();
  struct Chain {
    const char* name;
    kiln::Tensor (*f)(const kiln::Tensor&);
  };
  const Chain chains[] = {{"gelu_erf", gelu_erf}, {"chain5", chain5}};
  const Chain big_chains[] = {{"gelu_erf", gelu_erf},
                              {"chain5", chain5},
                              {"gelu_sin_sum", gelu_sin_sum},
                              {"softmax_rows", softmax_by_hand},
                              {"softmax_grad_rows", softmax_grad_rows},
                              {"layernorm_rows", layer_norm_by_hand}};
  for (int64_t n : sizes) {
    const std::string mtag = std::to_string(n >> 20) + "M";
    const double bytes = 2.0 * static_cast<double>(n) * 4;  // read x, write y
    kiln::manual_seed(1);
    kiln::Tensor xc = kiln::randn({n}, {.device = cpu});
    kiln::Tensor xf = xc.to(fus);
    kiln::sync(fus);
    {
      std::vector<float> src(static_cast<size_t>(n), 1.f), dst(static_cast<size_t>(n));
      double t = best_of(reps, [&] {
        const int64_t nt = threads;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t c = 0; c < nt; ++c) {
          int64_t b = n * c / nt, e = n * (c + 1) / nt;
          std::memcpy(dst.data() + b, src.data() + b, static_cast<size_t>(e - b) * 4);
        }
      });
      std::printf("copy_%s\t%.6g\t%.0f\tok\n", mtag.c_str(), t, bytes);
    }
    for (const Chain& c : big_chains) {
      std::vector<float> ref, got;
      double tu = fused_only ? 0.0 : best_of(reps, [&] {
        kiln::Tensor y = c.f(xc);
        kiln::sync(cpu);
      });
      // fused: the first run starts the compile of the chain's kernel (in the background);
      // timed once it is loaded. Interpreted: the same with compiling off.
      auto fused_run = [&] {
        kiln::Tensor y = c.f(xf);
        kiln::sync(fus);
      };
      fused_run();
      kiln::cpu::vec::wait_for_compiles();
      double tf = best_of(reps, fused_run);
      double ti = -1;
      if (c.f == gelu_erf || c.f == chain5 || c.f == gelu_sin_sum) {
        kiln::cpu::vec::set_jit_mode(kiln::cpu::vec::JitMode::kOff);
        ti = best_of(reps, fused_run);
        kiln::cpu::vec::set_jit_mode(kiln::cpu::vec::JitMode::kAsync);
      }
      // the two agree
      const kiln::Tensor ru = c.f(xc), rf = c.f(xf);
      const size_t at = static_cast<size_t>(std::min<int64_t>(n / 3, ru.numel() - 1));
      float yu = ru.to_vector<float>()[at];
      float yf = rf.to_vector<float>()[at];
      std::printf("fusion_%s_%s_unfused\t%.6g\t%.0f\tok\n", c.name, mtag.c_str(), tu, bytes);
      std::printf("fusion_%s_%s_fused\t%.6g\t%.0f\t%s\n", c.name, mtag.c_str(), tf, bytes,
                  yu == yf ? "ok" : "MISMATCH");
      if (ti >= 0) std::printf("fusion_%s_%s_interp\t%.6g\t%.0f\tok\n", c.name, mtag.c_str(), ti, bytes);
    }
  }
  // Matmul epilogues: relu(x @ w + b) with a short inner dim, where the product's result is
  // large next to its arithmetic: the unfused ops make two more passes over it.
  if (!overhead_only && !small_only) {
    const int64_t m = smoke ? 256 : 8192, k = 64, n = 1024;
    for (int f = fused_only ? 1 : 0; f < 2; ++f) {
      const kiln::Device d = f ? fus : cpu;
      kiln::manual_seed(2);
      kiln::Tensor x = kiln::randn({m, k}, {.device = d}), w = kiln::randn({k, n}, {.device = d});
      kiln::Tensor b = kiln::randn({n}, {.device = d});
      kiln::sync(d);
      const double t = best_of(reps, [&] {
        kiln::Tensor y = kiln::relu(kiln::matmul(x, w) + b);
        kiln::sync(d);
      });
      std::printf("fusion_epilogue_linear_relu_%lldx%lldx%lld_%s\t%.6g\t0\tok\n", static_cast<long long>(m),
                  static_cast<long long>(k), static_cast<long long>(n), f ? "fused" : "unfused", t);
    }
  }
  // Convolution epilogues, [16, 64, 28, 28]: a residual block's relu(conv2d(h, w) + h), with a
  // batch norm in eval mode between, relu(bn(conv2d(h, w)) + h), and MobileNet's ReLU6 after a
  // batch norm, clamp(bn(conv2d(h, w)), 0, 6). Fused, the add and relu or clamp (and the batch
  // norm's scale and shift, its coefficients computed before) run inside the convolution.
  if (!overhead_only && !small_only) {
    const int64_t nb = smoke ? 2 : 16;
    for (int form = 0; form < 3; ++form)
      for (int f = fused_only ? 1 : 0; f < 2; ++f) {
        const bool with_bn = form > 0;
        const kiln::Device d = f ? fus : cpu;
        kiln::manual_seed(3);
        kiln::Tensor h = kiln::randn({nb, 64, 28, 28}, {.device = d}), w = kiln::randn({64, 64, 3, 3}, {.device = d});
        kiln::nn::BatchNorm2d bn({.num_features = 64}, d);
        (void)bn(kiln::randn({nb, 64, 28, 28}, {.device = d}));  // some running statistics
        bn.train(false);
        kiln::sync(d);
        const double t = best_of(reps, [&] {
          auto conv = [&] { return kiln::nn::functional::conv2d(h, w, kiln::Tensor(), {.padding = 1}); };
          // The conv's result a temporary.
          kiln::Tensor y =
              form == 2 ? kiln::clamp(bn(conv()), 0.0, 6.0) : kiln::relu((with_bn ? bn(conv()) : conv()) + h);
          kiln::sync(d);
        });
        const char* name[] = {"residual_relu", "bn_relu", "bn_relu6"};
        std::printf("fusion_epilogue_conv_%s_%lldx64x28x28_%s\t%.6g\t0\tok\n", name[form], static_cast<long long>(nb),
                    f ? "fused" : "unfused", t);
      }
  }
  // A layer norm's forward and backward passes (autodiff): its gradient rule is written with
  // public ops, row reductions feeding chains (row pipelines), [8192, 1024].
  if (!overhead_only && !small_only) {
    const int64_t rows = smoke ? 64 : 8192;
    for (int f = fused_only ? 1 : 0; f < 2; ++f) {
      const kiln::Device d = (f ? fus : cpu).autodiff();
      kiln::manual_seed(4);
      kiln::Tensor x = kiln::randn({rows, 1024}, {.device = d}).require_grad();
      kiln::Tensor w = kiln::randn({1024}, {.device = d}).require_grad();
      kiln::Tensor b = kiln::randn({1024}, {.device = d}).require_grad();
      kiln::Tensor go = kiln::randn({rows, 1024}, {.device = d});
      kiln::sync(d);
      const double t = best_of(reps, [&] {
        kiln::Tensor y = kiln::nn::functional::layer_norm(x, {1024}, w, b);
        auto g = (y * go).sum().backward();
        (void)g.get(x).sum().item<float>();
        (void)g.get(w).sum().item<float>();
      });
      std::printf("fusion_train_layernorm_%lldx1024_%s\t%.6g\t0\tok\n", static_cast<long long>(rows),
                  f ? "fused" : "unfused", t);
    }
  }
  // Small tensors: a chain and a sync on n elements, plain against fused (by default ops with
  // results of at most kiln::fusion::small_limit() elements run at once) and against fused with
  // every op queued (small limit 0), where per-op and per-launch costs weigh against the
  // memory traffic fusion saves.
  const int64_t default_small = kiln::fusion::small_limit();
  for (int64_t n : {int64_t{64}, int64_t{1024}, int64_t{4096}, int64_t{16384}, int64_t{65536}}) {
    if (overhead_only || (smoke && n > 1024)) break;
    for (const Chain& c : chains) {
      const char* tags[] = {"unfused", "fused", "queued"};
      for (int k = 0; k < 3; ++k) {
        const kiln::Device d = k ? fus : cpu;
        kiln::fusion::set_small_limit(k == 2 ? 0 : default_small);
        kiln::Tensor x = kiln::randn({n}, {.device = d});
        kiln::sync(d);
        constexpr int kCalls = 50;
        const double t = best_of(smoke ? 1 : reps,
                                 [&] {
                                   for (int i = 0; i < kCalls; ++i) {
                                     kiln::Tensor y = c.f(x);  // kept until computed (a dead result is skipped)
                                     kiln::sync(d);
                                   }
                                 }) /
                         kCalls;
        std::printf("fusion_small_%s_%lld_%s\t%.6g\t0\tok\n", c.name, static_cast<long long>(n), tags[k], t);
      }
    }
  }
  kiln::fusion::set_small_limit(default_small);
  if (small_only) return 0;
  // Per-op overhead on tiny tensors: the whole eager call (frontend, then execute, record or
  // run at once), on the plain CPU, on the fusion device (small ops run at once) and with every
  // op queued (512 per flush; the cached plan lookup and launch is part of it).
  for (int k = 0; k < 3; ++k) {
    const kiln::Device d = k ? fus : cpu;
    kiln::fusion::set_small_limit(k == 2 ? 0 : default_small);
    kiln::Tensor x = kiln::ones({4}, {.device = d});
    const int n_ops = smoke ? 512 : 51200;
    double t = best_of(smoke ? 1 : 3, [&] {
      kiln::Tensor y = x;
      for (int i = 0; i < n_ops; ++i) y = y * 1.0001;
      kiln::sync(d);
    });
    const char* tags[] = {"unfused", "fused", "queued"};
    std::printf("fusion_tiny_op_%s\t%.6g\t0\tok\n", tags[k], t / n_ops);
  }
  // With every op queued (small limit 0, left from the loop above): recording alone (ops
  // queued, not run: 400 per stream, under the 512-op flush limit), and launching a cached
  // plan: the sync of a queued 5-op chain on 4 elements (plan lookup, program build and run,
  // tiny) with its recording excluded.
  {
    kiln::Tensor x = kiln::ones({4}, {.device = fus});
    const int n_ops = 400, rounds = smoke ? 2 : 200;
    double rec = 1e30, launch = 1e30;
    for (int r = 0; r < rounds; ++r) {
      kiln::Tensor y = x;
      auto t0 = Clock::now();
      for (int i = 0; i < n_ops; ++i) y = y * 1.0001;
      auto t1 = Clock::now();
      kiln::sync(fus);
      rec = std::min(rec, std::chrono::duration<double>(t1 - t0).count() / n_ops);
      kiln::Tensor z = kiln::tanh(x * 0.5 + 1.0) * x - 2.0;  // 5 ops
      auto t2 = Clock::now();
      kiln::sync(fus);
      launch = std::min(launch, std::chrono::duration<double>(Clock::now() - t2).count());
    }
    kiln::fusion::set_small_limit(default_small);
    std::printf("fusion_record_per_op\t%.6g\t0\tok\n", rec);
    std::printf("fusion_launch_cached_plan\t%.6g\t0\tok\n", launch);
  }
  kiln::cpu::vec::wait_for_compiles();
  const kiln::cpu::vec::JitStats js = kiln::cpu::vec::jit_stats();
  if (js.compiled > 0) {
    std::printf("fusion_jit_compile\t%.6g\t%lld\tok\n", js.compile_s / static_cast<double>(js.compiled),
                static_cast<long long>(js.compiled));
    std::printf("fusion_jit_preamble\t%.6g\t0\tok\n", js.preamble_s);
  }
  std::error_code ec;
  std::filesystem::remove_all(jit_dir, ec);
  return 0;
}
