// SPDX-License-Identifier: MIT OR Apache-2.0
// A tiny protobuf writer that builds ONNX models in tests (no onnx package needed).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::onnx::test {

/// One protobuf message under construction.
class Msg {
 public:
  Msg& varint(uint32_t field, uint64_t v) {
    key(field, 0);
    raw_varint(v);
    return *this;
  }
  Msg& bytes(uint32_t field, const std::string& s) {
    key(field, 2);
    raw_varint(s.size());
    b_ += s;
    return *this;
  }
  Msg& msg(uint32_t field, const Msg& m) { return bytes(field, m.str()); }
  Msg& f32(uint32_t field, float f) {
    key(field, 5);
    char c[4];
    std::memcpy(c, &f, 4);
    b_.append(c, 4);
    return *this;
  }
  const std::string& str() const { return b_; }

 private:
  void key(uint32_t field, int wire) { raw_varint((uint64_t{field} << 3) | static_cast<uint64_t>(wire)); }
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      b_ += static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    b_ += static_cast<char>(v);
  }
  std::string b_;
};

/// NodeProto.
inline Msg node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                const std::string& name, const std::string& domain = "") {
  Msg m;
  for (const auto& i : in) m.bytes(1, i);
  for (const auto& o : out) m.bytes(2, o);
  m.bytes(3, name).bytes(4, op);
  if (!domain.empty()) m.bytes(7, domain);
  return m;
}

/// AttributeProto with an int (type INT) or ints (type INTS).
inline Msg attr_i(const std::string& name, int64_t v) {
  return Msg().bytes(1, name).varint(20, 2).varint(3, static_cast<uint64_t>(v));
}
inline Msg attr_ints(const std::string& name, const std::vector<int64_t>& v) {
  Msg m = Msg().bytes(1, name).varint(20, 7);
  for (int64_t x : v) m.varint(8, static_cast<uint64_t>(x));
  return m;
}

/// ValueInfoProto of a float tensor; dims < 0 become dim_param "N".
inline Msg value_info(const std::string& name, const std::vector<int64_t>& dims, int32_t elem = 1) {
  Msg shape;
  for (int64_t d : dims) {
    Msg dim;
    if (d < 0)
      dim.bytes(2, "N");
    else
      dim.varint(1, static_cast<uint64_t>(d));
    shape.msg(1, dim);
  }
  Msg tensor_type;
  tensor_type.varint(1, static_cast<uint64_t>(elem)).msg(2, shape);
  Msg type;
  type.msg(1, tensor_type);
  return Msg().bytes(1, name).msg(2, type);
}

/// TensorProto of floats (raw_data) or int64s (int64_data).
inline Msg tensor_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  Msg m;
  for (int64_t d : dims) m.varint(1, static_cast<uint64_t>(d));
  m.varint(2, 1).bytes(8, name);
  m.bytes(9, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return m;
}
inline Msg tensor_i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  Msg m;
  for (int64_t d : dims) m.varint(1, static_cast<uint64_t>(d));
  m.varint(2, 7).bytes(8, name);
  for (int64_t x : v) m.varint(7, static_cast<uint64_t>(x));
  return m;
}

/// ModelProto around a GraphProto, importing the default domain at `opset`.
inline std::string model(const Msg& graph, int64_t opset = 13, const std::string& extra_domain = "") {
  Msg m;
  m.varint(1, 8);
  m.msg(8, Msg().varint(2, static_cast<uint64_t>(opset)));
  if (!extra_domain.empty()) m.msg(8, Msg().bytes(1, extra_domain).varint(2, 1));
  m.msg(7, graph);
  return m.str();
}

}  // namespace kiln::onnx::test
