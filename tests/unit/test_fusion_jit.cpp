// SPDX-License-Identifier: MIT OR Apache-2.0
// Compiled elementwise programs (cpu::vec::compiled_program): the disk cache (a kernel is
// compiled once, then loaded; a damaged object is rebuilt; nothing half-written is left), the
// fallbacks to the interpreter (no compiler, a failing compile), background compiles, and the
// generated source; the cache folder's housekeeping (a process that exits or is killed
// mid-compile, the size bound). Their bits are checked against the interpreter and the unfused kernels in
// test_fusion_program.cpp, whose every case also runs compiled.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/cpu/vec.h"
#include "fusion/fusion.h"
#include "fusion_jit_mode.h"
#include "fusion_small_limit.h"
#include "test_fork.h"

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
    if (test::jit_built())
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

TEST(FusionJit, CompilesRunBelowTheProgramsPriority) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const test::SmallLimit all(0);
  const test::JitMode jit(cpu::vec::JitMode::kSync);
  const FreshCache cache("nice");
  fs::create_directories(cache.dir);
  // A "compiler" that records its nice value (field 19 of /proc/<pid>/stat) and fails.
  const fs::path script = cache.dir / "cxx.sh", seen = cache.dir / "nice.txt";
  std::ofstream(script) << "#!/bin/sh\nawk '{print $19}' /proc/$$/stat > " << seen.string() << "\nexit 1\n";
  fs::permissions(script, fs::perms::owner_all);
  cpu::vec::set_jit_compiler(script.string(), cache.dir.string());
  errno = 0;
  const int before = getpriority(PRIO_PROCESS, 0);  // this thread's
  const std::vector<float> ref = run_chain(-0.3125, false);
  EXPECT_TRUE(same(run_chain(-0.3125, true), ref));  // interpreted: the compile failed
  int nice = -100;
  std::ifstream(seen) >> nice;
  EXPECT_GE(nice, 10) << "the compiler ran at nice " << nice;
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), before) << "the caller's priority changed";
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
    const int status = test::wait_child(pid, 60);
    if (status == -1) FAIL() << "the forked child did not exit within 60 s";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    cpu::vec::wait_for_compiles();
    EXPECT_TRUE(same(run_chain(lo_queued, true), ref));
  };
  EXPECT_TRUE(same(run_chain(-0.9375, true), run_chain(-0.9375, false)));
  cpu::vec::wait_for_compiles();  // the worker waits for work
  fork_and_check(-0.9375, -0.8125);
  fork_and_check(-0.6875, -0.5625);  // the worker compiles -0.6875's kernel
}

// ---- the cache folder: temporaries of processes that are gone, the size bound ---------------

namespace {

std::string host() {
  char b[256] = {};
  return ::gethostname(b, sizeof b - 1) == 0 && b[0] ? b : "localhost";
}

/// Writes `bytes` bytes to path (making its folder) and sets its modification time to `age`
/// seconds ago.
void plant(const fs::path& path, size_t bytes, double age = 0) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
  const double t = static_cast<double>(::time(nullptr)) - age;
  const timespec ts{static_cast<time_t>(t), 0}, both[2] = {ts, ts};
  ::utimensat(AT_FDCWD, path.c_str(), both, 0);
}

/// Sets KILN_JIT_CACHE_MB for the next set_jit_compiler ("": unset), and restores it. Declared
/// after FreshCache, so the default cache is configured with the old value.
struct CacheMB {
  std::string saved;
  bool had = false;
  explicit CacheMB(const std::string& mb) {
    const char* e = std::getenv("KILN_JIT_CACHE_MB");
    had = e != nullptr;
    saved = e ? e : "";
    set(mb);
  }
  static void set(const std::string& mb) {
    if (mb.empty())
      ::unsetenv("KILN_JIT_CACHE_MB");
    else
      ::setenv("KILN_JIT_CACHE_MB", mb.c_str(), 1);
  }
  ~CacheMB() { set(had ? saved : ""); }
};

/// A kernel's name in the cache (p and 32 hex digits).
std::string kernel_name(int i) {
  char b[40];
  std::snprintf(b, sizeof b, "p%032x", i);
  return b;
}

/// The names in dir that start with prefix.
std::vector<std::string> names_from(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

/// Whether a process runs with dir in its command line (a compiler writing into the cache).
bool compiler_running(const std::string& dir) {
  std::error_code ec;
  for (const auto& p : fs::directory_iterator("/proc", ec)) {
    const std::string pid = p.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(::getpid())) continue;
    std::ifstream in(p.path() / "cmdline", std::ios::binary);
    const std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find(dir) != std::string::npos) return true;
  }
  return false;
}

/// Starts this test program in a child running FusionJitChild.* (below): it starts compiling
/// into dir, and once its compiler runs, exits (mode "exit") or waits to be killed ("wait").
pid_t start_child(const std::string& mode, const fs::path& dir) {
  std::vector<std::string> env{"KILN_JIT_TEST_CHILD=" + mode, "KILN_JIT_TEST_CHILD_DIR=" + dir.string()};
  for (char** e = environ; *e; ++e)  // the child runs its one test, whatever shard runs this one
    if (std::strncmp(*e, "KILN_JIT_TEST_CHILD", 19) != 0 && std::strncmp(*e, "GTEST_", 6) != 0) env.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = fs::read_symlink("/proc/self/exe").string(), filter = "--gtest_filter=FusionJitChild.*";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

/// Waits up to `secs` for cond.
template <class F>
bool wait_for(F cond, double secs) {
  for (int i = 0; i < secs * 20; ++i) {
    if (cond()) return true;
    ::usleep(50000);
  }
  return cond();
}

}  // namespace

// The process the kill and exit tests start (skipped in a normal run).
TEST(FusionJitChild, StartsACompileThenExitsOrWaits) {
  const char* mode = std::getenv("KILN_JIT_TEST_CHILD");
  const char* dir = std::getenv("KILN_JIT_TEST_CHILD_DIR");
  if (!mode || !dir) GTEST_SKIP() << "run by FusionJit.*MidCompile*";
  const test::SmallLimit all(0);
  const test::JitMode jit(cpu::vec::JitMode::kAsync);
  cpu::vec::set_jit_compiler("", dir);
  run_chain(-0.0625, true);  // its compile starts in the background: the header first
  const std::string mine = "tmp-" + std::to_string(::getpid()) + "@";
  ASSERT_TRUE(wait_for([&] { return !names_from(dir, mine).empty(); }, 60));
  ::usleep(300000);  // the compiler runs
  if (std::strcmp(mode, "exit") == 0) std::exit(0);
  ::sleep(120);
}

TEST(FusionJit, ExitMidCompileLeavesNoTemporaryAndNoCompiler) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const FreshCache cache("exit");
  fs::create_directories(cache.dir);
  const pid_t pid = start_child("exit", cache.dir);
  ASSERT_GT(pid, 0);
  int status = -1;
  const bool exited = wait_for([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 90);
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  // At once, without another process's cleanup: the compiler and its temporaries are gone.
  EXPECT_FALSE(compiler_running(cache.dir.string()));
  EXPECT_TRUE(names_from(cache.dir, "tmp-").empty());
  for (const auto& e : fs::directory_iterator(cache.dir)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
    EXPECT_NE(e.path().extension(), ".gch") << e.path();  // cut short: never renamed into place
    EXPECT_NE(e.path().extension(), ".log") << e.path();
  }
}

TEST(FusionJit, KilledMidCompileIsCleanedUpByTheNextProcess) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const FreshCache cache("killed");
  fs::create_directories(cache.dir);
  const pid_t pid = start_child("wait", cache.dir);
  ASSERT_GT(pid, 0);
  const std::string folder = "tmp-" + std::to_string(pid) + "@";
  const bool started = wait_for([&] { return !names_from(cache.dir, folder).empty(); }, 60);
  ::usleep(500000);
  ::kill(pid, SIGKILL);  // no destructor runs: its temporaries stay, its compiler runs on
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(started) << "the child did not start compiling";
  ASSERT_TRUE(wait_for([&] { return !compiler_running(cache.dir.string()); }, 120));
  ASSERT_EQ(names_from(cache.dir, folder).size(), 1u) << "what the killed process left";
  cpu::vec::set_jit_compiler("", cache.dir.string());  // the next process opens the cache
  EXPECT_TRUE(names_from(cache.dir, folder).empty());
  for (const auto& e : fs::directory_iterator(cache.dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(FusionJit, StaleTemporariesGoLiveOnesStay) {
  if (!test::jit_built()) GTEST_SKIP() << "built without KILN_WITH_JIT: no cache";
  const FreshCache cache("stale");
  const pid_t dead = ::fork();  // a pid whose process is gone
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string d = std::to_string(dead), live = std::to_string(::getppid()), h = host();
  const fs::path& dir = cache.dir;
  struct Temp {
    fs::path path;
    double age;  ///< seconds
    bool stays;
  };
  const std::vector<Temp> temps = {
      {dir / ("tmp-" + d + "@" + h), 0, false},  // the folder of a dead process of this host
      {dir / ("kiln_program_00000000000000aa.h." + d + ".tmp.gch"), 0, false},  // earlier versions' names
      {dir / (kernel_name(1) + "." + d + ".tmp.so"), 0, false},
      {dir / ("." + kernel_name(2) + ".sum.tmp." + d + ".0123456789ab"), 0, false},  // store::write_atomic's
      {dir / ("tmp-1@" + h), 7200, false},                                           // a live pid's, over an hour old
      {dir / (kernel_name(3) + "." + live + ".tmp.cpp"), 7200, false},
      {dir / ("tmp-" + d + "@another-host-a"), 7200, false},
      {dir / ("tmp-" + live + "@" + h), 0, true},  // a live process's, at work
      {dir / (kernel_name(4) + "." + live + ".tmp.so"), 0, true},
      {dir / ("tmp-" + d + "@another-host-b"), 0, true},  // its pid means nothing here: only its age
      {dir / (kernel_name(5) + ".so"), 7200, true},       // an entry, however old
  };
  for (const Temp& t : temps) {
    if (t.path.filename().string().rfind("tmp-", 0) == 0)
      plant(t.path / "x.gch", 1000, t.age);
    else
      plant(t.path, 1000, t.age);
    const timespec ts{static_cast<time_t>(static_cast<double>(::time(nullptr)) - t.age), 0}, both[2] = {ts, ts};
    ::utimensat(AT_FDCWD, t.path.c_str(), both, 0);  // a folder's own time
  }
  cpu::vec::set_jit_compiler("", dir.string());
  for (const Temp& t : temps) EXPECT_EQ(fs::exists(t.path), t.stays) << t.path;
}

TEST(FusionJit, CachePastItsBoundLosesItsLeastRecentlyUsedEntries) {
  if (!test::jit_built()) GTEST_SKIP() << "built without KILN_WITH_JIT: no cache";
  const FreshCache cache("bound");
  const fs::path& dir = cache.dir;
  // 24 kernels of 64 KiB (their object and checksum), used 2 h ago and later, a header older
  // still, and a file that is not the cache's
  for (int i = 0; i < 24; ++i) {
    plant(dir / (kernel_name(i) + ".so"), 60000, 7200 - 60 * i);
    plant(dir / (kernel_name(i) + ".sum"), 5536, 7200 - 60 * i);
  }
  plant(dir / "kiln_program_00000000000000ab.h", 330, 9000);
  plant(dir / "kiln_program_00000000000000ab.h.gch", 100000, 9000);
  plant(dir / "notes.txt", 2 << 20, 10000);
  {
    const CacheMB none("0");  // no bound: nothing goes
    cpu::vec::set_jit_compiler("", dir.string());
    EXPECT_EQ(cache.files(".so").size(), 24u);
  }
  const CacheMB mb("1");  // 1.6 MiB in entries past 1 MiB: down to 80% of it
  cpu::vec::set_jit_compiler("", dir.string());
  EXPECT_FALSE(fs::exists(dir / "kiln_program_00000000000000ab.h.gch"));
  EXPECT_FALSE(fs::exists(dir / "kiln_program_00000000000000ab.h"));
  for (int i = 0; i < 24; ++i) {  // 12 * 64 KiB <= 0.8 MiB < 13 * 64 KiB
    EXPECT_EQ(fs::exists(dir / (kernel_name(i) + ".so")), i >= 12) << i;
    EXPECT_EQ(fs::exists(dir / (kernel_name(i) + ".sum")), i >= 12) << i;
  }
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
}

TEST(FusionJit, KernelsLoadedOrJustCompiledAreEvictedLast) {
  if (!test::jit_expected()) GTEST_SKIP() << "no compiled kernels on this target";
  const test::SmallLimit all(0);
  const FreshCache cache("lru");
  const test::JitMode jit(cpu::vec::JitMode::kSync);
  const fs::path& dir = cache.dir;
  const std::vector<float> ref = run_chain(-0.1875, false);
  CacheMB mb("1");
  cpu::vec::set_jit_compiler("", dir.string());
  for (int i = 0; i < 8; ++i) plant(dir / (kernel_name(i) + ".so"), 256 << 10, 7200 - i);
  // A compile past the bound: the old entries go; its kernel and the header in use stay.
  const cpu::vec::JitStats s0 = cpu::vec::jit_stats();
  EXPECT_TRUE(same(run_chain(-0.1875, true), ref));
  ASSERT_EQ(cpu::vec::jit_stats().compiled, s0.compiled + 1);
  EXPECT_TRUE(names_from(dir, "p0000").empty());
  ASSERT_EQ(cache.files(".so").size(), 1u);
  const fs::path kernel = cache.files(".so")[0];
  EXPECT_EQ(cache.files(".gch").size(), 1u);
  EXPECT_EQ(cache.files(".h").size(), 1u);
  // The kernel's files made the oldest, newer entries beside it; then it is loaded from disk.
  for (const char* ext : {".so", ".sum", ".cpp"}) {
    const fs::path f = fs::path(kernel).replace_extension(ext);
    const timespec ts{::time(nullptr) - 3 * 3600, 0}, both[2] = {ts, ts};
    ::utimensat(AT_FDCWD, f.c_str(), both, 0);
  }
  for (int i = 0; i < 4; ++i) plant(dir / (kernel_name(i) + ".so"), 100 << 10, 3600 - i);
  CacheMB::set("");
  cpu::vec::set_jit_compiler("", dir.string());
  EXPECT_TRUE(same(run_chain(-0.1875, true), ref));
  EXPECT_EQ(cpu::vec::jit_stats().from_disk, s0.from_disk + 1);
  // Past the bound again: the planted entries and the header go before the kernel just used.
  CacheMB::set("1");
  cpu::vec::set_jit_compiler("", dir.string());
  EXPECT_TRUE(names_from(dir, "p0000").empty());
  EXPECT_TRUE(cache.files(".gch").empty());
  EXPECT_TRUE(fs::exists(kernel));
  EXPECT_TRUE(fs::exists(fs::path(kernel).replace_extension(".sum")));
}
