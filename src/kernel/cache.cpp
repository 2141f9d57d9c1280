// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kernel/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace kiln::kernel {
namespace cache {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
std::string checksum(const std::string& bytes) { return std::to_string(bytes.size()) + " " + hash128(bytes) + "\n"; }

}  // namespace

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

// ---- a cache folder's housekeeping --------------------------------------------------------------

namespace {

/// A kernel's entry: k<32 hex digits> (its object or SPIR-V, and the checksum beside it).
std::string kernel_entry(const std::string& name) {
  const std::string stem = name.substr(0, name.find('.'));
  return stem.size() == 33 && stem[0] == 'k' && stem.find_first_not_of("0123456789abcdef", 1) == std::string::npos
             ? stem
             : "";
}

/// Removes what earlier processes left in the kernel folder, once per folder and process.
void sweep_once(const std::string& dir) {
  static std::mutex mu;
  static std::set<std::string> swept;
  std::lock_guard<std::mutex> lock(mu);
  if (swept.insert(dir).second) remove_stale_temporaries(dir);
}

}  // namespace

Artifact build(const ir::Kernel& k, const std::string& key, const std::string& ext,
               const std::function<std::string(const std::string& tmp)>& produce) {
  std::string dir = cache_dir();
  if (!make_dirs(dir)) throw Error(k.prefix() + "cannot create the kernel cache folder " + dir);
  sweep_once(dir);
  Artifact a;
  std::string base = dir + "/k" + key, sum = base + ".sum";
  a.path = base + ext;
  a.bytes = read_all(a.path);
  if (!a.bytes.empty() && read_all(sum) == checksum(a.bytes)) {
    touch(a.path);  // recently used
    a.origin = "disk";
    return a;
  }
  static std::atomic<int> counter{0};
  // <entry>-<n>.<pid>.tmp<ext>: a temporary of this process (removed by the next process to open
  // the folder if this one dies before renaming it into place).
  std::string tmp = base + "-" + std::to_string(counter++) + "." + std::to_string(getpid()) + ".tmp";
  a.bytes = produce(tmp);
  std::string out = tmp + ext;
  bool ok = !a.bytes.empty() && write_all(out, a.bytes) && std::rename(out.c_str(), a.path.c_str()) == 0 &&
            write_all(tmp + ".sum", checksum(a.bytes)) && std::rename((tmp + ".sum").c_str(), sum.c_str()) == 0;
  if (!ok) {
    std::remove(out.c_str());
    std::remove((tmp + ".sum").c_str());
    throw Error(k.prefix() + "cannot write the built kernel into " + dir);
  }
  a.origin = "compiled";
  evict(dir, bound_bytes("KILN_KERNEL_CACHE_MB", 256), kernel_entry, {"k" + key});
  return a;
}

Artifact build(const ir::Kernel& k, const std::string& key, const std::string& source, const std::string& src_ext,
               const std::string& ext, const std::vector<std::string>& argv, const std::string& tool) {
  return build(k, key, ext, [&](const std::string& tmp) {
    std::string in = tmp + src_ext, out = tmp + ".out" + ext, log = tmp + ".log";
    if (!write_all(in, source)) throw Error(k.prefix() + "cannot write " + in);
    std::vector<std::string> args;
    for (const std::string& s : argv) args.push_back(s == "{in}" ? in : s == "{out}" ? out : s);
    int rc = run_tool(args, "", log);
    std::string text = read_all(log);
    std::remove(in.c_str());
    std::remove(log.c_str());
    std::string bytes = rc == 0 ? read_all(out) : "";
    std::remove(out.c_str());
    if (rc != 0)
      throw Error(k.prefix() + tool + " failed (" + argv[0] + ", status " + std::to_string(rc) + "):\n" +
                  text.substr(0, 4000));
    return bytes;
  });
}

}  // namespace cache

std::string cache_dir() { return cache::folder("kernels"); }

}  // namespace kiln::kernel
