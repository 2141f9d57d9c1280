// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX elementwise ops: unary math, activations, binary arithmetic and comparisons, logic,
// variadic Max/Min/Sum/Mean, Clip, Cast/CastLike, Identity, Dropout (inference).
#include <cmath>
#include <string>
#include <utility>

#include "core/backend.h"
#include "kiln/onnx.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

using UnaryFn = Tensor (*)(const Tensor&);

// A unary op: runs `f`, emits `kiln::<fn>(x)`.
void unary(Registry& r, const char* name, UnaryFn f, const char* fn) {
  r[name] = [f](OpContext& c) { c.set(0, f(c.x(0))); };
  std::string call = std::string("kiln::") + fn;
  r.emit(name, [call](EmitContext& e) {
    e.assign(call + "(" + e.in(0) + ")");
    return true;
  });
}

// A binary arithmetic op on floats: emits `a <op> b` (a rank-0 constant becomes a scalar).
EmitFn binary_emit(const char* op) {
  std::string o = op;
  return [o](EmitContext& e) {
    auto operand = [&](size_t i) {
      const Tensor* t = e.constant(i);
      if (t && t->dim() == 0 && is_floating(t->dtype())) return float_lit(t->to(f64).item<double>());
      return e.in(i);
    };
    // Integer math (shape arithmetic) keeps ONNX's dtype rules: leave it to the generic call.
    for (size_t i = 0; i < 2; ++i)
      if (e.constant(i) && !is_floating(e.constant(i)->dtype())) return false;
    const Tensor *a = e.constant(0), *b = e.constant(1);
    if (a && a->dim() == 0 && b && b->dim() == 0) return false;
    e.assign(operand(0) + " " + o + " " + operand(1));
    return true;
  };
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-trapping-math")))  // lets GCC vectorize the select
#endif
void relu_host(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] < 0.0f ? 0.0f : p[i];  // NaN passes through
}

/// relu(y) for a Relu the plan fused into this node; in place when y is a fresh f32 CPU tensor.
Tensor fused_relu(Tensor y) {
  if (y.device().is_cpu() && y.dtype() == f32 && y.is_contiguous() && y.impl().storage &&
      y.impl().storage.use_count() == 1 && y.storage_offset() == 0) {
    relu_host(host_f32(y), y.numel());
    return y;
  }
  return relu(y);
}

Tensor variadic(OpContext& c, Tensor (*f)(const Tensor&, const Tensor&)) {
  c.check(c.n_in() >= 1, "needs at least one input");
  Tensor acc = c.x(0);
  for (size_t i = 1; i < c.n_in(); ++i) acc = f(acc, c.x(i));
  return acc;
}

}  // namespace

// Float ops on integer inputs compute in float and come back to the input's dtype (ONNX types
// are preserved).
Tensor keep_dtype(const Tensor& y, DType dt) { return y.dtype() == dt ? y : cast(y, dt); }

void register_elementwise(Registry& r) {
  unary(r, "Abs", abs, "abs");
  unary(r, "Neg", neg, "neg");
  unary(r, "Exp", exp, "exp");
  unary(r, "Log", log, "log");
  unary(r, "Sqrt", sqrt, "sqrt");
  unary(r, "Reciprocal", reciprocal, "reciprocal");
  unary(r, "Sin", sin, "sin");
  unary(r, "Cos", cos, "cos");
  unary(r, "Tan", tan, "tan");
  unary(r, "Asin", asin, "asin");
  unary(r, "Acos", acos, "acos");
  unary(r, "Atan", atan, "atan");
  unary(r, "Sinh", sinh, "sinh");
  unary(r, "Cosh", cosh, "cosh");
  unary(r, "Asinh", asinh, "asinh");
  unary(r, "Acosh", acosh, "acosh");
  unary(r, "Atanh", atanh, "atanh");
  unary(r, "Tanh", tanh, "tanh");
  unary(r, "Sigmoid", sigmoid, "sigmoid");
  unary(r, "Relu", relu, "relu");
  unary(r, "Erf", erf, "erf");
  unary(r, "Floor", floor, "floor");
  unary(r, "Ceil", ceil, "ceil");
  unary(r, "Sign", sign, "sign");
  unary(r, "Not", logical_not, "logical_not");
  unary(r, "BitwiseNot", bitwise_not, "bitwise_not");
  unary(r, "IsNaN", isnan, "isnan");
  unary(r, "Softsign", softsign, "softsign");
  unary(r, "HardSwish", hardswish, "hardswish");
  unary(r, "Mish", mish, "mish");
  r["Round"] = [](OpContext& c) { c.set(0, round(c.x(0))); };
  r["Softplus"] = [](OpContext& c) { c.set(0, log1p(exp(c.x(0)))); };
  r["IsInf"] = [](OpContext& c) {
    bool pos = c.attr_i("detect_positive", 1) != 0, negv = c.attr_i("detect_negative", 1) != 0;
    const Tensor& x = c.x(0);
    if (pos && negv)
      c.set(0, isinf(x));
    else if (pos)
      c.set(0, isposinf(x));
    else if (negv)
      c.set(0, isneginf(x));
    else
      c.set(0, zeros(x.shape(), {.dtype = bool_, .device = x.device()}));
  };
  r["Identity"] = [](OpContext& c) { c.set(0, c.x(0)); };
  r.emit("Identity", [](EmitContext& e) {
    e.assign(e.in(0));
    return true;
  });
  r["Dropout"] = [](OpContext& c) {
    bool training = false;
    if (c.has(2)) training = c.value(2).to_vector<bool>().at(0);
    double ratio = c.has(1) ? c.value(1).to(f64).item<double>() : c.attr_f("ratio", 0.5f);
    c.check(!training || ratio == 0, "training mode dropout is random and not supported");
    c.set(0, c.x(0));
    if (c.out.size() > 1) c.set(1, ones(c.x(0).shape(), {.dtype = bool_, .device = c.device}));
  };
  r["HardSigmoid"] = [](OpContext& c) {
    double a = c.attr_f("alpha", 0.2f), b = c.attr_f("beta", 0.5f);
    c.set(0, clamp(c.x(0) * a + b, 0.0, 1.0));
  };
  r["Elu"] = [](OpContext& c) { c.set(0, elu(c.x(0), c.attr_f("alpha", 1.0f))); };
  r["Celu"] = [](OpContext& c) { c.set(0, celu(c.x(0), c.attr_f("alpha", 1.0f))); };
  r["Selu"] = [](OpContext& c) {
    double a = c.attr_f("alpha", 1.67326319217681884765625f), g = c.attr_f("gamma", 1.05070102214813232421875f);
    const Tensor& x = c.x(0);
    c.set(0, where(x > 0, x * g, (exp(x) - 1.0) * (a * g)).to(x.dtype()));
  };
  r["LeakyRelu"] = [](OpContext& c) { c.set(0, leaky_relu(c.x(0), c.attr_f("alpha", 0.01f))); };
  r["ThresholdedRelu"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    c.set(0, where(x > static_cast<double>(c.attr_f("alpha", 1.0f)), x, zeros_like(x)));
  };
  r["Shrink"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    double l = c.attr_f("lambd", 0.5f), b = c.attr_f("bias", 0.0f);
    Tensor xf = x.to(f64);
    Tensor y = where(xf < -l, xf + b, where(xf > l, xf - b, zeros_like(xf)));
    c.set(0, keep_dtype(y, x.dtype()));
  };
  r["PRelu"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Tensor s = c.x(1);
    // Slope is unidirectionally broadcastable to x (numpy rules); old exporters give [C].
    if (s.dim() == 1 && x.dim() >= 2 && s.size(0) == x.size(1) && s.size(0) != x.size(-1)) {
      Shape sh(x.dim() - 1, 1);
      sh[0] = s.size(0);
      s = s.reshape(sh);
    }
    c.set(0, where(x < 0, x * s, x).to(x.dtype()));
  };
  r["Gelu"] = [](OpContext& c) { c.set(0, gelu(c.x(0), c.attr_s("approximate", "none"))); };
  r.emit("Gelu", [](EmitContext& e) {  // opset 20: kiln::gelu, exact or tanh
    const std::string a = e.attr_s("approximate", "none");
    if (a != "none" && a != "tanh") return false;  // the run-time op's error
    e.assign("kiln::gelu(" + e.in(0) + (a == "tanh" ? ", \"tanh\"" : "") + ")");
    return true;
  });
  r.emit("Dropout", [](EmitContext& e) {  // inference: identity (training-mode inputs go generic)
    if (e.n_in() > 2 || e.out.size() > 1) return false;
    e.assign(e.in(0));
    return true;
  });

  // ---- binary ----
  r["Add"] = [](OpContext& c) {
    Tensor y = keep_dtype(add(c.x(0), c.x(1)), c.x(0).dtype());
    c.set(0, c.post == 1 ? fused_relu(std::move(y)) : y);
  };
  r["Sub"] = [](OpContext& c) { c.set(0, keep_dtype(sub(c.x(0), c.x(1)), c.x(0).dtype())); };
  r["Mul"] = [](OpContext& c) { c.set(0, keep_dtype(mul(c.x(0), c.x(1)), c.x(0).dtype())); };
  r["Div"] = [](OpContext& c) { c.set(0, ops::div(c.x(0), c.x(1))); };
  // Float arithmetic as operators when a constant operand shows the dtype is floating; integer
  // arithmetic of shape values as host code.
  for (auto [op, sym] : {std::pair{"Add", "+"}, {"Sub", "-"}, {"Mul", "*"}, {"Div", "/"}}) {
    EmitFn f = binary_emit(sym);
    char c = sym[0];
    r.emit(op, [f, c](EmitContext& e) {
      const ShapeArg *a = e.shape(0), *b = e.shape(1);
      if (a && b && a->dtype == b->dtype) {
        std::string y = std::string("kiln::onnx::ops::int_binary('") + c + "', " + a->expr + ", " + b->expr + ")";
        if (a->dtype == i32) y = "kiln::onnx::ops::cast_ints(" + y + ", kiln::i32)";  // wraps as int32 math
        e.assign_shape(0, y, std::max(a->rank, b->rank), a->dtype);
        return true;
      }
      bool floating = false;
      for (size_t i = 0; i < 2; ++i)
        if (e.constant(i) && is_floating(e.constant(i)->dtype())) floating = true;
      // Without a floating constant the dtype is unknown here; Add/Sub/Mul are the same for every
      // dtype in Kiln's promotion (same-dtype operands), Div is not (integer division truncates).
      if (!floating && std::string(e.node.op_type) == "Div") {
        e.assign("kiln::onnx::ops::div(" + e.in(0) + ", " + e.in(1) + ")");
        return true;
      }
      return f(e);
    });
  }
  r["Pow"] = [](OpContext& c) { c.set(0, ops::pow(c.x(0), c.x(1))); };
  r.emit("Pow", [](EmitContext& e) {
    e.assign("kiln::onnx::ops::pow(" + e.in(0) + ", " + e.in(1) + ")");
    return true;
  });
  r["Mod"] = [](OpContext& c) {
    bool fm = c.attr_i("fmod", 0) != 0;
    const Tensor &a = c.x(0), &b = c.x(1);
    c.check(fm || !is_floating(a.dtype()), "fmod must be 1 for floating point inputs");
    c.set(0, keep_dtype(fm ? fmod(a, b) : remainder(a, b), a.dtype()));
  };
  r["Max"] = [](OpContext& c) {
    c.set(0, variadic(c, [](const Tensor& a, const Tensor& b) { return maximum(a, b); }));
  };
  r["Min"] = [](OpContext& c) {
    c.set(0, variadic(c, [](const Tensor& a, const Tensor& b) { return minimum(a, b); }));
  };
  r["Sum"] = [](OpContext& c) { c.set(0, variadic(c, [](const Tensor& a, const Tensor& b) { return add(a, b); })); };
  r["Mean"] = [](OpContext& c) {
    Tensor s = variadic(c, [](const Tensor& a, const Tensor& b) { return add(a, b); });
    c.set(0, keep_dtype(s / static_cast<double>(c.n_in()), c.x(0).dtype()));
  };
  r["Equal"] = [](OpContext& c) { c.set(0, eq(c.x(0), c.x(1))); };
  r["Less"] = [](OpContext& c) { c.set(0, lt(c.x(0), c.x(1))); };
  r["LessOrEqual"] = [](OpContext& c) { c.set(0, le(c.x(0), c.x(1))); };
  r["Greater"] = [](OpContext& c) { c.set(0, gt(c.x(0), c.x(1))); };
  r["GreaterOrEqual"] = [](OpContext& c) { c.set(0, ge(c.x(0), c.x(1))); };
  r["And"] = [](OpContext& c) { c.set(0, logical_and(c.x(0), c.x(1))); };
  r["Or"] = [](OpContext& c) { c.set(0, logical_or(c.x(0), c.x(1))); };
  r["Xor"] = [](OpContext& c) { c.set(0, logical_xor(c.x(0), c.x(1))); };
  r["BitwiseAnd"] = [](OpContext& c) { c.set(0, bitwise_and(c.x(0), c.x(1))); };
  r["BitwiseOr"] = [](OpContext& c) { c.set(0, bitwise_or(c.x(0), c.x(1))); };
  r["BitwiseXor"] = [](OpContext& c) { c.set(0, bitwise_xor(c.x(0), c.x(1))); };
  r["BitShift"] = [](OpContext& c) {
    std::string dir = c.attr_s("direction", "");
    const Tensor &a = c.x(0), &b = c.x(1);
    c.check(dir == "LEFT" || dir == "RIGHT", "direction must be LEFT or RIGHT");
    c.set(0, keep_dtype(dir == "LEFT" ? bitwise_left_shift(a, b) : bitwise_right_shift(a, b), a.dtype()));
  };
  r["Where"] = [](OpContext& c) {
    Tensor cond = c.x(0);
    if (cond.dtype() != bool_) cond = cond.ne(0);
    c.set(0, where(cond, c.x(1), c.x(2)));
  };
  r.emit("Clip", [](EmitContext& e) {  // constant bounds: kiln::clamp (ReLU6 is Clip(0, 6))
    if (e.opset < 11) return false;
    std::string lo = "std::nullopt", hi = "std::nullopt";
    for (size_t i = 1; i < 3; ++i) {
      if (!e.has(i)) continue;
      const Tensor* t = e.constant(i);
      if (!t || t->numel() != 1 || !is_floating(t->dtype())) return false;
      (i == 1 ? lo : hi) = "kiln::Scalar(" + float_lit(t->to(f64).reshape({}).item<double>()) + ")";
    }
    if (lo == hi && lo == "std::nullopt")
      e.assign(e.in(0));  // no bounds: a copy
    else
      e.assign("kiln::clamp(" + e.in(0) + ", " + lo + ", " + hi + ")");
    return true;
  });
  r["Clip"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    if (c.opset < 11) {
      double lo = c.attr_f("min", -INFINITY), hi = c.attr_f("max", INFINITY);
      c.set(0, clamp(x, Scalar(lo), Scalar(hi)).to(x.dtype()));
      return;
    }
    // One-element float bounds (ReLU6 and the like): a single clamp.
    bool scalar = is_floating(x.dtype());
    for (size_t i = 1; i < 3; ++i) scalar = scalar && (!c.has(i) || c.x(i).numel() == 1);
    if (scalar) {
      std::optional<Scalar> lo, hi;
      // item<T> of the bound's own dtype reads it without a cast op (per-call cost matters here).
      auto bound = [&](size_t i) {
        const Tensor& b = c.value(i);
        return Scalar(b.dtype() == f32 ? static_cast<double>(b.item<float>()) : b.item<double>());
      };
      if (c.has(1)) lo = bound(1);
      if (c.has(2)) hi = bound(2);
      if (lo || hi) {
        c.set(0, clamp(x, lo, hi));
        return;
      }
    }
    Tensor y = x;
    if (c.has(1)) y = maximum(y, c.x(1).to(x.dtype()));
    if (c.has(2)) y = minimum(y, c.x(2).to(x.dtype()));
    c.set(0, y);
  };
  r["Cast"] = [](OpContext& c) {
    int32_t to = static_cast<int32_t>(c.attr_i("to", 0));
    c.check(has_dtype(to), "cast to " + proto::data_type_name(to) + " is not supported");
    c.set(0, cast(c.x(0), to_dtype(to, c.where())));
  };
  r.emit("Cast", [](EmitContext& e) {  // kiln::cast; a shape value to i32/i64 stays one
    const ShapeArg* x = e.shape(0);
    const int64_t to = e.attr_i("to", 0);
    if (!has_dtype(static_cast<int32_t>(to))) return false;
    if (!x || (to != 6 && to != 7)) {
      e.assign("kiln::cast(" + e.in(0) + ", " + dtype_expr(to_dtype(static_cast<int32_t>(to), "Cast")) + ")");
      return true;
    }
    e.assign_shape(0, to == 7 ? x->expr : "kiln::onnx::ops::cast_ints(" + x->expr + ", kiln::i32)", x->rank,
                   to == 7 ? i64 : i32);
    return true;
  });
  // ---- quantization (uint8/int8) ----
  auto per_axis = [](const OpContext& c, const Tensor& v, const Tensor& x) {
    if (v.dim() != 1 || x.dim() == 0 || v.numel() == 1) return v.reshape({});
    Shape s(x.dim(), 1);
    s[axis_of(c, c.attr_i("axis", 1), x.dim())] = v.numel();
    return v.reshape(s);
  };
  auto saturate = [](const Tensor& y, DType dt) {
    double lo = dt == u8 ? 0 : -128, hi = dt == u8 ? 255 : 127;
    return cast(clamp(y, lo, hi), dt);
  };
  r["DequantizeLinear"] = [per_axis](OpContext& c) {
    const Tensor& x = c.x(0);
    Tensor scale = per_axis(c, c.x(1), x);
    Tensor xf = x.to(f32);
    if (c.has(2)) xf = xf - per_axis(c, c.x(2), x).to(f32);
    c.set(0, xf * scale);
  };
  r["QuantizeLinear"] = [per_axis, saturate](OpContext& c) {
    const Tensor& x = c.x(0);
    DType dt = c.has(2) ? c.x(2).dtype() : u8;
    c.check(dt == u8 || dt == i8, "only uint8 and int8 quantization is supported");
    Tensor y = round(x.to(f32) / per_axis(c, c.x(1), x).to(f32));
    if (c.has(2)) y = y + per_axis(c, c.x(2), x).to(f32);
    c.set(0, saturate(y, dt));
  };
  r["DynamicQuantizeLinear"] = [saturate](OpContext& c) {
    Tensor x = c.x(0).to(f32);
    Tensor lo = minimum(amin(x), scalar_tensor(0.0, f32, c.device));
    Tensor hi = maximum(amax(x), scalar_tensor(0.0, f32, c.device));
    Tensor scale = (hi - lo) / 255.0;
    Tensor zp = saturate(round((0.0 - lo) / scale), u8);
    c.set(0, saturate(round(x / scale) + zp.to(f32), u8));
    c.set(1, scale);
    c.set(2, zp);
  };
  r["CastLike"] = [](OpContext& c) { c.set(0, cast(c.x(0), c.x(1).dtype())); };
}

}  // namespace kiln::onnx
