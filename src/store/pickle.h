// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A restricted unpickler for the pickles torch.save writes (protocols 2-5). It builds plain
// values (None, bool, int, float, str, bytes, list, tuple, dict) and two torch-specific ones:
// storage references (from persistent ids) and tensor references (from _rebuild_tensor_v2 and
// friends). GLOBAL accepts only an allow-list (OrderedDict, tensor rebuild functions, storage
// and dtype objects, torch.Size); anything else, such as os.system, raises kiln::Error naming
// the global. Nothing is ever called or imported: the allowed globals are interpreted.
//
// All objects live in an Arena that owns them, so shared and even cyclic references (through
// the memo) are harmless and destruction never recurses. Every length, count and depth is
// bounded by the remaining input or a fixed limit.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::store::pickle {

enum class Kind : uint8_t {
  None,
  Bool,
  Int,
  Float,
  BigInt,  ///< an integer wider than 64 bits: obj->str holds its little-endian two's complement
  Str,
  Bytes,
  List,
  Tuple,
  Dict,    ///< obj->items holds keys and values alternately, in insertion order
  Global,  ///< an allowed global: obj->str is "module.name"
  Storage,
  Tensor,
};

struct Object;
struct StorageRef;
struct TensorRef;

/// A pickled value. Containers, strings and torch references point into an Arena.
struct Value {
  Kind kind = Kind::None;
  union {
    int64_t i = 0;  ///< Bool (0/1), Int
    double f;       ///< Float
    Object* obj;    ///< BigInt, Str, Bytes, List, Tuple, Dict, Global
    StorageRef* storage;
    TensorRef* tensor;
  };
  bool is(Kind k) const { return kind == k; }
};

struct Object {
  std::string str;
  std::vector<Value> items;
};

/// A storage named by a persistent id: ('storage', <torch.XStorage>, key, location, numel[, view]).
struct StorageRef {
  std::string key;
  DType dtype = DType::U8;
  int64_t numel = 0;        ///< elements of `dtype` the id declares
  int64_t byte_offset = 0;  ///< legacy storage views: where this view starts in the root storage
  std::string location;     ///< "cpu", "cuda:0", ...
};

/// A tensor to build: a strided view of `storage` (offset and strides in elements of dtype).
struct TensorRef {
  StorageRef* storage = nullptr;
  DType dtype = DType::F32;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

/// Owns every object a pickle creates. Limits the total count so a small file cannot make the
/// reader allocate without bound.
class Arena {
 public:
  static constexpr size_t kMaxObjects = size_t{1} << 22;
  Object* object(const std::string& file);
  StorageRef* storage(const std::string& file);
  TensorRef* tensor(const std::string& file);
  size_t size() const { return objects_.size() + storages_.size() + tensors_.size(); }

 private:
  void check(const std::string& file) const;
  std::deque<Object> objects_;
  std::deque<StorageRef> storages_;
  std::deque<TensorRef> tensors_;
};

/// Resolves a persistent id (BINPERSID / PERSID) to a value, usually a Storage.
using PersistentLoad = std::function<Value(const Value& pid)>;

/// Reads one pickle from data[pos, size) up to and including STOP; on return `pos` is just past
/// STOP. `file` names the input in errors ("[load_torch] file: ..."). Without `persistent_load`
/// a persistent id is an error.
Value unpickle(const uint8_t* data, size_t size, size_t& pos, Arena& arena, const std::string& file,
               const PersistentLoad& persistent_load = nullptr);

/// The element type of a torch storage class ("torch.FloatStorage" -> f32). Throws kiln::Error
/// for storage classes whose dtype Kiln lacks (complex, quantized), naming it; nullopt when
/// `global` is not a storage class.
std::optional<DType> storage_dtype(const std::string& global, const std::string& file);

/// A short description of a value's type for error messages ("str", "tuple", ...).
const char* kind_name(Kind k);

}  // namespace kiln::store::pickle
