// SPDX-License-Identifier: MIT OR Apache-2.0
// Wrappers against Gymnasium's (NormalizeObservation, NormalizeReward, FrameStackObservation)
// on recorded raw episodes, and the vectorised environment's auto-reset.
#include <kiln/rl.h>

#include "rl/rl_test_util.h"

using namespace kiln;
using kiln::test::expect_near_all;
using kiln::test::rl_ref;
using kiln::test::rl_vec;

namespace {

/// An environment that returns recorded observations, rewards and terminated flags (the raw
/// values Gymnasium's wrapper saw): reset() gives the next recorded observation, step() the
/// next recorded transition.
class ReplayEnv : public rl::Env {
 public:
  explicit ReplayEnv(const std::string& name)
      : obs_(rl_ref("wrappers", name + ".raw_obs")),
        rew_(rl_vec("wrappers", name + ".raw_rewards")),
        term_(rl_vec("wrappers", name + ".raw_terminated")),
        os_(rl::Space::make_box(obs_.size(1), -1e9f, 1e9f)),
        as_(rl::Space::make_box(1, -10, 10)) {}
  const rl::Space& observation_space() const override { return os_; }
  const rl::Space& action_space() const override { return as_; }
  std::string name() const override { return "Replay"; }

 protected:
  std::vector<float> do_reset(std::optional<uint64_t>) override { return next_obs(); }
  rl::StepResult do_step(const std::vector<float>&) override {
    rl::StepResult r;
    r.observation = next_obs();
    r.reward = rew_[t_];
    r.terminated = term_[t_] != 0;
    ++t_;
    return r;
  }

 private:
  std::vector<float> next_obs() { return obs_.select(0, o_++).contiguous().to_vector<float>(); }
  Tensor obs_;
  std::vector<double> rew_, term_;
  rl::Space os_, as_;
  int64_t o_ = 0;
  size_t t_ = 0;
};

/// Runs the recorded episode through `env` as the script did (reset after termination).
void run(rl::Env& env, const std::string& name, double tol) {
  const auto term = rl_vec("wrappers", name + ".raw_terminated");
  std::vector<double> obs, rew;
  auto add = [&](const std::vector<float>& o) { obs.insert(obs.end(), o.begin(), o.end()); };
  add(env.reset());
  for (size_t t = 0; t < term.size(); ++t) {
    rl::StepResult r = env.step(std::vector<float>{0.0f});
    add(r.observation);
    rew.push_back(r.reward);
    if (r.terminated) add(env.reset());
  }
  expect_near_all(obs, rl_vec("wrappers", name + ".obs"), tol, tol, name + " observations");
  expect_near_all(rew, rl_vec("wrappers", name + ".rewards"), tol, tol, name + " rewards");
}

}  // namespace

TEST(RlWrappers, NormalizeObservationMatchesGymnasium) {
  rl::NormalizeObservation env(std::make_unique<ReplayEnv>("normobs"));
  run(env, "normobs", 1e-5);
}

TEST(RlWrappers, NormalizeRewardMatchesGymnasium) {
  rl::NormalizeReward a(std::make_unique<ReplayEnv>("normrew"), 0.9);
  run(a, "normrew", 1e-6);
  rl::NormalizeReward b(std::make_unique<ReplayEnv>("normrew_cp"), 0.99);
  run(b, "normrew_cp", 1e-6);
}

TEST(RlWrappers, FrameStackMatchesGymnasium) {
  rl::FrameStack env(std::make_unique<ReplayEnv>("framestack"), 3);
  EXPECT_EQ(env.observation_space().dim(), 12);
  run(env, "framestack", 0);
}

TEST(RlWrappers, ScaleRewardAndTimeLimit) {
  rl::ScaleReward env(std::make_unique<rl::TimeLimit>(std::make_unique<rl::CartPole>(), 3), 0.5);
  env.reset(1);
  EXPECT_EQ(env.name(), "ScaleReward<TimeLimit<CartPole-v1>>");
  EXPECT_EQ(env.unwrapped().name(), "CartPole-v1");
  rl::StepResult r = env.step(int64_t{0});
  EXPECT_EQ(r.reward, 0.5);
  EXPECT_EQ(r.info.at("raw_reward"), 1.0);
  env.step(int64_t{1});
  EXPECT_FALSE(r.truncated);
  EXPECT_TRUE(env.step(int64_t{0}).truncated);
  env.reset();
  EXPECT_FALSE(env.step(int64_t{0}).truncated);
}

TEST(RlVectorEnv, StepsCopiesTogetherAndAutoResets) {
  rl::VectorEnv envs([] { return rl::make("CartPole-v1"); }, 4);
  std::vector<float> obs = envs.reset(10);
  ASSERT_EQ(obs.size(), 16u);
  // The same as four single environments seeded 10..13 under the same actions.
  std::vector<rl::EnvPtr> single;
  for (int i = 0; i < 4; ++i) {
    single.push_back(rl::make("CartPole-v1"));
    std::vector<float> o = single.back()->reset(10 + i);
    EXPECT_EQ(std::vector<float>(obs.begin() + 4 * i, obs.begin() + 4 * i + 4), o);
  }
  int ended = 0;
  for (int t = 0; t < 60; ++t) {
    std::vector<int64_t> a = {t % 2, 1, 0, (t / 3) % 2};
    rl::VectorStep s = envs.step(a);
    for (size_t i = 0; i < 4; ++i) {
      rl::StepResult r = single[i]->step(a[i]);
      EXPECT_EQ(s.rewards[i], r.reward);
      EXPECT_EQ(s.terminated[i] != 0, r.terminated);
      EXPECT_EQ(std::vector<float>(s.final_observations.begin() + 4 * i, s.final_observations.begin() + 4 * i + 4),
                r.observation);
      if (s.done(i)) {
        ++ended;
        EXPECT_GT(s.infos[i].at("episode_length"), 0);
        std::vector<float> o = single[i]->reset();
        EXPECT_EQ(std::vector<float>(s.observations.begin() + 4 * i, s.observations.begin() + 4 * i + 4), o);
      }
    }
  }
  EXPECT_GT(ended, 0);
  EXPECT_EQ(static_cast<int>(envs.episode_returns().size()), ended);
  EXPECT_THROW(envs.step(std::vector<int64_t>{0, 1}), Error);
}
