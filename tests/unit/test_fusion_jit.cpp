// SPDX-License-Identifier: MIT OR Apache-2.0
// Compiled elementwise programs (cpu::vec::compiled_program): the disk cache (a kernel is
// compiled once, then loaded; a damaged object is rebuilt; nothing half-written is left), the
// fallbacks to the interpreter (no compiler, a failing compile), background compiles, and the
// generated source. Their bits are checked against the interpreter and the unfused kernels in
// test_fusion_program.cpp, whose every case also runs compiled.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/cpu/vec.h"
#include "fusion/fusion.h"
#include "fusion_jit_mode.h"
#include "fusion_small_limit.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

Device plain() { return Device::cpu().without_fusion(); }

/// A fresh cache folder for one test, and the default compiler and cache again afterwards.
struct FreshCache {
  fs::path dir;
  explicit FreshCache(const std::string& name) {
    dir = fs::temp_directory_path() / ("kiln_jit_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    cpu::vec::set_jit_compiler("", dir.string());
  }
  ~FreshCache() {
    cpu::vec::set_jit_compiler("", "");
    fs::remove_all(dir);
  }
  std::vector<fs::path> files(const std::string& ext) const {
    std::vector<fs::path> out;
    if (fs::exists(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ext) out.push_back(e.path());
    return out;
  }
};

/// x * a + tanh(x) - clamp(x, lo, hi), 3000 elements, fused; `lo` makes the program's source
/// (its Clamp bounds) unique to a test.
std::vector<float> run_chain(double lo, bool fused) {
  const int64_t n = 3000;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i % 97) - 48) * 0.125f;
  Device d = fused ? plain().fusion() : plain();
  Tensor x = tensor(v, {n}).to(d);
  return (x * 1.5 + tanh(x) - clamp(x, Scalar(lo), Scalar(2.0))).to_vector<float>();
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST(FusionJit, KernelsAreCompiledOnceThenLoadedFromDisk) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const test::SmallLimit all(0);
  const FreshCache cache("disk");
  const test::JitMode jit(cpu::vec::JitMode::kSync);
  ASSERT_EQ(cpu::vec::jit_unavailable_reason(), "");
  const std::vector<float> ref = run_chain(-0.25, false);
  const cpu::vec::JitStats s0 = cpu::vec::jit_stats();
  fusion::reset_stats();
  EXPECT_TRUE(same(run_chain(-0.25, true), ref));
  EXPECT_EQ(fusion::stats().compiled_groups, 1);
  EXPECT_EQ(cpu::vec::jit_stats().compiled, s0.compiled + 1);
  EXPECT_GT(cpu::vec::jit_stats().last_compile_s, 0.0);
  // the object, its checksum and its source under their final names; no temporary, no log
  ASSERT_EQ(cache.files(".so").size(), 1u);
  ASSERT_EQ(cache.files(".sum").size(), 1u);
  ASSERT_EQ(cache.files(".cpp").size(), 1u);
  EXPECT_TRUE(cache.files(".log").empty());
  for (const auto& e : fs::directory_iterator(cache.dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::ifstream src(cache.files(".cpp")[0]);
  const std::string text((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("ir::OpKind::Tanh"), std::string::npos);
  EXPECT_NE(text.find("kiln_program_source_hash"), std::string::npos);
  // The same program again: the in-memory table. Forgotten (as in a new process): the disk.
  EXPECT_TRUE(same(run_chain(-0.25, true), ref));
  EXPECT_EQ(cpu::vec::jit_stats().compiled, s0.compiled + 1);
  cpu::vec::set_jit_compiler("", cache.dir.string());
  fusion::reset_stats();
  EXPECT_TRUE(same(run_chain(-0.25, true), ref));
  EXPECT_EQ(fusion::stats().compiled_groups, 1);
  EXPECT_EQ(cpu::vec::jit_stats().compiled, s0.compiled + 1);
  EXPECT_EQ(cpu::vec::jit_stats().from_disk, s0.from_disk + 1);
}

TEST(FusionJit, DamagedCacheObjectIsRebuilt) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const test::SmallLimit all(0);
  const test::JitMode jit(cpu::vec::JitMode::kSync);
  const std::vector<float> ref = run_chain(-0.375, false);
  fs::path obj;
  {
    const FreshCache first("damaged_a");
    EXPECT_TRUE(same(run_chain(-0.375, true), ref));
    ASSERT_EQ(first.files(".so").size(), 1u);
    obj = first.files(".so")[0];
    std::ifstream in(obj, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A second cache holding the object cut short, as a crash in another process might leave it
    // if it wrote in place (this code writes to a temporary name and renames).
    const FreshCache second("damaged_b");
    fs::create_directories(second.dir);
    std::ofstream(second.dir / obj.filename(), std::ios::binary).write(bytes.data(), 1000);
    const fs::path sum = fs::path(obj).replace_extension(".sum");
    fs::copy_file(sum, second.dir / sum.filename());
    cpu::vec::set_jit_compiler("", second.dir.string());
    const cpu::vec::JitStats s0 = cpu::vec::jit_stats();
    fusion::reset_stats();
    EXPECT_TRUE(same(run_chain(-0.375, true), ref));
    EXPECT_EQ(fusion::stats().compiled_groups, 1);
    EXPECT_EQ(cpu::vec::jit_stats().compiled, s0.compiled + 1) << "the damaged object was not rebuilt";
    // compiled from stdin: the same bytes in both caches (no file name of a process inside)
    std::ifstream again(second.dir / obj.filename(), std::ios::binary);
    const std::vector<char> rebuilt((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(rebuilt == bytes) << "two compiles of one program differ: " << rebuilt.size() << " and " << bytes.size()
                                  << " bytes";
  }
}

TEST(FusionJit, NoCompilerOrAFailingOneLeavesTheInterpreter) {
  const test::SmallLimit all(0);
  const test::JitMode jit(cpu::vec::JitMode::kSync);
  const std::vector<float> ref = run_chain(-0.625, false);
  {
    const FreshCache cache("missing");
    cpu::vec::set_jit_compiler("/nonexistent/c++", cache.dir.string());
    EXPECT_NE(cpu::vec::jit_unavailable_reason().find("compiler"), std::string::npos)
        << cpu::vec::jit_unavailable_reason();
    fusion::reset_stats();
    EXPECT_TRUE(same(run_chain(-0.625, true), ref));
    EXPECT_EQ(fusion::stats().compiled_groups, 0);
    EXPECT_GE(fusion::stats().program_groups, 1);
  }
  if (!test::jit_expected()) return;
  const FreshCache cache("failing");
  cpu::vec::set_jit_compiler("false", cache.dir.string());  // runs, and exits with 1
  const cpu::vec::JitStats s0 = cpu::vec::jit_stats();
  fusion::reset_stats();
  EXPECT_TRUE(same(run_chain(-0.625, true), ref));
  EXPECT_EQ(fusion::stats().compiled_groups, 0);
  EXPECT_EQ(cpu::vec::jit_stats().failed, s0.failed + 1);
  EXPECT_TRUE(cache.files(".so").empty());
  size_t logs = 0;  // the compiler's output for the program, kept for reading
  for (const fs::path& f : cache.files(".log")) logs += f.filename().string().rfind("p", 0) == 0 ? 1 : 0;
  EXPECT_EQ(logs, 1u);
  // tried once: the failure is remembered
  EXPECT_TRUE(same(run_chain(-0.625, true), ref));
  EXPECT_EQ(cpu::vec::jit_stats().failed, s0.failed + 1);
}

TEST(FusionJit, UnwritableCacheFolderFallsBackToTmp) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  cpu::vec::set_jit_compiler("", "/proc/kiln_no_such_folder/programs");  // cannot be made
  EXPECT_EQ(cpu::vec::jit_cache_dir(), "/tmp/kiln-" + std::to_string(::getuid()) + "/programs");
  EXPECT_EQ(cpu::vec::jit_unavailable_reason(), "");
  cpu::vec::set_jit_compiler("", "");
}

TEST(FusionJit, BackgroundCompileThenTheKernelRuns) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const test::SmallLimit all(0);
  const FreshCache cache("async");
  const test::JitMode jit(cpu::vec::JitMode::kAsync);
  const std::vector<float> ref = run_chain(-0.875, false);
  fusion::reset_stats();
  EXPECT_TRUE(same(run_chain(-0.875, true), ref));  // interpreted while it compiles
  cpu::vec::wait_for_compiles();
  EXPECT_TRUE(same(run_chain(-0.875, true), ref));
  EXPECT_GE(fusion::stats().compiled_groups, 1);
  EXPECT_EQ(cache.files(".so").size(), 1u);
}

TEST(FusionJit, OffAndBelowTheSizeLimitInterpret) {
  const test::SmallLimit all(0);
  const std::vector<float> ref = run_chain(-0.5, false);
  {
    const test::JitMode off(cpu::vec::JitMode::kOff);
    fusion::reset_stats();
    EXPECT_TRUE(same(run_chain(-0.5, true), ref));
    EXPECT_EQ(fusion::stats().compiled_groups, 0);
  }
  const test::JitMode jit(cpu::vec::JitMode::kSync);
  fusion::set_jit_min_elements(3001);  // the chain has 3000
  fusion::reset_stats();
  EXPECT_TRUE(same(run_chain(-0.5, true), ref));
  EXPECT_EQ(fusion::stats().compiled_groups, 0);
}

TEST(FusionJit, ForkedChildInterpretsAndExits) {
  // A child forked while the parent's worker thread waits for work, and one forked while it
  // compiles: the child's programs (queued or new, even in sync mode) run in the interpreter,
  // and it exits without waiting for a thread it does not have.
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const test::SmallLimit all(0);
  const FreshCache cache("fork");
  const test::JitMode jit(cpu::vec::JitMode::kAsync);
  auto fork_and_check = [](double lo_queued, double lo_new) {
    const std::vector<float> ref = run_chain(lo_queued, false), ref2 = run_chain(lo_new, false);
    EXPECT_TRUE(same(run_chain(lo_queued, true), ref));  // its compile starts
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      cpu::vec::set_jit_mode(cpu::vec::JitMode::kSync);
      fusion::reset_stats();
      const bool ok = same(run_chain(lo_queued, true), ref) && same(run_chain(lo_new, true), ref2);
      std::exit(ok ? 0 : 1);  // static destructors run
    }
    int status = -1;
    for (int i = 0; i < 600 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(100000);
    if (::waitpid(pid, &status, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "the forked child did not exit within 60 s";
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    cpu::vec::wait_for_compiles();
    EXPECT_TRUE(same(run_chain(lo_queued, true), ref));
  };
  EXPECT_TRUE(same(run_chain(-0.9375, true), run_chain(-0.9375, false)));
  cpu::vec::wait_for_compiles();  // the worker waits for work
  fork_and_check(-0.9375, -0.8125);
  fork_and_check(-0.6875, -0.5625);  // the worker compiles -0.6875's kernel
}
