// SPDX-License-Identifier: MIT OR Apache-2.0
// Recording nodes: ops, in-place ops, views and custom composites (Note [Autodiff design]).
#include <mutex>

#include "autodiff/graph.h"
#include "autodiff/rules.h"
#include "ops/dispatch.h"

namespace kiln {

namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_seq{0};
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
bool set_grad_enabled(bool on) {
  bool prev = t_grad_enabled;
  t_grad_enabled = on;
  return prev;
}

namespace autodiff {

namespace {
std::vector<GradRule>& table() {
  static std::vector<GradRule> t(static_cast<size_t>(ir::kNumOps));
  return t;
}
}  // namespace

const GradRule& rule_for(ir::OpKind k) {
  static std::once_flag once;
  std::call_once(once, [] { register_all_rules(); });
  return table()[static_cast<size_t>(k)];
}
void set_rule(ir::OpKind k, GradRule r) { table()[static_cast<size_t>(k)] = std::move(r); }

bool requires_grad(const Tensor& t) { return t.defined() && t.impl().autograd && t.impl().autograd->requires_grad; }

uint64_t version_of(const Tensor& t) { return t.impl().storage ? t.impl().storage->version : 0; }
void bump_version(const Tensor& t) {
  if (t.impl().storage) t.impl().storage->version++;
}

Tensor GradContext::grad_or_zeros(size_t i) const {
  if (grads[i].defined()) return grads[i];
  const ir::TensorDesc& d = op.outputs[i];
  return zeros(d.shape, TensorOptions{.dtype = d.dtype, .device = device_});
}

namespace {

/// An alias of t's data without autograd state (what a node keeps).
Tensor plain_alias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(t.impl());
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

Edge edge_of(const Tensor& t) {
  if (!requires_grad(t)) return {};
  const auto& m = t.impl().autograd;
  if (m->grad_fn) return Edge{m->grad_fn, nullptr, m->output_nr};
  return Edge{nullptr, m, 0};
}

bool is_memory_bound(ir::OpKind k) {
  switch (ir::op_family(k)) {
    case ir::Family::Unary:
    case ir::Family::Binary:
    case ir::Family::Ternary:
      return true;
    default:
      return false;
  }
}

SavedTensor save_input(const Tensor& t, Checkpointing mode, bool memory_bound) {
  SavedTensor s;
  s.version = version_of(t);
  if (mode == Checkpointing::Balanced && memory_bound && requires_grad(t)) {
    const auto& m = t.impl().autograd;
    if (m->grad_fn && m->grad_fn->memory_bound && !m->is_view) {
      s.producer = m->grad_fn;
      s.producer_output = m->output_nr;
      return s;
    }
  }
  s.value = t;  // inputs keep their meta: rules differentiate through them under create_graph
  return s;
}

std::shared_ptr<Node> make_node(const char* name, const Device& dev, const Tensor* inputs, size_t nin) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->device = dev;
  node->seq = ++g_seq;
  node->next.reserve(nin);
  for (size_t i = 0; i < nin; ++i) node->next.push_back(edge_of(inputs[i]));
  return node;
}

void attach_outputs(const std::shared_ptr<Node>& node, std::vector<Tensor>& outputs) {
  node->out_meta.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& o = outputs[i];
    if (!o.defined() || !is_floating(o.dtype())) continue;
    auto m = std::make_shared<AutogradMeta>();
    m->requires_grad = true;
    m->grad_fn = node;
    m->output_nr = static_cast<uint32_t>(i);
    o.impl().autograd = m;
    node->out_meta[i] = m;
  }
}

bool any_requires_grad(const Tensor* inputs, size_t nin) {
  for (size_t i = 0; i < nin; ++i)
    if (requires_grad(inputs[i])) return true;
  return false;
}

std::shared_ptr<Node> op_node(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin,
                              const GradRule& rule) {
  const char* name = ir::op_name(op.kind).data();
  auto node = make_node(name, dev, inputs, nin);
  node->op = op;
  node->memory_bound = is_memory_bound(op.kind);
  if (!rule.fn) {
    std::string n = name;
    node->fn = [n](const GradContext&) -> std::vector<Tensor> {
      KILN_CHECK(false, "backward", "the op " << n << " has no gradient rule yet");
    };
  } else {
    node->fn = rule.fn;
  }
  if (rule.save & kSaveInputs) {
    const Checkpointing mode = checkpointing(dev);
    node->saved_inputs.reserve(nin);
    for (size_t i = 0; i < nin; ++i) node->saved_inputs.push_back(save_input(inputs[i], mode, node->memory_bound));
  }
  return node;
}

void save_outputs(Node& node, const GradRule& rule, const std::vector<Tensor>& outputs) {
  if (!(rule.save & kSaveOutputs)) return;
  for (const Tensor& o : outputs) {
    SavedTensor s;
    s.value = plain_alias(o);
    s.version = version_of(o);
    s.is_output = true;
    node.saved_outputs.push_back(std::move(s));
  }
}

}  // namespace

void record(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin, std::vector<Tensor>& outputs) {
  if (!t_grad_enabled || !any_requires_grad(inputs, nin)) return;
  const GradRule& rule = rule_for(op.kind);
  if (!rule.differentiable) return;
  auto node = op_node(op, dev, inputs, nin, rule);
  save_outputs(*node, rule, outputs);
  attach_outputs(node, outputs);
}

void record_inplace(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin, const Tensor& out) {
  bump_version(out);
  const bool out_tracked = requires_grad(out);
  if (!t_grad_enabled || (!out_tracked && !any_requires_grad(inputs, nin))) {
    // Overwriting a tracked tensor outside grad mode keeps its graph link (PyTorch does too).
    return;
  }
  const auto& m = out.impl().autograd;
  KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), ir::op_name(op.kind).data(),
             "a leaf tensor that requires grad is used in an in-place operation; wrap the update in a "
             "kiln::NoGradGuard or work on a copy (clone())");
  KILN_CHECK(!(m && m->is_view), ir::op_name(op.kind).data(),
             "in-place writes into a view of a tensor that requires grad are not supported; build the result "
             "out of place (index_put, where, cat)");
  const GradRule& rule = rule_for(op.kind);
  KILN_CHECK(rule.differentiable, ir::op_name(op.kind).data(),
             "writes a non-differentiable result into a tensor that requires grad");
  auto node = op_node(op, dev, inputs, nin, rule);
  std::vector<Tensor> outs{out};
  save_outputs(*node, rule, outs);
  if (!(rule.save & kSaveOutputs)) {
    // Copy writes the whole view from its input; nothing else to do.
  }
  auto nm = std::make_shared<AutogradMeta>();
  nm->requires_grad = true;
  nm->grad_fn = node;
  out.impl().autograd = nm;
  node->out_meta = {nm};
}

void record_view(const Tensor& base, const Tensor& result, const char* name,
                 std::function<Tensor(const Tensor&)> backward) {
  if (!t_grad_enabled || !requires_grad(base)) return;
  auto node = make_node(name, base.device(), &base, 1);
  node->op.inputs = {detail::desc_of(base)};
  node->op.outputs = {detail::desc_of(result)};
  node->fn = [bw = std::move(backward)](const GradContext& c) -> std::vector<Tensor> {
    return {c.grads[0].defined() ? bw(c.grads[0]) : Tensor()};
  };
  std::vector<Tensor> outs{result};
  attach_outputs(node, outs);
  if (result.impl().autograd) result.impl().autograd->is_view = true;
}

void record_custom(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, GradFn fn) {
  if (!t_grad_enabled || !any_requires_grad(inputs.data(), inputs.size())) return;
  auto node = make_node(name, inputs.front().device(), inputs.data(), inputs.size());
  for (const Tensor& t : inputs) node->op.inputs.push_back(detail::desc_of(t));
  for (const Tensor& t : outputs) node->op.outputs.push_back(detail::desc_of(t));
  for (const Tensor& t : inputs) {
    SavedTensor s;
    s.value = t;
    s.version = version_of(t);
    node->saved_inputs.push_back(std::move(s));
  }
  node->fn = std::move(fn);
  attach_outputs(node, outputs);
}

}  // namespace autodiff
}  // namespace kiln
