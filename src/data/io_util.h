// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// File reading for kiln_data: plain or gzip-compressed files through zlib, read in chunks so a
// hostile size field never causes a large allocation before the data is actually there.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::data::io {

/// A file opened through zlib's gzopen (gzip or plain, detected from the content).
class GzFile {
 public:
  GzFile(const std::string& path, const char* component);
  ~GzFile();
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  /// Appends up to n bytes to out; returns how many were read (fewer at the end of the file).
  /// Throws naming the file when the compressed stream is corrupt.
  size_t read(std::vector<uint8_t>& out, size_t n);
  /// Appends everything left.
  void read_all(std::vector<uint8_t>& out);

 private:
  void* gz_;
  std::string path_;
  const char* component_;
};

/// Throws kiln::Error("[component] 'path' is a directory, not a file") when path names a directory.
void check_not_directory(const std::string& path, const char* component);

/// The whole (decompressed) content of a file.
std::vector<uint8_t> read_file(const std::string& path, const char* component);

}  // namespace kiln::data::io
