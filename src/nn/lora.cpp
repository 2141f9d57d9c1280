// SPDX-License-Identifier: MIT OR Apache-2.0
// LoRA adapters: apply_lora, lora_parameters, merge_lora.
#include "kiln/nn/lora.h"

#include <cmath>
#include <sstream>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/transformer.h"
#include "kiln/ops.h"

namespace kiln::nn {

LoraAdapter::LoraAdapter(int64_t in_features, int64_t out_features, const LoraConfig& c, DType dtype,
                         const Device& device)
    : scaling(c.alpha / static_cast<double>(c.rank)) {
  KILN_CHECK(c.rank >= 1, "apply_lora", "rank must be >= 1, got " << c.rank);
  KILN_CHECK(std::isfinite(c.alpha) && c.alpha > 0, "apply_lora", "alpha must be finite and > 0, got " << c.alpha);
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  TensorOptions o{.dtype = dtype, .device = device.without_autodiff()};
  lora_A = make_param(uniform({c.rank, in_features}, -bound, bound, o), device);
  lora_B = make_param(zeros({out_features, c.rank}, o), device);
}

Tensor LoraAdapter::delta() const { return matmul(lora_B, lora_A) * scaling; }

Tensor LoraAdapter::forward(const Tensor& x) const {
  return linear(linear(x, lora_A, Tensor()), lora_B, Tensor()) * scaling;
}

std::string LoraAdapter::extra_repr() const {
  std::ostringstream s;
  s << "rank=" << lora_A.size(0) << ", scaling=" << scaling;
  return s.str();
}

namespace {

/// Collects the Linear and MultiHeadAttention modules with their dotted paths and whether a
/// target matched them or a module holding them.
class Finder : public Visitor {
 public:
  struct Hit {
    Module* m;
    std::string path;
  };
  explicit Finder(const std::vector<std::string>& targets) : targets_(targets), used_(targets.size(), false) {
    stack_.push_back({"", targets.empty()});
  }
  std::vector<Hit> linears, attentions;
  std::vector<bool> used() const { return used_; }

  void tensor(std::string_view, Tensor&, bool) override {}
  bool enter(std::string_view name, Module& m) override {
    if (dynamic_cast<LoraAdapter*>(&m)) return false;
    std::string path = stack_.back().path.empty() ? std::string(name) : stack_.back().path + "." + std::string(name);
    bool on = stack_.back().on || matches(path);
    stack_.push_back({path, on});
    if (on && dynamic_cast<Linear*>(&m)) linears.push_back({&m, path});
    if (on && dynamic_cast<MultiHeadAttention*>(&m)) attentions.push_back({&m, path});
    return true;
  }
  void leave(std::string_view, Module&) override { stack_.pop_back(); }

 private:
  struct Frame {
    std::string path;
    bool on;
  };
  bool matches(const std::string& path) {
    bool any = false;
    for (size_t i = 0; i < targets_.size(); ++i) {
      const std::string& t = targets_[i];
      bool m = path == t || (path.size() > t.size() && path.compare(path.size() - t.size(), t.size(), t) == 0 &&
                             path[path.size() - t.size() - 1] == '.');
      if (m) used_[i] = true;
      any = any || m;
    }
    return any;
  }
  std::vector<std::string> targets_;
  std::vector<bool> used_;
  std::vector<Frame> stack_;
};

/// Every adapter field of the model's Linear and MultiHeadAttention modules.
std::vector<std::optional<LoraAdapter>*> adapter_fields(Module& model) {
  Finder f({});
  model.visit(f);
  std::vector<std::optional<LoraAdapter>*> r;
  if (auto* l = dynamic_cast<Linear*>(&model)) r.push_back(&l->lora);
  if (auto* a = dynamic_cast<MultiHeadAttention*>(&model)) {
    r.push_back(&a->q_lora);
    r.push_back(&a->k_lora);
    r.push_back(&a->v_lora);
  }
  for (auto& h : f.linears) r.push_back(&static_cast<Linear*>(h.m)->lora);
  for (auto& h : f.attentions) {
    auto* a = static_cast<MultiHeadAttention*>(h.m);
    r.push_back(&a->q_lora);
    r.push_back(&a->k_lora);
    r.push_back(&a->v_lora);
  }
  return r;
}

}  // namespace

int64_t apply_lora(Module& model, const LoraConfig& config) {
  LoraAdapter check(1, 1, config, f32, Device::cpu());  // validates rank and alpha
  Finder f(config.targets);
  model.visit(f);
  const std::vector<bool> used = f.used();
  for (size_t i = 0; i < used.size(); ++i)
    KILN_CHECK(used[i], "apply_lora", "the target '" << config.targets[i] << "' matches no module of the model");
  std::vector<Finder::Hit> linears = f.linears, attentions = f.attentions;
  if (config.targets.empty()) {  // the model itself may be a Linear or an attention
    if (dynamic_cast<Linear*>(&model)) linears.insert(linears.begin(), {&model, ""});
    if (dynamic_cast<MultiHeadAttention*>(&model)) attentions.insert(attentions.begin(), {&model, ""});
  }
  for (auto& h : linears)
    KILN_CHECK(!static_cast<Linear*>(h.m)->lora, "apply_lora", "'" << h.path << "' already has a LoRA adapter");
  for (auto& h : attentions)
    KILN_CHECK(!static_cast<MultiHeadAttention*>(h.m)->q_lora, "apply_lora",
               "'" << h.path << "' already has LoRA adapters");
  KILN_CHECK(!linears.empty() || !attentions.empty(), "apply_lora", "the model has no Linear or MultiHeadAttention");
  model.freeze();
  int64_t n = 0;
  for (auto& h : linears) {
    auto* l = static_cast<Linear*>(h.m);
    l->lora.emplace(l->weight.size(1), l->weight.size(0), config, l->weight.dtype(), l->weight.device());
    ++n;
  }
  for (auto& h : attentions) {
    auto* a = static_cast<MultiHeadAttention*>(h.m);
    const Tensor& w = a->in_proj_weight.defined() ? a->in_proj_weight : a->q_proj_weight;
    const int64_t E = a->config.embed_dim;
    auto in = [&](const Tensor& sep) { return a->in_proj_weight.defined() ? E : sep.size(1); };
    a->q_lora.emplace(in(a->q_proj_weight), E, config, w.dtype(), w.device());
    a->k_lora.emplace(in(a->k_proj_weight), E, config, w.dtype(), w.device());
    a->v_lora.emplace(in(a->v_proj_weight), E, config, w.dtype(), w.device());
    n += 3;
  }
  return n;
}

std::vector<Tensor> lora_parameters(Module& model) {
  std::vector<Tensor> r;
  for (auto* f : adapter_fields(model))
    if (*f) {
      r.push_back((*f)->lora_A);
      r.push_back((*f)->lora_B);
    }
  return r;
}

int64_t merge_lora(Module& model) {
  NoGradGuard ng;
  int64_t n = 0;
  auto fold = [&](Tensor w, std::optional<LoraAdapter>& a) {
    Tensor merged = (w.detach() + a->delta().detach()).contiguous();
    a.reset();
    ++n;
    return w.requires_grad() ? merged.require_grad() : merged;
  };
  Finder f({});
  model.visit(f);
  std::vector<Finder::Hit> linears = f.linears, attentions = f.attentions;
  if (dynamic_cast<Linear*>(&model)) linears.insert(linears.begin(), {&model, ""});
  if (dynamic_cast<MultiHeadAttention*>(&model)) attentions.insert(attentions.begin(), {&model, ""});
  for (auto& h : linears) {
    auto* l = static_cast<Linear*>(h.m);
    if (l->lora) l->weight = fold(l->weight, l->lora);
  }
  for (auto& h : attentions) {
    auto* a = static_cast<MultiHeadAttention*>(h.m);
    if (!a->q_lora) continue;
    if (a->in_proj_weight.defined()) {
      const int64_t E = a->config.embed_dim;
      Tensor w = a->in_proj_weight;
      Tensor q = fold(w.narrow(0, 0, E), a->q_lora), k = fold(w.narrow(0, E, E), a->k_lora),
             v = fold(w.narrow(0, 2 * E, E), a->v_lora);
      Tensor packed = cat({q.detach(), k.detach(), v.detach()}, 0);
      a->in_proj_weight = w.requires_grad() ? packed.require_grad() : packed;
    } else {
      a->q_proj_weight = fold(a->q_proj_weight, a->q_lora);
      a->k_proj_weight = fold(a->k_proj_weight, a->k_lora);
      a->v_proj_weight = fold(a->v_proj_weight, a->v_lora);
    }
  }
  return n;
}

}  // namespace kiln::nn
