// SPDX-License-Identifier: MIT OR Apache-2.0
// Initialisers and the basic layers (kiln/nn/init.h, kiln/nn/layers.h). Forward and gradient
// values against PyTorch are in the conformance suite (registry_nn_layers.cpp); these tests
// check init statistics, shapes, names, modes, containers and errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/nn/activation.h>
#include <kiln/nn/norm_layers.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
namespace init = kiln::nn::init;

namespace {

double mean_of(const Tensor& t) { return t.to(f64).mean().item<double>(); }
double std_of(const Tensor& t) { return t.to(f64).std().item<double>(); }
double max_of(const Tensor& t) { return t.max().item<double>(); }
double min_of(const Tensor& t) { return t.min().item<double>(); }

std::vector<std::string> names(nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, t] : m.named_parameters()) out.push_back(n);
  return out;
}

template <class Fn>
std::string error_of(Fn&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---- initialisers -------------------------------------------------------------------------------

TEST(NnInit, GainAndFans) {
  EXPECT_DOUBLE_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_THROW(init::calculate_gain("swish"), Error);
  EXPECT_EQ(init::calculate_fan_in_and_fan_out({64, 32, 3, 3}), std::make_pair(int64_t{288}, int64_t{576}));
  EXPECT_EQ(init::calculate_fan_in_and_fan_out({10, 20}), std::make_pair(int64_t{20}, int64_t{10}));
  EXPECT_THROW(init::calculate_fan_in_and_fan_out({10}), Error);
}

TEST(NnInit, ConstantUniformNormal) {
  manual_seed(1);
  Tensor t = empty({200, 500});
  init::constant_(t, 0.25);
  EXPECT_EQ(min_of(t), 0.25);
  EXPECT_EQ(max_of(t), 0.25);
  init::zeros_(t);
  EXPECT_EQ(max_of(t.abs()), 0.0);
  init::ones_(t);
  EXPECT_EQ(min_of(t), 1.0);

  init::uniform_(t, -2.0, 3.0);
  EXPECT_GE(min_of(t), -2.0);
  EXPECT_LT(max_of(t), 3.0);
  EXPECT_NEAR(mean_of(t), 0.5, 0.02);
  EXPECT_NEAR(std_of(t), 5.0 / std::sqrt(12.0), 0.02);

  init::normal_(t, 1.0, 2.0);
  EXPECT_NEAR(mean_of(t), 1.0, 0.03);
  EXPECT_NEAR(std_of(t), 2.0, 0.03);

  Tensor e = empty({3, 4});
  init::eye_(e);
  EXPECT_TRUE(e.equal(eye(3, 4)));
  Tensor i = zeros({4}, {.dtype = i64});
  EXPECT_THROW(init::uniform_(i), Error);
}

TEST(NnInit, TruncNormal) {
  manual_seed(2);
  Tensor t = empty({100000});
  init::trunc_normal_(t);
  EXPECT_GE(min_of(t), -2.0);
  EXPECT_LE(max_of(t), 2.0);
  EXPECT_NEAR(mean_of(t), 0.0, 0.01);
  // Std of N(0, 1) truncated to [-2, 2]: sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))).
  const double phi2 = std::exp(-2.0) / std::sqrt(2 * M_PI), Z = std::erf(2.0 / std::sqrt(2.0));
  EXPECT_NEAR(std_of(t), std::sqrt(1 - 4 * phi2 / Z), 0.01);
  init::trunc_normal_(t, 0.0, 0.02, -0.04, 0.04);  // the transformer convention
  EXPECT_GE(min_of(t), -0.04);
  EXPECT_LE(max_of(t), 0.04);
  EXPECT_NEAR(std_of(t), 0.02 * std::sqrt(1 - 4 * phi2 / Z), 0.0005);
}

TEST(NnInit, XavierAndKaiming) {
  manual_seed(3);
  Tensor w = empty({256, 512});
  const double xb = std::sqrt(6.0 / 768.0);
  init::xavier_uniform_(w);
  EXPECT_LE(max_of(w.abs()), xb);
  EXPECT_NEAR(std_of(w), xb / std::sqrt(3.0), 0.002);
  init::xavier_uniform_(w, 2.0);
  EXPECT_NEAR(std_of(w), 2 * xb / std::sqrt(3.0), 0.004);
  init::xavier_normal_(w);
  EXPECT_NEAR(std_of(w), std::sqrt(2.0 / 768.0), 0.001);

  // kaiming defaults: a = 0, fan_in, leaky_relu -> gain sqrt(2).
  init::kaiming_uniform_(w);
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 512.0);
  EXPECT_LE(max_of(w.abs()), kb);
  EXPECT_GT(max_of(w.abs()), 0.99 * kb);
  EXPECT_NEAR(std_of(w), kb / std::sqrt(3.0), 0.002);

  Tensor c = empty({64, 32, 3, 3});
  init::kaiming_normal_(c, {.mode = "fan_out", .nonlinearity = "relu"});
  EXPECT_NEAR(std_of(c), std::sqrt(2.0 / 576.0), 0.002);
  EXPECT_NEAR(mean_of(c), 0.0, 0.002);
  // PyTorch's layer default: a = sqrt(5) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  init::kaiming_uniform_(c, {.a = std::sqrt(5.0)});
  EXPECT_LE(max_of(c.abs()), 1.0 / std::sqrt(288.0) + 1e-7);
  EXPECT_GT(max_of(c.abs()), 0.99 / std::sqrt(288.0));
  EXPECT_THROW(init::kaiming_uniform_(c, {.mode = "fan_avg"}), Error);
  EXPECT_THROW(init::xavier_uniform_(empty({5})), Error);
}

TEST(NnInit, Orthogonal) {
  manual_seed(4);
  for (Shape s : {Shape{30, 50}, Shape{50, 30}, Shape{8, 4, 3}, Shape{16, 16}}) {
    Tensor w = empty(s, {.dtype = f64});
    init::orthogonal_(w, 2.0);
    Tensor m = w.reshape({s[0], -1});
    Tensor g = m.size(0) <= m.size(1) ? m.matmul(m.t()) : m.t().matmul(m);
    EXPECT_TRUE(g.allclose(eye(g.size(0), {}, {.dtype = f64}) * 4.0, 1e-9, 1e-9)) << to_string(s);
  }
  Tensor w32 = empty({6, 6});
  init::orthogonal_(w32);
  EXPECT_TRUE(w32.matmul(w32.t()).allclose(eye(6), 1e-5, 1e-5));
  EXPECT_THROW(init::orthogonal_(empty({4})), Error);
}

TEST(NnInit, FillsParamsInPlaceAndKeepsTracking) {
  const Device ad = Device::cpu().autodiff();
  nn::Linear lin({.in_features = 4, .out_features = 3}, ad);
  Tensor before = lin.weight;
  init::constant_(lin.weight, 0.5);
  EXPECT_TRUE(lin.weight.requires_grad());
  EXPECT_TRUE(before.is_same_storage(lin.weight));
  EXPECT_EQ(min_of(before), 0.5);
  Tensor y = lin(ones({2, 4}, {.device = ad})).sum();
  auto g = y.backward();
  EXPECT_TRUE(lin.weight.grad(g).defined());
}

// ---- convolutions -------------------------------------------------------------------------------

TEST(NnLayers, ConvShapesAndInit) {
  manual_seed(5);
  nn::Conv2d conv({.in_channels = 16, .out_channels = 32, .kernel_size = 3, .padding = 1, .groups = 2});
  EXPECT_EQ(conv.weight.shape(), (Shape{32, 8, 3, 3}));
  EXPECT_EQ(conv.bias.shape(), (Shape{32}));
  const double bound = 1.0 / std::sqrt(72.0);
  EXPECT_LE(max_of(conv.weight.abs()), bound + 1e-7);
  EXPECT_GT(max_of(conv.weight.abs()), 0.9 * bound);
  EXPECT_LE(max_of(conv.bias.abs()), bound + 1e-7);
  EXPECT_EQ(conv(randn({2, 16, 10, 12})).shape(), (Shape{2, 32, 10, 12}));
  EXPECT_EQ(conv(randn({16, 10, 12})).shape(), (Shape{32, 10, 12}));
  EXPECT_EQ(names(conv), (std::vector<std::string>{"weight", "bias"}));

  nn::Conv1d c1({.in_channels = 3, .out_channels = 5, .kernel_size = 4, .stride = 2, .bias = false});
  EXPECT_FALSE(c1.bias.defined());
  EXPECT_EQ(names(c1), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(c1(randn({2, 3, 11})).shape(), (Shape{2, 5, 4}));
  nn::Conv3d c3({.in_channels = 2, .out_channels = 4, .kernel_size = {1, 2, 3}, .padding = "same"});
  EXPECT_EQ(c3(randn({1, 2, 5, 6, 7})).shape(), (Shape{1, 4, 5, 6, 7}));
  EXPECT_EQ(conv.str().substr(0, 7), "Conv2d(");
}

TEST(NnLayers, ConvPaddingModes) {
  manual_seed(6);
  Tensor x = randn({2, 3, 7, 8});
  for (std::string mode : {"reflect", "replicate", "circular"}) {
    nn::Conv2d c({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .padding = {1, 2}, .padding_mode = mode});
    Tensor expect = nn::functional::conv2d(pad(x, {2, 2, 1, 1}, mode), c.weight, c.bias);
    EXPECT_TRUE(c(x).allclose(expect, 1e-5, 1e-5)) << mode;
  }
  EXPECT_THROW(nn::Conv2d({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .padding_mode = "mirror"}), Error);
  EXPECT_THROW(nn::Conv2d({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .stride = 2, .padding = "same"}),
               Error);
  EXPECT_THROW(nn::Conv2d({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .groups = 2}), Error);
  EXPECT_THROW(nn::Conv2d({.in_channels = 3, .out_channels = 4}), Error);  // no kernel_size
}

TEST(NnLayers, ConvTranspose) {
  manual_seed(7);
  nn::ConvTranspose2d ct(
      {.in_channels = 8, .out_channels = 4, .kernel_size = 3, .stride = 2, .padding = 1, .groups = 2});
  EXPECT_EQ(ct.weight.shape(), (Shape{8, 2, 3, 3}));
  // PyTorch's fan for this layout: weight.size(1) * k*k = 18.
  EXPECT_LE(max_of(ct.weight.abs()), 1.0 / std::sqrt(18.0) + 1e-7);
  Tensor x = randn({2, 8, 5, 5});
  EXPECT_EQ(ct(x).shape(), (Shape{2, 4, 9, 9}));
  EXPECT_EQ(ct(x, {10, 10}).shape(), (Shape{2, 4, 10, 10}));
  EXPECT_EQ(ct(x, {2, 4, 10, 10}).shape(), (Shape{2, 4, 10, 10}));
  EXPECT_THROW(ct(x, {12, 12}), Error);
  nn::ConvTranspose1d c1({.in_channels = 2, .out_channels = 3, .kernel_size = 4, .stride = 3});
  EXPECT_EQ(c1(randn({2, 6})).shape(), (Shape{3, 19}));
  nn::ConvTranspose3d c3({.in_channels = 2, .out_channels = 2, .kernel_size = 2, .stride = 2, .bias = false});
  EXPECT_EQ(c3(randn({1, 2, 2, 3, 4})).shape(), (Shape{1, 2, 4, 6, 8}));
}

TEST(NnLayers, ErrorsNameTheLayer) {
  nn::Conv2d conv({.in_channels = 3, .out_channels = 8, .kernel_size = 3});
  const std::string e = error_of([&] { conv(randn({2, 4, 8, 8})); });
  EXPECT_NE(e.find("[Conv2d]"), std::string::npos) << e;
  EXPECT_NE(e.find("Conv2d(3, 8, kernel_size=(3, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 4, 8, 8]"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { conv(randn({8, 8})); }).find("[8, 8]"), std::string::npos);

  nn::ConvTranspose1d ct({.in_channels = 3, .out_channels = 8, .kernel_size = 3});
  EXPECT_NE(error_of([&] { ct(randn({2, 4, 8})); }).find("ConvTranspose1d(3, 8"), std::string::npos);
  nn::MaxPool2d mp({.kernel_size = 2});
  const std::string pe = error_of([&] { mp(randn({8})); });
  EXPECT_NE(pe.find("MaxPool2d(kernel_size=(2, 2)"), std::string::npos) << pe;
  nn::Bilinear bl({.in1_features = 3, .in2_features = 4, .out_features = 2});
  EXPECT_NE(error_of([&] { bl(randn({5, 3}), randn({5, 5})); }).find("[Bilinear]"), std::string::npos);
  nn::Embedding emb({.num_embeddings = 10, .embedding_dim = 3});
  EXPECT_NE(error_of([&] { emb(randn({4})); }).find("[Embedding]"), std::string::npos);
  nn::Flatten fl({.start_dim = 3});
  const std::string fe = error_of([&] { fl(randn({2, 3})); });
  EXPECT_NE(fe.find("[Flatten] Flatten(start_dim=3"), std::string::npos) << fe;
  nn::Dropout2d d2;
  EXPECT_NE(error_of([&] { d2(randn({3})); }).find("[Dropout2d]"), std::string::npos);
  nn::Upsample up({.scale_factor = 2.0});
  EXPECT_NE(error_of([&] { up(randn({3, 4})); }).find("[Upsample]"), std::string::npos);
}

// ---- pooling and shape layers ---------------------------------------------------------------------

TEST(NnLayers, PoolsMatchFunctional) {
  namespace F = nn::functional;
  manual_seed(8);
  Tensor x = randn({2, 3, 9, 10});
  nn::MaxPool2d mp({.kernel_size = 3, .stride = 2, .padding = 1});
  EXPECT_TRUE(mp(x).equal(F::max_pool2d(x, 3, {.stride = 2, .padding = 1})));
  auto [v, idx] = mp.forward_with_indices(x);
  EXPECT_TRUE(v.equal(mp(x)));
  EXPECT_EQ(idx.dtype(), i64);
  nn::AvgPool1d ap({.kernel_size = 2});
  EXPECT_EQ(ap(randn({2, 3, 9})).shape(), (Shape{2, 3, 4}));
  nn::AvgPool3d ap3({.kernel_size = 2, .stride = 1});
  EXPECT_EQ(ap3(randn({1, 2, 3, 4, 5})).shape(), (Shape{1, 2, 2, 3, 4}));
  nn::MaxPool1d mp1({.kernel_size = 2});
  nn::MaxPool3d mp3({.kernel_size = 2});
  EXPECT_EQ(mp1(randn({3, 8})).shape(), (Shape{3, 4}));
  EXPECT_EQ(mp3(randn({1, 1, 4, 4, 4})).shape(), (Shape{1, 1, 2, 2, 2}));
  nn::AdaptiveAvgPool2d gap({.output_size = 1});
  EXPECT_TRUE(gap(x).allclose(x.mean({2, 3}, true), 1e-5, 1e-6));
  nn::AdaptiveAvgPool1d aap1({.output_size = 3});
  nn::AdaptiveAvgPool3d aap3({.output_size = {2, std::nullopt, 1}});
  EXPECT_EQ(aap1(randn({2, 3, 10})).shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(aap3(randn({2, 3, 4, 5, 6})).shape(), (Shape{2, 3, 2, 5, 1}));
  nn::AdaptiveMaxPool2d amp({.output_size = {std::nullopt, 2}});
  EXPECT_EQ(amp(x).shape(), (Shape{2, 3, 9, 2}));
  nn::AdaptiveMaxPool1d amp1({.output_size = 4});
  EXPECT_EQ(amp1.forward_with_indices(randn({2, 3, 10})).second.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(mp.str().find("MaxPool2d(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1)"), 0u) << mp.str();
}

TEST(NnLayers, ShapeLayers) {
  Tensor x = randn({2, 4, 3, 5});
  EXPECT_TRUE(nn::Identity()(x).is_same_storage(x));
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten({.start_dim = 0, .end_dim = 1})(x).shape(), (Shape{8, 3, 5}));
  EXPECT_EQ(nn::Unflatten({.dim = 1, .sizes = {2, 2}})(x).shape(), (Shape{2, 2, 2, 3, 5}));
  EXPECT_EQ(nn::Unflatten({.dim = -1, .sizes = {-1, 1}})(x).shape(), (Shape{2, 4, 3, 5, 1}));
  Tensor ps = nn::PixelShuffle({.upscale_factor = 2})(x);
  EXPECT_EQ(ps.shape(), (Shape{2, 1, 6, 10}));
  EXPECT_TRUE(nn::PixelUnshuffle({.downscale_factor = 2})(ps).equal(x));
  EXPECT_EQ(nn::Upsample({.scale_factor = 2.0, .mode = "nearest"})(x).shape(), (Shape{2, 4, 6, 10}));
  EXPECT_EQ(nn::Upsample({.size = {4, 4}, .mode = "bilinear", .align_corners = true})(x).shape(), (Shape{2, 4, 4, 4}));
  EXPECT_THROW(nn::Upsample(nn::UpsampleConfig{}), Error);
}

// ---- Bilinear, Embedding ------------------------------------------------------------------------

TEST(NnLayers, BilinearMatchesDefinition) {
  manual_seed(9);
  nn::Bilinear bl({.in1_features = 3, .in2_features = 4, .out_features = 2});
  EXPECT_EQ(bl.weight.shape(), (Shape{2, 3, 4}));
  EXPECT_LE(max_of(bl.weight.abs()), 1.0 / std::sqrt(3.0));
  Tensor x1 = randn({5, 3}), x2 = randn({5, 4});
  Tensor expect = einsum("ni,oij,nj->no", {x1, bl.weight, x2}) + bl.bias;
  EXPECT_TRUE(bl(x1, x2).allclose(expect, 1e-5, 1e-5));
  EXPECT_EQ(bl(randn({2, 6, 3}), randn({2, 6, 4})).shape(), (Shape{2, 6, 2}));
}

TEST(NnLayers, EmbeddingPaddingIdx) {
  manual_seed(10);
  const Device ad = Device::cpu().autodiff();
  nn::Embedding emb({.num_embeddings = 6, .embedding_dim = 3, .padding_idx = -1}, ad);
  EXPECT_EQ(*emb.config.padding_idx, 5);
  EXPECT_EQ(max_of(emb.weight.select(0, 5).abs()), 0.0);
  EXPECT_NEAR(std_of(nn::Embedding({.num_embeddings = 1000, .embedding_dim = 100}).weight), 1.0, 0.02);
  Tensor idx = tensor<int64_t>({0, 5, 2, 5, 0}, {5}, ad);
  Tensor y = emb(idx);
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  EXPECT_TRUE(y.select(0, 2).equal(emb.weight.select(0, 2)));
  auto g = y.sum().backward();
  Tensor gw = emb.weight.grad(g);
  EXPECT_EQ(max_of(gw.select(0, 5).abs()), 0.0);
  EXPECT_EQ(min_of(gw.select(0, 0)), 2.0);
  EXPECT_THROW(nn::Embedding({.num_embeddings = 4, .embedding_dim = 2, .padding_idx = 4}), Error);
}

// ---- dropout --------------------------------------------------------------------------------------

TEST(NnLayers, DropoutTrainAndEval) {
  manual_seed(11);
  nn::Dropout d({.p = 0.3});
  EXPECT_TRUE(d.is_training());
  Tensor x = ones({200, 500});
  Tensor y = d(x);
  const double zero_frac = mean_of((y == 0.0).to(f32));
  EXPECT_NEAR(zero_frac, 0.3, 0.01);
  EXPECT_NEAR(max_of(y), 1.0 / 0.7, 1e-5);
  EXPECT_NEAR(mean_of(y), 1.0, 0.02);
  d.eval();
  EXPECT_TRUE(d(x).is_same_storage(x));
  d.train();
  EXPECT_EQ(max_of(nn::Dropout({.p = 1.0})(x)), 0.0);
  EXPECT_THROW(nn::Dropout({.p = 1.5}), Error);

  // Gradient: the same mask scales the gradient.
  const Device ad = Device::cpu().autodiff();
  Tensor xa = randn({50, 40}, {.device = ad}).require_grad();
  Tensor ya = d(xa);
  auto g = ya.sum().backward();
  Tensor gx = xa.grad(g);
  EXPECT_TRUE((gx == 0.0).equal(ya == 0.0));
}

TEST(NnLayers, FeatureDropoutZeroesChannels) {
  manual_seed(12);
  nn::Dropout2d d({.p = 0.5});
  Tensor y = d(ones({8, 16, 5, 6}));
  Tensor per_channel_max = y.amax({2, 3}), per_channel_min = y.amin({2, 3});
  EXPECT_TRUE(per_channel_max.equal(per_channel_min));  // whole channels kept or zeroed
  const double frac = mean_of((per_channel_max == 0.0).to(f32));
  EXPECT_GT(frac, 0.3);
  EXPECT_LT(frac, 0.7);
  EXPECT_NEAR(max_of(y), 2.0, 1e-6);
  nn::Dropout1d d1({.p = 0.5});
  Tensor y1 = d1(ones({16, 30}));  // unbatched [C, L]
  EXPECT_TRUE(y1.amax({1}).equal(y1.amin({1})));
  nn::Dropout3d d3({.p = 0.5});
  Tensor y3 = d3(ones({2, 8, 2, 3, 4}));
  EXPECT_TRUE(y3.amax({2, 3, 4}).equal(y3.amin({2, 3, 4})));
  d.eval();
  Tensor x = randn({2, 3, 4, 4});
  EXPECT_TRUE(d(x).equal(x));
}

// ---- containers -----------------------------------------------------------------------------------

TEST(NnContainers, SequentialNamesForwardAndCopies) {
  manual_seed(13);
  nn::Sequential seq(nn::Conv2d({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .padding = 1}), nn::ReLU(),
                     nn::MaxPool2d({.kernel_size = 2}));
  seq.push_back(nn::Flatten()).push_back(nn::Linear({.in_features = 64, .out_features = 10}));
  EXPECT_EQ(seq.size(), 5u);
  EXPECT_EQ(names(seq), (std::vector<std::string>{"0.weight", "0.bias", "4.weight", "4.bias"}));
  Tensor x = randn({2, 3, 8, 8});
  auto& conv = seq.at<nn::Conv2d>(0);
  auto& lin = seq.at<nn::Linear>(4);
  Tensor expect = lin(flatten(nn::functional::max_pool2d(relu(conv(x)), 2), 1));
  EXPECT_TRUE(seq(x).allclose(expect, 1e-6, 1e-6));
  EXPECT_THROW(seq.at<nn::Linear>(0), Error);
  EXPECT_THROW(seq[7], Error);

  // Copies hold their own modules (sharing tensors); deep_copy separates the tensors.
  nn::Sequential copy = seq;
  EXPECT_TRUE(copy.at<nn::Conv2d>(0).weight.is_same_storage(conv.weight));
  copy.eval();
  EXPECT_TRUE(seq[1].is_training());
  EXPECT_FALSE(copy[1].is_training());
  nn::Sequential deep = nn::deep_copy(seq);
  EXPECT_FALSE(deep.at<nn::Conv2d>(0).weight.is_same_storage(conv.weight));
  EXPECT_TRUE(deep(x).allclose(seq(x), 1e-6, 1e-6));

  // train/eval reach the children; nested Sequentials name their children with dots.
  nn::Sequential outer(nn::Sequential(nn::Linear({.in_features = 4, .out_features = 4}), nn::Dropout()),
                       nn::Linear({.in_features = 4, .out_features = 2}));
  EXPECT_EQ(names(outer), (std::vector<std::string>{"0.0.weight", "0.0.bias", "1.weight", "1.bias"}));
  outer.eval();
  EXPECT_FALSE(outer.at<nn::Sequential>(0)[1].is_training());
  Tensor v = randn({3, 4});
  EXPECT_TRUE(outer(v).equal(outer(v)));  // dropout off
  EXPECT_TRUE(nn::Sequential()(v).is_same_storage(v));
  EXPECT_EQ(outer.num_params(), 20 + 10);
}

TEST(NnContainers, ModuleListIsAVector) {
  struct Stack : nn::Module {
    nn::ModuleList<nn::Linear> layers;
    KILN_VISIT(Stack, layers)
  } s;
  for (int i = 0; i < 3; ++i) s.layers.emplace_back(nn::LinearConfig{.in_features = 4, .out_features = 4});
  EXPECT_EQ(names(s), (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                                "layers.2.weight", "layers.2.bias"}));
}

// A torchvision-style BasicBlock: its names equal PyTorch's (checked against
// [n for n, _ in block.named_parameters()] and block.state_dict().keys()).
struct BasicBlock : nn::Module {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::ReLU relu;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample;
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1(
            {.in_channels = in, .out_channels = out, .kernel_size = 3, .stride = stride, .padding = 1, .bias = false}),
        bn1({.num_features = out}),
        conv2({.in_channels = out, .out_channels = out, .kernel_size = 3, .padding = 1, .bias = false}),
        bn2({.num_features = out}),
        downsample(
            nn::Conv2d({.in_channels = in, .out_channels = out, .kernel_size = 1, .stride = stride, .bias = false}),
            nn::BatchNorm2d({.num_features = out})) {}
  Tensor forward(const Tensor& x) const {
    Tensor y = bn2(conv2(relu(bn1(conv1(x)))));
    return relu(y + downsample(x));
  }
  KILN_VISIT(BasicBlock, conv1, bn1, relu, conv2, bn2, downsample)
};

TEST(NnContainers, ResNetBlockNamesMatchPyTorch) {
  BasicBlock block(8, 16, 2);
  EXPECT_EQ(names(block),
            (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight",
                                      "bn2.bias", "downsample.0.weight", "downsample.1.weight", "downsample.1.bias"}));
  std::vector<std::string> state;
  for (auto& [n, t] : block.state()) state.push_back(n);
  EXPECT_EQ(state, (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                             "bn1.running_var", "bn1.num_batches_tracked", "conv2.weight", "bn2.weight",
                                             "bn2.bias", "bn2.running_mean", "bn2.running_var",
                                             "bn2.num_batches_tracked", "downsample.0.weight", "downsample.1.weight",
                                             "downsample.1.bias", "downsample.1.running_mean",
                                             "downsample.1.running_var", "downsample.1.num_batches_tracked"}));
  EXPECT_EQ(block.forward(randn({2, 8, 8, 8})).shape(), (Shape{2, 16, 4, 4}));
  // A block in a Sequential (as torchvision's layer1 = Sequential(BasicBlock, ...)).
  nn::Sequential layer(block, BasicBlock(16, 16, 1));
  EXPECT_EQ(names(layer)[0], "0.conv1.weight");
  EXPECT_EQ(names(layer).back(), "1.downsample.1.bias");
}

TEST(NnLayers, LinearInferenceKeepsItsOpAndFollowsEveryChange) {
  // Without gradients Linear keeps the product op of its last call and only binds new buffers
  // when the layouts match (Note [Prepared steps]); every case is bitwise kiln::linear.
  NoGradGuard no_grad;
  manual_seed(21);
  nn::Linear fc({.in_features = 5, .out_features = 4});
  auto check = [](const nn::Linear& m, const Tensor& x, const std::string& what) {
    Tensor want = linear(x, m.weight, m.bias), got = m(x);
    ASSERT_EQ(want.shape(), got.shape()) << what;
    EXPECT_TRUE(equal(want, got)) << what;
  };
  Tensor x = randn({3, 5});
  check(fc, x, "first call");
  check(fc, x, "second call (the kept op)");
  check(fc, randn({3, 5}), "another input of the same layout");
  fc.weight.mul_(-2.0);
  check(fc, x, "weight changed in place");
  fc.bias = randn({4});
  check(fc, x, "bias replaced");
  check(fc, randn({2, 3, 5}), "a batch of matrices");
  check(fc, randn({5}), "a vector");
  check(fc, randn({5, 3}).t(), "a transposed input");
  check(fc, randn({4, 5}).narrow(0, 1, 3), "an input at an offset");
  check(fc, x, "the first layout again");
  nn::Linear copy = fc;
  copy.weight = randn({4, 5});
  check(copy, x, "a copy with other weights");
  check(fc, x, "the original after its copy");
  nn::Linear no_bias({.in_features = 5, .out_features = 4, .bias = false});
  check(no_bias, x, "no bias");
  check(no_bias, x, "no bias again");
  nn::Linear wide({.in_features = 5, .out_features = 4, .dtype = f64});
  check(wide, randn({3, 5}, {.dtype = f64}), "f64");
  test::expect_error([&] { fc(randn({3, 5}, {.dtype = f64})); }, "linear");
  test::expect_error([&] { fc(randn({3, 6})); }, "Linear", "in_features=5");
}

TEST(NnLayers, LinearRecordsGradientsAfterInferenceCalls) {
  manual_seed(22);
  const Device dev = Device::cpu().autodiff();
  nn::Linear fc({.in_features = 3, .out_features = 2}, dev);
  Tensor x = randn({4, 3}, {.device = dev});
  {
    NoGradGuard g;
    (void)fc(x);
    (void)fc(x);
  }
  auto grads = fc(x).sum().backward();
  ASSERT_TRUE(grads.get(fc.weight).defined());
  // d(sum(x W^T + b))/dW = column sums of x for every output row.
  Tensor want = x.sum(Dims{0}).unsqueeze(0).expand({2, 3});
  EXPECT_TRUE(allclose(grads.get(fc.weight), want));
  EXPECT_TRUE(allclose(grads.get(fc.bias), full({2}, 4.0, {.device = dev})));
}
