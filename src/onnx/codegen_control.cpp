// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX code generation of control flow. A subgraph becomes a nested block of forward(): it reads
// outer values through their variables, its inputs are variables bound at the top of the block
// and its outputs are assigned to the node's variables at the end.
#include "onnx/codegen.h"

namespace kiln::onnx::gen {

namespace {

/// The subgraph attribute `a` of node n; throws when it is missing.
const proto::GraphP* graph_attr(const proto::NodeP& n, const char* a) {
  const proto::AttrP* at = n.attr(a);
  KILN_CHECK(at && at->g, "onnx", "node '" << n.name << "' (" << n.op_type << "): missing subgraph '" << a << "'");
  return at->g.get();
}

/// Throws unless subgraph sg (`what` of node n) has `want` outputs.
void check_outs(const proto::NodeP& n, const proto::GraphP& sg, size_t want, const char* what) {
  KILN_CHECK(sg.outputs.size() == want, "onnx",
             "node '" << n.name << "' (" << n.op_type << "): " << what << " returns " << sg.outputs.size()
                      << " outputs, expected " << want);
}

}  // namespace

std::string Generator::bind(const proto::ValueInfoP& v, const std::string& init) {
  std::string var = unique(ident(v.name));
  expr_[v.name] = var;
  bound_.insert(v.name);
  shapes_.erase(v.name);
  if (v.has_shape) ranks_[v.name] = static_cast<int>(v.shape.size());
  return "  const kiln::Tensor " + var + " = " + init + ";\n";
}

std::string Generator::sub_block(const proto::GraphP& sg, const std::string& head, std::vector<std::string>& outs) {
  std::string saved;
  saved.swap(body_);
  body_ = head;
  emit_graph(sg);
  for (const auto& o : sg.outputs) outs.push_back(value_expr(o.name));
  std::string r;
  r.swap(body_);
  body_.swap(saved);
  return r;
}

std::string Generator::out_var(EmitContext& ec, size_t i, const std::string& hint) {
  if (i < ec.out.size() && !ec.out[i].empty()) return ec.out[i];
  return unique(hint);
}

bool Generator::emit_control(const proto::NodeP& n, EmitContext& ec) {
  if (n.op_type == "If")
    emit_if(n, ec);
  else if (n.op_type == "Loop")
    emit_loop(n, ec);
  else if (n.op_type == "Scan")
    emit_scan(n, ec);
  else
    return false;
  return true;
}

void Generator::emit_if(const proto::NodeP& n, EmitContext& ec) {
  std::string& code = ec.code;
  const proto::GraphP* then_g = graph_attr(n, "then_branch");
  const proto::GraphP* else_g = graph_attr(n, "else_branch");
  check_outs(n, *then_g, ec.out.size(), "then_branch");
  check_outs(n, *else_g, ec.out.size(), "else_branch");
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
}

void Generator::emit_loop(const proto::NodeP& n, EmitContext& ec) {
  std::string& code = ec.code;
  const proto::GraphP* bg = graph_attr(n, "body");
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
    std::string base = n_carried + i < ec.out.size() && !ec.out[n_carried + i].empty() ? ec.out[n_carried + i] : "scan";
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
}

void Generator::emit_scan(const proto::NodeP& n, EmitContext& ec) {
  std::string& code = ec.code;
  const proto::GraphP* bg = graph_attr(n, "body");
  int64_t m = ec.attr_i("num_scan_inputs", 0);
  KILN_CHECK(m >= 0 && static_cast<size_t>(m) <= n.input.size(), "onnx",
             "node '" << n.name << "' (Scan): num_scan_inputs out of range");
  size_t n_state = n.input.size() - static_cast<size_t>(m);
  KILN_CHECK(bg->inputs.size() == n.input.size() && bg->outputs.size() >= n_state, "onnx",
             "node '" << n.name << "' (Scan): the body must take the states and scan elements and return the states");
  size_t n_out = bg->outputs.size() - n_state;
  std::vector<int64_t> in_axes = ec.attr_ints("scan_input_axes"), in_dirs = ec.attr_ints("scan_input_directions"),
                       out_axes = ec.attr_ints("scan_output_axes"), out_dirs = ec.attr_ints("scan_output_directions");
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
}

}  // namespace kiln::onnx::gen
