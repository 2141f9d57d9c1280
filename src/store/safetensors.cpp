// SPDX-License-Identifier: MIT OR Apache-2.0
// safetensors: read (memory-mapped, zero-copy where possible) and write (atomically).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
// then the data section, which the tensors' [begin, end) ranges (relative to its start) cover
// exactly: no overlaps, no holes (https://github.com/huggingface/safetensors, format spec).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/checked.h"
#include "core/file_util.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/store.h"

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace kiln::store {

namespace {

constexpr const char* kOp = "safetensors";
/// Largest header accepted (the Python / Rust reader's limit).
constexpr uint64_t kMaxHeader = 100'000'000;
/// Deepest JSON nesting accepted; a valid header needs 3.
constexpr int kMaxDepth = 16;

using ojson = nlohmann::ordered_json;

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {{"BOOL", DType::Bool}, {"U8", DType::U8},   {"I8", DType::I8},   {"I16", DType::I16},
                                 {"I32", DType::I32},   {"I64", DType::I64}, {"F16", DType::F16}, {"BF16", DType::BF16},
                                 {"F32", DType::F32},   {"F64", DType::F64}, {"U16", DType::U16}, {"U32", DType::U32},
                                 {"U64", DType::U64}};
/// dtypes of the format that Kiln has no type for.
constexpr const char* kUnsupported[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

const char* safetensors_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  return "?";
}

/// One tensor entry of a validated header.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // relative to the data section
  size_t order;         // position in the header
};

struct Layout {
  std::vector<Entry> entries;  // sorted by data offset (file order)
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length
  uint64_t data_size = 0;
};

std::string quote_name(std::string_view s) {
  std::string out = "'";
  size_t n = std::min<size_t>(s.size(), 80);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > n) out += "...";
  return out + "'";
}

/// Rejects JSON nested deeper than kMaxDepth before handing it to the parser.
void check_depth(const char* p, size_t n, const std::string& file) {
  int depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < n; ++i) {
    char c = p[i];
    if (in_string) {
      if (escape)
        escape = false;
      else if (c == '\\')
        escape = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      KILN_CHECK(++depth <= kMaxDepth, kOp, file << ": header JSON is nested deeper than " << kMaxDepth << " levels");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

/// Parses the JSON header, rejecting duplicate keys in any object (nlohmann keeps one silently).
ojson parse_json(const char* p, size_t n, const std::string& file) {
  check_depth(p, n, file);
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  ojson::parser_callback_t cb = [&](int, nlohmann::json::parse_event_t ev, ojson& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) {
      keys.emplace_back();
    } else if (ev == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == E::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
    }
    return true;
  };
  ojson j;
  std::string why;
  try {
    j = ojson::parse(p, p + n, cb, /*allow_exceptions=*/true);
  } catch (const nlohmann::json::exception& e) {
    why = e.what();
  }
  KILN_CHECK(why.empty(), kOp, file << ": header is not valid JSON: " << why);
  KILN_CHECK(duplicate.empty(), kOp, file << ": header has the key " << quote_name(duplicate) << " twice");
  return j;
}

uint64_t get_u64(const ojson& v, const std::string& file, const std::string& tensor, const char* what) {
  KILN_CHECK(v.is_number_integer() || v.is_number_float(), kOp,
             file << ": tensor " << quote_name(tensor) << ": " << what << " must be an integer, got " << v.type_name());
  KILN_CHECK(!v.is_number_float(), kOp,
             file << ": tensor " << quote_name(tensor) << ": " << what << " must be an integer, got " << v.dump());
  KILN_CHECK(v.is_number_unsigned(), kOp,
             file << ": tensor " << quote_name(tensor) << ": " << what << " is negative (" << v.dump() << ")");
  return v.get<uint64_t>();
}

DType parse_dtype(const ojson& v, const std::string& file, const std::string& tensor) {
  KILN_CHECK(v.is_string(), kOp,
             file << ": tensor " << quote_name(tensor) << ": dtype must be a string, got " << v.type_name());
  const std::string& s = v.get_ref<const std::string&>();
  for (const auto& d : kDTypes)
    if (s == d.name) return d.dtype;
  for (const char* u : kUnsupported)
    KILN_CHECK(s != u, kOp,
               file << ": tensor " << quote_name(tensor) << ": dtype " << quote_name(s) << " is not supported by Kiln");
  KILN_CHECK(false, kOp, file << ": tensor " << quote_name(tensor) << ": unknown dtype " << quote_name(s));
  return DType::F32;
}

/// Validates the header (bytes [8, 8 + n) of a file of `file_size` bytes).
Layout parse_header(const char* header, uint64_t n, uint64_t file_size, const std::string& file) {
  Layout L;
  L.data_start = 8 + n;
  L.data_size = file_size - L.data_start;
  ojson j = parse_json(header, n, file);
  KILN_CHECK(j.is_object(), kOp, file << ": header must be a JSON object, got " << j.type_name());
  size_t order = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const ojson& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      KILN_CHECK(v.is_object(), kOp, file << ": __metadata__ must be an object of strings, got " << v.type_name());
      for (auto m = v.begin(); m != v.end(); ++m) {
        KILN_CHECK(m.value().is_string(), kOp,
                   file << ": __metadata__ entry " << quote_name(m.key()) << " must be a string, got "
                        << m.value().type_name());
        L.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    KILN_CHECK(v.is_object(), kOp,
               file << ": tensor " << quote_name(name) << ": entry must be an object, got " << v.type_name());
    for (const char* k : {"dtype", "shape", "data_offsets"})
      KILN_CHECK(v.contains(k), kOp, file << ": tensor " << quote_name(name) << ": missing \"" << k << "\"");
    Entry e;
    e.name = name;
    e.order = order++;
    e.dtype = parse_dtype(v["dtype"], file, name);
    const ojson& shape = v["shape"];
    KILN_CHECK(shape.is_array(), kOp,
               file << ": tensor " << quote_name(name) << ": shape must be an array, got " << shape.type_name());
    int64_t numel = 1;
    for (const auto& d : shape) {
      uint64_t u = get_u64(d, file, name, "shape dimension");
      KILN_CHECK(u <= static_cast<uint64_t>(INT64_MAX), kOp,
                 file << ": tensor " << quote_name(name) << ": shape dimension " << d.dump() << " is too large");
      auto dim = static_cast<int64_t>(u);
      e.shape.push_back(dim);
      KILN_CHECK(!__builtin_mul_overflow(numel, dim, &numel), kOp,
                 file << ": tensor " << quote_name(name) << ": the number of elements of shape " << shape.dump()
                      << " overflows 64 bits");
    }
    int64_t nbytes = 0;
    KILN_CHECK(
        !__builtin_mul_overflow(numel, static_cast<int64_t>(dtype_size(e.dtype)), &nbytes), kOp,
        file << ": tensor " << quote_name(name) << ": the byte size of shape " << shape.dump() << " overflows 64 bits");
    const ojson& off = v["data_offsets"];
    KILN_CHECK(off.is_array() && off.size() == 2, kOp,
               file << ": tensor " << quote_name(name) << ": data_offsets must be [begin, end], got " << off.dump());
    e.begin = get_u64(off[0], file, name, "data_offsets begin");
    e.end = get_u64(off[1], file, name, "data_offsets end");
    KILN_CHECK(e.begin <= e.end, kOp,
               file << ": tensor " << quote_name(name) << ": data_offsets [" << e.begin << ", " << e.end
                    << "] end before they begin");
    KILN_CHECK(e.end <= L.data_size, kOp,
               file << ": tensor " << quote_name(name) << ": data_offsets [" << e.begin << ", " << e.end
                    << "] run past the end of the data section (" << L.data_size << " bytes; is the file truncated?)");
    KILN_CHECK(e.end - e.begin == static_cast<uint64_t>(nbytes), kOp,
               file << ": tensor " << quote_name(name) << ": data_offsets [" << e.begin << ", " << e.end << "] hold "
                    << (e.end - e.begin) << " bytes but shape " << shape.dump() << " of " << safetensors_name(e.dtype)
                    << " needs " << nbytes);
    L.entries.push_back(std::move(e));
  }
  std::stable_sort(L.entries.begin(), L.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // The tensors must cover the data section exactly (the format forbids overlaps and holes).
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : L.entries) {
    KILN_CHECK(e.begin >= pos, kOp,
               file << ": tensors " << quote_name(prev->name) << " and " << quote_name(e.name) << " overlap (bytes ["
                    << e.begin << ", " << pos << ") of the data section)");
    KILN_CHECK(e.begin == pos, kOp,
               file << ": bytes [" << pos << ", " << e.begin << ") of the data section belong to no tensor (a hole)");
    pos = e.end;
    prev = &e;
  }
  KILN_CHECK(pos == L.data_size, kOp,
             file << ": the data section has " << L.data_size << " bytes but the tensors cover " << pos
                  << " (trailing bytes)");
  return L;
}

/// Reads and checks the 8-byte length prefix of a file of `size` bytes; returns the header length.
uint64_t header_length(const uint8_t* prefix, uint64_t size, const std::string& file) {
  KILN_CHECK(size >= 8, kOp, file << ": file of " << size << " bytes is too short for a safetensors header (8 bytes)");
  uint64_t n = 0;
  std::memcpy(&n, prefix, 8);
  KILN_CHECK(n <= kMaxHeader, kOp,
             file << ": header length " << n << " is larger than the limit of " << kMaxHeader << " bytes");
  KILN_CHECK(n <= size - 8, kOp,
             file << ": header length " << n << " runs past the end of the file (" << size
                  << " bytes; is the file truncated?)");
  KILN_CHECK(n >= 2, kOp, file << ": header of " << n << " bytes cannot hold a JSON object");
  return n;
}

void check_bool_bytes(const uint8_t* p, size_t n, const Entry& e, const std::string& file) {
  for (size_t i = 0; i < n; ++i)
    KILN_CHECK(p[i] <= 1, kOp,
               file << ": BOOL tensor " << quote_name(e.name) << " holds the byte " << static_cast<int>(p[i])
                    << " at element " << static_cast<long long>(i) << " (only 0 and 1 are booleans)");
}

/// Tensors of `L` whose data section starts at `data` (already validated to hold data_size
/// bytes). With `owner`, tensors point into the bytes where they are aligned and the device
/// uses host memory in place (the CPU; a GPU with unified memory: Backend::wrap_host).
TensorMap build(const Layout& L, const uint8_t* data, const std::string& file, const Device& device,
                const std::shared_ptr<MappedFile>& owner) {
  TensorMap out;
  out.metadata = L.metadata;
  out.tensors.reserve(L.entries.size());
  const bool zero_copy = owner != nullptr;
  for (const Entry& e : L.entries) {
    const uint8_t* p = data + e.begin;
    size_t nbytes = static_cast<size_t>(e.end - e.begin);
    if (e.dtype == DType::Bool) check_bool_bytes(p, nbytes, e, file);
    const size_t es = dtype_size(e.dtype);
    std::shared_ptr<Storage> storage;
    if (zero_copy && nbytes > 0 && reinterpret_cast<uintptr_t>(p) % es == 0)
      storage = device.backend()->wrap_host(const_cast<uint8_t*>(p), nbytes, std::shared_ptr<void>(owner));
    if (storage)
      out.tensors.emplace_back(
          e.name, tensor_over_storage(std::move(storage), e.shape, contiguous_strides(e.shape), 0, e.dtype, device));
    else
      out.tensors.emplace_back(e.name, from_blob_copy(p, e.shape, e.dtype, device));
  }
  return out;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void pread_all(int fd, void* dst, size_t n, uint64_t off, const std::string& file) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t{1} << 30);
    ssize_t r = ::pread(fd, p, chunk, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    KILN_CHECK(r >= 0, kOp, file << ": read failed: " << errno_text(errno));
    KILN_CHECK(r > 0, kOp, file << ": file ended early (was it truncated while reading?)");
    p += r;
    off += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
}

/// load_safetensors without mmap: reads the header, then each tensor straight into its buffer.
TensorMap load_with_read(const std::string& path, const Device& device) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  KILN_CHECK(f.fd >= 0, kOp, path << ": cannot open: " << errno_text(errno));
  struct stat st {};
  KILN_CHECK(::fstat(f.fd, &st) == 0, kOp, path << ": cannot stat: " << errno_text(errno));
  KILN_CHECK(S_ISREG(st.st_mode), kOp, path << ": not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  uint8_t prefix[8] = {};
  if (size >= 8) pread_all(f.fd, prefix, 8, 0, path);
  uint64_t n = header_length(prefix, size, path);
  std::string header(static_cast<size_t>(n), '\0');
  pread_all(f.fd, header.data(), header.size(), 8, path);
  Layout L = parse_header(header.data(), n, size, path);
  TensorMap out;
  out.metadata = L.metadata;
  const bool direct = device.is_cpu();
  std::vector<uint8_t> staging;
  for (const Entry& e : L.entries) {
    size_t nbytes = static_cast<size_t>(e.end - e.begin);
    Tensor t = empty(e.shape, TensorOptions{.dtype = e.dtype, .device = device});
    if (nbytes > 0) {
      uint8_t* dst = nullptr;
      if (direct) {
        dst = static_cast<uint8_t*>(host_storage_data(t));
      } else {
        staging.resize(nbytes);
        dst = staging.data();
      }
      pread_all(f.fd, dst, nbytes, L.data_start + e.begin, path);
      if (e.dtype == DType::Bool) check_bool_bytes(dst, nbytes, e, path);
      if (!direct) device.backend()->write(*t.impl().storage, 0, dst, nbytes);
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

// ---- writing ----------------------------------------------------------------------------------

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  detail::OpScope scope(kOp);  // an allocation that fails while staging data names the writer
  std::set<std::string> names;
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    KILN_CHECK(!name.empty(), kOp, path << ": tensor names must not be empty");
    KILN_CHECK(name != "__metadata__", kOp, path << ": \"__metadata__\" cannot name a tensor");
    KILN_CHECK(names.insert(name).second, kOp, path << ": the tensor name " << quote_name(name) << " is used twice");
    KILN_CHECK(t.defined(), kOp, path << ": tensor " << quote_name(name) << " is undefined");
    const auto nbytes = static_cast<int64_t>(detail::checked_nbytes(t.shape(), t.dtype(), kOp));
    ojson e = ojson::object();
    e["dtype"] = safetensors_name(t.dtype());
    e["shape"] = ojson::array();
    for (int64_t d : t.shape()) e["shape"].push_back(d);
    const int64_t end = detail::checked_add(offset, nbytes, kOp);  // the file's data section must be addressable
    e["data_offsets"] = {offset, end};
    header[name] = std::move(e);
    offset = end;
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    KILN_CHECK(false, kOp, path << ": names and metadata must be valid UTF-8: " << e.what());
  }
  // Pad with spaces so the data section starts 8-byte aligned (like the Python writer).
  text.append((8 - text.size() % 8) % 8, ' ');
  KILN_CHECK(text.size() <= kMaxHeader, kOp,
             path << ": header of " << text.size() << " bytes is larger than readers accept (" << kMaxHeader << ")");
  write_atomic(path, [&](int fd) {
    uint64_t n = text.size();
    write_all(fd, &n, 8, path);
    write_all(fd, text.data(), text.size(), path);
    std::vector<uint8_t> buf;
    for (const auto& [name, t] : tensors) {
      size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
      if (nbytes == 0) continue;
      const auto* base = t.is_contiguous() ? static_cast<const uint8_t*>(host_storage_data(t)) : nullptr;
      if (base != nullptr) {
        const auto* p = base + t.storage_offset() * static_cast<int64_t>(t.element_size());
        write_all(fd, p, nbytes, path);
      } else {
        // A non-contiguous tensor is made contiguous on its device first, so that memory it cannot
        // get is a kiln::Error from the allocator ("[safetensors] out of memory ..."), not
        // std::bad_alloc from a host buffer.
        const Tensor c = t.contiguous();
        const auto* cb = static_cast<const uint8_t*>(host_storage_data(c));
        if (cb != nullptr) {
          write_all(fd, cb + c.storage_offset() * static_cast<int64_t>(c.element_size()), nbytes, path);
          continue;
        }
        try {
          buf.resize(nbytes);
        } catch (const std::bad_alloc&) {
          KILN_CHECK(false, kOp,
                     path << ": out of memory staging the " << static_cast<unsigned long>(nbytes) << " bytes of tensor "
                          << quote_name(name));
        }
        c.copy_to_host(buf.data(), c.dtype());
        write_all(fd, buf.data(), nbytes, path);
      }
    }
  });
}

// ---- reading ----------------------------------------------------------------------------------

TensorMap parse_safetensors(const void* data, size_t size, const std::string& name, const Device& device) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t n = header_length(p, size, name);
  Layout L = parse_header(reinterpret_cast<const char*>(p + 8), n, size, name);
  return build(L, p + L.data_start, name, device, nullptr);
}

TensorMap load_safetensors(const std::string& path, const ReadOptions& options) {
  if (!options.mmap) return load_with_read(path, options.device);
  auto map = std::make_shared<MappedFile>(path, kOp);
  uint64_t n = header_length(map->data(), map->size(), path);
  Layout L = parse_header(reinterpret_cast<const char*>(map->data() + 8), n, map->size(), path);
  return build(L, map->data() + L.data_start, path, options.device, map);
}

}  // namespace kiln::store
