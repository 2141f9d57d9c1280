// SPDX-License-Identifier: MIT OR Apache-2.0
// Recording nodes: ops, in-place ops, views and custom composites (Note [Autodiff design]).
#include <algorithm>
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
  if (Storage* s = t.impl().storage.get()) {
    s->version++;
    s->stamp = next_stamp();
  }
}

Node::~Node() {
  // A long graph (a chain of 100k ops, a long unrolled RNN) would free itself recursively, node
  // by node through the edges, and overflow the stack: unlink the nodes only this one keeps
  // alive and free them one at a time.
  std::vector<std::shared_ptr<Node>> dead;
  auto unlink = [&dead](Node& n) {
    n.saved_inputs.clear();  // saved inputs hold the same producers as the edges
    n.saved_outputs.clear();
    n.fn = nullptr;
    for (Edge& e : n.next)
      if (e.node && e.node.use_count() == 1) dead.push_back(std::move(e.node));
  };
  unlink(*this);
  while (!dead.empty()) {
    std::shared_ptr<Node> n = std::move(dead.back());
    dead.pop_back();
    unlink(*n);
  }  // each n is freed with nothing left to free recursively
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

/// Balanced checkpointing: the longest chain of recomputations a saved value may take. Recipes
/// through a recurrence (an RNN's cell state) would otherwise make the backward pass recompute
/// the whole sequence at once and hold it; past this depth a value is kept instead.
constexpr uint16_t kMaxRecomputeDepth = 8;

/// Balanced checkpointing: t can be kept as a recipe (its producer is a memory-bound node that
/// can recompute it from its own saved inputs, through a short enough chain).
bool recipe_able(const Tensor& t) {
  if (!requires_grad(t)) return false;
  const auto& m = t.impl().autograd;
  if (!m->grad_fn || m->is_view) return false;
  const Node& p = *m->grad_fn;
  return p.memory_bound && p.recompute_depth > 0 && p.recompute_depth < kMaxRecomputeDepth;
}

SavedTensor save_input(const Tensor& t, bool balanced) {
  SavedTensor s;
  s.version = version_of(t);
  if (balanced && recipe_able(t)) {
    const auto& m = t.impl().autograd;
    s.producer = m->grad_fn;
    s.producer_output = m->output_nr;
    return s;
  }
  s.value = t;  // inputs keep their meta: rules differentiate through them under create_graph
  return s;
}

/// Balanced checkpointing, for a memory-bound node whose rule reads no inputs: whether keeping
/// its inputs (to recompute its outputs later) holds no buffer the graph would not hold anyway:
/// recipes, and leaves that require grad (the user holds them), never a buffer the op reused
/// for its output.
bool inputs_free_to_keep(const Tensor* inputs, size_t nin, std::span<const Tensor> outputs) {
  for (size_t i = 0; i < nin; ++i) {
    const Tensor& t = inputs[i];
    if (recipe_able(t)) continue;
    if (!requires_grad(t) || t.impl().autograd->grad_fn) return false;
    for (const Tensor& o : outputs)
      if (o.defined() && t.is_same_storage(o)) return false;
  }
  return true;
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

void attach_outputs(const std::shared_ptr<Node>& node, std::span<Tensor> outputs) {
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

/// `outputs`: the op's results when it made new ones (record); null for in-place writes, whose
/// nodes are never recomputed.
std::shared_ptr<Node> op_node(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin,
                              const GradRule& rule, const std::span<Tensor>* outputs = nullptr) {
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
  // Balanced checkpointing: memory-bound nodes keep recipes for inputs other memory-bound nodes
  // made, and can be recomputed themselves when all their inputs are kept.
  const bool balanced = node->memory_bound && checkpointing(dev) == Checkpointing::Balanced;
  bool save_in = rule.save & kSaveInputs;
  if (balanced && outputs && !save_in && inputs_free_to_keep(inputs, nin, *outputs))
    save_in = node->inputs_for_recompute = true;
  if (save_in) {
    node->saved_inputs.reserve(nin);
    for (size_t i = 0; i < nin; ++i) {
      const bool keep = balanced || i >= 32 || ((rule.input_mask >> i) & 1u);
      node->saved_inputs.push_back(keep ? save_input(inputs[i], balanced) : SavedTensor{});
    }
    if (balanced && outputs) {
      uint16_t depth = 1;
      for (const SavedTensor& st : node->saved_inputs)
        if (st.producer) depth = std::max<uint16_t>(depth, st.producer->recompute_depth + 1);
      node->recompute_depth = depth;
    }
  }
  return node;
}

void save_outputs(Node& node, const GradRule& rule, std::span<const Tensor> outputs) {
  if (!(rule.save & kSaveOutputs)) return;
  for (const Tensor& o : outputs) {
    SavedTensor s;
    s.is_output = true;
    if (node.recompute_depth > 0) {  // no value: the backward pass recomputes it from the saved inputs
      node.saved_outputs.push_back(std::move(s));
      continue;
    }
    s.value = plain_alias(o);
    s.version = version_of(o);
    node.saved_outputs.push_back(std::move(s));
  }
}

}  // namespace

void record(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin, std::span<Tensor> outputs) {
  if (!t_grad_enabled || !any_requires_grad(inputs, nin)) return;
  const GradRule& rule = rule_for(op.kind);
  if (!rule.differentiable) return;
  auto node = op_node(op, dev, inputs, nin, rule, &outputs);
  save_outputs(*node, rule, outputs);
  attach_outputs(node, outputs);
}

std::vector<Tensor> prepare_inplace(ir::OpKind kind, const Tensor* inputs, size_t nin, const Tensor& out) {
  if (!t_grad_enabled || (!requires_grad(out) && !any_requires_grad(inputs, nin))) return {};
  const auto& m = out.impl().autograd;
  const char* name = ir::op_name(kind).data();
  KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), name,
             "a leaf tensor that requires grad is used in an in-place operation; wrap the update in a "
             "kiln::NoGradGuard or work on a copy (clone())");
  KILN_CHECK(!(m && m->is_view), name,
             "in-place writes into a view of a tensor that requires grad are not supported; build the result "
             "out of place (index_put, where, cat)");
  const GradRule& rule = rule_for(kind);
  KILN_CHECK(rule.differentiable, name, "writes a non-differentiable result into a tensor that requires grad");
  if (!(rule.save & kSaveInputs)) return {};
  // The rule needs the inputs' values from before the write (x.mul_(y) saves x for y's gradient).
  std::vector<Tensor> ins(inputs, inputs + nin);
  bool aliased = false;
  for (size_t i = 0; i < nin; ++i)
    if (ins[i].is_same_storage(out) && (i >= 32 || ((rule.input_mask >> i) & 1u))) {
      ins[i] = ins[i].clone();
      aliased = true;
    }
  return aliased ? ins : std::vector<Tensor>{};
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

void record_custom(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, GradFn fn,
                   bool save_inputs) {
  if (!t_grad_enabled || !any_requires_grad(inputs.data(), inputs.size())) return;
  auto node = make_node(name, inputs.front().device(), inputs.data(), inputs.size());
  for (const Tensor& t : inputs) node->op.inputs.push_back(detail::desc_of(t));
  for (const Tensor& t : outputs) node->op.outputs.push_back(detail::desc_of(t));
  for (const Tensor& t : inputs) {
    if (!save_inputs) break;
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
