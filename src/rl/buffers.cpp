// SPDX-License-Identifier: MIT OR Apache-2.0
// Sum tree, replay buffers, rollout buffer and GAE.
#include "kiln/rl/buffers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::rl {

// ---- SumTree ----------------------------------------------------------------------------------

SumTree::SumTree(int64_t capacity) : cap_(capacity), leaves_(1) {
  KILN_CHECK(capacity > 0, "rl::SumTree", "capacity must be > 0, got " << capacity);
  while (leaves_ < capacity) leaves_ *= 2;
  tree_.assign(static_cast<size_t>(2 * leaves_), 0.0);
}

void SumTree::set(int64_t i, double priority) {
  KILN_CHECK(i >= 0 && i < cap_, "rl::SumTree", "index " << i << " outside [0, " << cap_ << ")");
  KILN_CHECK(std::isfinite(priority) && priority >= 0, "rl::SumTree",
             "priority must be finite and >= 0, got " << priority);
  size_t k = static_cast<size_t>(i + leaves_);
  tree_[k] = priority;
  // Recompute the sums on the path (not incremental deltas, so rounding does not drift).
  for (k /= 2; k >= 1; k /= 2) tree_[k] = tree_[2 * k] + tree_[2 * k + 1];
}

double SumTree::get(int64_t i) const {
  KILN_CHECK(i >= 0 && i < cap_, "rl::SumTree", "index " << i << " outside [0, " << cap_ << ")");
  return tree_[static_cast<size_t>(i + leaves_)];
}

int64_t SumTree::find(double mass) const {
  KILN_CHECK(total() > 0, "rl::SumTree", "find() with every priority 0");
  mass = std::clamp(mass, 0.0, total());
  size_t k = 1;
  while (k < static_cast<size_t>(leaves_)) {
    const size_t left = 2 * k;
    if (mass < tree_[left] || tree_[left + 1] <= 0) {
      k = left;
    } else {
      mass -= tree_[left];
      k = left + 1;
    }
  }
  int64_t i = static_cast<int64_t>(k) - leaves_;
  // Rounding may land on a zero leaf at the end of the range: step back to a positive one.
  while (i > 0 && tree_[static_cast<size_t>(i + leaves_)] <= 0) --i;
  return i;
}

// ---- ReplayBuffer -----------------------------------------------------------------------------

ReplayBuffer::ReplayBuffer(const ReplayBufferConfig& c) : c_(c) {
  KILN_CHECK(
      c.capacity > 0 && c.obs_dim > 0 && c.action_dim > 0, "rl::ReplayBuffer",
      "capacity, obs_dim and action_dim must be > 0, got " << c.capacity << ", " << c.obs_dim << ", " << c.action_dim);
  KILN_CHECK(!c.discrete || c.action_dim == 1, "rl::ReplayBuffer", "discrete actions need action_dim 1");
  const size_t n = static_cast<size_t>(c.capacity);
  obs_.resize(n * static_cast<size_t>(c.obs_dim));
  next_obs_.resize(obs_.size());
  actions_.resize(n * static_cast<size_t>(c.action_dim));
  rewards_.resize(n);
  dones_.resize(n);
}

int64_t ReplayBuffer::add(const std::vector<float>& obs, const std::vector<float>& action, double reward,
                          const std::vector<float>& next_obs, bool done) {
  KILN_CHECK(
      static_cast<int64_t>(obs.size()) == c_.obs_dim && static_cast<int64_t>(next_obs.size()) == c_.obs_dim,
      "rl::ReplayBuffer",
      "observations of " << obs.size() << " and " << next_obs.size() << " values, the buffer holds " << c_.obs_dim);
  KILN_CHECK(static_cast<int64_t>(action.size()) == c_.action_dim, "rl::ReplayBuffer",
             "an action of " << action.size() << " values, the buffer holds " << c_.action_dim);
  const int64_t slot = next_;
  std::copy(obs.begin(), obs.end(), obs_.begin() + slot * c_.obs_dim);
  std::copy(next_obs.begin(), next_obs.end(), next_obs_.begin() + slot * c_.obs_dim);
  std::copy(action.begin(), action.end(), actions_.begin() + slot * c_.action_dim);
  rewards_[static_cast<size_t>(slot)] = static_cast<float>(reward);
  dones_[static_cast<size_t>(slot)] = done ? 1.0f : 0.0f;
  next_ = (next_ + 1) % c_.capacity;
  size_ = std::min(size_ + 1, c_.capacity);
  on_added(slot);
  return slot;
}

int64_t ReplayBuffer::add(const std::vector<float>& obs, int64_t action, double reward,
                          const std::vector<float>& next_obs, bool done) {
  return add(obs, std::vector<float>{static_cast<float>(action)}, reward, next_obs, done);
}

ReplayBatch ReplayBuffer::gather(const std::vector<int64_t>& idx, const Device& device) const {
  const int64_t B = static_cast<int64_t>(idx.size()), od = c_.obs_dim, ad = c_.action_dim;
  std::vector<float> o(static_cast<size_t>(B * od)), no(o.size()), a(static_cast<size_t>(B * ad)),
      r(static_cast<size_t>(B)), d(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = idx[static_cast<size_t>(b)];
    std::copy_n(obs_.begin() + i * od, od, o.begin() + b * od);
    std::copy_n(next_obs_.begin() + i * od, od, no.begin() + b * od);
    std::copy_n(actions_.begin() + i * ad, ad, a.begin() + b * ad);
    r[static_cast<size_t>(b)] = rewards_[static_cast<size_t>(i)];
    d[static_cast<size_t>(b)] = dones_[static_cast<size_t>(i)];
  }
  ReplayBatch out;
  out.obs = tensor(o, {B, od}, device);
  out.next_obs = tensor(no, {B, od}, device);
  if (c_.discrete) {
    std::vector<int64_t> ai(a.begin(), a.end());
    out.actions = tensor(ai, {B}, device);
  } else {
    out.actions = tensor(a, {B, ad}, device);
  }
  out.rewards = tensor(r, {B}, device);
  out.dones = tensor(d, {B}, device);
  out.indices = idx;
  return out;
}

ReplayBatch ReplayBuffer::sample(int64_t batch_size, Rng& rng, const Device& device) {
  KILN_CHECK(size_ > 0, "rl::ReplayBuffer", "sample() from an empty buffer");
  KILN_CHECK(batch_size > 0, "rl::ReplayBuffer", "batch_size must be > 0, got " << batch_size);
  std::vector<int64_t> idx(static_cast<size_t>(batch_size));
  for (auto& i : idx) i = rng.integer(size_);
  ReplayBatch b = gather(idx, device);
  b.weights = ones({batch_size}, {.dtype = f32, .device = device});
  return b;
}

// ---- PrioritizedReplayBuffer ------------------------------------------------------------------

PrioritizedReplayBuffer::PrioritizedReplayBuffer(const ReplayBufferConfig& c, double alpha, double eps)
    : ReplayBuffer(c), tree_(c.capacity), alpha_(alpha), eps_(eps) {
  KILN_CHECK(alpha >= 0 && eps > 0, "rl::PrioritizedReplayBuffer",
             "needs alpha >= 0 and eps > 0, got " << alpha << ", " << eps);
}

void PrioritizedReplayBuffer::on_added(int64_t slot) { tree_.set(slot, std::pow(max_priority_, alpha_)); }

ReplayBatch PrioritizedReplayBuffer::sample(int64_t batch_size, Rng& rng, const Device& device) {
  KILN_CHECK(size_ > 0, "rl::PrioritizedReplayBuffer", "sample() from an empty buffer");
  KILN_CHECK(batch_size > 0, "rl::PrioritizedReplayBuffer", "batch_size must be > 0, got " << batch_size);
  const double total = tree_.total(), seg = total / static_cast<double>(batch_size);
  std::vector<int64_t> idx(static_cast<size_t>(batch_size));
  std::vector<float> w(idx.size());
  double wmax = 0;
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t i = tree_.find(seg * (static_cast<double>(b) + rng.uniform()));
    idx[static_cast<size_t>(b)] = i;
    const double p = tree_.get(i) / total;
    const double wi = std::pow(static_cast<double>(size_) * p, -beta);
    w[static_cast<size_t>(b)] = static_cast<float>(wi);
    wmax = std::max(wmax, wi);
  }
  for (auto& x : w) x = static_cast<float>(x / wmax);
  ReplayBatch out = gather(idx, device);
  out.weights = tensor(w, {batch_size}, device);
  return out;
}

void PrioritizedReplayBuffer::update_priorities(const std::vector<int64_t>& indices,
                                                const std::vector<double>& td_errors) {
  KILN_CHECK(indices.size() == td_errors.size(), "rl::PrioritizedReplayBuffer",
             indices.size() << " indices and " << td_errors.size() << " TD errors");
  for (size_t k = 0; k < indices.size(); ++k) {
    KILN_CHECK(indices[k] >= 0 && indices[k] < size_, "rl::PrioritizedReplayBuffer",
               "index " << indices[k] << " outside the " << size_ << " stored transitions");
    KILN_CHECK(std::isfinite(td_errors[k]), "rl::PrioritizedReplayBuffer", "TD error " << td_errors[k]);
    const double p = std::abs(td_errors[k]) + eps_;
    max_priority_ = std::max(max_priority_, p);
    tree_.set(indices[k], std::pow(p, alpha_));
  }
}

// ---- GAE and the rollout buffer ---------------------------------------------------------------

GaeResult gae(const std::vector<double>& rewards, const std::vector<double>& values, const std::vector<double>& dones,
              const std::vector<double>& last_values, int64_t T, int64_t N, double gamma, double lambda) {
  const size_t n = static_cast<size_t>(T * N);
  KILN_CHECK(T >= 0 && N > 0 && rewards.size() == n && values.size() == n && dones.size() == n &&
                 last_values.size() == static_cast<size_t>(N),
             "rl::gae",
             "needs rewards, values and dones of T*N = " << T << "*" << N << " and last_values of N; got "
                                                         << rewards.size() << ", " << values.size() << ", "
                                                         << dones.size() << ", " << last_values.size());
  GaeResult g;
  g.advantages.assign(n, 0.0);
  g.returns.assign(n, 0.0);
  for (int64_t e = 0; e < N; ++e) {
    double last = 0;
    for (int64_t t = T - 1; t >= 0; --t) {
      const size_t k = static_cast<size_t>(t * N + e);
      const double next_value = t == T - 1 ? last_values[static_cast<size_t>(e)] : values[k + static_cast<size_t>(N)];
      const double nonterminal = 1.0 - dones[k];
      const double delta = rewards[k] + gamma * next_value * nonterminal - values[k];
      last = delta + gamma * lambda * nonterminal * last;
      g.advantages[k] = last;
      g.returns[k] = last + values[k];
    }
  }
  return g;
}

RolloutBuffer::RolloutBuffer(int64_t num_steps, int64_t num_envs, int64_t obs_dim, int64_t action_dim)
    : T_(num_steps), N_(num_envs), od_(obs_dim), ad_(action_dim) {
  KILN_CHECK(num_steps > 0 && num_envs > 0 && obs_dim > 0 && action_dim > 0, "rl::RolloutBuffer",
             "sizes must be > 0, got steps " << num_steps << ", envs " << num_envs << ", obs " << obs_dim << ", action "
                                             << action_dim);
}

void RolloutBuffer::add(const std::vector<float>& obs, const std::vector<float>& actions,
                        const std::vector<double>& log_probs, const std::vector<double>& rewards,
                        const std::vector<double>& values, const std::vector<uint8_t>& dones) {
  KILN_CHECK(t_ < T_, "rl::RolloutBuffer", "add() on a full buffer (" << T_ << " steps); clear() it");
  const size_t N = static_cast<size_t>(N_);
  KILN_CHECK(obs.size() == N * static_cast<size_t>(od_) && actions.size() == N * static_cast<size_t>(ad_) &&
                 log_probs.size() == N && rewards.size() == N && values.size() == N && dones.size() == N,
             "rl::RolloutBuffer",
             "one step of " << N_ << " environments needs obs " << N_ * od_ << ", actions " << N_ * ad_ << " and " << N_
                            << " of the rest; got " << obs.size() << ", " << actions.size() << ", "
                            << log_probs.size());
  if (t_ == 0) {
    obs_.clear();
    actions_.clear();
    log_probs_.clear();
    rewards_.clear();
    values_.clear();
    dones_.clear();
  }
  obs_.insert(obs_.end(), obs.begin(), obs.end());
  actions_.insert(actions_.end(), actions.begin(), actions.end());
  log_probs_.insert(log_probs_.end(), log_probs.begin(), log_probs.end());
  rewards_.insert(rewards_.end(), rewards.begin(), rewards.end());
  values_.insert(values_.end(), values.begin(), values.end());
  for (uint8_t d : dones) dones_.push_back(d ? 1.0 : 0.0);
  ++t_;
}

void RolloutBuffer::compute_returns_and_advantages(const std::vector<double>& last_values, double gamma,
                                                   double lambda) {
  KILN_CHECK(full(), "rl::RolloutBuffer", "compute_returns_and_advantages on " << t_ << " of " << T_ << " steps");
  gae_ = gae(rewards_, values_, dones_, last_values, T_, N_, gamma, lambda);
}

namespace {
Tensor f32_tensor(const std::vector<double>& v, const Device& d) {
  std::vector<float> f(v.begin(), v.end());
  return tensor(f, {static_cast<int64_t>(f.size())}, d);
}
}  // namespace

Tensor RolloutBuffer::observations(const Device& d) const { return tensor(obs_, {t_ * N_, od_}, d); }
Tensor RolloutBuffer::actions(const Device& d) const { return tensor(actions_, {t_ * N_, ad_}, d); }
Tensor RolloutBuffer::log_probs(const Device& d) const { return f32_tensor(log_probs_, d); }
Tensor RolloutBuffer::values(const Device& d) const { return f32_tensor(values_, d); }
Tensor RolloutBuffer::advantages(const Device& d) const {
  KILN_CHECK(!gae_.advantages.empty(), "rl::RolloutBuffer", "advantages() before compute_returns_and_advantages()");
  return f32_tensor(gae_.advantages, d);
}
Tensor RolloutBuffer::returns(const Device& d) const {
  KILN_CHECK(!gae_.returns.empty(), "rl::RolloutBuffer", "returns() before compute_returns_and_advantages()");
  return f32_tensor(gae_.returns, d);
}

std::vector<Tensor> RolloutBuffer::minibatches(int64_t batch_size, Rng& rng, const Device& d) const {
  KILN_CHECK(batch_size > 0, "rl::RolloutBuffer", "batch_size must be > 0, got " << batch_size);
  const int64_t n = t_ * N_;
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(rng.integer(i + 1))]);
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n; s += batch_size) {
    const int64_t m = std::min(batch_size, n - s);
    out.push_back(tensor(std::vector<int64_t>(perm.begin() + s, perm.begin() + s + m), {m}, d));
  }
  return out;
}

}  // namespace kiln::rl
