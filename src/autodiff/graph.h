// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The autodiff graph: per-tensor state (AutogradMeta), recorded nodes, saved tensors, and the
// table of gradient rules. See Note [Autodiff design].
//
// Note [Autodiff design]
// ~~~~~~~~~~~~~~~~~~~~~~
// A device made with `.autodiff()` runs on an AutodiffBackend that forwards every buffer
// operation to the wrapped backend; its only job is to say "record here". Recording happens in
// the frontend (detail::run, run_into and the view functions), where tensors are known: when
// grad mode is on and an input requires grad, a Node is created holding the op record (kind,
// attributes, input and output descriptors), one Edge per input (to the node that produced
// it, or to the leaf tensor's meta) and the tensors its gradient rule asked to keep.
// Outputs get an AutogradMeta pointing to the node. Gradient rules are written with public
// tensor ops, so they run on any backend and are recorded themselves when the backward pass
// runs with create_graph: gradients of gradients come for free.
//
// backward() walks nodes in decreasing creation order (a node is always created after the
// nodes producing its inputs, so every contribution to a node is summed before it runs),
// calls each rule once with the summed output gradients, and releases the node's saved
// tensors right after unless the graph is retained.
//
// Saved outputs are kept as plain aliases (no meta, so no node -> tensor -> node cycle) and
// rebuilt with the node as grad_fn when a rule asks for them. Each Storage carries a version
// counter bumped by in-place writes; a saved tensor whose buffer changed since it was saved
// throws at backward time instead of giving a wrong gradient.
//
// With Checkpointing::Balanced, nodes of memory-bound ops do not keep inputs that other
// memory-bound nodes produced; they keep a recipe (producer node + output index) and the
// backward pass recomputes those values, once per pass, from the producer's own inputs.
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/backend.h"
#include "ir/op.h"
#include "kiln/autodiff.h"
#include "kiln/tensor.h"

namespace kiln {

namespace autodiff {
struct Node;
}

/// Per-tensor autodiff state. Shared by all handles of one TensorImpl.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<autodiff::Node> grad_fn;  ///< null for leaves
  uint32_t output_nr = 0;                   ///< which output of grad_fn this tensor is
  bool is_view = false;                     ///< made by a view function from a tensor needing grad
};

namespace autodiff {

/// A tensor kept for the backward pass.
struct SavedTensor {
  Tensor value;                    ///< the alias (no autograd meta for saved outputs)
  uint64_t version = 0;            ///< storage version when saved
  std::shared_ptr<Node> producer;  ///< checkpointing: recompute from this node instead
  uint32_t producer_output = 0;
  bool is_output = false;  ///< an output of the node holding it (rebuilt with the node as grad_fn)
  bool defined() const { return value.defined() || producer != nullptr; }
};

/// Where the gradient of one input goes.
struct Edge {
  std::shared_ptr<Node> node;          ///< producer node, or
  std::shared_ptr<AutogradMeta> leaf;  ///< the leaf that accumulates it
  uint32_t output_nr = 0;
  bool valid() const { return node || leaf; }
};

/// What a gradient rule receives.
struct GradContext {
  const ir::Op& op;             ///< kind, attributes, input and output descriptors
  std::vector<Tensor> inputs;   ///< saved inputs (undefined unless the rule saves inputs)
  std::vector<Tensor> outputs;  ///< saved outputs (undefined unless the rule saves outputs)
  std::vector<Tensor> grads;    ///< gradient of each output; undefined means zero
  std::vector<bool> needs_input_grad;
  bool needs(size_t i) const { return i < needs_input_grad.size() && needs_input_grad[i]; }
  /// grads[i], or zeros of output i's shape and dtype when it is undefined.
  Tensor grad_or_zeros(size_t i) const;
  const Device& device() const { return device_; }
  Device device_;
};

/// A gradient rule: the gradient of each input (undefined where none or not needed).
using GradFn = std::function<std::vector<Tensor>(const GradContext&)>;

/// What a rule needs kept from the forward pass.
enum SaveFlags : uint8_t { kSaveNothing = 0, kSaveInputs = 1, kSaveOutputs = 2, kSaveBoth = 3 };

struct GradRule {
  GradFn fn;                    ///< empty: not differentiable (outputs never require grad)
  uint8_t save = kSaveNothing;  ///< SaveFlags
  bool differentiable = true;
  /// With kSaveInputs: which inputs to keep (bit i = input i; the others read as undefined in the
  /// rule), so that e.g. gather keeps its index but not the tensor it reads. Ignored for
  /// memory-bound ops under Checkpointing::Balanced (it recomputes them from all their inputs).
  uint32_t input_mask = ~0u;
};

/// One recorded op (or view).
struct Node {
  ir::Op op;
  GradFn fn;
  std::vector<Edge> next;                 ///< one per input
  std::vector<SavedTensor> saved_inputs;  ///< one per input when the rule saves inputs
  std::vector<SavedTensor> saved_outputs;
  std::vector<std::weak_ptr<AutogradMeta>> out_meta;  ///< to report gradients of live intermediates
  Device device;
  uint64_t seq = 0;
  bool memory_bound = false;
  /// Balanced checkpointing: > 0 when every input is saved, so the outputs can be recomputed; the
  /// number of nodes one recomputation runs through (bounded, see kMaxRecomputeDepth in record.cpp).
  uint16_t recompute_depth = 0;
  bool inputs_for_recompute = false;  ///< the inputs are saved only to recompute the outputs (the rule reads none)
  bool released = false;
  std::string name;  ///< op name for error messages
  /// Frees the nodes only this one keeps alive iteratively (a long chain must not recurse).
  ~Node();
};

/// The rule table, indexed by op kind (filled by the family files, see rules.h).
const GradRule& rule_for(ir::OpKind k);
void set_rule(ir::OpKind k, GradRule r);

/// The checkpointing mode of a device, or nullopt when it has no autodiff.
bool is_autodiff(const Device& d);
Checkpointing checkpointing(const Device& d);

/// True when t takes part in gradient tracking.
bool requires_grad(const Tensor& t);

/// Records op (already executed: inputs -> outputs) when grad mode is on and an input requires
/// grad. Called by detail::run.
void record(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin, std::span<Tensor> outputs);
/// Called by run_into before an in-place write into `out`: throws when the write cannot be
/// recorded (a leaf that requires grad, a view of a tracked tensor, a non-differentiable op), so
/// no data changes, and returns the inputs to record instead of `inputs` (those sharing out's
/// buffer cloned when the rule saves its inputs), or an empty vector to record `inputs` as they are.
std::vector<Tensor> prepare_inplace(ir::OpKind kind, const Tensor* inputs, size_t nin, const Tensor& out);
/// Records an in-place op writing `out` (run_into); updates out's meta.
void record_inplace(const ir::Op& op, const Device& dev, const Tensor* inputs, size_t nin, const Tensor& out);
/// Records a view: result = f(base), with `backward` mapping the view's gradient to base's.
void record_view(const Tensor& base, const Tensor& result, const char* name,
                 std::function<Tensor(const Tensor&)> backward);
/// Records a custom node with explicit inputs and a rule (composites that need their own rule).
/// With save_inputs = false the rule gets no inputs (c.inputs undefined) and later in-place writes
/// to them do not invalidate the node.
void record_custom(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, GradFn fn,
                   bool save_inputs = true);

/// Storage version counter (bumped by in-place writes).
uint64_t version_of(const Tensor& t);
void bump_version(const Tensor& t);

}  // namespace autodiff
}  // namespace kiln
