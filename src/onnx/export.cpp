// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX export: values and views of a captured graph as ONNX tensors, the graph's inputs,
// initializers and outputs, and the public entry points. The ops are in export_ops.cpp.
//
// Note [Exported views]: Kiln ops read strided views of buffers (views never reach a backend),
// so every op input is (value, shape, strides, offset). A view of a constant is materialised on
// the host as its own initializer. Any other view is rebuilt from the value's contiguous form:
// Reshape it to dims R cut at the view's strides (sorted, outermost first), Slice the view's
// window out, Reshape to the kept dims (a kept dim may merge whole R dims above its own),
// Transpose them into the view's order, Reshape in its size-1 dims and Expand its stride-0
// dims. Dynamic dims (ExportOptions::dynamic) travel as -1 in Reshape and as full slices. A
// value's dynamic dim is `outer` blocks of the dynamic count of runs of S elements (Named), so
// R is also cut at S and at count * S: strides above are in units of whole blocks and scale
// with the count at run time (time-major rows [T*B, H], a step t slicing the T level). A view
// that fixes the count (a slice of it, a stride inside it, two dynamic dims in one Reshape) is
// an error.
#include "onnx/export.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "kiln/error.h"
#include "kiln/half.h"
#include "kiln/nn/module.h"

namespace kiln::onnx::exporter {

int32_t onnx_type(DType t) {
  switch (t) {
    case DType::Bool:
      return 9;
    case DType::U8:
      return 2;
    case DType::I8:
      return 3;
    case DType::I16:
      return 5;
    case DType::I32:
      return 6;
    case DType::I64:
      return 7;
    case DType::F16:
      return 10;
    case DType::BF16:
      return 16;
    case DType::F32:
      return 1;
    case DType::F64:
      return 11;
    case DType::U16:
      return 4;
    case DType::U32:
      return 12;
    case DType::U64:
      return 13;
  }
  return 0;
}

namespace {

std::string key_of(int64_t v, const ir::TensorDesc& d) {
  std::string k;
  for (int64_t x : {v, static_cast<int64_t>(d.dtype), d.offset}) k.append(std::to_string(x)).push_back(':');
  for (size_t i = 0; i < d.shape.size(); ++i)
    k.append(std::to_string(d.shape[i])).append("/").append(std::to_string(d.strides[i])).push_back(',');
  return k;
}

/// The bytes of view d of a host buffer.
std::string gather_bytes(const std::vector<uint8_t>& src, const ir::TensorDesc& d) {
  const size_t es = dtype_size(d.dtype);
  const int64_t n = d.numel();
  std::string out(static_cast<size_t>(n) * es, '\0');
  std::vector<int64_t> idx(d.shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = d.offset;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * d.strides[k];
    KILN_CHECK(off >= 0 && static_cast<size_t>(off + 1) * es <= src.size(), kApi, "a constant's view is out of range");
    std::memcpy(out.data() + static_cast<size_t>(i) * es, src.data() + static_cast<size_t>(off) * es, es);
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < d.shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

std::string shape_str(const Shape& s) { return to_string(s); }

}  // namespace

Exporter::Exporter(const CapturedGraph& g, const ExportOptions& o)
    : g_(g), o_(o), values_(g.values.size()), uniform_(g.values.size()) {}

std::vector<bool> Exporter::uniform(int64_t v, const ir::TensorDesc& d) {
  const size_t r = d.shape.size();
  std::vector<bool> u(r);
  for (size_t i = 0; i < r; ++i) u[i] = d.shape[i] <= 1 || d.strides[i] == 0;
  const CapturedValue& val = g_.values[static_cast<size_t>(v)];
  if (val.kind == CapturedValue::Kind::Constant) {  // compare the elements of the view
    const int64_t n = d.numel();
    if (n > (int64_t{1} << 16) || d.dtype != val.dtype) return u;
    const std::string b = gather_bytes(val.bytes, d);
    const size_t es = dtype_size(d.dtype);
    std::vector<int64_t> cs(r, 1);
    for (size_t k = r; k-- > 1;) cs[k - 1] = cs[k] * d.shape[k];
    for (size_t i = 0; i < r; ++i) {
      bool same = !u[i];
      for (int64_t e = 0; same && e < n; ++e) {
        const int64_t c = (e / cs[i]) % d.shape[i];
        same = c == 0 || std::memcmp(b.data() + static_cast<size_t>(e) * es,
                                     b.data() + static_cast<size_t>(e - c * cs[i]) * es, es) == 0;
      }
      u[i] = u[i] || same;
    }
    return u;
  }
  const std::vector<bool>& vu = uniform_[static_cast<size_t>(v)];
  if (val.kind != CapturedValue::Kind::Op || vu.size() != val.shape.size()) return u;
  const bool all = std::all_of(vu.begin(), vu.end(), [](bool x) { return x; });
  const Shape& B = val.shape;
  std::vector<int64_t> vs(B.size(), 1);
  for (size_t k = B.size(); k-- > 1;) vs[k - 1] = vs[k] * B[k];
  for (size_t i = 0; i < r; ++i) {
    if (u[i] || all) {
      u[i] = true;
      continue;
    }
    for (size_t j = 0; j < B.size(); ++j)  // the value dim that this view dim walks
      if (B[j] > 1 && vs[j] == d.strides[i] && d.shape[i] <= B[j]) u[i] = vu[j];
  }
  return u;
}

std::string Exporter::fresh(const std::string& hint) { return hint + "_" + std::to_string(counter_++); }

std::string Exporter::node(const std::string& op_type, std::vector<std::string> ins, std::vector<Attr> attrs,
                           std::vector<std::string> outs) {
  if (outs.empty()) outs.push_back(fresh(op_type));
  nodes_.push_back(Node{op_type, std::move(ins), outs, std::move(attrs)});
  return outs[0];
}

std::string Exporter::initializer(const std::string& hint, DType dtype, const Shape& shape, std::string raw) {
  Initializer t;
  t.name = fresh(hint);
  t.data_type = onnx_type(dtype);
  t.dims.assign(shape.begin(), shape.end());
  t.raw = std::move(raw);
  inits_.push_back(std::move(t));
  return inits_.back().name;
}

std::string Exporter::ints(const std::vector<int64_t>& v) {
  std::string raw(v.size() * 8, '\0');
  if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
  const std::string key = "i64:" + raw;
  auto it = consts_.find(key);
  if (it != consts_.end()) return it->second;
  return consts_[key] = initializer("shape", DType::I64, {static_cast<int64_t>(v.size())}, raw);
}

std::string Exporter::scalar(double x, DType dtype) {
  std::string raw(dtype_size(dtype), '\0');
  switch (dtype) {
    case DType::F32: {
      const float f = static_cast<float>(x);
      std::memcpy(raw.data(), &f, 4);
      break;
    }
    case DType::F64:
      std::memcpy(raw.data(), &x, 8);
      break;
    case DType::I64: {
      const int64_t i = static_cast<int64_t>(x);
      std::memcpy(raw.data(), &i, 8);
      break;
    }
    case DType::I32: {
      const int32_t i = static_cast<int32_t>(x);
      std::memcpy(raw.data(), &i, 4);
      break;
    }
    default:
      KILN_CHECK(false, kApi, "no scalar constant of dtype " << dtype_name(dtype) << " yet");
  }
  const std::string key = std::string("s").append(std::to_string(static_cast<int>(dtype))).append(":").append(raw);
  auto it = consts_.find(key);
  if (it != consts_.end()) return it->second;
  return consts_[key] = initializer("scalar", dtype, {}, raw);
}

std::string Exporter::reduce(const std::string& op_type, const std::string& x, const std::vector<int64_t>& axes,
                             bool keep, std::vector<std::string> outs) {
  const Attr kd = attr_int("keepdims", keep ? 1 : 0);
  if (op_type == "ReduceSum" || o_.opset >= 18) return node(op_type, {x, ints(axes)}, {kd}, std::move(outs));
  return node(op_type, {x}, {attr_ints("axes", axes), kd}, std::move(outs));
}

void Exporter::define(int64_t v, std::string name, std::vector<bool> dynamic, int64_t mult, int64_t outer) {
  values_[static_cast<size_t>(v)] = Named{std::move(name), std::move(dynamic), mult, outer};
}

Named Exporter::view(int64_t v, const ir::TensorDesc& d) {
  const std::string key = key_of(v, d);
  auto it = views_.find(key);
  if (it != views_.end()) return it->second;
  Named r = lower_view(v, d);
  views_[key] = r;
  return r;
}

Named Exporter::lower_view(int64_t v, const ir::TensorDesc& d) {
  const CapturedValue& val = g_.values[static_cast<size_t>(v)];
  const bool param_view =
      val.kind == CapturedValue::Kind::Param && !(d.offset == 0 && d.shape == val.shape && d.is_contiguous());
  if (val.kind == CapturedValue::Kind::Constant || (param_view && o_.fold_constants))  // folded on the host
    return Named{initializer(val.name.empty() ? "const" : val.name, d.dtype, d.shape, gather_bytes(val.bytes, d)),
                 std::vector<bool>(d.shape.size(), false)};
  const Named& base = values_[static_cast<size_t>(v)];
  KILN_CHECK(!base.name.empty(), kApi,
             "value %" << v << " has no ONNX form: it is an output of "
                       << (val.op >= 0 ? std::string(ir::op_name(g_.nodes[static_cast<size_t>(val.op)].op->kind))
                                       : std::string("no op"))
                       << " that the export does not write (the indices of a sort or max pool, a norm's statistics)");
  KILN_CHECK(d.dtype == val.dtype, kApi,
             "a view reinterprets a " << dtype_name(val.dtype) << " value as " << dtype_name(d.dtype)
                                      << ", which ONNX cannot express");
  const Shape& B = val.shape;
  if (d.offset == 0 && d.shape == B && d.is_contiguous()) return base;
  const int64_t N = shape_numel(B);
  // Kept dims (size > 1, stride > 0), outermost first.
  std::vector<size_t> kept;
  bool expanded = false;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] > 1 && d.strides[i] > 0) kept.push_back(i);
    if (d.shape[i] > 1 && d.strides[i] == 0) expanded = true;
    KILN_CHECK(d.shape[i] <= 1 || d.strides[i] >= 0, kApi, "a view with a negative stride (a flip) is not supported");
  }
  std::vector<size_t> sorted = kept;
  std::stable_sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) { return d.strides[a] > d.strides[b]; });
  auto fail = [&] {
    KILN_CHECK(false, kApi,
               "a view of shape " << shape_str(d.shape) << ", strides " << to_string(d.strides) << " and offset "
                                  << d.offset << " over a value of shape " << shape_str(B)
                                  << " has no ONNX form (overlapping or unaligned strides)");
  };
  // The base's dynamic dim (at most one) as three levels of its memory: `outer` blocks of N0
  // runs of S elements, N0 the example's dynamic count. Strides from N0 * S up are in units
  // of those blocks, so they scale with the dynamic size at run time.
  int64_t S = 0, N0 = 0;
  for (size_t k = 0; k < B.size(); ++k) {
    if (k >= base.dynamic.size() || !base.dynamic[k]) continue;
    KILN_CHECK(S == 0, kApi, "a value of shape " << shape_str(B) << " has two dynamic dims; one is exported");
    S = base.mult;
    for (size_t j = k + 1; j < B.size(); ++j) S *= B[j];
    N0 = B[k] / (base.outer * base.mult);
    KILN_CHECK(N0 * base.outer * base.mult == B[k], kApi, "inconsistent dynamic dim " << k << " of " << shape_str(B));
  }
  // The dims R of the base, cut at the view's strides and at the dynamic dim's levels, and the
  // window's start in each.
  auto cuts_of = [&](bool dynamic) {
    std::vector<int64_t> c{N, 1};
    for (size_t i : sorted) c.push_back(d.strides[i]);
    if (dynamic) c.insert(c.end(), {N0 * S, S});
    std::sort(c.begin(), c.end(), std::greater<>());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    bool nested = true;  // each cut divides the one above it
    for (size_t j = 0; j + 1 < c.size(); ++j) nested = nested && c[j + 1] >= 1 && c[j] % c[j + 1] == 0;
    return std::make_pair(c, nested);
  };
  auto [cuts, nested] = cuts_of(S != 0);
  if (!nested && S && cuts_of(false).second)
    KILN_CHECK(false, kApi,
               "the graph fixes a dynamic axis: a view of shape "
                   << shape_str(d.shape) << ", strides " << to_string(d.strides) << " over a value of shape "
                   << shape_str(B) << " depends on the size of its dynamic dim (a reshape to a constant size)");
  if (!nested) fail();
  std::vector<int64_t> R, rstride, starts;
  int64_t rem = d.offset;
  for (size_t j = 0; j + 1 < cuts.size(); ++j) {
    R.push_back(cuts[j] / cuts[j + 1]);
    rstride.push_back(cuts[j + 1]);
    starts.push_back(rem / cuts[j + 1]);
    rem %= cuts[j + 1];
  }
  if (R.empty()) {  // a one-element value
    R = {1};
    rstride = {1};
    starts = {0};
  }
  if (starts[0] >= R[0]) fail();
  const size_t nr = R.size();
  size_t rd = nr;  // the R dim of the dynamic count
  for (size_t j = 0; j < nr; ++j)
    if (S && rstride[j] == S && R[j] == N0) rd = j;
  KILN_CHECK(!S || rd < nr, kApi,
             "the graph fixes a dynamic axis: a view of shape " << shape_str(d.shape) << ", strides "
                                                                << to_string(d.strides) << " over a value of shape "
                                                                << shape_str(B) << " splits its dynamic dim");
  // Each kept dim takes the R dim of its stride and, when it is longer, whole R dims above it.
  std::vector<int64_t> take(nr, 1);
  std::vector<size_t> owner(nr, sorted.size());
  for (size_t p = 0; p < sorted.size(); ++p) {
    const size_t i = sorted[p];
    size_t j = static_cast<size_t>(std::find(rstride.begin(), rstride.end(), d.strides[i]) - rstride.begin());
    if (j == nr) fail();
    for (int64_t n = d.shape[i];;) {
      if (owner[j] != sorted.size()) fail();
      owner[j] = p;
      if (starts[j] + n <= R[j]) {
        take[j] = n;
        break;
      }
      if (starts[j] != 0 || n % R[j] != 0 || j == 0) fail();
      take[j] = R[j];
      n /= R[j];
      --j;
    }
  }
  std::vector<bool> rdyn(nr, false);
  if (rd < nr) {
    KILN_CHECK(owner[rd] != sorted.size() && starts[rd] == 0 && take[rd] == R[rd], kApi,
               "the graph fixes a dynamic axis: a view of shape " << shape_str(d.shape) << " slices a dim of "
                                                                  << shape_str(B) << " that is marked dynamic");
    rdyn[rd] = true;
  }
  auto reshape_to = [&](const std::string& x, const std::vector<int64_t>& dims, const std::vector<bool>& dyn) {
    std::vector<int64_t> s = dims;
    int ndyn = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (dyn[i]) s[i] = -1, ++ndyn;
    KILN_CHECK(ndyn <= 1, kApi,
               "a reshape to " << to_string(Shape(dims.begin(), dims.end()))
                               << " keeps two dynamic dims apart, which ONNX Reshape cannot express with one -1");
    return node("Reshape", {x, ints(s)});
  };
  std::string x = base.name;
  if (std::vector<int64_t>(B.begin(), B.end()) != R) x = reshape_to(x, R, rdyn);
  std::vector<int64_t> ss, se, sa;
  for (size_t j = 0; j < nr; ++j) {
    if (starts[j] == 0 && take[j] == R[j]) continue;
    ss.push_back(starts[j]);
    se.push_back(starts[j] + take[j]);
    sa.push_back(static_cast<int64_t>(j));
  }
  if (!sa.empty()) x = node("Slice", {x, ints(ss), ints(se), ints(sa)});
  // Kept dims in sorted order; the dynamic one's blocks above and below the dynamic count.
  std::vector<int64_t> ksz(sorted.size(), 1);
  std::vector<bool> kdyn(sorted.size(), false);
  int64_t outer = 1, mult = 1;
  for (size_t j = 0; j < nr; ++j) {
    if (owner[j] == sorted.size()) continue;
    ksz[owner[j]] *= take[j];
    if (rd < nr && owner[j] == owner[rd]) {
      kdyn[owner[j]] = kdyn[owner[j]] || j == rd;
      if (j < rd) outer *= take[j];
      if (j > rd) mult *= take[j];
    }
  }
  if (nr != sorted.size()) x = reshape_to(x, ksz, kdyn);
  // Into the view's order.
  std::vector<int64_t> perm;
  for (size_t i : kept) perm.push_back(std::find(sorted.begin(), sorted.end(), i) - sorted.begin());
  bool ident = true;
  for (size_t p = 0; p < perm.size(); ++p) ident &= perm[p] == static_cast<int64_t>(p);
  std::vector<bool> vdyn(d.shape.size(), false);
  for (size_t p = 0; p < kept.size(); ++p) vdyn[kept[p]] = kdyn[static_cast<size_t>(perm[p])];
  if (!ident) x = node("Transpose", {x}, {attr_ints("perm", perm)});
  // Size-1 and stride-0 dims.
  std::vector<int64_t> full, unit;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    const bool k = std::find(kept.begin(), kept.end(), i) != kept.end();
    full.push_back(d.shape[i]);
    unit.push_back(k ? d.shape[i] : 1);
  }
  if (d.shape.size() != kept.size()) x = reshape_to(x, unit, vdyn);
  if (expanded) {
    std::vector<int64_t> e;
    for (size_t i = 0; i < d.shape.size(); ++i) e.push_back(d.strides[i] == 0 ? d.shape[i] : 1);
    x = node("Expand", {x, ints(e)});
  }
  return Named{x, vdyn, mult, outer};
}

std::string Exporter::run() {
  std::vector<ValueInfo> ins, outs;
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    const int64_t v = g_.inputs[i];
    const CapturedValue& val = g_.values[static_cast<size_t>(v)];
    const std::string name = i < o_.input_names.size() ? o_.input_names[i] : val.name;
    ValueInfo vi{name, onnx_type(val.dtype), std::vector<int64_t>(val.shape.begin(), val.shape.end()), {}};
    std::vector<bool> dyn(val.shape.size(), false);
    if (auto it = o_.dynamic.find(name); it != o_.dynamic.end()) {
      vi.dim_params.resize(val.shape.size());
      for (int64_t a : it->second) {
        const int64_t r = static_cast<int64_t>(val.shape.size());
        KILN_CHECK(a >= -r && a < r, kApi,
                   "dynamic axis " << a << " of input '" << name << "' of shape " << shape_str(val.shape)
                                   << " is out of range");
        const size_t k = static_cast<size_t>(a < 0 ? a + r : a);
        KILN_CHECK(val.shape[k] > 1, kApi,
                   "dynamic axis " << a << " of input '" << name << "' has size " << val.shape[k]
                                   << " in the example; give an example size above 1");
        dyn[k] = true;
        vi.dim_params[k] = name + "_dim" + std::to_string(k);
      }
    }
    define(v, name, dyn);
    ins.push_back(vi);
  }
  for (int64_t v : g_.params) {
    const CapturedValue& val = g_.values[static_cast<size_t>(v)];
    Initializer t{val.name, onnx_type(val.dtype), std::vector<int64_t>(val.shape.begin(), val.shape.end()),
                  std::string(val.bytes.begin(), val.bytes.end())};
    inits_.push_back(std::move(t));
    define(v, val.name, std::vector<bool>(val.shape.size(), false));
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) lower_node(i);
  for (size_t i = 0; i < g_.outputs.size(); ++i) {
    const CapturedUse& u = g_.outputs[i];
    const std::string name = i < o_.output_names.size() ? o_.output_names[i] : g_.output_names[i];
    Named x = view(u.value, ir::TensorDesc{u.shape, u.strides, u.offset, u.dtype});
    node("Identity", {x.name}, {}, {name});
    ValueInfo vi{name, onnx_type(u.dtype), std::vector<int64_t>(u.shape.begin(), u.shape.end()), {}};
    vi.dim_params.resize(u.shape.size());
    for (size_t k = 0; k < u.shape.size(); ++k)
      if (k < x.dynamic.size() && x.dynamic[k]) vi.dim_params[k] = name + "_dim" + std::to_string(k);
    outs.push_back(vi);
  }
  // State the function does not read (a batch norm's num_batches_tracked) is left out.
  std::set<std::string> used;
  for (const Node& n : nodes_) used.insert(n.inputs.begin(), n.inputs.end());
  std::erase_if(inits_, [&](const Initializer& t) { return !used.count(t.name); });
  return write_model("kiln", nodes_, inits_, ins, outs, o_.opset, o_.producer);
}

void Exporter::lower_node(size_t i) {
  try {
    lower_op(*this, g_.nodes[i]);
  } catch (const Error& e) {
    std::string w = e.what();
    const std::string tag = std::string("[") + kApi + "] ";
    if (w.rfind(tag, 0) == 0) w = w.substr(tag.size());
    KILN_CHECK(false, kApi, "node " << i << " (" << ir::op_name(g_.nodes[i].op->kind) << "): " << w);
  }
}

}  // namespace kiln::onnx::exporter

namespace kiln::onnx {

std::string export_bytes(const CapturedGraph& graph, const ExportOptions& options) {
  KILN_CHECK(options.opset >= 17 && options.opset <= 21, exporter::kApi,
             "opset " << options.opset << " is not written: 17 to 21 are");
  exporter::Exporter e(graph, options);
  return e.run();
}

void export_model(const CapturedGraph& graph, const std::string& path, const ExportOptions& options) {
  const std::string bytes = export_bytes(graph, options);
  std::ofstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), exporter::kApi, "cannot open '" << path << "' for writing");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  KILN_CHECK(f.good(), exporter::kApi, "writing '" << path << "' failed");
}

void export_model(nn::Module& module, const CaptureFunction& fn, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options) {
  CaptureOptions co;
  co.input_names = options.input_names;
  co.output_names = options.output_names;
  // In eval mode, as torch.onnx.export: dropout off, batch norm on its running statistics.
  const bool training = module.is_training();
  module.eval();
  CapturedGraph g;
  try {
    g = capture(module, fn, example_inputs, co);
  } catch (...) {
    module.train(training);
    throw;
  }
  module.train(training);
  export_model(g, path, options);
}

}  // namespace kiln::onnx
