// SPDX-License-Identifier: MIT OR Apache-2.0
// The modules of the further activations call their functions with their configs (the
// functions are checked against PyTorch in the conformance suite), and RReLU draws its slopes
// only in training.
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
