// SPDX-License-Identifier: MIT OR Apache-2.0
// Atomic file writes: temp file in the target's folder, write, fsync, rename, fsync the folder.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <random>

#include "core/file_util.h"
#include "kiln/error.h"
#include "kiln/store.h"

namespace kiln::store {

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    // Linux writes at most ~2 GiB per call; stay below that.
    size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    KILN_CHECK(w > 0, "store.write", path << ": write failed: " << (w < 0 ? errno_text(errno) : "no progress"));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

namespace {
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  x ^= counter.fetch_add(1) * 0x9E3779B97F4A7C15ull;
  try {
    std::random_device rd;
    x ^= (static_cast<uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {
  }
  // splitmix64 finaliser
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  static const char* hex = "0123456789abcdef";
  std::string s(12, '0');
  for (auto& c : s) {
    c = hex[x & 15];
    x >>= 4;
  }
  return s;
}

void split_path(const std::string& path, std::string& dir, std::string& name) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    dir = ".";
    name = path;
  } else {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    name = path.substr(slash + 1);
  }
}
}  // namespace

void write_atomic(const std::string& path, const std::function<void(int fd)>& write) {
  const char* op = "store.write_atomic";
  std::string dir, name;
  split_path(path, dir, name);
  KILN_CHECK(!name.empty() && name != "." && name != "..", op, path << ": not a file name");
  std::string tmp =
      (dir == "/" ? std::string() : dir) + "/." + name + ".tmp." + std::to_string(::getpid()) + "." + random_suffix();
  // Keep the mode of a file we replace; new files get 0666 & ~umask like any other.
  mode_t mode = 0666;
  struct stat st {};
  bool existed = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (existed) mode = st.st_mode & 07777;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  KILN_CHECK(fd >= 0, op, path << ": cannot create the temporary file " << tmp << ": " << errno_text(errno));
  try {
    if (existed) (void)::fchmod(fd, mode);  // open() applied the umask
    write(fd);
    KILN_CHECK(::fsync(fd) == 0, op, path << ": fsync failed: " << errno_text(errno));
    int rc = ::close(fd);
    fd = -1;
    KILN_CHECK(rc == 0, op, path << ": close failed: " << errno_text(errno));
    KILN_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, op,
               path << ": cannot rename " << tmp << " over it: " << errno_text(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename is durable once the folder is synced. The new file is in place either way, so a
  // failure here is not reported as a failed write (some file systems refuse fsync on folders).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace kiln::store
