// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX code generation: a model becomes a readable kiln::nn::Module (header + source) and a
// safetensors file of its weights. Nodes are emitted by the op mapping's emitters (beside each
// op's run function in ops_*.cpp); ops without one become kiln::onnx::ops::call, which runs the
// same function as the run-time path, so shapes stay dynamic.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "kiln/onnx.h"
#include "kiln/store.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::error_code ec;  // a directory opens as an empty stream: name the real cause
  KILN_CHECK(!std::filesystem::is_directory(path, ec), "onnx", "'" << path << "' is a directory, not a model file");
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), "onnx", "cannot open '" << path << "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

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

struct Member {
  std::string name, type, ctor;  // ctor: the constructor statement
};

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

// Outer values a node's subgraphs read (its implicit inputs).
std::set<std::string> implicit_inputs(const proto::NodeP& n) {
  std::set<std::string> r;
  for (const auto& a : n.attrs) {
    if (a.g) free_values(*a.g, r);
    for (const auto& sg : a.graphs) free_values(*sg, r);
  }
  return r;
}

bool has_subgraph(const proto::NodeP& n) {
  for (const auto& a : n.attrs)
    if (a.g || !a.graphs.empty()) return true;
  return false;
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

}  // namespace

GenerateResult generate(const std::string& model_path, const GenerateOptions& options) {
  proto::ModelP m = proto::parse_model(slurp(model_path));
  KILN_CHECK(m.has_graph, "onnx", model_path << ": the model has no graph");
  int64_t opset = 0;
  for (const auto& o : m.opsets)
    if (o.domain.empty() || o.domain == "ai.onnx") opset = o.version;
  const proto::GraphP& g = m.graph;
  const Registry& reg = registry();

  // Unsupported ops, all at once (subgraphs of control flow included).
  std::string unsupported;
  int n_unsupported = 0;
  std::function<void(const proto::GraphP&)> find_unsupported = [&](const proto::GraphP& sg) {
    for (const auto& n : sg.nodes) {
      std::string why;
      bool control = n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan";
      if (!n.domain.empty() && n.domain != "ai.onnx")
        why = "unsupported domain";
      else if (!reg.find(n.op_type) || !reg.find(n.op_type)->run)
        why = "no kernel";
      else if (has_subgraph(n) && !control)
        why = "subgraphs of this op are not supported by code generation";
      else if (n.op_type == "Scan" && opset < 9)
        why = "Scan before opset 9 (with sequence_lens) is not supported";
      if (!why.empty()) {
        ++n_unsupported;
        unsupported += "\n  " + (n.domain.empty() ? "" : n.domain + ".") + n.op_type + " (node '" + n.name +
                       "', opset " + std::to_string(opset) + "): " + why;
      }
      for (const auto& a : n.attrs) {
        if (a.g) find_unsupported(*a.g);
        for (const auto& sub : a.graphs) find_unsupported(*sub);
      }
    }
  };
  find_unsupported(g);
  KILN_CHECK(
      n_unsupported == 0, "onnx",
      model_path << ": code generation: the model uses " << n_unsupported << " unsupported op(s):" << unsupported);
  KILN_CHECK(g.sparse_initializers == 0, "onnx", model_path << ": sparse initializers are not supported");

  // Names.
  std::string name = options.name;
  if (name.empty()) {
    std::string stem = fs::path(model_path).stem().string();
    bool up = true;
    for (char c : stem) {
      if (!std::isalnum(static_cast<unsigned char>(c))) {
        up = true;
        continue;
      }
      name += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "Model" + name;
  }
  std::string stem = options.file_stem.empty() ? snake(name) : options.file_stem;
  std::set<std::string> used = cpp_keywords();
  used.insert(name);
  auto unique = [&](std::string s) {
    std::string r = s;
    for (int k = 2; used.count(r); ++k) r = s + "_" + std::to_string(k);
    used.insert(r);
    return r;
  };

  // Constants: initializers and Constant nodes (evaluated with the Constant op itself).
  std::map<std::string, Tensor> consts;
  std::set<std::string> is_init;
  for (const auto& t : g.initializers) {
    consts[t.name] = tensor_from(t, Device::cpu(), "initializer");
    is_init.insert(t.name);
  }
  std::set<std::string> graph_inputs;
  std::vector<const proto::ValueInfoP*> feeds;
  for (const auto& v : g.inputs)
    if (!consts.count(v.name)) {
      graph_inputs.insert(v.name);
      feeds.push_back(&v);
    }

  // State, members and forward body.
  std::vector<Member> members;
  std::vector<std::pair<std::string, Tensor>> state;
  std::map<std::string, std::string> expr;  // value name -> C++ expression (variable)
  std::map<std::string, int> ranks;
  std::map<std::string, ShapeArg> shapes;  // value name -> shape value (host std::vector<int64_t>)
  std::set<std::string> bound;             // subgraph inputs (they hide constants of the same name)
  std::string body;
  std::string const_body;  // small constants, declared first in forward (any scope may use them)
  GenerateResult res;

  std::vector<std::string> arg_names;
  for (const auto* v : feeds) {
    std::string a = unique(ident(v->name));
    expr[v->name] = a;
    arg_names.push_back(a);
    if (v->has_shape) ranks[v->name] = static_cast<int>(v->shape.size());
  }
  for (const auto& [k, t] : consts) ranks[k] = static_cast<int>(t.dim());

  auto add_module = [&](const std::string& hint, const std::string& type, const std::string& ctor_args,
                        const std::vector<std::pair<std::string, Tensor>>& st) {
    std::string mname = unique(hint.empty() ? "layer" : hint);
    members.push_back({mname, type, "  " + mname + " = " + type + "(" + ctor_args + ", device);\n"});
    for (const auto& [suffix, t] : st) state.emplace_back(mname + "." + suffix, t.contiguous());
    ++res.modules;
    return mname;
  };
  // The expression of a constant, materialised on first use.
  auto const_expr = [&](const std::string& vname) -> std::string {
    auto it = expr.find(vname);
    if (it != expr.end()) return it->second;
    const Tensor& t = consts.at(vname);
    std::string e;
    bool init = is_init.count(vname) > 0;
    if (init && is_floating(t.dtype())) {
      std::string f = unique(ident(vname));
      members.push_back({f, "kiln::nn::Param",
                         "  " + f + " = make_param(kiln::zeros(" + shape_lit(t.shape()) + ", {.dtype = " +
                             dtype_expr(t.dtype()) + ", .device = device.without_autodiff()}), device);\n"});
      state.emplace_back(f, t.contiguous());
      e = f;
    } else if (t.numel() > 16) {
      std::string f = unique(ident(vname));
      members.push_back({f, "kiln::nn::Buffer",
                         "  " + f + " = kiln::zeros(" + shape_lit(t.shape()) + ", {.dtype = " + dtype_expr(t.dtype()) +
                             ", .device = device.without_autodiff()});\n"});
      state.emplace_back(f, t.contiguous());
      e = f;
    } else {
      std::string v = unique(ident(vname));
      const_body += "  const kiln::Tensor " + v + " = " + literal(t) + ";\n";
      e = v;
    }
    expr[vname] = e;
    return e;
  };
  auto value_expr = [&](const std::string& vname) -> std::string {
    if (vname.empty()) return "kiln::Tensor{}";
    auto it = expr.find(vname);
    if (it != expr.end()) return it->second;
    auto sh = shapes.find(vname);  // a shape value read by a tensor op: made a tensor here
    if (sh != shapes.end())
      return "kiln::onnx::ops::ints_tensor(" + sh->second.expr + ", " + (sh->second.rank == 0 ? "true" : "false") +
             ", " + dtype_expr(sh->second.dtype) + ", dev)";
    if (consts.count(vname)) return const_expr(vname);
    KILN_CHECK(false, "onnx", "code generation: value '" << vname << "' is used before it is computed");
    __builtin_unreachable();
  };

  // A value as a shape value: one computed as such, or an integer constant of rank <= 1 with
  // few elements (written as a literal).
  auto shape_arg = [&](const std::string& vname) -> ShapeArg {
    if (vname.empty()) return {};
    auto sh = shapes.find(vname);
    if (sh != shapes.end()) return sh->second;
    auto c = consts.find(vname);
    if (c == consts.end() || bound.count(vname)) return {};
    const Tensor& t = c->second;
    if ((t.dtype() != i64 && t.dtype() != i32) || t.dim() > 1 || t.numel() > 64) return {};
    std::string lit = "std::vector<int64_t>" + int_list(t.to(i64).contiguous().to_vector<int64_t>());
    return {lit, static_cast<int>(t.dim()), t.dtype()};
  };

  // The emitter context of node n: its outputs' variables, its inputs' constants, ranks, shape
  // values and expressions.
  auto make_ec = [&](const proto::NodeP& n) {
    EmitContext ec{n, opset, {}, {}, {}, {}, {}, {}, {}, {}, {}, nullptr};
    for (const auto& o : n.output) ec.out.push_back(o.empty() ? "" : unique(ident(o)));
    for (const auto& in : n.input) {
      auto c = consts.find(in);
      ec.consts.push_back(!in.empty() && c != consts.end() ? &c->second : nullptr);
      auto r = ranks.find(in);
      ec.rank.push_back(!in.empty() && r != ranks.end() ? r->second : -1);
      ec.shape_in.push_back(shape_arg(in));
    }
    ec.in = [&, np = &n](size_t i) {
      return i < np->input.size() ? value_expr(np->input[i]) : std::string("kiln::Tensor{}");
    };
    ec.add_module = [&, np = &n](const std::string& type, const std::string& args,
                                 const std::vector<std::pair<std::string, Tensor>>& st) {
      std::string weight = np->input.size() > 1 ? np->input[1] : "";
      return add_module(module_hint(*np, weight), type, args, st);
    };
    return ec;
  };
  // The module an emitter's code calls on its input: code is `Tensor <out> = <module>(<arg>);`.
  auto called_module = [](const EmitContext& ec, const std::string& arg) -> std::string {
    const std::string head = "  kiln::Tensor " + ec.out.at(0) + " = ", tail = "(" + arg + ");\n";
    const std::string& c = ec.code;
    if (c.size() <= head.size() + tail.size() || c.compare(0, head.size(), head) != 0 ||
        c.compare(c.size() - tail.size(), tail.size(), tail) != 0)
      return "";
    return c.substr(head.size(), c.size() - head.size() - tail.size());
  };
  // A floating constant with one element, or null.
  auto scalar_const = [&](const std::string& v) -> const Tensor* {
    auto it = consts.find(v);
    return it != consts.end() && !bound.count(v) && it->second.numel() == 1 && is_floating(it->second.dtype())
               ? &it->second
               : nullptr;
  };
  // Releases the values whose last use was at positions [pos, q) of `order` (`v = {};`).
  auto release_inside = [&](const proto::GraphP& gr, const std::vector<size_t>& order, size_t pos, size_t q,
                            const std::unordered_map<std::string, size_t>& last_use,
                            const std::set<std::string>& locals) {
    std::set<std::string> done_here;
    for (size_t k = pos; k < q && !last_use.empty(); ++k)
      for (const auto& in : gr.nodes[order[k]].input) {
        auto it = last_use.find(in);
        if (it == last_use.end() || it->second != k || !locals.count(in) || !done_here.insert(in).second) continue;
        body += "  " + expr.at(in) + " = {};\n";
      }
  };
  // After a chain of nodes (positions [pos, q) of `order`) emitted as one call into variable var:
  // binds the chain's result `value` (of rank `rank`, -1 unknown) to var and releases the values
  // whose last use was inside the chain, as the node-by-node emission does.
  auto finish_chain = [&](const proto::GraphP& gr, const std::vector<size_t>& order, size_t pos, size_t q,
                          const std::string& value, const std::string& var, int rank,
                          const std::unordered_map<std::string, size_t>& last_use, std::set<std::string>& locals) {
    expr[value] = var;
    locals.insert(value);
    if (rank >= 0) ranks[value] = rank;
    release_inside(gr, order, pos, q, last_use, locals);
  };
  // MatMul by a constant 2-d weight, then Add of a constant [N] that alone reads the product
  // (PyTorch's export of nn.Linear on inputs of rank > 2): one nn::Linear with its bias, which
  // runs as one product. Returns the position after the pair; 0 when the nodes at pos are not one.
  auto try_linear_bias = [&](const proto::GraphP& gr, const std::vector<size_t>& order, size_t pos,
                             std::map<std::string, int>& uses, const std::unordered_map<std::string, size_t>& last_use,
                             std::set<std::string>& locals) -> size_t {
    const proto::NodeP& m = gr.nodes[order[pos]];
    if (m.op_type != "MatMul" || m.input.size() != 2 || m.output.size() != 1 || pos + 1 >= order.size()) return 0;
    const proto::NodeP& a = gr.nodes[order[pos + 1]];
    const std::string& p = m.output[0];
    if (a.op_type != "Add" || a.input.size() != 2 || a.output.size() != 1 || uses[p] != 1 ||
        (a.input[0] != p && a.input[1] != p) || a.input[0] == a.input[1])
      return 0;
    const std::string& other = a.input[0] == p ? a.input[1] : a.input[0];
    auto c = consts.find(other);
    if (c == consts.end() || bound.count(other) || c->second.dim() != 1) return 0;
    EmitContext ec = make_ec(m);
    ec.bias = &c->second;
    ec.out[0] = unique(ident(a.output[0]));
    const OpEntry* entry = reg.find("MatMul");
    if (!entry->emit || !entry->emit(ec)) return 0;  // modules are added only when it emits
    body += "  // MatMul" + (m.name.empty() ? "" : " '" + m.name + "'") + " + Add" +
            (a.name.empty() ? "" : " '" + a.name + "'") + "\n" + ec.code;
    finish_chain(gr, order, pos, pos + 2, a.output[0], ec.out[0], ec.out_rank.empty() ? -1 : ec.out_rank[0], last_use,
                 locals);
    return pos + 2;
  };
  // x / sqrt(2) -> Erf -> + 1 -> x * that -> * 0.5 (PyTorch's export of the exact GELU before
  // opset 20), at consecutive positions from pos, each result read only by the next node: one
  // kiln::gelu call. Returns the position after the chain; 0 when the nodes at pos are not one.
  auto try_gelu = [&](const proto::GraphP& gr, const std::vector<size_t>& order, size_t pos,
                      std::map<std::string, int>& uses, const std::unordered_map<std::string, size_t>& last_use,
                      std::set<std::string>& locals) -> size_t {
    if (pos + 5 > order.size()) return 0;
    const proto::NodeP* n[5];
    for (size_t k = 0; k < 5; ++k) n[k] = &gr.nodes[order[pos + k]];
    static const char* kOps[5] = {"Div", "Erf", "Add", "Mul", "Mul"};
    for (size_t k = 0; k < 5; ++k) {
      const size_t nin = k == 1 ? 1 : 2;
      if (n[k]->op_type != kOps[k] || n[k]->input.size() != nin || n[k]->output.size() != 1) return 0;
      if (k > 0 && uses[n[k - 1]->output[0]] != 1) return 0;
    }
    const std::string& x = n[0]->input[0];
    auto is = [&](const std::string& v, double want) {
      const Tensor* t = scalar_const(v);
      return t && std::abs(t->to(f64).reshape({}).item<double>() - want) <= 1e-6 * std::abs(want);
    };
    // The operand of binary node nd that is not `cur`, when `cur` is the other one.
    auto other = [&](const proto::NodeP& nd, const std::string& cur) -> const std::string* {
      if (nd.input[0] == cur && nd.input[1] != cur) return &nd.input[1];
      if (nd.input[1] == cur && nd.input[0] != cur) return &nd.input[0];
      return nullptr;
    };
    const std::string *one = other(*n[2], n[1]->output[0]), *xs = other(*n[3], n[2]->output[0]),
                      *half = other(*n[4], n[3]->output[0]);
    if (!expr.count(x) || shapes.count(x) || !is(n[0]->input[1], std::sqrt(2.0)) || n[1]->input[0] != n[0]->output[0] ||
        !one || !is(*one, 1.0) || !xs || *xs != x || !half || !is(*half, 0.5))
      return 0;
    const std::string& y = n[4]->output[0];
    const std::string var = unique(ident(y));
    body += "  // GELU: Div '" + n[0]->name + "' .. Mul '" + n[4]->name + "'\n  kiln::Tensor " + var +
            " = kiln::gelu(" + expr.at(x) + ");\n";
    finish_chain(gr, order, pos, pos + 5, y, var, ranks.count(x) ? ranks.at(x) : -1, last_use, locals);
    return pos + 5;
  };
  // Conv [-> BatchNormalization] [-> Add of a value computed before] [-> Relu | Clip with
  // constant bounds] [-> MaxPool, 2-d, without the Add], at least one after the Conv, at consecutive positions of
  // `order` from pos, each result read only by the next node: one kiln::nn::conv_bn / conv_act call (in inference one
  // convolution with the rest as its epilogue). Emits it and returns the position after the chain; 0 when the nodes at
  // pos do not form one. uses: per value, the nodes (and graph outputs) of gr reading it.
  auto try_fused_conv = [&](const proto::GraphP& gr, const std::vector<size_t>& order, size_t pos,
                            std::map<std::string, int>& uses, const std::unordered_map<std::string, size_t>& last_use,
                            std::set<std::string>& locals) -> size_t {
    const proto::NodeP& c = gr.nodes[order[pos]];
    if (c.op_type != "Conv" || c.output.size() != 1 || c.input.size() < 2) return 0;
    auto node_at = [&](size_t q) -> const proto::NodeP* { return q < order.size() ? &gr.nodes[order[q]] : nullptr; };
    // The node at q, when its first (or, for Add, either) input is cur and only it reads cur.
    auto next_reads = [&](size_t q, const std::string& cur) -> const proto::NodeP* {
      const proto::NodeP* n = node_at(q);
      if (!n || n->output.size() != 1 || n->input.empty() || uses[cur] != 1) return nullptr;
      return n->input[0] == cur || (n->op_type == "Add" && n->input.size() == 2 && n->input[1] == cur) ? n : nullptr;
    };
    std::string cur = c.output[0], opts;
    size_t q = pos + 1;
    const proto::NodeP* b = next_reads(q, cur);
    if (b && b->op_type == "BatchNormalization") {
      cur = b->output[0];
      ++q;
    } else {
      b = nullptr;
    }
    if (const proto::NodeP* a = next_reads(q, cur);
        a && a->op_type == "Add" && a->input.size() == 2 && a->input[0] != a->input[1]) {
      const std::string& other = a->input[0] == cur ? a->input[1] : a->input[0];
      if (expr.count(other) && !shapes.count(other)) {
        opts += ".residual = " + expr.at(other);
        cur = a->output[0];
        ++q;
      }
    }
    if (const proto::NodeP* r = next_reads(q, cur)) {
      std::string act;
      if (r->op_type == "Relu" && r->input.size() == 1) {
        act = ".act = kiln::nn::FusedConvOptions::Act::Relu";
      } else if (r->op_type == "Clip" && opset >= 11 && r->input.size() == 3) {
        const Tensor *lo = scalar_const(r->input[1]), *hi = scalar_const(r->input[2]);
        if (lo && hi)
          act = ".act = kiln::nn::FusedConvOptions::Act::Clamp, .min = " +
                float_lit(lo->to(f64).reshape({}).item<double>()) +
                ", .max = " + float_lit(hi->to(f64).reshape({}).item<double>());
      }
      if (!act.empty()) {
        opts += (opts.empty() ? "" : ", ") + act;
        cur = r->output[0];
        ++q;
      }
    }
    // A MaxPool after it (no residual): the pool options of the call.
    const proto::NodeP* pool = nullptr;
    if (const proto::NodeP* m = next_reads(q, cur); m && m->op_type == "MaxPool" && opts.find(".residual") == opts.npos)
      pool = m;
    if (q == pos + 1 && !pool) return 0;
    // The modules, through their own emitters (the batch norm's input named by a placeholder:
    // its value is never a variable); when one declines, nothing is kept.
    const std::set<std::string> used_before = used;
    const size_t n_members = members.size(), n_state = state.size();
    const int64_t n_modules = res.modules;
    EmitContext ce = make_ec(c);
    const OpEntry* conv_entry = reg.find("Conv");
    std::string mc, mb;
    if (conv_entry->emit && conv_entry->emit(ce) && !ce.out_rank.empty()) mc = called_module(ce, ce.in(0));
    if (!mc.empty() && b) {
      EmitContext be = make_ec(*b);
      be.in = [](size_t i) { return i == 0 ? std::string("conv_out") : std::string("kiln::Tensor{}"); };
      be.rank[0] = ce.out_rank[0];
      const OpEntry* bn_entry = reg.find("BatchNormalization");
      if (bn_entry->emit && bn_entry->emit(be)) mb = called_module(be, "conv_out");
    }
    if (pool && !mc.empty() && ce.out_rank[0] == 4) {
      // The MaxPool emitter's call, max_pool2d(pool_in, kernel, {options}), as the call's
      // .pool_kernel_size and .pool; a pool it declines stays a node of its own.
      const std::set<std::string> used_pool = used;  // the pool's own output name is not taken
      EmitContext pe = make_ec(*pool);
      pe.in = [](size_t) { return std::string("pool_in"); };
      pe.rank[0] = 4;
      const OpEntry* pool_entry = reg.find("MaxPool");
      const std::string head = "  kiln::Tensor " + pe.out.at(0) + " = kiln::nn::functional::max_pool2d(pool_in, ";
      const bool emitted = pool_entry->emit && pool_entry->emit(pe);
      used = used_pool;
      if (emitted && pe.code.compare(0, head.size(), head) == 0 && pe.code.size() > head.size() + 3) {
        const std::string args = pe.code.substr(head.size(), pe.code.size() - head.size() - 3);  // less ");\n"
        const size_t split = args.find(", {");
        if (split != std::string::npos) {
          opts += (opts.empty() ? "" : ", ") + (".pool_kernel_size = " + args.substr(0, split)) +
                  ", .pool = " + args.substr(split + 2);
          cur = pool->output[0];
          ++q;
        }
      }
    }
    if (mc.empty() || (b && mb.empty()) || q == pos + 1) {
      used = used_before;
      members.resize(n_members);
      state.resize(n_state);
      res.modules = n_modules;
      return 0;
    }
    const std::string var = unique(ident(cur));
    std::string names;
    for (size_t k = pos; k < q; ++k) {
      const proto::NodeP& n = *node_at(k);
      names += (k == pos ? "" : " + ") + n.op_type + (n.name.empty() ? "" : " '" + n.name + "'");
    }
    body += "  // " + names + "\n  kiln::Tensor " + var +
            " = kiln::nn::" + (b ? "conv_bn(" + mc + ", " + mb : "conv_act(" + mc) + ", " + ce.in(0) +
            (opts.empty() ? "" : ", {" + opts + "}") + ");\n";
    ++res.fused_convs;
    finish_chain(gr, order, pos, q, cur, var, ce.out_rank[0], last_use, locals);
    return q;
  };

  // Emits the nodes of graph `gr` (the model's graph or a subgraph whose inputs are already
  // bound in `expr`) into `body`.
  int64_t n_attr_consts = 0;
  std::function<bool(const proto::NodeP&, EmitContext&)> emit_control;
  std::function<void(const proto::GraphP&)> emit_graph = [&](const proto::GraphP& gr) {
    if (&gr != &g)
      for (const auto& t : gr.initializers) {
        consts[t.name] = tensor_from(t, Device::cpu(), "initializer");
        is_init.insert(t.name);
        ranks[t.name] = static_cast<int>(consts[t.name].dim());
      }
    // Topological order (Kahn, keeping the model's order among ready nodes); a node with
    // subgraphs also depends on the outer values they read.
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
          KILN_CHECK(consts.count(in) || expr.count(in) || shapes.count(in), "onnx",
                     "node '" << gr.nodes[i].name << "' (" << gr.nodes[i].op_type << "): input '" << in
                              << "' is produced by no node and is neither a graph input nor an initializer");
        }
      }
    }
    std::vector<size_t> order;
    {
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
                 model_path << ": the graph" << (&gr == &g ? "" : " '" + gr.name + "'") << " has a cycle");
      // Constant nodes (folded, no code) first: the nodes that read them stay next to each other
      // (a Conv and the Clip after it, whose bounds are Constants exported between the two).
      std::stable_partition(order.begin(), order.end(),
                            [&](size_t i) { return gr.nodes[i].op_type == "Constant" && gr.nodes[i].input.empty(); });
    }
    // In the model's graph, when no node has subgraphs (which read outer values by name): each
    // value a node computes is released right after its last use (`v = {};`), so its memory goes
    // back to the allocator and the fusion decorator can fuse the ops around it (a convolution
    // and its batch norm) instead of keeping it.
    std::unordered_map<std::string, size_t> last_use;  // value -> position in `order`
    bool release = &gr == &g;
    for (const auto& n : gr.nodes) {
      release = release && implicit_inputs(n).empty();
      for (const auto& a : n.attrs) release = release && !a.g && a.graphs.empty();
    }
    if (release) {
      for (size_t p = 0; p < order.size(); ++p)
        for (const auto& in : gr.nodes[order[p]].input)
          if (!in.empty()) last_use[in] = p;
      for (const auto& o : gr.outputs) last_use.erase(o.name);
    }
    std::set<std::string> locals;     // values held by a variable of this body
    std::map<std::string, int> uses;  // value -> nodes (and graph outputs) reading it
    for (const auto& n : gr.nodes) {
      for (const auto& in : n.input) ++uses[in];
      for (const auto& v : implicit_inputs(n)) ++uses[v];
    }
    for (const auto& o : gr.outputs) ++uses[o.name];
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const size_t idx = order[pos];
      const proto::NodeP& n = gr.nodes[idx];
      const OpEntry& entry = *reg.find(n.op_type);
      // Constant nodes fold into constants.
      if (n.op_type == "Constant" && n.output.size() == 1) {
        auto outs = run_node(n, opset, {}, Device::cpu());
        consts[n.output[0]] = outs.at(0);
        ranks[n.output[0]] = static_cast<int>(outs.at(0).dim());
        continue;
      }
      // Identity of a constant is that constant (exporters tie equal weights this way).
      if (n.op_type == "Identity" && n.input.size() == 1 && n.output.size() == 1 && consts.count(n.input[0]) &&
          !expr.count(n.input[0])) {
        consts[n.output[0]] = consts[n.input[0]];
        if (is_init.count(n.input[0])) is_init.insert(n.output[0]);
        ranks[n.output[0]] = ranks[n.input[0]];
        continue;
      }
      if (const size_t end = try_gelu(gr, order, pos, uses, last_use, locals)) {
        pos = end - 1;
        continue;
      }
      if (const size_t end = try_linear_bias(gr, order, pos, uses, last_use, locals)) {
        pos = end - 1;
        continue;
      }
      if (const size_t end = try_fused_conv(gr, order, pos, uses, last_use, locals)) {
        pos = end - 1;
        continue;
      }
      EmitContext ec = make_ec(n);
      std::string comment = "  // " + n.op_type + (n.name.empty() ? "" : " '" + n.name + "'") + "\n";
      bool done = emit_control(n, ec) || (entry.emit && entry.emit(ec));
      if (!done) {
        ec.code.clear();
        ec.shape_out.clear();
        std::string args;
        for (size_t i = 0; i < n.input.size(); ++i) args += (i ? ", " : "") + value_expr(n.input[i]);
        std::string attrs;
        for (const auto& a : n.attrs) {
          std::string v;
          switch (a.type) {
            case proto::AttrP::kInt:
              v = int_lit(a.i);
              break;
            case proto::AttrP::kFloat:
              v = float_lit(a.f) + "f";
              break;
            case proto::AttrP::kString:
              v = "std::string(" + quote(a.s) + ")";
              break;
            case proto::AttrP::kInts: {
              std::string l;
              for (int64_t x : a.ints) l += (l.empty() ? "" : ", ") + int_lit(x);
              v = "std::vector<int64_t>{" + l + "}";
              break;
            }
            case proto::AttrP::kFloats: {
              std::string l;
              for (float x : a.floats) l += (l.empty() ? "" : ", ") + float_lit(x) + "f";
              v = "std::vector<float>{" + l + "}";
              break;
            }
            case proto::AttrP::kTensor: {
              std::string cname = "attr:" + n.name + ":" + a.name + ":" + std::to_string(++n_attr_consts);
              consts[cname] = tensor_from(*a.t, Device::cpu(), "attribute '" + a.name + "'");
              v = const_expr(cname);
              break;
            }
            default:
              KILN_CHECK(false, "onnx",
                         "node '" << n.name << "' (" << n.op_type << "): attribute '" << a.name
                                  << "' has a type code generation does not support");
          }
          attrs += std::string(attrs.empty() ? "" : ", ") + "{" + quote(a.name) + ", " + v + "}";
        }
        std::string call = "kiln::onnx::ops::call(" + quote(n.op_type) + ", " + std::to_string(opset) + ", {" + args +
                           "}" + (attrs.empty() && ec.out.size() == 1 ? "" : ", {" + attrs + "}") +
                           (ec.out.size() == 1 ? "" : ", " + std::to_string(ec.out.size())) + ")";
        size_t used_outs = 0;
        for (const auto& o : ec.out) used_outs += !o.empty();
        if (ec.out.size() == 1 && !ec.out[0].empty()) {
          ec.code = "  kiln::Tensor " + ec.out[0] + " = " + call + "[0];\n";
        } else if (used_outs > 0) {
          std::string r = unique("r_" + ident(n.op_type));
          ec.code = "  auto " + r + " = " + call + ";\n";
          for (size_t i = 0; i < ec.out.size(); ++i)
            if (!ec.out[i].empty())
              ec.code += "  kiln::Tensor " + ec.out[i] + " = " + r + "[" + std::to_string(i) + "];\n";
        } else {
          ec.code = "  " + call + ";\n";
        }
        ++res.generic_calls;
      }
      body += comment + ec.code;
      for (size_t i = 0; i < n.output.size(); ++i) {
        if (n.output[i].empty()) continue;
        if (i < ec.shape_out.size() && !ec.shape_out[i].expr.empty()) {
          shapes[n.output[i]] = ec.shape_out[i];
          ranks[n.output[i]] = ec.shape_out[i].rank;
          continue;
        }
        expr[n.output[i]] = ec.out[i];
        locals.insert(n.output[i]);
      }
      release_inside(gr, order, pos, pos + 1, last_use, locals);
      // Ranks.
      if (!ec.out_rank.empty()) {
        for (size_t i = 0; i < ec.out_rank.size() && i < n.output.size(); ++i)
          if (ec.out_rank[i] >= 0) ranks[n.output[i]] = ec.out_rank[i];
      } else if (rank_preserving().count(n.op_type) && !n.output.empty()) {
        int r = -1;
        bool known = true;
        size_t upto = (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div" ||
                       n.op_type == "Where" || n.op_type == "Max" || n.op_type == "Min" || n.op_type == "Sum" ||
                       n.op_type == "Pow" || n.op_type == "Equal" || n.op_type == "Less" || n.op_type == "Greater" ||
                       n.op_type == "Mean")
                          ? ec.rank.size()
                          : std::min<size_t>(1, ec.rank.size());
        for (size_t i = 0; i < upto; ++i) {
          if (ec.rank[i] < 0) known = false;
          r = std::max(r, ec.rank[i]);
        }
        if (known && r >= 0) ranks[n.output[0]] = r;
      }
    }
  };

  // Control flow. A subgraph becomes a nested block of forward(): it reads outer values through
  // their variables, its inputs are variables bound at the top of the block and its outputs are
  // assigned to the node's variables at the end.
  auto bind = [&](const proto::ValueInfoP& v, const std::string& init) {
    std::string var = unique(ident(v.name));
    expr[v.name] = var;
    bound.insert(v.name);
    shapes.erase(v.name);
    if (v.has_shape) ranks[v.name] = static_cast<int>(v.shape.size());
    return "  const kiln::Tensor " + var + " = " + init + ";\n";
  };
  // The statements of subgraph `sg` (its inputs bound by `head`), and its output expressions.
  auto sub_block = [&](const proto::GraphP& sg, const std::string& head, std::vector<std::string>& outs) {
    std::string saved;
    saved.swap(body);
    body = head;
    emit_graph(sg);
    for (const auto& o : sg.outputs) outs.push_back(value_expr(o.name));
    std::string r;
    r.swap(body);
    body.swap(saved);
    return r;
  };
  auto out_var = [&](EmitContext& ec, size_t i, const std::string& hint) {
    if (i < ec.out.size() && !ec.out[i].empty()) return ec.out[i];
    return unique(hint);
  };
  emit_control = [&](const proto::NodeP& n, EmitContext& ec) -> bool {
    auto graph_attr = [&](const char* a) {
      const proto::AttrP* at = n.attr(a);
      KILN_CHECK(at && at->g, "onnx", "node '" << n.name << "' (" << n.op_type << "): missing subgraph '" << a << "'");
      return at->g.get();
    };
    auto check_outs = [&](const proto::GraphP& sg, size_t want, const char* what) {
      KILN_CHECK(sg.outputs.size() == want, "onnx",
                 "node '" << n.name << "' (" << n.op_type << "): " << what << " returns " << sg.outputs.size()
                          << " outputs, expected " << want);
    };
    std::string& code = ec.code;
    if (n.op_type == "If") {
      const proto::GraphP* then_g = graph_attr("then_branch");
      const proto::GraphP* else_g = graph_attr("else_branch");
      check_outs(*then_g, ec.out.size(), "then_branch");
      check_outs(*else_g, ec.out.size(), "else_branch");
      std::string decl;
      for (const auto& o : ec.out)
        if (!o.empty()) decl += (decl.empty() ? "" : ", ") + o;
      if (!decl.empty()) code += "  kiln::Tensor " + decl + ";\n";
      code += "  if (kiln::onnx::ops::condition(" + ec.in(0) + ")) {\n";
      for (const proto::GraphP* br : {then_g, else_g}) {
        std::vector<std::string> outs;
        std::string blk = sub_block(*br, "", outs);
        for (size_t i = 0; i < ec.out.size(); ++i)
          if (!ec.out[i].empty()) blk += "  " + ec.out[i] + " = " + outs[i] + ";\n";
        code += indent(blk, "  ");
        code += br == then_g ? "  } else {\n" : "  }\n";
      }
      return true;
    }
    if (n.op_type == "Loop") {
      const proto::GraphP* bg = graph_attr("body");
      size_t n_carried = n.input.size() > 2 ? n.input.size() - 2 : 0;
      KILN_CHECK(bg->inputs.size() == 2 + n_carried && bg->outputs.size() >= 1 + n_carried, "onnx",
                 "node '" << n.name << "' (Loop): the body must take (iteration, condition, " << n_carried
                          << " loop-carried values) and return the condition and the loop-carried values");
      size_t n_scan = bg->outputs.size() - 1 - n_carried;
      std::vector<std::string> carried, scans;
      for (size_t i = 0; i < n_carried; ++i) {
        carried.push_back(out_var(ec, i, "carried"));
        code += "  kiln::Tensor " + carried[i] + " = " + ec.in(2 + i) + ";\n";
        ec.out_rank.push_back(ec.rank.size() > 2 + i ? ec.rank[2 + i] : -1);
      }
      for (size_t i = 0; i < n_scan; ++i) {
        std::string base =
            n_carried + i < ec.out.size() && !ec.out[n_carried + i].empty() ? ec.out[n_carried + i] : "scan";
        scans.push_back(unique(base + "_steps"));
        code += "  std::vector<kiln::Tensor> " + scans[i] + ";\n";
      }
      std::string trip = unique("trip_count"), go = unique("go"), it = unique("iter");
      code += "  {\n    const int64_t " + trip + " = " +
              (ec.has(0) ? "kiln::onnx::ops::trip_count(" + ec.in(0) + ")" : std::string("INT64_MAX")) + ";\n";
      code += "    bool " + go + " = " +
              (ec.has(1) ? "kiln::onnx::ops::condition(" + ec.in(1) + ")" : std::string("true")) + ";\n";
      code += "    for (int64_t " + it + " = 0; " + it + " < " + trip + " && " + go + "; ++" + it + ") {\n";
      std::string head = bind(bg->inputs[0], "kiln::scalar_tensor(" + it + ", kiln::i64, dev)");
      head += bind(bg->inputs[1], "kiln::scalar_tensor(" + go + ", kiln::bool_, dev)");
      for (size_t i = 0; i < n_carried; ++i) head += bind(bg->inputs[2 + i], carried[i]);
      std::vector<std::string> outs;
      std::string blk = sub_block(*bg, head, outs);
      blk += "  " + go + " = kiln::onnx::ops::condition(" + outs[0] + ");\n";
      for (size_t i = 0; i < n_carried; ++i) blk += "  " + carried[i] + " = " + outs[1 + i] + ";\n";
      for (size_t i = 0; i < n_scan; ++i) blk += "  " + scans[i] + ".push_back(" + outs[1 + n_carried + i] + ");\n";
      code += indent(blk, "    ") + "    }\n  }\n";
      for (size_t i = 0; i < n_scan; ++i)
        if (n_carried + i < ec.out.size() && !ec.out[n_carried + i].empty())
          code += "  kiln::Tensor " + ec.out[n_carried + i] + " = kiln::onnx::ops::stack_steps(" + scans[i] + ");\n";
      return true;
    }
    if (n.op_type == "Scan") {
      const proto::GraphP* bg = graph_attr("body");
      int64_t m = ec.attr_i("num_scan_inputs", 0);
      KILN_CHECK(m >= 0 && static_cast<size_t>(m) <= n.input.size(), "onnx",
                 "node '" << n.name << "' (Scan): num_scan_inputs out of range");
      size_t n_state = n.input.size() - static_cast<size_t>(m);
      KILN_CHECK(
          bg->inputs.size() == n.input.size() && bg->outputs.size() >= n_state, "onnx",
          "node '" << n.name << "' (Scan): the body must take the states and scan elements and return the states");
      size_t n_out = bg->outputs.size() - n_state;
      std::vector<int64_t> in_axes = ec.attr_ints("scan_input_axes"), in_dirs = ec.attr_ints("scan_input_directions"),
                           out_axes = ec.attr_ints("scan_output_axes"),
                           out_dirs = ec.attr_ints("scan_output_directions");
      auto at = [](const std::vector<int64_t>& v, size_t i) { return i < v.size() ? v[i] : 0; };
      std::vector<std::string> state, xs, steps;
      for (size_t i = 0; i < n_state; ++i) {
        state.push_back(out_var(ec, i, "state"));
        code += "  kiln::Tensor " + state[i] + " = " + ec.in(i) + ";\n";
      }
      std::string lens;
      for (size_t j = 0; j < static_cast<size_t>(m); ++j) {
        xs.push_back(unique(ident(n.input[n_state + j]) + "_seq"));
        code += "  const kiln::Tensor " + xs[j] + " = kiln::onnx::ops::scan_input(" + ec.in(n_state + j) + ", " +
                int_lit(at(in_axes, j)) + ", " + (at(in_dirs, j) ? "true" : "false") + ");\n";
        lens += (lens.empty() ? "" : ", ") + xs[j];
      }
      for (size_t i = 0; i < n_out; ++i) {
        std::string base = n_state + i < ec.out.size() && !ec.out[n_state + i].empty() ? ec.out[n_state + i] : "scan";
        steps.push_back(unique(base + "_steps"));
        code += "  std::vector<kiln::Tensor> " + steps[i] + ";\n";
      }
      std::string t = unique("step"), len = unique("steps");
      code += "  const int64_t " + len + " = kiln::onnx::ops::scan_length({" + lens + "});\n";
      code += "  for (int64_t " + t + " = 0; " + t + " < " + len + "; ++" + t + ") {\n";
      std::string head;
      for (size_t i = 0; i < n_state; ++i) head += bind(bg->inputs[i], state[i]);
      for (size_t j = 0; j < static_cast<size_t>(m); ++j)
        head += bind(bg->inputs[n_state + j], xs[j] + ".select(0, " + t + ")");
      std::vector<std::string> outs;
      std::string blk = sub_block(*bg, head, outs);
      for (size_t i = 0; i < n_state; ++i) blk += "  " + state[i] + " = " + outs[i] + ";\n";
      for (size_t i = 0; i < n_out; ++i) blk += "  " + steps[i] + ".push_back(" + outs[n_state + i] + ");\n";
      code += indent(blk, "  ") + "  }\n";
      for (size_t i = 0; i < n_out; ++i)
        if (n_state + i < ec.out.size() && !ec.out[n_state + i].empty())
          code += "  kiln::Tensor " + ec.out[n_state + i] + " = kiln::onnx::ops::stack_steps(" + steps[i] + ", " +
                  int_lit(at(out_axes, i)) + ", " + (at(out_dirs, i) ? "true" : "false") + ");\n";
      return true;
    }
    return false;
  };
  emit_graph(g);

  // Files.
  fs::create_directories(options.out_dir);
  fs::path dir = fs::absolute(options.out_dir);
  res.header = (dir / (stem + ".h")).string();
  res.source = (dir / (stem + ".cpp")).string();
  res.weights = (dir / (stem + ".safetensors")).string();

  std::vector<std::string> out_exprs;
  for (const auto& o : g.outputs) out_exprs.push_back(value_expr(o.name));
  std::string sig;
  for (size_t i = 0; i < arg_names.size(); ++i)
    sig += (i ? ", " : "") + std::string("const kiln::Tensor& ") + arg_names[i];
  bool single = g.outputs.size() == 1;
  std::string ret = single ? "kiln::Tensor" : "std::vector<kiln::Tensor>";

  std::ostringstream h;
  h << "// Generated by kiln-onnx from " << fs::path(model_path).filename().string() << " (opset " << opset
    << "). Do not edit: regenerate.\n#pragma once\n#include <string>\n#include <vector>\n\n#include \"kiln/nn.h\"\n"
    << "#include \"kiln/tensor.h\"\n\n";
  h << "/// " << name << ": a kiln::nn::Module generated from an ONNX graph. Construct, then load the weights\n"
    << "/// with `kiln::store::load(model, " << name << "::weights_path())`. It starts in eval mode (ONNX\n"
    << "/// inference semantics); train() switches batch norm and dropout to training behaviour.\n";
  h << "struct " << name << " : kiln::nn::Module {\n";
  for (const auto& mb : members) h << "  " << mb.type << " " << mb.name << ";\n";
  h << "\n  explicit " << name << "(const kiln::Device& device = kiln::Device::default_device());\n";
  h << "  /// Inputs:";
  for (size_t i = 0; i < feeds.size(); ++i) {
    h << " " << arg_names[i] << " [";
    for (size_t d = 0; d < feeds[i]->shape.size(); ++d) {
      const auto& dm = feeds[i]->shape[d];
      h << (d ? ", " : "") << (!dm.param.empty() ? dm.param : dm.value >= 0 ? std::to_string(dm.value) : "?");
    }
    h << "]" << (i + 1 < feeds.size() ? "," : "");
  }
  h << ". Outputs:";
  for (size_t i = 0; i < g.outputs.size(); ++i) h << " " << g.outputs[i].name << (i + 1 < g.outputs.size() ? "," : ".");
  h << "\n  " << ret << " forward(" << sig << ");\n";
  h << "  /// The same with inputs and outputs as vectors (in the ONNX graph's order).\n";
  h << "  std::vector<kiln::Tensor> run(const std::vector<kiln::Tensor>& inputs);\n";
  h << "  /// The weights file written beside the generated sources.\n";
  h << "  static std::string weights_path() { return " << quote(res.weights) << "; }\n\n";
  h << "  void visit(kiln::nn::Visitor& v) override {\n";
  for (const auto& mb : members) h << "    v.field(" << quote(mb.name) << ", " << mb.name << ");\n";
  h << "  }\n  std::string type_name() const override { return " << quote(name) << "; }\n};\n";

  std::ostringstream c;
  c << "// Generated by kiln-onnx from " << fs::path(model_path).filename().string() << " (opset " << opset
    << "). Do not edit: regenerate.\n#include \"" << stem << ".h\"\n\n#include <cmath>\n#include <cstdint>\n\n"
    << "#include \"kiln/matmul.h\"\n#include \"kiln/nn.h\"\n#include \"kiln/onnx.h\"\n#include \"kiln/ops.h\"\n\n";
  c << name << "::" << name << "(const kiln::Device& device) {\n";
  for (const auto& mb : members) c << mb.ctor;
  c << "  eval();\n}\n\n";
  c << ret << " " << name << "::forward(" << sig << ") {\n";
  c << "  const kiln::Device dev = "
    << (arg_names.empty() ? std::string("kiln::Device::default_device()") : arg_names[0] + ".device()") << ";\n";
  c << "  (void)dev;\n" << const_body << body;
  if (single)
    c << "  return " << out_exprs[0] << ";\n}\n\n";
  else {
    c << "  return {";
    for (size_t i = 0; i < out_exprs.size(); ++i) c << (i ? ", " : "") << out_exprs[i];
    c << "};\n}\n\n";
  }
  c << "std::vector<kiln::Tensor> " << name << "::run(const std::vector<kiln::Tensor>& inputs) {\n";
  c << "  KILN_CHECK(inputs.size() == " << arg_names.size() << ", " << quote(name) << ", \"run: expected "
    << arg_names.size() << " inputs, got \" << inputs.size());\n";
  std::string call_args;
  for (size_t i = 0; i < arg_names.size(); ++i)
    call_args += (i ? ", " : "") + std::string("inputs[") + std::to_string(i) + "]";
  c << (single ? "  return {forward(" + call_args + ")};\n}\n" : "  return forward(" + call_args + ");\n}\n");

  auto write = [](const std::string& path, const std::string& text) {
    // Leave an unchanged file alone (no needless rebuilds).
    if (fs::exists(path) && slurp(path) == text) return;
    std::ofstream f(path, std::ios::binary);
    KILN_CHECK(f.good(), "onnx", "cannot write '" << path << "'");
    f << text;
  };
  write(res.header, h.str());
  write(res.source, c.str());
  store::save_safetensors(res.weights, state, {{"generator", "kiln-onnx"}, {"model", name}});
  return res;
}

}  // namespace kiln::onnx
