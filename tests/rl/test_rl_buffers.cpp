// SPDX-License-Identifier: MIT OR Apache-2.0
// Sum tree against a linear prefix search, GAE against the plain loop of
// scripts/gen_rl_reference.py, replay and rollout buffers, schedules.
#include <kiln/rl/buffers.h>
#include <kiln/rl/schedule.h>

#include <random>

#include "rl/rl_test_util.h"

using namespace kiln;
using kiln::test::expect_near_all;
using kiln::test::rl_vec;

namespace {
/// The reference: the smallest i with p[0] + ... + p[i] > mass (zero priorities skipped).
int64_t linear_find(const std::vector<double>& p, double mass) {
  double c = 0;
  int64_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    c += p[i];
    last = static_cast<int64_t>(i);
    if (mass < c) return last;
  }
  return last;
}
}  // namespace

TEST(RlSumTree, MatchesLinearPrefixSearch) {
  std::mt19937_64 g(1);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t cap : {1, 2, 5, 37, 64, 1000}) {
    rl::SumTree tree(cap);
    std::vector<double> p(static_cast<size_t>(cap), 0.0);
    for (int round = 0; round < 3; ++round) {
      for (int64_t i = 0; i < cap; ++i) {
        const double v = u(g) < 0.2 ? 0.0 : u(g) * 10;
        p[static_cast<size_t>(i)] = v;
        tree.set(i, v);
      }
      tree.set(0, p[0] = 0.5);  // never all zero
      double total = 0;
      for (double v : p) total += v;
      EXPECT_NEAR(tree.total(), total, 1e-9 * total);
      for (int q = 0; q < 200; ++q) {
        const double m = u(g) * total;
        const int64_t a = tree.find(m), b = linear_find(p, m);
        // Masses within rounding of a boundary may go either way.
        if (a != b) {
          double c = 0;
          for (int64_t i = 0; i <= std::min(a, b); ++i) c += p[static_cast<size_t>(i)];
          EXPECT_NEAR(c, m, 1e-9 * total) << "cap " << cap << " mass " << m;
        }
        EXPECT_GT(tree.get(a), 0.0);
      }
      EXPECT_GT(tree.get(tree.find(total * 2)), 0.0);  // clamped
    }
  }
}

TEST(RlSumTree, BadInputThrows) {
  EXPECT_THROW(rl::SumTree(0), Error);
  rl::SumTree t(4);
  EXPECT_THROW(t.find(0.5), Error);  // all zero
  EXPECT_THROW(t.set(4, 1.0), Error);
  EXPECT_THROW(t.set(-1, 1.0), Error);
  EXPECT_THROW(t.set(0, -1.0), Error);
  EXPECT_THROW(t.set(0, NAN), Error);
}

TEST(RlGae, MatchesReferenceLoop) {
  for (int i = 0; i < 3; ++i) {
    const std::string p = "gae." + std::to_string(i) + ".";
    const auto rewards = rl_vec("algos", p + "rewards"), values = rl_vec("algos", p + "values"),
               dones = rl_vec("algos", p + "dones"), last = rl_vec("algos", p + "last_value"),
               params = rl_vec("algos", p + "params");
    const int64_t N = static_cast<int64_t>(last.size()), T = static_cast<int64_t>(rewards.size()) / N;
    rl::GaeResult g = rl::gae(rewards, values, dones, last, T, N, params[0], params[1]);
    expect_near_all(g.advantages, rl_vec("algos", p + "advantages"), 1e-12, 1e-12, p + "advantages");
    expect_near_all(g.returns, rl_vec("algos", p + "returns"), 1e-12, 1e-12, p + "returns");

    // The same through the rollout buffer (f32 tensors).
    rl::RolloutBuffer buf(T, N, 2, 1);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> r(rewards.begin() + t * N, rewards.begin() + (t + 1) * N),
          v(values.begin() + t * N, values.begin() + (t + 1) * N);
      std::vector<uint8_t> d;
      for (int64_t e = 0; e < N; ++e) d.push_back(dones[static_cast<size_t>(t * N + e)] != 0);
      buf.add(std::vector<float>(static_cast<size_t>(2 * N), static_cast<float>(t)),
              std::vector<float>(static_cast<size_t>(N), 1.0f), std::vector<double>(static_cast<size_t>(N), -0.5), r, v,
              d);
    }
    EXPECT_TRUE(buf.full());
    EXPECT_THROW(buf.add({}, {}, {}, {}, {}, {}), Error);
    buf.compute_returns_and_advantages(last, params[0], params[1]);
    expect_near_all(buf.advantages().to(f64).to_vector<double>(), rl_vec("algos", p + "advantages"), 1e-5, 1e-5,
                    p + "buffer advantages");
    EXPECT_EQ(buf.observations().shape(), Shape({T * N, 2}));
    EXPECT_EQ(buf.observations().select(0, N).to_vector<float>(), std::vector<float>({1.0f, 1.0f}));
    rl::Rng rng(1);
    auto mb = buf.minibatches(5, rng);
    std::vector<int64_t> all;
    for (auto& m : mb) {
      EXPECT_LE(m.numel(), 5);
      for (int64_t x : m.to_vector<int64_t>()) all.push_back(x);
    }
    std::sort(all.begin(), all.end());
    for (int64_t k = 0; k < T * N; ++k) EXPECT_EQ(all[static_cast<size_t>(k)], k);
  }
  EXPECT_THROW(rl::gae({1.0}, {1.0}, {0.0}, {}, 1, 1, 0.9, 0.9), Error);
}

TEST(RlReplayBuffer, RingAndUniformSampling) {
  rl::ReplayBuffer buf({.capacity = 5, .obs_dim = 2});
  rl::Rng rng(3);
  EXPECT_THROW(buf.sample(4, rng), Error);
  for (int i = 0; i < 8; ++i) {  // slots 0..4, then 5, 6, 7 overwrite 0, 1, 2
    const float f = static_cast<float>(i);
    EXPECT_EQ(buf.add({f, -f}, int64_t{i % 3}, 10.0 * i, {f + 1, -f - 1}, i % 2 == 1), i % 5);
  }
  EXPECT_EQ(buf.size(), 5);
  rl::ReplayBatch b = buf.sample(64, rng);
  EXPECT_EQ(b.obs.shape(), Shape({64, 2}));
  EXPECT_EQ(b.actions.dtype(), i64);
  EXPECT_EQ(b.weights.to_vector<float>(), std::vector<float>(64, 1.0f));
  const auto o = b.obs.to_vector<float>(), no = b.next_obs.to_vector<float>(), r = b.rewards.to_vector<float>(),
             d = b.dones.to_vector<float>();
  const auto a = b.actions.to_vector<int64_t>();
  std::set<int> seen;
  for (int k = 0; k < 64; ++k) {
    const int i = static_cast<int>(o[2 * k]);
    seen.insert(i);
    EXPECT_GE(i, 3);  // 0, 1 and 2 were overwritten
    EXPECT_EQ(no[2 * k], o[2 * k] + 1);
    EXPECT_EQ(r[k], 10.0f * i);
    EXPECT_EQ(a[k], i % 3);
    EXPECT_EQ(d[k], i % 2 == 1 ? 1.0f : 0.0f);
    EXPECT_EQ(b.indices[k], i % 5);
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_THROW(buf.add({1.0f}, int64_t{0}, 0, {1.0f, 2.0f}, false), Error);
  EXPECT_THROW(rl::ReplayBuffer({.capacity = 0}), Error);
  EXPECT_THROW(rl::ReplayBuffer({.capacity = 4, .action_dim = 2, .discrete = true}), Error);
  rl::ReplayBuffer cont({.capacity = 3, .obs_dim = 1, .action_dim = 2, .discrete = false});
  cont.add({0.0f}, std::vector<float>{0.5f, -0.5f}, 1.0, {1.0f}, false);
  EXPECT_EQ(cont.sample(2, rng).actions.shape(), Shape({2, 2}));
}

TEST(RlReplayBuffer, PrioritizedSamplesInProportion) {
  rl::PrioritizedReplayBuffer buf({.capacity = 4, .obs_dim = 1}, /*alpha=*/0.5);
  for (int i = 0; i < 4; ++i) buf.add({static_cast<float>(i)}, int64_t{0}, 0.0, {0.0f}, false);
  // New transitions get the largest priority: uniform at first.
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(buf.tree().get(i), 1.0);
  // TD errors 1, 4, 9, 0 (+eps) -> priorities^0.5 = 1, 2, 3, ~0.
  buf.update_priorities({0, 1, 2, 3}, {1.0 - 1e-6, 4.0 - 1e-6, -(9.0 - 1e-6), 0.0});
  EXPECT_NEAR(buf.tree().total(), 6.0 + 1e-3, 1e-6);
  rl::Rng rng(5);
  int counts[4] = {};
  buf.beta = 1.0;
  for (int k = 0; k < 200; ++k) {
    rl::ReplayBatch b = buf.sample(30, rng);
    const auto w = b.weights.to_vector<float>();
    float wmax = 0;
    for (size_t j = 0; j < b.indices.size(); ++j) {
      counts[b.indices[j]]++;
      // w_i = (N P(i))^-1 / max: proportional to 1 / priority.
      const double expect = 1.0 / buf.tree().get(b.indices[j]);
      EXPECT_NEAR(w[j] * buf.tree().get(b.indices[j]), w[0] * buf.tree().get(b.indices[0]), 1e-4 * expect);
      wmax = std::max(wmax, w[j]);
    }
    EXPECT_FLOAT_EQ(wmax, 1.0f);
  }
  const double n = 6000;
  EXPECT_NEAR(counts[0] / n, 1.0 / 6, 0.02);
  EXPECT_NEAR(counts[1] / n, 2.0 / 6, 0.02);
  EXPECT_NEAR(counts[2] / n, 3.0 / 6, 0.02);
  EXPECT_LT(counts[3], 10);
  // A new transition gets the largest priority seen: |-9| + eps.
  buf.add({9.0f}, int64_t{0}, 0.0, {0.0f}, false);
  EXPECT_NEAR(buf.tree().get(0), 3.0, 1e-6);
  EXPECT_THROW(buf.update_priorities({0}, {}), Error);
  EXPECT_THROW(buf.update_priorities({7}, {1.0}), Error);
}

TEST(RlSchedule, LinearAndExponential) {
  rl::LinearSchedule lin{.start = 1.0, .end = 0.1, .steps = 10};
  EXPECT_DOUBLE_EQ(lin(-3), 1.0);
  EXPECT_DOUBLE_EQ(lin(0), 1.0);
  EXPECT_DOUBLE_EQ(lin(5), 0.55);
  EXPECT_DOUBLE_EQ(lin(10), 0.1);
  EXPECT_DOUBLE_EQ(lin(1000), 0.1);
  EXPECT_DOUBLE_EQ((rl::LinearSchedule{.start = 1, .end = 0, .steps = 0})(0), 0.0);
  rl::ExponentialSchedule ex{.start = 1.0, .end = 0.2, .decay = 0.5};
  EXPECT_DOUBLE_EQ(ex(0), 1.0);
  EXPECT_DOUBLE_EQ(ex(2), 0.4);
  EXPECT_NEAR(ex(100), 0.2, 1e-12);
}
