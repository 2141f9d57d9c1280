// SPDX-License-Identifier: MIT OR Apache-2.0
// The environment interface: spaces, the generator, argument checks of reset/step, make().
#include <cmath>

#include "kiln/error.h"
#include "kiln/rl/envs.h"
#include "kiln/rl/wrappers.h"

namespace kiln::rl {

Space Space::make_discrete(int64_t n) {
  KILN_CHECK(n > 0, "rl::Space", "a discrete space needs n > 0, got " << n);
  Space s;
  s.n = n;
  return s;
}

Space Space::make_box(std::vector<float> low, std::vector<float> high) {
  KILN_CHECK(low.size() == high.size(), "rl::Space",
             "low and high differ in size: " << low.size() << " vs " << high.size());
  for (size_t i = 0; i < low.size(); ++i)
    KILN_CHECK(!(low[i] > high[i]), "rl::Space", "low[" << i << "] = " << low[i] << " > high = " << high[i]);
  Space s;
  s.low = std::move(low);
  s.high = std::move(high);
  return s;
}

Space Space::make_box(int64_t dim, float lo, float hi) {
  KILN_CHECK(dim >= 0, "rl::Space", "negative size " << dim);
  return make_box(std::vector<float>(static_cast<size_t>(dim), lo), std::vector<float>(static_cast<size_t>(dim), hi));
}

namespace {
uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

void Rng::seed_with(uint64_t seed) {
  for (auto& s : s_) s = splitmix(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return r;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t Rng::integer(int64_t n) {
  KILN_CHECK(n > 0, "rl::Rng", "integer(n) needs n > 0, got " << n);
  return static_cast<int64_t>(uniform() * static_cast<double>(n)) % n;
}

std::vector<float> Env::reset(std::optional<uint64_t> seed) {
  reset_info_.clear();
  std::vector<float> obs = do_reset(seed);
  was_reset_ = true;
  return obs;
}

StepResult Env::step(const std::vector<float>& action) {
  KILN_CHECK(was_reset_, name(), "step() before the first reset()");
  const Space& a = action_space();
  KILN_CHECK(static_cast<int64_t>(action.size()) == a.dim(), name(),
             "action of " << action.size() << " values, the action space has " << a.dim());
  if (a.discrete()) {
    const float v = action[0];
    KILN_CHECK(v >= 0 && v < static_cast<float>(a.n) && v == std::floor(v), name(),
               "action " << v << " is not in Discrete(" << a.n << ")");
  } else {
    for (float v : action) KILN_CHECK(!std::isnan(v), name(), "action holds NaN");
  }
  return do_step(action);
}

StepResult Env::step(int64_t action) {
  KILN_CHECK(action_space().discrete(), name(), "an integer action for a continuous action space");
  KILN_CHECK(action >= 0 && action < action_space().n, name(),
             "action " << action << " is not in Discrete(" << action_space().n << ")");
  return step(std::vector<float>{static_cast<float>(action)});
}

std::vector<std::string> registered_envs() {
  return {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1", "GridWorld-v0"};
}

EnvPtr make(const std::string& id) {
  if (id == "CartPole-v1") return std::make_unique<TimeLimit>(std::make_unique<CartPole>(), 500);
  if (id == "Acrobot-v1") return std::make_unique<TimeLimit>(std::make_unique<Acrobot>(), 500);
  if (id == "MountainCar-v0") return std::make_unique<TimeLimit>(std::make_unique<MountainCar>(), 200);
  if (id == "MountainCarContinuous-v0")
    return std::make_unique<TimeLimit>(std::make_unique<MountainCarContinuous>(), 999);
  if (id == "Pendulum-v1") return std::make_unique<TimeLimit>(std::make_unique<Pendulum>(), 200);
  if (id == "GridWorld-v0") return std::make_unique<TimeLimit>(std::make_unique<GridWorld>(), 100);
  std::string known;
  for (auto& n : registered_envs()) known += (known.empty() ? "" : ", ") + n;
  KILN_CHECK(false, "rl::make", "unknown environment '" << id << "' (known: " << known << ")");
  return nullptr;
}

}  // namespace kiln::rl
