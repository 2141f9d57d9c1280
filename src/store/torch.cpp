// SPDX-License-Identifier: MIT OR Apache-2.0
// PyTorch .pt/.pth import: the zip format (torch >= 1.6) and the legacy stream format, read
// through the restricted unpickler in pickle.cpp. Storages are materialised once per key and
// shared, so views saved together stay views of one buffer; on the CPU, storages of stored zip
// entries point into the memory-mapped file without a copy.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/backend.h"
#include "core/charconv.h"
#include "core/file_util.h"
#include "kiln/error.h"
#include "kiln/store.h"
#include "store/pickle.h"
#include "store/zip.h"

namespace kiln::store {

namespace {

using pickle::Kind;
using pickle::StorageRef;
using pickle::TensorRef;
using pickle::Value;

constexpr const char* kOp = "load_torch";
constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 30;
constexpr int kMaxDepth = 256;
constexpr size_t kMaxNameBytes = size_t{1} << 16;
// Legacy files start with pickle(0x1950a86a20f9469cfc6c): LONG1 with these 10 bytes.
constexpr uint8_t kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  KILN_CHECK(false, kOp, file << ": " << what);
  __builtin_unreachable();
}

/// Python's repr of a float: shortest round-trip text, with ".0" for integral values.
std::string float_text(double f) {
  if (f != f) return "nan";
  if (f == __builtin_inf()) return "inf";
  if (f == -__builtin_inf()) return "-inf";
  char buf[64];
  auto r = kiln::detail::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

/// A big integer (little-endian two's complement) as decimal text (hex beyond 64 bytes).
std::string bigint_text(const std::string& le) {
  if (le.size() > 64) {  // decimal conversion is quadratic: give huge values in hex (two's complement)
    static const char* hex = "0123456789abcdef";
    std::string s = "0x";
    for (size_t k = le.size(); k-- > 0;) {
      s += hex[static_cast<uint8_t>(le[k]) >> 4];
      s += hex[static_cast<uint8_t>(le[k]) & 15];
    }
    return s;
  }
  std::vector<uint8_t> mag(le.begin(), le.end());
  bool neg = !mag.empty() && (mag.back() & 0x80);
  if (neg) {  // two's complement negate
    for (auto& b : mag) b = static_cast<uint8_t>(~b);
    for (auto& b : mag)
      if (++b != 0) break;
  }
  std::string digits;
  while (true) {
    bool zero = true;
    uint32_t rem = 0;
    for (size_t k = mag.size(); k-- > 0;) {
      uint32_t cur = (rem << 8) | mag[k];
      mag[k] = static_cast<uint8_t>(cur / 10);
      rem = cur % 10;
      zero = zero && mag[k] == 0;
    }
    digits.push_back(static_cast<char>('0' + rem));
    if (zero) break;
  }
  if (neg) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

/// Where the bytes of one storage key are.
struct StorageBytes {
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  bool in_source = true;  ///< data points into the input (else into `inflated`)
  std::shared_ptr<std::vector<uint8_t>> inflated;
};

class Loader {
 public:
  Loader(const uint8_t* data, size_t size, std::string file, Device device, std::shared_ptr<void> owner)
      : data_(data), size_(size), file_(std::move(file)), device_(device), owner_(std::move(owner)) {
    budget_ = 16 * static_cast<uint64_t>(size) + 4096;
    text_budget_ = 64 * static_cast<uint64_t>(size) + (uint64_t{1} << 24);
  }

  TensorMap load() {
    if (zip::looks_like_zip(data_, size_)) return load_zip();
    if (size_ >= 2 && data_[0] == 0x80) return load_legacy();
    if (size_ >= 262 && std::memcmp(data_ + 257, "ustar", 5) == 0)
      fail(file_, "the pre-1.0 tar format of torch.save is not supported (re-save it with a current PyTorch)");
    fail(file_, "not a PyTorch file: neither a zip archive nor a legacy torch.save pickle");
  }

 private:
  // ---- persistent ids --------------------------------------------------------------------
  Value persistent_load(const Value& pid) {
    if (!pid.is(Kind::Tuple))
      fail(file_, std::string("persistent id must be a tuple, got ") + pickle::kind_name(pid.kind));
    const auto& t = pid.obj->items;
    if (t.empty() || !t[0].is(Kind::Str) || t[0].obj->str != "storage")
      fail(file_, "unsupported persistent id (only ('storage', ...) is understood)");
    if (t.size() < 5) fail(file_, "storage persistent id has " + std::to_string(t.size()) + " fields, expected 5");
    if (!t[1].is(Kind::Global)) fail(file_, "storage persistent id: second field must be a storage type");
    auto dt = pickle::storage_dtype(t[1].obj->str, file_);
    if (!dt) fail(file_, "'" + t[1].obj->str + "' is not a storage type");
    std::string key;
    if (t[2].is(Kind::Str)) {
      key = t[2].obj->str;
    } else if (t[2].is(Kind::Int)) {
      key = std::to_string(t[2].i);
    } else {
      fail(file_, "storage persistent id: key must be a string");
    }
    if (!t[4].is(Kind::Int) || t[4].i < 0)
      fail(file_, "storage '" + key + "': element count must be a non-negative int");
    StorageRef* s = arena_.storage(file_);
    s->key = key;
    s->dtype = *dt;
    s->numel = t[4].i;
    if (t[3].is(Kind::Str)) s->location = t[3].obj->str;
    if (t.size() >= 6 && t[5].is(Kind::Tuple)) {
      // Legacy storage view: (view_key, offset, size) into the root storage `key`.
      const auto& vm = t[5].obj->items;
      if (vm.size() != 3 || !vm[1].is(Kind::Int) || !vm[2].is(Kind::Int) || vm[1].i < 0 || vm[2].i < 0)
        fail(file_, "storage '" + key + "': malformed view metadata");
      int64_t off = 0;
      if (__builtin_mul_overflow(vm[1].i, static_cast<int64_t>(dtype_size(*dt)), &off))
        fail(file_, "storage '" + key + "': view offset overflows");
      s->byte_offset = off;
      s->numel = vm[2].i;
    }
    key_dtype_.emplace(key, *dt);  // the first reference decides the legacy element size
    Value v;
    v.kind = Kind::Storage;
    v.storage = s;
    return v;
  }

  Value unpickle(size_t& pos, bool with_pid) {
    pickle::PersistentLoad pl;
    if (with_pid) pl = [this](const Value& pid) { return persistent_load(pid); };
    return pickle::unpickle(data_, size_, pos, arena_, file_, pl);
  }

  // ---- zip format ------------------------------------------------------------------------
  TensorMap load_zip() {
    zip::Archive ar(data_, size_, file_, kOp);
    const zip::Entry* pkl = nullptr;
    for (const auto& e : ar.entries()) {
      std::string_view n = e.name;
      if (n == "data.pkl" || (n.size() > 9 && n.substr(n.size() - 9) == "/data.pkl" &&
                              n.substr(0, n.size() - 9).find('/') == std::string_view::npos)) {
        if (!pkl || e.name.size() < pkl->name.size()) pkl = &e;
      }
    }
    if (!pkl) fail(file_, "not a PyTorch file: the zip archive has no data.pkl");
    std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);  // keeps the trailing '/'
    if (ar.find(prefix + "constants.pkl"))
      fail(file_, "this is a TorchScript archive (torch.jit.save), not a torch.save file; save a state_dict instead");
    if (const zip::Entry* bo = ar.find(prefix + "byteorder")) {
      auto b = ar.read(*bo, 64);
      std::string order(b.begin(), b.end());
      if (order != "little") fail(file_, "byte order '" + order + "' is not supported (only little-endian files)");
    }
    std::vector<uint8_t> pickle_bytes = ar.read(*pkl, kMaxPickleBytes);
    size_t pos = 0;
    // The pickle is parsed from its own buffer; swap it in for the duration.
    const uint8_t* saved_data = data_;
    size_t saved_size = size_;
    data_ = pickle_bytes.data();
    size_ = pickle_bytes.size();
    Value root;
    try {
      root = unpickle(pos, true);
    } catch (...) {
      data_ = saved_data;
      size_ = saved_size;
      throw;
    }
    data_ = saved_data;
    size_ = saved_size;
    resolve_ = [this, &ar, prefix](const std::string& key) {
      StorageBytes sb;
      std::string entry = prefix + "data/" + key;
      const zip::Entry* e = ar.find(entry);
      if (!e) fail(file_, "storage '" + key + "' is missing (no entry '" + entry + "' in the archive)");
      if (e->method == 0) {
        sb.data = ar.stored_data(*e);
        sb.nbytes = e->uncompressed_size;
      } else {
        sb.inflated = std::make_shared<std::vector<uint8_t>>(ar.read(*e, UINT64_MAX));
        sb.data = sb.inflated->data();
        sb.nbytes = sb.inflated->size();
        sb.in_source = false;
      }
      return sb;
    };
    return flatten_root(root);
  }

  // ---- legacy format ---------------------------------------------------------------------
  TensorMap load_legacy() {
    size_t pos = 0;
    Value magic = unpickle(pos, false);
    if (!magic.is(Kind::BigInt) || magic.obj->str.size() != sizeof kLegacyMagic ||
        std::memcmp(magic.obj->str.data(), kLegacyMagic, sizeof kLegacyMagic) != 0)
      fail(file_, "not a PyTorch file: a pickle without torch.save's magic number (a plain pickle is not accepted)");
    Value proto = unpickle(pos, false);
    if (!proto.is(Kind::Int) || proto.i != 1001) fail(file_, "unsupported legacy protocol version (expected 1001)");
    Value sys_info = unpickle(pos, false);
    if (sys_info.is(Kind::Dict)) {
      const auto& it = sys_info.obj->items;
      for (size_t k = 0; k + 1 < it.size(); k += 2)
        if (it[k].is(Kind::Str) && it[k].obj->str == "little_endian" && it[k + 1].is(Kind::Bool) && !it[k + 1].i)
          fail(file_, "big-endian files are not supported");
    }
    Value root = unpickle(pos, true);
    Value keys = unpickle(pos, false);
    if (!keys.is(Kind::List)) fail(file_, "legacy format: the storage key list is missing");
    for (const Value& k : keys.obj->items) {
      if (!k.is(Kind::Str)) fail(file_, "legacy format: storage keys must be strings");
      const std::string& key = k.obj->str;
      auto dt = key_dtype_.find(key);
      if (dt == key_dtype_.end()) fail(file_, "legacy format: storage '" + key + "' is listed but never used");
      if (size_ - pos < 8) fail(file_, "legacy format: truncated before storage '" + key + "'");
      int64_t numel = 0;
      std::memcpy(&numel, data_ + pos, 8);
      pos += 8;
      uint64_t nbytes = 0;
      if (numel < 0 || __builtin_mul_overflow(static_cast<uint64_t>(numel), dtype_size(dt->second), &nbytes) ||
          nbytes > size_ - pos)
        fail(file_, "legacy format: storage '" + key + "' declares " + std::to_string(numel) +
                        " elements, more than the " + std::to_string(size_ - pos) + " bytes left in the file");
      StorageBytes sb;
      sb.data = data_ + pos;
      sb.nbytes = nbytes;
      if (!legacy_.emplace(key, sb).second) fail(file_, "legacy format: storage '" + key + "' is listed twice");
      pos += static_cast<size_t>(nbytes);
    }
    resolve_ = [this](const std::string& key) {
      auto it = legacy_.find(key);
      if (it == legacy_.end()) fail(file_, "storage '" + key + "' is missing (not in the file's storage list)");
      return it->second;
    };
    return flatten_root(root);
  }

  // ---- storages and tensors --------------------------------------------------------------
  struct Materialized {
    std::shared_ptr<Storage> storage;
    const uint8_t* bytes = nullptr;  // host copy of the data for validation
    uint64_t nbytes = 0;
    std::shared_ptr<std::vector<uint8_t>> keep;
  };

  Materialized& storage_for(const std::string& key) {
    auto it = materialized_.find(key);
    if (it != materialized_.end()) return it->second;
    StorageBytes sb = resolve_(key);
    Materialized m;
    m.bytes = sb.data;
    m.nbytes = sb.nbytes;
    m.keep = sb.inflated;
    const bool cpu = device_.is_cpu();
    // Zero-copy when every view of the storage finds its elements aligned (torch aligns zip
    // entries to 64 bytes; legacy files only by chance).
    const size_t align = align_.count(key) ? align_[key] : 16;
    if (cpu && sb.nbytes > 0 && reinterpret_cast<uintptr_t>(sb.data + 0) % align == 0 && (owner_ || !sb.in_source)) {
      std::shared_ptr<void> keep = sb.in_source ? owner_ : std::shared_ptr<void>(sb.inflated);
      m.storage =
          device_.backend()->wrap_host(const_cast<uint8_t*>(sb.data), static_cast<size_t>(sb.nbytes), std::move(keep));
    } else {
      Backend* b = device_.backend();
      m.storage = b->allocate(static_cast<size_t>(sb.nbytes));
      if (sb.nbytes) b->write(*m.storage, 0, sb.data, static_cast<size_t>(sb.nbytes));
    }
    return materialized_.emplace(key, std::move(m)).first->second;
  }

  Tensor build(const TensorRef& t, const std::string& name) {
    const StorageRef& s = *t.storage;
    Materialized& m = storage_for(s.key);
    const uint64_t es = dtype_size(t.dtype);
    auto where = [&] { return "tensor '" + name + "' (storage '" + s.key + "')"; };
    // An untyped (byte) storage under a wider tensor (_rebuild_tensor_v3) declares bytes.
    const uint64_t ses = dtype_size(s.dtype);
    if (static_cast<uint64_t>(s.byte_offset) > m.nbytes ||
        (m.nbytes - s.byte_offset) / ses < static_cast<uint64_t>(s.numel))
      fail(file_, where() + ": the storage declares " + std::to_string(s.numel) + " elements of " +
                      std::string(dtype_name(s.dtype)) + " but holds " + std::to_string(m.nbytes) + " bytes");
    const int64_t snumel = static_cast<int64_t>(static_cast<uint64_t>(s.numel) * ses / es);
    if (s.byte_offset % static_cast<int64_t>(es) != 0) fail(file_, where() + ": misaligned storage view");
    // Extent of the view, in elements, with overflow checks.
    int64_t numel = 1, last = t.offset;
    bool empty = false;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] == 0) empty = true;
      if (__builtin_mul_overflow(numel, t.sizes[d], &numel) || numel > (int64_t{1} << 53))
        fail(file_, where() + ": the number of elements overflows");
    }
    if (!empty) {
      for (size_t d = 0; d < t.sizes.size(); ++d) {
        int64_t step = 0;
        if (__builtin_mul_overflow(t.sizes[d] - 1, t.strides[d], &step) || __builtin_add_overflow(last, step, &last))
          fail(file_, where() + ": size and stride overflow");
      }
    }
    // The storage's declared element count bounds the view (the entry may be larger).
    if (empty ? t.offset > snumel : last >= snumel)
      fail(file_, where() + ": the view (offset " + std::to_string(t.offset) + ", last element " +
                      std::to_string(last) + ") extends past the storage's " + std::to_string(snumel) + " elements");
    int64_t base = s.byte_offset / static_cast<int64_t>(es);
    if (t.dtype == DType::Bool && !empty) {
      const uint8_t* p = m.bytes + base;
      for (int64_t k = t.offset; k <= last; ++k)
        if (p[k] > 1)
          fail(file_,
               where() + ": bool tensor holds the byte " + std::to_string(p[k]) + " (only 0 and 1 are booleans)");
    }
    return tensor_over_storage(m.storage, Shape(t.sizes.begin(), t.sizes.end()),
                               Strides(t.strides.begin(), t.strides.end()), base + t.offset, t.dtype, device_);
  }

  // ---- flattening ------------------------------------------------------------------------
  std::string key_text(const Value& k) {
    switch (k.kind) {
      case Kind::Str:
        return k.obj->str;
      case Kind::Int:
        return std::to_string(k.i);
      case Kind::Bool:
        return k.i ? "True" : "False";
      case Kind::None:
        return "None";
      case Kind::Float:
        return float_text(k.f);
      case Kind::BigInt:
        return bigint_text(k.obj->str);
      default:
        fail(file_, std::string("unsupported dictionary key of type ") + pickle::kind_name(k.kind));
    }
  }

  std::string leaf_text(const Value& v) {
    switch (v.kind) {
      case Kind::Str:
        return v.obj->str;
      case Kind::Bytes:
        return v.obj->str;
      case Kind::Global:
        return v.obj->str;
      default:
        return key_text(v);
    }
  }

  /// Bounds the text the output holds, so shared strings cannot expand without limit.
  void charge(size_t bytes) {
    if (bytes > text_budget_) fail(file_, "structure too large (names and values expand to too much text)");
    text_budget_ -= bytes;
  }

  void add_meta(const std::string& name, std::string text) {
    charge(name.size() + text.size());
    if (!out_.metadata.emplace(name, std::move(text)).second) fail(file_, "duplicate entry '" + name + "'");
  }

  void visit(const Value& v, std::string& name, int depth) {
    if (depth > kMaxDepth)
      fail(file_, "structure nested deeper than " + std::to_string(kMaxDepth) + " levels (or cyclic)");
    if (budget_-- == 0) fail(file_, "structure too large (shared containers expand to too many entries)");
    if (name.size() > kMaxNameBytes) fail(file_, "entry name longer than " + std::to_string(kMaxNameBytes) + " bytes");
    auto child = [&](const std::string& part) {
      size_t keep = name.size();
      if (!name.empty()) name += '.';
      name += part;
      return keep;
    };
    switch (v.kind) {
      case Kind::Dict: {
        const auto& it = v.obj->items;
        if (it.empty() && !name.empty()) add_meta(name, "{}");
        for (size_t k = 0; k + 1 < it.size(); k += 2) {
          size_t keep = child(key_text(it[k]));
          visit(it[k + 1], name, depth + 1);
          name.resize(keep);
        }
        return;
      }
      case Kind::List:
      case Kind::Tuple: {
        const auto& it = v.obj->items;
        if (it.empty() && !name.empty()) add_meta(name, v.kind == Kind::List ? "[]" : "()");
        for (size_t k = 0; k < it.size(); ++k) {
          size_t keep = child(std::to_string(k));
          visit(it[k], name, depth + 1);
          name.resize(keep);
        }
        return;
      }
      case Kind::Tensor: {
        charge(name.size());
        if (!tensor_names_.insert(name).second) fail(file_, "duplicate tensor name '" + name + "'");
        out_.tensors.emplace_back(name, Tensor());
        pending_.push_back(v.tensor);  // built once every view of each storage is known
        size_t& a = align_[v.tensor->storage->key];
        a = std::max(a, dtype_size(v.tensor->dtype));
        return;
      }
      case Kind::Storage:
        fail(file_, "entry '" + name + "' is a bare storage, not a tensor (not supported)");
      default:
        add_meta(name, leaf_text(v));
        return;
    }
  }

  TensorMap flatten_root(const Value& root) {
    std::string name;
    visit(root, name, 0);
    for (size_t k = 0; k < pending_.size(); ++k) out_.tensors[k].second = build(*pending_[k], out_.tensors[k].first);
    return std::move(out_);
  }

  const uint8_t* data_;
  size_t size_;
  std::string file_;
  Device device_;
  std::shared_ptr<void> owner_;
  pickle::Arena arena_;
  std::unordered_map<std::string, DType> key_dtype_;
  std::unordered_map<std::string, StorageBytes> legacy_;
  std::unordered_map<std::string, Materialized> materialized_;
  std::function<StorageBytes(const std::string&)> resolve_;
  std::unordered_set<std::string> tensor_names_;
  std::vector<const TensorRef*> pending_;
  std::unordered_map<std::string, size_t> align_;  // largest element size viewing each storage key
  uint64_t budget_ = 0, text_budget_ = 0;
  TensorMap out_;
};

}  // namespace

TensorMap load_torch(const std::string& path, const ReadOptions& options) {
  if (options.mmap) {
    auto map = std::make_shared<MappedFile>(path, kOp);
    return Loader(map->data(), map->size(), path, options.device, map).load();
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(read_file(path, SIZE_MAX, kOp));
  return Loader(bytes->data(), bytes->size(), path, options.device, bytes).load();
}

TensorMap parse_torch(const void* data, size_t size, const std::string& name, const Device& device) {
  KILN_CHECK(data != nullptr || size == 0, kOp, name << ": null data");
  return Loader(static_cast<const uint8_t*>(data), size, name, device, nullptr).load();
}

}  // namespace kiln::store
