// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Optimizers (torch.optim): SGD, Adam, AdamW, Adagrad, Adadelta, RMSprop, Adan, Lion, LBFGS,
// Muon; gradient clipping and accumulation. docs/optimizers.md is the chapter.
//
//   auto opt = kiln::optim::AdamW(model.parameters(), {.lr = 1e-3});
//   kiln::Gradients grads = loss.backward();
//   opt.step(grads);
//
// Gradients are not stored on tensors: step() looks each parameter's gradient up in `grads`
// (parameters without one are skipped) and updates the parameter in place under NoGradGuard,
// so the module holding the handle sees the new values. Optimizer state (moments, momentum
// buffers) lives on the parameter's device in its dtype.
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/autodiff.h"
#include "kiln/tensor.h"

namespace kiln::optim {

/// A set of parameters with its own learning rate / weight decay (torch's param_groups).
/// Unset options take the optimizer's defaults; after construction both are always set.
struct ParamGroup {
  std::vector<Tensor> params{};
  std::optional<double> lr{};
  std::optional<double> weight_decay{};
  /// The learning rate schedulers start from (set by the first scheduler, like torch).
  std::optional<double> initial_lr{};
};

/// A single group holding `params` with the optimizer's default options.
inline std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  std::vector<ParamGroup> g(1);
  g[0].params = std::move(params);
  return g;
}

/// Optimizer state as named tensors plus named scalars. Names: "state.<i>.<key>" for the
/// i-th parameter (counted over all groups in order), "param_groups.<g>.lr" etc.
struct StateDict {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<std::pair<std::string, double>> scalars;
  /// The tensor / scalar called `name`, or nullptr.
  const Tensor* tensor(const std::string& name) const;
  const double* scalar(const std::string& name) const;
};

/// Base of every optimizer: parameter groups, per-parameter state, save/load.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of every parameter that has a gradient in `grads`.
  virtual void step(const Gradients& grads) = 0;
  /// "SGD", "Adam", ...
  virtual std::string name() const = 0;

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// Adds a group (unset options take the defaults).
  void add_param_group(ParamGroup g);
  /// Learning rate of group g (what schedulers set).
  double lr(size_t g = 0) const { return *groups_.at(g).lr; }
  void set_lr(double lr, size_t g = 0) { groups_.at(g).lr = lr; }
  /// All parameters of all groups, in order.
  std::vector<Tensor> parameters() const;

  /// Copies of the state tensors and the scalars (steps, group options).
  virtual StateDict state_dict() const;
  /// Restores what state_dict() returned (the same parameters in the same order).
  virtual void load_state_dict(const StateDict& sd);

 protected:
  /// Per-parameter state: named tensors and scalars ("step").
  struct ParamState {
    std::map<std::string, Tensor> tensors;
    std::map<std::string, double> scalars;
  };
  Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay);
  /// Calls fn(group, param data (detached handle), gradient, state) for every parameter with a
  /// gradient, under NoGradGuard.
  void for_each(const Gradients& grads,
                const std::function<void(const ParamGroup&, Tensor&, const Tensor&, ParamState&)>& fn);

  std::vector<ParamGroup> groups_;
  std::vector<ParamState> state_;  // one per parameter, over all groups in order
  double default_lr_, default_wd_;
};

/// torch.optim.SGD options.
struct SGDConfig {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

/// Stochastic gradient descent with optional (Nesterov) momentum (torch.optim.SGD).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDConfig& c = {}) : SGD(one_group(std::move(params)), c) {}
  SGD(std::vector<ParamGroup> groups, const SGDConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "SGD"; }
  SGDConfig config;
};

/// torch.optim.Adam / AdamW options (AdamW's default weight_decay is 1e-2).
struct AdamConfig {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  /// AdamW: weight decay is applied to the parameter (p *= 1 - lr*wd), not added to the gradient.
  bool decoupled_weight_decay = false;
};

/// Adam (torch.optim.Adam); `decoupled_weight_decay` makes it AdamW.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamConfig& c = {}) : Adam(one_group(std::move(params)), c) {}
  Adam(std::vector<ParamGroup> groups, const AdamConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return config.decoupled_weight_decay ? "AdamW" : "Adam"; }
  AdamConfig config;
};

/// torch.optim.AdamW options.
struct AdamWConfig {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

/// AdamW (torch.optim.AdamW): Adam with decoupled weight decay.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWConfig& c = {}) : AdamW(one_group(std::move(params)), c) {}
  AdamW(std::vector<ParamGroup> groups, const AdamWConfig& c = {})
      : Adam(std::move(groups), AdamConfig{c.lr, c.betas, c.eps, c.weight_decay, c.amsgrad, c.maximize, true}) {}
};

/// torch.optim.Adagrad options.
struct AdagradConfig {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
};

/// Adagrad (torch.optim.Adagrad).
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradConfig& c = {}) : Adagrad(one_group(std::move(params)), c) {}
  Adagrad(std::vector<ParamGroup> groups, const AdagradConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "Adagrad"; }
  AdagradConfig config;
};

/// torch.optim.Adadelta options.
struct AdadeltaConfig {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;
  bool maximize = false;
};

/// Adadelta (torch.optim.Adadelta).
class Adadelta : public Optimizer {
 public:
  Adadelta(std::vector<Tensor> params, const AdadeltaConfig& c = {}) : Adadelta(one_group(std::move(params)), c) {}
  Adadelta(std::vector<ParamGroup> groups, const AdadeltaConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "Adadelta"; }
  AdadeltaConfig config;
};

/// torch.optim.RMSprop options.
struct RMSpropConfig {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
};

/// RMSprop (torch.optim.RMSprop), optionally centered and with momentum.
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropConfig& c = {}) : RMSprop(one_group(std::move(params)), c) {}
  RMSprop(std::vector<ParamGroup> groups, const RMSpropConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "RMSprop"; }
  RMSpropConfig config;
};

/// Adan options (the reference implementation, sail-sg/Adan; betas are (β1, β2, β3)).
struct AdanConfig {
  double lr = 1e-3;
  std::array<double, 3> betas = {0.98, 0.92, 0.99};
  double eps = 1e-8;
  double weight_decay = 0;
  /// false: proximal decay p /= 1 + lr*wd after the step; true: p *= 1 - lr*wd before it.
  bool no_prox = false;
};

/// Adan, adaptive Nesterov momentum (Xie et al. 2022), as sail-sg/Adan's single-tensor update:
/// m = β1 m + (1-β1) g; d = β2 d + (1-β2)(g - g_prev); n = β3 n + (1-β3)(g + β2 (g - g_prev))²;
/// p -= lr (m/bc1 + β2 d/bc2) / (sqrt(n)/sqrt(bc3) + eps). At the first step g_prev = g.
class Adan : public Optimizer {
 public:
  Adan(std::vector<Tensor> params, const AdanConfig& c = {}) : Adan(one_group(std::move(params)), c) {}
  Adan(std::vector<ParamGroup> groups, const AdanConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "Adan"; }
  AdanConfig config;
};

/// Lion options (Chen et al. 2023; lucidrains/lion-pytorch defaults).
struct LionConfig {
  double lr = 1e-4;
  std::array<double, 2> betas = {0.9, 0.99};
  double weight_decay = 0;
};

/// Lion: p *= 1 - lr*wd; p -= lr * sign(β1 m + (1-β1) g); m = β2 m + (1-β2) g.
class Lion : public Optimizer {
 public:
  Lion(std::vector<Tensor> params, const LionConfig& c = {}) : Lion(one_group(std::move(params)), c) {}
  Lion(std::vector<ParamGroup> groups, const LionConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "Lion"; }
  LionConfig config;
};

/// torch.optim.Muon options, plus those of the AdamW used for parameters that are not 2-d.
struct MuonConfig {
  double lr = 1e-3;
  double weight_decay = 0.1;
  double momentum = 0.95;
  bool nesterov = true;
  std::array<double, 3> ns_coefficients = {3.4445, -4.7750, 2.0315};
  double eps = 1e-7;
  int64_t ns_steps = 5;
  /// "original" (sqrt(max(1, rows/cols))), "match_rms_adamw" (0.2 sqrt(max(rows, cols))),
  /// "spectral_unclamped" (sqrt(rows/cols)).
  std::string adjust_lr_fn = "original";
  /// AdamW fallback for parameters that are not 2-d (biases, norms), with the group's lr / wd.
  std::array<double, 2> adam_betas = {0.9, 0.999};
  double adam_eps = 1e-8;
};

/// Muon (torch.optim.Muon / KellerJordan/Muon): momentum, then the update of every 2-d
/// parameter is orthogonalised by ns_steps quintic Newton–Schulz iterations (computed in the
/// parameter's dtype, not bfloat16). Parameters that are not 2-d get an AdamW update instead.
class Muon : public Optimizer {
 public:
  Muon(std::vector<Tensor> params, const MuonConfig& c = {}) : Muon(one_group(std::move(params)), c) {}
  Muon(std::vector<ParamGroup> groups, const MuonConfig& c = {});
  void step(const Gradients& grads) override;
  std::string name() const override { return "Muon"; }
  MuonConfig config;
};

/// Newton–Schulz orthogonalisation of a 2-d G (the "zeroth power" U Vᵀ, approximately).
Tensor zeropower_via_newtonschulz(const Tensor& G, std::array<double, 3> abc = {3.4445, -4.7750, 2.0315},
                                  int64_t steps = 5, double eps = 1e-7);

/// torch.optim.LBFGS options. line_search_fn: "" or "strong_wolfe".
struct LBFGSConfig {
  double lr = 1;
  int64_t max_iter = 20;
  int64_t max_eval = -1;  ///< default max_iter * 5 / 4
  double tolerance_grad = 1e-7;
  double tolerance_change = 1e-9;
  int64_t history_size = 100;
  std::string line_search_fn;
  bool maximize = false;
};

/// L-BFGS (torch.optim.LBFGS), one parameter group. step() takes a closure that recomputes the
/// loss and returns (loss, its Gradients); it is called several times per step. The search
/// directions and history are kept on the host in f64.
class LBFGS : public Optimizer {
 public:
  /// What the closure returns.
  using Closure = std::function<std::pair<Tensor, Gradients>()>;
  LBFGS(std::vector<Tensor> params, const LBFGSConfig& c = {});
  /// Runs up to max_iter iterations; returns the loss of the first closure call.
  Tensor step(const Closure& closure);
  /// Not usable: LBFGS needs a closure (throws).
  void step(const Gradients& grads) override;
  std::string name() const override { return "LBFGS"; }
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& sd) override;
  LBFGSConfig config;

 private:
  std::vector<double> flat_grad(const Gradients& g) const;
  void add_to_params(double t, const std::vector<double>& d);
  std::vector<double> d_, prev_flat_grad_;
  std::vector<std::vector<double>> old_dirs_, old_stps_;
  std::vector<double> ro_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  int64_t n_iter_ = 0, func_evals_ = 0;
};

// ---- gradient clipping and accumulation ---------------------------------------------------

/// Scales the gradients of `params` in `grads` so that their global p-norm (over all of them
/// together) is at most max_norm (torch.nn.utils.clip_grad_norm_: coefficient
/// max_norm / (norm + 1e-6), clamped to 1). norm_type may be INFINITY. Returns the norm before
/// clipping. error_if_nonfinite throws when it is NaN or infinite.
double clip_grad_norm_(Gradients& grads, const std::vector<Tensor>& params, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false);
/// Clamps every gradient of `params` to [-clip_value, clip_value] (torch.nn.utils.clip_grad_value_).
void clip_grad_value_(Gradients& grads, const std::vector<Tensor>& params, double clip_value);
/// Replaces p's gradient in `grads` by g (adds it when p had none). p must track gradients.
void set_grad(Gradients& grads, const Tensor& p, const Tensor& g);

/// Sums the gradients of `params` over several backward passes (gradient accumulation):
///
///   GradientsAccumulator acc(model.parameters());
///   for (auto& micro : batches) acc.add(loss_of(micro).backward());
///   opt.step(acc.gradients(1.0 / batches.size()));  acc.reset();
class GradientsAccumulator {
 public:
  explicit GradientsAccumulator(std::vector<Tensor> params) : params_(std::move(params)), sums_(params_.size()) {}
  /// Adds the gradients of the tracked parameters in g (others are ignored).
  void add(const Gradients& g);
  /// Adds them times `weight` (a micro-batch's items, to average by items).
  void add(const Gradients& g, double weight);
  /// Number of add() calls since construction / reset().
  int64_t count() const { return count_; }
  /// The sums (times `scale`) as Gradients for Optimizer::step.
  Gradients gradients(double scale = 1.0) const;
  void reset();

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> sums_;
  int64_t count_ = 0;
};

}  // namespace kiln::optim
