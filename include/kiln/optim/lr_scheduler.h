// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Learning-rate schedulers (torch.optim.lr_scheduler). Each sets the learning rate of every
// parameter group of its optimizer when constructed (epoch 0) and on each step():
//
//   optim::SGD opt(model.parameters(), {.lr = 0.1});
//   optim::lr_scheduler::CosineAnnealingLR sched(opt, /*T_max=*/100);
//   for (...) { opt.step(grads); sched.step(); }
//
// The base learning rate of a group is its `initial_lr` (set to its lr by the first scheduler
// created on it, like torch). Values follow torch's closed forms.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim::lr_scheduler {

/// A scheduler's state as named numbers ("last_epoch", "base_lrs.0", ...), what checkpoints save.
using SchedulerState = std::vector<std::pair<std::string, double>>;

/// Base of the epoch-driven schedulers: lr of a group = lr_at(its base lr, epoch).
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  /// Advances one epoch and sets the groups' learning rates.
  void step();
  /// The epoch reached (0 after construction).
  int64_t last_epoch() const { return last_epoch_; }
  /// The learning rates set last, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// The learning rate at `epoch` of a group whose base learning rate is base_lr.
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;
  /// The state that changes while training: "last_epoch", "base_lrs.<g>", "last_lr.<g>" (the
  /// schedules are closed forms of the epoch, so this is all torch's state_dict holds too).
  virtual SchedulerState state_dict() const;
  /// Restores what state_dict() returned. Throws kiln::Error, changing nothing, when an entry
  /// is unknown or missing or the number of parameter groups differs. The optimizer's learning
  /// rates are not touched (they are part of the optimizer's state), like torch.
  virtual void load_state_dict(const SchedulerState& state);

 protected:
  explicit LRScheduler(Optimizer& opt);
  /// Sets epoch 0's learning rates (called at the end of each subclass constructor).
  void initial_step();
  void apply();
  /// Called at the end of apply() with the new epoch (OneCycleLR sets the momentum here).
  virtual void on_apply() {}
  Optimizer* opt_;
  std::vector<double> base_lrs_, last_lr_;
  int64_t last_epoch_ = -1;
};

/// lr = base · factor for epoch < total_iters, then base (torch's ConstantLR).
class ConstantLR : public LRScheduler {
 public:
  explicit ConstantLR(Optimizer& opt, double factor = 1.0 / 3, int64_t total_iters = 5);
  double lr_at(double base_lr, int64_t epoch) const override;
  double factor;
  int64_t total_iters;
};

/// lr = base · gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  double lr_at(double base_lr, int64_t epoch) const override;
  int64_t step_size;
  double gamma;
};

/// lr = base · gamma^(number of milestones <= epoch).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(double base_lr, int64_t epoch) const override;
  std::vector<int64_t> milestones;
  double gamma;
};

/// lr = base · gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);
  double lr_at(double base_lr, int64_t epoch) const override;
  double gamma;
};

/// lr = base · (start + (end - start) · min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  double lr_at(double base_lr, int64_t epoch) const override;
  double start_factor, end_factor;
  int64_t total_iters;
};

/// lr = eta_min + (base - eta_min)(1 + cos(π epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0);
  double lr_at(double base_lr, int64_t epoch) const override;
  int64_t T_max;
  double eta_min;
};

/// SGDR: cosine annealing restarted every T_i epochs, T_0 first and T_i *= T_mult after each.
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult = 1, double eta_min = 0);
  double lr_at(double base_lr, int64_t epoch) const override;
  int64_t T_0, T_mult;
  double eta_min;
};

/// Options of OneCycleLR (torch's names and defaults).
struct OneCycleConfig {
  double max_lr = 0;
  int64_t total_steps = 0;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  ///< "cos" or "linear"
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
  /// Cycle the momentum inversely to the learning rate between max_momentum and
  /// base_momentum: SGD's, RMSprop's and Muon's `momentum`, or beta1 of Adam, AdamW, Lion and
  /// Adan (torch: 'momentum' or 'betas'). Other optimizers throw unless this is false.
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
};

/// The 1cycle policy: from max_lr/div_factor up to max_lr, then down to
/// max_lr/(div_factor·final_div_factor) over total_steps steps. The base lr is ignored. With
/// cycle_momentum the momentum goes from max_momentum down to base_momentum while the lr rises
/// and back up while it falls (three_phase: down, up, then constant), as torch.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, const OneCycleConfig& c);
  double lr_at(double base_lr, int64_t epoch) const override;
  /// The momentum (or beta1) at `epoch`.
  double momentum_at(int64_t epoch) const;
  void load_state_dict(const SchedulerState& state) override;
  OneCycleConfig config;

 protected:
  void on_apply() override;

 private:
  /// (lr, momentum) at `step`.
  std::pair<double, double> at(int64_t step) const;
};

/// lr = base · (1 - min(epoch, total_iters) / total_iters)^power.
class PolynomialLR : public LRScheduler {
 public:
  explicit PolynomialLR(Optimizer& opt, int64_t total_iters = 5, double power = 1.0);
  double lr_at(double base_lr, int64_t epoch) const override;
  int64_t total_iters;
  double power;
};

/// lr = base · lr_lambda(epoch) (torch's LambdaLR).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(int64_t)> lr_lambda);
  double lr_at(double base_lr, int64_t epoch) const override;
  std::function<double(int64_t)> lr_lambda;
};

/// The Transformer schedule ("Attention is all you need", as in the Annotated Transformer):
/// lr = base · factor · d_model^-0.5 · min(s^-0.5, s · warmup^-1.5) with s = max(epoch, 1).
class Noam : public LRScheduler {
 public:
  Noam(Optimizer& opt, int64_t d_model, int64_t warmup_steps, double factor = 1.0);
  double lr_at(double base_lr, int64_t epoch) const override;
  int64_t d_model, warmup_steps;
  double factor;
};

/// Linear warm-up in front of another schedule: for epoch < warmup_steps,
/// lr = base · (start_factor + (1 - start_factor) · epoch / warmup_steps); afterwards the inner
/// schedule's lr at epoch - warmup_steps. Same values as torch's
/// SequentialLR([LinearLR(start_factor, 1, warmup_steps), inner], milestones=[warmup_steps]).
class LinearWarmup : public LRScheduler {
 public:
  LinearWarmup(Optimizer& opt, std::unique_ptr<LRScheduler> inner, int64_t warmup_steps, double start_factor = 0);
  double lr_at(double base_lr, int64_t epoch) const override;
  std::unique_ptr<LRScheduler> inner;
  int64_t warmup_steps;
  double start_factor;
};

/// Several schedules one after another (torch's SequentialLR): schedulers[i] runs from
/// milestones[i - 1] (0 for the first) with its own epoch count restarted there, so
/// lr(epoch) = schedulers[i].lr_at(base, epoch - milestones[i - 1]). Needs one milestone fewer
/// than schedulers, increasing and positive; the schedulers are built on the same optimizer.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers, std::vector<int64_t> milestones);
  double lr_at(double base_lr, int64_t epoch) const override;
  std::vector<std::unique_ptr<LRScheduler>> schedulers;
  std::vector<int64_t> milestones;
};

/// Several schedules at once (torch's ChainedScheduler): the product of their factors,
/// lr(epoch) = base · prod_i(schedulers[i].lr_at(base, epoch) / base). This is torch's result
/// for multiplicative schedules (ConstantLR, StepLR, MultiStepLR, ExponentialLR, LinearLR,
/// PolynomialLR, LambdaLR, cosine annealing with eta_min 0 up to T_max); torch's recursive
/// update differs from it past a cosine schedule's first T_max.
class ChainedScheduler : public LRScheduler {
 public:
  ChainedScheduler(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers);
  double lr_at(double base_lr, int64_t epoch) const override;
  std::vector<std::unique_ptr<LRScheduler>> schedulers;
};

/// Options of ReduceLROnPlateau (torch's names and defaults).
struct ReduceLROnPlateauConfig {
  std::string mode = "min";  ///< "min" or "max"
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";  ///< "rel" or "abs"
  int64_t cooldown = 0;
  double min_lr = 0;
  double eps = 1e-8;
};

/// Multiplies the learning rates by `factor` when the metric passed to step() has not improved
/// for more than `patience` steps.
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauConfig& c = {});
  /// Records one value of the monitored metric (a validation loss).
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  double best() const { return best_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t last_epoch() const { return last_epoch_; }
  /// "best", "num_bad_epochs", "cooldown_counter", "last_epoch", "last_lr.<g>".
  SchedulerState state_dict() const;
  /// Restores what state_dict() returned (throws, changing nothing, on unknown or missing
  /// entries or another number of parameter groups). The optimizer is not touched.
  void load_state_dict(const SchedulerState& state);
  ReduceLROnPlateauConfig config;

 private:
  bool is_better(double a) const;
  Optimizer* opt_;
  std::vector<double> last_lr_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

}  // namespace kiln::optim::lr_scheduler
