// SPDX-License-Identifier: MIT OR Apache-2.0
// Gymnasium's classic-control environments (gymnasium/envs/classic_control/*.py, 1.x), the
// same arithmetic step by step. Where Gymnasium computes in float32 (NumPy 2's promotion of a
// float32 with a Python float stays float32), so does this code, so trajectories agree to
// rounding.
#include <algorithm>
#include <cmath>

#include "kiln/error.h"
#include "kiln/rl/envs.h"

namespace kiln::rl {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr float kInf = INFINITY;

std::vector<float> to_f32(const std::vector<double>& s) { return std::vector<float>(s.begin(), s.end()); }

void check_state(const char* env, const std::vector<double>& s, size_t n) {
  KILN_CHECK(s.size() == n, env, "set_state needs " << static_cast<long long>(n) << " values, got " << s.size());
}

}  // namespace

// ---- CartPole ---------------------------------------------------------------------------------

CartPole::CartPole() : act_(Space::make_discrete(2)), s_(4, 0.0) {
  const float th = static_cast<float>(12 * 2 * kPi / 360);
  obs_ = Space::make_box({-4.8f, -kInf, -2 * th, -kInf}, {4.8f, kInf, 2 * th, kInf});
}

void CartPole::set_state(const std::vector<double>& s) {
  check_state("CartPole", s, 4);
  s_ = s;
  beyond_terminated_ = false;
}

std::vector<float> CartPole::do_reset(std::optional<uint64_t> seed) {
  if (seed) rng_.seed_with(*seed);
  for (auto& v : s_) v = rng_.uniform(-0.05, 0.05);
  beyond_terminated_ = false;
  return to_f32(s_);
}

StepResult CartPole::do_step(const std::vector<float>& action) {
  const double gravity = 9.8, masscart = 1.0, masspole = 0.1, total_mass = masspole + masscart, length = 0.5,
               polemass_length = masspole * length, force_mag = 10.0, tau = 0.02;
  const double theta_threshold = 12 * 2 * kPi / 360, x_threshold = 2.4;
  double x = s_[0], x_dot = s_[1], theta = s_[2], theta_dot = s_[3];
  const double force = action[0] == 1.0f ? force_mag : -force_mag;
  const double costheta = std::cos(theta), sintheta = std::sin(theta);
  const double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
  const double thetaacc =
      (gravity * sintheta - costheta * temp) / (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
  const double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  x = x + tau * x_dot;
  x_dot = x_dot + tau * xacc;
  theta = theta + tau * theta_dot;
  theta_dot = theta_dot + tau * thetaacc;
  s_ = {x, x_dot, theta, theta_dot};
  StepResult r;
  r.terminated = x < -x_threshold || x > x_threshold || theta < -theta_threshold || theta > theta_threshold;
  // One reward of 1 for the step that terminates, 0 for steps past it (Gymnasium's default).
  r.reward = beyond_terminated_ ? 0.0 : 1.0;
  if (r.terminated) beyond_terminated_ = true;
  r.observation = to_f32(s_);
  return r;
}

// ---- Acrobot ----------------------------------------------------------------------------------

namespace {

constexpr double kMaxVel1 = 4 * kPi, kMaxVel2 = 9 * kPi;

/// Time derivative of [theta1, theta2, dtheta1, dtheta2] under torque a (the "book" dynamics).
void acrobot_dsdt(const double* s, double a, double* out) {
  const double m1 = 1.0, m2 = 1.0, l1 = 1.0, lc1 = 0.5, lc2 = 0.5, I1 = 1.0, I2 = 1.0, g = 9.8;
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  const double d1 = m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(theta2)) + I1 + I2;
  const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(theta2)) + I2;
  const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - kPi / 2.0);
  const double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * std::sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - kPi / 2) + phi2;
  const double ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * std::sin(theta2) - phi2) /
                          (m2 * lc2 * lc2 + I2 - d2 * d2 / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  out[0] = dtheta1;
  out[1] = dtheta2;
  out[2] = ddtheta1;
  out[3] = ddtheta2;
}

double wrap(double x, double m, double M) {
  const double diff = M - m;
  while (x > M) x = x - diff;
  while (x < m) x = x + diff;
  return x;
}

}  // namespace

Acrobot::Acrobot() : act_(Space::make_discrete(3)), s_(4, 0.0) {
  const float v1 = static_cast<float>(kMaxVel1), v2 = static_cast<float>(kMaxVel2);
  obs_ = Space::make_box({-1, -1, -1, -1, -v1, -v2}, {1, 1, 1, 1, v1, v2});
}

void Acrobot::set_state(const std::vector<double>& s) {
  check_state("Acrobot", s, 4);
  s_ = s;
}

std::vector<float> Acrobot::observe() const {
  return {static_cast<float>(std::cos(s_[0])), static_cast<float>(std::sin(s_[0])), static_cast<float>(std::cos(s_[1])),
          static_cast<float>(std::sin(s_[1])), static_cast<float>(s_[2]),           static_cast<float>(s_[3])};
}

std::vector<float> Acrobot::do_reset(std::optional<uint64_t> seed) {
  if (seed) rng_.seed_with(*seed);
  for (auto& v : s_) v = static_cast<float>(rng_.uniform(-0.1, 0.1));  // float32, as Gymnasium
  return observe();
}

StepResult Acrobot::do_step(const std::vector<float>& action) {
  const double torque = static_cast<double>(action[0]) - 1.0;  // AVAIL_TORQUE = [-1, 0, +1]
  // One RK4 step over [0, dt] (Gymnasium's rk4 with t = [0, dt]).
  const double dt = 0.2, dt2 = dt / 2.0;
  double y0[4], k1[4], k2[4], k3[4], k4[4], y[4];
  for (int i = 0; i < 4; ++i) y0[i] = s_[static_cast<size_t>(i)];
  acrobot_dsdt(y0, torque, k1);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt2 * k1[i];
  acrobot_dsdt(y, torque, k2);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt2 * k2[i];
  acrobot_dsdt(y, torque, k3);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt * k3[i];
  acrobot_dsdt(y, torque, k4);
  for (int i = 0; i < 4; ++i) y[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  s_ = {wrap(y[0], -kPi, kPi), wrap(y[1], -kPi, kPi), std::min(std::max(y[2], -kMaxVel1), kMaxVel1),
        std::min(std::max(y[3], -kMaxVel2), kMaxVel2)};
  StepResult r;
  r.terminated = -std::cos(s_[0]) - std::cos(s_[1] + s_[0]) > 1.0;
  r.reward = r.terminated ? 0.0 : -1.0;
  r.observation = observe();
  return r;
}

// ---- MountainCar ------------------------------------------------------------------------------

MountainCar::MountainCar()
    : obs_(Space::make_box({-1.2f, -0.07f}, {0.6f, 0.07f})), act_(Space::make_discrete(3)), s_(2, 0.0) {}

void MountainCar::set_state(const std::vector<double>& s) {
  check_state("MountainCar", s, 2);
  s_ = s;
}

std::vector<float> MountainCar::do_reset(std::optional<uint64_t> seed) {
  if (seed) rng_.seed_with(*seed);
  s_ = {rng_.uniform(-0.6, -0.4), 0.0};
  return to_f32(s_);
}

StepResult MountainCar::do_step(const std::vector<float>& action) {
  const double min_position = -1.2, max_position = 0.6, max_speed = 0.07, goal_position = 0.5, force = 0.001,
               gravity = 0.0025;
  double position = s_[0], velocity = s_[1];
  velocity += (static_cast<double>(action[0]) - 1) * force + std::cos(3 * position) * (-gravity);
  velocity = std::min(std::max(velocity, -max_speed), max_speed);
  position += velocity;
  position = std::min(std::max(position, min_position), max_position);
  if (position == min_position && velocity < 0) velocity = 0;
  StepResult r;
  r.terminated = position >= goal_position && velocity >= 0.0;
  r.reward = -1.0;
  s_ = {position, velocity};
  r.observation = to_f32(s_);
  return r;
}

// ---- MountainCarContinuous --------------------------------------------------------------------

MountainCarContinuous::MountainCarContinuous()
    : obs_(Space::make_box({-1.2f, -0.07f}, {0.6f, 0.07f})), act_(Space::make_box(1, -1.0f, 1.0f)) {}

void MountainCarContinuous::set_state(const std::vector<double>& s) {
  check_state("MountainCarContinuous", s, 2);
  s_[0] = s[0];
  s_[1] = s[1];
  f32_ = false;
}

std::vector<float> MountainCarContinuous::do_reset(std::optional<uint64_t> seed) {
  if (seed) rng_.seed_with(*seed);
  s_[0] = rng_.uniform(-0.6, -0.4);
  s_[1] = 0.0;
  f32_ = false;
  return {static_cast<float>(s_[0]), 0.0f};
}

StepResult MountainCarContinuous::do_step(const std::vector<float>& action) {
  const double max_speed = 0.07, min_position = -1.2, max_position = 0.6, goal_position = 0.45;
  const float a = action[0];
  // Gymnasium keeps the state as float32 after the first step; the reset state is float64.
  double position = s_[0], velocity = s_[1];
  const bool clipped = a < -1.0f || a > 1.0f;
  const double arg = f32_ ? static_cast<double>(3.0f * static_cast<float>(position)) : 3 * position;
  const double c = 0.0025 * std::cos(arg);
  // force * power - c: float32 unless the force was clipped to a Python float.
  const double dv =
      clipped ? (a < -1.0f ? -1.0 : 1.0) * 0.0015 - c : static_cast<double>(a * 0.0015f - static_cast<float>(c));
  velocity = f32_ ? static_cast<double>(static_cast<float>(velocity) + static_cast<float>(dv)) : velocity + dv;
  if (velocity > max_speed) velocity = max_speed;
  if (velocity < -max_speed) velocity = -max_speed;
  position =
      f32_ ? static_cast<double>(static_cast<float>(position) + static_cast<float>(velocity)) : position + velocity;
  if (position > max_position) position = max_position;
  if (position < min_position) position = min_position;
  if (position == min_position && velocity < 0) velocity = 0;
  StepResult r;
  r.terminated = position >= goal_position && velocity >= 0.0;
  r.reward = (r.terminated ? 100.0 : 0.0) - std::pow(static_cast<double>(a), 2) * 0.1;
  s_[0] = static_cast<float>(position);
  s_[1] = static_cast<float>(velocity);
  f32_ = true;
  r.observation = {static_cast<float>(s_[0]), static_cast<float>(s_[1])};
  return r;
}

// ---- Pendulum ---------------------------------------------------------------------------------

Pendulum::Pendulum(double g)
    : obs_(Space::make_box({-1, -1, -8}, {1, 1, 8})), act_(Space::make_box(1, -2.0f, 2.0f)), g_(g), s_(2, 0.0) {}

void Pendulum::set_state(const std::vector<double>& s) {
  check_state("Pendulum", s, 2);
  s_ = s;
}

std::vector<float> Pendulum::observe() const {
  return {static_cast<float>(std::cos(s_[0])), static_cast<float>(std::sin(s_[0])), static_cast<float>(s_[1])};
}

std::vector<float> Pendulum::do_reset(std::optional<uint64_t> seed) {
  if (seed) rng_.seed_with(*seed);
  s_ = {rng_.uniform(-kPi, kPi), rng_.uniform(-1.0, 1.0)};
  return observe();
}

StepResult Pendulum::do_step(const std::vector<float>& action) {
  const double max_speed = 8, dt = 0.05, m = 1.0, l = 1.0;
  const double th = s_[0], thdot = s_[1];
  const float u = std::min(std::max(action[0], -2.0f), 2.0f);
  // angle_normalize: ((x + pi) % (2 pi)) - pi with NumPy's floored remainder.
  double an = std::fmod(th + kPi, 2 * kPi);
  if (an != 0 && an < 0) an += 2 * kPi;
  an -= kPi;
  const double costs = an * an + 0.1 * (thdot * thdot) + static_cast<double>(0.001f * (u * u));
  double newthdot =
      thdot + (3 * g_ / (2 * l) * std::sin(th) + static_cast<double>(static_cast<float>(3.0 / (m * l * l)) * u)) * dt;
  newthdot = std::min(std::max(newthdot, -max_speed), max_speed);
  const double newth = th + newthdot * dt;
  s_ = {newth, newthdot};
  StepResult r;
  r.reward = -costs;
  r.observation = observe();
  return r;
}

}  // namespace kiln::rl
