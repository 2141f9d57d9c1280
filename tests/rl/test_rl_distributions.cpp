// SPDX-License-Identifier: MIT OR Apache-2.0
// Action distributions: values and gradients against torch.distributions (reference data of
// scripts/gen_rl_reference.py), finite differences, and the statistics of their samples.
#include <kiln/rl/distributions.h>

#include "gradcheck.h"
#include "rl/rl_test_util.h"

using namespace kiln;
using kiln::test::expect_near_all;
using kiln::test::rl_ref;
using kiln::test::rl_vec;

namespace {
Tensor leaf(const std::string& key) {
  return rl_ref("dists", key).to(Device::cpu().autodiff()).to(f64).contiguous().require_grad();
}
std::vector<double> vals(const Tensor& t) { return t.detach().to(f64).contiguous().to_vector<double>(); }
}  // namespace

TEST(RlDistributions, CategoricalMatchesTorch) {
  Tensor logits = leaf("cat.logits");
  Tensor actions = rl_ref("dists", "cat.actions").to(Device::cpu().autodiff());
  rl::Categorical d(logits);
  Tensor lp = d.log_prob(actions), ent = d.entropy();
  expect_near_all(vals(lp), rl_vec("dists", "cat.log_prob"), 1e-12, 1e-10, "log_prob");
  expect_near_all(vals(ent), rl_vec("dists", "cat.entropy"), 1e-12, 1e-10, "entropy");
  expect_near_all(vals(logits.grad(lp.sum().backward({.retain_graph = true}))), rl_vec("dists", "cat.grad_log_prob"),
                  1e-12, 1e-10, "d log_prob / d logits");
  expect_near_all(vals(logits.grad(ent.sum().backward())), rl_vec("dists", "cat.grad_entropy"), 1e-12, 1e-10,
                  "d entropy / d logits");
}

TEST(RlDistributions, DiagGaussianMatchesTorch) {
  Tensor mean = leaf("gauss.mean"), log_std = leaf("gauss.log_std");
  Tensor x = rl_ref("dists", "gauss.x").to(Device::cpu().autodiff());
  rl::DiagGaussian d(mean, log_std);
  Tensor lp = d.log_prob(x), ent = d.entropy();
  expect_near_all(vals(lp), rl_vec("dists", "gauss.log_prob"), 1e-12, 1e-10, "log_prob");
  expect_near_all(vals(ent), rl_vec("dists", "gauss.entropy"), 1e-12, 1e-10, "entropy");
  Gradients g = lp.sum().backward();
  expect_near_all(vals(mean.grad(g)), rl_vec("dists", "gauss.grad_mean"), 1e-12, 1e-10, "d log_prob / d mean");
  expect_near_all(vals(log_std.grad(g)), rl_vec("dists", "gauss.grad_log_std"), 1e-12, 1e-10, "d log_prob / d log_std");
  expect_near_all(vals(log_std.grad(ent.sum().backward())), rl_vec("dists", "gauss.grad_entropy_log_std"), 1e-12, 1e-10,
                  "d entropy / d log_std");
}

TEST(RlDistributions, GradientsMatchFiniteDifferences) {
  Tensor acts = tensor<int64_t>({2, 0, 1}, {3});
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& x) {
                  rl::Categorical d(x[0]);
                  return d.log_prob(acts.to(x[0].device())) + 0.3 * d.entropy();
                },
                {test::rand_input({3, 4}, -2, 2, 1)}),
            "");
  Tensor xs = test::rand_input({3, 2}, -1, 1, 9).detach();
  EXPECT_EQ(test::gradcheck(
                [&](const std::vector<Tensor>& x) {
                  rl::DiagGaussian d(x[0], x[1]);
                  return d.log_prob(xs) + 0.5 * d.entropy();
                },
                {test::rand_input({3, 2}, -1, 1, 2), test::rand_input({2}, -0.5, 0.5, 3)}),
            "");
}

TEST(RlDistributions, SamplesFollowTheDistribution) {
  manual_seed(4);
  Tensor logits = tensor<float>({0.0f, std::log(2.0f), std::log(5.0f)}, {1, 3}).expand({4000, 3});
  rl::Categorical c(logits);
  const auto s = c.sample().to_vector<int64_t>();
  ASSERT_EQ(s.size(), 4000u);
  int counts[3] = {};
  for (int64_t a : s) counts[a]++;
  EXPECT_NEAR(counts[0] / 4000.0, 0.125, 0.02);
  EXPECT_NEAR(counts[1] / 4000.0, 0.25, 0.025);
  EXPECT_NEAR(counts[2] / 4000.0, 0.625, 0.025);
  EXPECT_EQ(c.mode().to_vector<int64_t>()[0], 2);

  rl::DiagGaussian g(full({5000, 2}, 1.5), tensor<float>({std::log(0.5f), 0.0f}, {2}));
  Tensor x = g.sample();
  EXPECT_NEAR(x.mean({0}).to_vector<float>()[0], 1.5f, 0.03f);
  EXPECT_NEAR(x.std({0}).to_vector<float>()[0], 0.5f, 0.03f);
  EXPECT_NEAR(x.std({0}).to_vector<float>()[1], 1.0f, 0.05f);
  EXPECT_FALSE(x.requires_grad());
}

TEST(RlDistributions, EmptyBatchesAndBadInput) {
  rl::Categorical e(zeros({0, 3}));
  EXPECT_EQ(e.sample().shape(), Shape({0}));
  EXPECT_EQ(e.log_prob(zeros({0}, {.dtype = i64})).shape(), Shape({0}));
  EXPECT_EQ(e.entropy().shape(), Shape({0}));
  EXPECT_THROW(rl::Categorical(zeros({2, 0})), Error);
  EXPECT_THROW(rl::Categorical(scalar_tensor(1.0)), Error);
  EXPECT_THROW(rl::Categorical(zeros({2, 3}, {.dtype = i64})), Error);
  rl::Categorical c(zeros({2, 3}));
  EXPECT_THROW(c.log_prob(tensor<int64_t>({0, 3}, {2})), Error);
  EXPECT_THROW(c.log_prob(tensor<int64_t>({0}, {1})), Error);
  EXPECT_THROW(c.log_prob(zeros({2})), Error);
  EXPECT_THROW(rl::DiagGaussian(zeros({2, 3}), zeros({2})), Error);
  rl::DiagGaussian g(zeros({2, 3}), zeros({3}));
  EXPECT_THROW(g.log_prob(zeros({3})), Error);
  EXPECT_EQ(g.entropy().shape(), Shape({2}));
  // A non-contiguous mean (a transpose) works like its copy.
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {3, 2}).t();
  rl::DiagGaussian a(m, zeros({3})), b(m.contiguous(), zeros({3}));
  EXPECT_TRUE(a.log_prob(zeros({2, 3})).allclose(b.log_prob(zeros({2, 3}))));
}
