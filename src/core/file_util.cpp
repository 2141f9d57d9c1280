// SPDX-License-Identifier: MIT OR Apache-2.0
#include "core/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/error.h"

namespace kiln::store {

namespace {
// GNU strerror_r returns a char*, the XSI one (musl: WebAssembly) an int; one overload for each.
[[maybe_unused]] std::string strerror_text(const char* r, const char*, int) { return std::string(r); }
[[maybe_unused]] std::string strerror_text(int r, const char* buf, int err) {
  return r == 0 ? std::string(buf) : "error " + std::to_string(err);
}
}  // namespace

std::string errno_text(int err) {
  char buf[256];
  buf[0] = '\0';
  return strerror_text(strerror_r(err, buf, sizeof buf), buf, err);
}

namespace {
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int open_read(const std::string& path, const char* component) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, component, path << ": cannot open: " << errno_text(errno));
  return fd;
}

size_t regular_size(int fd, const std::string& path, const char* component) {
  struct stat st {};
  KILN_CHECK(::fstat(fd, &st) == 0, component, path << ": cannot stat: " << errno_text(errno));
  KILN_CHECK(!S_ISDIR(st.st_mode), component, path << ": is a directory, not a file");
  KILN_CHECK(S_ISREG(st.st_mode), component, path << ": not a regular file");
  return static_cast<size_t>(st.st_size);
}
}  // namespace

MappedFile::MappedFile(const std::string& path, const char* component) : path_(path) {
  Fd f{open_read(path, component)};
  size_ = regular_size(f.fd, path, component);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd, 0);
  KILN_CHECK(p != MAP_FAILED, component, path << ": cannot map " << size_ << " bytes: " << errno_text(errno));
  data_ = static_cast<uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

std::vector<uint8_t> read_file(const std::string& path, size_t max_bytes, const char* component) {
  Fd f{open_read(path, component)};
  size_t n = regular_size(f.fd, path, component);
  KILN_CHECK(n <= max_bytes, component,
             path << ": file of " << n << " bytes is larger than the limit of " << max_bytes);
  std::vector<uint8_t> out(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(f.fd, out.data() + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    KILN_CHECK(r >= 0, component, path << ": read failed: " << errno_text(errno));
    if (r == 0) break;  // the file shrank while we read it
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

uint64_t file_size(const std::string& path, const char* component) {
  struct stat st {};
  KILN_CHECK(::stat(path.c_str(), &st) == 0, component, path << ": cannot stat: " << errno_text(errno));
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace kiln::store
