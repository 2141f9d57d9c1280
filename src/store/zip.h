// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A minimal read-only zip reader over bytes held in memory (used by the PyTorch importer).
// The input is treated as hostile: every offset and size is checked against the byte span with
// overflow-safe arithmetic, and problems raise kiln::Error naming the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::store::zip {

/// One member of the archive, as its central directory describes it.
struct Entry {
  std::string name;
  uint16_t method = 0;  ///< 0 stored, 8 deflate (others are rejected on read)
  uint16_t flags = 0;
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;  ///< where the (compressed) bytes start, from the local header
};

/// True when the bytes start like a zip archive ("PK\3\4").
bool looks_like_zip(const void* data, size_t size);

/// A parsed zip archive. Does not own the bytes: they must outlive the Archive.
class Archive {
 public:
  /// Parses the end-of-central-directory record (zip64 included) and the central directory.
  /// `op` and `file` prefix error messages: "[op] file: problem".
  Archive(const void* data, size_t size, std::string file, std::string op = "load_torch");

  const std::vector<Entry>& entries() const { return entries_; }
  /// The entry called `name`, or nullptr.
  const Entry* find(std::string_view name) const;
  /// The bytes of a stored (method 0) entry, in place. Throws for other methods.
  const uint8_t* stored_data(const Entry& e) const;
  /// The uncompressed bytes of an entry (stored or deflate). The declared size must not exceed
  /// `max_size`, deflate output is bounded by the declared size (and deflate's maximum ratio),
  /// and the produced size and CRC-32 (deflate only) must match the directory.
  std::vector<uint8_t> read(const Entry& e, uint64_t max_size) const;

  const std::string& file() const { return file_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void parse();
  const uint8_t* data_;
  size_t size_;
  std::string file_, op_;
  std::vector<Entry> entries_;
  std::vector<size_t> sorted_;  // indices of entries_ sorted by name
};

}  // namespace kiln::store::zip
