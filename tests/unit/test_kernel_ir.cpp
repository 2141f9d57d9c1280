// SPDX-License-Identifier: MIT OR Apache-2.0
// Tracing and the passes, read through the IR dump; the specialisation key; the disk cache.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernel/render.h"
#include "kernel_suite.h"

using namespace kiln::kernel;

namespace {

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(KernelIr, ConstantsFold) {
  Kernel k = trace("fold", [](Builder& b) {
    auto y = b.output<int32_t>("y");
    Val c = (Val(2) * 3 + 1) << 2;  // 28
    y[global_id()] = c + 0;
  });
  std::string d = dump(k);
  EXPECT_EQ(count(d, "const 28"), 1u) << d;
  EXPECT_EQ(count(d, "= *"), 1u) << d;  // only group_id * group_size remains
  EXPECT_EQ(count(d, "<<"), 0u) << d;
}

TEST(KernelIr, ConstantsFoldByType) {
  Kernel k = trace("fold_types", [](Builder& b) {
    auto f = b.output<float>("f");
    auto i = b.output<int32_t>("i");
    auto u = b.output<uint32_t>("u");
    f[0] = Val(1.5f) * 2.0f + 0.25f;             // 3.25
    i[0] = Val(2147483647) + 1;                  // wraps to -2147483648
    u[0] = Val(0u) - 1u;                         // wraps to 4294967295
    i[1] = cast(Val(-2.75f), Type::I32) / 2;     // -2 / 2 = -1
    f[1] = select(Val(3) < 4, Val(1.0f), 2.0f);  // 1
  });
  std::string d = dump(k);
  EXPECT_NE(d.find("const 3.25"), std::string::npos) << d;
  EXPECT_NE(d.find("const -2147483648"), std::string::npos) << d;
  EXPECT_NE(d.find("const 4294967295"), std::string::npos) << d;
  EXPECT_NE(d.find("const -1"), std::string::npos) << d;
  EXPECT_EQ(count(d, "= +"), 0u) << d;
  EXPECT_EQ(count(d, "select"), 0u) << d;
  // The C++ target gives the same values when it runs.
  std::vector<float> fv(2, 0.f);
  std::vector<int32_t> iv(2, 0);
  std::vector<uint32_t> uv(1, 0);
  compile_cpu(k, 0)({1}, {fv, iv, uv});
  EXPECT_EQ(fv, (std::vector<float>{3.25f, 1.0f}));
  EXPECT_EQ(iv, (std::vector<int32_t>{INT32_MIN, -1}));
  EXPECT_EQ(uv[0], 4294967295u);
}

// i64 literals are exact at the ends of the range (a detour through double made INT64_MAX
// overflow to INT64_MIN).
TEST(KernelIr, I64LiteralsAreExact) {
  Kernel k = trace("i64_ends", [](Builder& b) {
    auto o = b.output<int64_t>("o");
    o[0] = Val(static_cast<long long>(INT64_MAX));
    o[1] = Val(static_cast<long long>(INT64_MIN));
    o[2] = Val(static_cast<long long>((int64_t{1} << 53) + 1));
  });
  std::vector<int64_t> ov(3, 0);
  compile_cpu(k, 0)({1}, {ov});
  EXPECT_EQ(ov, (std::vector<int64_t>{INT64_MAX, INT64_MIN, (int64_t{1} << 53) + 1}));
}

TEST(KernelIr, CommonSubexpressionsAndDeadCode) {
  Kernel k = trace("cse", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    Val i = global_id();
    Val v = x[i];
    Val a = v * 2.0f, c = v * 2.0f;  // the same product twice
    Val unused = exp(v) + 1.0f;      // never stored
    (void)unused;
    y[i] = a + c;
  });
  std::string d = dump(k);
  EXPECT_EQ(count(d, "= * %"), 2u) << d;  // group_id * 64 and one v * 2
  EXPECT_EQ(count(d, "exp"), 0u) << d;
}

TEST(KernelIr, UnrollsLoopsWithACompileTimeCount) {
  Kernel k = trace("unroll", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    Val n = b.scalar<int32_t>("n");
    Var acc(0.0f);
    for_(0, 4, [&](Val j) { acc += x[j]; });      // unrolled: four loads of x[0..3]
    for_(0, n, [&](Val j) { acc += x[j + 4]; });  // a run-time count stays a loop
    y[global_id()] = acc;
  });
  std::string d = dump(k);
  EXPECT_EQ(count(d, "for %"), 1u) << d;
  EXPECT_EQ(count(d, "load x["), 5u) << d;
}

TEST(KernelIr, SpecialisationKey) {
  Kernel a = suite::matmul(), b = trace("matmul_tiled", [](Builder&bb) { bb.param("tile", 8); });
  EXPECT_EQ(a.specialisation(), "tile=16");
  EXPECT_EQ(a.key(Target::Cpp), "matmul_tiled|tile=16|cpp|shared=32768,threads=1024,subgroup=1");
  EXPECT_NE(a.key(Target::Cpp), b.key(Target::Cpp));
  EXPECT_NE(a.key(Target::Cpp), a.key(Target::Glsl));
  Limits l;
  l.subgroups = true;
  EXPECT_EQ(suite::block_sum(l).key(Target::Cuda), "block_sum|group=128|cuda|shared=32768,threads=1024,subgroup=32");
  EXPECT_EQ(a.group_size(), (std::array<uint32_t, 3>{16, 16, 1}));
}

TEST(KernelIr, EverySuiteKernelRendersForEveryTarget) {
  // Tracing and rendering every suite kernel for every target; the time is printed, not checked
  // (bench/kiln_bench_kernel measures it).
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  int n = 0;
  for (int rep = 0; rep < 20; ++rep)
    for (const auto& e : suite::all()) {
      Kernel k = e.make(Limits{});
      for (Target t : {Target::Cpp, Target::Cuda, Target::Glsl, Target::Wgsl})
        if (t != Target::Wgsl || (!e.i64 && !e.bf16)) EXPECT_FALSE(render(k, t).empty());
      ++n;
    }
  double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / n;
  std::printf("trace + 4 renders: %.1f us per kernel\n", us);
}

TEST(KernelIr, DiskCacheAndChecksum) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / ("kiln-kernel-cache-" + std::to_string(getpid()))).string();
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  // A kernel unlike any other (its name), so that neither cache has it.
  std::string name = "cache_probe_" + std::to_string(getpid());
  Kernel k = trace(name, [](Builder& b) {
    auto y = b.output<float>("y");
    y[global_id()] = 3.0f;
  });
  // The temporary of a compiler whose process is gone is swept on first use of the folder.
  fs::create_directories(dir + "/kernels");
  std::string stale = dir + "/kernels/kdeadbeef-0.999999999.tmp.cpp";
  std::ofstream(stale) << "left by a crash";
  EXPECT_EQ(compile_cpu(k, 0).origin(), "compiled");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(compile_cpu(k, 0).origin(), "memory");
  EXPECT_EQ(cache_dir(), dir + "/kernels");
  int so = 0, sums = 0, other = 0;
  fs::path so_path;
  for (const auto& e : fs::directory_iterator(dir + "/kernels")) {
    std::string ext = e.path().extension().string();
    if (ext == ".so")
      ++so, so_path = e.path();
    else if (ext == ".sum")
      ++sums;
    else
      ++other;
  }
  EXPECT_EQ(so, 1);
  EXPECT_EQ(sums, 1);
  EXPECT_EQ(other, 0);  // no temporaries left
  // Another process finds it on disk; a damaged shared object fails its checksum there and is
  // compiled again.
  auto origin_in_child = [&]() {
    pid_t pid = fork();
    if (pid == 0) {
      detail::forget_loaded_kernels();
      std::string o = compile_cpu(k, 0).origin();
      std::_Exit(o == "disk" ? 10 : o == "compiled" ? 11 : 12);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(origin_in_child(), 10);
  {
    std::FILE* f = std::fopen(so_path.c_str(), "ab");
    ASSERT_NE(f, nullptr);
    std::fputs("junk", f);
    std::fclose(f);
  }
  EXPECT_EQ(origin_in_child(), 11);
  EXPECT_EQ(origin_in_child(), 10);
  // Under a size bound, the least recently used kernels leave the folder.
  setenv("KILN_KERNEL_CACHE_MB", "0.000001", 1);
  Kernel second = trace(name + "_b", [](Builder& b) {
    auto y = b.output<float>("y");
    y[global_id()] = 4.0f;
  });
  EXPECT_EQ(compile_cpu(second, 0).origin(), "compiled");
  unsetenv("KILN_KERNEL_CACHE_MB");
  so = 0;
  for (const auto& e : fs::directory_iterator(dir + "/kernels")) so += e.path().extension() == ".so";
  EXPECT_EQ(so, 1);
  if (saved.empty())
    unsetenv("KILN_CACHE_DIR");
  else
    setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  fs::remove_all(dir);
}
