// SPDX-License-Identifier: MIT OR Apache-2.0
// The backward pass (Note [Autodiff design] in graph.h) and the autodiff device decorator.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autodiff/grad_ready.h"
#include "autodiff/graph.h"
#include "ops/dispatch.h"

namespace kiln {

// ---- Gradients ---------------------------------------------------------------------------

Tensor Gradients::get(const Tensor& t) const {
  if (!t.defined() || !t.impl().autograd) return {};
  auto it = map_.find(t.impl().autograd.get());
  return it == map_.end() ? Tensor() : it->second.grad;
}

Tensor Gradients::remove(const Tensor& t) {
  if (!t.defined() || !t.impl().autograd) return {};
  auto it = map_.find(t.impl().autograd.get());
  if (it == map_.end()) return {};
  Tensor g = std::move(it->second.grad);
  map_.erase(it);
  return g;
}

void Gradients::accumulate(const std::shared_ptr<AutogradMeta>& key, const Tensor& g) {
  auto [it, fresh] = map_.try_emplace(key.get(), Entry{key, g});
  if (!fresh) it->second.grad = it->second.grad + g;
}

namespace autodiff {

// ---- the decorator ------------------------------------------------------------------------

namespace {

class AutodiffBackend final : public Backend {
 public:
  AutodiffBackend(Backend* inner, AutodiffOptions o) : inner_(inner), options_(o) {}
  DeviceType type() const override { return inner_->type(); }
  std::string name() const override {
    return inner_->name() + "+autodiff" + (options_.checkpointing == Checkpointing::Balanced ? "(balanced)" : "");
  }
  std::shared_ptr<Storage> allocate(size_t nbytes) override { return inner_->allocate(nbytes); }
  void release(void* data, size_t nbytes) noexcept override { inner_->release(data, nbytes); }
  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override { inner_->execute(op, in, out); }
  void write(Storage& dst, size_t off, const void* src, size_t n) override { inner_->write(dst, off, src, n); }
  void read(const Storage& src, size_t off, void* dst, size_t n) override { inner_->read(src, off, dst, n); }
  bool has_data() const override { return inner_->has_data(); }
  void sync() override { inner_->sync(); }
  MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  void reset_peak_memory() override { inner_->reset_peak_memory(); }
  void empty_cache() override { inner_->empty_cache(); }
  Backend* inner() override { return inner_; }
  Layer layer() const override { return Layer::Autodiff; }
  Backend* rewrap(Backend* inner) override { return Device(inner).autodiff(options_).backend(); }
  const AutodiffOptions* autodiff_options() const override { return &options_; }

 private:
  Backend* inner_;
  AutodiffOptions options_;
};

}  // namespace

bool is_autodiff(const Device& d) { return d.backend()->autodiff_options() != nullptr; }
Checkpointing checkpointing(const Device& d) {
  const AutodiffOptions* o = d.backend()->autodiff_options();
  return o ? o->checkpointing : Checkpointing::None;
}

// ---- gradient-ready notifications (grad_ready.h) ----------------------------------------------

namespace {
thread_local GradReadyScope* t_grad_ready = nullptr;
}  // namespace

GradReadyScope::GradReadyScope(std::vector<Tensor> leaves, Fn fn)
    : leaves_(std::move(leaves)), fn_(std::move(fn)), prev_(t_grad_ready) {
  t_grad_ready = this;
}
GradReadyScope::~GradReadyScope() { t_grad_ready = prev_; }
GradReadyScope* current_grad_ready_scope() { return t_grad_ready; }

// ---- backward -----------------------------------------------------------------------------

namespace {

/// One backward pass's bookkeeping for a GradReadyScope: how many edges from nodes that may
/// still run reach each watched leaf (grad_ready.h has the argument).
class GradReadyWatch {
 public:
  explicit GradReadyWatch(GradReadyScope& scope) : scope_(scope) {
    const auto& leaves = scope.leaves();
    for (size_t i = 0; i < leaves.size(); ++i) {
      const Tensor& t = leaves[i];
      if (!t.defined() || !t.impl().autograd || t.impl().autograd->grad_fn) continue;
      index_[t.impl().autograd.get()].push_back(i);
    }
  }

  /// Counts the edges into watched leaves from every node under `root`.
  void prepare(const std::shared_ptr<Node>& root) {
    if (index_.empty()) return;
    std::unordered_set<const Node*> seen{root.get()};
    std::vector<Node*> stack{root.get()};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      bool relevant = false;
      for (const Edge& e : n->next) {
        if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
        if (e.leaf && index_.count(e.leaf.get())) {
          ++remaining_[e.leaf.get()];
          relevant = true;
        }
      }
      if (relevant) nodes_.push_back(n);
    }
    std::sort(nodes_.begin(), nodes_.end(), [](const Node* a, const Node* b) { return a->seq > b->seq; });
  }

  /// The pass has run (or passed over) every node numbered `seq` or above.
  void finished_through(uint64_t seq, const Gradients& grads) {
    while (next_ < nodes_.size() && nodes_[next_]->seq >= seq) {
      for (const Edge& e : nodes_[next_]->next) {
        if (!e.leaf) continue;
        auto it = remaining_.find(e.leaf.get());
        if (it != remaining_.end() && --it->second == 0) fire(e.leaf.get(), grads);
      }
      ++next_;
    }
  }

  /// The pass is over: reports every watched leaf with a gradient not reported yet.
  void finish(const Gradients& grads) {
    finished_through(0, grads);
    for (const Tensor& t : scope_.leaves())
      if (t.defined() && t.impl().autograd && index_.count(t.impl().autograd.get()))
        fire(t.impl().autograd.get(), grads);
  }

 private:
  void fire(const AutogradMeta* meta, const Gradients& grads) {
    if (!fired_.insert(meta).second) return;
    const std::vector<size_t>& indices = index_.at(meta);
    Tensor g = grads.get(scope_.leaves()[indices.front()]);
    if (!g.defined()) return;
    for (size_t i : indices) scope_.fn()(i, g);
  }

  GradReadyScope& scope_;
  std::unordered_map<const AutogradMeta*, std::vector<size_t>> index_;
  std::unordered_map<const AutogradMeta*, int64_t> remaining_;
  std::unordered_set<const AutogradMeta*> fired_;
  std::vector<Node*> nodes_;  // nodes with edges into watched leaves, by decreasing seq
  size_t next_ = 0;
};

struct ByseqDesc {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const { return a->seq < b->seq; }
};

class Engine {
 public:
  explicit Engine(bool create_graph) : create_graph_(create_graph) {}

  Gradients run(const Tensor& root, const Tensor& seed, bool retain) {
    Gradients grads;
    // A GradReadyScope of this thread watches this pass (not the passes its callback may run).
    std::optional<GradReadyWatch> watch;
    GradReadyScope* scope = t_grad_ready;
    struct Reinstate {
      GradReadyScope* s;
      ~Reinstate() { t_grad_ready = s; }
    } reinstate{scope};
    if (scope) {
      t_grad_ready = nullptr;
      watch.emplace(*scope);
    }
    const auto& meta = root.impl().autograd;
    if (!meta->grad_fn) {
      grads.accumulate(meta, seed);
      if (watch) watch->finish(grads);
      return grads;
    }
    if (watch) watch->prepare(meta->grad_fn);
    add(meta->grad_fn, meta->output_nr, seed);
    while (!queue_.empty()) {
      std::shared_ptr<Node> node = queue_.top();
      queue_.pop();
      std::vector<Tensor> g = std::move(pending_[node.get()]);
      pending_.erase(node.get());
      process(node, g, grads);
      recomputed_.erase(node.get());  // checkpointing: every user of its recomputed outputs has run
      if (!retain) release(*node);
      if (watch) watch->finished_through(node->seq, grads);
    }
    if (watch) watch->finish(grads);
    return grads;
  }

 private:
  void add(const std::shared_ptr<Node>& node, uint32_t nr, const Tensor& g) {
    auto [it, fresh] = pending_.try_emplace(node.get());
    if (fresh) {
      it->second.resize(std::max<size_t>(node->op.outputs.size(), 1));
      queue_.push(node);
    }
    Tensor& slot = it->second[nr];
    slot = slot.defined() ? slot + g : g;
  }

  static void release(Node& n) {
    n.saved_inputs.clear();
    n.saved_outputs.clear();
    n.released = true;
  }

  Tensor unpack(const std::shared_ptr<Node>& owner, const SavedTensor& s, uint32_t index) {
    if (s.producer) return recompute(s.producer, s.producer_output);
    if (s.is_output && !s.value.defined()) return recompute(owner, index);  // Balanced checkpointing
    if (!s.value.defined()) return {};
    KILN_CHECK(version_of(s.value) == s.version, "backward",
               "a tensor that " << owner->name << " saved for its gradient was modified in place afterwards "
                                << "(version " << static_cast<long long>(version_of(s.value)) << ", saved at "
                                << static_cast<long long>(s.version) << "); clone() it before writing into it");
    if (s.is_output && create_graph_) {
      auto impl = std::make_shared<TensorImpl>(s.value.impl());
      auto m = std::make_shared<AutogradMeta>();
      m->requires_grad = true;
      m->grad_fn = owner;
      m->output_nr = index;
      impl->autograd = std::move(m);
      return Tensor(std::move(impl));
    }
    return s.value;
  }

  /// Checkpointing: the value of `producer`'s output nr, recomputed from its saved inputs.
  Tensor recompute(const std::shared_ptr<Node>& producer, uint32_t nr) {
    auto it = recomputed_.find(producer.get());
    if (it == recomputed_.end()) {
      KILN_CHECK(!producer->released, "backward",
                 "cannot recompute " << producer->name << ": its graph was already freed by a backward pass");
      std::vector<Tensor> ins;
      for (uint32_t i = 0; i < producer->saved_inputs.size(); ++i)
        ins.push_back(unpack(producer, producer->saved_inputs[i], i));
      ir::Op op = producer->op;
      std::vector<Tensor> outs = detail::run(producer->name.c_str(), op, producer->device, ins);
      it = recomputed_.emplace(producer.get(), std::move(outs)).first;
    }
    return it->second.at(nr);
  }

  void process(const std::shared_ptr<Node>& node, std::vector<Tensor>& g, Gradients& grads) {
    bool any = false;
    for (size_t i = 0; i < g.size(); ++i) {
      if (!g[i].defined()) continue;
      any = true;
      if (i < node->out_meta.size())
        if (auto m = node->out_meta[i].lock()) grads.accumulate(m, g[i]);
    }
    if (!any) return;
    KILN_CHECK(!node->released, "backward",
               "the graph through " << node->name
                                    << " was already freed by an earlier backward(); pass {.retain_graph = true} to "
                                       "the first call to run backward twice");
    GradContext ctx{node->op, {}, {}, std::move(g), {}, node->device};
    ctx.needs_input_grad.resize(node->next.size());
    for (size_t i = 0; i < node->next.size(); ++i) ctx.needs_input_grad[i] = node->next[i].valid();
    ctx.inputs.resize(node->op.inputs.size());
    for (uint32_t i = 0; i < node->saved_inputs.size() && i < ctx.inputs.size() && !node->inputs_for_recompute; ++i)
      ctx.inputs[i] = unpack(node, node->saved_inputs[i], i);
    for (uint32_t i = 0; i < node->saved_outputs.size(); ++i)
      ctx.outputs.push_back(unpack(node, node->saved_outputs[i], i));
    std::vector<Tensor> in_grads = node->fn(ctx);
    KILN_ASSERT(in_grads.size() <= node->next.size());
    for (size_t i = 0; i < in_grads.size(); ++i) {
      const Edge& e = node->next[i];
      Tensor gi = in_grads[i];
      if (!e.valid() || !gi.defined()) continue;
      const ir::TensorDesc& d = node->op.inputs[i];
      KILN_CHECK(gi.shape() == d.shape, "backward",
                 "the gradient rule of " << node->name << " returned shape " << gi.shape() << " for input "
                                         << static_cast<long long>(i) << " of shape " << d.shape);
      if (gi.dtype() != d.dtype) gi = gi.to(d.dtype);
      if (e.leaf)
        grads.accumulate(e.leaf, gi);
      else
        add(e.node, e.output_nr, gi);
    }
  }

  bool create_graph_;
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, ByseqDesc> queue_;
  std::unordered_map<Node*, std::vector<Tensor>> pending_;
  std::unordered_map<Node*, std::vector<Tensor>> recomputed_;
};

}  // namespace

Gradients backward(const Tensor& root, const Tensor& seed_in, const BackwardOptions& o) {
  detail::check_defined("backward", root);
  KILN_CHECK(is_autodiff(root.device()), "backward",
             "the tensor is on device " << root.device().str()
                                        << ", which records no graph; create the model's tensors on a device with "
                                           "autodiff, e.g. Device::cpu().autodiff(), and call require_grad() on them");
  KILN_CHECK(requires_grad(root), "backward",
             "the tensor does not require grad: no input of it called require_grad(), or it was computed under a "
             "NoGradGuard");
  Tensor seed = seed_in;
  if (!seed.defined()) {
    KILN_CHECK(root.numel() == 1, "backward",
               "backward() of a tensor of shape " << root.shape()
                                                  << " needs a seed gradient of the same shape: "
                                                     "t.backward(seed), or reduce it first (t.sum().backward())");
    seed = ones_like(root);
  } else {
    KILN_CHECK(seed.shape() == root.shape(), "backward",
               "seed gradient of shape " << seed.shape() << " does not match the tensor's shape " << root.shape());
    if (seed.device() != root.device()) seed = seed.to(root.device());
    if (seed.dtype() != root.dtype()) seed = seed.to(root.dtype());
  }
  const bool create = o.create_graph;
  const bool prev = set_grad_enabled(create);
  struct Restore {
    bool p;
    ~Restore() { set_grad_enabled(p); }
  } restore{prev};
  Engine e(create);
  return e.run(root, seed, o.retain_graph || create);
}

}  // namespace autodiff

// ---- Device and Tensor entry points ---------------------------------------------------------

Device Device::autodiff(const AutodiffOptions& o) const {
  // One decorator per (wrapped backend, options), never destroyed, like the backends: tensors
  // may outlive static destructors.
  auto make = [](Backend* inner, const void* ctx) -> Backend* {
    const AutodiffOptions& opts = *static_cast<const AutodiffOptions*>(ctx);
    static std::mutex mu;
    static auto* cache = new std::map<std::pair<Backend*, int>, Backend*>();
    std::lock_guard<std::mutex> lock(mu);
    Backend*& b = (*cache)[{inner, static_cast<int>(opts.checkpointing)}];
    if (!b) b = new autodiff::AutodiffBackend(inner, opts);
    return b;
  };
  return with_layer(*this, Layer::Autodiff, make, &o);
}

bool Device::has_autodiff() const { return backend_->autodiff_options() != nullptr; }

Device Device::without_autodiff() const { return with_layer(*this, Layer::Autodiff, nullptr); }

Tensor Tensor::require_grad(bool on) const {
  detail::check_defined("require_grad", *this);
  if (!on) {
    // PyTorch: "you can only change requires_grad flags of leaf variables".
    KILN_CHECK(!impl().autograd || !impl().autograd->grad_fn, "require_grad",
               "you can only change requires_grad flags of leaf tensors; this one is the result of an op. Use "
               "detach() for a copy that does not track gradients");
    impl().autograd.reset();
    return *this;
  }
  KILN_CHECK(autodiff::is_autodiff(device()), "require_grad",
             "the tensor is on device " << device().str()
                                        << ", which records no graph; move it with .to(Device::cpu().autodiff()) "
                                           "or create it there");
  KILN_CHECK(is_floating(dtype()), "require_grad",
             "only floating-point tensors can require gradients, got " << dtype_name(dtype()).data());
  KILN_CHECK(!impl().autograd || !impl().autograd->grad_fn, "require_grad",
             "the tensor is the result of an op and already tracks gradients; call detach() first for a new leaf");
  if (!impl().autograd) impl().autograd = std::make_shared<AutogradMeta>();
  impl().autograd->requires_grad = true;
  return *this;
}

bool Tensor::requires_grad() const { return autodiff::requires_grad(*this); }

bool Tensor::is_leaf() const { return !impl().autograd || !impl().autograd->grad_fn; }

Tensor Tensor::detach() const {
  detail::check_defined("detach", *this);
  auto impl = std::make_shared<TensorImpl>(this->impl());
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

Gradients Tensor::backward(const BackwardOptions& o) const { return autodiff::backward(*this, Tensor(), o); }
Gradients Tensor::backward(const Tensor& seed, const BackwardOptions& o) const {
  return autodiff::backward(*this, seed, o);
}
Tensor Tensor::grad(const Gradients& g) const { return g.get(*this); }

}  // namespace kiln
