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

/// The kernels the library launches (variants too) for one op of each of its families and
/// storages, captured from tensor calls.
std::vector<std::pair<std::string, Kernel>> library_kernels() {
  using kiln::Tensor;
  using V = std::vector<Tensor>;
  namespace F = kiln::nn::functional;
  kiln::manual_seed(1);
  const Tensor x = kiln::randn({4, 6}), y = kiln::randn({4, 6}), img = kiln::randn({2, 4, 6, 6});
  const Tensor idx = kiln::tensor<int64_t>({0, 2, 1, 2}, {4}).reshape({4, 1});
  const std::vector<std::pair<kiln::CaptureFunction, V>> cases = {
      {[](const V& v) {
         return V{v[0].exp(), v[0].sin(), v[0].fmod(v[1]), v[0].atan2(v[1]), v[0].tanh()};
       },
       {x, y}},
      {[](const V& v) {
         return V{kiln::where(v[0] > v[1], v[0], v[1]), v[0].to(kiln::f16), v[0].pow(v[1])};
       },
       {x, y}},
      {[](const V& v) {
         return V{v[0].to(kiln::i64) + v[1].to(kiln::i64), kiln::floor_divide(v[0].to(kiln::i32), 3)};
       },
       {x, y}},
      {[](const V& v) {
         return V{v[0].to(kiln::i8) * v[1].to(kiln::i8), kiln::bernoulli(v[0].sigmoid())};
       },
       {x, y}},
      {[](const V& v) {
         return V{v[0] + kiln::rand_like(v[0]), v[0] + kiln::randn_like(v[0]),
                  v[0].flatten() + kiln::arange(0, 24, 1, kiln::f32, v[0].device())};
       },
       {x}},
      {[](const V& v) {
         return V{v[0].sum({1}), kiln::amax(v[0].to(kiln::f64), {0}), kiln::argmax(v[0], 1), kiln::var(v[0], {1})};
       },
       {x}},
      {[](const V& v) {
         return V{kiln::cumsum(v[0], 1), kiln::cummax(v[0], 0).first, kiln::softmax(v[0], 1),
                  kiln::log_softmax(v[0], 0)};
       },
       {x}},
      {[](const V& v) {
         return V{kiln::sort(v[0], 1).first, kiln::sort(v[0].to(kiln::i64), 0, true).second};
       },
       {x}},
      {[](const V& v) {
         return V{kiln::index_select(v[0], 0, v[1].flatten()), kiln::gather(v[0], 1, v[1]),
                  kiln::scatter_reduce(v[0], 1, v[1], v[0], "amax"), kiln::index_add(v[0], 0, v[1].flatten(), v[0])};
       },
       {x, idx}},
      {[](const V& v) {
         return V{kiln::pad(v[0], {1, 2}, "reflect"), kiln::cat({v[0], v[0]}, 1)};
       },
       {x}},
      {[](const V& v) {
         const auto [p, i] = F::max_pool2d_with_indices(v[0], 2);
         return V{p, F::avg_pool2d(v[0], 2), F::adaptive_avg_pool2d(v[0], 1), F::max_unpool2d(p, i, 2)};
       },
       {img}},
      {[](const V& v) {
         const kiln::TensorOptions on{.device = v[0].device()};
         const Tensor w = kiln::ones({3, 4, 3, 3}, on), b = kiln::ones({3}, on);
         const Tensor o = F::conv2d(v[0], w, b, {.padding = 1});
         return V{o, F::conv_transpose2d(o, w, {}, {.padding = 1}),
                  kiln::nn::grad::conv2d_weight(v[0], {3, 4, 3, 3}, o, {.padding = 1})};
       },
       {img}},
      {[](const V& v) {
         const kiln::TensorOptions o{.device = v[0].device()};
         return V{F::layer_norm(v[0], {6}, kiln::ones({6}, o), kiln::zeros({6}, o)), F::rms_norm(v[0], {6}),
                  F::group_norm(v[1].to(kiln::f16), 2)};
       },
       {x, img}},
      {[](const V& v) {
         return V{kiln::matmul(v[0], v[1].t()), kiln::matmul(v[0].to(kiln::f16), v[1].t().to(kiln::f16)),
                  kiln::matmul(v[0].to(kiln::i64), v[1].t().to(kiln::i64))};
       },
       {x, y}},
  };
  std::vector<std::pair<std::string, Kernel>> out;
  std::vector<std::string> seen;
  for (const auto& [fn, in] : cases) {
    const kiln::CapturedGraph g = kiln::capture(fn, in);
    for (const auto& node : g.nodes) {
      const std::optional<lib::Launch> l = lib::launch_of(*node.op, true);
      if (!l || std::find(seen.begin(), seen.end(), l->name) != seen.end()) continue;
      seen.push_back(l->name);
      out.emplace_back(l->name, l->trace(Limits{}));
      for (const auto& v : l->variants) out.emplace_back(v.name, v.trace(Limits{}));
    }
  }
  // A fused chain (lib::fused_launch): exp, fmod and tanh of the first case over a plain and a
  // broadcast operand, two of the values stored.
  const kiln::CapturedGraph g = kiln::capture(cases[0].first, cases[0].second);
  auto op_of = [&](kiln::ir::OpKind kind) -> const kiln::ir::Op* {
    for (const auto& node : g.nodes)
      if (node.op->kind == kind) return node.op.get();
    return nullptr;
  };
  const kiln::ir::Op *ex = op_of(kiln::ir::OpKind::Exp), *fm = op_of(kiln::ir::OpKind::Fmod),
                     *th = op_of(kiln::ir::OpKind::Tanh);
  if (ex && fm && th) {
    std::vector<lib::FusedLoad> loads(2);
    loads[0].desc = ex->inputs[0];
    loads[1].kind = lib::FusedLoad::Gather;
    loads[1].desc = fm->inputs[1];
    loads[1].shape = {4, 6};
    loads[1].strides = {0, 1};
    const std::vector<lib::FusedStep> steps = {{ex, {-1}, false}, {fm, {0, -2}, true}, {th, {1}, true}};
    if (const std::optional<lib::Launch> l = lib::fused_launch(loads, steps, 24, true))
      out.emplace_back(l->name, l->trace(Limits{}));
  }
  // The chain in a row op's kernel (exp closed by the layer norm with weight and bias) and in a
  // product's (tanh of the matmul's results): lib::fused_tail_launch, lib::fused_product_launch.
  auto first_of = [&](size_t c, kiln::ir::OpKind kind) -> const kiln::ir::Op* {
    const kiln::CapturedGraph gc = kiln::capture(cases[c].first, cases[c].second);
    for (const auto& node : gc.nodes)
      if (node.op->kind == kind) return new kiln::ir::Op(*node.op);  // outlives the graph
    return nullptr;
  };
  std::unique_ptr<const kiln::ir::Op> norm, mm;
  for (size_t c = 0; c < cases.size(); ++c) {
    if (!norm) norm.reset(first_of(c, kiln::ir::OpKind::LayerNorm));
    if (!mm) mm.reset(first_of(c, kiln::ir::OpKind::MatMul));
  }
  if (ex && th && norm && mm) {
    std::vector<lib::FusedLoad> loads(1);
    loads[0].desc = norm->inputs[0];
    if (const std::optional<lib::Launch> l = lib::fused_tail_launch(loads, {{ex, {-1}, false}}, 0, *norm, true))
      out.emplace_back(l->name, l->trace(Limits{}));
    loads[0].kind = lib::FusedLoad::Given;
    loads[0].desc = mm->outputs[0];
    if (const std::optional<lib::Launch> l = lib::fused_product_launch(*mm, false, loads, {{th, {-1}, true}}, true))
      out.emplace_back(l->name, l->trace(Limits{}));
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
