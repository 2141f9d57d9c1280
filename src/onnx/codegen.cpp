// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX code generation: a model becomes a readable kiln::nn::Module (header + source) and a
// safetensors file of its weights. Nodes are emitted by the op mapping's emitters (beside each
// op's run function in ops_*.cpp); ops without one become kiln::onnx::ops::call, which runs the
// same function as the run-time path, so shapes stay dynamic. This file holds the Generator's
// setup, values, graph bodies and files; chains emitted as one call are in codegen_chains.cpp,
// control flow in codegen_control.cpp.
#include "onnx/codegen.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "kiln/store.h"

namespace kiln::onnx {
namespace gen {

namespace fs = std::filesystem;

namespace {

// Module name from a PyTorch-style node name "/layer1/conv1/Conv" -> "layer1_conv1",
// "/features/features.0/Conv" -> "features_0"; or from a weight name "fc.weight" -> "fc".
std::string module_hint(const proto::NodeP& n, const std::string& weight) {
  auto ends = [](const std::string& s, const std::string& suf) {
    return s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends(weight, ".weight") && weight.find("::") == std::string::npos)
    return ident(weight.substr(0, weight.size() - 7));
  if (!n.name.empty() && n.name[0] == '/') {
    std::vector<std::string> parts;
    std::stringstream ss(n.name.substr(1));
    std::string p;
    while (std::getline(ss, p, '/')) parts.push_back(p);
    if (parts.size() > 1) parts.pop_back();  // the op part
    std::vector<std::string> keep;
    for (const auto& q : parts) {
      if (!keep.empty() && q.rfind(keep.back() + ".", 0) == 0) keep.pop_back();
      keep.push_back(q);
    }
    std::string j;
    for (const auto& q : keep) j += (j.empty() ? "" : "_") + q;
    if (!j.empty()) return ident(j);
  }
  return ident(n.name.empty() ? n.op_type : n.name);
}

std::string shape_lit(const Shape& s) {
  std::vector<int64_t> v(s.begin(), s.end());
  return "kiln::Shape" + int_list(v);
}

// A small constant as an inline C++ expression on device `dev`.
std::string literal(const Tensor& t) {
  std::string shape = shape_lit(t.shape());
  DType d = t.dtype();
  std::string vals;
  if (is_floating(d)) {
    for (double v : t.to_vector<double>()) vals += (vals.empty() ? "" : ", ") + float_lit(v);
    std::string e = "kiln::tensor(std::vector<double>{" + vals + "}, " + shape + ", dev)";
    return "kiln::cast(" + e + ", " + dtype_expr(d) + ")";
  }
  for (int64_t v : t.to_vector<int64_t>()) vals += (vals.empty() ? "" : ", ") + int_lit(v);
  std::string e = "kiln::tensor(std::vector<int64_t>{" + vals + "}, " + shape + ", dev)";
  if (d == i64) return e;
  if (d == bool_) return e + ".ne(0)";
  return "kiln::cast(" + e + ", " + dtype_expr(d) + ")";
}

std::string snake(const std::string& name) {
  std::string r;
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0 && !std::isupper(static_cast<unsigned char>(name[i - 1]))) r += '_';
    r += std::isalnum(c) ? static_cast<char>(std::tolower(c)) : '_';
  }
  return r;
}

// Same-rank ops: the output has the rank of the first input (or of the broadcast of all).
const std::set<std::string>& rank_preserving() {
  static const std::set<std::string> s = {"Relu",
                                          "Clip",
                                          "Sigmoid",
                                          "Tanh",
                                          "BatchNormalization",
                                          "Add",
                                          "Sub",
                                          "Mul",
                                          "Div",
                                          "Erf",
                                          "Identity",
                                          "Dropout",
                                          "LeakyRelu",
                                          "Pow",
                                          "Sqrt",
                                          "Neg",
                                          "Abs",
                                          "Exp",
                                          "Log",
                                          "Softmax",
                                          "LogSoftmax",
                                          "HardSigmoid",
                                          "HardSwish",
                                          "Gelu",
                                          "Cast",
                                          "Resize",
                                          "Concat",
                                          "MaxPool",
                                          "AveragePool",
                                          "GlobalAveragePool",
                                          "GlobalMaxPool",
                                          "Conv",
                                          "ConvTranspose",
                                          "LayerNormalization",
                                          "RMSNormalization",
                                          "Upsample",
                                          "Pad",
                                          "InstanceNormalization",
                                          "Elu",
                                          "Selu",
                                          "Softplus",
                                          "PRelu",
                                          "Where",
                                          "Max",
                                          "Min",
                                          "Sum",
                                          "Mean",
                                          "Equal",
                                          "Less",
                                          "Greater",
                                          "Not"};
  return s;
}

// Values a graph reads from enclosing scopes (ONNX subgraphs see outer values by name),
// including those read by its own nested subgraphs.
void free_values(const proto::GraphP& g, std::set<std::string>& out) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& t : g.initializers) defined.insert(t.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.output) defined.insert(o);
  auto use = [&](const std::string& v) {
    if (!v.empty() && !defined.count(v)) out.insert(v);
  };
  for (const auto& n : g.nodes) {
    for (const auto& in : n.input) use(in);
    for (const auto& a : n.attrs) {
      std::set<std::string> inner;
      if (a.g) free_values(*a.g, inner);
      for (const auto& sg : a.graphs) free_values(*sg, inner);
      for (const auto& v : inner) use(v);
    }
  }
  for (const auto& o : g.outputs) use(o.name);
}

bool has_subgraph(const proto::NodeP& n) {
  for (const auto& a : n.attrs)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

}  // namespace

const std::set<std::string>& cpp_keywords() {
  static const std::set<std::string> k = {
      "alignas",  "alignof",  "and",      "asm",       "auto",      "bool",     "break",     "case",     "catch",
      "char",     "class",    "const",    "constexpr", "continue",  "default",  "delete",    "do",       "double",
      "else",     "enum",     "explicit", "export",    "extern",    "false",    "float",     "for",      "friend",
      "goto",     "if",       "inline",   "int",       "long",      "mutable",  "namespace", "new",      "not",
      "operator", "or",       "private",  "protected", "public",    "register", "return",    "short",    "signed",
      "sizeof",   "static",   "struct",   "switch",    "template",  "this",     "throw",     "true",     "try",
      "typedef",  "typename", "union",    "unsigned",  "using",     "virtual",  "void",      "volatile", "while",
      "xor",      "dev",      "device",   "kiln",      "std",       "forward",  "run",       "visit",    "type_name",
      "eval",     "train",    "to",       "state",     "parameters"};
  return k;
}

// A C++ identifier from an ONNX name: lower case, [a-z0-9_], no leading digit.
std::string ident(const std::string& s) {
  std::string r;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c))
      r += static_cast<char>(std::tolower(c));
    else if (!r.empty() && r.back() != '_')
      r += '_';
  }
  while (!r.empty() && r.back() == '_') r.pop_back();
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "v" + r;
  if (cpp_keywords().count(r)) r += "_";
  return r;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      r += '\\', r += c;
    else if (c == '\n')
      r += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20)
      r += '?';
    else
      r += c;
  }
  return r + "\"";
}

std::string int_lit(int64_t v) {
  if (v == INT64_MIN) return "INT64_MIN";
  if (v == INT64_MAX) return "INT64_MAX";
  if (v > INT32_MAX || v < INT32_MIN) return "int64_t{" + std::to_string(v) + "}";
  return std::to_string(v);
}

// Every line of `code` indented by `pad` more.
std::string indent(const std::string& code, const std::string& pad) {
  std::string r;
  size_t i = 0;
  while (i < code.size()) {
    size_t j = code.find('\n', i);
    if (j == std::string::npos) j = code.size() - 1;
    r += pad + code.substr(i, j - i + 1);
    i = j + 1;
  }
  return r;
}

// Outer values a node's subgraphs read (its implicit inputs).
std::set<std::string> implicit_inputs(const proto::NodeP& n) {
  std::set<std::string> r;
  for (const auto& a : n.attrs) {
    if (a.g) free_values(*a.g, r);
    for (const auto& sg : a.graphs) free_values(*sg, r);
  }
  return r;
}

Generator::Generator(const std::string& model_path, const GenerateOptions& options)
    : model_path_(model_path),
      options_(options),
      model_(proto::parse_model(proto::read_file(model_path))),
      g_(model_.graph),
      reg_(registry()) {
  KILN_CHECK(model_.has_graph, "onnx", model_path << ": the model has no graph");
  for (const auto& o : model_.opsets)
    if (o.domain.empty() || o.domain == "ai.onnx") opset_ = o.version;
}

GenerateResult Generator::run() {
  check_supported();
  choose_names();
  bind_inputs();
  emit_graph(g_);
  write_files();
  return res_;
}

void Generator::check_supported() const {
  std::string unsupported;
  int n_unsupported = 0;
  std::function<void(const proto::GraphP&)> find_unsupported = [&](const proto::GraphP& sg) {
    for (const auto& n : sg.nodes) {
      std::string why;
      bool control = n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan";
      if (!n.domain.empty() && n.domain != "ai.onnx")
        why = "unsupported domain";
      else if (!reg_.find(n.op_type) || !reg_.find(n.op_type)->run)
        why = "no kernel";
      else if (has_subgraph(n) && !control)
        why = "subgraphs of this op are not supported by code generation";
      else if (n.op_type == "Scan" && opset_ < 9)
        why = "Scan before opset 9 (with sequence_lens) is not supported";
      if (!why.empty()) {
        ++n_unsupported;
        unsupported += "\n  " + (n.domain.empty() ? "" : n.domain + ".") + n.op_type + " (node '" + n.name +
                       "', opset " + std::to_string(opset_) + "): " + why;
      }
      for (const auto& a : n.attrs) {
        if (a.g) find_unsupported(*a.g);
        for (const auto& sub : a.graphs) find_unsupported(*sub);
      }
    }
  };
  find_unsupported(g_);
  KILN_CHECK(
      n_unsupported == 0, "onnx",
      model_path_ << ": code generation: the model uses " << n_unsupported << " unsupported op(s):" << unsupported);
  KILN_CHECK(g_.sparse_initializers == 0, "onnx", model_path_ << ": sparse initializers are not supported");
}

void Generator::choose_names() {
  name_ = options_.name;
  if (name_.empty()) {
    std::string stem = fs::path(model_path_).stem().string();
    bool up = true;
    for (char c : stem) {
      if (!std::isalnum(static_cast<unsigned char>(c))) {
        up = true;
        continue;
      }
      name_ += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    if (name_.empty() || std::isdigit(static_cast<unsigned char>(name_[0]))) name_ = "Model" + name_;
  }
  stem_ = options_.file_stem.empty() ? snake(name_) : options_.file_stem;
  used_ = cpp_keywords();
  used_.insert(name_);
}

void Generator::bind_inputs() {
  // Constants: initializers and Constant nodes (evaluated with the Constant op itself).
  for (const auto& t : g_.initializers) {
    consts_[t.name] = tensor_from(t, Device::cpu(), "initializer");
    is_init_.insert(t.name);
  }
  for (const auto& v : g_.inputs)
    if (!consts_.count(v.name)) feeds_.push_back(&v);
  for (const auto* v : feeds_) {
    std::string a = unique(ident(v->name));
    expr_[v->name] = a;
    arg_names_.push_back(a);
    if (v->has_shape) ranks_[v->name] = static_cast<int>(v->shape.size());
  }
  for (const auto& [k, t] : consts_) ranks_[k] = static_cast<int>(t.dim());
}

std::string Generator::unique(std::string s) {
  std::string r = s;
  for (int k = 2; used_.count(r); ++k) r = s + "_" + std::to_string(k);
  used_.insert(r);
  return r;
}

std::string Generator::add_module(const std::string& hint, const std::string& type, const std::string& ctor_args,
                                  const std::vector<std::pair<std::string, Tensor>>& st) {
  std::string mname = unique(hint.empty() ? "layer" : hint);
  members_.push_back({mname, type, "  " + mname + " = " + type + "(" + ctor_args + ", device);\n"});
  for (const auto& [suffix, t] : st) state_.emplace_back(mname + "." + suffix, t.contiguous());
  ++res_.modules;
  return mname;
}

std::string Generator::const_expr(const std::string& vname) {
  auto it = expr_.find(vname);
  if (it != expr_.end()) return it->second;
  const Tensor& t = consts_.at(vname);
  std::string e;
  bool init = is_init_.count(vname) > 0;
  if (init && is_floating(t.dtype())) {
    std::string f = unique(ident(vname));
    members_.push_back({f, "kiln::nn::Param",
                        "  " + f + " = make_param(kiln::zeros(" + shape_lit(t.shape()) + ", {.dtype = " +
                            dtype_expr(t.dtype()) + ", .device = device.without_autodiff()}), device);\n"});
    state_.emplace_back(f, t.contiguous());
    e = f;
  } else if (t.numel() > 16) {
    std::string f = unique(ident(vname));
    members_.push_back({f, "kiln::nn::Buffer",
                        "  " + f + " = kiln::zeros(" + shape_lit(t.shape()) + ", {.dtype = " + dtype_expr(t.dtype()) +
                            ", .device = device.without_autodiff()});\n"});
    state_.emplace_back(f, t.contiguous());
    e = f;
  } else {
    std::string v = unique(ident(vname));
    const_body_ += "  const kiln::Tensor " + v + " = " + literal(t) + ";\n";
    e = v;
  }
  expr_[vname] = e;
  return e;
}

std::string Generator::value_expr(const std::string& vname) {
  if (vname.empty()) return "kiln::Tensor{}";
  auto it = expr_.find(vname);
  if (it != expr_.end()) return it->second;
  auto sh = shapes_.find(vname);  // a shape value read by a tensor op: made a tensor here
  if (sh != shapes_.end())
    return "kiln::onnx::ops::ints_tensor(" + sh->second.expr + ", " + (sh->second.rank == 0 ? "true" : "false") + ", " +
           dtype_expr(sh->second.dtype) + ", dev)";
  if (consts_.count(vname)) return const_expr(vname);
  KILN_CHECK(false, "onnx", "code generation: value '" << vname << "' is used before it is computed");
  __builtin_unreachable();
}

ShapeArg Generator::shape_arg(const std::string& vname) {
  if (vname.empty()) return {};
  auto sh = shapes_.find(vname);
  if (sh != shapes_.end()) return sh->second;
  auto c = consts_.find(vname);
  if (c == consts_.end() || bound_.count(vname)) return {};
  const Tensor& t = c->second;
  if ((t.dtype() != i64 && t.dtype() != i32) || t.dim() > 1 || t.numel() > 64) return {};
  std::string lit = "std::vector<int64_t>" + int_list(t.to(i64).contiguous().to_vector<int64_t>());
  return {lit, static_cast<int>(t.dim()), t.dtype()};
}

EmitContext Generator::make_ec(const proto::NodeP& n) {
  EmitContext ec{n, opset_, {}, {}, {}, {}, {}, {}, {}, {}, {}, nullptr};
  for (const auto& o : n.output) ec.out.push_back(o.empty() ? "" : unique(ident(o)));
  for (const auto& in : n.input) {
    auto c = consts_.find(in);
    ec.consts.push_back(!in.empty() && c != consts_.end() ? &c->second : nullptr);
    auto r = ranks_.find(in);
    ec.rank.push_back(!in.empty() && r != ranks_.end() ? r->second : -1);
    ec.shape_in.push_back(shape_arg(in));
  }
  ec.in = [this, np = &n](size_t i) {
    return i < np->input.size() ? value_expr(np->input[i]) : std::string("kiln::Tensor{}");
  };
  ec.add_module = [this, np = &n](const std::string& type, const std::string& args,
                                  const std::vector<std::pair<std::string, Tensor>>& st) {
    std::string weight = np->input.size() > 1 ? np->input[1] : "";
    return add_module(module_hint(*np, weight), type, args, st);
  };
  return ec;
}

const Tensor* Generator::scalar_const(const std::string& v) const {
  auto it = consts_.find(v);
  return it != consts_.end() && !bound_.count(v) && it->second.numel() == 1 && is_floating(it->second.dtype())
             ? &it->second
             : nullptr;
}

void Generator::release_inside(const Scope& scope, size_t pos, size_t q) {
  std::set<std::string> done_here;
  for (size_t k = pos; k < q && !scope.last_use.empty(); ++k)
    for (const auto& in : scope.gr.nodes[scope.order[k]].input) {
      auto it = scope.last_use.find(in);
      if (it == scope.last_use.end() || it->second != k || !scope.locals.count(in) || !done_here.insert(in).second)
        continue;
      body_ += "  " + expr_.at(in) + " = {};\n";
    }
}

void Generator::finish_chain(Scope& scope, size_t pos, size_t q, const std::string& value, const std::string& var,
                             int rank) {
  expr_[value] = var;
  scope.locals.insert(value);
  if (rank >= 0) ranks_[value] = rank;
  release_inside(scope, pos, q);
}

void Generator::emit_graph(const proto::GraphP& gr) {
  if (&gr != &g_)
    for (const auto& t : gr.initializers) {
      consts_[t.name] = tensor_from(t, Device::cpu(), "initializer");
      is_init_.insert(t.name);
      ranks_[t.name] = static_cast<int>(consts_[t.name].dim());
    }
  Scope scope{gr, node_order(gr), {}, {}, {}};
  plan_uses(scope);
  for (size_t pos = 0; pos < scope.order.size();) pos = emit_node(scope, pos);
}

std::vector<size_t> Generator::node_order(const proto::GraphP& gr) const {
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < gr.nodes.size(); ++i)
    for (const auto& o : gr.nodes[i].output)
      if (!o.empty()) producer[o] = i;
  std::vector<size_t> indeg(gr.nodes.size(), 0);
  std::vector<std::vector<size_t>> users(gr.nodes.size());
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    std::set<std::string> deps(gr.nodes[i].input.begin(), gr.nodes[i].input.end());
    for (const auto& v : implicit_inputs(gr.nodes[i])) deps.insert(v);
    for (const auto& in : deps) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it != producer.end()) {
        if (it->second == i) continue;
        users[it->second].push_back(i);
        ++indeg[i];
      } else {
        KILN_CHECK(consts_.count(in) || expr_.count(in) || shapes_.count(in), "onnx",
                   "node '" << gr.nodes[i].name << "' (" << gr.nodes[i].op_type << "): input '" << in
                            << "' is produced by no node and is neither a graph input nor an initializer");
      }
    }
  }
  std::vector<size_t> order;
  std::set<size_t> ready;
  for (size_t i = 0; i < gr.nodes.size(); ++i)
    if (!indeg[i]) ready.insert(i);
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t u : users[i])
      if (--indeg[u] == 0) ready.insert(u);
  }
  KILN_CHECK(order.size() == gr.nodes.size(), "onnx",
             model_path_ << ": the graph" << (&gr == &g_ ? "" : " '" + gr.name + "'") << " has a cycle");
  // Constant nodes (folded, no code) first: the nodes that read them stay next to each other
  // (a Conv and the Clip after it, whose bounds are Constants exported between the two).
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return gr.nodes[i].op_type == "Constant" && gr.nodes[i].input.empty(); });
  return order;
}

void Generator::plan_uses(Scope& scope) const {
  const proto::GraphP& gr = scope.gr;
  // In the model's graph, when no node has subgraphs (which read outer values by name): each
  // value a node computes is released right after its last use (`v = {};`), so its memory goes
  // back to the allocator and the fusion decorator can fuse the ops around it (a convolution
  // and its batch norm) instead of keeping it.
  bool release = &gr == &g_;
  for (const auto& n : gr.nodes) {
    release = release && implicit_inputs(n).empty();
    for (const auto& a : n.attrs) release = release && !a.g && a.graphs.empty();
  }
  if (release) {
    for (size_t p = 0; p < scope.order.size(); ++p)
      for (const auto& in : gr.nodes[scope.order[p]].input)
        if (!in.empty()) scope.last_use[in] = p;
    for (const auto& o : gr.outputs) scope.last_use.erase(o.name);
  }
  for (const auto& n : gr.nodes) {
    for (const auto& in : n.input) ++scope.uses[in];
    for (const auto& v : implicit_inputs(n)) ++scope.uses[v];
  }
  for (const auto& o : gr.outputs) ++scope.uses[o.name];
}

bool Generator::fold_constant(const proto::NodeP& n) {
  // Constant nodes fold into constants.
  if (n.op_type == "Constant" && n.output.size() == 1) {
    auto outs = run_node(n, opset_, {}, Device::cpu());
    consts_[n.output[0]] = outs.at(0);
    ranks_[n.output[0]] = static_cast<int>(outs.at(0).dim());
    return true;
  }
  // Identity of a constant is that constant (exporters tie equal weights this way).
  if (n.op_type == "Identity" && n.input.size() == 1 && n.output.size() == 1 && consts_.count(n.input[0]) &&
      !expr_.count(n.input[0])) {
    consts_[n.output[0]] = consts_[n.input[0]];
    if (is_init_.count(n.input[0])) is_init_.insert(n.output[0]);
    ranks_[n.output[0]] = ranks_[n.input[0]];
    return true;
  }
  return false;
}

size_t Generator::emit_node(Scope& scope, size_t pos) {
  const proto::NodeP& n = scope.gr.nodes[scope.order[pos]];
  const OpEntry& entry = *reg_.find(n.op_type);
  if (fold_constant(n)) return pos + 1;
  if (const size_t end = try_gelu(scope, pos)) return end;
  if (const size_t end = try_linear_bias(scope, pos)) return end;
  if (const size_t end = try_fused_conv(scope, pos)) return end;
  EmitContext ec = make_ec(n);
  std::string comment = "  // " + n.op_type + (n.name.empty() ? "" : " '" + n.name + "'") + "\n";
  bool done = emit_control(n, ec) || (entry.emit && entry.emit(ec));
  if (!done) emit_generic(n, ec);
  body_ += comment + ec.code;
  for (size_t i = 0; i < n.output.size(); ++i) {
    if (n.output[i].empty()) continue;
    if (i < ec.shape_out.size() && !ec.shape_out[i].expr.empty()) {
      shapes_[n.output[i]] = ec.shape_out[i];
      ranks_[n.output[i]] = ec.shape_out[i].rank;
      continue;
    }
    expr_[n.output[i]] = ec.out[i];
    scope.locals.insert(n.output[i]);
  }
  release_inside(scope, pos, pos + 1);
  infer_ranks(n, ec);
  return pos + 1;
}

void Generator::emit_generic(const proto::NodeP& n, EmitContext& ec) {
  ec.code.clear();
  ec.shape_out.clear();
  std::string args;
  for (size_t i = 0; i < n.input.size(); ++i) args += (i ? ", " : "") + value_expr(n.input[i]);
  std::string attrs;
  for (const auto& a : n.attrs)
    attrs += std::string(attrs.empty() ? "" : ", ") + "{" + quote(a.name) + ", " + attr_expr(n, a) + "}";
  std::string call = "kiln::onnx::ops::call(" + quote(n.op_type) + ", " + std::to_string(opset_) + ", {" + args + "}" +
                     (attrs.empty() && ec.out.size() == 1 ? "" : ", {" + attrs + "}") +
                     (ec.out.size() == 1 ? "" : ", " + std::to_string(ec.out.size())) + ")";
  size_t used_outs = 0;
  for (const auto& o : ec.out) used_outs += !o.empty();
  if (ec.out.size() == 1 && !ec.out[0].empty()) {
    ec.code = "  kiln::Tensor " + ec.out[0] + " = " + call + "[0];\n";
  } else if (used_outs > 0) {
    std::string r = unique("r_" + ident(n.op_type));
    ec.code = "  auto " + r + " = " + call + ";\n";
    for (size_t i = 0; i < ec.out.size(); ++i)
      if (!ec.out[i].empty()) ec.code += "  kiln::Tensor " + ec.out[i] + " = " + r + "[" + std::to_string(i) + "];\n";
  } else {
    ec.code = "  " + call + ";\n";
  }
  ++res_.generic_calls;
}

std::string Generator::attr_expr(const proto::NodeP& n, const proto::AttrP& a) {
  switch (a.type) {
    case proto::AttrP::kInt:
      return int_lit(a.i);
    case proto::AttrP::kFloat:
      return float_lit(a.f) + "f";
    case proto::AttrP::kString:
      return "std::string(" + quote(a.s) + ")";
    case proto::AttrP::kInts: {
      std::string l;
      for (int64_t x : a.ints) l += (l.empty() ? "" : ", ") + int_lit(x);
      return "std::vector<int64_t>{" + l + "}";
    }
    case proto::AttrP::kFloats: {
      std::string l;
      for (float x : a.floats) l += (l.empty() ? "" : ", ") + float_lit(x) + "f";
      return "std::vector<float>{" + l + "}";
    }
    case proto::AttrP::kTensor: {
      std::string cname = "attr:" + n.name + ":" + a.name + ":" + std::to_string(++n_attr_consts_);
      consts_[cname] = tensor_from(*a.t, Device::cpu(), "attribute '" + a.name + "'");
      return const_expr(cname);
    }
    default:
      KILN_CHECK(false, "onnx",
                 "node '" << n.name << "' (" << n.op_type << "): attribute '" << a.name
                          << "' has a type code generation does not support");
  }
  __builtin_unreachable();
}

void Generator::infer_ranks(const proto::NodeP& n, const EmitContext& ec) {
  if (!ec.out_rank.empty()) {
    for (size_t i = 0; i < ec.out_rank.size() && i < n.output.size(); ++i)
      if (ec.out_rank[i] >= 0) ranks_[n.output[i]] = ec.out_rank[i];
  } else if (rank_preserving().count(n.op_type) && !n.output.empty()) {
    int r = -1;
    bool known = true;
    size_t upto =
        (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div" || n.op_type == "Where" ||
         n.op_type == "Max" || n.op_type == "Min" || n.op_type == "Sum" || n.op_type == "Pow" || n.op_type == "Equal" ||
         n.op_type == "Less" || n.op_type == "Greater" || n.op_type == "Mean")
            ? ec.rank.size()
            : std::min<size_t>(1, ec.rank.size());
    for (size_t i = 0; i < upto; ++i) {
      if (ec.rank[i] < 0) known = false;
      r = std::max(r, ec.rank[i]);
    }
    if (known && r >= 0) ranks_[n.output[0]] = r;
  }
}

std::string Generator::header_text(const std::string& sig, const std::string& ret) const {
  std::ostringstream h;
  h << "// Generated by kiln-onnx from " << fs::path(model_path_).filename().string() << " (opset " << opset_
    << "). Do not edit: regenerate.\n#pragma once\n#include <string>\n#include <vector>\n\n#include \"kiln/nn.h\"\n"
    << "#include \"kiln/tensor.h\"\n\n";
  h << "/// " << name_ << ": a kiln::nn::Module generated from an ONNX graph. Construct, then load the weights\n"
    << "/// with `kiln::store::load(model, " << name_ << "::weights_path())`. It starts in eval mode (ONNX\n"
    << "/// inference semantics); train() switches batch norm and dropout to training behaviour.\n";
  h << "struct " << name_ << " : kiln::nn::Module {\n";
  for (const auto& mb : members_) h << "  " << mb.type << " " << mb.name << ";\n";
  h << "\n  explicit " << name_ << "(const kiln::Device& device = kiln::Device::default_device());\n";
  h << "  /// Inputs:";
  for (size_t i = 0; i < feeds_.size(); ++i) {
    h << " " << arg_names_[i] << " [";
    for (size_t d = 0; d < feeds_[i]->shape.size(); ++d) {
      const auto& dm = feeds_[i]->shape[d];
      h << (d ? ", " : "") << (!dm.param.empty() ? dm.param : dm.value >= 0 ? std::to_string(dm.value) : "?");
    }
    h << "]" << (i + 1 < feeds_.size() ? "," : "");
  }
  h << ". Outputs:";
  for (size_t i = 0; i < g_.outputs.size(); ++i)
    h << " " << g_.outputs[i].name << (i + 1 < g_.outputs.size() ? "," : ".");
  h << "\n  " << ret << " forward(" << sig << ");\n";
  h << "  /// The same with inputs and outputs as vectors (in the ONNX graph's order).\n";
  h << "  std::vector<kiln::Tensor> run(const std::vector<kiln::Tensor>& inputs);\n";
  h << "  /// The weights file written beside the generated sources.\n";
  h << "  static std::string weights_path() { return " << quote(res_.weights) << "; }\n\n";
  h << "  void visit(kiln::nn::Visitor& v) override {\n";
  for (const auto& mb : members_) h << "    v.field(" << quote(mb.name) << ", " << mb.name << ");\n";
  h << "  }\n  std::string type_name() const override { return " << quote(name_) << "; }\n};\n";
  return h.str();
}

std::string Generator::source_text(const std::string& sig, const std::string& ret,
                                   const std::vector<std::string>& outs) const {
  const bool single = g_.outputs.size() == 1;
  std::ostringstream c;
  c << "// Generated by kiln-onnx from " << fs::path(model_path_).filename().string() << " (opset " << opset_
    << "). Do not edit: regenerate.\n#include \"" << stem_ << ".h\"\n\n#include <cmath>\n#include <cstdint>\n\n"
    << "#include \"kiln/matmul.h\"\n#include \"kiln/nn.h\"\n#include \"kiln/onnx.h\"\n#include \"kiln/ops.h\"\n\n";
  c << name_ << "::" << name_ << "(const kiln::Device& device) {\n";
  for (const auto& mb : members_) c << mb.ctor;
  c << "  eval();\n}\n\n";
  c << ret << " " << name_ << "::forward(" << sig << ") {\n";
  c << "  const kiln::Device dev = "
    << (arg_names_.empty() ? std::string("kiln::Device::default_device()") : arg_names_[0] + ".device()") << ";\n";
  c << "  (void)dev;\n" << const_body_ << body_;
  if (single)
    c << "  return " << outs[0] << ";\n}\n\n";
  else {
    c << "  return {";
    for (size_t i = 0; i < outs.size(); ++i) c << (i ? ", " : "") << outs[i];
    c << "};\n}\n\n";
  }
  c << "std::vector<kiln::Tensor> " << name_ << "::run(const std::vector<kiln::Tensor>& inputs) {\n";
  c << "  KILN_CHECK(inputs.size() == " << arg_names_.size() << ", " << quote(name_) << ", \"run: expected "
    << arg_names_.size() << " inputs, got \" << inputs.size());\n";
  std::string call_args;
  for (size_t i = 0; i < arg_names_.size(); ++i)
    call_args += (i ? ", " : "") + std::string("inputs[") + std::to_string(i) + "]";
  c << (single ? "  return {forward(" + call_args + ")};\n}\n" : "  return forward(" + call_args + ");\n}\n");
  return c.str();
}

void Generator::write_files() {
  fs::create_directories(options_.out_dir);
  fs::path dir = fs::absolute(options_.out_dir);
  res_.header = (dir / (stem_ + ".h")).string();
  res_.source = (dir / (stem_ + ".cpp")).string();
  res_.weights = (dir / (stem_ + ".safetensors")).string();

  std::vector<std::string> out_exprs;
  for (const auto& o : g_.outputs) out_exprs.push_back(value_expr(o.name));
  std::string sig;
  for (size_t i = 0; i < arg_names_.size(); ++i)
    sig += (i ? ", " : "") + std::string("const kiln::Tensor& ") + arg_names_[i];
  std::string ret = g_.outputs.size() == 1 ? "kiln::Tensor" : "std::vector<kiln::Tensor>";

  auto write = [](const std::string& path, const std::string& text) {
    // Leave an unchanged file alone (no needless rebuilds).
    if (fs::exists(path) && proto::read_file(path) == text) return;
    std::ofstream f(path, std::ios::binary);
    KILN_CHECK(f.good(), "onnx", "cannot write '" << path << "'");
    f << text;
  };
  write(res_.header, header_text(sig, ret));
  write(res_.source, source_text(sig, ret, out_exprs));
  store::save_safetensors(res_.weights, state_, {{"generator", "kiln-onnx"}, {"model", name_}});
}

}  // namespace gen

GenerateResult generate(const std::string& model_path, const GenerateOptions& options) {
  return gen::Generator(model_path, options).run();
}

}  // namespace kiln::onnx
