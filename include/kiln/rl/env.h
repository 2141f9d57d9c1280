// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Reinforcement-learning environments (Gymnasium's interface): reset with a seed, step an action,
// get the observation, the reward, whether the episode terminated (a terminal state) or was
// truncated (a time limit), and an info map.
//
//   auto env = kiln::rl::make("CartPole-v1");       // CartPole in a 500-step TimeLimit
//   std::vector<float> obs = env->reset(42);
//   kiln::rl::StepResult r = env->step(int64_t{1});  // push right
//   if (r.terminated || r.truncated) obs = env->reset();
//
// Observations and continuous actions are float vectors (Gymnasium's float32 arrays); a
// discrete action is an integer, or a one-element vector holding it.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rl {

/// A space of observations or actions: Discrete(n) (integers 0..n-1) or a Box (float vectors
/// between `low` and `high`, which may be ±infinity).
struct Space {
  int64_t n = 0;                 ///< Discrete: the number of values; 0 for a Box
  std::vector<float> low, high;  ///< Box: per-element bounds
  bool discrete() const { return n > 0; }
  /// Elements of one value: 1 for Discrete, low.size() for a Box.
  int64_t dim() const { return discrete() ? 1 : static_cast<int64_t>(low.size()); }
  static Space make_discrete(int64_t n);
  static Space make_box(std::vector<float> low, std::vector<float> high);
  /// A Box of `dim` elements, each in [lo, hi].
  static Space make_box(int64_t dim, float lo, float hi);
};

/// Extra values of a step or reset (Gymnasium's info dict, numbers only).
using Info = std::map<std::string, double>;

/// What step() returns.
struct StepResult {
  std::vector<float> observation;
  double reward = 0;
  bool terminated = false;  ///< reached a terminal state of the task (no bootstrapping past it)
  bool truncated = false;   ///< stopped from outside the task (a time limit): the state is not terminal
  Info info;
};

/// A small, fast generator for environments (xoshiro256** seeded through splitmix64). Not
/// Gymnasium's PCG64: a seed gives other initial states than Gymnasium's.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { seed_with(seed); }
  void seed_with(uint64_t seed);
  uint64_t next_u64();
  /// Uniform in [0, 1).
  double uniform();
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Standard normal (Box-Muller).
  double normal();
  /// Uniform integer in [0, n); n > 0.
  int64_t integer(int64_t n);

 private:
  uint64_t s_[4];
};

/// An environment. Subclasses implement do_reset and do_step; the public reset and step check
/// the arguments (a step before the first reset, a wrong action size or an action outside a
/// discrete space throw kiln::Error naming the environment).
class Env {
 public:
  virtual ~Env() = default;
  /// Starts an episode and returns its first observation. With a seed the environment's
  /// generator is reseeded (same seed, same episode); without one it continues (an environment
  /// never seeded starts from seed 0).
  std::vector<float> reset(std::optional<uint64_t> seed = std::nullopt);
  /// Applies an action: action_space().dim() floats (a discrete action as one integral float).
  StepResult step(const std::vector<float>& action);
  /// A discrete action.
  StepResult step(int64_t action);
  virtual const Space& observation_space() const = 0;
  virtual const Space& action_space() const = 0;
  /// "CartPole-v1", or a wrapper's name around its environment's ("TimeLimit<CartPole-v1>").
  virtual std::string name() const = 0;
  /// The innermost environment (itself unless a wrapper).
  virtual Env& unwrapped() { return *this; }
  /// The info of the last reset.
  const Info& reset_info() const { return reset_info_; }

 protected:
  virtual std::vector<float> do_reset(std::optional<uint64_t> seed) = 0;
  virtual StepResult do_step(const std::vector<float>& action) = 0;
  Info reset_info_;

 private:
  bool was_reset_ = false;
};

using EnvPtr = std::unique_ptr<Env>;

/// An environment by Gymnasium id, in Gymnasium's TimeLimit: "CartPole-v1" (500 steps),
/// "Acrobot-v1" (500), "MountainCar-v0" (200), "MountainCarContinuous-v0" (999), "Pendulum-v1"
/// (200), "GridWorld-v0" (FrozenLake's 4x4 map, not slippery, 100 steps). Unknown ids throw.
EnvPtr make(const std::string& id);
/// The ids make() knows.
std::vector<std::string> registered_envs();

}  // namespace kiln::rl
