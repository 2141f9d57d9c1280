// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX export: each Kiln primitive as ONNX nodes (opset 17), with the dynamic dims of its
// outputs. An op (or attribute) without a form here is a kiln::Error naming it.
#include <cmath>
#include <cstring>

#include "ir/attrs.h"
#include "kiln/error.h"
#include "onnx/export.h"

namespace kiln::onnx::exporter {
namespace {

using ir::OpKind;

/// The direct ONNX op of a unary or binary Kiln op, or nullptr.
const char* direct_op(OpKind k) {
  switch (k) {
    case OpKind::Abs:
      return "Abs";
    case OpKind::Neg:
      return "Neg";
    case OpKind::Sign:
      return "Sign";
    case OpKind::Exp:
      return "Exp";
    case OpKind::Log:
      return "Log";
    case OpKind::Sqrt:
      return "Sqrt";
    case OpKind::Reciprocal:
      return "Reciprocal";
    case OpKind::Sin:
      return "Sin";
    case OpKind::Cos:
      return "Cos";
    case OpKind::Tan:
      return "Tan";
    case OpKind::Asin:
      return "Asin";
    case OpKind::Acos:
      return "Acos";
    case OpKind::Atan:
      return "Atan";
    case OpKind::Sinh:
      return "Sinh";
    case OpKind::Cosh:
      return "Cosh";
    case OpKind::Tanh:
      return "Tanh";
    case OpKind::Asinh:
      return "Asinh";
    case OpKind::Acosh:
      return "Acosh";
    case OpKind::Atanh:
      return "Atanh";
    case OpKind::Erf:
      return "Erf";
    case OpKind::Floor:
      return "Floor";
    case OpKind::Ceil:
      return "Ceil";
    case OpKind::Sigmoid:
      return "Sigmoid";
    case OpKind::Relu:
      return "Relu";
    case OpKind::Softsign:
      return "Softsign";
    case OpKind::Hardswish:
      return "HardSwish";
    case OpKind::LogicalNot:
      return "Not";
    case OpKind::IsNan:
      return "IsNaN";
    case OpKind::Add:
      return "Add";
    case OpKind::Sub:
      return "Sub";
    case OpKind::Mul:
      return "Mul";
    case OpKind::Div:
      return "Div";
    case OpKind::Pow:
      return "Pow";
    case OpKind::Maximum:
      return "Max";
    case OpKind::Minimum:
      return "Min";
    case OpKind::LogicalAnd:
      return "And";
    case OpKind::LogicalOr:
      return "Or";
    case OpKind::LogicalXor:
      return "Xor";
    case OpKind::Eq:
      return "Equal";
    case OpKind::Lt:
      return "Less";
    case OpKind::Le:
      return "LessOrEqual";
    case OpKind::Gt:
      return "Greater";
    case OpKind::Ge:
      return "GreaterOrEqual";
    case OpKind::Where:
      return "Where";
    default:
      return nullptr;
  }
}

std::vector<int64_t> v64(const int64_t* p, size_t n) { return std::vector<int64_t>(p, p + n); }

struct Lowering {
  Exporter& e;
  const CapturedNode& n;
  const ir::Op& op;
  Lowering(Exporter& ex, const CapturedNode& node) : e(ex), n(node), op(*node.op) {}

  std::vector<std::pair<Named, Shape>> seen;  ///< the inputs read, for define's mult
  Named in(size_t i) { return note(e.view(n.inputs[i], op.inputs[i]), op.inputs[i].shape); }
  Named note(Named x, const Shape& s) {
    seen.emplace_back(x, s);
    return x;
  }
  /// Elementwise input i with its stride-0 dims shrunk to 1 where another input supplies the
  /// size (ONNX broadcasting expands them again, also along dynamic dims).
  Named in_broadcast(size_t i) { return note(e.view(n.inputs[i], broadcast_desc(i)), broadcast_desc(i).shape); }
  ir::TensorDesc broadcast_desc(size_t i) {
    ir::TensorDesc d = op.inputs[i];
    const Shape& out = op.outputs[0].shape;
    const size_t r = out.size();
    for (size_t k = 0; k < d.shape.size(); ++k) {
      if (d.strides[k] != 0 || d.shape[k] <= 1) continue;
      const size_t ok = r - d.shape.size() + k;
      bool other = false;
      for (size_t j = 0; j < op.inputs.size(); ++j) {
        const ir::TensorDesc& o = op.inputs[j];
        if (j == i || o.shape.size() < r - ok) continue;
        const size_t jk = o.shape.size() - (r - ok);
        other |= o.shape[jk] == out[ok] && o.strides[jk] != 0;
      }
      if (other) d.shape[k] = 1;
    }
    return d;
  }
  std::string out(size_t i = 0) { return e.out_name(n.outputs[i]); }
  /// Defines output i with its dynamic dims; a dynamic dim's mult is that of an input's dynamic
  /// dim of the same size.
  void define(std::vector<bool> dyn, size_t i = 0) {
    int64_t mult = 1, outer = 1;
    const Shape& o = op.outputs[i].shape;
    for (size_t k = 0; k < dyn.size(); ++k) {
      if (!dyn[k]) continue;
      for (const auto& [x, s] : seen)
        for (size_t j = 0; j < x.dynamic.size() && j < s.size(); ++j)
          if (x.dynamic[j] && s[j] == o[k]) mult = x.mult, outer = x.outer;
    }
    e.define(n.outputs[i], out(i), std::move(dyn), mult, outer);
  }
  /// Right-aligned broadcast of the inputs' dynamic dims.
  std::vector<bool> broadcast_dyn(const std::vector<Named>& xs, const std::vector<Shape>& shapes) {
    const Shape& o = op.outputs[0].shape;
    std::vector<bool> dyn(o.size(), false);
    for (size_t j = 0; j < xs.size(); ++j)
      for (size_t k = 0; k < shapes[j].size(); ++k) {
        const size_t ok = o.size() - shapes[j].size() + k;
        if (k < xs[j].dynamic.size() && xs[j].dynamic[k] && shapes[j][k] == o[ok]) dyn[ok] = true;
      }
    return dyn;
  }
  [[noreturn]] void unsupported(std::string_view why = {}, std::string_view what = {}) {
    KILN_CHECK(
        false, kApi,
        "the Kiln op " << ir::op_name(op.kind) << " has no ONNX form" << (why.empty() ? "" : " ") << why << what);
  }

  void elementwise();
  void unary_composite();
  void reduce();
  void matmul();
  void conv();
  void pool();
  void movement();
  void index();
  void creation();
  void norm();
  void run();
};

void Lowering::elementwise() {
  std::vector<Named> xs;
  std::vector<Shape> shapes;
  std::vector<ir::TensorDesc> descs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    descs.push_back(broadcast_desc(i));
    xs.push_back(note(e.view(n.inputs[i], descs[i]), descs[i].shape));
    shapes.push_back(op.inputs[i].shape);
  }
  std::vector<bool> dyn = broadcast_dyn(xs, shapes);
  // An input with the example's size along a dynamic dim of the output: one slice of it when it
  // is the same along that dim (a state made with zeros of the batch size, a bias broadcast by
  // a matmul), which ONNX broadcasting expands; otherwise the graph fixes the axis.
  const Shape& os = op.outputs[0].shape;
  std::vector<bool> uo(os.size(), true);
  for (size_t i = 0; i < xs.size(); ++i) {
    ir::TensorDesc& d = descs[i];
    const std::vector<bool> u = e.uniform(n.inputs[i], d);
    bool shrunk = false;
    for (size_t k = 0; k < d.shape.size(); ++k) {
      const size_t ok = os.size() - d.shape.size() + k;
      uo[ok] = uo[ok] && u[k];
      if (!dyn[ok] || d.shape[k] <= 1 || (k < xs[i].dynamic.size() && xs[i].dynamic[k])) continue;
      KILN_CHECK(u[k], kApi,
                 "the graph fixes a dynamic axis: input " << i << " of shape " << to_string(d.shape)
                                                          << " has the example's size on dim " << k
                                                          << ", which is dynamic in the other inputs (a tensor made "
                                                             "with the example's size, as zeros({x.size(0), 4}))");
      d.shape[k] = 1;
      shrunk = true;
    }
    if (shrunk) xs[i] = note(e.view(n.inputs[i], d), d.shape);
  }
  e.set_uniform(n.outputs[0], uo);
  std::vector<std::string> names;
  for (auto& x : xs) names.push_back(x.name);
  const DType dt = op.inputs[0].dtype;
  switch (op.kind) {
    case OpKind::Ne:
      e.node("Not", {e.node("Equal", names)}, {}, {out()});
      break;
    case OpKind::Cast:
      e.node("Cast", names, {attr_int("to", onnx_type(op.attrs.dtype))}, {out()});
      break;
    case OpKind::Copy: {  // the input, broadcast to the output's shape
      const Shape& is = shapes[0];
      if (is == os) return e.define(n.outputs[0], names[0], xs[0].dynamic, xs[0].mult, xs[0].outer);  // no node
      std::vector<int64_t> to(os.size(), 1);
      for (size_t k = 0; k < os.size(); ++k) {
        const size_t r = os.size() - k;
        if (r > is.size() || is[is.size() - r] != os[k]) to[k] = os[k];
      }
      e.node("Expand", {names[0], e.ints(to)}, {}, {out()});
      break;
    }
    case OpKind::LeakyRelu:
      e.node("LeakyRelu", names, {attr_float("alpha", float(op.attrs.reals[0]))}, {out()});
      break;
    case OpKind::Hardsigmoid:
      e.node("HardSigmoid", names, {attr_float("alpha", 1.f / 6), attr_float("beta", 0.5f)}, {out()});
      break;
    case OpKind::Clamp: {
      const ir::ClampAttrs c = ir::ClampAttrs::decode(op);
      const bool lo = c.has_min, hi = c.has_max;
      e.node(
          "Clip",
          {names[0], lo ? e.scalar(op.attrs.reals[0], dt) : std::string(), hi ? e.scalar(op.attrs.reals[1], dt) : ""},
          {}, {out()});
      break;
    }
    case OpKind::Elu:
      if (op.attrs.reals.size() > 1 && (op.attrs.reals[1] != 1 || op.attrs.reals[2] != 1))
        unsupported("with a scale (selu/celu forms)");
      e.node("Elu", names, {attr_float("alpha", float(op.attrs.reals[0]))}, {out()});
      break;
    case OpKind::Fmod:
      e.node("Mod", names, {attr_int("fmod", 1)}, {out()});
      break;
    case OpKind::Remainder:
      if (is_floating(dt)) {  // a - floor(a / b) * b, the sign of the divisor
        const std::string q = e.node("Floor", {e.node("Div", names)});
        e.node("Sub", {names[0], e.node("Mul", {q, names[1]})}, {}, {out()});
      } else {
        e.node("Mod", names, {attr_int("fmod", 0)}, {out()});
      }
      break;
    case OpKind::FloorDiv:
      if (!is_floating(dt)) unsupported("for integer dtypes");
      e.node("Floor", {e.node("Div", names)}, {}, {out()});
      break;
    case OpKind::Hypot:
      e.node("Sqrt", {e.node("Add", {e.node("Mul", {names[0], names[0]}), e.node("Mul", {names[1], names[1]})})}, {},
             {out()});
      break;
    case OpKind::Fmax:
    case OpKind::Fmin: {  // NaN-ignoring: the other operand where one is NaN
      const std::string m = e.node(op.kind == OpKind::Fmax ? "Max" : "Min", names);
      const std::string b = e.node("Where", {e.node("IsNaN", {names[1]}), names[0], m});
      e.node("Where", {e.node("IsNaN", {names[0]}), names[1], b}, {}, {out()});
      break;
    }
    case OpKind::TruncDiv: {
      if (!is_floating(dt)) unsupported("for integer dtypes");
      const std::string q = e.node("Div", names);
      e.node("Where", {e.node("Less", {q, e.scalar(0, dt)}), e.node("Ceil", {q}), e.node("Floor", {q})}, {}, {out()});
      break;
    }
    case OpKind::LogAddExp: {  // max(a, b) + log(1 + exp(-|a - b|))
      const std::string d = e.node("Neg", {e.node("Abs", {e.node("Sub", names)})});
      const std::string l = e.node("Log", {e.node("Add", {e.node("Exp", {d}), e.scalar(1, dt)})});
      e.node("Add", {e.node("Max", names), l}, {}, {out()});
      break;
    }
    case OpKind::Lerp:  // start + weight * (end - start)
      e.node("Add", {names[0], e.node("Mul", {names[2], e.node("Sub", {names[1], names[0]})})}, {}, {out()});
      break;
    default: {
      const char* d = direct_op(op.kind);
      if (!d) return unary_composite();
      e.node(d, names, {}, {out()});
    }
  }
  define(dyn);
}

/// Unary ops that ONNX 17 writes as a few nodes.
void Lowering::unary_composite() {
  if (op.inputs.size() != 1) unsupported();
  const Named x = in(0);
  const DType dt = op.inputs[0].dtype;
  if (!is_floating(dt)) unsupported("for ", dtype_name(dt));
  auto c = [&](double v) { return e.scalar(v, dt); };
  std::string y;
  switch (op.kind) {
    case OpKind::Square:
      y = e.node("Mul", {x.name, x.name}, {}, {out()});
      break;
    case OpKind::Rsqrt:
      y = e.node("Reciprocal", {e.node("Sqrt", {x.name})}, {}, {out()});
      break;
    case OpKind::Expm1:
      y = e.node("Sub", {e.node("Exp", {x.name}), c(1)}, {}, {out()});
      break;
    case OpKind::Log1p:
      y = e.node("Log", {e.node("Add", {x.name, c(1)})}, {}, {out()});
      break;
    case OpKind::Log2:
      y = e.node("Div", {e.node("Log", {x.name}), c(std::log(2.0))}, {}, {out()});
      break;
    case OpKind::Log10:
      y = e.node("Div", {e.node("Log", {x.name}), c(std::log(10.0))}, {}, {out()});
      break;
    case OpKind::Exp2:
      y = e.node("Pow", {c(2), x.name}, {}, {out()});
      break;
    case OpKind::Silu:
      y = e.node("Mul", {x.name, e.node("Sigmoid", {x.name})}, {}, {out()});
      break;
    case OpKind::Gelu: {  // 0.5 x (1 + erf(x / sqrt 2))
      const std::string t = e.node("Erf", {e.node("Div", {x.name, c(std::sqrt(2.0))})});
      y = e.node("Mul", {e.node("Mul", {x.name, c(0.5)}), e.node("Add", {t, c(1)})}, {}, {out()});
      break;
    }
    case OpKind::Mish:
      y = e.node("Mul", {x.name, e.node("Tanh", {e.node("Softplus", {x.name})})}, {}, {out()});
      break;
    case OpKind::Round:
      if (ir::UnaryAttrs::decode(op).decimals != 0) unsupported("with decimals");
      y = e.node("Round", {x.name}, {}, {out()});
      break;
    case OpKind::IsInf: {
      const int64_t which = ir::UnaryAttrs::decode(op).which;
      y = e.node("IsInf", {x.name}, {attr_int("detect_positive", which >= 0), attr_int("detect_negative", which <= 0)},
                 {out()});
      break;
    }
    case OpKind::IsFinite:
      y = e.node("Not", {e.node("Or", {e.node("IsNaN", {x.name}), e.node("IsInf", {x.name})})}, {}, {out()});
      break;
    case OpKind::Trunc:
    case OpKind::Frac: {  // trunc: ceil below 0, floor above; frac = x - trunc(x)
      const std::string t =
          e.node("Where", {e.node("Less", {x.name, c(0)}), e.node("Ceil", {x.name}), e.node("Floor", {x.name})});
      y = op.kind == OpKind::Trunc ? e.node("Identity", {t}, {}, {out()}) : e.node("Sub", {x.name, t}, {}, {out()});
      break;
    }
    case OpKind::Logit: {  // log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps >= 0
      std::string z = x.name;
      const double eps = op.attrs.reals.empty() ? -1 : op.attrs.reals[0];
      if (eps >= 0) z = e.node("Clip", {z, c(eps), c(1 - eps)});
      y = e.node("Log", {e.node("Div", {z, e.node("Sub", {c(1), z})})}, {}, {out()});
      break;
    }
    case OpKind::NanToNum: {
      const auto& r = op.attrs.reals;
      const std::string neg =
          e.node("Where", {e.node("IsInf", {x.name}, {attr_int("detect_positive", 0)}), c(r[2]), x.name});
      const std::string pos =
          e.node("Where", {e.node("IsInf", {x.name}, {attr_int("detect_negative", 0)}), c(r[1]), neg});
      y = e.node("Where", {e.node("IsNaN", {x.name}), c(r[0]), pos}, {}, {out()});
      break;
    }
    case OpKind::GeluTanh: {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const std::string x3 = e.node("Mul", {e.node("Mul", {x.name, x.name}), x.name});
      const std::string in = e.node("Add", {x.name, e.node("Mul", {x3, c(0.044715)})});
      const std::string t = e.node("Tanh", {e.node("Mul", {in, c(std::sqrt(2.0 / M_PI))})});
      y = e.node("Mul", {e.node("Mul", {x.name, c(0.5)}), e.node("Add", {t, c(1)})}, {}, {out()});
      break;
    }
    case OpKind::Softplus:
      if (op.attrs.reals[0] != 1) unsupported("with beta != 1");
      y = e.node("Softplus", {x.name}, {}, {out()});
      break;
    default:
      unsupported();
  }
  define(x.dynamic);
}

void Lowering::reduce() {
  const Named x = in(0);
  const ir::ReduceAttrs r = ir::ReduceAttrs::decode(op);
  const bool keep = r.keepdim;
  std::vector<int64_t> axes(r.dims.begin(), r.dims.end());
  if (op.inputs[0].shape.empty()) axes.clear();
  std::vector<bool> dyn;
  for (size_t k = 0; k < op.inputs[0].shape.size(); ++k) {
    const bool r = std::find(axes.begin(), axes.end(), int64_t(k)) != axes.end();
    if (!r || keep) dyn.push_back(!r && k < x.dynamic.size() && x.dynamic[k]);
  }
  std::string src = x.name;
  if (op.attrs.dtype != op.inputs[0].dtype && (op.kind == OpKind::Sum || op.kind == OpKind::Prod))
    src = e.node("Cast", {src}, {attr_int("to", onnx_type(op.attrs.dtype))});
  const Attr kd = attr_int("keepdims", keep ? 1 : 0);
  if (axes.empty()) {  // a 0-d input: nothing to reduce
    e.node("Identity", {src}, {}, {out()});
    return define(dyn);
  }
  switch (op.kind) {
    case OpKind::Sum:
      e.node("ReduceSum", {src, e.ints(axes)}, {kd}, {out()});
      break;
    case OpKind::Mean:
      e.reduce("ReduceMean", src, axes, keep, {out()});
      break;
    case OpKind::Max:
      e.reduce("ReduceMax", src, axes, keep, {out()});
      break;
    case OpKind::Min:
      e.reduce("ReduceMin", src, axes, keep, {out()});
      break;
    case OpKind::Prod:
      e.reduce("ReduceProd", src, axes, keep, {out()});
      break;
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      e.node(op.kind == OpKind::ArgMax ? "ArgMax" : "ArgMin", {src}, {attr_int("axis", axes[0]), kd}, {out()});
      break;
    case OpKind::Any:
    case OpKind::All: {  // on int32 0/1: any = max, all = min
      const std::string i = e.node("Cast", {e.node("Cast", {src}, {attr_int("to", onnx_type(DType::Bool))})},
                                   {attr_int("to", onnx_type(DType::I32))});
      const std::string r = e.reduce(op.kind == OpKind::Any ? "ReduceMax" : "ReduceMin", i, axes, keep);
      e.node("Cast", {r}, {attr_int("to", onnx_type(DType::Bool))}, {out()});
      break;
    }
    case OpKind::Var: {  // sum((x - mean)^2) / (n - correction), its root for std
      int64_t n = 1;
      for (int64_t a : axes) {
        KILN_CHECK(!(static_cast<size_t>(a) < x.dynamic.size() && x.dynamic[a]), kApi,
                   "a variance over a dynamic dim is not exported yet");
        n *= op.inputs[0].shape[static_cast<size_t>(a)];
      }
      const DType dt = op.inputs[0].dtype;
      const std::string m = e.reduce("ReduceMean", src, axes, true);
      const std::string d = e.node("Sub", {src, m});
      const std::string ss = e.node("ReduceSum", {e.node("Mul", {d, d}), e.ints(axes)}, {kd});
      const bool root = op.attrs.reals.size() > 1 && op.attrs.reals[1] != 0;
      const std::string v = e.node("Div", {ss, e.scalar(static_cast<double>(n) - op.attrs.reals[0], dt)}, {},
                                   root ? std::vector<std::string>{} : std::vector<std::string>{out()});
      if (root) e.node("Sqrt", {v}, {}, {out()});
      break;
    }
    default:
      unsupported();
  }
  define(dyn);
}

void Lowering::matmul() {
  const Named a = in(0), b = in(1);
  if (op.inputs[0].shape.size() == 3 && op.inputs[1].shape.size() == 3) {  // rows of a the same: out's too
    const std::vector<bool> ua = e.uniform(n.inputs[0], op.inputs[0]), ub = e.uniform(n.inputs[1], op.inputs[1]);
    std::vector<bool> uo{ua[0] && ub[0], ua[1], ub[2]};
    if (op.inputs.size() == 3) {
      const std::vector<bool> uc = e.uniform(n.inputs[2], op.inputs[2]);
      const size_t r = uc.size();
      for (size_t k = 0; k < r && k < 3; ++k) uo[3 - r + k] = uo[3 - r + k] && uc[k];
    }
    e.set_uniform(n.outputs[0], uo);
  }
  std::vector<bool> dyn{(a.dynamic.size() > 0 && a.dynamic[0]) || (b.dynamic.size() > 0 && b.dynamic[0]),
                        a.dynamic.size() > 1 && a.dynamic[1], b.dynamic.size() > 2 && b.dynamic[2]};
  if (op.inputs.size() == 3) {
    const Named bias = in(2);
    e.node("Add", {e.node("MatMul", {a.name, b.name}), bias.name}, {}, {out()});
  } else {
    e.node("MatMul", {a.name, b.name}, {}, {out()});
  }
  define(dyn);
}

void Lowering::conv() {
  if (op.kind == OpKind::ConvWeightGrad) unsupported();
  if (ir::conv_epilogue(op) != 0) unsupported("with a fused epilogue (export the unfused model)");
  const bool transposed = op.kind == OpKind::ConvTranspose;
  const auto& a = op.attrs.ints;
  const size_t nsp = static_cast<size_t>(a[1]);
  const Named x = in(0), w = in(1);
  std::vector<std::string> ins{x.name, w.name};
  if (transposed ? op.inputs.size() == 3 : ir::conv_has_bias(op)) ins.push_back(in(2).name);
  std::vector<int64_t> pads = v64(&a[2 + nsp], nsp);
  pads.insert(pads.end(), pads.begin(), pads.end());
  const Shape& ws = op.inputs[1].shape;
  std::vector<Attr> attrs{attr_int("group", a[0]),
                          attr_ints("kernel_shape", std::vector<int64_t>(ws.begin() + 2, ws.end())),
                          attr_ints("strides", v64(&a[2], nsp)), attr_ints("pads", pads),
                          attr_ints("dilations", v64(&a[2 + 2 * nsp], nsp))};
  if (transposed) attrs.push_back(attr_ints("output_padding", v64(&a[2 + 3 * nsp], nsp)));
  e.node(transposed ? "ConvTranspose" : "Conv", ins, std::move(attrs), {out()});
  std::vector<bool> dyn(op.outputs[0].shape.size(), false);
  dyn[0] = !x.dynamic.empty() && x.dynamic[0];
  for (size_t k = 1; k < x.dynamic.size(); ++k)
    KILN_CHECK(!x.dynamic[k], kApi, "dynamic channel or spatial dims of a convolution are not exported yet");
  define(dyn);
}

void Lowering::pool() {
  const auto& a = op.attrs.ints;
  const Named x = in(0);
  for (size_t k = 1; k < x.dynamic.size(); ++k)
    KILN_CHECK(!x.dynamic[k], kApi, "dynamic channel or spatial dims of a pool are not exported yet");
  std::vector<bool> dyn(op.outputs[0].shape.size(), false);
  dyn[0] = !x.dynamic.empty() && x.dynamic[0];
  const size_t nsp = static_cast<size_t>(a[0]);
  auto pads = [&](size_t at) {
    std::vector<int64_t> p = v64(&a[at], nsp);
    p.insert(p.end(), p.begin(), p.end());
    return p;
  };
  switch (op.kind) {
    case OpKind::MaxPool:
      if (a[2 + 4 * nsp] != 0) unsupported("with indices");
      e.node("MaxPool", {x.name},
             {attr_ints("kernel_shape", v64(&a[1], nsp)), attr_ints("strides", v64(&a[1 + nsp], nsp)),
              attr_ints("pads", pads(1 + 2 * nsp)), attr_ints("dilations", v64(&a[1 + 3 * nsp], nsp)),
              attr_int("ceil_mode", a[1 + 4 * nsp])},
             {out()});
      break;
    case OpKind::AvgPool:
      if (a[3 + 3 * nsp] != 0) unsupported("with a divisor_override");
      e.node("AveragePool", {x.name},
             {attr_ints("kernel_shape", v64(&a[1], nsp)), attr_ints("strides", v64(&a[1 + nsp], nsp)),
              attr_ints("pads", pads(1 + 2 * nsp)), attr_int("ceil_mode", a[1 + 3 * nsp]),
              attr_int("count_include_pad", a[2 + 3 * nsp])},
             {out()});
      break;
    case OpKind::AdaptiveAvgPool:
    case OpKind::AdaptiveMaxPool:
      for (size_t k = 0; k < nsp; ++k)
        if (a[1 + k] != 1) unsupported("to an output size other than 1 (only the global pool)");
      if (op.kind == OpKind::AdaptiveMaxPool && a[1 + nsp] != 0) unsupported("with indices");
      e.node(op.kind == OpKind::AdaptiveAvgPool ? "GlobalAveragePool" : "GlobalMaxPool", {x.name}, {}, {out()});
      break;
    default:
      unsupported();
  }
  define(dyn);
}

void Lowering::movement() {
  if (op.kind == OpKind::Cat) {
    std::vector<std::string> names;
    std::vector<bool> dyn(op.outputs[0].shape.size(), false);
    const int64_t axis = op.attrs.ints[0];
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Named x = in(i);
      names.push_back(x.name);
      for (size_t k = 0; k < x.dynamic.size(); ++k) dyn[k] = dyn[k] || x.dynamic[k];
    }
    e.node("Concat", names, {attr_int("axis", axis)}, {out()});
    return define(dyn);
  }
  // Pad: ints = {mode, (lo, hi) pairs from the last dim}.
  const Named x = in(0);
  const size_t r = op.inputs[0].shape.size();
  std::vector<int64_t> p(2 * r, 0);
  const auto& a = op.attrs.ints;
  for (size_t j = 0; 1 + 2 * j + 1 < a.size(); ++j) {
    const size_t dim = r - 1 - j;
    p[dim] = a[1 + 2 * j];
    p[r + dim] = a[2 + 2 * j];
    KILN_CHECK(!(dim < x.dynamic.size() && x.dynamic[dim]), kApi, "a pad of a dynamic dim is not exported yet");
  }
  static const char* modes[] = {"constant", "reflect", "edge", "wrap"};
  if (a[0] == 3) unsupported("in circular mode (ONNX 19's wrap)");
  std::vector<std::string> ins{x.name, e.ints(p)};
  if (a[0] == 0) ins.push_back(e.scalar(op.attrs.reals.empty() ? 0 : op.attrs.reals[0], op.inputs[0].dtype));
  e.node("Pad", ins, {attr_string("mode", modes[a[0]])}, {out()});
  define(x.dynamic);
}

void Lowering::index() {
  const Named x = in(0), idx = in(1);
  const int64_t dim = ir::IndexAttrs::decode(op).dim;
  switch (op.kind) {
    case OpKind::Gather:
      e.node("GatherElements", {x.name, idx.name}, {attr_int("axis", dim)}, {out()});
      return define(idx.dynamic);
    case OpKind::IndexSelect: {
      // ONNX Gather takes the 0/1-d index as is; Kiln's output keeps x's rank (a 0-d index: size 1).
      std::string ix = idx.name;
      if (op.inputs[1].shape.empty()) ix = e.node("Reshape", {ix, e.ints({1})});
      e.node("Gather", {x.name, ix}, {attr_int("axis", dim)}, {out()});
      std::vector<bool> dyn = x.dynamic;
      dyn[static_cast<size_t>(dim)] = !idx.dynamic.empty() && idx.dynamic[0];
      return define(dyn);
    }
    default:
      unsupported();
  }
}

void Lowering::creation() {
  // Creation ops fold to initializers: their shape is a constant of the graph.
  const ir::TensorDesc& o = op.outputs[0];
  const size_t es = dtype_size(o.dtype);
  const int64_t n = o.numel();
  std::string raw(static_cast<size_t>(n) * es, '\0');
  auto put = [&](int64_t i, double v, bool exact_int, int64_t iv) {
    char* p = raw.data() + static_cast<size_t>(i) * es;
    switch (o.dtype) {
      case DType::F32: {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::F64:
        std::memcpy(p, &v, 8);
        break;
      case DType::I64: {
        const int64_t x = exact_int ? iv : static_cast<int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case DType::I32: {
        const int32_t x = static_cast<int32_t>(exact_int ? iv : static_cast<int64_t>(v));
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::Bool:
        *p = v != 0 || iv != 0;
        break;
      default:
        unsupported("for dtype ", dtype_name(o.dtype));
    }
  };
  if (op.kind == OpKind::Fill) {
    const ir::CreationAttrs c = ir::CreationAttrs::decode(op);
    for (int64_t i = 0; i < n; ++i) put(i, c.value, c.has_int, c.int_value);
  } else if (op.kind == OpKind::Arange) {
    for (int64_t i = 0; i < n; ++i) {
      const double v = op.attrs.reals[0] + static_cast<double>(i) * op.attrs.reals[1];
      put(i, v, false, 0);
    }
  } else {
    unsupported("(random ops cannot be exported; call eval() for dropout)");
  }
  e.define(this->n.outputs[0], e.initializer("fill", o.dtype, o.shape, std::move(raw)),
           std::vector<bool>(o.shape.size(), false));
  if (op.kind == OpKind::Fill) e.set_uniform(this->n.outputs[0], std::vector<bool>(o.shape.size(), true));
}

void Lowering::norm() {
  const auto& a = op.attrs.ints;
  if (a[3] != 0) unsupported("in RMS form (RMSNorm)");
  if (a.size() > 4 && a[4] > 0) unsupported("in group form (GroupNorm)");
  const Named x = in(0);
  const int64_t nd = a[0];
  const Shape& xs = op.inputs[0].shape;
  const Shape ns(xs.end() - nd, xs.end());
  std::vector<std::string> ins{x.name};
  size_t next = 1;
  if (a[1]) {
    ins.push_back(in(next++).name);
  } else {
    std::string ones(static_cast<size_t>(shape_numel(ns)) * dtype_size(op.inputs[0].dtype), '\0');
    for (int64_t i = 0; i < shape_numel(ns); ++i) {
      if (op.inputs[0].dtype == DType::F32) {
        const float f = 1;
        std::memcpy(ones.data() + i * 4, &f, 4);
      } else {
        unsupported("without a weight for ", dtype_name(op.inputs[0].dtype));
      }
    }
    ins.push_back(e.initializer("ones", op.inputs[0].dtype, ns, std::move(ones)));
  }
  if (a[2]) ins.push_back(in(next++).name);
  e.node("LayerNormalization", ins, {attr_int("axis", -nd), attr_float("epsilon", float(op.attrs.reals[0]))}, {out()});
  define(x.dynamic);
}

void Lowering::run() {
  switch (ir::op_family(op.kind)) {
    case ir::Family::Unary:
    case ir::Family::Binary:
    case ir::Family::Ternary:
      if (op.kind == OpKind::Bernoulli) unsupported("(random ops cannot be exported)");
      return elementwise();
    case ir::Family::Reduce:
      return reduce();
    case ir::Family::Scan: {
      const Named x = in(0);
      if (op.kind == OpKind::CumSum) {
        if (op.attrs.dtype != op.inputs[0].dtype) unsupported("with a dtype conversion");
        e.node("CumSum", {x.name, e.scalar(static_cast<double>(ir::ScanAttrs::decode(op).dim), DType::I64)}, {},
               {out()});
        return define(x.dynamic);
      }
      if (op.kind == OpKind::Sort) {  // the values (the indices of equal values may differ: not exported)
        const ir::ScanAttrs sa = ir::ScanAttrs::decode(op);
        const int64_t dim = sa.dim;
        KILN_CHECK(!(static_cast<size_t>(dim) < x.dynamic.size() && x.dynamic[dim]), kApi,
                   "a sort along a dynamic dim is not exported yet");
        e.node("TopK", {x.name, e.ints({op.inputs[0].shape[static_cast<size_t>(dim)]})},
               {attr_int("axis", dim), attr_int("largest", sa.descending ? 1 : 0), attr_int("sorted", 1)},
               {out(), e.fresh("sort_indices")});
        return define(x.dynamic);
      }
      if (op.kind != OpKind::Softmax && op.kind != OpKind::LogSoftmax) unsupported();
      e.node(op.kind == OpKind::Softmax ? "Softmax" : "LogSoftmax", {x.name},
             {attr_int("axis", ir::ScanAttrs::decode(op).dim)}, {out()});
      return define(x.dynamic);
    }
    case ir::Family::Contract:
      return matmul();
    case ir::Family::Conv:
      return conv();
    case ir::Family::Pool:
      return pool();
    case ir::Family::Movement:
      return movement();
    case ir::Family::Index:
      return index();
    case ir::Family::Creation:
      return creation();
    case ir::Family::Norm:
      return norm();
    default:
      unsupported();
  }
}

}  // namespace

void lower_op(Exporter& e, const CapturedNode& n) { Lowering(e, n).run(); }

}  // namespace kiln::onnx::exporter
