// SPDX-License-Identifier: MIT OR Apache-2.0
// The autodiff decorator: API, graph semantics, errors, second order, checkpointing.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "autodiff/graph.h"
#include "grad_coverage.h"
#include "gradcheck.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::ad_device;
using kiln::test::gradcheck;
using kiln::test::gradgradcheck;
using kiln::test::rand_input;

TEST(Autodiff, SimpleChain) {
  Device d = ad_device();
  Tensor x = tensor<float>({1, 2, 3}, {3}, d).require_grad();
  Tensor w = tensor<float>({4, 5, 6}, {3}, d).require_grad();
  Tensor y = (x * w + x).sum();
  Gradients g = y.backward();
  EXPECT_EQ(x.grad(g).to_vector<float>(), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(w.grad(g).to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Autodiff, Broadcasting) {
  EXPECT_EQ(gradcheck([](const std::vector<Tensor>& v) { return v[0] * v[1] - v[1] / (v[0] * v[0] + 2); },
                      {rand_input({2, 3}), rand_input({3}, -1, 1, 2)}),
            "");
}

TEST(Autodiff, ViewsAndMatmul) {
  EXPECT_EQ(gradcheck(
                [](const std::vector<Tensor>& v) {
                  Tensor a = v[0].transpose(0, 1).slice(0, 0, 3, 2);  // [2, 4]
                  return matmul(a, v[1]).exp().flip({0}).diagonal();
                },
                {rand_input({4, 3}), rand_input({4, 2}, -1, 1, 3)}),
            "");
}

TEST(Autodiff, SecondOrder) {
  EXPECT_EQ(gradgradcheck([](const std::vector<Tensor>& v) { return (v[0] * v[0] * v[1]).exp(); },
                          {rand_input({3}), rand_input({3}, -1, 1, 4)}),
            "");
}

TEST(Autodiff, Errors) {
  Tensor x = ones({2});
  EXPECT_ERROR(x.require_grad(), "[require_grad]");
  Tensor y = ones({2}, {.device = ad_device()});
  EXPECT_ERROR(y.sum().backward(), "[backward]");
  Tensor z = ones({2}, {.device = ad_device()}).require_grad();
  EXPECT_ERROR((z * 2).backward(), "seed");
}

TEST(Autodiff, DiagEmbedIsDifferentiable) {
  EXPECT_EQ(
      gradcheck([](const std::vector<Tensor>& v) { return diag_embed(v[0], 1) * 3 + diag(v[0].select(0, 0), -1); },
                {rand_input({2, 3})}),
      "");
}

// Every primitive of ops.def either has a gradient check in some test file (listed with
// KILN_GRAD_COVERED) or is marked non-differentiable.
TEST(Autodiff, EveryOpHasAGradientCheck) {
  std::string missing;
  for (int k = 0; k < ir::kNumOps; ++k) {
    auto kind = static_cast<ir::OpKind>(k);
    std::string name(ir::op_name(kind));
    if (!autodiff::rule_for(kind).differentiable) continue;
    if (!kiln::test::grad_covered().count(name)) missing += " " + name;
  }
  EXPECT_EQ(missing, "") << "ops with a gradient rule but no gradcheck:" << missing;
}
