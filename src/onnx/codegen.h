// SPDX-License-Identifier: MIT OR Apache-2.0
// Internal to ONNX code generation (codegen*.cpp): the Generator that turns one model into the
// text of a kiln::nn::Module and its weights, and the text helpers its parts share.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/onnx.h"
#include "onnx/ops.h"

namespace kiln::onnx::gen {

/// C++ keywords and the names generated code reserves (dev, forward, ...).
const std::set<std::string>& cpp_keywords();
/// A C++ identifier from an ONNX name: lower case, [a-z0-9_], no leading digit, no keyword.
std::string ident(const std::string& s);
/// `s` as a C++ string literal (quotes and backslashes escaped, control characters as '?').
std::string quote(const std::string& s);
/// An int64_t as a C++ literal (INT64_MIN/MAX by name, int64_t{...} outside the int32 range).
std::string int_lit(int64_t v);
/// Every line of `code` indented by `pad` more.
std::string indent(const std::string& code, const std::string& pad);
/// Outer values a node's subgraphs read (its implicit inputs).
std::set<std::string> implicit_inputs(const proto::NodeP& n);

/// A member of the generated module: its name, its type and its constructor statement.
struct Member {
  std::string name, type, ctor;
};

/// The emission of one graph body (the model's graph or a subgraph): the order its nodes are
/// emitted in, where each value is last read (empty: values are not released), the values held
/// by a variable of this body, and how many nodes (and graph outputs) read each value.
struct Scope {
  const proto::GraphP& gr;
  std::vector<size_t> order;
  std::unordered_map<std::string, size_t> last_use;
  std::set<std::string> locals;
  std::map<std::string, int> uses;
  /// The node at position q of `order`, or null past the end.
  const proto::NodeP* node_at(size_t q) const { return q < order.size() ? &gr.nodes[order[q]] : nullptr; }
};

/// Generates the code of one model: construct, then run() once. The state below is shared by
/// every part of the emission: names taken, constants, the module's members and weights, the
/// C++ expression, rank and shape value of each ONNX value, and the forward body written so far.
class Generator {
 public:
  /// Parses the model; throws when it has no graph.
  Generator(const std::string& model_path, const GenerateOptions& options);
  /// Checks the model is supported, emits forward(), writes the header, source and weights.
  GenerateResult run();

 private:
  // ---- setup (codegen.cpp) ----
  /// Throws naming every unsupported op (subgraphs included) and sparse initializers.
  void check_supported() const;
  /// The struct name and the file stem from the options or the model's file name.
  void choose_names();
  /// Initializers become constants; the other graph inputs become forward()'s arguments.
  void bind_inputs();

  // ---- values (codegen.cpp) ----
  /// `s`, or `s_2`, `s_3`, ... : the first name not taken yet; takes it.
  std::string unique(std::string s);
  /// Adds a member module of `type` built from `ctor_args` holding state `st`; returns its name.
  std::string add_module(const std::string& hint, const std::string& type, const std::string& ctor_args,
                         const std::vector<std::pair<std::string, Tensor>>& st);
  /// The expression of a constant, materialised on first use (a Param, a Buffer or a literal).
  std::string const_expr(const std::string& vname);
  /// The C++ tensor expression of a value; throws when it is not computed yet.
  std::string value_expr(const std::string& vname);
  /// A value as a shape value: one computed as such, or an integer constant of rank <= 1 with
  /// few elements (written as a literal); empty otherwise.
  ShapeArg shape_arg(const std::string& vname);
  /// The emitter context of node n: its outputs' variables, its inputs' constants, ranks, shape
  /// values and expressions.
  EmitContext make_ec(const proto::NodeP& n);
  /// A floating constant with one element (not hidden by a subgraph input), or null.
  const Tensor* scalar_const(const std::string& v) const;

  // ---- graph bodies (codegen.cpp) ----
  /// Emits the nodes of graph `gr` (the model's graph or a subgraph whose inputs are already
  /// bound in `expr_`) into `body_`.
  void emit_graph(const proto::GraphP& gr);
  /// The emission order of gr's nodes: topological (Kahn, keeping the model's order among ready
  /// nodes, a node with subgraphs depending on the outer values they read), Constant nodes
  /// first. Throws on an input nothing computes and on a cycle.
  std::vector<size_t> node_order(const proto::GraphP& gr) const;
  /// Fills scope.last_use (in the model's graph, when no node has subgraphs) and scope.uses.
  void plan_uses(Scope& scope) const;
  /// Emits the node at position pos of scope.order (or a chain from it); returns the position
  /// after what it emitted.
  size_t emit_node(Scope& scope, size_t pos);
  /// Folds a Constant node, or an Identity of a constant, into the constants; false for others.
  bool fold_constant(const proto::NodeP& n);
  /// Writes ec.code as a kiln::onnx::ops::call of node n (no specialised emitter took it).
  void emit_generic(const proto::NodeP& n, EmitContext& ec);
  /// Attribute a of node n as a C++ expression for ops::call.
  std::string attr_expr(const proto::NodeP& n, const proto::AttrP& a);
  /// The output ranks of node n: the emitter's, else the inputs' for rank-preserving ops.
  void infer_ranks(const proto::NodeP& n, const EmitContext& ec);
  /// Releases the values whose last use was at positions [pos, q) of scope.order (`v = {};`).
  void release_inside(const Scope& scope, size_t pos, size_t q);
  /// After a chain of nodes (positions [pos, q)) emitted as one call into variable var: binds
  /// the chain's result `value` (of rank `rank`, -1 unknown) to var and releases the values
  /// whose last use was inside the chain, as the node-by-node emission does.
  void finish_chain(Scope& scope, size_t pos, size_t q, const std::string& value, const std::string& var, int rank);

  // ---- chains emitted as one call (codegen_chains.cpp); each returns the position after the
  // chain, or 0 (nothing emitted) when the nodes at pos are not one ----
  /// MatMul by a constant 2-d weight, then Add of a constant [N] that alone reads the product:
  /// one nn::Linear with its bias.
  size_t try_linear_bias(Scope& scope, size_t pos);
  /// x / sqrt(2) -> Erf -> + 1 -> x * that -> * 0.5 (the exact GELU): one kiln::gelu call.
  size_t try_gelu(Scope& scope, size_t pos);
  /// Conv [-> BatchNormalization] [-> Add] [-> Relu | Clip] [-> MaxPool]: one
  /// kiln::nn::conv_bn / conv_act call.
  size_t try_fused_conv(Scope& scope, size_t pos);
  /// The end of the conv chain's epilogue (batch norm, residual Add, activation) from pos + 1;
  /// sets bn (or null), cur (the chain's result so far) and appends to opts.
  size_t conv_epilogue(Scope& scope, size_t pos, const proto::NodeP*& bn, std::string& cur, std::string& opts);
  /// The MaxPool emitter's call for `pool` after a conv of 4-d output, as the call's
  /// .pool_kernel_size and .pool options appended to opts; false when the pool stays a node.
  bool conv_pool_options(const proto::NodeP& pool, std::string& opts);

  // ---- control flow (codegen_control.cpp) ----
  /// If, Loop and Scan as nested blocks of forward(); false for other ops.
  bool emit_control(const proto::NodeP& n, EmitContext& ec);
  void emit_if(const proto::NodeP& n, EmitContext& ec);
  void emit_loop(const proto::NodeP& n, EmitContext& ec);
  void emit_scan(const proto::NodeP& n, EmitContext& ec);
  /// Binds subgraph input v to a new variable initialised by `init`; returns its declaration.
  std::string bind(const proto::ValueInfoP& v, const std::string& init);
  /// The statements of subgraph `sg` (its inputs bound by `head`), and its output expressions.
  std::string sub_block(const proto::GraphP& sg, const std::string& head, std::vector<std::string>& outs);
  /// Output i's variable, or a new one named after `hint` when the output is unused.
  std::string out_var(EmitContext& ec, size_t i, const std::string& hint);

  // ---- files (codegen.cpp) ----
  /// The text of the header and of the source.
  std::string header_text(const std::string& sig, const std::string& ret) const;
  std::string source_text(const std::string& sig, const std::string& ret, const std::vector<std::string>& outs) const;
  /// Writes the header, the source and the weights into options_.out_dir.
  void write_files();

  std::string model_path_;
  GenerateOptions options_;
  proto::ModelP model_;
  const proto::GraphP& g_;
  const Registry& reg_;
  int64_t opset_ = 0;
  std::string name_, stem_;
  std::set<std::string> used_;  ///< C++ names taken

  std::map<std::string, Tensor> consts_;
  std::set<std::string> is_init_;
  std::vector<const proto::ValueInfoP*> feeds_;
  std::vector<std::string> arg_names_;

  std::vector<Member> members_;
  std::vector<std::pair<std::string, Tensor>> state_;
  std::map<std::string, std::string> expr_;  ///< value name -> C++ expression (variable)
  std::map<std::string, int> ranks_;
  std::map<std::string, ShapeArg> shapes_;  ///< value name -> shape value (host std::vector<int64_t>)
  std::set<std::string> bound_;             ///< subgraph inputs (they hide constants of the same name)
  std::string body_;
  std::string const_body_;  ///< small constants, declared first in forward (any scope may use them)
  int64_t n_attr_consts_ = 0;
  GenerateResult res_;
};

}  // namespace kiln::onnx::gen
