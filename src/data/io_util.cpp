// SPDX-License-Identifier: MIT OR Apache-2.0
#include "data/io_util.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/error.h"

namespace kiln::data::io {

void check_not_directory(const std::string& path, const char* component) {
  struct stat st {};
  KILN_CHECK(::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), component,
             "'" << path << "' is a directory, not a file");
}

GzFile::GzFile(const std::string& path, const char* component) : gz_(nullptr), path_(path), component_(component) {
  check_not_directory(path, component);  // gzopen opens one, and the first read fails oddly
  gzFile f = gzopen(path.c_str(), "rb");
  KILN_CHECK(f != nullptr, component, "cannot open '" << path << "': " << std::strerror(errno));
  gzbuffer(f, 1 << 17);
  gz_ = f;
}

GzFile::~GzFile() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

size_t GzFile::read(std::vector<uint8_t>& out, size_t n) {
  constexpr size_t kChunk = size_t{16} << 20;
  size_t got = 0;
  while (got < n) {
    size_t want = std::min(kChunk, n - got);
    size_t old = out.size();
    out.resize(old + want);
    int r = gzread(static_cast<gzFile>(gz_), out.data() + old, static_cast<unsigned>(want));
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
      out.resize(old);
      KILN_CHECK(false, component_, "'" << path_ << "': corrupt compressed data (" << (msg ? msg : "?") << ")");
    }
    out.resize(old + static_cast<size_t>(r));
    got += static_cast<size_t>(r);
    if (static_cast<size_t>(r) < want) {
      // gzread returns short only at the end of the data, or on a truncated gzip stream.
      int errnum = 0;
      const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
      KILN_CHECK(errnum == Z_OK || errnum == Z_STREAM_END, component_,
                 "'" << path_ << "': corrupt or truncated compressed data (" << (msg ? msg : "?") << ")");
      break;
    }
  }
  return got;
}

void GzFile::read_all(std::vector<uint8_t>& out) {
  while (read(out, size_t{16} << 20) == (size_t{16} << 20)) {
  }
}

std::vector<uint8_t> read_file(const std::string& path, const char* component) {
  GzFile f(path, component);
  std::vector<uint8_t> out;
  f.read_all(out);
  return out;
}

}  // namespace kiln::data::io
