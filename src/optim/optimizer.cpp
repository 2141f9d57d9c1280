// SPDX-License-Identifier: MIT OR Apache-2.0
// Optimizers other than LBFGS, clipping and gradient accumulation (kiln/optim/optimizer.h).
// Each update follows the single-tensor implementation of its torch.optim counterpart.
#include "kiln/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/ops.h"

namespace kiln::optim {

const Tensor* StateDict::tensor(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}
const double* StateDict::scalar(const std::string& name) const {
  for (auto& [n, v] : scalars)
    if (n == name) return &v;
  return nullptr;
}

// Note [Optimizer settings]: every optimizer checks its settings when constructed, as torch.optim
// raises ValueError: learning rates, weight decays, eps and momenta must be >= 0 (NaN fails),
// betas in [0, 1). The base constructor only fills the groups in; each subclass then checks
// every group and its config under its own name. add_param_group checks the new group.
namespace {

/// Throws "[op] invalid <what>: v (must be >= 0)" unless v >= 0.
void check_nonneg(const std::string& op, const char* what, double v) {
  KILN_CHECK(v >= 0, op, "invalid " << what << ": " << v << " (must be >= 0)");
}

/// Throws unless every beta is in [0, 1) (closed at 1 when `one_ok`).
template <size_t N>
void check_betas(const std::string& op, const std::array<double, N>& betas, const char* what = "beta",
                 bool one_ok = false) {
  for (size_t i = 0; i < N; ++i)
    KILN_CHECK(betas[i] >= 0 && (betas[i] < 1 || (one_ok && betas[i] == 1)), op,
               "invalid " << what << " parameter at index " << static_cast<long long>(i) << ": " << betas[i]
                          << " (must be in [0, 1" << (one_ok ? "]" : ")") << ")");
}

/// The learning rate and weight decay of one group.
void check_group(const std::string& op, const ParamGroup& g) {
  check_nonneg(op, "learning rate", *g.lr);
  check_nonneg(op, "weight_decay value", *g.weight_decay);
}

void check_groups(const std::string& op, const std::vector<ParamGroup>& gs) {
  for (const ParamGroup& g : gs) check_group(op, g);
}

/// Fills in the group's unset options and appends it with one empty state per parameter.
template <class State>
void append_group(std::vector<ParamGroup>& groups, std::vector<State>& state, ParamGroup g, double lr, double wd) {
  if (!g.lr) g.lr = lr;
  if (!g.weight_decay) g.weight_decay = wd;
  for (auto& p : g.params) KILN_CHECK(p.defined(), "optim", "a parameter given to the optimizer is undefined");
  state.resize(state.size() + g.params.size());
  groups.push_back(std::move(g));
}

}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay)
    : default_lr_(lr), default_wd_(weight_decay) {
  for (auto& g : groups) append_group(groups_, state_, std::move(g), lr, weight_decay);
}

void Optimizer::add_param_group(ParamGroup g) {
  if (!g.lr) g.lr = default_lr_;
  if (!g.weight_decay) g.weight_decay = default_wd_;
  check_group(name(), g);
  append_group(groups_, state_, std::move(g), default_lr_, default_wd_);
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> r;
  for (auto& g : groups_) r.insert(r.end(), g.params.begin(), g.params.end());
  return r;
}

void Optimizer::for_each(const Gradients& grads,
                         const std::function<void(const ParamGroup&, Tensor&, const Tensor&, ParamState&)>& fn) {
  NoGradGuard guard;
  size_t i = 0;
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      Tensor grad = p.grad(grads);
      ParamState& st = state_[i++];
      if (!grad.defined()) continue;
      KILN_CHECK(grad.shape() == p.shape(), name(), name() << ": gradient shape does not match the parameter's");
      Tensor data = p.detach();
      fn(g, data, grad.detach(), st);
    }
  }
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  for (size_t i = 0; i < state_.size(); ++i) {
    for (auto& [k, t] : state_[i].tensors) sd.tensors.emplace_back("state." + std::to_string(i) + "." + k, t.clone());
    for (auto& [k, v] : state_[i].scalars) sd.scalars.emplace_back("state." + std::to_string(i) + "." + k, v);
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::string pre = "param_groups." + std::to_string(g) + ".";
    sd.scalars.emplace_back(pre + "lr", *groups_[g].lr);
    sd.scalars.emplace_back(pre + "weight_decay", *groups_[g].weight_decay);
    if (groups_[g].initial_lr) sd.scalars.emplace_back(pre + "initial_lr", *groups_[g].initial_lr);
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  for (auto& s : state_) s = ParamState{};
  const std::string op = name();
  auto parse = [&](const std::string& entry, size_t& idx, std::string& key) {
    KILN_CHECK(entry.rfind("state.", 0) == 0, op, "load_state_dict: unexpected entry " << entry);
    size_t dot = entry.find('.', 6);
    KILN_CHECK(dot != std::string::npos, op, "load_state_dict: unexpected entry " << entry);
    idx = std::stoul(entry.substr(6, dot - 6));
    key = entry.substr(dot + 1);
    KILN_CHECK(
        idx < state_.size(), op,
        "load_state_dict: " << entry << " names parameter " << idx << " but the optimizer has " << state_.size());
  };
  for (auto& [n, t] : sd.tensors) {
    size_t i;
    std::string k;
    parse(n, i, k);
    state_[i].tensors[k] = t.clone();
  }
  for (auto& [n, v] : sd.scalars) {
    if (n.rfind("param_groups.", 0) == 0) {
      size_t dot = n.find('.', 13);
      size_t g = std::stoul(n.substr(13, dot - 13));
      std::string k = n.substr(dot + 1);
      KILN_CHECK(g < groups_.size(), op, "load_state_dict: " << n << " names a missing group");
      if (k == "lr") groups_[g].lr = v;
      if (k == "weight_decay") groups_[g].weight_decay = v;
      if (k == "initial_lr") groups_[g].initial_lr = v;
      continue;
    }
    size_t i;
    std::string k;
    parse(n, i, k);
    state_[i].scalars[k] = v;
  }
}

// ---- SGD ----------------------------------------------------------------------------------

SGD::SGD(std::vector<ParamGroup> groups, const SGDConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("SGD", groups_);
  check_nonneg("SGD", "momentum value", c.momentum);
  KILN_CHECK(!c.nesterov || (c.momentum > 0 && c.dampening == 0), "SGD",
             "SGD: nesterov momentum requires a momentum and zero dampening");
}

void SGD::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& grad, ParamState& st) {
    Tensor g = config.maximize ? -grad : grad;
    double wd = *grp.weight_decay, lr = *grp.lr;
    if (wd != 0) g = g + p * wd;
    if (config.momentum != 0) {
      auto it = st.tensors.find("momentum_buffer");
      Tensor buf;
      if (it == st.tensors.end()) {
        buf = g.clone();
      } else {
        buf = it->second * config.momentum + g * (1 - config.dampening);
      }
      st.tensors["momentum_buffer"] = buf;
      g = config.nesterov ? g + buf * config.momentum : buf;
    }
    p.sub_(g, lr);
  });
}

// ---- Adam / AdamW -------------------------------------------------------------------------

namespace {

// One Adam(W) update of p (torch's _single_tensor_adam).
void adam_update(Tensor& p, Tensor g, std::map<std::string, Tensor>& s, double& step, double lr, double wd, double b1,
                 double b2, double eps, bool amsgrad, bool decoupled) {
  if (!s.count("exp_avg")) {
    s["exp_avg"] = zeros_like(p);
    s["exp_avg_sq"] = zeros_like(p);
    if (amsgrad) s["max_exp_avg_sq"] = zeros_like(p);
  }
  step += 1;
  if (wd != 0) {
    if (decoupled)
      p.mul_(1 - lr * wd);
    else
      g = g + p * wd;
  }
  Tensor m = s["exp_avg"].lerp(g, 1 - b1);
  Tensor v = s["exp_avg_sq"] * b2 + g * g * (1 - b2);
  s["exp_avg"] = m;
  s["exp_avg_sq"] = v;
  double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2);
  Tensor denom;
  if (amsgrad) {
    Tensor mx = maximum(s["max_exp_avg_sq"], v);
    s["max_exp_avg_sq"] = mx;
    denom = mx.sqrt() / bc2_sqrt + eps;
  } else {
    denom = v.sqrt() / bc2_sqrt + eps;
  }
  p.sub_(m / denom, step_size);
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, const AdamConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  const std::string op = c.decoupled_weight_decay ? "AdamW" : "Adam";
  check_groups(op, groups_);
  check_nonneg(op, "epsilon value", c.eps);
  check_betas(op, c.betas);
}

void Adam::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& grad, ParamState& st) {
    adam_update(p, config.maximize ? -grad : grad, st.tensors, st.scalars["step"], *grp.lr, *grp.weight_decay,
                config.betas[0], config.betas[1], config.eps, config.amsgrad, config.decoupled_weight_decay);
  });
}

// ---- Adagrad ------------------------------------------------------------------------------

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("Adagrad", groups_);
  check_nonneg("Adagrad", "lr_decay value", c.lr_decay);
  check_nonneg("Adagrad", "initial_accumulator_value", c.initial_accumulator_value);
  check_nonneg("Adagrad", "epsilon value", c.eps);
}

void Adagrad::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& grad, ParamState& st) {
    if (!st.tensors.count("sum")) st.tensors["sum"] = full_like(p, config.initial_accumulator_value);
    double& step = st.scalars["step"];
    step += 1;
    Tensor g = config.maximize ? -grad : grad;
    if (*grp.weight_decay != 0) g = g + p * *grp.weight_decay;
    double clr = *grp.lr / (1 + (step - 1) * config.lr_decay);
    Tensor sum = st.tensors["sum"] + g * g;
    st.tensors["sum"] = sum;
    p.sub_(g / (sum.sqrt() + config.eps), clr);
  });
}

// ---- Adadelta -----------------------------------------------------------------------------

Adadelta::Adadelta(std::vector<ParamGroup> groups, const AdadeltaConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("Adadelta", groups_);
  KILN_CHECK(c.rho >= 0 && c.rho <= 1, "Adadelta", "invalid rho value: " << c.rho << " (must be in [0, 1])");
  check_nonneg("Adadelta", "epsilon value", c.eps);
}

void Adadelta::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& grad, ParamState& st) {
    if (!st.tensors.count("square_avg")) {
      st.tensors["square_avg"] = zeros_like(p);
      st.tensors["acc_delta"] = zeros_like(p);
    }
    st.scalars["step"] += 1;
    Tensor g = config.maximize ? -grad : grad;
    if (*grp.weight_decay != 0) g = g + p * *grp.weight_decay;
    double rho = config.rho, eps = config.eps;
    Tensor sq = st.tensors["square_avg"] * rho + g * g * (1 - rho);
    Tensor denom = (sq + eps).sqrt();
    Tensor delta = (st.tensors["acc_delta"] + eps).sqrt() / denom * g;
    st.tensors["square_avg"] = sq;
    st.tensors["acc_delta"] = st.tensors["acc_delta"] * rho + delta * delta * (1 - rho);
    p.sub_(delta, *grp.lr);
  });
}

// ---- RMSprop ------------------------------------------------------------------------------

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("RMSprop", groups_);
  check_nonneg("RMSprop", "epsilon value", c.eps);
  check_nonneg("RMSprop", "momentum value", c.momentum);
  check_nonneg("RMSprop", "alpha value", c.alpha);
}

void RMSprop::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& grad, ParamState& st) {
    auto& s = st.tensors;
    if (!s.count("square_avg")) {
      s["square_avg"] = zeros_like(p);
      if (config.momentum > 0) s["momentum_buffer"] = zeros_like(p);
      if (config.centered) s["grad_avg"] = zeros_like(p);
    }
    st.scalars["step"] += 1;
    Tensor g = config.maximize ? -grad : grad;
    if (*grp.weight_decay != 0) g = g + p * *grp.weight_decay;
    double a = config.alpha;
    Tensor sq = s["square_avg"] * a + g * g * (1 - a);
    s["square_avg"] = sq;
    Tensor avg;
    if (config.centered) {
      Tensor ga = s["grad_avg"].lerp(g, 1 - a);
      s["grad_avg"] = ga;
      avg = (sq - ga * ga).sqrt() + config.eps;
    } else {
      avg = sq.sqrt() + config.eps;
    }
    if (config.momentum > 0) {
      Tensor buf = s["momentum_buffer"] * config.momentum + g / avg;
      s["momentum_buffer"] = buf;
      p.sub_(buf, *grp.lr);
    } else {
      p.sub_(g / avg, *grp.lr);
    }
  });
}

// ---- Adan ---------------------------------------------------------------------------------

Adan::Adan(std::vector<ParamGroup> groups, const AdanConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("Adan", groups_);
  check_nonneg("Adan", "epsilon value", c.eps);
  check_betas("Adan", c.betas);
}

void Adan::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& g, ParamState& st) {
    auto& s = st.tensors;
    if (!s.count("exp_avg")) {
      s["exp_avg"] = zeros_like(p);
      s["exp_avg_diff"] = zeros_like(p);
      s["exp_avg_sq"] = zeros_like(p);
      s["pre_grad"] = g.clone();
    }
    double& step = st.scalars["step"];
    step += 1;
    auto [b1, b2, b3] = config.betas;
    double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step), bc3 = 1 - std::pow(b3, step);
    double lr = *grp.lr, wd = *grp.weight_decay;
    Tensor diff = g - s["pre_grad"];
    Tensor upd = g + diff * b2;
    s["exp_avg"] = s["exp_avg"] * b1 + g * (1 - b1);
    s["exp_avg_diff"] = s["exp_avg_diff"] * b2 + diff * (1 - b2);
    s["exp_avg_sq"] = s["exp_avg_sq"] * b3 + upd * upd * (1 - b3);
    Tensor denom = s["exp_avg_sq"].sqrt() / std::sqrt(bc3) + config.eps;
    Tensor u = (s["exp_avg"] / bc1 + s["exp_avg_diff"] * (b2 / bc2)) / denom;
    if (config.no_prox) {
      p.mul_(1 - lr * wd);
      p.sub_(u, lr);
    } else {
      p.sub_(u, lr);
      p.div_(1 + lr * wd);
    }
    s["pre_grad"] = g.clone();
  });
}

// ---- Lion ---------------------------------------------------------------------------------

Lion::Lion(std::vector<ParamGroup> groups, const LionConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("Lion", groups_);
  check_betas("Lion", c.betas, "beta", /*one_ok=*/true);  // lion-pytorch: 0 <= beta <= 1
}

void Lion::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& g, ParamState& st) {
    auto& s = st.tensors;
    if (!s.count("exp_avg")) s["exp_avg"] = zeros_like(p);
    double lr = *grp.lr, wd = *grp.weight_decay;
    auto [b1, b2] = config.betas;
    p.mul_(1 - lr * wd);
    Tensor update = (s["exp_avg"] * b1 + g * (1 - b1)).sign();
    p.sub_(update, lr);
    s["exp_avg"] = s["exp_avg"] * b2 + g * (1 - b2);
  });
}

// ---- Muon ---------------------------------------------------------------------------------

Tensor zeropower_via_newtonschulz(const Tensor& G, std::array<double, 3> abc, int64_t steps, double eps) {
  KILN_CHECK(G.dim() == 2, "Muon", "zeropower_via_newtonschulz expects a 2-d tensor, got " << G.shape());
  auto [a, b, c] = abc;
  bool tall = G.size(0) > G.size(1);
  Tensor X = tall ? G.t() : G;
  X = X / X.norm().clamp_min(eps);
  for (int64_t i = 0; i < steps; ++i) {
    Tensor A = mm(X, X.t());
    Tensor B = A * b + mm(A, A) * c;
    X = X * a + mm(B, X);
  }
  return tall ? X.t() : X;
}

Muon::Muon(std::vector<ParamGroup> groups, const MuonConfig& c)
    : Optimizer(std::move(groups), c.lr, c.weight_decay), config(c) {
  check_groups("Muon", groups_);
  check_nonneg("Muon", "momentum value", c.momentum);
  check_nonneg("Muon", "epsilon value", c.eps);
  check_nonneg("Muon", "adam_eps value", c.adam_eps);
  check_betas("Muon", c.adam_betas, "adam_betas");
  KILN_CHECK(c.ns_steps >= 0 && c.ns_steps < 100, "Muon",
             "invalid ns_steps: " << c.ns_steps << " (must be in [0, 100), as torch)");
  KILN_CHECK(c.adjust_lr_fn == "original" || c.adjust_lr_fn == "match_rms_adamw" ||
                 c.adjust_lr_fn == "spectral_unclamped" || c.adjust_lr_fn == "none",
             "Muon", "Muon: unknown adjust_lr_fn '" << c.adjust_lr_fn << "'");
}

void Muon::step(const Gradients& grads) {
  for_each(grads, [&](const ParamGroup& grp, Tensor& p, const Tensor& g, ParamState& st) {
    double lr = *grp.lr, wd = *grp.weight_decay;
    if (p.dim() != 2) {
      adam_update(p, g, st.tensors, st.scalars["step"], lr, wd, config.adam_betas[0], config.adam_betas[1],
                  config.adam_eps, false, true);
      return;
    }
    auto& s = st.tensors;
    if (!s.count("momentum_buffer")) s["momentum_buffer"] = zeros_like(g);
    Tensor buf = s["momentum_buffer"].lerp(g, 1 - config.momentum);
    s["momentum_buffer"] = buf;
    Tensor update = config.nesterov ? g.lerp(buf, config.momentum) : buf;
    update = zeropower_via_newtonschulz(update, config.ns_coefficients, config.ns_steps, config.eps);
    double A = static_cast<double>(p.size(0)), B = static_cast<double>(p.size(1)), ratio = 1;
    if (config.adjust_lr_fn == "original")
      ratio = std::sqrt(std::max(1.0, A / B));
    else if (config.adjust_lr_fn == "match_rms_adamw")
      ratio = 0.2 * std::sqrt(std::max(A, B));
    else if (config.adjust_lr_fn == "spectral_unclamped")
      ratio = std::sqrt(A / B);
    p.mul_(1 - lr * wd);
    p.sub_(update, lr * ratio);
  });
}

// ---- clipping and accumulation ------------------------------------------------------------

void set_grad(Gradients& grads, const Tensor& p, const Tensor& g) {
  KILN_CHECK(p.defined() && p.impl().autograd, "set_grad", "set_grad: the parameter does not track gradients");
  grads.remove(p);
  grads.accumulate(p.impl().autograd, g);
}

double clip_grad_norm_(Gradients& grads, const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard guard;
  std::vector<Tensor> gs;
  for (auto& p : params) {
    Tensor g = p.grad(grads);
    if (g.defined()) gs.push_back(g.detach());
  }
  if (gs.empty()) return 0.0;
  double total = 0;
  if (std::isinf(norm_type)) {
    for (auto& g : gs) total = std::max(total, g.abs().max().to(f64).item<double>());
  } else {
    for (auto& g : gs) total += std::pow(g.to(f64).norm(norm_type).item<double>(), norm_type);
    total = std::pow(total, 1.0 / norm_type);
  }
  KILN_CHECK(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm_",
             "clip_grad_norm_: the total norm of order " << norm_type << " is non-finite (" << total << ")");
  double coef = std::min(1.0, max_norm / (total + 1e-6));
  for (auto& p : params) {
    Tensor g = p.grad(grads);
    if (g.defined()) set_grad(grads, p, g.detach() * coef);
  }
  return total;
}

void clip_grad_value_(Gradients& grads, const std::vector<Tensor>& params, double clip_value) {
  NoGradGuard guard;
  for (auto& p : params) {
    Tensor g = p.grad(grads);
    if (g.defined()) set_grad(grads, p, g.detach().clamp(-clip_value, clip_value));
  }
}

void GradientsAccumulator::add(const Gradients& g) { add(g, 1.0); }

void GradientsAccumulator::add(const Gradients& g, double weight) {
  NoGradGuard guard;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor gi = params_[i].grad(g);
    if (!gi.defined()) continue;
    Tensor w = weight == 1.0 ? gi.detach() : gi.detach() * weight;
    sums_[i] = sums_[i].defined() ? sums_[i] + w : (weight == 1.0 ? w.clone() : w);
  }
  ++count_;
}

Gradients GradientsAccumulator::gradients(double scale) const {
  NoGradGuard guard;
  Gradients r;
  for (size_t i = 0; i < params_.size(); ++i)
    if (sums_[i].defined()) set_grad(r, params_[i], scale == 1.0 ? sums_[i] : sums_[i] * scale);
  return r;
}

void GradientsAccumulator::reset() {
  for (auto& s : sums_) s = Tensor();
  count_ = 0;
}

}  // namespace kiln::optim
