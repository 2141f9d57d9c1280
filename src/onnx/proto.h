// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A small protobuf wire-format reader and the ONNX messages the importer needs. No dependency
// on libprotobuf. Every length and index is bounds-checked; corrupt or truncated input throws
// kiln::Error naming the message and field; nesting (graphs inside attributes) is depth-limited.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx::proto {

/// Reads protobuf fields from a byte range. `what` names the message in error messages.
class Reader {
 public:
  Reader(std::string_view bytes, const char* what) : p_(bytes.data()), end_(bytes.data() + bytes.size()), what_(what) {}
  /// Advances to the next field; false at the end of the message.
  bool next();
  uint32_t field() const { return field_; }
  int wire() const { return wire_; }
  uint64_t varint();
  uint32_t fixed32();
  uint64_t fixed64();
  std::string_view bytes();
  /// Skips the current field's value.
  void skip();
  int64_t int64() { return static_cast<int64_t>(varint()); }
  float f32();
  double f64();
  /// Repeated scalar fields, packed (wire 2) or not.
  void ints(std::vector<int64_t>& out);
  void ints32(std::vector<int32_t>& out);
  void u64s(std::vector<uint64_t>& out);
  void floats(std::vector<float>& out);
  void doubles(std::vector<double>& out);
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  uint64_t raw_varint();
  const char* p_;
  const char* end_;
  const char* what_;
  uint32_t field_ = 0;
  int wire_ = 0;
};

/// ONNX TensorProto.data_type values.
enum DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
};
/// "FLOAT", "INT64", ... for messages.
std::string data_type_name(int32_t t);

struct TensorP {
  std::string name;
  int32_t data_type = 0;
  std::vector<int64_t> dims;
  bool has_raw = false;
  std::string raw;
  std::vector<float> floats;
  std::vector<int32_t> int32s;
  std::vector<int64_t> int64s;
  std::vector<double> doubles;
  std::vector<uint64_t> uint64s;
  std::vector<std::string> strings;
  bool external = false;
};

struct GraphP;
struct AttrP {
  enum Type : int32_t {
    kUndef = 0,
    kFloat = 1,
    kInt = 2,
    kString = 3,
    kTensor = 4,
    kGraph = 5,
    kFloats = 6,
    kInts = 7,
    kStrings = 8,
    kTensors = 9,
    kGraphs = 10,
    kSparse = 11,
    kSparses = 12,
    kTypeProto = 13,
    kTypeProtos = 14
  };
  std::string name;
  std::string ref_attr_name;
  int32_t type = 0;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<TensorP> t;
  std::shared_ptr<GraphP> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<TensorP> tensors;
  std::vector<std::shared_ptr<GraphP>> graphs;
};

struct NodeP {
  std::vector<std::string> input, output;
  std::string name, op_type, domain;
  std::vector<AttrP> attrs;
  const AttrP* attr(std::string_view n) const {
    for (const auto& a : attrs)
      if (a.name == n) return &a;
    return nullptr;
  }
};

struct DimP {
  int64_t value = -1;  ///< -1 when unknown or symbolic
  std::string param;   ///< dim_param (symbolic name), may be empty
};

struct ValueInfoP {
  std::string name;
  bool is_tensor = false;  ///< false for sequence/map/optional types (or no type)
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<DimP> shape;
};

struct GraphP {
  std::string name;
  std::vector<NodeP> nodes;
  std::vector<TensorP> initializers;
  int64_t sparse_initializers = 0;
  std::vector<ValueInfoP> inputs, outputs, value_info;
};

struct OpsetP {
  std::string domain;
  int64_t version = 0;
};

struct ModelP {
  int64_t ir_version = 0;
  std::vector<OpsetP> opsets;
  bool has_graph = false;
  GraphP graph;
  std::string producer;
  int64_t functions = 0;
};

ModelP parse_model(std::string_view bytes);
/// The bytes of the file at `path` (a model or a TensorProto); kiln::Error "[onnx] ..." when it is
/// a directory or cannot be opened.
std::string read_file(const std::string& path);
TensorP parse_tensor(std::string_view bytes);
GraphP parse_graph(std::string_view bytes, int depth);

}  // namespace kiln::onnx::proto
