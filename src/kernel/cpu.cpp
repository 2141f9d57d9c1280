// SPDX-License-Identifier: MIT OR Apache-2.0
// The C++ target's compiler, caches and launcher. The rendered source is compiled by the system
// compiler into a shared object, kept on disk under a hash of the source, the compiler (its path,
// size and modification time) and the flags, with a checksum beside it, and loaded with dlopen.
// A new entry is written under a temporary name and renamed into place, so a reader never sees
// half a file; a shared object whose checksum does not match is compiled again.
//
// This is a sibling of the fused-program compiler (src/backends/cpu/program_jit.cpp), which adds
// a background thread, precompiled headers, a size bound and a sweep of stale temporaries; the
// two keep separate cache folders ("programs", "kernels") until that compiler becomes a client
// of this one.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "core/parallel.h"
#include "kernel/ir.h"
#include "kernel/render.h"

extern char** environ;

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
};
using Entry = void (*)(const Args*, long long, long long);

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
std::string hash128(const std::string& s) {
  return hex(fnv1a(s, 1469598103934665603ull)) + hex(fnv1a(s, 0x84222325cbf29ce4ull ^ s.size()));
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
bool write_all(const std::string& path, const std::string& text) {
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o << text;
  return static_cast<bool>(o.flush());
}
std::string checksum(const std::string& bytes) { return std::to_string(bytes.size()) + " " + hash128(bytes) + "\n"; }

bool make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string find_executable(const std::string& cmd) {
  if (cmd.find('/') != std::string::npos) return access(cmd.c_str(), X_OK) == 0 ? cmd : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + cmd).c_str(), X_OK) == 0) return dir + "/" + cmd;
  return "";
}

std::string stamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "?";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
}

/// Runs `argv`, its output to `log`; the exit status (-1 when it cannot start).
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> a;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Removes the temporaries of compilers whose process is gone (a crash mid-compile), once per
/// folder and process.
void sweep_temporaries(const std::string& dir) {
  static std::mutex mu;
  static std::set<std::string> swept;
  std::lock_guard<std::mutex> lock(mu);
  if (!swept.insert(dir).second) return;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("tmp-", 0) != 0) continue;
    long pid = std::strtol(n.c_str() + 4, nullptr, 10);
    if (pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
    std::filesystem::remove(e.path(), ec);
  }
}

/// Keeps the cache folder under KILN_KERNEL_CACHE_MB (default 256; 0: no bound) by removing the
/// least recently used kernels (a load touches its files).
void evict(const std::string& dir, const std::string& keep) {
  double mb = 256;
  if (const char* e = std::getenv("KILN_KERNEL_CACHE_MB"); e && *e) mb = std::strtod(e, nullptr);
  if (!(mb > 0)) return;
  struct Item {
    std::filesystem::file_time_type when;
    std::string base;
    uintmax_t bytes;
  };
  std::map<std::string, Item> items;
  uintmax_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string(), ext = e.path().extension().string();
    if (n.rfind("k", 0) != 0 || (ext != ".so" && ext != ".sum")) continue;
    std::string base = (e.path().parent_path() / e.path().stem()).string();
    uintmax_t size = e.file_size(ec);
    Item& it = items[base];
    it.base = base;
    it.bytes += size;
    if (ext == ".so") it.when = e.last_write_time(ec);
    total += size;
  }
  std::vector<Item> order;
  for (auto& [b, it] : items) order.push_back(it);
  std::sort(order.begin(), order.end(), [](const Item& a, const Item& b) { return a.when < b.when; });
  const auto bound = static_cast<uintmax_t>(mb * 1024 * 1024);
  for (const Item& it : order) {
    if (total <= bound) break;
    if (it.base == keep) continue;
    std::filesystem::remove(it.base + ".so", ec);
    std::filesystem::remove(it.base + ".sum", ec);
    total -= it.bytes;
  }
}

/// The feature flags of this CPU (the first "flags" line of /proc/cpuinfo), "" where unknown.
const std::string& cpu_flags() {
  static const std::string flags = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("flags", 0) == 0) return line;
    return std::string();
  }();
  return flags;
}

void dump_source(const ir::Kernel& k, const std::string& ext, const std::string& text) {
  const char* d = std::getenv("KILN_KERNEL_DUMP");
  if (!d || !*d || !make_dirs(d)) return;
  std::string n;
  for (char c : k.name) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  write_all(std::string(d) + "/" + n + "-" + hash128(text).substr(0, 8) + "." + ext, text);
}

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

std::string cache_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return std::string(d) + "/kernels";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/kiln/kernels";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/kiln/kernels";
  return "/tmp/kiln-" + std::to_string(getuid()) + "/kernels";
}

namespace detail {
void dump_rendered(const ir::Kernel& k, Target t, const std::string& text) {
  static const char* ext[] = {"cpp", "cu", "comp", "wgsl"};
  dump_source(k, ext[static_cast<int>(t)], text);
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
  dump_source(k, dbg ? "debug.cpp" : "cpp", src);

  const char* cxx_env = std::getenv("KILN_KERNEL_CXX");
  std::string cxx = find_executable(cxx_env && *cxx_env ? cxx_env : "c++");
  if (cxx.empty())
    throw Error(k.prefix() + "no C++ compiler (c++ on PATH, or KILN_KERNEL_CXX) to build the CPU kernel");
  // -ffp-contract=off: a * b + c rounds twice, as written (no fused multiply-add).
  // -march=native: the cache key holds this CPU's feature flags, so a cache folder shared between
  // machines never hands one a kernel built for another.
  const std::vector<std::string> flags = {"-std=c++17", "-O3", "-march=native", "-ffp-contract=off", "-fPIC",
                                          "-shared",    "-w"};
  std::string salt = cxx + "|" + stamp(cxx) + "|" + cpu_flags();
  for (const auto& f : flags) salt += "|" + f;
  std::string key = hash128(src + "\n" + salt);

  std::lock_guard<std::mutex> lock(loaded_mutex);
  if (auto it = loaded.find(key); it != loaded.end()) {
    auto impl = std::make_shared<CpuKernel::Impl>(*it->second);
    impl->k = std::make_shared<const ir::Kernel>(k);
    impl->origin = "memory";
    return CpuKernel(std::move(impl));
  }

  std::string dir = cache_dir();
  if (!make_dirs(dir)) throw Error(k.prefix() + "cannot create the kernel cache folder " + dir);
  sweep_temporaries(dir);
  std::string base = dir + "/k" + key, so = base + ".so", sum = base + ".sum";
  std::string origin = "disk";
  std::string bytes = read_all(so);
  if (bytes.empty() || read_all(sum) != checksum(bytes)) {
    static std::atomic<int> counter{0};
    std::string tmp =
        dir + "/tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + key.substr(0, 8);
    if (!write_all(tmp + ".cpp", src)) throw Error(k.prefix() + "cannot write " + tmp + ".cpp");
    std::vector<std::string> argv = {cxx};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-o", tmp + ".so", tmp + ".cpp"});
    int rc = run(argv, tmp + ".log");
    std::string log = read_all(tmp + ".log");
    std::remove((tmp + ".cpp").c_str());
    std::remove((tmp + ".log").c_str());
    if (rc != 0) {
      std::remove((tmp + ".so").c_str());
      throw Error(k.prefix() + "the C++ compiler failed (" + cxx + ", status " + std::to_string(rc) + "):\n" +
                  log.substr(0, 4000));
    }
    bytes = read_all(tmp + ".so");
    bool ok = !bytes.empty() && std::rename((tmp + ".so").c_str(), so.c_str()) == 0 &&
              write_all(tmp + ".sum", checksum(bytes)) && std::rename((tmp + ".sum").c_str(), sum.c_str()) == 0;
    if (!ok) {
      std::remove((tmp + ".so").c_str());
      std::remove((tmp + ".sum").c_str());
      throw Error(k.prefix() + "cannot write the compiled kernel into " + dir);
    }
    origin = "compiled";
    evict(dir, base);
  } else {
    utimensat(AT_FDCWD, so.c_str(), nullptr, 0);  // recently used
  }
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
  size_t nb = k.buffers.size(), ns = k.scalars.size();
  if (args.size() != nb + ns)
    throw Error(k.prefix() + "takes " + std::to_string(nb) + " buffers and " + std::to_string(ns) + " scalars, got " +
                std::to_string(args.size()) + " arguments");
  std::vector<void*> bufs(nb);
  std::vector<long long> sizes(nb), iargs(ns);
  std::vector<double> fargs(ns);
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    bool want_buf = i < nb;
    Type want = want_buf ? k.buffers[i].type : k.scalars[i - nb].type;
    std::string what = want_buf ? "buffer '" + k.buffers[i].name + "'" : "scalar '" + k.scalars[i - nb].name + "'";
    if (a.is_buffer != want_buf || a.type != want)
      throw Error(k.prefix() + "argument " + std::to_string(i) + " (" + what + ") must be " +
                  (want_buf ? "a buffer of " : "a scalar of ") + std::string(type_name(want)) + ", got " +
                  (a.is_buffer ? "a buffer of " : "a scalar of ") + std::string(type_name(a.type)));
    if (want_buf) {
      if (!a.ptr && a.count > 0) throw Error(k.prefix() + what + " is null");
      bufs[i] = a.ptr;
      sizes[i] = a.count;
    } else {
      iargs[i - nb] = a.i;
      fargs[i - nb] = a.f;
    }
  }
  for (int64_t g : {groups.x, groups.y, groups.z})
    if (g < 0 || g > INT32_MAX)
      throw Error(k.prefix() + "a grid of " + std::to_string(groups.x) + "x" + std::to_string(groups.y) + "x" +
                  std::to_string(groups.z) + " groups is out of range");
  if (groups.x == 0 || groups.y == 0 || groups.z == 0) return;
  ErrorSlot err{0, 0, 0};
  Args a{bufs.data(),
         sizes.data(),
         iargs.data(),
         fargs.data(),
         {static_cast<unsigned>(groups.x), static_cast<unsigned>(groups.y), static_cast<unsigned>(groups.z)},
         &err};
  int64_t total = 0;
  if (__builtin_mul_overflow(groups.x * groups.y, groups.z, &total))
    throw Error(k.prefix() + "the grid has more than 2^63 groups");
  Entry entry = impl_->entry;
  parallel_for(total, 1, [&](int64_t b, int64_t e) { entry(&a, b, e); });
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
