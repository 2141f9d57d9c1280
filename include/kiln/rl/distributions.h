// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Action distributions of policies, written with tensor ops so that log_prob and entropy are
// differentiable under autodiff (torch.distributions' Categorical and Normal, the latter as a
// diagonal Gaussian summed over the last dimension).
//
//   rl::Categorical pi(policy(obs));              // logits [B, K]
//   Tensor a = pi.sample();                        // [B] i64
//   Tensor loss = -(pi.log_prob(a) * adv).mean() - 0.01 * pi.entropy().mean();
#include "kiln/tensor.h"

namespace kiln::rl {

/// A categorical distribution over the last dimension of `logits` [..., K] (unnormalised).
class Categorical {
 public:
  /// Throws when logits is 0-d, empty in its last dimension or not floating.
  explicit Categorical(const Tensor& logits);
  /// Normalised log-probabilities, log_softmax(logits) [..., K].
  const Tensor& log_probs() const { return logp_; }
  Tensor probs() const { return logp_.exp(); }
  /// One draw per distribution [...] i64 (kiln's generator: manual_seed makes it repeatable).
  /// Not differentiable.
  Tensor sample() const;
  /// log p(actions), actions [...] integer in [0, K): [...].
  Tensor log_prob(const Tensor& actions) const;
  /// -sum p log p over the last dimension: [...].
  Tensor entropy() const;
  /// The most probable action [...] i64.
  Tensor mode() const { return logp_.argmax(-1); }

 private:
  Tensor logp_;
};

/// A Gaussian with independent dimensions: mean [..., D] and log_std broadcastable to it
/// (often a learned [D] vector). log_prob and entropy sum over the last dimension.
class DiagGaussian {
 public:
  DiagGaussian(const Tensor& mean, const Tensor& log_std);
  const Tensor& mean() const { return mean_; }
  Tensor stddev() const { return log_std_.exp(); }
  /// mean + std * N(0, 1), detached (not differentiable).
  Tensor sample() const;
  /// The same draw, differentiable in mean and log_std (the reparameterisation trick).
  Tensor rsample() const;
  /// sum_d log N(x_d; mean_d, std_d): [...].
  Tensor log_prob(const Tensor& x) const;
  /// sum_d (0.5 + 0.5 log(2 pi) + log std_d): [...].
  Tensor entropy() const;
  Tensor mode() const { return mean_; }

 private:
  Tensor mean_, log_std_;
};

}  // namespace kiln::rl
