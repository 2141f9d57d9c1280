// SPDX-License-Identifier: MIT OR Apache-2.0
// Vectorised environments with same-step auto-reset.
#include "kiln/rl/vector_env.h"

#include "kiln/error.h"

namespace kiln::rl {

VectorEnv::VectorEnv(const std::function<EnvPtr()>& make, int64_t num_envs) {
  KILN_CHECK(num_envs > 0, "rl::VectorEnv", "num_envs must be > 0, got " << num_envs);
  KILN_CHECK(static_cast<bool>(make), "rl::VectorEnv", "no factory");
  for (int64_t i = 0; i < num_envs; ++i) {
    EnvPtr e = make();
    KILN_CHECK(e != nullptr, "rl::VectorEnv", "the factory returned a null environment");
    if (i > 0) {
      KILN_CHECK(e->observation_space().dim() == envs_[0]->observation_space().dim() &&
                     e->action_space().dim() == envs_[0]->action_space().dim() &&
                     e->action_space().n == envs_[0]->action_space().n,
                 "rl::VectorEnv", "environment " << i << " has other spaces than environment 0");
    }
    envs_.push_back(std::move(e));
  }
  running_return_.assign(envs_.size(), 0.0);
  running_length_.assign(envs_.size(), 0);
}

Env& VectorEnv::env(int64_t i) {
  KILN_CHECK(i >= 0 && i < num_envs(), "rl::VectorEnv", "env " << i << " of " << num_envs());
  return *envs_[static_cast<size_t>(i)];
}

std::vector<float> VectorEnv::reset(std::optional<uint64_t> seed) {
  std::vector<float> obs;
  for (size_t i = 0; i < envs_.size(); ++i) {
    std::vector<float> o = envs_[i]->reset(seed ? std::optional<uint64_t>(*seed + i) : std::nullopt);
    obs.insert(obs.end(), o.begin(), o.end());
    running_return_[i] = 0;
    running_length_[i] = 0;
  }
  was_reset_ = true;
  return obs;
}

VectorStep VectorEnv::step(const std::vector<float>& actions) {
  KILN_CHECK(was_reset_, "rl::VectorEnv", "step() before reset()");
  const size_t n = envs_.size(), ad = static_cast<size_t>(action_space().dim());
  KILN_CHECK(actions.size() == n * ad, "rl::VectorEnv",
             "got " << actions.size() << " action values for " << n << " environments of action size " << ad);
  VectorStep out;
  out.rewards.resize(n);
  out.terminated.resize(n);
  out.truncated.resize(n);
  out.infos.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<float> a(actions.begin() + static_cast<std::ptrdiff_t>(i * ad),
                         actions.begin() + static_cast<std::ptrdiff_t>((i + 1) * ad));
    StepResult r = envs_[i]->step(a);
    out.rewards[i] = r.reward;
    out.terminated[i] = r.terminated;
    out.truncated[i] = r.truncated;
    out.infos[i] = std::move(r.info);
    running_return_[i] += r.reward;
    running_length_[i] += 1;
    out.final_observations.insert(out.final_observations.end(), r.observation.begin(), r.observation.end());
    if (r.terminated || r.truncated) {
      out.infos[i]["episode_return"] = running_return_[i];
      out.infos[i]["episode_length"] = static_cast<double>(running_length_[i]);
      returns_.push_back(running_return_[i]);
      lengths_.push_back(running_length_[i]);
      running_return_[i] = 0;
      running_length_[i] = 0;
      r.observation = envs_[i]->reset();
    }
    out.observations.insert(out.observations.end(), r.observation.begin(), r.observation.end());
  }
  return out;
}

VectorStep VectorEnv::step(const std::vector<int64_t>& actions) {
  return step(std::vector<float>(actions.begin(), actions.end()));
}

}  // namespace kiln::rl
