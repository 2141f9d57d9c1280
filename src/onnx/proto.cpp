// SPDX-License-Identifier: MIT OR Apache-2.0
#include "onnx/proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/error.h"

namespace kiln::onnx::proto {

namespace {
constexpr int kMaxDepth = 32;
constexpr size_t kMaxRepeated = size_t{1} << 31;
}  // namespace

void Reader::fail(const std::string& msg) const {
  KILN_CHECK(false, "onnx",
             "corrupt protobuf in " << what_ << " (field " << static_cast<long long>(field_) << "): " << msg);
  __builtin_unreachable();
}

uint64_t Reader::raw_varint() {
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p_ >= end_) fail("truncated varint");
    uint8_t c = static_cast<uint8_t>(*p_++);
    if (shift == 63 && c > 1) fail("varint overflows 64 bits");
    r |= static_cast<uint64_t>(c & 0x7F) << shift;
    if (c < 0x80) return r;
  }
  fail("varint too long");
}

bool Reader::next() {
  if (p_ >= end_) return false;
  uint64_t key = raw_varint();
  field_ = static_cast<uint32_t>(key >> 3);
  wire_ = static_cast<int>(key & 7);
  if (field_ == 0 || (key >> 3) > 0x1FFFFFFF) fail("bad field number");
  if (wire_ == 3 || wire_ == 4 || wire_ > 5) fail("unsupported wire type " + std::to_string(wire_));
  return true;
}

uint64_t Reader::varint() {
  if (wire_ != 0) fail("expected a varint, got wire type " + std::to_string(wire_));
  return raw_varint();
}

uint32_t Reader::fixed32() {
  if (wire_ != 5) fail("expected fixed32, got wire type " + std::to_string(wire_));
  if (end_ - p_ < 4) fail("truncated fixed32");
  uint32_t v;
  std::memcpy(&v, p_, 4);
  p_ += 4;
  return v;
}

uint64_t Reader::fixed64() {
  if (wire_ != 1) fail("expected fixed64, got wire type " + std::to_string(wire_));
  if (end_ - p_ < 8) fail("truncated fixed64");
  uint64_t v;
  std::memcpy(&v, p_, 8);
  p_ += 8;
  return v;
}

std::string_view Reader::bytes() {
  if (wire_ != 2) fail("expected a length-delimited value, got wire type " + std::to_string(wire_));
  uint64_t n = raw_varint();
  if (n > static_cast<uint64_t>(end_ - p_)) fail("length " + std::to_string(n) + " runs past the end");
  std::string_view s(p_, static_cast<size_t>(n));
  p_ += n;
  return s;
}

void Reader::skip() {
  switch (wire_) {
    case 0:
      raw_varint();
      break;
    case 1:
      fixed64();
      break;
    case 2:
      bytes();
      break;
    case 5:
      fixed32();
      break;
    default:
      fail("unsupported wire type");
  }
}

float Reader::f32() {
  uint32_t v = fixed32();
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}

double Reader::f64() {
  uint64_t v = fixed64();
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}

void Reader::ints(std::vector<int64_t>& out) {
  if (wire_ == 2) {
    Reader sub(bytes(), what_);
    sub.wire_ = 0;
    sub.field_ = field_;
    while (sub.p_ < sub.end_) out.push_back(static_cast<int64_t>(sub.raw_varint()));
  } else {
    out.push_back(int64());
  }
  if (out.size() > kMaxRepeated) fail("too many values");
}

void Reader::ints32(std::vector<int32_t>& out) {
  std::vector<int64_t> v;
  ints(v);
  for (int64_t x : v) out.push_back(static_cast<int32_t>(x));
}

void Reader::u64s(std::vector<uint64_t>& out) {
  std::vector<int64_t> v;
  ints(v);
  for (int64_t x : v) out.push_back(static_cast<uint64_t>(x));
}

void Reader::floats(std::vector<float>& out) {
  if (wire_ == 2) {
    std::string_view b = bytes();
    if (b.size() % 4) fail("packed floats length not a multiple of 4");
    size_t n = b.size() / 4, o = out.size();
    out.resize(o + n);
    std::memcpy(out.data() + o, b.data(), b.size());
  } else {
    out.push_back(f32());
  }
}

void Reader::doubles(std::vector<double>& out) {
  if (wire_ == 2) {
    std::string_view b = bytes();
    if (b.size() % 8) fail("packed doubles length not a multiple of 8");
    size_t n = b.size() / 8, o = out.size();
    out.resize(o + n);
    std::memcpy(out.data() + o, b.data(), b.size());
  } else {
    out.push_back(f64());
  }
}

std::string data_type_name(int32_t t) {
  static const char* names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (t >= 0 && t <= 16) return names[t];
  return "type " + std::to_string(t);
}

TensorP parse_tensor(std::string_view bytes) {
  TensorP t;
  Reader r(bytes, "TensorProto");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        r.ints(t.dims);
        break;
      case 2:
        t.data_type = static_cast<int32_t>(r.varint());
        break;
      case 4:
        r.floats(t.floats);
        break;
      case 5:
        r.ints32(t.int32s);
        break;
      case 6:
        t.strings.emplace_back(r.bytes());
        break;
      case 7:
        r.ints(t.int64s);
        break;
      case 8:
        t.name = r.bytes();
        break;
      case 9:
        t.raw = r.bytes();
        t.has_raw = true;
        break;
      case 10:
        r.doubles(t.doubles);
        break;
      case 11:
        r.u64s(t.uint64s);
        break;
      case 13:
        r.skip();
        t.external = true;
        break;
      case 14:
        if (r.varint() == 1) t.external = true;
        break;
      default:
        r.skip();
    }
  }
  return t;
}

namespace {

void parse_type(std::string_view bytes, ValueInfoP& v) {
  Reader r(bytes, "TypeProto");
  while (r.next()) {
    if (r.field() == 1) {
      v.is_tensor = true;
      Reader tr(r.bytes(), "TypeProto.Tensor");
      while (tr.next()) {
        if (tr.field() == 1) {
          v.elem_type = static_cast<int32_t>(tr.varint());
        } else if (tr.field() == 2) {
          v.has_shape = true;
          Reader sr(tr.bytes(), "TensorShapeProto");
          while (sr.next()) {
            if (sr.field() != 1) {
              sr.skip();
              continue;
            }
            DimP d;
            Reader dr(sr.bytes(), "TensorShapeProto.Dimension");
            while (dr.next()) {
              if (dr.field() == 1)
                d.value = dr.int64();
              else if (dr.field() == 2)
                d.param = dr.bytes();
              else
                dr.skip();
            }
            v.shape.push_back(std::move(d));
          }
        } else {
          tr.skip();
        }
      }
    } else {
      r.skip();
    }
  }
}

ValueInfoP parse_value_info(std::string_view bytes) {
  ValueInfoP v;
  Reader r(bytes, "ValueInfoProto");
  while (r.next()) {
    if (r.field() == 1)
      v.name = r.bytes();
    else if (r.field() == 2)
      parse_type(r.bytes(), v);
    else
      r.skip();
  }
  return v;
}

AttrP parse_attr(std::string_view bytes, int depth) {
  AttrP a;
  Reader r(bytes, "AttributeProto");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        a.name = r.bytes();
        break;
      case 20:
        a.type = static_cast<int32_t>(r.varint());
        break;
      case 21:
        a.ref_attr_name = r.bytes();
        break;
      case 2:
        a.f = r.f32();
        break;
      case 3:
        a.i = r.int64();
        break;
      case 4:
        a.s = r.bytes();
        break;
      case 5:
        a.t = std::make_shared<TensorP>(parse_tensor(r.bytes()));
        break;
      case 6:
        a.g = std::make_shared<GraphP>(parse_graph(r.bytes(), depth + 1));
        break;
      case 7:
        r.floats(a.floats);
        break;
      case 8:
        r.ints(a.ints);
        break;
      case 9:
        a.strings.emplace_back(r.bytes());
        break;
      case 10:
        a.tensors.push_back(parse_tensor(r.bytes()));
        break;
      case 11:
        a.graphs.push_back(std::make_shared<GraphP>(parse_graph(r.bytes(), depth + 1)));
        break;
      default:
        r.skip();
    }
  }
  return a;
}

NodeP parse_node(std::string_view bytes, int depth) {
  NodeP n;
  Reader r(bytes, "NodeProto");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        n.input.emplace_back(r.bytes());
        break;
      case 2:
        n.output.emplace_back(r.bytes());
        break;
      case 3:
        n.name = r.bytes();
        break;
      case 4:
        n.op_type = r.bytes();
        break;
      case 7:
        n.domain = r.bytes();
        break;
      case 5:
        n.attrs.push_back(parse_attr(r.bytes(), depth));
        break;
      default:
        r.skip();
    }
  }
  return n;
}

}  // namespace

GraphP parse_graph(std::string_view bytes, int depth) {
  KILN_CHECK(depth <= kMaxDepth, "onnx", "subgraphs nested deeper than " << kMaxDepth << " levels");
  GraphP g;
  Reader r(bytes, "GraphProto");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        g.nodes.push_back(parse_node(r.bytes(), depth));
        break;
      case 2:
        g.name = r.bytes();
        break;
      case 5:
        g.initializers.push_back(parse_tensor(r.bytes()));
        break;
      case 15:
        r.skip();
        ++g.sparse_initializers;
        break;
      case 11:
        g.inputs.push_back(parse_value_info(r.bytes()));
        break;
      case 12:
        g.outputs.push_back(parse_value_info(r.bytes()));
        break;
      case 13:
        g.value_info.push_back(parse_value_info(r.bytes()));
        break;
      default:
        r.skip();
    }
  }
  return g;
}

ModelP parse_model(std::string_view bytes) {
  ModelP m;
  Reader r(bytes, "ModelProto");
  while (r.next()) {
    switch (r.field()) {
      case 1:
        m.ir_version = r.int64();
        break;
      case 2:
        m.producer = r.bytes();
        break;
      case 7:
        m.graph = parse_graph(r.bytes(), 0);
        m.has_graph = true;
        break;
      case 8: {
        OpsetP o;
        Reader orr(r.bytes(), "OperatorSetIdProto");
        while (orr.next()) {
          if (orr.field() == 1)
            o.domain = orr.bytes();
          else if (orr.field() == 2)
            o.version = orr.int64();
          else
            orr.skip();
        }
        m.opsets.push_back(std::move(o));
        break;
      }
      case 25:
        r.skip();
        ++m.functions;
        break;
      default:
        r.skip();
    }
  }
  return m;
}

std::string read_file(const std::string& path) {
  std::error_code ec;  // a directory opens as an empty stream: name the real cause
  KILN_CHECK(!std::filesystem::is_directory(path, ec), "onnx", "'" << path << "' is a directory, not a model file");
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), "onnx", "cannot open '" << path << "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace kiln::onnx::proto
