// SPDX-License-Identifier: MIT OR Apache-2.0
// Learning-rate schedulers (kiln/optim/lr_scheduler.h): torch's closed forms.
#include "kiln/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>

#include "kiln/error.h"

namespace kiln::optim::lr_scheduler {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(&opt) {
  for (auto& g : opt.param_groups()) {
    if (!g.initial_lr) g.initial_lr = *g.lr;
    base_lrs_.push_back(*g.initial_lr);
  }
}

void LRScheduler::initial_step() {
  last_epoch_ = 0;
  apply();
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  auto& groups = opt_->param_groups();
  KILN_CHECK(groups.size() == base_lrs_.size(), "lr_scheduler",
             "lr_scheduler: the optimizer has " << groups.size() << " parameter groups, the scheduler was made for "
                                                << base_lrs_.size());
  last_lr_.clear();
  for (size_t i = 0; i < groups.size(); ++i) {
    double lr = lr_at(base_lrs_[i], last_epoch_);
    groups[i].lr = lr;
    last_lr_.push_back(lr);
  }
  on_apply();
}

namespace {

/// Reads a SchedulerState into a map, checking every name against `known` (a name, or a prefix
/// ending in '.' followed by a group index below n_groups) and that `required` names exist.
std::map<std::string, double> parse_state(const SchedulerState& state, const char* op,
                                          const std::vector<std::string>& scalars,
                                          const std::vector<std::string>& per_group, size_t n_groups) {
  std::map<std::string, double> m;
  for (auto& [k, v] : state) {
    bool ok = std::find(scalars.begin(), scalars.end(), k) != scalars.end();
    for (auto& pre : per_group) {
      if (ok || k.rfind(pre + ".", 0) != 0) continue;
      std::string idx = k.substr(pre.size() + 1);
      ok = !idx.empty() && idx.size() < 10 && idx.find_first_not_of("0123456789") == std::string::npos &&
           std::stoul(idx) < n_groups;
    }
    KILN_CHECK(ok, op,
               op << ".load_state_dict: unexpected entry '" << k << "' (the optimizer has " << n_groups
                  << " parameter groups)");
    m[k] = v;
  }
  for (auto& k : scalars) KILN_CHECK(m.count(k), op, op << ".load_state_dict: the entry '" << k << "' is missing");
  for (auto& pre : per_group)
    for (size_t g = 0; g < n_groups; ++g)
      KILN_CHECK(m.count(pre + "." + std::to_string(g)), op,
                 op << ".load_state_dict: the entry '" << pre << "." << g << "' is missing (the optimizer has "
                    << n_groups << " parameter groups)");
  return m;
}

}  // namespace

SchedulerState LRScheduler::state_dict() const {
  SchedulerState s;
  s.emplace_back("last_epoch", static_cast<double>(last_epoch_));
  for (size_t g = 0; g < base_lrs_.size(); ++g) s.emplace_back("base_lrs." + std::to_string(g), base_lrs_[g]);
  for (size_t g = 0; g < last_lr_.size(); ++g) s.emplace_back("last_lr." + std::to_string(g), last_lr_[g]);
  return s;
}

void LRScheduler::load_state_dict(const SchedulerState& state) {
  size_t n = opt_->param_groups().size();
  KILN_CHECK(n == base_lrs_.size(), "lr_scheduler",
             "lr_scheduler.load_state_dict: the optimizer has " << n << " parameter groups, the scheduler was made for "
                                                                << base_lrs_.size());
  auto m = parse_state(state, "lr_scheduler", {"last_epoch"}, {"base_lrs", "last_lr"}, n);
  last_epoch_ = static_cast<int64_t>(m["last_epoch"]);
  for (size_t g = 0; g < n; ++g) {
    base_lrs_[g] = m["base_lrs." + std::to_string(g)];
    last_lr_.resize(n);
    last_lr_[g] = m["last_lr." + std::to_string(g)];
  }
}

ConstantLR::ConstantLR(Optimizer& opt, double factor, int64_t total_iters)
    : LRScheduler(opt), factor(factor), total_iters(total_iters) {
  KILN_CHECK(factor >= 0 && factor <= 1, "ConstantLR", "ConstantLR: factor must be in [0, 1], got " << factor);
  KILN_CHECK(total_iters >= 0, "ConstantLR", "ConstantLR: total_iters must be >= 0, got " << total_iters);
  initial_step();
}
double ConstantLR::lr_at(double base, int64_t e) const { return e < total_iters ? base * factor : base; }

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size(step_size), gamma(gamma) {
  KILN_CHECK(step_size > 0, "StepLR", "StepLR: step_size must be positive, got " << step_size);
  initial_step();
}
double StepLR::lr_at(double base, int64_t e) const {
  return base * std::pow(gamma, static_cast<double>(e / step_size));
}

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(opt), milestones(std::move(milestones)), gamma(gamma) {
  std::sort(this->milestones.begin(), this->milestones.end());
  initial_step();
}
double MultiStepLR::lr_at(double base, int64_t e) const {
  auto n = std::upper_bound(milestones.begin(), milestones.end(), e) - milestones.begin();
  return base * std::pow(gamma, static_cast<double>(n));
}

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma) : LRScheduler(opt), gamma(gamma) { initial_step(); }
double ExponentialLR::lr_at(double base, int64_t e) const { return base * std::pow(gamma, static_cast<double>(e)); }

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt), start_factor(start_factor), end_factor(end_factor), total_iters(total_iters) {
  KILN_CHECK(
      start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1, "LinearLR",
      "LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got " << start_factor << ", " << end_factor);
  KILN_CHECK(total_iters > 0, "LinearLR", "LinearLR: total_iters must be positive, got " << total_iters);
  initial_step();
}
double LinearLR::lr_at(double base, int64_t e) const {
  return base * (start_factor + (end_factor - start_factor) * static_cast<double>(std::min(total_iters, e)) /
                                    static_cast<double>(total_iters));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt), T_max(T_max), eta_min(eta_min) {
  // torch divides by T_max at the first step (ZeroDivisionError); checked here at construction.
  KILN_CHECK(T_max > 0, "CosineAnnealingLR", "CosineAnnealingLR: T_max must be positive, got " << T_max);
  initial_step();
}
double CosineAnnealingLR::lr_at(double base, int64_t e) const {
  return eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * static_cast<double>(e) / T_max)) / 2;
}

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult, double eta_min)
    : LRScheduler(opt), T_0(T_0), T_mult(T_mult), eta_min(eta_min) {
  KILN_CHECK(T_0 > 0 && T_mult >= 1, "CosineAnnealingWarmRestarts",
             "CosineAnnealingWarmRestarts: T_0 must be positive and T_mult >= 1, got " << T_0 << ", " << T_mult);
  initial_step();
}
double CosineAnnealingWarmRestarts::lr_at(double base, int64_t e) const {
  int64_t T_i = T_0, T_cur = e;
  while (T_cur >= T_i) {
    T_cur -= T_i;
    T_i *= T_mult;
  }
  return eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * static_cast<double>(T_cur) / T_i)) / 2;
}

namespace {

/// Where an optimizer keeps the momentum OneCycleLR cycles (torch: 'momentum' or betas[0]).
double* momentum_slot(Optimizer& opt) {
  if (auto* o = dynamic_cast<SGD*>(&opt)) return &o->config.momentum;
  if (auto* o = dynamic_cast<RMSprop*>(&opt)) return &o->config.momentum;
  if (auto* o = dynamic_cast<Muon*>(&opt)) return &o->config.momentum;
  if (auto* o = dynamic_cast<Adam*>(&opt)) return &o->config.betas[0];  // and AdamW
  if (auto* o = dynamic_cast<Lion*>(&opt)) return &o->config.betas[0];
  if (auto* o = dynamic_cast<Adan*>(&opt)) return &o->config.betas[0];
  return nullptr;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& opt, const OneCycleConfig& c) : LRScheduler(opt), config(c) {
  KILN_CHECK(c.total_steps > 0 && c.max_lr > 0, "OneCycleLR",
             "OneCycleLR: max_lr and total_steps must be positive, got " << c.max_lr << ", " << c.total_steps);
  KILN_CHECK(c.pct_start >= 0 && c.pct_start <= 1, "OneCycleLR",
             "OneCycleLR: pct_start must be in [0, 1], got " << c.pct_start);
  KILN_CHECK(c.div_factor > 0 && c.final_div_factor > 0, "OneCycleLR",
             "OneCycleLR: div_factor and final_div_factor must be positive, got " << c.div_factor << ", "
                                                                                  << c.final_div_factor);
  KILN_CHECK(c.anneal_strategy == "cos" || c.anneal_strategy == "linear", "OneCycleLR",
             "OneCycleLR: anneal_strategy must be \"cos\" or \"linear\", got '" << c.anneal_strategy << "'");
  KILN_CHECK(
      !c.cycle_momentum || momentum_slot(opt) != nullptr, "OneCycleLR",
      "OneCycleLR: " << opt.name() << " has no momentum or beta1 to cycle; set cycle_momentum = false to use it");
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    base_lrs_[i] = c.max_lr / c.div_factor;
    opt.param_groups()[i].initial_lr = base_lrs_[i];
  }
  initial_step();
}

std::pair<double, double> OneCycleLR::at(int64_t step) const {
  const auto& c = config;
  KILN_CHECK(step <= c.total_steps, "OneCycleLR",
             "OneCycleLR: stepped " << step << " times, more than total_steps = " << c.total_steps);
  double initial = c.max_lr / c.div_factor, min_lr = initial / c.final_div_factor;
  double lo = c.base_momentum, hi = c.max_momentum;
  double T = static_cast<double>(c.total_steps);
  struct Phase {
    double end, start_lr, end_lr, start_m, end_m;
  };
  std::vector<Phase> phases;
  if (c.three_phase)
    phases = {{c.pct_start * T - 1, initial, c.max_lr, hi, lo},
              {2 * c.pct_start * T - 2, c.max_lr, initial, lo, hi},
              {T - 1, initial, min_lr, hi, hi}};
  else
    phases = {{c.pct_start * T - 1, initial, c.max_lr, hi, lo}, {T - 1, c.max_lr, min_lr, lo, hi}};
  auto anneal = [&](double start, double end, double pct) {
    if (c.anneal_strategy == "cos") return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
    return (end - start) * pct + start;
  };
  double start_step = 0, s = static_cast<double>(step);
  for (size_t i = 0; i < phases.size(); ++i) {
    const Phase& ph = phases[i];
    if (s <= ph.end || i + 1 == phases.size()) {
      double pct = (s - start_step) / (ph.end - start_step);
      return {anneal(ph.start_lr, ph.end_lr, pct), anneal(ph.start_m, ph.end_m, pct)};
    }
    start_step = ph.end;
  }
  return {min_lr, hi};
}

double OneCycleLR::lr_at(double, int64_t step) const { return at(step).first; }
double OneCycleLR::momentum_at(int64_t step) const { return at(step).second; }

void OneCycleLR::on_apply() {
  if (!config.cycle_momentum) return;
  if (double* m = momentum_slot(*opt_)) *m = momentum_at(last_epoch_);
}

void OneCycleLR::load_state_dict(const SchedulerState& state) {
  LRScheduler::load_state_dict(state);
  on_apply();  // the optimizers' state_dict does not hold their momentum / betas
}

PolynomialLR::PolynomialLR(Optimizer& opt, int64_t total_iters, double power)
    : LRScheduler(opt), total_iters(total_iters), power(power) {
  KILN_CHECK(total_iters > 0, "PolynomialLR", "PolynomialLR: total_iters must be positive, got " << total_iters);
  initial_step();
}
double PolynomialLR::lr_at(double base, int64_t e) const {
  return base * std::pow(1.0 - static_cast<double>(std::min(total_iters, e)) / total_iters, power);
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> f) : LRScheduler(opt), lr_lambda(std::move(f)) {
  KILN_CHECK(static_cast<bool>(lr_lambda), "LambdaLR", "LambdaLR: lr_lambda is empty");
  initial_step();
}
double LambdaLR::lr_at(double base, int64_t e) const { return base * lr_lambda(e); }

Noam::Noam(Optimizer& opt, int64_t d_model, int64_t warmup_steps, double factor)
    : LRScheduler(opt), d_model(d_model), warmup_steps(warmup_steps), factor(factor) {
  KILN_CHECK(d_model > 0 && warmup_steps > 0, "Noam",
             "Noam: d_model and warmup_steps must be positive, got " << d_model << ", " << warmup_steps);
  initial_step();
}
double Noam::lr_at(double base, int64_t e) const {
  double s = static_cast<double>(std::max<int64_t>(e, 1));
  return base * factor * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup_steps), -1.5));
}

LinearWarmup::LinearWarmup(Optimizer& opt, std::unique_ptr<LRScheduler> inner, int64_t warmup_steps,
                           double start_factor)
    : LRScheduler(opt), inner(std::move(inner)), warmup_steps(warmup_steps), start_factor(start_factor) {
  KILN_CHECK(this->inner != nullptr, "LinearWarmup", "LinearWarmup: the inner scheduler is null");
  KILN_CHECK(warmup_steps >= 0 && start_factor >= 0 && start_factor <= 1, "LinearWarmup",
             "LinearWarmup: warmup_steps must be >= 0 and start_factor in [0, 1], got " << warmup_steps << ", "
                                                                                        << start_factor);
  initial_step();
}
double LinearWarmup::lr_at(double base, int64_t e) const {
  if (e < warmup_steps)
    return base * (start_factor + (1 - start_factor) * static_cast<double>(e) / static_cast<double>(warmup_steps));
  return inner->lr_at(base, e - warmup_steps);
}

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> scheds, std::vector<int64_t> ms)
    : LRScheduler(opt), schedulers(std::move(scheds)), milestones(std::move(ms)) {
  const char* op = "SequentialLR";
  KILN_CHECK(!schedulers.empty() && milestones.size() + 1 == schedulers.size(), op,
             "SequentialLR expects one milestone fewer than schedulers, got " << schedulers.size() << " schedulers and "
                                                                              << milestones.size() << " milestones");
  for (size_t i = 0; i < schedulers.size(); ++i)
    KILN_CHECK(schedulers[i] != nullptr, op, "SequentialLR: scheduler " << i << " is null");
  for (size_t i = 0; i < milestones.size(); ++i)
    KILN_CHECK(milestones[i] > (i == 0 ? 0 : milestones[i - 1]), op,
               "SequentialLR: milestones must be positive and increasing, got " << milestones[i] << " at " << i);
  initial_step();
}
double SequentialLR::lr_at(double base, int64_t e) const {
  size_t i = 0;
  while (i < milestones.size() && e >= milestones[i]) ++i;
  return schedulers[i]->lr_at(base, e - (i == 0 ? 0 : milestones[i - 1]));
}

ChainedScheduler::ChainedScheduler(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> scheds)
    : LRScheduler(opt), schedulers(std::move(scheds)) {
  KILN_CHECK(!schedulers.empty(), "ChainedScheduler", "ChainedScheduler expects at least one scheduler");
  for (size_t i = 0; i < schedulers.size(); ++i)
    KILN_CHECK(schedulers[i] != nullptr, "ChainedScheduler", "ChainedScheduler: scheduler " << i << " is null");
  initial_step();
}
double ChainedScheduler::lr_at(double base, int64_t e) const {
  if (base == 0) return 0;
  double lr = base;
  for (const auto& s : schedulers) lr *= s->lr_at(base, e) / base;
  return lr;
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauConfig& c) : config(c), opt_(&opt) {
  KILN_CHECK(c.mode == "min" || c.mode == "max", "ReduceLROnPlateau",
             "ReduceLROnPlateau: mode must be \"min\" or \"max\", got '" << c.mode << "'");
  KILN_CHECK(c.threshold_mode == "rel" || c.threshold_mode == "abs", "ReduceLROnPlateau",
             "ReduceLROnPlateau: threshold_mode must be \"rel\" or \"abs\", got '" << c.threshold_mode << "'");
  KILN_CHECK(c.factor < 1, "ReduceLROnPlateau", "ReduceLROnPlateau: factor must be < 1, got " << c.factor);
  KILN_CHECK(c.patience >= 0 && c.cooldown >= 0, "ReduceLROnPlateau",
             "ReduceLROnPlateau: patience and cooldown must be >= 0, got " << c.patience << ", " << c.cooldown);
  KILN_CHECK(c.min_lr >= 0 && c.eps >= 0, "ReduceLROnPlateau",
             "ReduceLROnPlateau: min_lr and eps must be >= 0, got " << c.min_lr << ", " << c.eps);
  best_ = c.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  for (auto& g : opt.param_groups()) last_lr_.push_back(*g.lr);
}

SchedulerState ReduceLROnPlateau::state_dict() const {
  SchedulerState s{{"best", best_},
                   {"num_bad_epochs", static_cast<double>(num_bad_epochs_)},
                   {"cooldown_counter", static_cast<double>(cooldown_counter_)},
                   {"last_epoch", static_cast<double>(last_epoch_)}};
  for (size_t g = 0; g < last_lr_.size(); ++g) s.emplace_back("last_lr." + std::to_string(g), last_lr_[g]);
  return s;
}

void ReduceLROnPlateau::load_state_dict(const SchedulerState& state) {
  size_t n = opt_->param_groups().size();
  auto m = parse_state(state, "ReduceLROnPlateau", {"best", "num_bad_epochs", "cooldown_counter", "last_epoch"},
                       {"last_lr"}, n);
  best_ = m["best"];
  num_bad_epochs_ = static_cast<int64_t>(m["num_bad_epochs"]);
  cooldown_counter_ = static_cast<int64_t>(m["cooldown_counter"]);
  last_epoch_ = static_cast<int64_t>(m["last_epoch"]);
  last_lr_.assign(n, 0);
  for (size_t g = 0; g < n; ++g) last_lr_[g] = m["last_lr." + std::to_string(g)];
}

bool ReduceLROnPlateau::is_better(double a) const {
  const auto& c = config;
  if (c.mode == "min") return c.threshold_mode == "rel" ? a < best_ * (1 - c.threshold) : a < best_ - c.threshold;
  return c.threshold_mode == "rel" ? a > best_ * (c.threshold + 1) : a > best_ + c.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > config.patience) {
    for (auto& g : opt_->param_groups()) {
      double old_lr = *g.lr, new_lr = std::max(old_lr * config.factor, config.min_lr);
      if (old_lr - new_lr > config.eps) g.lr = new_lr;
    }
    cooldown_counter_ = config.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (auto& g : opt_->param_groups()) last_lr_.push_back(*g.lr);
}

}  // namespace kiln::optim::lr_scheduler
