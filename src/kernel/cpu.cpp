// SPDX-License-Identifier: MIT OR Apache-2.0
// The C++ target's compiler, in-memory cache and launcher. The rendered source is compiled by
// the system compiler into a shared object (kept in the disk cache, kernel/cache.h, under a hash
// of the source, the compiler, this CPU's features and the flags) and loaded with dlopen.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/machine.h"
#include "core/parallel.h"
#include "kernel/args.h"
#include "kernel/cache.h"
#include "kernel/ir.h"
#include "kernel/render.h"

namespace kiln::kernel {
namespace {

struct ErrorSlot {
  int set;
  int buf;
  long long index;
};
struct Args {
  void* const* bufs;
  const long long* sizes;
  const long long* iargs;
  const double* fargs;
  unsigned groups[3];
  ErrorSlot* err;
  unsigned long long stream;  ///< bit i: buffer i is an output too large for the cache
};
using Entry = void (*)(const Args*, long long, long long);

bool env_debug() {
  const char* e = std::getenv("KILN_KERNEL_DEBUG");
  return e && *e && std::strcmp(e, "0") != 0;
}

}  // namespace

struct CpuKernel::Impl {
  std::shared_ptr<const ir::Kernel> k;
  Entry entry = nullptr;
  bool debug = false;
  std::string origin;
};

namespace {
std::mutex loaded_mutex;
std::map<std::string, std::shared_ptr<const CpuKernel::Impl>> loaded;
}  // namespace

namespace detail {
void dump_rendered(const ir::Kernel& k, Target t, const std::string& text) {
  static const char* ext[] = {"cpp", "cu", "comp", "wgsl"};
  cache::dump_source(k, ext[static_cast<int>(t)], text);
}
void forget_loaded_kernels() {
  std::lock_guard<std::mutex> lock(loaded_mutex);
  loaded.clear();
}
}  // namespace detail

CpuKernel compile_cpu(const Kernel& kernel, int debug) {
  if (!kernel) throw Error("[kernel] compile_cpu: an empty Kernel");
  const ir::Kernel& k = kernel.ir();
  bool dbg = debug < 0 ? env_debug() : debug != 0;
  std::string src = gen::render_cpp(k, dbg);
  cache::dump_source(k, dbg ? "debug.cpp" : "cpp", src);

  const char* cxx_env = std::getenv("KILN_KERNEL_CXX");
  std::string cxx = cache::find_executable(cxx_env && *cxx_env ? cxx_env : "c++");
  if (cxx.empty())
    throw Error(k.prefix() + "no C++ compiler (c++ on PATH, or KILN_KERNEL_CXX) to build the CPU kernel");
  // -fwrapv: integer arithmetic wraps, as on the GPU targets (and shifts of negative values are
  // defined in C++20). -ffp-contract=off: a * b + c rounds twice, as written (no fused
  // multiply-add).
  // -march=native: the cache key holds this CPU's feature flags, so a cache folder shared between
  // machines never hands one a kernel built for another.
  const std::vector<std::string> flags = {"-std=c++20",        "-O3",   "-march=native", "-fwrapv",
                                          "-ffp-contract=off", "-fPIC", "-shared",       "-w"};
  std::string salt = cxx + "|" + cache::stamp(cxx) + "|" + cache::cpu_flags();
  for (const auto& f : flags) salt += "|" + f;
  std::string key = cache::hash128(src + "\n" + salt);

  std::lock_guard<std::mutex> lock(loaded_mutex);
  if (auto it = loaded.find(key); it != loaded.end()) {
    auto impl = std::make_shared<CpuKernel::Impl>(*it->second);
    impl->k = std::make_shared<const ir::Kernel>(k);
    impl->origin = "memory";
    return CpuKernel(std::move(impl));
  }

  std::vector<std::string> argv = {cxx};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", "{out}", "{in}"});
  cache::Artifact art = cache::build(k, key, src, ".cpp", ".so", argv, "the C++ compiler");
  const std::string& so = art.path;
  const std::string& origin = art.origin;
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw Error(k.prefix() + "cannot load " + so + ": " + dlerror());
  auto entry = reinterpret_cast<Entry>(dlsym(h, "kk_run"));
  if (!entry) throw Error(k.prefix() + "no kk_run in " + so);
  auto impl = std::make_shared<CpuKernel::Impl>();
  impl->k = std::make_shared<const ir::Kernel>(k);
  impl->entry = entry;
  impl->debug = dbg;
  impl->origin = origin;
  loaded[key] = impl;
  return CpuKernel(std::move(impl));
}

bool CpuKernel::debug() const { return impl_ && impl_->debug; }
const std::string& CpuKernel::origin() const {
  static const std::string none = "none";
  return impl_ ? impl_->origin : none;
}

void CpuKernel::operator()(Dim3 groups, std::initializer_list<Arg> args) const {
  launch(groups, std::vector<Arg>(args));
}

void CpuKernel::launch(Dim3 groups, const std::vector<Arg>& args) const {
  if (!impl_) throw Error("[kernel] launch of an empty CpuKernel");
  const ir::Kernel& k = *impl_->k;
  detail::check_launch(k, groups, args);
  const size_t nb = k.buffers.size(), ns = k.scalars.size();
  std::vector<void*> bufs(nb);
  std::vector<long long> sizes(nb), iargs(ns);
  std::vector<double> fargs(ns);
  for (size_t i = 0; i < args.size(); ++i) {
    if (i < nb) {
      bufs[i] = args[i].ptr;
      sizes[i] = args[i].count;
    } else {
      iargs[i - nb] = args[i].i;
      fargs[i - nb] = args[i].f;
    }
  }
  if (groups.x == 0 || groups.y == 0 || groups.z == 0) return;
  ErrorSlot err{0, 0, 0};
  // An output-only buffer past half the last-level cache is stored past the caches (as Kiln's
  // own elementwise kernels do: cpu::stream_stores).
  unsigned long long stream = 0;
  for (size_t i = 0; i < nb && i < 64; ++i)
    if (k.buffers[i].access == Access::Write && cpu::stream_stores(sizes[i] * gen::type_bytes(k.buffers[i].type)))
      stream |= 1ull << i;
  Args a{bufs.data(),
         sizes.data(),
         iargs.data(),
         fargs.data(),
         {static_cast<unsigned>(groups.x), static_cast<unsigned>(groups.y), static_cast<unsigned>(groups.z)},
         &err,
         stream};
  int64_t total = 0;
  if (__builtin_mul_overflow(groups.x * groups.y, groups.z, &total))
    throw Error(k.prefix() + "the grid has more than 2^63 groups");
  Entry entry = impl_->entry;
  parallel_for(total, 1, [&](int64_t b, int64_t e) { entry(&a, b, e); });
  if (err.set && err.buf < 0)
    throw Error(k.prefix() + "integer division by zero (or of the minimum by -1): " + std::to_string(err.index) +
                " divided");
  if (err.set) {
    bool shared = static_cast<size_t>(err.buf) >= nb;
    std::string what = shared ? "shared array '" + k.shared[static_cast<size_t>(err.buf) - nb].name + "'"
                              : "buffer '" + k.buffers[static_cast<size_t>(err.buf)].name + "'";
    long long size = shared ? k.shared[static_cast<size_t>(err.buf) - nb].count : sizes[static_cast<size_t>(err.buf)];
    throw Error(k.prefix() + "out-of-range access: " + what + " index " + std::to_string(err.index) + " (size " +
                std::to_string(size) + ")");
  }
}

}  // namespace kiln::kernel
