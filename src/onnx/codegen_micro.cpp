// SPDX-License-Identifier: MIT OR Apache-2.0
// The micro target of ONNX code generation, part 1: a model lowered to kernel calls over fixed
// shapes. The graph is evaluated once at generation time with the run-time path's op functions
// (run_node) on zero inputs of the fixed shapes: that gives every value's shape, and nodes whose
// inputs are constants or shapes (Shape -> Gather -> Concat -> Reshape chains) are folded to
// constants. The remaining nodes become kiln_micro kernel calls; Conv + BatchNormalization,
// Linear + bias and Conv/Linear + Relu/Clip are fused. Emission is in codegen_micro_emit.cpp.
#include "onnx/codegen_micro.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/error.h"
#include "kiln/onnx.h"

namespace kiln::onnx {
namespace micro {

namespace {

using proto::NodeP;

const std::set<std::string>& alias_ops() {
  static const std::set<std::string> s = {"Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"};
  return s;
}
const std::set<std::string>& unary_ops() {
  static const std::set<std::string> s = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "Exp"};
  return s;
}

// Window geometry of one spatial axis of a Conv or pool: stride, dilation, kernel, pads.
struct Axis {
  int32_t k = 1, s = 1, d = 1, pad_begin = 0, pad_end = 0;
};

// The window axes of a Conv / pool node over input spatial dims `in` and output dims `out`.
std::vector<Axis> window_axes(const NodeP& n, const Ints& kernel, const Ints& in, const Ints& out) {
  const size_t r = kernel.size();
  Ints strides = attr_ints(n, "strides", Ints(r, 1)), dil = attr_ints(n, "dilations", Ints(r, 1));
  Ints pads = attr_ints(n, "pads", Ints(2 * r, 0));
  const std::string ap = attr_s(n, "auto_pad", "NOTSET");
  std::vector<Axis> ax(r);
  for (size_t i = 0; i < r; ++i) {
    Axis& a = ax[i];
    a.k = static_cast<int32_t>(kernel[i]);
    a.s = static_cast<int32_t>(strides.size() > i ? strides[i] : 1);
    a.d = static_cast<int32_t>(dil.size() > i ? dil[i] : 1);
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * a.s + (a.k - 1) * a.d + 1 - in[i]);
      a.pad_begin = static_cast<int32_t>(ap == "SAME_UPPER" ? total / 2 : total - total / 2);
      a.pad_end = static_cast<int32_t>(total - a.pad_begin);
    } else if (ap != "VALID" && pads.size() == 2 * r) {
      a.pad_begin = static_cast<int32_t>(pads[i]);
      a.pad_end = static_cast<int32_t>(pads[i + r]);
    }
  }
  return ax;
}

// Broadcast strides of an operand of shape s against output shape out (right-aligned), with
// the output's size-1 dims dropped.
void broadcast_params(const Ints& out, const Ints& a, const Ints& b, kiln_micro::BroadcastParams& p, bool& ok) {
  const Ints as = contiguous_strides(a), bs = contiguous_strides(b);
  p = {};
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (p.rank == 6) {
      ok = false;
      return;
    }
    auto stride = [&](const Ints& s, const Ints& st) -> int32_t {
      const int64_t k = static_cast<int64_t>(d) - static_cast<int64_t>(out.size() - s.size());
      return k >= 0 && s[k] == out[d] ? static_cast<int32_t>(st[k]) : 0;
    };
    p.dims[p.rank] = static_cast<int32_t>(out[d]);
    p.a_str[p.rank] = stride(a, as);
    p.b_str[p.rank] = stride(b, bs);
    ++p.rank;
  }
  ok = true;
}

class Lowerer {
 public:
  Lowerer(const std::string& path, const MicroOptions& o)
      : path_(path), o_(o), model_(proto::parse_model(proto::read_file(path))), g_(model_.graph) {
    KILN_CHECK(model_.has_graph, "kiln-onnx micro", path << ": the model has no graph");
    for (const auto& op : model_.opsets)
      if (op.domain.empty() || op.domain == "ai.onnx") opset_ = op.version;
  }

  Lowered run() {
    bind();
    for (const auto& n : g_.nodes) node(n);
    if (!unsupported_.empty()) {
      std::string list;
      for (const auto& u : unsupported_) list += "\n  " + u;
      KILN_CHECK(false, "kiln-onnx micro",
                 path_ << ": " << unsupported_.size() << " node(s) cannot run on the micro target:" << list);
    }
    for (const auto& v : g_.outputs) {
      KILN_CHECK(!extra_.count(v.name), "kiln-onnx micro",
                 path_ << ": graph output '" << v.name << "' is an extra output of " << extra_[v.name]
                       << ", which the micro target does not compute");
      if (rt_.count(v.name)) {
        m_.outputs.push_back(v.name);
      } else {
        auto it = val_.find(v.name);
        KILN_CHECK(it != val_.end(), "kiln-onnx micro", path_ << ": graph output '" << v.name << "' is never computed");
        m_.outputs.push_back(v.name);
        m_.const_outputs[v.name] = floats(it->second);
        m_.shape[v.name] = dims_of(it->second);
      }
    }
    fuse();
    return std::move(m_);
  }

 private:
  // Initializers are constants; the other graph inputs get their fixed shapes.
  void bind() {
    KILN_CHECK(g_.sparse_initializers == 0, "kiln-onnx micro", path_ << ": sparse initializers are not supported");
    for (const auto& t : g_.initializers) val_[t.name] = tensor_from(t, Device::cpu(), "initializer");
    for (const auto& [name, file] : o_.constants) {
      bool found = false;
      for (const auto& v : g_.inputs) found = found || v.name == name;
      KILN_CHECK(found, "kiln-onnx micro", path_ << ": --constant names '" << name << "', which is not a graph input");
      val_[name] = load_tensor_proto(file, Device::cpu());
    }
    for (const auto& v : g_.inputs) {
      if (val_.count(v.name)) continue;
      const bool is_int = v.elem_type == proto::kInt64 || v.elem_type == proto::kInt32;
      KILN_CHECK(v.is_tensor && (v.elem_type == proto::kFloat || is_int), "kiln-onnx micro",
                 "input '" << v.name << "' is " << proto::data_type_name(v.elem_type)
                           << "; the micro target takes f32, int64 and int32 inputs only");
      if (is_int) m_.int_type[v.name] = v.elem_type == proto::kInt64 ? "int64_t" : "int32_t";
      Ints shape;
      auto given = o_.shapes.find(v.name);
      if (given != o_.shapes.end()) {
        shape = given->second;
      } else {
        KILN_CHECK(v.has_shape, "kiln-onnx micro",
                   "input '" << v.name << "' declares no shape; the micro target needs fixed shapes: pass --shape "
                             << v.name << "=D0xD1x...");
        for (size_t d = 0; d < v.shape.size(); ++d) {
          const auto& dim = v.shape[d];
          int64_t size = dim.value;
          if (size < 0 && o_.dims.count(dim.param)) size = o_.dims.at(dim.param);
          KILN_CHECK(size >= 0, "kiln-onnx micro",
                     "input '" << v.name << "' dim " << d << " ("
                               << (dim.param.empty() ? std::string("unknown") : "'" + dim.param + "'")
                               << ") is not fixed; the micro target sizes its arena at generation time: pass --dim "
                               << (dim.param.empty() ? std::string("NAME") : dim.param) << "=N or --shape " << v.name
                               << "=D0xD1x...");
          shape.push_back(size);
        }
      }
      val_[v.name] = zeros(to_shape(shape), {.dtype = is_int ? (v.elem_type == proto::kInt64 ? i64 : i32) : f32,
                                             .device = Device::cpu()});
      rt_.insert(v.name);
      m_.inputs.push_back(v.name);
      m_.shape[v.name] = shape;
    }
  }

  std::string what(const NodeP& n) const { return n.op_type + " '" + (n.name.empty() ? n.output[0] : n.name) + "'"; }
  void refuse(const NodeP& n, const std::string& why) {
    unsupported_.push_back(what(n) + ": " + why);
    for (const auto& o : n.output) unknown_.insert(o);
  }

  void node(const NodeP& n) {
    bool any_rt = false, any_unknown = false;
    std::vector<Tensor> ins;
    for (const auto& i : n.input) {
      if (i.empty()) {
        ins.emplace_back();
        continue;
      }
      if (unknown_.count(i)) {
        any_unknown = true;
        continue;
      }
      if (extra_.count(i))
        return refuse(
            n, "reads '" + i + "', an extra output of " + extra_[i] + ", which the micro target does not compute");
      auto it = val_.find(i);
      KILN_CHECK(it != val_.end(), "kiln-onnx micro",
                 what(n) << " reads '" << i << "', which nothing computes before it");
      ins.push_back(it->second);
      any_rt = any_rt || rt_.count(i) > 0;
    }
    for (const auto& a : n.attrs)
      if (a.g || !a.graphs.empty()) return refuse(n, "control flow (subgraphs) is not supported");
    if (any_unknown) {
      for (const auto& o : n.output) unknown_.insert(o);
      return;
    }
    if (!n.domain.empty() && n.domain != "ai.onnx") return refuse(n, "domain '" + n.domain + "' is not supported");
    std::vector<Tensor> outs = run_node(n, opset_, ins, Device::cpu());
    for (size_t i = 0; i < n.output.size() && i < outs.size(); ++i)
      if (!n.output[i].empty() && outs[i].defined()) val_[n.output[i]] = outs[i];
    // Folded: every input a constant, or a shape of a fixed-shape value.
    if (!any_rt || n.op_type == "Shape" || n.op_type == "Size") return;
    const bool multi = n.op_type == "Split" || n.op_type == "LSTM";  // every output computed
    for (size_t i = 0; i < n.output.size(); ++i) {
      if (n.output[i].empty()) continue;
      if (i > 0 && !multi) {
        extra_[n.output[i]] = what(n);
        continue;
      }
      rt_.insert(n.output[i]);
      if (i < outs.size() && outs[i].defined()) m_.shape[n.output[i]] = dims_of(outs[i]);
    }
    if (n.output.size() > 1 && !multi && n.op_type != "Dropout" && n.op_type != "MaxPool" &&
        n.op_type != "BatchNormalization")
      return refuse(n, "ops with several outputs are not supported");
    if (!integers_ok(n)) return;
    if (outs.empty() || !outs[0].defined()) return refuse(n, "it has no first output");
    if (outs[0].dtype() != f32) {
      // Views of integer inputs stay in the caller's buffer, typed as it.
      if (!alias_ops().count(n.op_type) || n.op_type == "Cast" || !m_.int_type.count(n.input[0]) ||
          outs[0].dtype() != ins[0].dtype())
        return refuse(n, "its output is not f32 (the micro target computes f32 only)");
      m_.int_type[n.output[0]] = m_.int_type[n.input[0]];
    }
    lower(n, ins, outs);
  }

  // Run-time integers (integer inputs and their views) feed only Gather's indices, Cast and
  // views; refuses n otherwise.
  bool integers_ok(const NodeP& n) {
    for (size_t i = 0; i < n.input.size(); ++i) {
      if (!m_.int_type.count(n.input[i])) continue;
      if ((n.op_type == "Gather" && i == 1) || alias_ops().count(n.op_type)) continue;
      refuse(n, "reads the integer value '" + n.input[i] +
                    "'; run-time integers may only be Gather indices, cast to float or reshaped");
      return false;
    }
    return true;
  }

  bool is_rt(const NodeP& n, size_t i) const { return i < n.input.size() && rt_.count(n.input[i]) > 0; }

  Step& add(const NodeP& n, Step::Kind k) {
    Step s;
    s.kind = k;
    s.what = what(n);
    s.out = n.output[0];
    m_.steps.push_back(std::move(s));
    return m_.steps.back();
  }

  void lower(const NodeP& n, const std::vector<Tensor>& in, const std::vector<Tensor>& outs) {
    const std::string& op = n.op_type;
    static const std::set<std::string> rt_operands = {"Add", "Sub", "Mul", "Div", "MatMul", "Concat", "Gather", "LSTM"};
    for (size_t i = 1; i < n.input.size(); ++i)
      if (is_rt(n, i) && !rt_operands.count(op))
        return refuse(n, "input " + std::to_string(i) + " ('" + n.input[i] + "') must be a constant here");
    NodeView v{n, in, outs, {}, opset_, what(n)};
    for (size_t i = 0; i < n.input.size(); ++i) v.rt.push_back(is_rt(n, i));
    std::string why;
    if (lower_more(v, m_, why)) {
      if (!why.empty()) refuse(n, why);
      return;
    }
    const Ints out = m_.shape[n.output[0]];
    if (alias_ops().count(op)) {
      Step& s = add(n, Step::Alias);
      s.in = {n.input[0]};
      return;
    }
    if (unary_ops().count(op)) return lower_unary(n, in);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return lower_binary(n, in, out);
    if (op == "Conv") return lower_conv(n, in, out);
    if (op == "Gemm") return lower_gemm(n, in, out);
    if (op == "MatMul") return lower_matmul(n, in, out);
    if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
      return lower_pool(n, in, out);
    if (op == "BatchNormalization") return lower_batchnorm(n, in, out);
    if (op == "Softmax") return lower_softmax(n, out);
    if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") return lower_reduce(n, in);
    if (op == "Transpose") return lower_transpose(n, in, out);
    if (op == "Concat") return lower_concat(n, in, out);
    refuse(n, "op not supported by the micro target");
  }

  void lower_unary(const NodeP& n, const std::vector<Tensor>& in) {
    Step& s = add(n, Step::Unary);
    s.in = {n.input[0]};
    s.inplace_ok = true;
    const std::string& op = n.op_type;
    s.unary = op == "Relu"        ? "relu"
              : op == "Clip"      ? "clip"
              : op == "LeakyRelu" ? "leaky_relu"
              : op == "Sigmoid"   ? "sigmoid"
              : op == "Tanh"      ? "tanh"
                                  : "exp";
    s.alpha = attr_f(n, "alpha", 0.01f);
    if (op == "Clip") {
      s.lo = -std::numeric_limits<float>::max();
      s.hi = std::numeric_limits<float>::max();
      if (opset_ < 11) {
        s.lo = attr_f(n, "min", s.lo);
        s.hi = attr_f(n, "max", s.hi);
      } else {
        if (in.size() > 1 && in[1].defined()) s.lo = floats(in[1]).at(0);
        if (in.size() > 2 && in[2].defined()) s.hi = floats(in[2]).at(0);
      }
    }
  }

  void lower_binary(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    Step s;
    s.kind = Step::Binary;
    s.what = what(n);
    s.out = n.output[0];
    const std::string& op = n.op_type;
    s.bop = op == "Add"   ? kiln_micro::kAdd
            : op == "Sub" ? kiln_micro::kSub
            : op == "Mul" ? kiln_micro::kMul
                          : kiln_micro::kDiv;
    bool ok = false;
    broadcast_params(out, dims_of(in[0]), dims_of(in[1]), s.bc, ok);
    if (!ok) return refuse(n, "more than 6 broadcast dims");
    for (int side = 0; side < 2; ++side) {
      if (is_rt(n, side)) {
        s.in.push_back(n.input[side]);
      } else {
        s.const_side = side;
        s.w = floats(in[side]);
        s.b.assign(in[side].shape().begin(), in[side].shape().end());  // the constant's shape (for fusion)
      }
    }
    // In place over the first run-time operand when it has the output's full shape.
    s.inplace_ok = dims_of(in[s.const_side == 0 ? 1 : 0]) == out;
    m_.steps.push_back(std::move(s));
  }

  void lower_conv(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    const Ints xs = dims_of(in[0]), ws = dims_of(in[1]);
    if (xs.size() != 4 && xs.size() != 3) return refuse(n, "only 1-d and 2-d convolutions are supported");
    const bool one_d = xs.size() == 3;
    Ints kernel(ws.begin() + 2, ws.end());
    Ints ins(xs.begin() + 2, xs.end()), outs(out.begin() + 2, out.end());
    std::vector<Axis> ax = window_axes(n, kernel, ins, outs);
    if (one_d) ax.insert(ax.begin(), Axis{});
    Step& s = add(n, Step::Conv);
    s.in = {n.input[0]};
    auto& c = s.conv;
    c.n = static_cast<int32_t>(xs[0]);
    c.c_in = static_cast<int32_t>(xs[1]);
    c.h = one_d ? 1 : static_cast<int32_t>(xs[2]);
    c.w = static_cast<int32_t>(xs.back());
    c.c_out = static_cast<int32_t>(out[1]);
    c.oh = one_d ? 1 : static_cast<int32_t>(out[2]);
    c.ow = static_cast<int32_t>(out.back());
    c.kh = ax[0].k, c.kw = ax[1].k, c.sh = ax[0].s, c.sw = ax[1].s;
    c.pt = ax[0].pad_begin, c.pl = ax[1].pad_begin, c.dh = ax[0].d, c.dw = ax[1].d;
    c.groups = static_cast<int32_t>(attr_i(n, "group", 1));
    s.w = floats(in[1]);
    if (in.size() > 2 && in[2].defined()) s.b = floats(in[2]);
  }

  void lower_gemm(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    if (attr_i(n, "transA", 0)) return refuse(n, "transA = 1 with a run-time A is not supported");
    const Ints bs = dims_of(in[1]);
    const bool tb = attr_i(n, "transB", 0) != 0;
    const float alpha = attr_f(n, "alpha", 1.0f), beta = attr_f(n, "beta", 1.0f);
    const int64_t M = out[0], N = out[1], K = tb ? bs[1] : bs[0];
    Step& s = add(n, Step::Linear);
    s.in = {n.input[0]};
    s.lin = {static_cast<int32_t>(M), static_cast<int32_t>(K), static_cast<int32_t>(N), kiln_micro::kActNone, 0, 0, 0};
    const std::vector<float> b = floats(in[1]);
    s.w.resize(K * N);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) s.w[k * N + j] = alpha * (tb ? b[j * K + k] : b[k * N + j]);
    if (in.size() > 2 && in[2].defined()) {
      const Tensor c = expand(cast(in[2], f32), to_shape({M, N})).contiguous();
      std::vector<float> full = c.to_vector<float>();
      const Ints cs = dims_of(in[2]);
      const bool per_row = !(cs.size() <= 1 || (cs.size() == 2 && cs[0] == 1));
      if (per_row) {
        s.lin.bias_rows = static_cast<int32_t>(M);
        s.b = full;
      } else {
        s.b.assign(full.begin(), full.begin() + N);
      }
      for (float& v : s.b) v *= beta;
    }
  }

  void lower_matmul(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    const Ints as = dims_of(in[0]), bs = dims_of(in[1]);
    if (!is_rt(n, 0)) return refuse(n, "a constant A times a run-time B is not supported");
    if (as.size() < 2 || bs.size() < 2) return refuse(n, "1-d operands are not supported");
    const int32_t K = static_cast<int32_t>(as.back()), N = static_cast<int32_t>(bs.back());
    if (!is_rt(n, 1)) {
      if (prod(bs, 0, bs.size() - 2) != 1) return refuse(n, "a constant B with batch dims above 1 is not supported");
      Step& s = add(n, Step::Linear);
      s.in = {n.input[0]};
      s.lin = {static_cast<int32_t>(prod(as) / K), K, N, kiln_micro::kActNone, 0, 0, 0};
      s.w = floats(in[1]);  // [K, N] already
      return;
    }
    if (as.size() != bs.size() || !std::equal(as.begin(), as.end() - 2, bs.begin()))
      return refuse(n, "two run-time operands need equal batch dims (no broadcasting)");
    Step& s = add(n, Step::MatMul);
    s.in = {n.input[0], n.input[1]};
    s.batch = static_cast<int32_t>(prod(as, 0, as.size() - 2));
    s.lin = {static_cast<int32_t>(as[as.size() - 2]), K, N, kiln_micro::kActNone, 0, 0, 0};
  }

  void lower_pool(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    const Ints xs = dims_of(in[0]);
    if (xs.size() != 4 && xs.size() != 3) return refuse(n, "only 1-d and 2-d pooling is supported");
    const bool global = n.op_type.rfind("Global", 0) == 0, one_d = xs.size() == 3;
    Ints ins(xs.begin() + 2, xs.end()), outs(out.begin() + 2, out.end());
    Ints kernel = global ? ins : attr_ints(n, "kernel_shape", {});
    std::vector<Axis> ax = global ? std::vector<Axis>(ins.size()) : window_axes(n, kernel, ins, outs);
    for (size_t i = 0; i < ax.size(); ++i) {
      if (global) ax[i].k = static_cast<int32_t>(ins[i]);
      if (ax[i].d != 1) return refuse(n, "dilated pooling is not supported");
    }
    if (one_d) ax.insert(ax.begin(), Axis{});
    const bool is_max = n.op_type == "MaxPool" || n.op_type == "GlobalMaxPool";
    Step& s = add(n, is_max ? Step::MaxPool : Step::AvgPool);
    s.in = {n.input[0]};
    auto& p = s.pool;
    p.planes = static_cast<int32_t>(xs[0] * xs[1]);
    p.h = one_d ? 1 : static_cast<int32_t>(xs[2]);
    p.w = static_cast<int32_t>(xs.back());
    p.oh = one_d ? 1 : static_cast<int32_t>(out[2]);
    p.ow = static_cast<int32_t>(out.back());
    p.kh = ax[0].k, p.kw = ax[1].k, p.sh = ax[0].s, p.sw = ax[1].s;
    p.pt = ax[0].pad_begin, p.pl = ax[1].pad_begin, p.pb = ax[0].pad_end, p.pr = ax[1].pad_end;
    p.count_include_pad = static_cast<int32_t>(attr_i(n, "count_include_pad", 0));
  }

  void lower_batchnorm(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    if (attr_i(n, "training_mode", 0)) return refuse(n, "training mode is not supported");
    const std::vector<float> g = floats(in[1]), b = floats(in[2]), mean = floats(in[3]), var = floats(in[4]);
    const double eps = attr_f(n, "epsilon", 1e-5f);
    Step& s = add(n, Step::Affine);
    s.in = {n.input[0]};
    s.inplace_ok = true;
    s.outer = static_cast<int32_t>(out[0]);
    s.len = static_cast<int32_t>(out.size() > 1 ? out[1] : 1);
    s.inner = static_cast<int32_t>(prod(out, 2));
    s.w.resize(s.len);
    s.b.resize(s.len);
    for (int32_t c = 0; c < s.len; ++c) {
      const double sc = g[c] / std::sqrt(static_cast<double>(var[c]) + eps);
      s.w[c] = static_cast<float>(sc);
      s.b[c] = static_cast<float>(b[c] - mean[c] * sc);
    }
  }

  void lower_softmax(const NodeP& n, const Ints& out) {
    const int64_t r = static_cast<int64_t>(out.size());
    int64_t axis = attr_i(n, "axis", opset_ >= 13 ? -1 : 1);
    if (axis < 0) axis += r;
    Step& s = add(n, Step::Softmax);
    s.in = {n.input[0]};
    s.outer = static_cast<int32_t>(prod(out, 0, axis));
    if (opset_ >= 13) {
      s.len = static_cast<int32_t>(out[axis]);
      s.inner = static_cast<int32_t>(prod(out, axis + 1));
    } else {
      s.len = static_cast<int32_t>(prod(out, axis));
      s.inner = 1;
    }
  }

  // Over a contiguous block of axes (attribute, or input 1 from opset 18 / ReduceSum 13).
  void lower_reduce(const NodeP& n, const std::vector<Tensor>& in) {
    const Ints xs = dims_of(in[0]);
    const int64_t r = static_cast<int64_t>(xs.size());
    Ints axes = attr_ints(n, "axes", {});
    if (in.size() > 1 && in[1].defined()) axes = cast(in[1], i64).to_vector<int64_t>();
    if (axes.empty()) {
      if (attr_i(n, "noop_with_empty_axes", 0)) return refuse(n, "noop_with_empty_axes is not supported");
      for (int64_t a = 0; a < r; ++a) axes.push_back(a);
    }
    for (int64_t& a : axes) a = a < 0 ? a + r : a;
    std::sort(axes.begin(), axes.end());
    for (size_t i = 1; i < axes.size(); ++i)
      if (axes[i] != axes[i - 1] + 1) return refuse(n, "the reduced axes must be adjacent");
    if (prod(xs) == 0) return refuse(n, "empty input");
    Step& s = add(n, Step::Reduce);
    s.in = {n.input[0]};
    s.rop = n.op_type == "ReduceMean"  ? kiln_micro::kReduceMean
            : n.op_type == "ReduceSum" ? kiln_micro::kReduceSum
                                       : kiln_micro::kReduceMax;
    s.outer = static_cast<int32_t>(prod(xs, 0, axes.front()));
    s.len = static_cast<int32_t>(prod(xs, axes.front(), axes.back() + 1));
    s.inner = static_cast<int32_t>(prod(xs, axes.back() + 1));
  }

  void lower_transpose(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    const Ints xs = dims_of(in[0]), st = contiguous_strides(xs);
    Ints perm = attr_ints(n, "perm", {});
    if (perm.empty())
      for (size_t i = xs.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    Step s;
    s.kind = Step::Permute;
    s.what = what(n);
    s.out = n.output[0];
    s.in = {n.input[0]};
    for (size_t d = 0; d < out.size(); ++d) {
      if (out[d] == 1) continue;
      if (s.perm.rank == 6) return refuse(n, "more than 6 dims of size above 1");
      s.perm.dims[s.perm.rank] = static_cast<int32_t>(out[d]);
      s.perm.x_str[s.perm.rank] = static_cast<int32_t>(st[perm[d]]);
      ++s.perm.rank;
    }
    m_.steps.push_back(std::move(s));
  }

  void lower_concat(const NodeP& n, const std::vector<Tensor>& in, const Ints& out) {
    int64_t axis = attr_i(n, "axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(out.size());
    Step s;
    s.kind = Step::Concat;
    s.what = what(n);
    s.out = n.output[0];
    s.rows = static_cast<int32_t>(prod(out, 0, axis));
    s.row_len = static_cast<int32_t>(prod(out, axis));
    int32_t off = 0;
    for (size_t i = 0; i < n.input.size(); ++i) {
      Step::Part p;
      p.len = static_cast<int32_t>(prod(dims_of(in[i]), axis));
      p.offset = off;
      off += p.len;
      if (is_rt(n, i)) {
        p.in = static_cast<int>(s.in.size());
        s.in.push_back(n.input[i]);
      } else {
        p.data = floats(in[i]);
      }
      s.parts.push_back(std::move(p));
    }
    m_.steps.push_back(std::move(s));
  }

  // ---- fusion ----

  // Whether binary step t's constant operand holds one value per channel of an NCHW output with
  // c channels ([c, 1, 1] or [1, c, 1, 1]).
  static bool per_channel(const Step& t, int32_t c) {
    if (t.const_side < 0 || static_cast<int32_t>(t.w.size()) != c) return false;
    std::vector<float> dims(t.b);
    while (dims.size() < 4) dims.insert(dims.begin(), 1.0f);
    return dims.size() == 4 && dims[0] == 1 && static_cast<int32_t>(dims[1]) == c && dims[2] == 1 && dims[3] == 1;
  }

  // Folds each Conv's or Linear's single consumer into it: a BatchNormalization (Conv), the Add
  // of a constant [N] (Linear without bias), then a Relu or Clip.
  void fuse() {
    std::map<std::string, int> uses;
    for (const auto& s : m_.steps)
      for (const auto& i : s.in) ++uses[i];
    for (const auto& o : m_.outputs) uses[o] += 1000;  // never fused away
    std::vector<bool> gone(m_.steps.size(), false);
    auto consumer = [&](size_t i) -> int {
      const std::string& v = m_.steps[i].out;
      if (uses[v] != 1) return -1;
      for (size_t j = i + 1; j < m_.steps.size(); ++j)
        if (!gone[j] && std::count(m_.steps[j].in.begin(), m_.steps[j].in.end(), v)) return static_cast<int>(j);
      return -1;
    };
    for (size_t i = 0; i < m_.steps.size(); ++i) {
      Step& s = m_.steps[i];
      if (gone[i] || (s.kind != Step::Conv && s.kind != Step::Linear)) continue;
      for (bool again = true; again;) {
        again = false;
        const int j = consumer(i);
        if (j < 0) break;
        Step& t = m_.steps[j];
        bool take = false;
        if (s.kind == Step::Conv && t.kind == Step::Affine && s.conv.act == kiln_micro::kActNone &&
            t.len == s.conv.c_out && t.outer == s.conv.n) {
          const int64_t per = static_cast<int64_t>(s.w.size()) / s.conv.c_out;
          if (s.b.empty()) s.b.assign(s.conv.c_out, 0.0f);
          for (int32_t oc = 0; oc < s.conv.c_out; ++oc) {
            for (int64_t k = 0; k < per; ++k) s.w[oc * per + k] *= t.w[oc];
            s.b[oc] = s.b[oc] * t.w[oc] + t.b[oc];
          }
          take = true;
        } else if (s.kind == Step::Conv && t.kind == Step::Binary && s.conv.act == kiln_micro::kActNone &&
                   (t.bop == kiln_micro::kMul || t.bop == kiln_micro::kAdd) && per_channel(t, s.conv.c_out) &&
                   m_.shape[t.out] == m_.shape[s.out]) {
          // A batch norm written as Mul and Add of per-channel constants (Kiln's export).
          const int64_t per = static_cast<int64_t>(s.w.size()) / s.conv.c_out;
          if (s.b.empty()) s.b.assign(s.conv.c_out, 0.0f);
          for (int32_t oc = 0; oc < s.conv.c_out; ++oc) {
            if (t.bop == kiln_micro::kMul) {
              for (int64_t k = 0; k < per; ++k) s.w[oc * per + k] *= t.w[oc];
              s.b[oc] *= t.w[oc];
            } else {
              s.b[oc] += t.w[oc];
            }
          }
          take = true;
        } else if (s.kind == Step::Linear && t.kind == Step::Binary && t.bop == kiln_micro::kAdd && s.b.empty() &&
                   t.const_side >= 0 && s.lin.act == kiln_micro::kActNone &&
                   static_cast<int64_t>(t.w.size()) == s.lin.n && !t.b.empty() &&
                   static_cast<int32_t>(t.b.back()) == s.lin.n && m_.shape[t.out] == m_.shape[s.out]) {
          s.b = t.w;
          take = true;
        } else if (t.kind == Step::Unary && (t.unary == "relu" || t.unary == "clip")) {
          auto& act = s.kind == Step::Conv ? s.conv.act : s.lin.act;
          if (act == kiln_micro::kActNone) {
            act = t.unary == "relu" ? kiln_micro::kActRelu : kiln_micro::kActClip;
            (s.kind == Step::Conv ? s.conv.lo : s.lin.lo) = t.lo;
            (s.kind == Step::Conv ? s.conv.hi : s.lin.hi) = t.hi;
            take = true;
          }
        }
        if (take) {
          s.what += " + " + t.what;
          s.out = t.out;
          gone[j] = true;
          again = true;
        }
      }
    }
    std::vector<Step> kept;
    for (size_t i = 0; i < m_.steps.size(); ++i)
      if (!gone[i]) kept.push_back(std::move(m_.steps[i]));
    m_.steps = std::move(kept);
  }

  std::string path_;
  MicroOptions o_;
  proto::ModelP model_;
  const proto::GraphP& g_;
  int64_t opset_ = 0;
  std::map<std::string, Tensor> val_;
  std::set<std::string> rt_, unknown_;
  std::vector<std::string> unsupported_;
  std::map<std::string, std::string> extra_;  ///< extra outputs (Dropout's mask...) -> their node
  Lowered m_;
};

}  // namespace

Lowered lower(const std::string& path, const MicroOptions& o) {
  Lowerer l(path, o);
  return l.run();
}

}  // namespace micro

std::vector<std::string> micro_ops() {
  return {"Add",
          "AveragePool",
          "BatchNormalization",
          "Cast",
          "Clip",
          "Concat",
          "Conv",
          "ConvTranspose",
          "Div",
          "Dropout",
          "Erf",
          "Exp",
          "Flatten",
          "Gather",
          "Gemm",
          "GlobalAveragePool",
          "GlobalMaxPool",
          "Identity",
          "LayerNormalization",
          "LeakyRelu",
          "LSTM",
          "MatMul",
          "MaxPool",
          "Mul",
          "ReduceMax",
          "ReduceMean",
          "ReduceSum",
          "Relu",
          "Reshape",
          "Resize",
          "Sigmoid",
          "Slice",
          "Softmax",
          "Split",
          "Squeeze",
          "Sub",
          "Tanh",
          "Transpose",
          "Unsqueeze",
          "Upsample"};
}

MicroResult generate_micro(const std::string& model_path, const MicroOptions& options) {
  micro::Lowered m = micro::lower(model_path, options);
  micro::Plan p = micro::plan_arena(m);
  std::string name = options.name;
  if (name.empty()) {
    std::string stem = model_path.substr(model_path.find_last_of('/') + 1);
    stem = stem.substr(0, stem.find('.'));
    for (char ch : stem)
      name += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '_';
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "m" + name;
  }
  MicroResult r;
  micro::emit(m, p, options, name, r);
  return r;
}

}  // namespace kiln::onnx
