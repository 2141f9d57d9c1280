// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::onnx::ops::call: one op of the mapping as a function (what generated code calls for
// ops without a specialised emitter), and the EmitContext helpers.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "kiln/onnx.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

proto::TensorP to_proto(const Tensor& t) {
  proto::TensorP p;
  for (int64_t d : t.shape()) p.dims.push_back(d);
  Tensor c = t.device().is_cpu() ? t : t.to(Device::cpu());
  switch (t.dtype()) {
    case f32:
      p.data_type = proto::kFloat;
      p.floats = c.to_vector<float>();
      break;
    case f64:
      p.data_type = proto::kDouble;
      p.doubles = c.to_vector<double>();
      break;
    case i64:
      p.data_type = proto::kInt64;
      p.int64s = c.to_vector<int64_t>();
      break;
    case i32:
      p.data_type = proto::kInt32;
      p.int32s = c.to_vector<int32_t>();
      break;
    case bool_:
    case u8:
    case i8:
    case i16: {
      p.data_type = t.dtype() == bool_ ? proto::kBool
                    : t.dtype() == u8  ? proto::kUint8
                    : t.dtype() == i8  ? proto::kInt8
                                       : proto::kInt16;
      for (int64_t v : cast(c, i64).to_vector<int64_t>()) p.int32s.push_back(static_cast<int32_t>(v));
      break;
    }
    default:
      p.data_type = proto::kFloat;
      p.floats = cast(c, f32).to_vector<float>();
      break;
  }
  return p;
}

}  // namespace

std::vector<Tensor> run_node(const proto::NodeP& node, int64_t opset, const std::vector<Tensor>& inputs,
                             const Device& device) {
  const OpEntry* e = registry().find(node.op_type);
  KILN_CHECK(e && e->run, "onnx", "op '" << node.op_type << "' is not supported");
  OpContext ctx{node, opset, device, inputs, {}, {}};
  ctx.out.resize(node.output.size());
  ctx.run_graph = [&](const proto::GraphP&, const std::vector<Tensor>&) -> std::vector<Tensor> {
    KILN_CHECK(false, "onnx", ctx.where() << ": subgraphs are not supported by ops::call");
    __builtin_unreachable();
  };
  e->run(ctx);
  return std::move(ctx.out);
}

namespace ops {

std::vector<Tensor> call(const std::string& op_type, int64_t opset, const std::vector<Tensor>& inputs,
                         const Attrs& attrs, size_t n_outputs) {
  proto::NodeP n;
  n.op_type = op_type;
  n.name = op_type;
  for (size_t i = 0; i < inputs.size(); ++i) n.input.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
  for (size_t i = 0; i < n_outputs; ++i) n.output.push_back("out" + std::to_string(i));
  for (const auto& [name, a] : attrs) {
    proto::AttrP p;
    p.name = name;
    switch (a.kind) {
      case Attr::Kind::Int:
        p.type = proto::AttrP::kInt;
        p.i = a.i;
        break;
      case Attr::Kind::Float:
        p.type = proto::AttrP::kFloat;
        p.f = a.f;
        break;
      case Attr::Kind::String:
        p.type = proto::AttrP::kString;
        p.s = a.s;
        break;
      case Attr::Kind::Ints:
        p.type = proto::AttrP::kInts;
        p.ints = a.ints;
        break;
      case Attr::Kind::Floats:
        p.type = proto::AttrP::kFloats;
        p.floats = a.floats;
        break;
      case Attr::Kind::Tensor:
        p.type = proto::AttrP::kTensor;
        KILN_CHECK(a.t.defined(), "onnx", op_type << ": attribute '" << name << "' is an undefined tensor");
        p.t = std::make_shared<proto::TensorP>(to_proto(a.t));
        break;
    }
    n.attrs.push_back(std::move(p));
  }
  Device dev = Device::default_device();
  for (const auto& t : inputs)
    if (t.defined()) {
      dev = t.device();
      break;
    }
  return run_node(n, opset, inputs, dev);
}

}  // namespace ops

// ---- EmitContext -------------------------------------------------------------------------------

int64_t EmitContext::attr_i(std::string_view n, int64_t def) const {
  const proto::AttrP* a = node.attr(n);
  return a ? a->i : def;
}
float EmitContext::attr_f(std::string_view n, float def) const {
  const proto::AttrP* a = node.attr(n);
  return a ? a->f : def;
}
std::string EmitContext::attr_s(std::string_view n, const std::string& def) const {
  const proto::AttrP* a = node.attr(n);
  return a ? a->s : def;
}
std::vector<int64_t> EmitContext::attr_ints(std::string_view n) const {
  const proto::AttrP* a = node.attr(n);
  return a ? a->ints : std::vector<int64_t>{};
}
void EmitContext::assign(const std::string& expr) { code += "  kiln::Tensor " + out.at(0) + " = " + expr + ";\n"; }
void EmitContext::assign_shape(size_t i, const std::string& expr, int rank, DType dtype) {
  code += "  const std::vector<int64_t> " + out.at(i) + " = " + expr + ";\n";
  if (shape_out.size() <= i) shape_out.resize(i + 1);
  shape_out[i] = {out.at(i), rank, dtype};
}

std::string dtype_expr(DType d) { return "kiln::" + std::string(dtype_name(d) == "bool" ? "bool_" : dtype_name(d)); }

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::string float_lit(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(v)) return "NAN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace kiln::onnx
