// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Environment wrappers with Gymnasium's semantics: TimeLimit, NormalizeObservation,
// NormalizeReward, ScaleReward and FrameStack. A wrapper owns the environment it wraps and is
// itself an Env, so wrappers nest:
//
//   rl::EnvPtr env = std::make_unique<rl::NormalizeObservation>(rl::make("Pendulum-v1"));
#include <deque>

#include "kiln/rl/env.h"

namespace kiln::rl {

/// Base of the wrappers: forwards everything to the wrapped environment.
class Wrapper : public Env {
 public:
  /// Throws kiln::Error when env is null.
  explicit Wrapper(EnvPtr env);
  const Space& observation_space() const override { return env_->observation_space(); }
  const Space& action_space() const override { return env_->action_space(); }
  Env& unwrapped() override { return env_->unwrapped(); }
  /// The wrapped environment.
  Env& inner() { return *env_; }

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;
  EnvPtr env_;
};

/// Truncates an episode after max_steps steps (truncated = true; terminated is left as is).
class TimeLimit : public Wrapper {
 public:
  TimeLimit(EnvPtr env, int64_t max_steps);
  std::string name() const override { return "TimeLimit<" + env_->name() + ">"; }
  int64_t max_steps() const { return max_; }
  /// Steps taken in the current episode.
  int64_t elapsed() const { return t_; }

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  int64_t max_, t_ = 0;
};

/// Running mean and variance of vectors (Gymnasium's RunningMeanStd: count starts at 1e-4,
/// mean 0, variance 1; parallel-update formula).
class RunningMeanStd {
 public:
  explicit RunningMeanStd(int64_t dim = 1, double epsilon = 1e-4);
  /// Adds one sample of dim values.
  void update(const std::vector<double>& x);
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& var() const { return var_; }
  double count() const { return count_; }

 private:
  std::vector<double> mean_, var_;
  double count_;
};

/// Observations normalised by running statistics: (obs - mean) / sqrt(var + epsilon), the
/// statistics updated with each observation first (Gymnasium's NormalizeObservation). Box
/// observations only.
class NormalizeObservation : public Wrapper {
 public:
  explicit NormalizeObservation(EnvPtr env, double epsilon = 1e-8);
  std::string name() const override { return "NormalizeObservation<" + env_->name() + ">"; }
  /// Whether new observations update the statistics (switch off for evaluation).
  bool update = true;
  const RunningMeanStd& stats() const { return rms_; }

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  std::vector<float> normalize(const std::vector<float>& obs);
  RunningMeanStd rms_;
  double eps_;
};

/// Rewards divided by the running standard deviation of a discounted return estimate,
/// r / sqrt(var + epsilon), with G = G * gamma * (1 - terminated) + r (Gymnasium's
/// NormalizeReward). The info keeps the raw reward under "raw_reward".
class NormalizeReward : public Wrapper {
 public:
  NormalizeReward(EnvPtr env, double gamma = 0.99, double epsilon = 1e-8);
  std::string name() const override { return "NormalizeReward<" + env_->name() + ">"; }
  bool update = true;
  const RunningMeanStd& stats() const { return rms_; }

 protected:
  StepResult do_step(const std::vector<float>& action) override;

 private:
  RunningMeanStd rms_;
  double gamma_, eps_, ret_ = 0;
};

/// Rewards multiplied by a constant (Gymnasium's TransformReward with r * scale). The info
/// keeps the raw reward under "raw_reward".
class ScaleReward : public Wrapper {
 public:
  ScaleReward(EnvPtr env, double scale);
  std::string name() const override { return "ScaleReward<" + env_->name() + ">"; }

 protected:
  StepResult do_step(const std::vector<float>& action) override;

 private:
  double scale_;
};

/// The last k observations, oldest first, concatenated (k * dim floats; Gymnasium's
/// FrameStackObservation with padding "reset": after a reset every frame is the reset
/// observation).
class FrameStack : public Wrapper {
 public:
  FrameStack(EnvPtr env, int64_t k);
  const Space& observation_space() const override { return obs_; }
  std::string name() const override { return "FrameStack<" + env_->name() + ">"; }

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  std::vector<float> stacked() const;
  int64_t k_;
  Space obs_;
  std::deque<std::vector<float>> frames_;
};

}  // namespace kiln::rl
