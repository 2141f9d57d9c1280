// SPDX-License-Identifier: MIT OR Apache-2.0
#include "onnx/export_proto.h"

#include <cstring>

namespace kiln::onnx::exporter {

void Writer::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<char>(v));
}

void Writer::varint_field(uint32_t field, uint64_t v) {
  raw_varint(uint64_t{field} << 3);
  raw_varint(v);
}

void Writer::bytes_field(uint32_t field, const std::string& s) {
  raw_varint((uint64_t{field} << 3) | 2);
  raw_varint(s.size());
  buf_ += s;
}

void Writer::float_field(uint32_t field, float f) {
  raw_varint((uint64_t{field} << 3) | 5);
  char b[4];
  std::memcpy(b, &f, 4);
  buf_.append(b, 4);
}

void Writer::packed_ints(uint32_t field, const std::vector<int64_t>& v) {
  Writer inner;
  for (int64_t x : v) inner.raw_varint(static_cast<uint64_t>(x));
  bytes_field(field, inner.bytes());
}

Attr attr_int(const std::string& name, int64_t v) {
  Attr a;
  a.name = name;
  a.type = Attr::kInt;
  a.i = v;
  return a;
}
Attr attr_float(const std::string& name, float v) {
  Attr a;
  a.name = name;
  a.type = Attr::kFloat;
  a.f = v;
  return a;
}
Attr attr_ints(const std::string& name, std::vector<int64_t> v) {
  Attr a;
  a.name = name;
  a.type = Attr::kInts;
  a.ints = std::move(v);
  return a;
}
Attr attr_string(const std::string& name, std::string v) {
  Attr a;
  a.name = name;
  a.type = Attr::kString;
  a.s = std::move(v);
  return a;
}

namespace {

Writer node_proto(const Node& n) {
  Writer w;
  for (const auto& i : n.inputs) w.bytes_field(1, i);
  for (const auto& o : n.outputs) w.bytes_field(2, o);
  w.bytes_field(4, n.op_type);
  for (const Attr& a : n.attrs) {
    Writer aw;
    aw.bytes_field(1, a.name);
    switch (a.type) {
      case Attr::kFloat:
        aw.float_field(2, a.f);
        break;
      case Attr::kInt:
        aw.int_field(3, a.i);
        break;
      case Attr::kString:
        aw.bytes_field(4, a.s);
        break;
      case Attr::kInts:
        aw.packed_ints(8, a.ints);
        break;
    }
    aw.int_field(20, a.type);
    w.message(5, aw);
  }
  return w;
}

Writer tensor_proto(const Initializer& t) {
  Writer w;
  if (!t.dims.empty()) w.packed_ints(1, t.dims);
  w.int_field(2, t.data_type);
  w.bytes_field(8, t.name);
  w.bytes_field(9, t.raw);
  return w;
}

Writer value_info(const ValueInfo& v) {
  Writer shape;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    Writer dim;
    if (i < v.dim_params.size() && !v.dim_params[i].empty())
      dim.bytes_field(2, v.dim_params[i]);
    else
      dim.int_field(1, v.dims[i]);
    shape.message(1, dim);
  }
  Writer tensor;
  tensor.int_field(1, v.elem_type);
  tensor.message(2, shape);
  Writer type;
  type.message(1, tensor);
  Writer w;
  w.bytes_field(1, v.name);
  w.message(2, type);
  return w;
}

}  // namespace

std::string write_model(const std::string& graph_name, const std::vector<Node>& nodes,
                        const std::vector<Initializer>& inits, const std::vector<ValueInfo>& inputs,
                        const std::vector<ValueInfo>& outputs, int64_t opset, const std::string& producer) {
  Writer g;
  for (const Node& n : nodes) g.message(1, node_proto(n));
  g.bytes_field(2, graph_name);
  for (const Initializer& t : inits) g.message(5, tensor_proto(t));
  for (const ValueInfo& v : inputs) g.message(11, value_info(v));
  for (const ValueInfo& v : outputs) g.message(12, value_info(v));
  Writer opset_id;
  opset_id.bytes_field(1, "");
  opset_id.int_field(2, opset);
  Writer m;
  m.int_field(1, 8);  // IR version 8 (ONNX 1.10+), enough for opset 17
  m.bytes_field(2, producer);
  m.message(7, g);
  m.message(8, opset_id);
  return m.bytes();
}

}  // namespace kiln::onnx::exporter
