// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// N copies of an environment stepped together, each reset automatically when its episode ends.
//
//   rl::VectorEnv envs([] { return rl::make("CartPole-v1"); }, 8);
//   std::vector<float> obs = envs.reset(0);           // [8 * 4], env i seeded 0 + i
//   rl::VectorStep s = envs.step(std::vector<int64_t>(8, 1));
//   Tensor x = kiln::tensor(s.observations, {8, 4});
//
// Auto-reset happens in the same step (Stable-Baselines3's convention): where an episode ended,
// `observations` holds the next episode's first observation and `final_observations` the last
// one of the episode that ended (for bootstrapping a truncated episode).
#include <functional>

#include "kiln/rl/env.h"

namespace kiln::rl {

/// What VectorEnv::step returns; vectors of num_envs entries (observations num_envs * dim).
struct VectorStep {
  std::vector<float> observations;  ///< after auto-reset
  std::vector<double> rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<float> final_observations;  ///< before auto-reset (equal to observations where nothing ended)
  std::vector<Info> infos;                ///< where an episode ended: "episode_return", "episode_length"
  /// Whether env i's episode ended in this step.
  bool done(size_t i) const { return terminated[i] || truncated[i]; }
};

/// A vector of environments made by one factory.
class VectorEnv {
 public:
  /// num_envs > 0 environments from `make`; they must share their spaces.
  VectorEnv(const std::function<EnvPtr()>& make, int64_t num_envs);
  /// Resets every environment (env i with seed + i when a seed is given); returns the
  /// observations, num_envs * obs_dim.
  std::vector<float> reset(std::optional<uint64_t> seed = std::nullopt);
  /// Steps every environment: num_envs * action_dim floats.
  VectorStep step(const std::vector<float>& actions);
  /// Discrete actions, one per environment.
  VectorStep step(const std::vector<int64_t>& actions);
  int64_t num_envs() const { return static_cast<int64_t>(envs_.size()); }
  int64_t obs_dim() const { return envs_[0]->observation_space().dim(); }
  const Space& observation_space() const { return envs_[0]->observation_space(); }
  const Space& action_space() const { return envs_[0]->action_space(); }
  Env& env(int64_t i);
  /// Returns and lengths of the episodes completed so far, in the order they ended.
  const std::vector<double>& episode_returns() const { return returns_; }
  const std::vector<int64_t>& episode_lengths() const { return lengths_; }

 private:
  std::vector<EnvPtr> envs_;
  std::vector<double> running_return_;
  std::vector<int64_t> running_length_;
  std::vector<double> returns_;
  std::vector<int64_t> lengths_;
  bool was_reset_ = false;
};

}  // namespace kiln::rl
