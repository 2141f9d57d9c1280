// SPDX-License-Identifier: MIT OR Apache-2.0
#include "store/pickle.h"

#include <cstring>
#include <string_view>
#include <unordered_map>

#include "core/bit_cast.h"
#include "kiln/error.h"

namespace kiln::store::pickle {

namespace {

constexpr size_t kMaxMarkDepth = 1000;
constexpr size_t kMaxStack = size_t{1} << 22;
constexpr size_t kMaxRank = 64;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  KILN_CHECK(false, "load_torch", file << ": " << what);
  __builtin_unreachable();
}

// ---- the allow-list -------------------------------------------------------------------------

struct StorageType {
  const char* name;
  std::optional<DType> dtype;
  const char* torch_dtype;
};
// Every legacy storage class torch knows; those without a Kiln dtype are named in the error.
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::F32, "float32"},
    {"DoubleStorage", DType::F64, "float64"},
    {"HalfStorage", DType::F16, "float16"},
    {"BFloat16Storage", DType::BF16, "bfloat16"},
    {"LongStorage", DType::I64, "int64"},
    {"IntStorage", DType::I32, "int32"},
    {"ShortStorage", DType::I16, "int16"},
    {"CharStorage", DType::I8, "int8"},
    {"ByteStorage", DType::U8, "uint8"},
    {"BoolStorage", DType::Bool, "bool"},
    {"ComplexFloatStorage", std::nullopt, "complex64"},
    {"ComplexDoubleStorage", std::nullopt, "complex128"},
    {"QInt8Storage", std::nullopt, "qint8"},
    {"QUInt8Storage", std::nullopt, "quint8"},
    {"QInt32Storage", std::nullopt, "qint32"},
    {"QUInt4x2Storage", std::nullopt, "quint4x2"},
    {"QUInt2x4Storage", std::nullopt, "quint2x4"},
};

constexpr const char* kTorchDTypes[] = {
    "float32", "float",  "float64",       "double",      "float16",         "half",           "bfloat16",
    "int64",   "long",   "int32",         "int",         "int16",           "short",          "int8",
    "uint8",   "bool",   "complex64",     "cfloat",      "complex128",      "cdouble",        "uint16",
    "uint32",  "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"};

constexpr const char* kAllowed[] = {
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._tensor._rebuild_from_type_v2",
    "torch.Tensor",
    "torch.nn.parameter.Parameter",
    "torch.Size",
    "torch.device",
    "torch.UntypedStorage",
    "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage",
    "torch.TypedStorage",
    "_codecs.encode",
    "builtins.set",
    "builtins.frozenset",
    "__builtin__.set",
};

bool allowed_global(const std::string& full) {
  for (const char* a : kAllowed)
    if (full == a) return true;
  if (full.rfind("torch.", 0) == 0) {
    std::string_view rest = std::string_view(full).substr(6);
    for (const auto& s : kStorageTypes)
      if (rest == s.name) return true;
    for (const char* d : kTorchDTypes)
      if (rest == d) return true;
  }
  return false;
}

// ---- the machine ----------------------------------------------------------------------------

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t rd64(const uint8_t* p) { return static_cast<uint64_t>(rd32(p)) | (static_cast<uint64_t>(rd32(p + 4)) << 32); }

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, size_t pos, Arena& arena, const std::string& file, const PersistentLoad& pl)
      : d_(data), size_(size), pos_(pos), arena_(arena), file_(file), pl_(pl) {}

  Value run();
  size_t pos() const { return pos_; }

 private:
  [[noreturn]] void err(const std::string& what) const {
    fail(file_, "pickle error at byte " + std::to_string(op_pos_) + ": " + what);
  }
  const uint8_t* take(uint64_t n) {
    if (n > size_ - pos_)
      err("truncated (needs " + std::to_string(n) + " more bytes, " + std::to_string(size_ - pos_) + " left)");
    const uint8_t* p = d_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  std::string line() {
    const void* nl = std::memchr(d_ + pos_, '\n', size_ - pos_);
    if (!nl) err("unterminated text line");
    size_t n = static_cast<size_t>(static_cast<const uint8_t*>(nl) - (d_ + pos_));
    std::string s(reinterpret_cast<const char*>(d_ + pos_), n);
    pos_ += n + 1;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }
  void push(Value v) {
    if (stack_.size() >= kMaxStack) err("stack too large");
    stack_.push_back(v);
  }
  Value pop() {
    if (stack_.size() <= floor()) err("stack underflow");
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= floor()) err("stack underflow");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  /// Pops everything above the last MARK and the mark itself; returns the first index.
  size_t pop_mark() {
    if (marks_.empty()) err("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  Value make(Kind k) {
    Value v;
    v.kind = k;
    v.obj = arena_.object(file_);
    return v;
  }
  Value str_value(Kind k, const uint8_t* p, uint64_t n) {
    Value v = make(k);
    v.obj->str.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    return v;
  }
  static Value int_value(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
  }
  Value long_value(const uint8_t* p, uint64_t n);
  Value tuple_from(size_t start) {
    Value t = make(Kind::Tuple);
    t.obj->items.assign(stack_.begin() + static_cast<ptrdiff_t>(start), stack_.end());
    stack_.resize(start);
    return t;
  }
  Value global(const std::string& module, const std::string& name);
  Value call(const Value& fn, const Value& args, int depth = 0);
  Value make_tensor(const std::vector<Value>& a);
  /// The DType of a global such as "torch.uint32"; an error for dtypes Kiln lacks.
  DType torch_dtype(const std::string& global);
  void memo_put(uint64_t idx, const Value& v) {
    if (memo_.size() >= Arena::kMaxObjects && !memo_.count(idx)) err("memo too large");
    memo_[idx] = v;
  }
  Value memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) err("memo key " + std::to_string(idx) + " was never stored");
    return it->second;
  }
  const std::vector<Value>& tuple_items(const Value& v, const char* what) {
    if (!v.is(Kind::Tuple) && !v.is(Kind::List)) err(std::string(what) + " must be a tuple, got " + kind_name(v.kind));
    return v.obj->items;
  }

  const uint8_t* d_;
  size_t size_, pos_, op_pos_ = 0;
  Arena& arena_;
  const std::string& file_;
  const PersistentLoad& pl_;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
};

Value Machine::long_value(const uint8_t* p, uint64_t n) {
  // Drop redundant sign-extension bytes, then fit into int64 when possible.
  while (n > 1 && ((p[n - 1] == 0 && !(p[n - 2] & 0x80)) || (p[n - 1] == 0xFF && (p[n - 2] & 0x80)))) --n;
  if (n == 0) return int_value(0);
  if (n <= 8) {
    uint64_t u = 0;
    for (uint64_t k = 0; k < n; ++k) u |= static_cast<uint64_t>(p[k]) << (8 * k);
    if (n < 8 && (p[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);
    return int_value(static_cast<int64_t>(u));
  }
  return str_value(Kind::BigInt, p, n);
}

Value Machine::global(const std::string& module, const std::string& name) {
  std::string full = module + "." + name;
  if (!allowed_global(full)) {
    std::string shown = full.size() > 200 ? full.substr(0, 200) + "..." : full;
    bool module_pickle = module.rfind("torch.nn.modules", 0) == 0 || module.rfind("__main__", 0) == 0;
    fail(file_, "refusing to load global '" + shown + "' (only tensors and containers are allowed; " +
                    (module_pickle ? "this file pickles a whole model object: save model.state_dict() instead"
                                   : "save a state_dict") +
                    ")");
  }
  // Unsupported storage dtypes are reported here, where the name is known.
  storage_dtype(full, file_);
  Value v = make(Kind::Global);
  v.obj->str = std::move(full);
  return v;
}

DType Machine::torch_dtype(const std::string& global) {
  struct Named {
    const char* name;
    DType dtype;
  };
  static constexpr Named kNames[] = {
      {"torch.float32", DType::F32},   {"torch.float", DType::F32},   {"torch.float64", DType::F64},
      {"torch.double", DType::F64},    {"torch.float16", DType::F16}, {"torch.half", DType::F16},
      {"torch.bfloat16", DType::BF16}, {"torch.int64", DType::I64},   {"torch.long", DType::I64},
      {"torch.int32", DType::I32},     {"torch.int", DType::I32},     {"torch.int16", DType::I16},
      {"torch.short", DType::I16},     {"torch.int8", DType::I8},     {"torch.uint8", DType::U8},
      {"torch.bool", DType::Bool},     {"torch.uint16", DType::U16},  {"torch.uint32", DType::U32},
      {"torch.uint64", DType::U64}};
  for (const Named& n : kNames)
    if (global == n.name) return n.dtype;
  err("tensors of dtype " + global +
      " are not supported (Kiln has f32 f64 f16 bf16 i64 i32 i16 i8 u8 u16 u32 u64 bool)");
  __builtin_unreachable();
}

Value Machine::make_tensor(const std::vector<Value>& a) {
  if (a.size() < 4) err("tensor rebuild expects at least 4 arguments, got " + std::to_string(a.size()));
  if (!a[0].is(Kind::Storage))
    err(std::string("tensor rebuild: first argument must be a storage, got ") + kind_name(a[0].kind));
  if (!a[1].is(Kind::Int) || a[1].i < 0) err("tensor rebuild: storage offset must be a non-negative int");
  const auto& sizes = tuple_items(a[2], "tensor size");
  const auto& strides = tuple_items(a[3], "tensor stride");
  if (sizes.size() != strides.size())
    err("tensor rebuild: " + std::to_string(sizes.size()) + " sizes but " + std::to_string(strides.size()) +
        " strides");
  if (sizes.size() > kMaxRank) err("tensor rebuild: rank " + std::to_string(sizes.size()) + " is too large");
  TensorRef* t = arena_.tensor(file_);
  t->storage = a[0].storage;
  t->dtype = a[0].storage->dtype;
  t->offset = a[1].i;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (!sizes[k].is(Kind::Int) || sizes[k].i < 0) err("tensor rebuild: sizes must be non-negative ints");
    if (!strides[k].is(Kind::Int) || strides[k].i < 0) err("tensor rebuild: strides must be non-negative ints");
    t->sizes.push_back(sizes[k].i);
    t->strides.push_back(strides[k].i);
  }
  Value v;
  v.kind = Kind::Tensor;
  v.tensor = t;
  return v;
}

Value Machine::call(const Value& fn, const Value& args_v, int depth) {
  if (!fn.is(Kind::Global)) err(std::string("REDUCE on a ") + kind_name(fn.kind) + ", not an allowed global");
  const std::string& f = fn.obj->str;
  const auto& a = tuple_items(args_v, "REDUCE arguments");
  if (f == "collections.OrderedDict") {
    Value d = make(Kind::Dict);
    if (!a.empty()) {
      // OrderedDict([(k, v), ...])
      const auto& pairs = tuple_items(a[0], "OrderedDict items");
      for (const Value& p : pairs) {
        const auto& kv = tuple_items(p, "OrderedDict item");
        if (kv.size() != 2) err("OrderedDict item must be a pair");
        d.obj->items.push_back(kv[0]);
        d.obj->items.push_back(kv[1]);
      }
    }
    return d;
  }
  if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor") return make_tensor(a);
  if (f == "torch._utils._rebuild_tensor_v3") {
    // (storage, offset, size, stride, requires_grad, hooks, dtype, ...): the dtypes without a
    // typed storage class (u16, u32, u64) are saved this way, over an untyped (byte) storage.
    if (a.size() < 7 || !a[6].is(Kind::Global)) err("_rebuild_tensor_v3 expects a dtype as its 7th argument");
    Value v = make_tensor(a);
    v.tensor->dtype = torch_dtype(a[6].obj->str);
    return v;
  }
  if (f == "torch._utils._rebuild_parameter" || f == "torch._utils._rebuild_parameter_with_state") {
    if (a.empty() || !a[0].is(Kind::Tensor)) err("parameter rebuild expects a tensor");
    return a[0];
  }
  if (f == "torch._tensor._rebuild_from_type_v2") {
    // (func, type, args, state): a tensor with Python state; only plain tensors and parameters.
    if (a.size() < 3 || depth > 0) err("unsupported _rebuild_from_type_v2 call");
    if (!a[1].is(Kind::Global) || (a[1].obj->str != "torch.Tensor" && a[1].obj->str != "torch.nn.parameter.Parameter"))
      err("_rebuild_from_type_v2 of a tensor subclass is not supported");
    Value r = call(a[0], a[2], depth + 1);
    if (!r.is(Kind::Tensor)) err("_rebuild_from_type_v2 did not produce a tensor");
    return r;
  }
  if (f == "torch.Size") {
    Value t = make(Kind::Tuple);
    if (!a.empty()) t.obj->items = tuple_items(a[0], "torch.Size argument");
    return t;
  }
  if (f == "torch.device") {
    if (a.empty() || !a[0].is(Kind::Str)) err("torch.device expects a string");
    Value s = make(Kind::Str);
    s.obj->str = a[0].obj->str;
    if (a.size() > 1 && a[1].is(Kind::Int)) s.obj->str += ":" + std::to_string(a[1].i);
    return s;
  }
  if (f == "_codecs.encode") {
    // Protocol 2 writes bytes as _codecs.encode(text, 'latin1').
    if (a.size() != 2 || !a[0].is(Kind::Str) || !a[1].is(Kind::Str) ||
        (a[1].obj->str != "latin1" && a[1].obj->str != "latin-1"))
      err("_codecs.encode is only accepted as (str, 'latin1')");
    Value b = make(Kind::Bytes);
    const std::string& s = a[0].obj->str;
    for (size_t k = 0; k < s.size(); ++k) {
      auto c = static_cast<uint8_t>(s[k]);
      if (c < 0x80) {
        b.obj->str.push_back(static_cast<char>(c));
      } else if ((c & 0xE0) == 0xC0 && k + 1 < s.size() && c <= 0xC3) {
        b.obj->str.push_back(static_cast<char>(((c & 0x1F) << 6) | (static_cast<uint8_t>(s[k + 1]) & 0x3F)));
        ++k;
      } else {
        err("_codecs.encode: text is not latin-1");
      }
    }
    return b;
  }
  if (f == "builtins.set" || f == "builtins.frozenset" || f == "__builtin__.set") {
    Value l = make(Kind::List);
    if (!a.empty()) l.obj->items = tuple_items(a[0], "set argument");
    return l;
  }
  err("calling '" + f + "' is not supported");
}

Value Machine::run() {
  while (true) {
    op_pos_ = pos_;
    uint8_t op = *take(1);
    switch (op) {
      case 0x80: {  // PROTO
        uint8_t v = *take(1);
        if (v > 5) err("unsupported pickle protocol " + std::to_string(v));
        break;
      }
      case 0x95: {  // FRAME
        uint64_t n = rd64(take(8));
        if (n > size_ - pos_) err("frame of " + std::to_string(n) + " bytes extends past the end");
        break;
      }
      case '.': {  // STOP
        if (stack_.empty()) err("STOP with an empty stack");
        if (!marks_.empty()) err("STOP with an unclosed MARK");
        return stack_.back();
      }
      case 'N':
        push(Value{});
        break;
      case 0x88:
      case 0x89: {  // NEWTRUE / NEWFALSE
        Value v;
        v.kind = Kind::Bool;
        v.i = op == 0x88;
        push(v);
        break;
      }
      case 'J':
        push(int_value(static_cast<int32_t>(rd32(take(4)))));
        break;  // BININT
      case 'K':
        push(int_value(*take(1)));
        break;  // BININT1
      case 'M':
        push(int_value(rd16(take(2))));
        break;      // BININT2
      case 0x8a: {  // LONG1
        uint8_t n = *take(1);
        push(long_value(take(n), n));
        break;
      }
      case 0x8b: {  // LONG4
        int32_t n = static_cast<int32_t>(rd32(take(4)));
        if (n < 0) err("negative LONG4 length");
        push(long_value(take(static_cast<uint64_t>(n)), static_cast<uint64_t>(n)));
        break;
      }
      case 'G': {  // BINFLOAT (big-endian)
        const uint8_t* p = take(8);
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | p[k];
        Value v;
        v.kind = Kind::Float;
        v.f = kiln::detail::bit_cast<double>(u);
        push(v);
        break;
      }
      case 'X': {  // BINUNICODE
        uint32_t n = rd32(take(4));
        push(str_value(Kind::Str, take(n), n));
        break;
      }
      case 0x8c: {  // SHORT_BINUNICODE
        uint8_t n = *take(1);
        push(str_value(Kind::Str, take(n), n));
        break;
      }
      case 0x8d: {  // BINUNICODE8
        uint64_t n = rd64(take(8));
        push(str_value(Kind::Str, take(n), n));
        break;
      }
      case 'T': {  // BINSTRING (Python 2 str)
        int32_t n = static_cast<int32_t>(rd32(take(4)));
        if (n < 0) err("negative BINSTRING length");
        push(str_value(Kind::Str, take(static_cast<uint64_t>(n)), static_cast<uint64_t>(n)));
        break;
      }
      case 'U': {  // SHORT_BINSTRING
        uint8_t n = *take(1);
        push(str_value(Kind::Str, take(n), n));
        break;
      }
      case 'B': {  // BINBYTES
        uint32_t n = rd32(take(4));
        push(str_value(Kind::Bytes, take(n), n));
        break;
      }
      case 'C': {  // SHORT_BINBYTES
        uint8_t n = *take(1);
        push(str_value(Kind::Bytes, take(n), n));
        break;
      }
      case 0x8e: {  // BINBYTES8
        uint64_t n = rd64(take(8));
        push(str_value(Kind::Bytes, take(n), n));
        break;
      }
      case '}':
        push(make(Kind::Dict));
        break;  // EMPTY_DICT
      case ']':
        push(make(Kind::List));
        break;  // EMPTY_LIST
      case ')':
        push(make(Kind::Tuple));
        break;  // EMPTY_TUPLE
      case 0x8f:
        push(make(Kind::List));
        break;   // EMPTY_SET (kept as a list)
      case '(':  // MARK
        if (marks_.size() >= kMaxMarkDepth) err("nesting deeper than " + std::to_string(kMaxMarkDepth) + " MARKs");
        marks_.push_back(stack_.size());
        break;
      case 't': {  // TUPLE
        size_t m = pop_mark();
        push(tuple_from(m));
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        size_t n = static_cast<size_t>(op - 0x84);
        if (stack_.size() < floor() + n) err("stack underflow");
        push(tuple_from(stack_.size() - n));
        break;
      }
      case 'l':     // LIST
      case 0x91: {  // FROZENSET
        size_t m = pop_mark();
        Value t = tuple_from(m);
        t.kind = Kind::List;
        push(t);
        break;
      }
      case 'd': {  // DICT
        size_t m = pop_mark();
        if ((stack_.size() - m) % 2) err("DICT with an odd number of items");
        Value t = tuple_from(m);
        t.kind = Kind::Dict;
        push(t);
        break;
      }
      case 's': {  // SETITEM
        Value v = pop(), k = pop();
        Value& d = top();
        if (!d.is(Kind::Dict)) err(std::string("SETITEM on a ") + kind_name(d.kind));
        d.obj->items.push_back(k);
        d.obj->items.push_back(v);
        break;
      }
      case 'u': {  // SETITEMS
        size_t m = pop_mark();
        if ((stack_.size() - m) % 2) err("SETITEMS with an odd number of items");
        if (m <= floor()) err("SETITEMS without a target");
        Value& d = stack_[m - 1];
        if (!d.is(Kind::Dict)) err(std::string("SETITEMS on a ") + kind_name(d.kind));
        d.obj->items.insert(d.obj->items.end(), stack_.begin() + static_cast<ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        break;
      }
      case 'a': {  // APPEND
        Value v = pop();
        Value& l = top();
        if (!l.is(Kind::List)) err(std::string("APPEND on a ") + kind_name(l.kind));
        l.obj->items.push_back(v);
        break;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        size_t m = pop_mark();
        if (m <= floor()) err("APPENDS without a target");
        Value& l = stack_[m - 1];
        if (!l.is(Kind::List)) err(std::string("APPENDS on a ") + kind_name(l.kind));
        l.obj->items.insert(l.obj->items.end(), stack_.begin() + static_cast<ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        break;
      }
      case '0':
        pop();
        break;     // POP
      case '1': {  // POP_MARK
        size_t m = pop_mark();
        stack_.resize(m);
        break;
      }
      case '2':
        push(top());
        break;  // DUP
      case 'q':
        memo_put(*take(1), top());
        break;  // BINPUT
      case 'r':
        memo_put(rd32(take(4)), top());
        break;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size(), top());
        break;  // MEMOIZE
      case 'h':
        push(memo_get(*take(1)));
        break;  // BINGET
      case 'j':
        push(memo_get(rd32(take(4))));
        break;     // LONG_BINGET
      case 'c': {  // GLOBAL
        std::string module = line();
        std::string name = line();
        push(global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        Value name = pop(), module = pop();
        if (!name.is(Kind::Str) || !module.is(Kind::Str)) err("STACK_GLOBAL expects two strings");
        push(global(module.obj->str, name.obj->str));
        break;
      }
      case 'R': {  // REDUCE
        Value args = pop(), fn = pop();
        push(call(fn, args));
        break;
      }
      case 0x81: {  // NEWOBJ
        Value args = pop(), cls = pop();
        if (!cls.is(Kind::Global) || (cls.obj->str != "collections.OrderedDict" && cls.obj->str != "torch.Size"))
          err("NEWOBJ is only supported for OrderedDict and torch.Size");
        push(call(cls, args));
        break;
      }
      case 'b': {  // BUILD
        Value state = pop();
        Value& target = top();
        (void)state;
        // Python attributes of a state dict (_metadata) or of a tensor carry no data we need.
        if (!target.is(Kind::Dict) && !target.is(Kind::Tensor))
          err(std::string("BUILD on a ") + kind_name(target.kind));
        break;
      }
      case 'Q': {  // BINPERSID
        Value pid = pop();
        if (!pl_) err("unexpected persistent id");
        push(pl_(pid));
        break;
      }
      case 'P': {  // PERSID
        std::string s = line();
        if (!pl_) err("unexpected persistent id");
        Value pid = make(Kind::Str);
        pid.obj->str = std::move(s);
        push(pl_(pid));
        break;
      }
      default: {
        static const char* hex = "0123456789abcdef";
        err(std::string("unsupported or unknown opcode 0x") + hex[op >> 4] + hex[op & 15]);
      }
    }
  }
}

}  // namespace

Object* Arena::object(const std::string& file) {
  check(file);
  return &objects_.emplace_back();
}
StorageRef* Arena::storage(const std::string& file) {
  check(file);
  return &storages_.emplace_back();
}
TensorRef* Arena::tensor(const std::string& file) {
  check(file);
  return &tensors_.emplace_back();
}
void Arena::check(const std::string& file) const {
  if (size() >= kMaxObjects) fail(file, "pickle creates more than " + std::to_string(kMaxObjects) + " objects");
}

Value unpickle(const uint8_t* data, size_t size, size_t& pos, Arena& arena, const std::string& file,
               const PersistentLoad& persistent_load) {
  if (pos > size) fail(file, "pickle starts past the end of the input");
  Machine m(data, size, pos, arena, file, persistent_load);
  Value v = m.run();
  pos = m.pos();
  return v;
}

std::optional<DType> storage_dtype(const std::string& global, const std::string& file) {
  if (global == "torch.UntypedStorage" || global == "torch.storage.UntypedStorage") return DType::U8;
  if (global.rfind("torch.", 0) != 0) return std::nullopt;
  std::string_view rest = std::string_view(global).substr(6);
  for (const auto& s : kStorageTypes) {
    if (rest != s.name) continue;
    if (!s.dtype)
      fail(file, std::string("tensors of dtype torch.") + s.torch_dtype + " (" + global +
                     ") are not supported (Kiln has f32 f64 f16 bf16 i64 i32 i16 i8 u8 u16 u32 u64 bool)");
    return s.dtype;
  }
  return std::nullopt;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::BigInt:
      return "int (big)";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "global";
    case Kind::Storage:
      return "storage";
    case Kind::Tensor:
      return "tensor";
  }
  return "?";
}

}  // namespace kiln::store::pickle
