// SPDX-License-Identifier: MIT OR Apache-2.0
// Every kernel of the suite, and of the kernel library (one op of each family and storage, as
// the library launches it), rendered for the GPU targets and checked by the real tools: CUDA C
// compiled by NVRTC to CUBIN for sm_80 and sm_90, GLSL compiled to SPIR-V (in process where
// shaderc is linked, else by glslc) and validated by spirv-val. A tool that is not installed skips its test
// (GTEST_SKIP).
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "kernel/library.h"
#include "kernel/nvrtc.h"
#include "kernel/render.h"
#include "kernel_suite.h"
#include "library_launches.h"
#include "test_fork.h"

using namespace kiln::kernel;

namespace {

/// The suite with and without subgroups (the subgroup variants use subgroup_add and lane_id).
std::vector<std::pair<std::string, Kernel>> suite_kernels(bool with_subgroups) {
  std::vector<std::pair<std::string, Kernel>> out;
  for (const auto& e : suite::all()) out.emplace_back(e.name, e.make(Limits{}));
  if (with_subgroups) {
    Limits l;
    l.subgroups = true;
    l.subgroup_size = 32;
    out.emplace_back("block_sum+subgroups", suite::block_sum(l));
    out.emplace_back("shuffles", trace(
                                     "shuffles",
                                     [](Builder& b) {
                                       auto x = b.input<float>("x");
                                       auto y = b.output<float>("y");
                                       b.group_size(64);
                                       Val i = global_id(), v = x[i];
                                       Val s = subgroup_shuffle(v, (lane_id() + 1) % subgroup_size()) +
                                               subgroup_shuffle_xor(v, 1) + subgroup_max(v) - subgroup_min(v);
                                       y[i] = s;
                                     },
                                     l));
  }
  return out;
}

/// The kernels of the library sample (tests/library_launches.h), traced with default limits.
std::vector<std::pair<std::string, Kernel>> library_kernels() {
  std::vector<std::pair<std::string, Kernel>> out;
  kiln::test::for_each_library_launch([&](const std::string& name, const std::function<Kernel(const Limits&)>& trace) {
    out.emplace_back(name, trace(Limits{}));
  });
  return out;
}

std::string tool(const char* name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  return "";
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs a command, its output into `log`; the exit status.
int run(const std::string& cmd, std::string& log) {
  std::string out = std::filesystem::temp_directory_path() / ("kiln-tool-" + std::to_string(getpid()) + ".log");
  int rc = std::system((cmd + " > " + out + " 2>&1").c_str());
  log = read(out);
  std::remove(out.c_str());
  return rc;
}

}  // namespace

TEST(KernelTargets, CudaCompilesWithNvrtcForSm80AndSm90) {
  std::string why;
  if (!nvrtc::available(&why)) GTEST_SKIP() << why;
  using clock = std::chrono::steady_clock;
  int compiled = 0;
  double ms = 0;
  for (const auto& [name, k] : suite_kernels(true)) {
    std::string src = render(k, Target::Cuda);
    for (int arch : {80, 90}) {
      auto t0 = clock::now();
      std::string cubin;
      try {
        cubin = nvrtc::compile_cubin(src, name, arch);
      } catch (const kiln::Error& e) {
        ADD_FAILURE() << e.what() << "\n" << src;
        continue;
      }
      ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      EXPECT_EQ(cubin.substr(0, 4),
                "\x7f"
                "ELF")
          << name << " sm_" << arch;
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, 2 * static_cast<int>(suite_kernels(true).size()));
  std::printf("NVRTC %s: %d CUBINs, %.1f ms each\n", nvrtc::version().c_str(), compiled, ms / std::max(compiled, 1));
}

// Every kernel the library launches for its families and storages (elementwise with the math
// forms, random draws, reductions, scans, softmax, sort, index, movement, pooling, convolution
// and its gradients, norms, matmul and its tile variant, a fused chain) compiles to CUBIN for
// sm_80 and sm_90.
TEST(KernelTargets, LibraryKernelsCompileWithNvrtcForSm80AndSm90) {
  std::string why;
  if (!nvrtc::available(&why)) GTEST_SKIP() << why;
  const std::vector<std::pair<std::string, Kernel>> kernels = library_kernels();
  EXPECT_GE(kernels.size(), 40u);
  for (const char* prefix : {"fused_", "tail_", "epi_"})
    EXPECT_TRUE(
        std::any_of(kernels.begin(), kernels.end(), [&](const auto& k) { return k.first.rfind(prefix, 0) == 0; }))
        << "no " << prefix << " kernel";
  int compiled = 0;
  for (const auto& [name, k] : kernels) {
    const std::string src = render(k, Target::Cuda);
    for (int arch : {80, 90}) {
      try {
        const std::string cubin = nvrtc::compile_cubin(src, name, arch);
        EXPECT_EQ(cubin.substr(0, 4),
                  "\x7f"
                  "ELF")
            << name << " sm_" << arch;
        ++compiled;
      } catch (const kiln::Error& e) {
        ADD_FAILURE() << e.what() << "\n" << src;
      }
    }
  }
  EXPECT_EQ(compiled, 2 * static_cast<int>(kernels.size()));
  std::printf("NVRTC: %d library CUBINs from %zu kernels\n", compiled, kernels.size());
}

TEST(KernelTargets, CudaErrorsNameTheKernel) {
  if (!nvrtc::available()) GTEST_SKIP() << "no NVRTC";
  try {
    nvrtc::compile_cubin("extern \"C\" __global__ void f() { undefined_thing(); }", "broken", 80);
    FAIL() << "NVRTC accepted a broken program";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[kernel 'broken'] NVRTC failed for sm_80"), std::string::npos) << e.what();
  }
}

TEST(KernelTargets, GlslCompilesToValidSpirv) {
  std::string val = tool("spirv-val");
  if ((tool("glslc").empty() && tool("glslangValidator").empty()) || val.empty())
    GTEST_SKIP() << "glslc or spirv-val not installed (scripts/install-deps.sh)";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln-glsl-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);  // a fresh cache: every kernel is compiled
  using clock = std::chrono::steady_clock;
  double ms = 0;
  int n = 0;
  for (const auto& [name, k] : suite_kernels(true)) {
    std::string origin;
    auto t0 = clock::now();
    std::vector<uint32_t> words;
    try {
      words = compile_spirv(k, &origin);
    } catch (const kiln::Error& e) {
      ADD_FAILURE() << e.what() << "\n" << render(k, Target::Glsl);
      continue;
    }
    ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    ++n;
    // A fresh disk cache: compiled now, or earlier in this process (when tests share one).
    EXPECT_NE(origin, "disk") << name;
    EXPECT_EQ(words[0], 0x07230203u) << name;
    std::string spv = (dir / (name + ".spv")).string();
    std::ofstream(spv, std::ios::binary)
        .write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 4));
    std::string log;
    EXPECT_EQ(run(val + " --target-env vulkan1.2 " + spv, log), 0) << name << ": spirv-val:\n" << log;
    EXPECT_EQ(compile_spirv(k, &origin), words) << name;
    EXPECT_EQ(origin, "memory") << name;
  }
  std::printf("GLSL to SPIR-V: %d kernels, %.1f ms each on first use\n", n, ms / std::max(n, 1));
  if (saved.empty())
    unsetenv("KILN_CACHE_DIR");
  else
    setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  fs::remove_all(dir);
}

TEST(KernelTargets, InProcessGlslErrorsNameTheKernelAndTheLine) {
  if (!detail::spirv_in_process())
    GTEST_SKIP() << "built without shaderc (glslang-dev, libshaderc-dev) or KILN_GLSLC set";
  const std::string good = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n";
  const std::string spv = detail::glsl_to_spirv(good, "[kernel 'ok'] ");
  ASSERT_GE(spv.size(), 20u);
  uint32_t magic = 0;
  std::memcpy(&magic, spv.data(), 4);
  EXPECT_EQ(magic, 0x07230203u);
  try {
    (void)detail::glsl_to_spirv("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undeclared = 1; }\n",
                                "[kernel 'broken'] ");
    ADD_FAILURE() << "broken GLSL compiled";
  } catch (const kiln::Error& e) {
    const std::string w = e.what();
    EXPECT_EQ(w.rfind("[kernel 'broken'] the GLSL compiler (shaderc, in process) failed", 0), 0u) << w;
    EXPECT_NE(w.find("undeclared"), std::string::npos) << w;
    EXPECT_NE(w.find(":3:"), std::string::npos) << "the line of the error: " << w;
  }
  // The compiler is still usable after an error.
  EXPECT_EQ(detail::glsl_to_spirv(good, "[kernel 'ok'] "), spv);
}

TEST(KernelTargets, SpirvCompilesInAForkedChildThatThenExits) {
  // The in-process GLSL compiler may be busy when a process forks; its child compiles with the
  // tool instead, and exits cleanly (nothing of the parent's compiler is torn down there).
  if (tool("glslc").empty() && tool("glslangValidator").empty()) GTEST_SKIP() << "glslc not installed";
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln-glsl-fork-" + std::to_string(getpid()));
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  auto kernels = suite_kernels(false);
  ASSERT_GE(kernels.size(), 2u);
  (void)compile_spirv(kernels[0].second);
  detail::warm_spirv_compiler();  // its thread may still run when the process forks
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator is not fork-safe: a child forked while another thread holds
  // its lock waits forever. Under it the child is forked once the warm-up has ended.
  detail::join_spirv_warm_up();
#endif
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 3;
    try {
      std::vector<uint32_t> words = compile_spirv(kernels[1].second);
      rc = words.size() > 5 && words[0] == 0x07230203u ? 0 : 2;
    } catch (...) {
    }
    std::exit(rc);  // runs the static destructors, as a child's normal exit does
  }
  const int status = kiln::test::wait_child(pid, 60);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  if (saved.empty())
    unsetenv("KILN_CACHE_DIR");
  else
    setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  fs::remove_all(dir);
}

TEST(KernelTargets, WgslRendersEverySuiteKernelItCanExpress) {
  // No WGSL validator is installed here; the text is checked by the golden tests, and each
  // kernel that WGSL cannot express (i64, bf16) is refused with a kiln::Error.
  for (const auto& e : suite::all()) {
    Kernel k = e.make(Limits{});
    if (e.i64 || e.bf16) {
      EXPECT_THROW(render(k, Target::Wgsl), kiln::Error) << e.name;
      continue;
    }
    std::string src = render(k, Target::Wgsl);
    EXPECT_NE(src.find("@compute @workgroup_size("), std::string::npos) << e.name;
    EXPECT_EQ(src.find("?"), std::string::npos) << e.name << "\n" << src;
  }
}
