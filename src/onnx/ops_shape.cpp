// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX shape and movement ops: Shape, Size, Reshape, Flatten, Squeeze/Unsqueeze (attribute
// and input forms by opset), Transpose, Concat, Split, Slice, Gather*, Scatter*, Expand, Tile,
// Pad, ConstantOfShape, Constant, Range, EyeLike, Trilu, OneHot, DepthToSpace, SpaceToDepth,
// Compress, NonZero. Shape-valued inputs are read at run time, so shapes may be dynamic.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/backend.h"
#include "core/checked.h"
#include "kiln/onnx.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

std::vector<int64_t> axes_arg(const OpContext& c, size_t input, const char* attr) {
  if (c.opset >= 13 || !c.has_attr(attr)) {
    if (c.has(input)) return c.ints_in(input);
    return c.attr_ints(attr);
  }
  return c.attr_ints(attr);
}

Tensor constant_from_attrs(const OpContext& c) {
  if (const proto::TensorP* t = c.attr_t("value")) return tensor_from(*t, c.device, c.where());
  if (c.has_attr("value_float")) return scalar_tensor(c.attr_f("value_float", 0), f32, c.device);
  if (c.has_attr("value_int")) return scalar_tensor(c.attr_i("value_int", 0), i64, c.device);
  if (c.has_attr("value_floats")) {
    auto v = c.attr_floats("value_floats");
    return tensor(v, Shape{static_cast<int64_t>(v.size())}, c.device);
  }
  if (c.has_attr("value_ints")) {
    auto v = c.attr_ints("value_ints");
    return tensor(v, Shape{static_cast<int64_t>(v.size())}, c.device);
  }
  c.fail("no supported value attribute (string and sparse constants are not supported)");
}

// The pads of Pad in Kiln's order (last dim first), from ONNX's [begin..., end...] over axes.
Tensor onnx_pad(const Tensor& x, const std::vector<int64_t>& pads, const std::vector<int64_t>& axes,
                const std::string& mode, double value, const OpContext& c) {
  int64_t r = x.dim();
  size_t na = axes.size();
  c.check(pads.size() == 2 * na, "pads must have 2 * number of axes values");
  std::vector<int64_t> lo(r, 0), hi(r, 0);
  for (size_t i = 0; i < na; ++i) {
    int64_t a = axis_of(c, axes[i], r);
    lo[a] = pads[i];
    hi[a] = pads[i + na];
  }
  Tensor y = x;
  // Negative pads crop.
  for (int64_t a = 0; a < r; ++a) {
    if (lo[a] < 0) {
      y = y.narrow(a, -lo[a], y.size(a) + lo[a]);
      lo[a] = 0;
    }
    if (hi[a] < 0) {
      y = y.narrow(a, 0, y.size(a) + hi[a]);
      hi[a] = 0;
    }
  }
  Shape kp;
  for (int64_t a = r - 1; a >= 0; --a) {
    kp.push_back(lo[a]);
    kp.push_back(hi[a]);
  }
  std::string km = mode == "constant"  ? "constant"
                   : mode == "reflect" ? "reflect"
                   : mode == "edge"    ? "replicate"
                   : mode == "wrap"    ? "circular"
                                       : "";
  c.check(!km.empty(), "unknown pad mode '" + mode + "'");
  // Kiln's non-constant modes pad at most the trailing dims; trim zero leading pairs.
  if (km != "constant") {
    while (kp.size() >= 2 && kp[kp.size() - 1] == 0 && kp[kp.size() - 2] == 0) {
      kp.pop_back();
      kp.pop_back();
    }
    if (kp.empty()) return y;
  }
  return pad(y, kp, km, value);
}

// Constant integers of an op in generated code that moved from attribute `attr` to input 1 at
// opset 13 (Squeeze/Unsqueeze axes, Split sizes), as the run function reads them; false when
// they are computed at run time.
bool const_ints(const EmitContext& e, const char* attr, std::vector<int64_t>& v) {
  if (e.opset >= 13 || e.node.attr(attr) == nullptr) {
    if (e.has(1)) {
      const Tensor* t = e.constant(1);
      if (!t || is_floating(t->dtype())) return false;
      v = t->to(i64).contiguous().to_vector<int64_t>();
      return true;
    }
  }
  v = e.attr_ints(attr);
  return true;
}

// Generated code for the shape ops. Shape arithmetic (Shape, Size, and Gather, Unsqueeze,
// Squeeze, Concat of shape values) becomes host code on std::vector<int64_t> (kiln::onnx::ops
// helpers); Reshape, Unsqueeze, Transpose and Flatten of tensors become plain Kiln calls. Any
// other form returns false: the generic call, with the run function's semantics and errors.
void emit_shape_ops(Registry& r) {
  r.emit("Shape", [](EmitContext& e) {
    std::string args = e.in(0);
    const bool has_end = e.node.attr("end") != nullptr;
    if (e.attr_i("start", 0) != 0 || has_end) args += ", " + std::to_string(e.attr_i("start", 0));
    if (has_end) args += ", " + std::to_string(e.attr_i("end", 0));
    e.assign_shape(0, "kiln::onnx::ops::shape_of(" + args + ")", 1, i64);
    return true;
  });
  r.emit("Size", [](EmitContext& e) {
    e.assign_shape(0, "std::vector<int64_t>{" + e.in(0) + ".numel()}", 0, i64);
    return true;
  });
  r.emit("Gather", [](EmitContext& e) {
    const ShapeArg *d = e.shape(0), *i = e.shape(1);
    const int64_t a = e.attr_i("axis", 0);
    if (d && i && d->rank == 1 && (a == 0 || a == -1)) {
      e.assign_shape(0, "kiln::onnx::ops::gather_ints(" + d->expr + ", " + i->expr + ")", i->rank, d->dtype);
      return true;
    }
    e.assign("kiln::onnx::ops::gather(" + e.in(0) + ", " + e.in(1) + ", " + std::to_string(a) + ")");
    if (e.rank[0] >= 0 && e.rank[1] >= 0) e.out_rank = {e.rank[0] + e.rank[1] - 1};
    return true;
  });
  r.emit("Concat", [](EmitContext& e) {
    const int64_t a = e.attr_i("axis", 0);
    if (e.n_in() == 0) return false;
    std::string parts;
    bool ints = a == 0 || a == -1;  // all shape values of one dtype: host code
    for (size_t i = 0; i < e.n_in() && ints; ++i) {
      const ShapeArg* p = e.shape(i);
      ints = p && p->rank == 1 && p->dtype == e.shape(0)->dtype;
      if (ints) parts += (i ? ", " : "") + p->expr;
    }
    if (ints) {
      e.assign_shape(0, "kiln::onnx::ops::concat_ints({" + parts + "})", 1, e.shape(0)->dtype);
      return true;
    }
    parts.clear();
    for (size_t i = 0; i < e.n_in(); ++i) parts += (i ? ", " : "") + e.in(i);
    e.assign("kiln::onnx::ops::concat({" + parts + "}, " + std::to_string(a) + ")");
    if (!e.rank.empty() && e.rank[0] >= 0) e.out_rank = {e.rank[0]};
    return true;
  });
  r.emit("Squeeze", [](EmitContext& e) {
    std::vector<int64_t> axes;
    if (!const_ints(e, "axes", axes)) return false;
    if (const ShapeArg* x = e.shape(0)) {
      if (x->rank != 1 || axes.size() > 1 || (axes.size() == 1 && axes[0] != 0 && axes[0] != -1)) return false;
      e.assign_shape(0, "kiln::onnx::ops::squeeze_ints(" + x->expr + ")", 0, x->dtype);
      return true;
    }
    e.assign("kiln::onnx::ops::squeeze(" + e.in(0) + (axes.empty() ? "" : ", " + int_list(axes)) + ")");
    if (!e.rank.empty() && e.rank[0] >= 0 && !axes.empty()) e.out_rank = {e.rank[0] - static_cast<int>(axes.size())};
    return true;
  });
  r.emit("Slice", [](EmitContext& e) {  // constant (or shape-value) starts, ends, axes, steps
    if (e.shape(0)) return false;       // slicing a shape value: the generic call
    std::string args;
    if (e.opset < 10) {
      args = int_list(e.attr_ints("starts")) + ", " + int_list(e.attr_ints("ends"));
      if (e.node.attr("axes")) args += ", " + int_list(e.attr_ints("axes"));
    } else {
      for (size_t i = 1; i < 5; ++i) {
        if (!e.has(i)) {
          if (i < 3) return false;
          if (i == 3 && e.has(4)) args += ", {}";
          continue;
        }
        const ShapeArg* p = e.shape(i);
        if (!p || p->rank != 1) return false;
        args += ", " + p->expr;
      }
      args = args.substr(2);
    }
    e.assign("kiln::onnx::ops::slice(" + e.in(0) + ", " + args + ")");
    if (!e.rank.empty() && e.rank[0] >= 0) e.out_rank = {e.rank[0]};
    return true;
  });
  r.emit("ConstantOfShape", [](EmitContext& e) {  // the shape a shape value: kiln::full
    const ShapeArg* s = e.shape(0);
    if (!s || s->rank != 1) return false;
    std::string lit = "0.0";
    DType dt = f32;
    if (const proto::AttrP* a = e.node.attr("value")) {
      if (!a->t) return false;
      Tensor t = tensor_from(*a->t, Device::cpu(), "ConstantOfShape value");
      if (t.numel() != 1) return false;  // the generic call reports it
      dt = t.dtype();
      t = t.reshape({});
      lit = is_floating(dt)                          ? float_lit(t.to(f64).item<double>())
            : dt == bool_                            ? std::string(t.item<bool>() ? "true" : "false")
            : t.to(i64).item<int64_t>() == INT64_MIN ? std::string("INT64_MIN")
                                                     : "int64_t{" + std::to_string(t.to(i64).item<int64_t>()) + "}";
    }
    e.assign("kiln::onnx::ops::constant_of_shape(" + s->expr + ", kiln::Scalar(" + lit + "), " + dtype_expr(dt) +
             ", dev)");
    return true;
  });
  r.emit("Unsqueeze", [](EmitContext& e) {
    std::vector<int64_t> axes;
    if (!const_ints(e, "axes", axes) || axes.empty()) return false;
    if (const ShapeArg* x = e.shape(0)) {
      if (x->rank != 0 || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) return false;
      e.assign_shape(0, x->expr, 1, x->dtype);
      return true;
    }
    const int rank = e.rank.empty() ? -1 : e.rank[0];
    const int64_t out_rank = rank < 0 ? -1 : rank + static_cast<int64_t>(axes.size());
    for (auto& a : axes) {
      if (a < 0 && out_rank < 0) return false;
      if (a < 0) a += out_rank;
      if (a < 0 || (out_rank >= 0 && a >= out_rank)) return false;
    }
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return false;
    std::string x = e.in(0);
    for (int64_t a : axes) x += ".unsqueeze(" + std::to_string(a) + ")";
    e.assign(x);
    if (out_rank >= 0) e.out_rank = {static_cast<int>(out_rank)};
    return true;
  });
  r.emit("Reshape", [](EmitContext& e) {
    const ShapeArg* s = e.shape(1);
    if (e.opset < 5 || !s || s->rank != 1) return false;
    const bool allowzero = e.attr_i("allowzero", 0) != 0;
    e.assign("kiln::onnx::ops::reshape(" + e.in(0) + ", " + s->expr + (allowzero ? ", true" : "") + ")");
    if (const Tensor* t = e.constant(1)) e.out_rank = {static_cast<int>(t->numel())};
    return true;
  });
  r.emit("Transpose", [](EmitContext& e) {
    std::vector<int64_t> p = e.attr_ints("perm");
    const int rank = e.rank.empty() ? -1 : e.rank[0];
    if (p.empty()) {
      if (rank < 0) return false;
      for (int64_t i = rank - 1; i >= 0; --i) p.push_back(i);
    }
    e.assign(e.in(0) + ".permute(" + int_list(p) + ")");
    e.out_rank = {static_cast<int>(p.size())};
    return true;
  });
  r.emit("Split", [](EmitContext& e) {  // constant sizes: kiln::split
    std::vector<int64_t> sizes;
    if (!const_ints(e, "split", sizes) || sizes.empty() || sizes.size() != e.out.size()) return false;
    std::string r;  // named after an output (unique names), so two Splits do not collide
    for (const auto& o : e.out) r = o.empty() ? r : o + "_parts";
    if (r.empty()) return false;
    e.code += "  const std::vector<kiln::Tensor> " + r + " = kiln::split(" + e.in(0) + ", std::vector<int64_t>" +
              int_list(sizes) + ", " + std::to_string(e.attr_i("axis", 0)) + ");\n";
    for (size_t i = 0; i < e.out.size(); ++i)
      if (!e.out[i].empty()) e.code += "  kiln::Tensor " + e.out[i] + " = " + r + "[" + std::to_string(i) + "];\n";
    return true;
  });
  r.emit("Flatten", [](EmitContext& e) {  // axis 1 of a rank >= 2 input: Tensor::flatten(1)
    const int rank = e.rank.empty() ? -1 : e.rank[0];
    const int64_t a = e.attr_i("axis", 1);
    if (rank < 2 || (a != 1 && a != 1 - rank)) return false;
    e.assign(e.in(0) + ".flatten(1)");
    e.out_rank = {2};
    return true;
  });
}

}  // namespace

void register_shape(Registry& r) {
  r["Shape"] = [](OpContext& c) {
    std::vector<int64_t> v = ops::shape_of(c.x(0), c.attr_i("start", 0), c.attr_i("end", INT64_MAX));
    c.set(0, tensor(v, Shape{static_cast<int64_t>(v.size())}, c.device));
  };
  r["Size"] = [](OpContext& c) { c.set(0, scalar_tensor(c.x(0).numel(), i64, c.device)); };
  r["Reshape"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    c.set(0, ops::reshape(x, c.opset < 5 ? c.attr_ints("shape") : c.ints_in(1), c.attr_i("allowzero", 0) != 0));
  };
  r["Flatten"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t a = c.attr_i("axis", 1);
    if (a < 0) a += x.dim();
    c.check(a >= 0 && a <= x.dim(), "axis out of range");
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.size(i);
    int64_t inner = 1;
    for (int64_t i = a; i < x.dim(); ++i) inner *= x.size(i);
    c.set(0, x.reshape({outer, inner}));
  };
  r["Squeeze"] = [](OpContext& c) { c.set(0, ops::squeeze(c.x(0), axes_arg(c, 1, "axes"))); };
  r["Unsqueeze"] = [](OpContext& c) {
    Tensor x = c.x(0);
    std::vector<int64_t> axes = axes_arg(c, 1, "axes");
    int64_t out_rank = x.dim() + static_cast<int64_t>(axes.size());
    for (auto& a : axes) a = axis_of(c, a, out_rank);
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes) x = x.unsqueeze(a);
    c.set(0, x);
  };
  r["Transpose"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> p = c.attr_ints("perm");
    if (p.empty())
      for (int64_t i = x.dim() - 1; i >= 0; --i) p.push_back(i);
    c.set(0, x.permute(to_dims(p)));
  };
  r["Concat"] = [](OpContext& c) {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < c.n_in(); ++i) xs.push_back(c.x(i));
    c.set(0, ops::concat(xs, c.attr_i("axis", 0)));
  };
  r["Split"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t a = axis_of(c, c.attr_i("axis", 0), x.dim());
    std::vector<int64_t> sizes =
        c.opset >= 13 ? (c.has(1) ? c.ints_in(1) : std::vector<int64_t>{}) : c.attr_ints("split");
    size_t n = c.out.size();
    if (sizes.empty()) {
      int64_t parts = c.has_attr("num_outputs") ? c.attr_i("num_outputs", 1) : static_cast<int64_t>(n);
      c.check(parts > 0, "num_outputs must be positive");
      int64_t each = (x.size(a) + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(each, x.size(a) - i * each)));
    }
    auto pieces = split(x, sizes, a);
    for (size_t i = 0; i < pieces.size(); ++i) c.set(i, pieces[i]);
  };
  r["Slice"] = [](OpContext& c) {
    Tensor x = c.x(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (c.opset < 10) {
      starts = c.attr_ints("starts");
      ends = c.attr_ints("ends");
      axes = c.attr_ints("axes");
    } else {
      starts = c.ints_in(1);
      ends = c.ints_in(2);
      if (c.has(3)) axes = c.ints_in(3);
      if (c.has(4)) steps = c.ints_in(4);
    }
    c.set(0, ops::slice(x, starts, ends, axes, steps));
  };
  r["Gather"] = [](OpContext& c) { c.set(0, ops::gather(c.x(0), c.x(1), c.attr_i("axis", 0))); };
  r["GatherElements"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t a = axis_of(c, c.attr_i("axis", 0), x.dim());
    c.set(0, gather(x, a, fix_negative(c.x(1), x.size(a))));
  };
  auto scatter_elements = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t a = axis_of(c, c.attr_i("axis", 0), x.dim());
    Tensor idx = fix_negative(c.x(1), x.size(a));
    std::string red = c.attr_s("reduction", "none");
    if (red == "none")
      c.set(0, scatter(x, a, idx, c.x(2)));
    else if (red == "add")
      c.set(0, scatter(x, a, idx, c.x(2), "add"));
    else if (red == "mul")
      c.set(0, scatter(x, a, idx, c.x(2), "multiply"));
    else if (red == "max")
      c.set(0, scatter_reduce(x, a, idx, c.x(2), "amax"));
    else if (red == "min")
      c.set(0, scatter_reduce(x, a, idx, c.x(2), "amin"));
    else
      c.fail("unknown reduction '" + red + "'");
  };
  r["ScatterElements"] = scatter_elements;
  r["Scatter"] = scatter_elements;
  r["ScatterND"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Tensor idx = c.x(1);
    int64_t k = idx.size(-1);
    c.check(k <= x.dim(), "indices' last dim exceeds the data rank");
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < k; ++i) parts.push_back(fix_negative(idx.select(-1, i), x.size(i)));
    std::string red = c.attr_s("reduction", "none");
    if (red == "none" || red == "add") {
      c.set(0, index_put(x, parts, c.x(2), red == "add"));
      return;
    }
    c.check(red == "mul" || red == "max" || red == "min", "unknown reduction '" + red + "'");
    // mul / max / min: x as [rows of the first k dims, the rest], each index tuple one row.
    int64_t rows = 1;
    Tensor linear = zeros_like(parts.empty() ? idx.select(-1, 0) : parts[0]).to(i64);
    for (int64_t i = 0; i < k; ++i) {
      linear = linear * x.size(i) + parts[static_cast<size_t>(i)].to(i64);
      rows *= x.size(i);
    }
    const int64_t rest = rows ? x.numel() / rows : 0, q = linear.numel();
    Tensor index = linear.reshape({q, 1}).expand({q, rest});
    Tensor u = c.x(2).reshape({q, rest}), x2 = x.reshape({rows, rest});
    Tensor y = red == "mul" ? scatter(x2, 0, index, u, "multiply")
                            : scatter_reduce(x2, 0, index, u, red == "max" ? "amax" : "amin");
    c.set(0, y.reshape(x.shape()));
  };
  r["GatherND"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Tensor idx = c.x(1);
    int64_t b = c.attr_i("batch_dims", 0);
    int64_t k = idx.size(-1);
    c.check(b + k <= x.dim(), "indices' last dim too large for the data rank");
    int64_t bn = 1;
    Shape bshape, qshape, rest;
    for (int64_t i = 0; i < b; ++i) {
      bn *= x.size(i);
      bshape.push_back(x.size(i));
    }
    for (int64_t i = b; i < idx.dim() - 1; ++i) qshape.push_back(idx.size(i));
    for (int64_t i = b + k; i < x.dim(); ++i) rest.push_back(x.size(i));
    int64_t qn = shape_numel(qshape);
    Shape xs{bn};
    for (int64_t i = b; i < x.dim(); ++i) xs.push_back(x.size(i));
    Tensor xf = x.reshape(xs);
    Tensor ifl = idx.reshape({bn, qn, k});
    std::vector<TensorIndex> ti;
    ti.emplace_back(arange(bn, i64, c.device).reshape({bn, 1}).expand({bn, qn}));
    for (int64_t i = 0; i < k; ++i) ti.emplace_back(fix_negative(ifl.select(-1, i), x.size(b + i)));
    Tensor y = xf.index(ti);
    Shape out = bshape;
    for (int64_t d : qshape) out.push_back(d);
    for (int64_t d : rest) out.push_back(d);
    c.set(0, y.reshape(out));
  };
  r["Expand"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Shape s = broadcast_shapes(x.shape(), to_shape(c.ints_in(1)), "Expand");
    c.set(0, x.expand(s));
  };
  r["Tile"] = [](OpContext& c) { c.set(0, tile(c.x(0), to_shape(c.ints_in(1)))); };
  r["Pad"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    std::string mode = c.attr_s("mode", "constant");
    std::vector<int64_t> pads, axes;
    double value = 0;
    if (c.opset < 11) {
      pads = c.attr_ints(c.has_attr("pads") ? "pads" : "paddings");
      value = c.attr_f("value", 0);
    } else {
      pads = c.ints_in(1);
      if (c.has(2)) value = c.value(2).to(f64).reshape({-1}).to_vector<double>().at(0);
      if (c.has(3)) axes = c.ints_in(3);
    }
    if (axes.empty())
      for (int64_t i = 0; i < x.dim(); ++i) axes.push_back(i);
    c.set(0, onnx_pad(x, pads, axes, mode, value, c));
  };
  r["ConstantOfShape"] = [](OpContext& c) {
    Shape s = to_shape(c.ints_in(0));
    for (int64_t d : s) c.check(d >= 0, "negative dim in shape");
    if (const proto::TensorP* t = c.attr_t("value")) {
      Tensor v = tensor_from(*t, c.device, c.where());
      c.check(v.numel() == 1, "value must have one element");
      c.set(0, v.reshape({}).expand(s).contiguous());
    } else {
      c.set(0, zeros(s, {.dtype = f32, .device = c.device}));
    }
  };
  r["Constant"] = [](OpContext& c) { c.set(0, constant_from_attrs(c)); };
  r["Range"] = [](OpContext& c) {
    const Tensor &s = c.value(0), &l = c.value(1), &d = c.value(2);
    DType dt = s.dtype();
    if (is_floating(dt)) {
      double st = s.to(f64).item<double>(), li = l.to(f64).item<double>(), de = d.to(f64).item<double>();
      c.check(de != 0, "delta must not be 0");
      const double nd = std::ceil((li - st) / de);
      c.check(std::isfinite(nd) && nd < 0x1p63, "start, limit and delta give more elements than fit in int64");
      int64_t n = std::max<int64_t>(0, static_cast<int64_t>(nd));
      c.set(0, (arange(n, f64, c.device) * de + st).to(dt));
    } else {
      int64_t st = s.to(i64).item<int64_t>(), li = l.to(i64).item<int64_t>(), de = d.to(i64).item<int64_t>();
      c.check(de != 0, "delta must not be 0");
      // In 128 bits: extreme start / limit / delta must not wrap.
      const __int128 n128 = (static_cast<__int128>(li) - st + de + (de > 0 ? -1 : 1)) / de;
      c.check(n128 <= INT64_MAX, "start, limit and delta give more elements than fit in int64");
      int64_t n = std::max<int64_t>(0, static_cast<int64_t>(n128));
      c.set(0, cast(arange(n, i64, c.device) * de + st, dt));
    }
  };
  auto window_op = [](int kind) {
    return [kind](OpContext& c) {
      int64_t n = c.value(0).to(i64).reshape({-1}).to_vector<int64_t>().at(0);
      c.check(n >= 0 && n <= (int64_t{1} << 30), "bad window size");
      double den = static_cast<double>(c.attr_i("periodic", 1) ? n : n - 1);
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        double t = 2 * M_PI * static_cast<double>(i) / den;
        v[i] = kind == 0   ? 0.5 - 0.5 * std::cos(t)
               : kind == 1 ? 25.0 / 46 - 21.0 / 46 * std::cos(t)
                           : 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
      }
      int32_t dt = static_cast<int32_t>(c.attr_i("output_datatype", 1));
      c.set(0, tensor(v, Shape{n}, c.device).to(to_dtype(dt, c.where())));
    };
  };
  r["HannWindow"] = window_op(0);
  r["HammingWindow"] = window_op(1);
  r["BlackmanWindow"] = window_op(2);
  r["EyeLike"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    c.check(x.dim() == 2, "input must be 2-d");
    DType dt = c.has_attr("dtype") ? to_dtype(static_cast<int32_t>(c.attr_i("dtype", 1)), c.where()) : x.dtype();
    int64_t k = c.attr_i("k", 0);
    Tensor o = ones(x.shape(), {.dtype = f32, .device = c.device});
    c.set(0, cast(tril(triu(o, k), k), dt));
  };
  r["Trilu"] = [](OpContext& c) {
    int64_t k = c.has(1) ? c.value(1).to(i64).item<int64_t>() : 0;
    c.set(0, c.attr_i("upper", 1) ? triu(c.x(0), k) : tril(c.x(0), k));
  };
  r["OneHot"] = [](OpContext& c) {
    Tensor idx = c.x(0);
    int64_t depth = c.value(1).to(f64).reshape({-1}).to(i64).to_vector<int64_t>().at(0);
    Tensor vals = c.x(2).reshape({-1});
    c.check(vals.numel() == 2, "values must have 2 elements");
    int64_t out_rank = idx.dim() + 1;
    int64_t a = axis_of(c, c.attr_i("axis", -1), out_rank);
    Tensor i = idx.to(i64);
    i = where(i < 0, i + depth, i);
    Shape as(out_rank, 1);
    as[a] = depth;
    Tensor mask = eq(i.unsqueeze(a), arange(depth, i64, c.device).reshape(as));
    c.set(0, where(mask, vals.select(0, 1), vals.select(0, 0)));
  };
  r["DepthToSpace"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t b = c.attr_i("blocksize", 1);
    c.check(x.dim() == 4 && b > 0, "needs a 4-d input and a positive blocksize");
    const int64_t bb = detail::checked_mul(b, b, "onnx");
    c.check(x.size(1) % bb == 0, "needs a 4-d input with C divisible by blocksize^2");
    int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    detail::checked_numel({n, ch, h, w, bb}, "onnx");  // the result's dims below cannot overflow
    Tensor y;
    if (c.attr_s("mode", "DCR") == "DCR")
      y = x.reshape({n, b, b, ch / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
    else
      y = x.reshape({n, ch / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
    c.set(0, y.reshape({n, ch / (b * b), h * b, w * b}));
  };
  r["SpaceToDepth"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t b = c.attr_i("blocksize", 1);
    c.check(x.dim() == 4 && b > 0 && x.size(2) % b == 0 && x.size(3) % b == 0, "bad input for blocksize");
    int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    detail::checked_numel({n, ch, h, w, b, b}, "onnx");  // ch * b * b below cannot overflow
    Tensor y = x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4});
    c.set(0, y.reshape({n, ch * b * b, h / b, w / b}));
  };
  r["Compress"] = [](OpContext& c) {
    Tensor x = c.x(0);
    Tensor cond = c.x(1).reshape({-1});
    if (cond.dtype() != bool_) cond = cond.ne(0);
    int64_t a = 0;
    if (c.has_attr("axis"))
      a = axis_of(c, c.attr_i("axis", 0), x.dim());
    else
      x = x.reshape({-1});
    int64_t n = std::min(cond.numel(), x.size(a));
    Tensor idx = nonzero(cond.narrow(0, 0, n)).reshape({-1});
    c.set(0, index_select(x, a, idx));
  };
  r["NonZero"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    c.set(0, nonzero(x.dim() == 0 ? x.reshape({1}) : x).t().contiguous());
  };
  r["ReverseSequence"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> lens = c.ints_in(1);
    int64_t ba = c.attr_i("batch_axis", 1), ta = c.attr_i("time_axis", 0);
    std::vector<Tensor> rows;
    for (int64_t b = 0; b < x.size(ba); ++b) {
      Tensor row = x.select(ba, b).unsqueeze(ba);
      int64_t l = std::clamp<int64_t>(lens.at(static_cast<size_t>(b)), 0, x.size(ta));
      std::vector<int64_t> idx;
      for (int64_t t = 0; t < x.size(ta); ++t) idx.push_back(t < l ? l - 1 - t : t);
      rows.push_back(index_select(row, ta, tensor(idx, Shape{x.size(ta)}, c.device)));
    }
    c.set(0, cat(rows, ba));
  };
  emit_shape_ops(r);
}

}  // namespace kiln::onnx
