// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal file helpers of kiln::store (in core, so that every layer may use them: the
// safetensors and PyTorch readers, the compiled-programs cache of the CPU backend).
//
//   auto map = std::make_shared<store::MappedFile>(path);   // throws kiln::Error on failure
//   const uint8_t* p = map->data(); size_t n = map->size();
//   // tensors may point into the mapping; keep `map` alive through Storage::external
//
//   std::vector<uint8_t> bytes = store::read_file(path, /*max_bytes=*/1 << 30);
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::store {

/// A read-only view of a whole file mapped into memory (mmap MAP_PRIVATE with
/// PROT_READ|PROT_WRITE): writes through data() are copy-on-write, so in-place ops on tensors
/// that point into the mapping never change the file. An empty file maps to data() == nullptr
/// and size() == 0. Not copyable; share it with std::shared_ptr. Throws kiln::Error("[component]
/// <path>: <strerror>") when the file cannot be opened or mapped.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path, const char* component = "store");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Whether p lies inside the mapping (for tests of zero-copy loading).
  bool contains(const void* p) const {
    auto* b = static_cast<const uint8_t*>(p);
    return data_ != nullptr && b >= data_ && b < data_ + size_;
  }

 private:
  std::string path_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

/// Reads the whole file. Throws kiln::Error naming the path when it cannot be read or is
/// larger than max_bytes (checked from fstat before allocating).
std::vector<uint8_t> read_file(const std::string& path, size_t max_bytes = SIZE_MAX, const char* component = "store");

/// Size of a file in bytes; throws kiln::Error naming the path when it cannot be stat'ed.
uint64_t file_size(const std::string& path, const char* component = "store");

/// "<strerror(errno)>" for messages (thread-safe).
std::string errno_text(int err);

}  // namespace kiln::store
