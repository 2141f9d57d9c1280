// SPDX-License-Identifier: MIT OR Apache-2.0
// Experience storage: a sum tree, uniform and prioritised replay buffers (off-policy agents such
// as DQN), and a rollout buffer with generalised advantage estimation (on-policy agents such as
// PPO). Transitions are kept on the host; batches come back as tensors on a chosen device.
#pragma once
#include <utility>

#include "kiln/rl/env.h"
#include "kiln/tensor.h"

namespace kiln::rl {

/// A binary tree of sums over `capacity` non-negative priorities: set and prefix search in
/// O(log n) (the data structure of prioritised experience replay).
class SumTree {
 public:
  explicit SumTree(int64_t capacity);
  int64_t capacity() const { return cap_; }
  /// Sets priority i (0 <= i < capacity); priorities are finite and >= 0.
  void set(int64_t i, double priority);
  double get(int64_t i) const;
  /// The sum of all priorities.
  double total() const { return tree_[1]; }
  /// The index i whose cumulative range [sum(p[0..i-1]), sum(p[0..i])) holds `mass`, for mass
  /// in [0, total()); masses outside are clamped, and the result always has a priority > 0.
  /// Throws when every priority is 0.
  int64_t find(double mass) const;

 private:
  int64_t cap_, leaves_;
  std::vector<double> tree_;  // 1-based heap; leaves at [leaves_, 2 * leaves_)
};

/// A batch of transitions. obs / next_obs [B, obs_dim] f32; actions [B] i64 for discrete
/// actions, else [B, action_dim] f32; rewards and dones [B] f32 (dones: 1 where the next state
/// is terminal); weights [B] f32 importance weights (ones for the uniform buffer).
struct ReplayBatch {
  Tensor obs, actions, rewards, next_obs, dones, weights;
  std::vector<int64_t> indices;  ///< where the transitions are stored (for update_priorities)
};

/// Options of the replay buffers.
struct ReplayBufferConfig {
  int64_t capacity = 100000;
  int64_t obs_dim = 1;
  int64_t action_dim = 1;
  bool discrete = true;  ///< actions are integers (action_dim must be 1)
};

/// A ring buffer of transitions sampled uniformly with replacement.
class ReplayBuffer {
 public:
  explicit ReplayBuffer(const ReplayBufferConfig& c);
  virtual ~ReplayBuffer() = default;
  /// Stores one transition (overwriting the oldest when full). `done` means next_obs is terminal
  /// (a truncated episode is not done). Returns the slot it was stored in.
  int64_t add(const std::vector<float>& obs, const std::vector<float>& action, double reward,
              const std::vector<float>& next_obs, bool done);
  /// A discrete action.
  int64_t add(const std::vector<float>& obs, int64_t action, double reward, const std::vector<float>& next_obs,
              bool done);
  int64_t size() const { return size_; }
  int64_t capacity() const { return c_.capacity; }
  /// batch_size transitions drawn uniformly (with replacement); throws when empty.
  virtual ReplayBatch sample(int64_t batch_size, Rng& rng, const Device& device = Device::cpu());

 protected:
  /// Called after a transition was stored in `slot`.
  virtual void on_added(int64_t /*slot*/) {}
  /// The tensors of the transitions at `idx`.
  ReplayBatch gather(const std::vector<int64_t>& idx, const Device& device) const;
  ReplayBufferConfig c_;
  std::vector<float> obs_, next_obs_, actions_, rewards_, dones_;
  int64_t size_ = 0, next_ = 0;
};

/// Proportional prioritised replay (Schaul et al. 2016): transition i is drawn with
/// probability p_i^alpha / sum_j p_j^alpha (stratified: one draw per equal slice of the total),
/// weighted by (N P(i))^-beta divided by the largest weight of the batch. New transitions get
/// the largest priority seen so far.
class PrioritizedReplayBuffer : public ReplayBuffer {
 public:
  PrioritizedReplayBuffer(const ReplayBufferConfig& c, double alpha = 0.6, double eps = 1e-6);
  /// Importance-sampling exponent used by sample() (anneal it to 1 over training).
  double beta = 0.4;
  ReplayBatch sample(int64_t batch_size, Rng& rng, const Device& device = Device::cpu()) override;
  /// Sets the priorities of sampled transitions from their TD errors: (|td| + eps)^alpha.
  void update_priorities(const std::vector<int64_t>& indices, const std::vector<double>& td_errors);
  const SumTree& tree() const { return tree_; }

 private:
  void on_added(int64_t slot) override;
  SumTree tree_;
  double alpha_, eps_, max_priority_ = 1.0;
};

/// Advantages and returns, [T * N] in step-major order (index t * N + n).
struct GaeResult {
  std::vector<double> advantages, returns;
};

/// Generalised advantage estimation over T steps of N environments (arrays [T * N], index
/// t * N + n). dones[t] = 1 when env n's episode ended after step t (its next value is not
/// used); last_values [N] are the values of the observations after the last step.
///   delta_t = r_t + gamma V_{t+1} (1 - d_t) - V_t,  A_t = delta_t + gamma lambda (1 - d_t) A_{t+1}
/// and returns = advantages + values.
GaeResult gae(const std::vector<double>& rewards, const std::vector<double>& values, const std::vector<double>& dones,
              const std::vector<double>& last_values, int64_t num_steps, int64_t num_envs, double gamma, double lambda);

/// Storage of one on-policy rollout: num_steps steps of num_envs environments.
class RolloutBuffer {
 public:
  RolloutBuffer(int64_t num_steps, int64_t num_envs, int64_t obs_dim, int64_t action_dim = 1);
  /// Adds one step of every environment: obs [N * obs_dim], actions [N * action_dim], and N
  /// log-probabilities, rewards, values and done flags (the episode ended after this step).
  void add(const std::vector<float>& obs, const std::vector<float>& actions, const std::vector<double>& log_probs,
           const std::vector<double>& rewards, const std::vector<double>& values, const std::vector<uint8_t>& dones);
  bool full() const { return t_ == T_; }
  int64_t steps() const { return t_; }
  /// Fills advantages() and returns() with gae(); needs a full buffer.
  void compute_returns_and_advantages(const std::vector<double>& last_values, double gamma, double lambda);
  /// Starts a new rollout.
  void clear() { t_ = 0; }
  /// Flat tensors over the T * N samples: observations [T*N, obs_dim] f32, actions [T*N,
  /// action_dim] f32, log_probs / values / advantages / returns [T*N] f32.
  Tensor observations(const Device& d = Device::cpu()) const;
  Tensor actions(const Device& d = Device::cpu()) const;
  Tensor log_probs(const Device& d = Device::cpu()) const;
  Tensor values(const Device& d = Device::cpu()) const;
  Tensor advantages(const Device& d = Device::cpu()) const;
  Tensor returns(const Device& d = Device::cpu()) const;
  const GaeResult& gae_result() const { return gae_; }
  /// A random permutation of the T * N samples cut into minibatches of batch_size (the last
  /// one may be smaller), as i64 index tensors for index_select.
  std::vector<Tensor> minibatches(int64_t batch_size, Rng& rng, const Device& d = Device::cpu()) const;

 private:
  int64_t T_, N_, od_, ad_, t_ = 0;
  std::vector<float> obs_, actions_;
  std::vector<double> log_probs_, rewards_, values_, dones_;
  GaeResult gae_;
};

}  // namespace kiln::rl
