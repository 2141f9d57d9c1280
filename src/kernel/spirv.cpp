// SPDX-License-Identifier: MIT OR Apache-2.0
// GLSL to SPIR-V through glslc (or glslangValidator), cached on disk like the CPU's shared
// objects. Debian's libshaderc.so is not linked (it is broken there); the tool is a process.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "kernel/cache.h"
#include "kernel/render.h"

namespace kiln::kernel {

std::vector<uint32_t> compile_spirv(const Kernel& kernel, std::string* origin, bool debug) {
  if (!kernel) throw Error("[kernel] compile_spirv: an empty Kernel");
  const ir::Kernel& k = kernel.ir();
  std::string src = gen::render_glsl(k, debug);
  cache::dump_source(k, "comp", src);
  std::vector<std::string> argv;
  const char* env = std::getenv("KILN_GLSLC");
  std::string tool = cache::find_executable(env && *env ? env : "glslc");
  if (!tool.empty()) {
    argv = {tool, "--target-env=vulkan1.2", "-fshader-stage=compute", "-O", "-o", "{out}", "{in}"};
  } else if (tool = cache::find_executable("glslangValidator"); !tool.empty()) {
    argv = {tool, "-V", "--target-env", "vulkan1.2", "-S", "comp", "-o", "{out}", "{in}"};
  } else {
    throw Error(k.prefix() + "no GLSL compiler: glslc or glslangValidator on PATH (KILN_GLSLC names another)");
  }
  std::string salt = tool + "|" + cache::stamp(tool);
  for (const auto& a : argv) salt += "|" + a;
  std::string key = cache::hash128(src + "\n" + salt);

  static std::mutex mu;
  static std::map<std::string, std::vector<uint32_t>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) {
    if (origin) *origin = "memory";
    return it->second;
  }
  cache::Artifact a = cache::build(k, key, src, ".comp", ".spv", argv, "the GLSL compiler");
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
