// SPDX-License-Identifier: MIT OR Apache-2.0
// The modules of the further activations and losses call their functions with their configs
// (the functions are checked against PyTorch in the conformance suite), RReLU draws its slopes
// only in training, and bad input is a clear error.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

TEST(NnActivations, FurtherModulesMatchTheirFunctions) {
  Tensor x = randn({4, 5}) * 2;
  EXPECT_TRUE(equal(nn::LogSigmoid()(x), F::logsigmoid(x)));
  EXPECT_TRUE(equal(nn::Tanhshrink()(x), F::tanhshrink(x)));
  EXPECT_TRUE(equal(nn::Hardshrink({.lambd = 1.0})(x), F::hardshrink(x, 1.0)));
  EXPECT_TRUE(equal(nn::Softshrink({.lambd = 0.7})(x), F::softshrink(x, 0.7)));
  EXPECT_TRUE(equal(nn::Threshold({.threshold = 0.1, .value = 20})(x), F::threshold(x, 0.1, 20)));
  EXPECT_TRUE(equal(nn::Hardtanh({.min_val = -0.5, .max_val = 2})(x), hardtanh(x, -0.5, 2)));
  EXPECT_TRUE(equal(nn::CELU({.alpha = 2})(x), celu(x, 2)));
  EXPECT_EQ(nn::Threshold({.threshold = 0.1, .value = 20}).extra_repr(), "threshold=0.1, value=20");
  nn::RReLU r({.lower = 0.1, .upper = 0.3});
  r.eval();
  EXPECT_TRUE(equal(r(x), leaky_relu(x, 0.2)));
  r.train();
  manual_seed(4);
  Tensor y = r(x);
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    if (xv[i] > 0) {
      EXPECT_EQ(yv[i], xv[i]);
    } else {
      EXPECT_GE(yv[i] / xv[i], 0.1f - 1e-6f);
      EXPECT_LE(yv[i] / xv[i], 0.3f + 1e-6f);
    }
  }
  EXPECT_ERROR(F::hardshrink(x, -1), "lambda");
  EXPECT_ERROR(F::rrelu(x, 0.5, 0.1, true), "lower bound");
  EXPECT_ERROR(F::logsigmoid(ones({2}, {.dtype = i64})), "floating");
}

TEST(NnLosses, MarginAndGaussianModulesMatchTheirFunctionsAndCheckInput) {
  Tensor x = randn({4, 5}), y = tensor<int64_t>({0, 4, 2, 1}, {4});
  Tensor w = rand({5}) + 0.5;
  nn::MultiMarginLoss mm({.p = 2, .margin = 0.5, .weight = w});
  EXPECT_TRUE(equal(mm(x, y), F::multi_margin_loss(x, y, {.p = 2, .margin = 0.5, .weight = w})));
  Tensor pm = where(rand({4, 5}) > 0.5, 1.0, -1.0);
  EXPECT_TRUE(equal(nn::SoftMarginLoss({.reduction = "sum"})(x, pm), F::soft_margin_loss(x, pm, "sum")));
  Tensor var = rand({4, 5}) + 0.1;
  EXPECT_TRUE(equal(nn::GaussianNLLLoss({.full = true})(x, x * 0.5, var),
                    F::gaussian_nll_loss(x, x * 0.5, var, {.full = true})));
  EXPECT_ERROR(F::multi_margin_loss(x, tensor<int64_t>({0, 5, 0, 0}, {4})), "out of range");
  EXPECT_ERROR(F::multi_margin_loss(x, y, {.p = 3}), "p == 1 and p == 2");
  EXPECT_ERROR(F::multi_margin_loss(x, y.to(f32)), "integer class indices");
  EXPECT_ERROR(F::gaussian_nll_loss(x, x, -var), "negative entries");
  EXPECT_ERROR(F::gaussian_nll_loss(x, x, rand({4, 2})), "does not fit input");
  EXPECT_ERROR(F::multilabel_soft_margin_loss(x, x.narrow(1, 0, 2)), "one shape");
}
