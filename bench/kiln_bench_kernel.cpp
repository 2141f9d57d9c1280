// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel language (docs/kernels.md) measured: tracing and rendering a kernel, compiling it
// (the compiler, then the memory and disk caches), and the speed of the C++ target against
// Kiln's hand-written kernels in the same process. Prints bench/KERNELS.md on stdout.
//
//   kiln_bench_kernel [--smoke]      (--smoke: tiny sizes, a few repetitions)
//   kiln_bench_kernel --disk-probe   (internal: times a compile that only the disk cache serves)
//   kiln_bench_kernel --render-loop TARGET [REPS [FILE]]   (rendering alone, for a profiler;
//                                                           TARGET trace: tracing alone;
//                                                           KILN_BENCH_ONLY=s: kernels named *s*)
//   KILN_BENCH_ROWS=1: also each library kernel's trace and trace + render times, on stderr
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kernel.h"
#include "kiln/kiln.h"
#include "library_launches.h"

using namespace kiln;
namespace K = kiln::kernel;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// The best of `reps` timings of f and of g, alternated so that both see the same machine load.
std::pair<double, double> best_alternated(int reps, const std::function<void()>& f, const std::function<void()>& g) {
  double bf = 1e30, bg = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    f();
    bf = std::min(bf, since(t));
    t = Clock::now();
    g();
    bg = std::min(bg, since(t));
  }
  return {bf, bg};
}

/// The best of `reps` timings of f, in seconds.
double best(int reps, const std::function<void()>& f) {
  double b = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    f();
    b = std::min(b, since(t));
  }
  return b;
}

/// y[i] = f(x[i]) over n elements, 256 threads a group.
K::Kernel map_kernel(const char* name, K::Val (*f)(K::Val)) {
  return K::trace(name, [f](K::Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    K::Val n = b.scalar<int32_t>("n");
    b.group_size(256);
    K::Val i = K::global_id();
    K::if_(i < n, [&] {
      K::Val v = x[i];
      y[i] = f(v);
    });
  });
}
/// y = 1.5 x: the elementwise case (one op, as Kiln's hand-written kernel); y = exp(x): the
/// language's exp (the CPU's polynomial, a kernel function).
K::Kernel scale_shift() {
  return map_kernel("bench_scale", [](K::Val v) { return v * 1.5f; });
}
K::Kernel exp_kernel() {
  return map_kernel("bench_exp", [](K::Val v) { return K::exp(v); });
}

/// A group-wide tree sum in shared memory, one partial sum per group.
K::Kernel group_sum() {
  return K::trace("bench_group_sum", [](K::Builder& b) {
    const int gs = 128;
    auto x = b.input<float>("x");
    auto out = b.output<float>("out");
    auto sums = b.shared<float>("sums", gs);
    b.group_size(gs);
    K::Val t = K::thread_id();
    sums[t] = x[K::global_id()];
    K::barrier();
    for (int s = gs / 2; s > 0; s /= 2) {
      K::if_(t < s, [&] {
        K::Val mine = sums[t];
        sums[t] = mine + sums[t + s];
      });
      K::barrier();
    }
    K::if_(t == 0, [&] { out[K::group_id()] = sums[0]; });
  });
}

/// C [n, n] = A [n, n] B [n, n], row-major: a group of 16 threads computes 4 rows by 64 columns
/// of C, a thread 4 x 4 elements with its columns 16 apart, so that neighbouring threads read
/// neighbouring columns of B and the same elements of A (the C++ target vectorises the k loop's
/// body across the threads and keeps the sums in registers). A tile inside the matrix reads it
/// directly; a tile on its edge clamps its reads into it and writes only what lies inside.
K::Kernel matmul_blocked() {
  return K::trace("bench_matmul_4x4", [](K::Builder& b) {
    auto a = b.input<float>("a");
    auto bm = b.input<float>("b");
    auto c = b.output<float>("c");
    K::Val n = b.scalar<int32_t>("n");
    b.group_size(16);
    K::Val row0 = K::group_id(1) * 4, col0 = K::group_id(0) * 64;
    K::Val col = col0 + K::thread_id();
    std::vector<K::Var> acc;
    acc.reserve(16);
    for (int i = 0; i < 16; ++i) acc.emplace_back(K::Val(0.0f));
    // The k loop, reading A's row r(i) and B's column c(j) through the given index functions.
    auto product = [&](const std::function<K::Val(int)>& r, const std::function<K::Val(int)>& cj) {
      K::for_(K::Val(0), n, [&](K::Val k) {
        std::vector<K::Val> bk;
        for (int j = 0; j < 4; ++j) bk.push_back(bm[k * n + cj(j)]);
        for (int i = 0; i < 4; ++i) {
          K::Val ai = a[r(i) * n + k];
          for (int j = 0; j < 4; ++j) {
            K::Var& sum = acc[static_cast<size_t>(i * 4 + j)];
            sum = K::fma(ai, bk[static_cast<size_t>(j)], sum);
          }
        }
      });
    };
    K::if_(row0 + 4 <= n && col0 + 64 <= n, [&] {
      product([&](int i) { return row0 + i; }, [&](int j) { return col + 16 * j; });
    }).else_([&] {
      K::Val last = n - 1;
      product([&](int i) { return K::min(row0 + i, last); }, [&](int j) { return K::min(col + 16 * j, last); });
    });
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        K::if_(row0 + i < n && col + 16 * j < n,
               [&] { c[(row0 + i) * n + col + 16 * j] = acc[static_cast<size_t>(i * 4 + j)]; });
  });
}

/// A 64-byte aligned float buffer, as Kiln's tensors are (so both sides see the same alignment).
struct Aligned {
  std::vector<float> raw;
  float* p;
  int64_t n;
  explicit Aligned(const std::vector<float>& v) : raw(v.size() + 16), n(static_cast<int64_t>(v.size())) {
    auto a = reinterpret_cast<std::uintptr_t>(raw.data());
    p = raw.data() + ((64 - a % 64) % 64) / sizeof(float);
    std::copy(v.begin(), v.end(), p);
  }
  explicit Aligned(int64_t count) : Aligned(std::vector<float>(static_cast<size_t>(count))) {}
  K::Arg arg() { return K::Arg(p, n); }
};

std::string us(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f µs", s * 1e6);
  return b;
}
std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  return b;
}

/// Tracing plus rendering of every kernel in the library sample (tests/library_launches.h), per
/// target: how many take at most 50 µs, the median and the slowest (best of `reps` each).
void library_table(int reps) {
  constexpr K::Target targets[] = {K::Target::Cpp, K::Target::Glsl, K::Target::Cuda, K::Target::Wgsl};
  struct Row {
    std::string name;
    double total[4];  ///< trace + render per target; < 0: not expressible
  };
  std::vector<Row> rows;
  kiln::test::for_each_library_launch(
      [&](const std::string& name, const std::function<K::Kernel(const K::Limits&)>& trace) {
        const K::Kernel k = trace(K::Limits{});
        const double tr = best(reps, [&] { (void)trace(K::Limits{}); });
        Row r{name, {}};
        for (int t = 0; t < 4; ++t) {
          try {
            r.total[t] = tr + best(reps, [&] { (void)K::render(k, targets[t]); });
          } catch (const Error&) {
            r.total[t] = -1;
          }
        }
        rows.push_back(r);
        if (std::getenv("KILN_BENCH_ROWS"))
          std::fprintf(stderr, "%-40s ir lines %5td trace %6.1f cpp %6.1f glsl %6.1f\n", name.c_str(),
                       std::ranges::count(K::dump(k), '\n'), tr * 1e6, r.total[0] * 1e6, r.total[1] * 1e6);
      });
  std::printf(
      "\n## The library's kernels: tracing plus rendering (best of %d)\n\n%zu kernels: one op of each family "
      "and storage, their variants and three fused kernels (`tests/library_launches.h`).\n\n"
      "| target | within 50 µs | median | slowest |\n|---|---|---|---|\n",
      reps, rows.size());
  for (int t = 0; t < 4; ++t) {
    std::vector<std::pair<double, std::string>> v;
    for (const Row& r : rows)
      if (r.total[t] >= 0) v.emplace_back(r.total[t], r.name);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const auto within = std::count_if(v.begin(), v.end(), [](const auto& e) { return e.first <= 50e-6; });
    std::printf("| %s | %td of %zu | %s | %s (%s) |\n", std::string(K::target_name(targets[t])).c_str(), within,
                v.size(), us(v[v.size() / 2].first).c_str(), us(v.back().first).c_str(), v.back().second.c_str());
  }
}

/// --render-loop TARGET [REPS [FILE]]: renders the library sample and the kernels above REPS
/// times for one target, for a profiler; FILE receives the sources of the first round (diff two
/// builds' files to see that a renderer change keeps the text).
int render_loop(int argc, char** argv) {
  const int reps = argc > 3 ? std::atoi(argv[3]) : 300;
  std::FILE* f = argc > 4 ? std::fopen(argv[4], "w") : nullptr;
  const char* only = std::getenv("KILN_BENCH_ONLY");  // the kernels whose name holds it
  auto skip = [&](const std::string& name) { return only && name.find(only) == std::string::npos; };
  if (std::string(argv[2]) == "trace") {  // tracing alone; FILE receives the optimised IR
    kiln::test::for_each_library_launch(
        [&](const std::string& name, const std::function<K::Kernel(const K::Limits&)>& trace) {
          for (int i = 0; i < reps && !skip(name); ++i) {
            const K::Kernel k = trace(K::Limits{});
            if (f && i == 0) std::fprintf(f, "=====\n%s", K::dump(k).c_str());
          }
        });
    for (auto make : {scale_shift, group_sum, matmul_blocked})
      for (int i = 0; i < reps && !skip(make().name()); ++i) {
        const K::Kernel k = make();
        if (f && i == 0) std::fprintf(f, "=====\n%s", K::dump(k).c_str());
      }
    if (f) std::fclose(f);
    return 0;
  }
  std::vector<K::Kernel> ks;
  kiln::test::for_each_library_launch([&](const std::string&, const std::function<K::Kernel(const K::Limits&)>& trace) {
    ks.push_back(trace(K::Limits{}));
  });
  for (auto make : {scale_shift, group_sum, matmul_blocked}) ks.push_back(make());
  std::erase_if(ks, [&](const K::Kernel& k) { return skip(k.name()); });
  K::Target target = K::Target::Cpp;
  for (K::Target t : {K::Target::Cpp, K::Target::Cuda, K::Target::Glsl, K::Target::Wgsl})
    if (K::target_name(t) == argv[2]) target = t;
  for (int i = 0; i < reps; ++i)
    for (const K::Kernel& k : ks) {
      std::string text;
      try {
        text = K::render(k, target);
      } catch (const Error& e) {
        text = std::string("(not expressible) ") + e.what() + "\n";
      }
      if (f && i == 0) std::fprintf(f, "=====\n%s", text.c_str());
    }
  if (f) std::fclose(f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::string(argv[1]) == "--smoke";
  if (argc > 1 && std::string(argv[1]) == "--disk-probe") {
    // A fresh process: nothing in memory, the previous process left the files on disk.
    K::Kernel k = scale_shift();
    auto t = Clock::now();
    K::CpuKernel c = K::compile_cpu(k);
    const double cpu_s = since(t);
    std::string origin;
    t = Clock::now();
    (void)K::compile_spirv(k, &origin);
    std::printf("%.9f %s %.9f %s\n", cpu_s, c.origin().c_str(), since(t), origin.c_str());
    return 0;
  }
  if (argc > 2 && std::string(argv[1]) == "--render-loop") return render_loop(argc, argv);
  const int reps = smoke ? 3 : 200;
  // A fresh kernel cache, so the first compiles run the compilers.
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("kiln_bench_kernel_" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache);
  setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  set_num_threads(1);

  std::printf(
      "# The kernel language\n\nGenerated by `make bench` (`bench/kiln_bench_kernel`); one thread. "
      "Targets from the kernel-language issue: tracing and rendering ≤ 50 µs; SPIR-V compile ≤ 50 ms "
      "on first use, then 0 (cache); the C++ target's elementwise kernel within 10%% of Kiln's "
      "hand-written kernel; a tiled matmul written in the language ≥ 40%% of oneDNN.\n\n");

  // ---- tracing and rendering ----
  std::printf(
      "## Tracing and rendering (best of %d)\n\n| kernel | trace | C++ | GLSL | CUDA C | WGSL |\n"
      "|---|---|---|---|---|---|\n",
      reps);
  const std::vector<std::pair<std::string, std::function<K::Kernel()>>> kernels = {
      {"elementwise (scale)", scale_shift},
      {"tree sum in shared memory", group_sum},
      {"4 x 4 register-blocked matmul", matmul_blocked}};
  for (const auto& [label, make] : kernels) {
    K::Kernel k = make();
    const double tr = best(reps, [&] { (void)make(); });
    std::string cells;
    for (K::Target t : {K::Target::Cpp, K::Target::Glsl, K::Target::Cuda, K::Target::Wgsl}) {
      double r = 0;
      try {
        r = best(reps, [&] { (void)K::render(k, t); });
        cells.append(" ").append(us(r)).append(" |");  // not " " + ...: GCC 12's -Wrestrict false positive
      } catch (const Error&) {
        cells += " (not expressible) |";
      }
    }
    std::printf("| %s | %s |%s\n", label.c_str(), us(tr).c_str(), cells.c_str());
  }
  if (std::getenv("KILN_BENCH_RENDER_ONLY")) return 0;  // the table above alone
  library_table(smoke ? 2 : 20);

  // ---- compiling ----
  K::Kernel k = scale_shift();
  auto t = Clock::now();
  K::CpuKernel cpu = K::compile_cpu(k);
  const double cpu_cold = since(t);
  const std::string cpu_cold_origin = cpu.origin();
  const double cpu_mem = best(reps, [&] { (void)K::compile_cpu(k); });
  // SPIR-V: the process's first kernel pays the in-process compiler's one-time setup (a Vulkan
  // device starts it in the background when it opens); then each new kernel is compiled alone.
  std::string spv_origin, first_origin, mm_origin, tool_origin;
  t = Clock::now();
  (void)K::compile_spirv(group_sum(), &first_origin);
  const double spv_first = since(t);
  t = Clock::now();
  (void)K::compile_spirv(k, &spv_origin);
  const double spv_cold = since(t);
  t = Clock::now();
  (void)K::compile_spirv(matmul_blocked(), &mm_origin);
  const double spv_mm = since(t);
  const double spv_mem = best(reps, [&] { (void)K::compile_spirv(k); });
  setenv("KILN_GLSLC", "glslc", 1);  // the same kernel through the glslc process
  t = Clock::now();
  (void)K::compile_spirv(k, &tool_origin);
  const double spv_tool = since(t);
  unsetenv("KILN_GLSLC");
  std::string probe;
  {
    std::string cmd = std::string("\"") + argv[0] + "\" --disk-probe";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[256] = {0};
      if (std::fgets(buf, sizeof buf, p)) probe = buf;
      pclose(p);
    }
  }
  double cpu_disk = 0, spv_disk = 0;
  char o1[32] = "?", o2[32] = "?";
  std::sscanf(probe.c_str(), "%lf %31s %lf %31s", &cpu_disk, o1, &spv_disk, o2);
  std::printf(
      "\n## Compiling (the elementwise kernel; fresh cache folder)\n\n| target | first use | memory cache (best of %d) "
      "| "
      "disk cache (new process) |\n|---|---|---|---|\n",
      reps);
  std::printf("| C++ (system compiler, -O3) | %s (%s) | %s | %s (%s) |\n", ms(cpu_cold).c_str(),
              cpu_cold_origin.c_str(), us(cpu_mem).c_str(), ms(cpu_disk).c_str(), o1);
  std::printf("| SPIR-V (in process) | %s (%s) | %s | %s (%s) |\n", ms(spv_cold).c_str(), spv_origin.c_str(),
              us(spv_mem).c_str(), ms(spv_disk).c_str(), o2);
  std::printf("| SPIR-V (glslc process) | %s (%s) | | |\n", ms(spv_tool).c_str(), tool_origin.c_str());
  std::printf(
      "\nIn process, the first kernel of a process also pays the compiler's one-time setup: %s (the tree sum, "
      "%s); a Vulkan device starts that setup in the background when it opens. The 4 x 4 matmul's first use "
      "after it: %s (%s).\n",
      ms(spv_first).c_str(), first_origin.c_str(), ms(spv_mm).c_str(), mm_origin.c_str());

  // ---- the C++ target against Kiln's kernels ----
  const int r2 = smoke ? 2 : 20;
  manual_seed(0);
  const Device plain = Device::cpu().without_fusion();
  std::printf(
      "\n## Speed of the C++ target (one thread, best of %d, alternated)\n\n| case | kernel language | Kiln | ratio "
      "(Kiln time / kernel time) |\n|---|---|---|---|\n",
      r2);
  double err = 0;
  // A size that stays in the caches, and one that streams from memory.
  for (const int64_t n : {smoke ? int64_t{4096} : int64_t{1} << 20, smoke ? int64_t{8192} : int64_t{1} << 24}) {
    Tensor x = randn({n}).to(plain);
    Aligned xs(x.to_vector<float>()), ys(n);
    int32_t ni = static_cast<int32_t>(n);
    const auto [kern, hand] = best_alternated(
        r2,
        [&] {
          cpu({(n + 255) / 256}, {xs.arg(), ys.arg(), ni});
        },
        [&] {
          Tensor y = x * 1.5;
          (void)y;
        });
    Tensor yk = from_blob_copy(ys.p, {n}, f32, plain);
    err = std::max(err, (yk - x * 1.5).abs().max().item<double>());
    std::printf("| y = 1.5 x, %lld floats (Kiln: its Highway kernel) | %s | %s | %.2f |\n", static_cast<long long>(n),
                ms(kern).c_str(), ms(hand).c_str(), hand / kern);
  }
  {
    const int64_t n = smoke ? int64_t{4096} : int64_t{1} << 20;
    Tensor x = randn({n}).to(plain);
    Aligned xs(x.to_vector<float>()), ys(n);
    int32_t ni = static_cast<int32_t>(n);
    K::CpuKernel ek = K::compile_cpu(exp_kernel());
    const auto [kern, hand] = best_alternated(
        r2,
        [&] {
          ek({(n + 255) / 256}, {xs.arg(), ys.arg(), ni});
        },
        [&] {
          Tensor y = x.exp();
          (void)y;
        });
    Tensor yk = from_blob_copy(ys.p, {n}, f32, plain), want = x.exp();
    err = std::max(err, ((yk - want).abs() / want).max().item<double>());
    std::printf("| y = exp(x), %lld floats (Kiln: its Highway kernel) | %s | %s | %.2f |\n", static_cast<long long>(n),
                ms(kern).c_str(), ms(hand).c_str(), hand / kern);
  }
  const int64_t m = smoke ? 64 : 512;
  Tensor a = randn({m, m}).to(plain), bb = randn({m, m}).to(plain);
  Aligned av(a.to_vector<float>()), bv(bb.to_vector<float>()), cv(m * m);
  K::CpuKernel mm = K::compile_cpu(matmul_blocked());
  int32_t mi = static_cast<int32_t>(m);
  const int64_t gx = (m + 63) / 64, gy = (m + 3) / 4;
  const auto [kmm, hmm] = best_alternated(
      r2,
      [&] {
        mm({gx, gy}, {av.arg(), bv.arg(), cv.arg(), mi});
      },
      [&] {
        Tensor c = matmul(a, bb);
        (void)c;
      });
  Tensor ck = from_blob_copy(cv.p, {m, m}, f32, plain);
  const double mm_err = (ck - matmul(a, bb)).abs().max().item<double>();
  std::printf("| matmul %lld^3 (Kiln: oneDNN sgemm) | %s | %s | %.2f |\n", static_cast<long long>(m), ms(kmm).c_str(),
              ms(hmm).c_str(), hmm / kmm);
  std::printf("\nLargest differences from Kiln's results: elementwise %.2g (exp: relative), matmul %.2g.\n", err,
              mm_err);
  std::filesystem::remove_all(cache);
  return err < 1e-5 && mm_err < 1e-2 ? 0 : 1;
}
