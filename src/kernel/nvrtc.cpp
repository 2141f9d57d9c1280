// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kernel/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "kiln/error.h"

namespace kiln::kernel::nvrtc {
namespace {

using Program = void*;
struct Api {
  void* lib = nullptr;
  std::string why;
  int (*version)(int*, int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  const char* (*error)(int) = nullptr;
};

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* h = std::getenv("CUDA_HOME"); h && *h) names.push_back(std::string(h) + "/lib64/libnvrtc.so");
    names.insert(names.end(), {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"});
    for (const std::string& n : names) {
      a.lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (a.lib) break;
    }
    if (!a.lib) {
      a.why = "libnvrtc not found (tried CUDA_HOME, the loader path and /usr/local/cuda/lib64)";
      return;
    }
    bool ok = bind_symbol(a.lib, "nvrtcVersion", a.version) && bind_symbol(a.lib, "nvrtcCreateProgram", a.create) &&
              bind_symbol(a.lib, "nvrtcDestroyProgram", a.destroy) &&
              bind_symbol(a.lib, "nvrtcCompileProgram", a.compile) &&
              bind_symbol(a.lib, "nvrtcGetCUBINSize", a.cubin_size) && bind_symbol(a.lib, "nvrtcGetCUBIN", a.cubin) &&
              bind_symbol(a.lib, "nvrtcGetProgramLogSize", a.log_size) &&
              bind_symbol(a.lib, "nvrtcGetProgramLog", a.log) && bind_symbol(a.lib, "nvrtcGetErrorString", a.error);
    if (!ok) {
      a.why = "libnvrtc lacks an entry point Kiln needs";
      dlclose(a.lib);
      a.lib = nullptr;
    }
  });
  return a;
}

}  // namespace

bool available(std::string* why) {
  const Api& a = api();
  if (!a.lib && why) *why = a.why;
  return a.lib != nullptr;
}

std::string version() {
  const Api& a = api();
  int major = 0, minor = 0;
  if (!a.lib || a.version(&major, &minor) != 0) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string compile_cubin(const std::string& source, const std::string& kernel, int arch) {
  const Api& a = api();
  std::string prefix = "[kernel '" + kernel + "'] ";
  if (!a.lib) throw Error(prefix + "NVRTC is not available: " + a.why);
  Program p = nullptr;
  if (int rc = a.create(&p, source.c_str(), (kernel + ".cu").c_str(), 0, nullptr, nullptr); rc != 0)
    throw Error(prefix + "nvrtcCreateProgram: " + a.error(rc));
  std::string gpu = "--gpu-architecture=sm_" + std::to_string(arch);
  // --fmad=false: a * b + c rounds twice, as written (the C++ target's -ffp-contract=off, the
  // GLSL target's `precise`); fma() is the fused form.
  const char* opts[] = {gpu.c_str(), "-std=c++17", "--fmad=false"};
  int rc = a.compile(p, 3, opts);
  size_t n = 0;
  a.log_size(p, &n);
  std::string log(n, '\0');
  if (n) a.log(p, log.data());
  std::string out;
  if (rc == 0 && a.cubin_size(p, &n) == 0) {
    out.resize(n);
    if (a.cubin(p, out.data()) != 0) out.clear();
  }
  a.destroy(&p);
  if (rc != 0 || out.empty())
    throw Error(prefix + "NVRTC failed for sm_" + std::to_string(arch) + " (" + (rc ? a.error(rc) : "no CUBIN") +
                "):\n" + log.substr(0, 4000));
  return out;
}

}  // namespace kiln::kernel::nvrtc
