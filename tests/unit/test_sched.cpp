// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::optim::lr_scheduler against PyTorch: the learning rate over 30 steps of every schedule
// (tests/golden/optim_schedules.txt, written by scripts/gen_optim_golden.py).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/optim.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "test_util.h"

using namespace kiln;
namespace o = kiln::optim;
namespace s = kiln::optim::lr_scheduler;

namespace {

std::map<std::string, std::vector<double>> read_schedules() {
  std::ifstream in(std::string(KILN_GOLDEN_DIR) + "/optim_schedules.txt");
  std::map<std::string, std::vector<double>> r;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string name;
    ss >> name;
    double x;
    while (ss >> x) r[name].push_back(x);
  }
  return r;
}

std::unique_ptr<s::LRScheduler> make(const std::string& name, o::Optimizer& opt) {
  if (name == "constant") return std::make_unique<s::ConstantLR>(opt, 0.5, 4);
  if (name == "step") return std::make_unique<s::StepLR>(opt, 7, 0.5);
  if (name == "multistep") return std::make_unique<s::MultiStepLR>(opt, std::vector<int64_t>{5, 12, 20}, 0.3);
  if (name == "exponential") return std::make_unique<s::ExponentialLR>(opt, 0.9);
  if (name == "linear") return std::make_unique<s::LinearLR>(opt, 0.25, 1.0, 10);
  if (name == "cosine") return std::make_unique<s::CosineAnnealingLR>(opt, 10, 0.001);
  if (name == "warm_restarts") return std::make_unique<s::CosineAnnealingWarmRestarts>(opt, 5, 2, 0.01);
  if (name == "onecycle")
    return std::make_unique<s::OneCycleLR>(opt, s::OneCycleConfig{.max_lr = 1.0, .total_steps = 30});
  if (name == "onecycle_linear_3phase")
    return std::make_unique<s::OneCycleLR>(
        opt,
        s::OneCycleConfig{
            .max_lr = 0.5, .total_steps = 30, .pct_start = 0.25, .anneal_strategy = "linear", .three_phase = true});
  if (name == "polynomial") return std::make_unique<s::PolynomialLR>(opt, 20, 2.0);
  if (name == "noam") return std::make_unique<s::Noam>(opt, 16, 8, 2.0);
  if (name == "warmup_cosine")
    return std::make_unique<s::LinearWarmup>(opt, std::make_unique<s::CosineAnnealingLR>(opt, 20), 6, 0.1);
  if (name == "sequential_three") {
    std::vector<std::unique_ptr<s::LRScheduler>> v;
    v.push_back(std::make_unique<s::ConstantLR>(opt, 0.5, 3));
    v.push_back(std::make_unique<s::ExponentialLR>(opt, 0.9));
    v.push_back(std::make_unique<s::StepLR>(opt, 5, 0.5));
    return std::make_unique<s::SequentialLR>(opt, std::move(v), std::vector<int64_t>{4, 12});
  }
  if (name == "chained_constant_exponential" || name == "chained_linear_multistep") {
    std::vector<std::unique_ptr<s::LRScheduler>> v;
    if (name == "chained_constant_exponential") {
      v.push_back(std::make_unique<s::ConstantLR>(opt, 0.1, 3));
      v.push_back(std::make_unique<s::ExponentialLR>(opt, 0.9));
    } else {
      v.push_back(std::make_unique<s::LinearLR>(opt, 0.2, 1.0, 5));
      v.push_back(std::make_unique<s::MultiStepLR>(opt, std::vector<int64_t>{8, 20}, 0.5));
    }
    return std::make_unique<s::ChainedScheduler>(opt, std::move(v));
  }
  return nullptr;
}

}  // namespace

TEST(LRScheduler, CurvesMatchPyTorch) {
  auto golden = read_schedules();
  ASSERT_GE(golden.size(), 14u) << "run scripts/gen_optim_golden.py";
  int checked = 0;
  for (auto& [name, want] : golden) {
    if (name.rfind("plateau", 0) == 0) continue;
    Tensor p = zeros({1}, {.dtype = f64});
    o::SGD opt({p}, {.lr = 0.1});
    auto sched = make(name, opt);
    ASSERT_TRUE(sched) << name;
    ASSERT_EQ(want.size(), 31u) << name;
    for (size_t k = 0; k < want.size(); ++k) {
      if (k > 0) sched->step();
      EXPECT_NEAR(opt.lr(), want[k], 1e-12 * std::max(1.0, std::abs(want[k]))) << name << " epoch " << k;
      EXPECT_EQ(sched->get_last_lr()[0], opt.lr());
    }
    EXPECT_EQ(sched->last_epoch(), 30);
    ++checked;
  }
  EXPECT_EQ(checked, 15);
}

TEST(LRScheduler, ReduceLROnPlateauMatchesPyTorch) {
  auto golden = read_schedules();
  auto& metrics = golden["plateau_metrics"];
  auto& want = golden["plateau"];
  ASSERT_EQ(metrics.size(), 30u);
  ASSERT_EQ(want.size(), 31u);
  Tensor p = zeros({1}, {.dtype = f64});
  o::SGD opt({p}, {.lr = 0.1});
  s::ReduceLROnPlateau sched(opt, {.factor = 0.5, .patience = 2, .threshold = 0.01, .cooldown = 1});
  EXPECT_EQ(opt.lr(), want[0]);
  for (size_t k = 0; k < metrics.size(); ++k) {
    sched.step(metrics[k]);
    EXPECT_NEAR(opt.lr(), want[k + 1], 1e-15) << "step " << k;
  }
}

TEST(LRScheduler, SetsEveryGroupFromItsInitialLr) {
  Tensor a = zeros({1}), b = zeros({1});
  o::SGD opt(std::vector<o::ParamGroup>{{.params = {a}}, {.params = {b}, .lr = 1.0}}, {.lr = 0.1});
  s::StepLR sched(opt, 2, 0.5);
  sched.step();
  sched.step();
  EXPECT_DOUBLE_EQ(opt.lr(0), 0.05);
  EXPECT_DOUBLE_EQ(opt.lr(1), 0.5);
  EXPECT_EQ(*opt.param_groups()[1].initial_lr, 1.0);
}

TEST(LRScheduler, BadArgumentsThrow) {
  Tensor a = zeros({1});
  o::SGD opt({a}, {.lr = 0.1});
  EXPECT_THROW(s::StepLR(opt, 0), Error);
  EXPECT_THROW(s::OneCycleLR(opt, {.max_lr = 1.0, .total_steps = 3, .anneal_strategy = "exp"}), Error);
  s::OneCycleLR one(opt, {.max_lr = 1.0, .total_steps = 2});
  one.step();
  one.step();
  EXPECT_THROW(one.step(), Error);
  EXPECT_THROW(s::ReduceLROnPlateau(opt, {.mode = "up"}), Error);
  auto two = [&] {
    std::vector<std::unique_ptr<s::LRScheduler>> v;
    v.push_back(std::make_unique<s::ExponentialLR>(opt, 0.9));
    v.push_back(std::make_unique<s::StepLR>(opt, 2));
    return v;
  };
  EXPECT_ERROR(s::SequentialLR(opt, two(), {}), "one milestone fewer");
  EXPECT_ERROR(s::SequentialLR(opt, two(), {0}), "positive and increasing");
  EXPECT_ERROR(s::ChainedScheduler(opt, {}), "at least one");
}

TEST(LRScheduler, OneCycleMomentumMatchesPyTorch) {
  std::ifstream in(std::string(KILN_GOLDEN_DIR) + "/optim_momentum.txt");
  std::map<std::string, std::vector<double>> golden;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string name;
    ss >> name;
    double x;
    while (ss >> x) golden[name].push_back(x);
  }
  ASSERT_EQ(golden.size(), 3u) << "run scripts/gen_optim_golden.py optim_momentum.txt";
  auto check = [&](const std::string& name, o::Optimizer& opt, s::OneCycleLR& sched, const double& momentum) {
    auto& want = golden[name];
    ASSERT_EQ(want.size(), 31u) << name;
    for (size_t k = 0; k < want.size(); ++k) {
      if (k > 0) sched.step();
      EXPECT_NEAR(momentum, want[k], 1e-12) << name << " epoch " << k;
      EXPECT_EQ(sched.momentum_at(static_cast<int64_t>(k)), momentum);
    }
  };
  {
    Tensor p = zeros({1}, {.dtype = f64});
    o::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
    s::OneCycleLR sched(opt, {.max_lr = 1.0, .total_steps = 30});
    check("onecycle_sgd", opt, sched, opt.config.momentum);
  }
  {
    Tensor p = zeros({1}, {.dtype = f64});
    o::Adam opt({p}, {.lr = 0.1});
    s::OneCycleLR sched(opt, {.max_lr = 0.5,
                              .total_steps = 30,
                              .pct_start = 0.25,
                              .anneal_strategy = "linear",
                              .three_phase = true,
                              .base_momentum = 0.8,
                              .max_momentum = 0.9});
    check("onecycle_adam_linear_3phase", opt, sched, opt.config.betas[0]);
    EXPECT_EQ(opt.config.betas[1], 0.999);
  }
  {
    Tensor p = zeros({1}, {.dtype = f64});
    o::AdamW opt({p}, {.lr = 0.1});
    s::OneCycleLR sched(
        opt, {.max_lr = 0.5, .total_steps = 30, .pct_start = 0.4, .base_momentum = 0.7, .max_momentum = 0.99});
    check("onecycle_adamw_cos", opt, sched, opt.config.betas[0]);
  }
}

TEST(LRScheduler, OneCycleMomentumNeedsAnOptimizerWithMomentum) {
  Tensor p = zeros({1});
  o::Adagrad opt({p});
  EXPECT_THROW(s::OneCycleLR(opt, {.max_lr = 1.0, .total_steps = 10}), Error);
  s::OneCycleLR sched(opt, {.max_lr = 1.0, .total_steps = 10, .cycle_momentum = false});
  sched.step();
  EXPECT_EQ(sched.last_epoch(), 1);
}

TEST(LRScheduler, StateDictRoundTripContinuesTheCurve) {
  // Every scheduler: run 7 epochs, save, build a fresh one on a fresh optimizer, load, and
  // compare the next epochs with the uninterrupted one.
  for (const char* name : {"step", "cosine", "warm_restarts", "onecycle", "warmup_cosine", "noam"}) {
    Tensor p = zeros({1}, {.dtype = f64}), q = zeros({1}, {.dtype = f64});
    o::SGD opt_a({p}, {.lr = 0.1, .momentum = 0.9}), opt_b({q}, {.lr = 0.1, .momentum = 0.9});
    auto a = make(name, opt_a);
    for (int k = 0; k < 7; ++k) a->step();
    s::SchedulerState st = a->state_dict();
    EXPECT_EQ(st[0].first, "last_epoch");
    EXPECT_EQ(st[0].second, 7);
    auto b = make(name, opt_b);
    b->load_state_dict(st);
    opt_b.set_lr(opt_a.lr());  // the lr itself belongs to the optimizer's state
    EXPECT_EQ(b->last_epoch(), 7) << name;
    EXPECT_EQ(b->get_last_lr(), a->get_last_lr()) << name;
    EXPECT_EQ(opt_b.config.momentum, opt_a.config.momentum) << name;
    for (int k = 0; k < 10; ++k) {
      a->step();
      b->step();
      EXPECT_EQ(opt_b.lr(), opt_a.lr()) << name << " epoch " << 8 + k;
      EXPECT_EQ(opt_b.config.momentum, opt_a.config.momentum) << name;
    }
  }
}

TEST(LRScheduler, LoadStateDictRejectsBadStateAndChangesNothing) {
  Tensor p = zeros({1});
  o::SGD opt({p}, {.lr = 0.1});
  s::StepLR sched(opt, 3, 0.5);
  sched.step();
  auto good = sched.state_dict();
  auto before = sched.state_dict();
  auto extra = good;
  extra.emplace_back("gamma", 2.0);
  EXPECT_THROW(sched.load_state_dict(extra), Error);
  auto missing = good;
  missing.erase(missing.begin());  // last_epoch
  EXPECT_THROW(sched.load_state_dict(missing), Error);
  auto other_group = good;
  other_group.emplace_back("base_lrs.1", 0.1);
  EXPECT_THROW(sched.load_state_dict(other_group), Error);
  EXPECT_EQ(sched.state_dict(), before);

  s::ReduceLROnPlateau plateau(opt);
  EXPECT_THROW(plateau.load_state_dict(good), Error);  // a StepLR's state
  EXPECT_EQ(plateau.last_epoch(), 0);
}

TEST(LRScheduler, ReduceLROnPlateauStateRoundTrip) {
  auto golden = read_schedules();
  auto& metrics = golden["plateau_metrics"];
  ASSERT_EQ(metrics.size(), 30u);
  s::ReduceLROnPlateauConfig c{.factor = 0.5, .patience = 2, .threshold = 0.01, .cooldown = 1};
  Tensor p = zeros({1}, {.dtype = f64}), q = zeros({1}, {.dtype = f64});
  o::SGD opt_a({p}, {.lr = 0.1}), opt_b({q}, {.lr = 0.1});
  s::ReduceLROnPlateau a(opt_a, c);
  // Stop in the middle of a plateau (bad epochs and cooldown in flight) and resume.
  for (size_t k = 0; k < 13; ++k) a.step(metrics[k]);
  s::ReduceLROnPlateau b(opt_b, c);
  b.load_state_dict(a.state_dict());
  opt_b.set_lr(opt_a.lr());
  EXPECT_EQ(b.best(), a.best());
  EXPECT_EQ(b.num_bad_epochs(), a.num_bad_epochs());
  EXPECT_EQ(b.cooldown_counter(), a.cooldown_counter());
  EXPECT_EQ(b.last_epoch(), 13);
  for (size_t k = 13; k < metrics.size(); ++k) {
    a.step(metrics[k]);
    b.step(metrics[k]);
    EXPECT_EQ(opt_b.lr(), opt_a.lr()) << "step " << k;
  }
  EXPECT_LT(opt_a.lr(), 0.1);
}
