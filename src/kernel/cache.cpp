// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kernel/cache.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

extern char** environ;

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
    std::filesystem::file_time_type when{};
    std::string base, main;
    uintmax_t bytes = 0;
  };
  std::map<std::string, Item> items;
  uintmax_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string(), ext = e.path().extension().string();
    if (n.rfind("k", 0) != 0) continue;
    std::string base = (e.path().parent_path() / e.path().stem()).string();
    uintmax_t size = e.file_size(ec);
    Item& it = items[base];
    it.base = base;
    it.bytes += size;
    if (ext != ".sum") {
      it.when = e.last_write_time(ec);
      it.main = e.path().string();
    }
    total += size;
  }
  std::vector<Item> order;
  for (auto& [b, it] : items) order.push_back(it);
  std::sort(order.begin(), order.end(), [](const Item& a, const Item& b) { return a.when < b.when; });
  const auto bound = static_cast<uintmax_t>(mb * 1024 * 1024);
  for (const Item& it : order) {
    if (total <= bound) break;
    if (it.base == keep) continue;
    if (!it.main.empty()) std::filesystem::remove(it.main, ec);
    std::filesystem::remove(it.base + ".sum", ec);
    total -= it.bytes;
  }
}

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
  const std::string dirs = path ? path : "/usr/bin:/bin";
  // Every compile looks its tool up (a cache hit too): the walk over PATH is remembered per
  // (command, PATH) for the process, and checked again only when the file it found is gone.
  static std::mutex mu;
  static std::map<std::string, std::string> found;
  const std::string key = cmd + '\n' + dirs;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = found.find(key); it != found.end() && access(it->second.c_str(), X_OK) == 0) return it->second;
  }
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + cmd).c_str(), X_OK) == 0) {
      std::lock_guard<std::mutex> lock(mu);
      return found[key] = dir + "/" + cmd;
    }
  return "";
}

std::string stamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "?";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
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

Artifact build(const ir::Kernel& k, const std::string& key, const std::string& source, const std::string& src_ext,
               const std::string& ext, const std::vector<std::string>& argv, const std::string& tool) {
  std::string dir = cache_dir();
  if (!make_dirs(dir)) throw Error(k.prefix() + "cannot create the kernel cache folder " + dir);
  sweep_temporaries(dir);
  Artifact a;
  std::string base = dir + "/k" + key, sum = base + ".sum";
  a.path = base + ext;
  a.bytes = read_all(a.path);
  if (!a.bytes.empty() && read_all(sum) == checksum(a.bytes)) {
    utimensat(AT_FDCWD, a.path.c_str(), nullptr, 0);  // recently used
    a.origin = "disk";
    return a;
  }
  static std::atomic<int> counter{0};
  std::string tmp = dir + "/tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + key.substr(0, 8);
  std::string in = tmp + src_ext, out = tmp + ext, log = tmp + ".log";
  if (!write_all(in, source)) throw Error(k.prefix() + "cannot write " + in);
  std::vector<std::string> args;
  for (const std::string& s : argv) args.push_back(s == "{in}" ? in : s == "{out}" ? out : s);
  int rc = run(args, log);
  std::string text = read_all(log);
  std::remove(in.c_str());
  std::remove(log.c_str());
  if (rc != 0) {
    std::remove(out.c_str());
    throw Error(k.prefix() + tool + " failed (" + argv[0] + ", status " + std::to_string(rc) + "):\n" +
                text.substr(0, 4000));
  }
  a.bytes = read_all(out);
  bool ok = !a.bytes.empty() && std::rename(out.c_str(), a.path.c_str()) == 0 &&
            write_all(tmp + ".sum", checksum(a.bytes)) && std::rename((tmp + ".sum").c_str(), sum.c_str()) == 0;
  if (!ok) {
    std::remove(out.c_str());
    std::remove((tmp + ".sum").c_str());
    throw Error(k.prefix() + "cannot write the built kernel into " + dir);
  }
  a.origin = "compiled";
  evict(dir, base);
  return a;
}

}  // namespace cache

std::string cache_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return std::string(d) + "/kernels";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/kiln/kernels";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/kiln/kernels";
  return "/tmp/kiln-" + std::to_string(getuid()) + "/kernels";
}

}  // namespace kiln::kernel
