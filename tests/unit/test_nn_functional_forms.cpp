// SPDX-License-Identifier: MIT OR Apache-2.0
// The functional form of every activation, dropout, embedding and normalisation module
// (kiln/nn/functional/activation.h, norm.h): the same results as the module, and for the
// dropouts PyTorch's statistics.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"
#include "kiln/nn.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

void expect_same(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_TRUE(a.allclose(b, 1e-6, 1e-6)) << what;
}

double mean_of(const Tensor& t) { return t.to(f64).mean().item<double>(); }

}  // namespace

TEST(NnFunctionalForms, ActivationsMatchTheirModules) {
  manual_seed(1);
  Tensor x = randn({3, 4, 5});
  expect_same(F::relu(x), nn::ReLU()(x), "relu");
  expect_same(F::leaky_relu(x, 0.2), nn::LeakyReLU({.negative_slope = 0.2})(x), "leaky_relu");
  expect_same(F::gelu(x, "tanh"), nn::GELU({.approximate = "tanh"})(x), "gelu");
  expect_same(F::silu(x), nn::SiLU()(x), "silu");
  expect_same(F::mish(x), nn::Mish()(x), "mish");
  expect_same(F::tanh(x), nn::Tanh()(x), "tanh");
  expect_same(F::sigmoid(x), nn::Sigmoid()(x), "sigmoid");
  expect_same(F::selu(x), nn::SELU()(x), "selu");
  expect_same(F::hardswish(x), nn::Hardswish()(x), "hardswish");
  expect_same(F::softmax(x, 1), nn::Softmax({.dim = 1})(x), "softmax");
  expect_same(F::log_softmax(x, -1), nn::LogSoftmax({.dim = -1})(x), "log_softmax");
  expect_same(F::softplus(x, 2.0, 10.0), nn::Softplus({.beta = 2.0, .threshold = 10.0})(x), "softplus");
  expect_same(F::elu(x, 0.5), nn::ELU({.alpha = 0.5})(x), "elu");
  expect_same(F::glu(x, 1), nn::GLU({.dim = 1})(x), "glu");
  nn::PReLU prelu({.num_parameters = 4, .init = 0.1});
  expect_same(F::prelu(x, prelu.weight), prelu(x), "prelu");
  nn::PReLU prelu1(nn::PReLUConfig{});
  expect_same(F::prelu(x, prelu1.weight), prelu1(x), "prelu, one slope");
  EXPECT_THROW(F::prelu(x, ones({3})), Error);
  EXPECT_THROW(F::glu(x, 2), Error);  // odd size
}

TEST(NnFunctionalForms, NormalisationsAndLookupsMatchTheirModules) {
  manual_seed(2);
  Tensor x = randn({2, 6, 5});
  nn::LayerNorm ln({.normalized_shape = {5}});
  expect_same(F::layer_norm(x, {5}, ln.weight, ln.bias), ln(x), "layer_norm");
  nn::GroupNorm gn({.num_groups = 3, .num_channels = 6});
  expect_same(F::group_norm(x, 3, gn.weight, gn.bias), gn(x), "group_norm");
  nn::RMSNorm rms({.normalized_shape = {5}});
  expect_same(F::rms_norm(x, {5}, rms.weight), rms(x), "rms_norm");

  nn::Embedding emb({.num_embeddings = 7, .embedding_dim = 3, .padding_idx = 0});
  Tensor idx = tensor<int64_t>({0, 3, 6, 3}, {2, 2});
  expect_same(F::embedding(idx, emb.weight, 0), emb(idx), "embedding");
  EXPECT_THROW(F::embedding(idx.to(f32), emb.weight), Error);

  nn::Bilinear bl({.in1_features = 3, .in2_features = 4, .out_features = 2});
  Tensor a = randn({5, 3}), b = randn({5, 4});
  expect_same(F::bilinear(a, b, bl.weight, bl.bias), bl(a, b), "bilinear");
}

TEST(NnFunctionalForms, EmbeddingPaddingRowGetsNoGradient) {
  const Device ad = Device::cpu().autodiff();
  Tensor w = randn({4, 2}, {.device = ad}).require_grad();
  Tensor idx = tensor<int64_t>({1, 2, 1}, {3}).to(ad);
  Gradients g = F::embedding(idx, w, /*padding_idx=*/-3).sum().backward();  // -3 is row 1
  std::vector<float> gw = w.grad(g).to_vector<float>();
  EXPECT_EQ(gw[2], 0.f);  // row 1
  EXPECT_EQ(gw[3], 0.f);
  EXPECT_EQ(gw[4], 1.f);  // row 2
}

TEST(NnFunctionalForms, DropoutIsIdentityOutOfTrainingAndKeepsTheMean) {
  manual_seed(3);
  Tensor x = ones({200000});
  EXPECT_TRUE(F::dropout(x, 0.3, /*training=*/false).equal(x));
  EXPECT_TRUE(F::dropout(x, 0.0).equal(x));
  EXPECT_TRUE(F::alpha_dropout(x, 0.3).equal(x));  // training defaults to false, as PyTorch
  EXPECT_EQ(F::dropout(x, 1.0).abs().sum().item<double>(), 0.0);

  Tensor y = F::dropout(x, 0.3);  // training defaults to true
  const double zeros = (y == 0.0).to(f64).mean().item<double>();
  EXPECT_NEAR(zeros, 0.3, 0.01);
  EXPECT_NEAR(mean_of(y), 1.0, 0.02);
  EXPECT_NEAR(y.max().item<double>(), 1.0 / 0.7, 1e-5);  // kept values scaled by 1 / (1 - p)
  EXPECT_THROW(F::dropout(x, 1.5), Error);
  EXPECT_THROW(F::dropout(tensor<int64_t>({1, 2}, {2}), 0.5), Error);

  // The module is the functional form with training = is_training().
  nn::Dropout drop({.p = 0.3});
  drop.eval();
  EXPECT_TRUE(drop(x).equal(x));
}

TEST(NnFunctionalForms, ChannelDropoutsZeroWholeChannels) {
  manual_seed(4);
  Tensor x = ones({8, 16, 5, 5});
  Tensor y = F::dropout2d(x, 0.5);
  // Each (n, c) plane is all zeros or all 2.
  Tensor mx = y.amax({2, 3}), mn = y.amin({2, 3});
  EXPECT_TRUE(mx.equal(mn));
  const double dropped = (mx == 0.0).to(f64).mean().item<double>();
  EXPECT_GT(dropped, 0.3);
  EXPECT_LT(dropped, 0.7);
  EXPECT_TRUE(F::dropout2d(x, 0.5, false).equal(x));
  Tensor z = F::dropout1d(ones({4, 32, 7}), 0.25);
  EXPECT_TRUE(z.amax({2}).equal(z.amin({2})));
  Tensor w = F::dropout3d(ones({2, 8, 2, 3, 3}), 0.5);
  EXPECT_TRUE(w.amax({2, 3, 4}).equal(w.amin({2, 3, 4})));
  EXPECT_THROW(F::dropout2d(ones({4}), 0.5), Error);
}

TEST(NnFunctionalForms, AlphaDropoutKeepsZeroMeanAndUnitVariance) {
  manual_seed(5);
  Tensor x = randn({400000});
  Tensor y = F::alpha_dropout(x, 0.2, /*training=*/true);
  EXPECT_NEAR(mean_of(y), 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(mean_of(y.square()) - std::pow(mean_of(y), 2)), 1.0, 0.01);
  // Dropped elements all take one value, a * (-alpha) + b (PyTorch's constants).
  const double alpha = 1.7580993408473766, p = 0.2;
  const double a = 1.0 / std::sqrt((alpha * alpha * p + 1.0) * (1.0 - p));
  const double dropped_value = -alpha * a + alpha * a * p;
  const double share = ((y - dropped_value).abs() < 1e-5).to(f64).mean().item<double>();
  EXPECT_NEAR(share, p, 0.01);

  Tensor f = F::feature_alpha_dropout(zeros({16, 32, 3}), 0.5, true);
  EXPECT_TRUE(f.amax({2}).equal(f.amin({2})));  // one draw per channel
  EXPECT_THROW(F::feature_alpha_dropout(zeros({3}), 0.5, true), Error);
}
