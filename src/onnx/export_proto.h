// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A small protobuf writer for the ONNX messages the exporter writes (ModelProto and below):
// varints and length-delimited fields. Field numbers as onnx.proto (and proto.cpp's reader).
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::onnx::exporter {

/// Appends protobuf fields to a byte string.
class Writer {
 public:
  void varint_field(uint32_t field, uint64_t v);
  void int_field(uint32_t field, int64_t v) { varint_field(field, static_cast<uint64_t>(v)); }
  void bytes_field(uint32_t field, const std::string& s);
  void message(uint32_t field, const Writer& w) { bytes_field(field, w.bytes()); }
  void float_field(uint32_t field, float f);
  void packed_ints(uint32_t field, const std::vector<int64_t>& v);
  const std::string& bytes() const { return buf_; }

 private:
  void raw_varint(uint64_t v);
  std::string buf_;
};

/// An attribute of an exported node.
struct Attr {
  enum Type : int32_t { kFloat = 1, kInt = 2, kString = 3, kInts = 7 };
  std::string name;
  Type type = kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<int64_t> ints;
};
Attr attr_int(const std::string& name, int64_t v);
Attr attr_float(const std::string& name, float v);
Attr attr_ints(const std::string& name, std::vector<int64_t> v);
Attr attr_string(const std::string& name, std::string v);

/// A node of the exported graph.
struct Node {
  std::string op_type;
  std::vector<std::string> inputs, outputs;
  std::vector<Attr> attrs;
};

/// An initializer: raw little-endian bytes of an ONNX data type.
struct Initializer {
  std::string name;
  int32_t data_type = 1;
  std::vector<int64_t> dims;
  std::string raw;
};

/// A graph input or output: name, element type and dims (a non-empty dim_param for a
/// dynamic dim).
struct ValueInfo {
  std::string name;
  int32_t elem_type = 1;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;
};

/// Serialises a ModelProto with one graph and the default-domain opset.
std::string write_model(const std::string& graph_name, const std::vector<Node>& nodes,
                        const std::vector<Initializer>& inits, const std::vector<ValueInfo>& inputs,
                        const std::vector<ValueInfo>& outputs, int64_t opset, const std::string& producer);

}  // namespace kiln::onnx::exporter
