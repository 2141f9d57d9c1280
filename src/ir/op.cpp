// SPDX-License-Identifier: MIT OR Apache-2.0
#include "ir/op.h"

#include <cstring>

#include "core/checked.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {
struct OpInfo {
  const char* name;
  Family family;
  int nin, nout;
};
constexpr OpInfo kInfo[] = {
#define KILN_OP(name, family, nin, nout) {#name, Family::family, nin, nout},
#include "ir/ops.def"
#undef KILN_OP
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == kNumOps, "ops.def and the info table disagree");
}  // namespace

std::string_view op_name(OpKind k) { return kInfo[static_cast<int>(k)].name; }
Family op_family(OpKind k) { return kInfo[static_cast<int>(k)].family; }
int op_num_inputs(OpKind k) { return kInfo[static_cast<int>(k)].nin; }
int op_num_outputs(OpKind k) { return kInfo[static_cast<int>(k)].nout; }

bool TensorDesc::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

TensorDesc contiguous_desc(const Shape& shape, DType dtype) {
  return TensorDesc{shape, contiguous_strides(shape), 0, dtype};
}

// ---- serialisation: little-endian, length-prefixed -------------------------------------------
namespace {
constexpr uint32_t kMagic = 0x4b4f5031;  // "KOP1"

struct Writer {
  std::vector<uint8_t> out;
  template <class T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  template <class V>
  void put_list(const V& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (auto x : v) put(x);
  }
  void put_desc(const TensorDesc& d) {
    put_list(d.shape);
    put_list(d.strides);
    put<int64_t>(d.offset);
    put<uint8_t>(static_cast<uint8_t>(d.dtype));
  }
};

struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  template <class T>
  T get() {
    KILN_CHECK(static_cast<size_t>(end - p) >= sizeof(T), "ir::deserialize", "truncated op record");
    T v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint32_t count(size_t elem_size) {
    uint32_t n = get<uint32_t>();
    KILN_CHECK(n <= static_cast<size_t>(end - p) / elem_size, "ir::deserialize",
               "list length " << static_cast<long long>(n) << " exceeds the record");
    return n;
  }
  template <class V>
  void get_list(V& v) {
    uint32_t n = count(sizeof(typename V::value_type));
    v.clear();
    for (uint32_t i = 0; i < n; ++i) v.push_back(get<typename V::value_type>());
  }
  DType get_dtype() {
    uint8_t t = get<uint8_t>();
    KILN_CHECK(t < kNumDTypes, "ir::deserialize", "bad dtype code " << static_cast<int>(t));
    return static_cast<DType>(t);
  }
  TensorDesc get_desc() {
    TensorDesc d;
    get_list(d.shape);
    get_list(d.strides);
    KILN_CHECK(d.shape.size() == d.strides.size(), "ir::deserialize", "shape and strides differ in rank");
    d.offset = get<int64_t>();
    d.dtype = get_dtype();
    // Sizes from bytes are hostile by default: non-negative, with numel, byte count and every
    // element offset within int64 (which buffer they index is checked where one is bound).
    const char* op = "ir::deserialize";
    for (int64_t n : d.shape) KILN_CHECK(n >= 0, op, "negative size in shape " << d.shape);
    detail::checked_nbytes(d.shape, d.dtype, op);
    if (detail::checked_numel(d.shape, op) > 0) {
      int64_t lo = d.offset, hi = d.offset;
      for (size_t i = 0; i < d.shape.size(); ++i) {
        const int64_t ext = detail::checked_mul(d.strides[i], d.shape[i] - 1, op);
        (ext < 0 ? lo : hi) = detail::checked_add(ext < 0 ? lo : hi, ext, op);
      }
    }
    return d;
  }
};
}  // namespace

std::vector<uint8_t> serialize(const Op& op) {
  Writer w;
  w.put<uint32_t>(kMagic);
  w.put<uint16_t>(static_cast<uint16_t>(op.kind));
  w.put_list(op.attrs.ints);
  w.put_list(op.attrs.reals);
  w.put<uint8_t>(static_cast<uint8_t>(op.attrs.dtype));
  w.put<uint32_t>(static_cast<uint32_t>(op.inputs.size()));
  for (auto& d : op.inputs) w.put_desc(d);
  w.put<uint32_t>(static_cast<uint32_t>(op.outputs.size()));
  for (auto& d : op.outputs) w.put_desc(d);
  return std::move(w.out);
}

Op deserialize(const uint8_t* data, size_t size) {
  Reader r{data, data + size};
  KILN_CHECK(r.get<uint32_t>() == kMagic, "ir::deserialize", "not an op record (bad magic)");
  Op op;
  uint16_t kind = r.get<uint16_t>();
  KILN_CHECK(kind < kNumOps, "ir::deserialize", "unknown op kind " << static_cast<int>(kind));
  op.kind = static_cast<OpKind>(kind);
  r.get_list(op.attrs.ints);
  r.get_list(op.attrs.reals);
  op.attrs.dtype = r.get_dtype();
  uint32_t nin = r.count(1 + 4 + 4 + 8);
  for (uint32_t i = 0; i < nin; ++i) op.inputs.push_back(r.get_desc());
  uint32_t nout = r.count(1 + 4 + 4 + 8);
  for (uint32_t i = 0; i < nout; ++i) op.outputs.push_back(r.get_desc());
  KILN_CHECK(r.p == r.end, "ir::deserialize", "trailing bytes after op record");
  return op;
}

}  // namespace kiln::ir
