// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Gymnasium's classic-control environments with its dynamics (same constants, integrators and
// float32 roundings), and a grid world with FrozenLake's rules. Without a TimeLimit (see
// rl::make for the registered episode lengths). Each has state() / set_state() to start from a
// given state (the tests replay Gymnasium's trajectories from its initial states).
#include "kiln/rl/env.h"

namespace kiln::rl {

/// CartPole-v1: push a cart left (0) or right (1) to balance a pole. Observation [x, x_dot,
/// theta, theta_dot]; reward 1 per step; terminates when |x| > 2.4 or |theta| > 12 degrees.
class CartPole : public Env {
 public:
  CartPole();
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::string name() const override { return "CartPole-v1"; }
  const std::vector<double>& state() const { return s_; }
  /// Sets [x, x_dot, theta, theta_dot] (the episode continues from it).
  void set_state(const std::vector<double>& s);

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  Space obs_, act_;
  Rng rng_;
  std::vector<double> s_;
  bool beyond_terminated_ = false;
};

/// Acrobot-v1: swing a two-link chain up by torque -1, 0, +1 (actions 0, 1, 2) on the joint
/// (RK4, dt 0.2, the "book" dynamics). Observation [cos t1, sin t1, cos t2, sin t2, dt1, dt2];
/// reward -1 per step, 0 on reaching the goal height.
class Acrobot : public Env {
 public:
  Acrobot();
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::string name() const override { return "Acrobot-v1"; }
  const std::vector<double>& state() const { return s_; }
  /// Sets [theta1, theta2, dtheta1, dtheta2].
  void set_state(const std::vector<double>& s);

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  std::vector<float> observe() const;
  Space obs_, act_;
  Rng rng_;
  std::vector<double> s_;
};

/// MountainCar-v0: drive an underpowered car up a hill, accelerating left (0), not (1) or
/// right (2). Observation [position, velocity]; reward -1 per step; terminates at position 0.5.
class MountainCar : public Env {
 public:
  MountainCar();
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::string name() const override { return "MountainCar-v0"; }
  const std::vector<double>& state() const { return s_; }
  /// Sets [position, velocity].
  void set_state(const std::vector<double>& s);

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  Space obs_, act_;
  Rng rng_;
  std::vector<double> s_;
};

/// MountainCarContinuous-v0: the same hill with a force in [-1, 1]. Reward 100 at the goal
/// (position 0.45) minus 0.1 force^2 per step. The state is float32, as in Gymnasium.
class MountainCarContinuous : public Env {
 public:
  MountainCarContinuous();
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::string name() const override { return "MountainCarContinuous-v0"; }
  std::vector<double> state() const { return {s_[0], s_[1]}; }
  /// Sets [position, velocity] (rounded to float32 after the first step, as Gymnasium).
  void set_state(const std::vector<double>& s);

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  Space obs_, act_;
  Rng rng_;
  double s_[2] = {0, 0};
  bool f32_ = false;  // the state has been rounded to float32 (after a step)
};

/// Pendulum-v1: swing a pendulum up and keep it there with a torque in [-2, 2]. Observation
/// [cos theta, sin theta, theta_dot]; reward -(theta^2 + 0.1 theta_dot^2 + 0.001 u^2), theta
/// normalised to [-pi, pi); never terminates.
class Pendulum : public Env {
 public:
  /// g: gravity (Gymnasium's default 10).
  explicit Pendulum(double g = 10.0);
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::string name() const override { return "Pendulum-v1"; }
  const std::vector<double>& state() const { return s_; }
  /// Sets [theta, theta_dot].
  void set_state(const std::vector<double>& s);

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  std::vector<float> observe() const;
  Space obs_, act_;
  Rng rng_;
  double g_;
  std::vector<double> s_;
};

/// Options of GridWorld.
struct GridWorldConfig {
  /// Rows of the map, FrozenLake's letters: S start, F free, H hole (ends the episode), G goal
  /// (reward 1, ends the episode). Every row has the same length; exactly one S.
  std::vector<std::string> map = {"SFFF", "FHFH", "FFFH", "HFFG"};
  /// FrozenLake's slipperiness: the intended move happens with probability success_rate, each
  /// perpendicular one with (1 - success_rate) / 2.
  bool slippery = false;
  double success_rate = 1.0 / 3.0;
  /// Observation: a one-hot vector of rows*cols floats (true) or the cell index as one float.
  bool one_hot = true;
};

/// A grid world with FrozenLake-v1's rules: actions 0 left, 1 down, 2 right, 3 up; moves off
/// the grid stay in place.
class GridWorld : public Env {
 public:
  explicit GridWorld(GridWorldConfig c = {});
  const Space& observation_space() const override { return obs_; }
  const Space& action_space() const override { return act_; }
  std::string name() const override { return "GridWorld-v0"; }
  /// The current cell, row * cols + col.
  int64_t cell() const { return cell_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

 protected:
  std::vector<float> do_reset(std::optional<uint64_t> seed) override;
  StepResult do_step(const std::vector<float>& action) override;

 private:
  std::vector<float> observe() const;
  GridWorldConfig c_;
  Space obs_, act_;
  Rng rng_;
  int64_t rows_ = 0, cols_ = 0, start_ = 0, cell_ = 0;
};

}  // namespace kiln::rl
