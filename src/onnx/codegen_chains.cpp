// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX code generation: chains of nodes emitted as one call (nn::Linear with its bias, the exact
// GELU, a convolution with its batch norm, residual, activation and max pool as its epilogue).
#include <cmath>
#include <set>

#include "onnx/codegen.h"

namespace kiln::onnx::gen {

namespace {

/// The node at q, when its first (or, for Add, either) input is cur and only it reads cur.
const proto::NodeP* next_reads(Scope& scope, size_t q, const std::string& cur) {
  const proto::NodeP* n = scope.node_at(q);
  if (!n || n->output.size() != 1 || n->input.empty() || scope.uses[cur] != 1) return nullptr;
  return n->input[0] == cur || (n->op_type == "Add" && n->input.size() == 2 && n->input[1] == cur) ? n : nullptr;
}

/// The module an emitter's code calls on its input: code is `Tensor <out> = <module>(<arg>);`.
std::string called_module(const EmitContext& ec, const std::string& arg) {
  const std::string head = "  kiln::Tensor " + ec.out.at(0) + " = ", tail = "(" + arg + ");\n";
  const std::string& c = ec.code;
  if (c.size() <= head.size() + tail.size() || c.compare(0, head.size(), head) != 0 ||
      c.compare(c.size() - tail.size(), tail.size(), tail) != 0)
    return "";
  return c.substr(head.size(), c.size() - head.size() - tail.size());
}

}  // namespace

// MatMul by a constant 2-d weight, then Add of a constant [N] that alone reads the product
// (PyTorch's export of nn.Linear on inputs of rank > 2): one nn::Linear with its bias, which
// runs as one product.
size_t Generator::try_linear_bias(Scope& scope, size_t pos) {
  const proto::GraphP& gr = scope.gr;
  const std::vector<size_t>& order = scope.order;
  const proto::NodeP& m = gr.nodes[order[pos]];
  if (m.op_type != "MatMul" || m.input.size() != 2 || m.output.size() != 1 || pos + 1 >= order.size()) return 0;
  const proto::NodeP& a = gr.nodes[order[pos + 1]];
  const std::string& p = m.output[0];
  if (a.op_type != "Add" || a.input.size() != 2 || a.output.size() != 1 || scope.uses[p] != 1 ||
      (a.input[0] != p && a.input[1] != p) || a.input[0] == a.input[1])
    return 0;
  const std::string& other = a.input[0] == p ? a.input[1] : a.input[0];
  auto c = consts_.find(other);
  if (c == consts_.end() || bound_.count(other) || c->second.dim() != 1) return 0;
  EmitContext ec = make_ec(m);
  ec.bias = &c->second;
  ec.out[0] = unique(ident(a.output[0]));
  const OpEntry* entry = reg_.find("MatMul");
  if (!entry->emit || !entry->emit(ec)) return 0;  // modules are added only when it emits
  body_ += "  // MatMul" + (m.name.empty() ? "" : " '" + m.name + "'") + " + Add" +
           (a.name.empty() ? "" : " '" + a.name + "'") + "\n" + ec.code;
  finish_chain(scope, pos, pos + 2, a.output[0], ec.out[0], ec.out_rank.empty() ? -1 : ec.out_rank[0]);
  return pos + 2;
}

// x / sqrt(2) -> Erf -> + 1 -> x * that -> * 0.5 (PyTorch's export of the exact GELU before
// opset 20), at consecutive positions from pos, each result read only by the next node.
size_t Generator::try_gelu(Scope& scope, size_t pos) {
  if (pos + 5 > scope.order.size()) return 0;
  const proto::NodeP* n[5];
  for (size_t k = 0; k < 5; ++k) n[k] = scope.node_at(pos + k);
  static const char* kOps[5] = {"Div", "Erf", "Add", "Mul", "Mul"};
  for (size_t k = 0; k < 5; ++k) {
    const size_t nin = k == 1 ? 1 : 2;
    if (n[k]->op_type != kOps[k] || n[k]->input.size() != nin || n[k]->output.size() != 1) return 0;
    if (k > 0 && scope.uses[n[k - 1]->output[0]] != 1) return 0;
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
  if (!expr_.count(x) || shapes_.count(x) || !is(n[0]->input[1], std::sqrt(2.0)) || n[1]->input[0] != n[0]->output[0] ||
      !one || !is(*one, 1.0) || !xs || *xs != x || !half || !is(*half, 0.5))
    return 0;
  const std::string& y = n[4]->output[0];
  const std::string var = unique(ident(y));
  body_ += "  // GELU: Div '" + n[0]->name + "' .. Mul '" + n[4]->name + "'\n  kiln::Tensor " + var + " = kiln::gelu(" +
           expr_.at(x) + ");\n";
  finish_chain(scope, pos, pos + 5, y, var, ranks_.count(x) ? ranks_.at(x) : -1);
  return pos + 5;
}

size_t Generator::conv_epilogue(Scope& scope, size_t pos, const proto::NodeP*& bn, std::string& cur,
                                std::string& opts) {
  size_t q = pos + 1;
  bn = next_reads(scope, q, cur);
  if (bn && bn->op_type == "BatchNormalization") {
    cur = bn->output[0];
    ++q;
  } else {
    bn = nullptr;
  }
  if (const proto::NodeP* a = next_reads(scope, q, cur);
      a && a->op_type == "Add" && a->input.size() == 2 && a->input[0] != a->input[1]) {
    const std::string& other = a->input[0] == cur ? a->input[1] : a->input[0];
    if (expr_.count(other) && !shapes_.count(other)) {
      opts += ".residual = " + expr_.at(other);
      cur = a->output[0];
      ++q;
    }
  }
  if (const proto::NodeP* r = next_reads(scope, q, cur)) {
    std::string act;
    if (r->op_type == "Relu" && r->input.size() == 1) {
      act = ".act = kiln::nn::FusedConvOptions::Act::Relu";
    } else if (r->op_type == "Clip" && opset_ >= 11 && r->input.size() == 3) {
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
  return q;
}

bool Generator::conv_pool_options(const proto::NodeP& pool, std::string& opts) {
  // The MaxPool emitter's call, max_pool2d(pool_in, kernel, {options}), as the call's
  // .pool_kernel_size and .pool; a pool it declines stays a node of its own.
  const std::set<std::string> used_pool = used_;  // the pool's own output name is not taken
  EmitContext pe = make_ec(pool);
  pe.in = [](size_t) { return std::string("pool_in"); };
  pe.rank[0] = 4;
  const OpEntry* pool_entry = reg_.find("MaxPool");
  const std::string head = "  kiln::Tensor " + pe.out.at(0) + " = kiln::nn::functional::max_pool2d(pool_in, ";
  const bool emitted = pool_entry->emit && pool_entry->emit(pe);
  used_ = used_pool;
  if (!emitted || pe.code.compare(0, head.size(), head) != 0 || pe.code.size() <= head.size() + 3) return false;
  const std::string args = pe.code.substr(head.size(), pe.code.size() - head.size() - 3);  // less ");\n"
  const size_t split = args.find(", {");
  if (split == std::string::npos) return false;
  opts += (opts.empty() ? "" : ", ") + (".pool_kernel_size = " + args.substr(0, split)) +
          ", .pool = " + args.substr(split + 2);
  return true;
}

// Conv [-> BatchNormalization] [-> Add of a value computed before] [-> Relu | Clip with
// constant bounds] [-> MaxPool, 2-d, without the Add], at least one after the Conv, at
// consecutive positions from pos, each result read only by the next node: one
// kiln::nn::conv_bn / conv_act call (in inference one convolution with the rest as its
// epilogue). The modules come from their own emitters; when one declines, nothing is kept.
size_t Generator::try_fused_conv(Scope& scope, size_t pos) {
  const proto::NodeP& c = scope.gr.nodes[scope.order[pos]];
  if (c.op_type != "Conv" || c.output.size() != 1 || c.input.size() < 2) return 0;
  std::string cur = c.output[0], opts;
  const proto::NodeP* b = nullptr;
  size_t q = conv_epilogue(scope, pos, b, cur, opts);
  // A MaxPool after it (no residual): the pool options of the call.
  const proto::NodeP* pool = nullptr;
  if (const proto::NodeP* m = next_reads(scope, q, cur);
      m && m->op_type == "MaxPool" && opts.find(".residual") == opts.npos)
    pool = m;
  if (q == pos + 1 && !pool) return 0;
  // The batch norm's input is named by a placeholder: its value is never a variable.
  const std::set<std::string> used_before = used_;
  const size_t n_members = members_.size(), n_state = state_.size();
  const int64_t n_modules = res_.modules;
  EmitContext ce = make_ec(c);
  const OpEntry* conv_entry = reg_.find("Conv");
  std::string mc, mb;
  if (conv_entry->emit && conv_entry->emit(ce) && !ce.out_rank.empty()) mc = called_module(ce, ce.in(0));
  if (!mc.empty() && b) {
    EmitContext be = make_ec(*b);
    be.in = [](size_t i) { return i == 0 ? std::string("conv_out") : std::string("kiln::Tensor{}"); };
    be.rank[0] = ce.out_rank[0];
    const OpEntry* bn_entry = reg_.find("BatchNormalization");
    if (bn_entry->emit && bn_entry->emit(be)) mb = called_module(be, "conv_out");
  }
  if (pool && !mc.empty() && ce.out_rank[0] == 4 && conv_pool_options(*pool, opts)) {
    cur = pool->output[0];
    ++q;
  }
  if (mc.empty() || (b && mb.empty()) || q == pos + 1) {
    used_ = used_before;
    members_.resize(n_members);
    state_.resize(n_state);
    res_.modules = n_modules;
    return 0;
  }
  const std::string var = unique(ident(cur));
  std::string names;
  for (size_t k = pos; k < q; ++k) {
    const proto::NodeP& n = *scope.node_at(k);
    names += (k == pos ? "" : " + ") + n.op_type + (n.name.empty() ? "" : " '" + n.name + "'");
  }
  body_ += "  // " + names + "\n  kiln::Tensor " + var +
           " = kiln::nn::" + (b ? "conv_bn(" + mc + ", " + mb : "conv_act(" + mc) + ", " + ce.in(0) +
           (opts.empty() ? "" : ", {" + opts + "}") + ");\n";
  ++res_.fused_convs;
  finish_chain(scope, pos, q, cur, var, ce.out_rank[0]);
  return q;
}

}  // namespace kiln::onnx::gen
