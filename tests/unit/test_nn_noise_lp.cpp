// SPDX-License-Identifier: MIT OR Apache-2.0
// nn::GaussianNoise: the noise's mean and spread over many draws, eval is the identity, the
// gradient passes through unchanged, draws follow manual_seed. LpLoss calls lp_loss (checked
// against PyTorch in the conformance suite) and agrees with l1_loss / mse_loss at p = 1, 2.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>

#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

TEST(NnGaussianNoise, TrainingAddsNoiseOfTheGivenSpread) {
  nn::GaussianNoise g({.stddev = 0.3});
  Tensor x = full({200, 500}, 2.0, {.dtype = f64});
  manual_seed(11);
  const auto v = g(x).to_vector<double>();
  double sum = 0, sq = 0;
  for (double y : v) {
    sum += y - 2.0;
    sq += (y - 2.0) * (y - 2.0);
  }
  const double n = static_cast<double>(v.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 5 * 0.3 / std::sqrt(n));  // 5 standard errors
  EXPECT_NEAR(sd, 0.3, 0.005);
  manual_seed(11);
  EXPECT_TRUE(equal(g(x), tensor<double>(v, {200, 500})));  // seeded
  EXPECT_EQ(g.extra_repr(), "stddev=0.3");
}

TEST(NnGaussianNoise, EvalIdentityGradientPassesThrough) {
  nn::GaussianNoise g({.stddev = 1.0});
  Tensor x = randn({3, 4}, {.device = Device::cpu().autodiff()}).require_grad();
  g.eval();
  EXPECT_TRUE(equal(g(x), x));
  g.train();
  Tensor y = g(x);
  EXPECT_FALSE(equal(y, x));
  Gradients gr = (y * 3.0).sum().backward();
  EXPECT_TRUE(allclose(gr.get(x).detach(), full({3, 4}, 3.0)));
  EXPECT_TRUE(equal(nn::GaussianNoise({.stddev = 0.0})(x), x));
  Tensor e = zeros({0, 5});
  EXPECT_EQ(g(e).shape(), Shape({0, 5}));
  Tensor nc = randn({4, 6}).transpose(0, 1);
  EXPECT_EQ(g(nc).shape(), Shape({6, 4}));
  EXPECT_EQ(g(scalar_tensor(1.0, f32)).dim(), 0);
  EXPECT_ERROR(nn::GaussianNoise({.stddev = -1.0}), "stddev");
  EXPECT_ERROR(g(zeros({2}, {.dtype = i64})), "float input");
}

TEST(NnLpLoss, ModuleAndSpecialExponents) {
  Tensor a = randn({3, 5}, {.dtype = f64}), b = randn({3, 5}, {.dtype = f64});
  EXPECT_TRUE(allclose(F::lp_loss(a, b, 1.0), F::l1_loss(a, b)));
  EXPECT_TRUE(allclose(F::lp_loss(a, b, 2.0, "sum"), F::mse_loss(a, b, "sum")));
  EXPECT_TRUE(allclose(F::lp_loss(a, b, 3.0, "none"), abs(a - b) * abs(a - b) * abs(a - b)));
  nn::LpLoss m({.p = 1.5, .reduction = "sum"});
  EXPECT_TRUE(equal(m(a, b), F::lp_loss(a, b, 1.5, "sum")));
  EXPECT_EQ(m.extra_repr(), "p=1.5, reduction=sum");
  EXPECT_ERROR(F::lp_loss(a, b, 0.0), "p > 0");
  EXPECT_ERROR(F::lp_loss(a, b, 2.0, "avg"), "reduction");
  EXPECT_ERROR(F::lp_loss(a, randn({4, 5}, {.dtype = f64})), "lp_loss");
}
