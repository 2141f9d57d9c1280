// SPDX-License-Identifier: MIT OR Apache-2.0
// Every kernel of the suite rendered for the GPU targets and checked by the real tools:
// CUDA C compiled by NVRTC to CUBIN for sm_80 and sm_90, GLSL compiled to SPIR-V by glslc and
// validated by spirv-val. A tool that is not installed skips its test (GTEST_SKIP).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernel/nvrtc.h"
#include "kernel_suite.h"

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
