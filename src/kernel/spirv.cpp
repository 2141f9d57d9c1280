// SPDX-License-Identifier: MIT OR Apache-2.0
// GLSL to SPIR-V, cached on disk like the CPU's shared objects. Built with KILN_WITH_SHADERC
// (glslang and shaderc linked statically: Debian's libshaderc.so is broken), the compiler runs
// in this process: glslang's one-time setup (~60 ms, its built-in symbol tables) is paid once
// per process, and warm_spirv_compiler() pays it in the background when a Vulkan device opens;
// after that a small kernel compiles in about a millisecond. Otherwise, or when KILN_GLSLC
// names a tool, glslc (or glslangValidator) runs as a process for each kernel (~60 ms each).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "kernel/cache.h"
#include "kernel/render.h"

#if KILN_WITH_SHADERC
#include <glslang/build_info.h>
#include <shaderc/shaderc.h>
#endif

namespace kiln::kernel {
namespace {

#if KILN_WITH_SHADERC
/// The process's in-process compiler: one shaderc compiler kept for the process's life (its
/// release would drop glslang's tables), used under a lock. It is never torn down: glslang's
/// teardown is unsafe in a forked child and needless at exit. A forked child (which may have
/// been forked while the parent compiled) uses the tool instead.
class InProcess {
 public:
  static InProcess& get() {
    static InProcess* p = new InProcess;
    static Joiner joiner{p};
    return *p;
  }
  /// False in a forked child of the process that made this compiler.
  bool usable() const { return getpid() == owner_; }
  /// Waits for the warm-up thread to end (in the process that started it).
  void join_warm_up() {
    std::lock_guard<std::mutex> lock(join_mu_);
    if (usable() && warmer_.joinable()) warmer_.join();
  }
  /// Starts glslang's one-time setup in a background thread (once).
  void warm() {
    std::call_once(warm_once_, [this] {
      std::lock_guard<std::mutex> lock(join_mu_);
      warmer_ = std::thread([this] {
        try {
          (void)compile("#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n", "warm-up");
        } catch (...) {  // the real compile reports any problem
        }
      });
    });
  }
  /// The SPIR-V of `glsl` as bytes; throws kiln::Error(prefix + the compiler's message).
  std::string compile(const std::string& glsl, const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!compiler_) compiler_ = shaderc_compiler_initialize();
    if (!compiler_) throw Error(prefix + "cannot start the GLSL compiler (shaderc)");
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_performance);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(compiler_, glsl.data(), glsl.size(), shaderc_compute_shader, "kernel.comp", "main", o);
    shaderc_compile_options_release(o);
    const bool ok = r && shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    std::string bytes = ok ? std::string(shaderc_result_get_bytes(r), shaderc_result_get_length(r)) : "";
    std::string message = r ? shaderc_result_get_error_message(r) : "no result";
    if (r) shaderc_result_release(r);
    if (!ok) throw Error(prefix + "the GLSL compiler (shaderc, in process) failed:\n" + message.substr(0, 4000));
    return bytes;
  }

 private:
  /// At exit, waits for the warm-up thread in the process that started it.
  struct Joiner {
    InProcess* p;
    ~Joiner() { p->join_warm_up(); }
  };
  pid_t owner_ = getpid();
  std::mutex mu_, join_mu_;
  shaderc_compiler_t compiler_ = nullptr;
  std::once_flag warm_once_;
  std::thread warmer_;
};
#endif

/// The command line of the GLSL compiler tool (KILN_GLSLC, else glslc, else glslangValidator);
/// empty when there is none.
std::vector<std::string> tool_argv() {
  const char* env = std::getenv("KILN_GLSLC");
  std::string tool = cache::find_executable(env && *env ? env : "glslc");
  if (!tool.empty()) return {tool, "--target-env=vulkan1.2", "-fshader-stage=compute", "-O", "-o", "{out}", "{in}"};
  if (tool = cache::find_executable("glslangValidator"); !tool.empty())
    return {tool, "-V", "--target-env", "vulkan1.2", "-S", "comp", "-o", "{out}", "{in}"};
  return {};
}

bool use_in_process() {
#if KILN_WITH_SHADERC
  const char* env = std::getenv("KILN_GLSLC");
  return !(env && *env) && InProcess::get().usable();
#else
  return false;
#endif
}

}  // namespace

namespace detail {
void warm_spirv_compiler() {
#if KILN_WITH_SHADERC
  if (use_in_process()) InProcess::get().warm();
#endif
}
bool spirv_in_process() { return use_in_process(); }
void join_spirv_warm_up() {
#if KILN_WITH_SHADERC
  if (use_in_process()) InProcess::get().join_warm_up();
#endif
}
std::string glsl_to_spirv(const std::string& glsl, const std::string& prefix) {
#if KILN_WITH_SHADERC
  if (use_in_process()) return InProcess::get().compile(glsl, prefix);
#endif
  throw Error(prefix + "no in-process GLSL compiler (built without shaderc, KILN_GLSLC set, or a forked child)");
}
}  // namespace detail

std::vector<uint32_t> compile_spirv(const Kernel& kernel, std::string* origin, bool debug) {
  if (!kernel) throw Error("[kernel] compile_spirv: an empty Kernel");
  const ir::Kernel& k = kernel.ir();
  std::string src = gen::render_glsl(k, debug);
  cache::dump_source(k, "comp", src);
  const bool in_process = use_in_process();
  std::vector<std::string> argv;
  std::string salt;
  if (in_process) {
#if KILN_WITH_SHADERC
    salt = "shaderc|glslang " + std::to_string(GLSLANG_VERSION_MAJOR) + "." + std::to_string(GLSLANG_VERSION_MINOR) +
           "." + std::to_string(GLSLANG_VERSION_PATCH) + "|vulkan1.2|performance";
#endif
  } else {
    argv = tool_argv();
    if (argv.empty())
      throw Error(k.prefix() + "no GLSL compiler: glslc or glslangValidator on PATH (KILN_GLSLC names another)");
    salt = argv[0] + "|" + cache::stamp(argv[0]);
    for (const auto& a : argv) salt += "|" + a;
  }
  std::string key = cache::hash128(src + "\n" + salt);

  static std::mutex mu;
  static std::map<std::string, std::vector<uint32_t>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) {
    if (origin) *origin = "memory";
    return it->second;
  }
  cache::Artifact a;
  if (in_process) {
#if KILN_WITH_SHADERC
    a = cache::build(k, key, ".spv", [&](const std::string&) { return detail::glsl_to_spirv(src, k.prefix()); });
#endif
  } else {
    a = cache::build(k, key, src, ".comp", ".spv", argv, "the GLSL compiler");
  }
  if (a.bytes.size() % 4 != 0 || a.bytes.size() < 20)
    throw Error(k.prefix() + "the GLSL compiler wrote no SPIR-V module (" + std::to_string(a.bytes.size()) + " bytes)");
  std::vector<uint32_t> words(a.bytes.size() / 4);
  std::memcpy(words.data(), a.bytes.data(), a.bytes.size());
  if (words[0] != 0x07230203u) throw Error(k.prefix() + "the GLSL compiler wrote no SPIR-V module (bad magic)");
  loaded[key] = words;
  if (origin) *origin = a.origin;
  return words;
}

}  // namespace kiln::kernel
