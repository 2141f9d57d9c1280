// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::rl's environments against Gymnasium's trajectories (scripts/gen_rl_reference.py): the
// same initial state, the same actions, every step's observation, reward and terminated flag.
// (On the machine that generated the data the observations agree bitwise and the rewards to
// 1 ulp; the tolerances leave room for another libm.)
#include <kiln/rl.h>

#include "rl/rl_test_util.h"

using namespace kiln;
using kiln::test::expect_near_all;
using kiln::test::rl_ref;
using kiln::test::rl_vec;

namespace {

/// Replays episode `ep` of `name` on `env` (already in its initial state); returns the steps.
int64_t replay(rl::Env& env, const std::string& name, int ep, double obs_tol) {
  const std::string p = name + "." + std::to_string(ep) + ".";
  Tensor actions = rl_ref("envs", p + "actions");
  const int64_t T = actions.size(0), ad = actions.size(1);
  const auto a = actions.to(f64).contiguous().to_vector<double>();
  const auto obs = rl_vec("envs", p + "obs"), rew = rl_vec("envs", p + "rewards"),
             term = rl_vec("envs", p + "terminated");
  const size_t od = obs.size() / static_cast<size_t>(T);
  std::vector<double> got_obs, got_rew, got_term;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> act(a.begin() + t * ad, a.begin() + (t + 1) * ad);
    rl::StepResult r = env.step(act);
    EXPECT_EQ(r.observation.size(), od);
    got_obs.insert(got_obs.end(), r.observation.begin(), r.observation.end());
    got_rew.push_back(r.reward);
    got_term.push_back(r.terminated ? 1.0 : 0.0);
  }
  expect_near_all(got_obs, obs, obs_tol, obs_tol, p + "obs");
  expect_near_all(got_rew, rew, 1e-9, 1e-9, p + "rewards");
  expect_near_all(got_term, term, 0, 0, p + "terminated");
  return T;
}

template <class E>
void check_env(const std::string& name, int episodes, double obs_tol) {
  for (int ep = 0; ep < episodes; ++ep) {
    E env;
    env.reset(0);
    env.set_state(rl_vec("envs", name + "." + std::to_string(ep) + ".state0"));
    replay(env, name, ep, obs_tol);
  }
}

}  // namespace

TEST(RlEnvs, CartPoleMatchesGymnasium) { check_env<rl::CartPole>("cartpole", 3, 1e-6); }
TEST(RlEnvs, AcrobotMatchesGymnasium) { check_env<rl::Acrobot>("acrobot", 2, 1e-5); }
TEST(RlEnvs, MountainCarMatchesGymnasium) { check_env<rl::MountainCar>("mountaincar", 2, 1e-6); }
TEST(RlEnvs, MountainCarContinuousMatchesGymnasium) {
  check_env<rl::MountainCarContinuous>("mountaincarcont", 2, 1e-6);
}
TEST(RlEnvs, PendulumMatchesGymnasium) { check_env<rl::Pendulum>("pendulum", 2, 1e-6); }

TEST(RlEnvs, GridWorldMatchesFrozenLake) {
  for (int ep = 0; ep < 2; ++ep) {
    const std::string p = "grid." + std::to_string(ep) + ".";
    rl::GridWorld env;
    env.reset(0);
    const auto actions = rl_ref("envs", p + "actions").to_vector<int64_t>();
    const auto cells = rl_ref("envs", p + "cells").to_vector<int64_t>();
    const auto rew = rl_vec("envs", p + "rewards"), term = rl_vec("envs", p + "terminated");
    for (size_t t = 0; t < actions.size(); ++t) {
      rl::StepResult r = env.step(actions[t]);
      EXPECT_EQ(env.cell(), cells[t]) << p << t;
      EXPECT_EQ(r.observation[static_cast<size_t>(cells[t])], 1.0f);
      EXPECT_EQ(r.reward, rew[t]) << p << t;
      EXPECT_EQ(r.terminated, term[t] != 0) << p << t;
    }
  }
}

TEST(RlEnvs, ResetIsSeededAndInGymnasiumsRange) {
  auto a = rl::make("CartPole-v1"), b = rl::make("CartPole-v1");
  EXPECT_EQ(a->reset(3), b->reset(3));
  EXPECT_NE(a->reset(3), a->reset(4));
  for (float v : a->reset(5)) EXPECT_LE(std::abs(v), 0.05f);
  auto p = rl::make("Pendulum-v1");
  std::vector<float> o = p->reset(1);
  EXPECT_NEAR(o[0] * o[0] + o[1] * o[1], 1.0f, 1e-5f);
  EXPECT_LE(std::abs(o[2]), 1.0f);
  auto m = rl::make("MountainCar-v0");
  o = m->reset(2);
  EXPECT_GE(o[0], -0.6f);
  EXPECT_LE(o[0], -0.4f);
  EXPECT_EQ(o[1], 0.0f);
}

TEST(RlEnvs, MakeAppliesGymnasiumsTimeLimits) {
  const std::pair<const char*, int> limits[] = {{"CartPole-v1", 500},    {"Acrobot-v1", 500},
                                                {"MountainCar-v0", 200}, {"MountainCarContinuous-v0", 999},
                                                {"Pendulum-v1", 200},    {"GridWorld-v0", 100}};
  for (auto [id, n] : limits) {
    auto env = rl::make(id);
    auto* tl = dynamic_cast<rl::TimeLimit*>(env.get());
    ASSERT_NE(tl, nullptr) << id;
    EXPECT_EQ(tl->max_steps(), n) << id;
  }
  auto env = rl::make("Pendulum-v1");
  env->reset(0);
  int steps = 0;
  rl::StepResult r;
  do {
    r = env->step(std::vector<float>{0.0f});
    ++steps;
  } while (!r.truncated && steps < 1000);
  EXPECT_EQ(steps, 200);
  EXPECT_FALSE(r.terminated);
}

TEST(RlEnvs, BadInputThrows) {
  EXPECT_THROW(rl::make("Nope-v0"), Error);
  rl::CartPole cp;
  EXPECT_THROW(cp.step(int64_t{0}), Error);  // before reset
  cp.reset(0);
  EXPECT_THROW(cp.step(int64_t{2}), Error);
  EXPECT_THROW(cp.step(std::vector<float>{0.5f}), Error);
  EXPECT_THROW(cp.step(std::vector<float>{0.0f, 1.0f}), Error);
  EXPECT_THROW(cp.set_state({1.0, 2.0}), Error);
  rl::Pendulum p;
  p.reset(0);
  EXPECT_THROW(p.step(int64_t{1}), Error);
  EXPECT_THROW(p.step(std::vector<float>{NAN}), Error);
  EXPECT_THROW(rl::GridWorld({.map = {"SF", "F"}}), Error);
  EXPECT_THROW(rl::GridWorld({.map = {"FF", "FG"}}), Error);
  EXPECT_THROW(rl::GridWorld({.map = {"SX", "FG"}}), Error);
  EXPECT_THROW(rl::TimeLimit(rl::make("CartPole-v1"), 0), Error);
  EXPECT_THROW(rl::FrameStack(rl::make("CartPole-v1"), 0), Error);
  EXPECT_THROW(rl::VectorEnv([] { return rl::make("CartPole-v1"); }, 0), Error);
}

TEST(RlEnvs, SlipperyGridWorldMovesSideways) {
  rl::GridWorld g({.map = {"FFF", "FSF", "FFF"}, .slippery = true, .one_hot = false});
  int counts[9] = {};
  for (int i = 0; i < 3000; ++i) {
    g.reset(static_cast<uint64_t>(i));
    counts[static_cast<int>(g.step(int64_t{2}).observation[0])]++;  // right: right, or up/down
  }
  EXPECT_EQ(counts[4] + counts[3], 0);
  for (int c : {5, 1, 7}) EXPECT_NEAR(counts[c], 1000, 120) << c;
}
