// SPDX-License-Identifier: MIT OR Apache-2.0
// Environment wrappers (gymnasium/wrappers/*.py semantics).
#include "kiln/rl/wrappers.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln::rl {

Wrapper::Wrapper(EnvPtr env) : env_(std::move(env)) {
  KILN_CHECK(env_ != nullptr, "rl::Wrapper", "wraps a null environment");
}

std::vector<float> Wrapper::do_reset(std::optional<uint64_t> seed) {
  std::vector<float> obs = env_->reset(seed);
  reset_info_ = env_->reset_info();
  return obs;
}

StepResult Wrapper::do_step(const std::vector<float>& action) { return env_->step(action); }

TimeLimit::TimeLimit(EnvPtr env, int64_t max_steps) : Wrapper(std::move(env)), max_(max_steps) {
  KILN_CHECK(max_steps > 0, "rl::TimeLimit", "max_steps must be > 0, got " << max_steps);
}

std::vector<float> TimeLimit::do_reset(std::optional<uint64_t> seed) {
  t_ = 0;
  return Wrapper::do_reset(seed);
}

StepResult TimeLimit::do_step(const std::vector<float>& action) {
  StepResult r = env_->step(action);
  if (++t_ >= max_) r.truncated = true;
  return r;
}

RunningMeanStd::RunningMeanStd(int64_t dim, double epsilon)
    : mean_(static_cast<size_t>(dim), 0.0), var_(static_cast<size_t>(dim), 1.0), count_(epsilon) {
  KILN_CHECK(dim >= 0, "rl::RunningMeanStd", "negative size " << dim);
}

void RunningMeanStd::update(const std::vector<double>& x) {
  KILN_CHECK(x.size() == mean_.size(), "rl::RunningMeanStd",
             "a sample of " << x.size() << " values, the statistics have " << mean_.size());
  // update_mean_var_count_from_moments with batch_count 1 and batch_var 0.
  const double tot = count_ + 1.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double delta = x[i] - mean_[i];
    mean_[i] = mean_[i] + delta / tot;
    var_[i] = (var_[i] * count_ + delta * delta * count_ / tot) / tot;
  }
  count_ = tot;
}

NormalizeObservation::NormalizeObservation(EnvPtr env, double epsilon)
    : Wrapper(std::move(env)), rms_(observation_space().dim()), eps_(epsilon) {
  KILN_CHECK(!observation_space().discrete(), "rl::NormalizeObservation", "needs a Box observation space");
}

std::vector<float> NormalizeObservation::normalize(const std::vector<float>& obs) {
  if (update) rms_.update(std::vector<double>(obs.begin(), obs.end()));
  std::vector<float> out(obs.size());
  for (size_t i = 0; i < obs.size(); ++i)
    out[i] = static_cast<float>((obs[i] - rms_.mean()[i]) / std::sqrt(rms_.var()[i] + eps_));
  return out;
}

std::vector<float> NormalizeObservation::do_reset(std::optional<uint64_t> seed) {
  return normalize(Wrapper::do_reset(seed));
}

StepResult NormalizeObservation::do_step(const std::vector<float>& action) {
  StepResult r = env_->step(action);
  r.observation = normalize(r.observation);
  return r;
}

NormalizeReward::NormalizeReward(EnvPtr env, double gamma, double epsilon)
    : Wrapper(std::move(env)), rms_(1), gamma_(gamma), eps_(epsilon) {
  KILN_CHECK(gamma >= 0 && gamma <= 1, "rl::NormalizeReward", "gamma " << gamma << " is not in [0, 1]");
  KILN_CHECK(epsilon > 0, "rl::NormalizeReward", "epsilon must be > 0, got " << epsilon);
}

StepResult NormalizeReward::do_step(const std::vector<float>& action) {
  StepResult r = env_->step(action);
  ret_ = ret_ * gamma_ * (r.terminated ? 0.0 : 1.0) + r.reward;
  if (update) rms_.update({ret_});
  r.info["raw_reward"] = r.reward;
  r.reward = r.reward / std::sqrt(rms_.var()[0] + eps_);
  return r;
}

ScaleReward::ScaleReward(EnvPtr env, double scale) : Wrapper(std::move(env)), scale_(scale) {}

StepResult ScaleReward::do_step(const std::vector<float>& action) {
  StepResult r = env_->step(action);
  r.info["raw_reward"] = r.reward;
  r.reward *= scale_;
  return r;
}

FrameStack::FrameStack(EnvPtr env, int64_t k) : Wrapper(std::move(env)), k_(k) {
  KILN_CHECK(k > 0, "rl::FrameStack", "k must be > 0, got " << k);
  const Space& o = env_->observation_space();
  KILN_CHECK(!o.discrete(), "rl::FrameStack", "needs a Box observation space");
  std::vector<float> lo, hi;
  for (int64_t i = 0; i < k; ++i) {
    lo.insert(lo.end(), o.low.begin(), o.low.end());
    hi.insert(hi.end(), o.high.begin(), o.high.end());
  }
  obs_ = Space::make_box(std::move(lo), std::move(hi));
}

std::vector<float> FrameStack::stacked() const {
  std::vector<float> out;
  for (const auto& f : frames_) out.insert(out.end(), f.begin(), f.end());
  return out;
}

std::vector<float> FrameStack::do_reset(std::optional<uint64_t> seed) {
  std::vector<float> obs = Wrapper::do_reset(seed);
  frames_.assign(static_cast<size_t>(k_), obs);
  return stacked();
}

StepResult FrameStack::do_step(const std::vector<float>& action) {
  StepResult r = env_->step(action);
  frames_.pop_front();
  frames_.push_back(r.observation);
  r.observation = stacked();
  return r;
}

}  // namespace kiln::rl
