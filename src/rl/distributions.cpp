// SPDX-License-Identifier: MIT OR Apache-2.0
// Action distributions over tensors (differentiable where torch.distributions is) and schedules.
#include "kiln/rl/distributions.h"

#include <cmath>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/rl/schedule.h"

namespace kiln::rl {

namespace {
constexpr double kHalfLog2Pi = 0.91893853320467274178;  // 0.5 log(2 pi)
}

double ExponentialSchedule::operator()(int64_t t) const {
  return end + (start - end) * std::pow(decay, static_cast<double>(t < 0 ? 0 : t));
}

Categorical::Categorical(const Tensor& logits) {
  KILN_CHECK(logits.defined() && logits.dim() >= 1 && logits.size(-1) > 0 && logits.is_floating_point(),
             "rl::Categorical",
             "needs floating logits [..., K] with K > 0, got "
                 << (logits.defined() ? to_string(logits.shape()) : std::string("undefined")));
  logp_ = logits.log_softmax(-1);
}

Tensor Categorical::sample() const {
  NoGradGuard no_grad;
  const int64_t K = logp_.size(-1);
  Shape batch(logp_.shape().begin(), logp_.shape().end() - 1);
  Tensor p = logp_.detach().exp().reshape({-1, K});
  if (p.size(0) == 0) return zeros(batch, {.dtype = i64, .device = logp_.device()});
  return multinomial(p, 1, true).reshape(batch);
}

Tensor Categorical::log_prob(const Tensor& actions) const {
  Shape batch(logp_.shape().begin(), logp_.shape().end() - 1);
  KILN_CHECK(actions.defined() && actions.shape() == batch && !actions.is_floating_point(), "rl::Categorical",
             "log_prob needs integer actions of shape "
                 << to_string(batch) << ", got " << (actions.defined() ? to_string(actions.shape()) : "undefined"));
  const int64_t K = logp_.size(-1);
  if (actions.numel() > 0) {
    const Tensor bad = actions.lt(0).logical_or(actions.ge(K)).any();
    KILN_CHECK(!bad.item<bool>(), "rl::Categorical", "an action outside [0, " << K << ")");
  }
  return logp_.gather(-1, actions.to(i64).unsqueeze(-1)).squeeze({-1});
}

Tensor Categorical::entropy() const { return -(logp_.exp() * logp_).sum({-1}); }

DiagGaussian::DiagGaussian(const Tensor& mean, const Tensor& log_std) : mean_(mean), log_std_(log_std) {
  KILN_CHECK(
      mean.defined() && log_std.defined() && mean.dim() >= 1 && mean.is_floating_point() && log_std.is_floating_point(),
      "rl::DiagGaussian", "needs floating mean [..., D] and log_std");
  KILN_CHECK(log_std.dim() <= mean.dim(), "rl::DiagGaussian",
             "log_std " << to_string(log_std.shape()) << " does not broadcast to mean " << to_string(mean.shape()));
  for (int64_t i = 1; i <= log_std.dim(); ++i) {
    const int64_t a = log_std.size(-i), b = mean.size(-i);
    KILN_CHECK(a == b || a == 1, "rl::DiagGaussian",
               "log_std " << to_string(log_std.shape()) << " does not broadcast to mean " << to_string(mean.shape()));
  }
}

Tensor DiagGaussian::rsample() const {
  Tensor eps = randn(mean_.shape(), {.dtype = mean_.dtype(), .device = mean_.device()});
  return mean_ + log_std_.exp() * eps;
}

Tensor DiagGaussian::sample() const {
  NoGradGuard no_grad;
  return rsample().detach();
}

Tensor DiagGaussian::log_prob(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.shape() == mean_.shape(), "rl::DiagGaussian",
             "log_prob needs x of the mean's shape " << to_string(mean_.shape()) << ", got "
                                                     << (x.defined() ? to_string(x.shape()) : "undefined"));
  Tensor z = (x - mean_) * (-log_std_).exp();
  return (z.square() * -0.5 - log_std_ - kHalfLog2Pi).sum({-1});
}

Tensor DiagGaussian::entropy() const { return (log_std_ + (0.5 + kHalfLog2Pi)).expand(mean_.shape()).sum({-1}); }

}  // namespace kiln::rl
