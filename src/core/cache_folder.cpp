// SPDX-License-Identifier: MIT OR Apache-2.0
#include "core/cache_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace kiln::cache_folder {

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

int run_tool(const std::vector<std::string>& argv, const std::string& input, const std::string& log,
             const std::function<void(int pid)>& started) {
#if defined(__EMSCRIPTEN__)
  (void)argv, (void)input, (void)log, (void)started;  // no processes in the browser or node
  return -1;
#else
  if (argv.empty()) return -1;
  std::vector<char*> a;
  for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, input.empty() ? "/dev/null" : input.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, a[0], &fa, &attr, a.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  if (started) started(static_cast<int>(pid));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#endif
}

namespace {

constexpr double kEvictTo = 0.8;            ///< eviction stops at this share of the bound
constexpr time_t kStaleTempSeconds = 3600;  ///< a temporary this old is removed, whoever owns it

const std::string& host_name() {
  static const std::string name = [] {
    char b[256] = {};
    return gethostname(b, sizeof b - 1) == 0 && b[0] ? std::string(b) : std::string("localhost");
  }();
  return name;
}

bool all_digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

/// The parts of s between the separators (read for every file of a cache folder when a process
/// opens it: no stream).
std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t from = 0;;) {
    const size_t at = s.find(sep, from);
    out.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return out;
    from = at + 1;
  }
}

/// The process that owns a temporary, from its name: a folder tmp-<pid>@<host>, or a file with a
/// "tmp" part beside its pid (<name>.<pid>.tmp.<ext>, store::write_atomic's .<name>.tmp.<pid>.<x>).
/// pid -1: not a temporary; 0: one whose owner is unknown.
struct Owner {
  long pid = -1;
  std::string host;  ///< "" for a file (this host's)
};
Owner temp_owner(const std::string& name) {
  Owner o;
  if (name.rfind("tmp-", 0) == 0) {
    const size_t at = name.find('@');
    const std::string pid = name.substr(4, at == std::string::npos ? std::string::npos : at - 4);
    o.pid = all_digits(pid) ? std::strtol(pid.c_str(), nullptr, 10) : 0;
    o.host = at == std::string::npos ? "" : name.substr(at + 1);
    return o;
  }
  if (name.find("tmp") == std::string::npos) return o;  // most names of a folder: no split
  const std::vector<std::string> parts = split_on(name, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] != "tmp") continue;
    o.pid = i > 0 && all_digits(parts[i - 1])                  ? std::strtol(parts[i - 1].c_str(), nullptr, 10)
            : i + 1 < parts.size() && all_digits(parts[i + 1]) ? std::strtol(parts[i + 1].c_str(), nullptr, 10)
                                                               : 0;
    return o;
  }
  return o;
}

/// Calls f(name) for each entry of dir but "." and "..". readdir, not std::filesystem's
/// iterator, which builds and parses a path per entry: for a cache folder of a thousand files,
/// that was a third of a short process's start.
template <class F>
void for_each_name(const std::string& dir, const F& f) {
  const std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return;
  while (const dirent* e = readdir(d.get()))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) f(std::string(e->d_name));
}

}  // namespace

std::string folder(const std::string& sub) {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return std::string(d) + "/" + sub;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/kiln/" + sub;
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/kiln/" + sub;
  return fallback_folder(sub);
}

std::string fallback_folder(const std::string& sub) { return "/tmp/kiln-" + std::to_string(getuid()) + "/" + sub; }

std::string temp_folder_name() { return "tmp-" + std::to_string(getpid()) + "@" + host_name(); }

bool is_temporary(const std::string& name) { return temp_owner(name).pid >= 0; }

uint64_t bound_bytes(const char* env, double default_mb) {
  double mb = default_mb;
  if (const char* e = std::getenv(env); e && *e) {
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && *end == '\0' && v >= 0) mb = v;
  }
  return static_cast<uint64_t>(mb * 1024 * 1024);
}

void touch(const std::string& path) { utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

void remove_tree(const std::string& path) {
  std::error_code ec;
  for (int attempt = 0; attempt < 3; ++attempt)
    if (std::filesystem::remove_all(path, ec) != static_cast<std::uintmax_t>(-1) && !ec) return;
}

void remove_stale_temporaries(const std::string& dir) {
  const std::string own = temp_folder_name();
  const time_t now = time(nullptr);
  for_each_name(dir, [&](const std::string& name) {
    const Owner o = temp_owner(name);
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (o.pid < 0 || name == own || lstat(path.c_str(), &st) != 0) return;
    const bool here = o.host.empty() || o.host == host_name();
    const bool gone = here && o.pid > 0 && kill(static_cast<pid_t>(o.pid), 0) != 0 && errno == ESRCH;
    if (gone || now - st.st_mtime > kStaleTempSeconds) remove_tree(path);
  });
}

void evict(const std::string& dir, uint64_t bound, const std::function<std::string(const std::string&)>& entry_of,
           const std::set<std::string>& keep) {
  if (bound == 0) return;
  struct Group {
    double used = 0;
    uint64_t bytes = 0;
    std::vector<std::string> files;
  };
  std::map<std::string, Group> groups;
  uint64_t total = 0;
  for_each_name(dir, [&](const std::string& name) {
    const std::string entry = is_temporary(name) ? "" : entry_of(name);
    std::string path = dir + "/" + name;
    struct stat st {};
    if (entry.empty() || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    Group& g = groups[entry];
    g.used = std::max(g.used, static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9);
    g.bytes += static_cast<uint64_t>(st.st_size);
    g.files.push_back(std::move(path));
    total += static_cast<uint64_t>(st.st_size);
  });
  if (total <= bound) return;
  std::vector<std::pair<double, const Group*>> order;
  for (const auto& [entry, g] : groups)
    if (!keep.count(entry)) order.emplace_back(g.used, &g);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto target = static_cast<uint64_t>(static_cast<double>(bound) * kEvictTo);
  for (const auto& [used, g] : order) {
    if (total <= target) break;
    for (const std::string& f : g->files) std::remove(f.c_str());
    total -= g->bytes;
  }
}

}  // namespace kiln::cache_folder
