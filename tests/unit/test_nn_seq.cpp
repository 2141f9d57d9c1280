// SPDX-License-Identifier: MIT OR Apache-2.0
// Normalisation, activation, recurrent and attention modules: parameter names as PyTorch's,
// running statistics, the key/value cache against the full sequence, positional encodings,
// errors naming the layer, and gradients through autodiff. Forward values against PyTorch are
// in the conformance suite (scripts/golden_cases/nn_seq.py).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using namespace kiln;
namespace nn = kiln::nn;
using kiln::test::expect_error;

std::vector<std::string> names(nn::Module& m) {
  std::vector<std::string> v;
  for (auto& [n, t] : m.named_parameters()) v.push_back(n);
  return v;
}

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return (a.to(f64) - b.to(f64)).abs().max().item<double>();
}

TEST(NnSeq, TransformerEncoderLayerNamesMatchPyTorch) {
  nn::TransformerEncoderLayer l({.d_model = 8, .nhead = 2, .dim_feedforward = 16});
  std::vector<std::string> want = {"self_attn.in_proj_weight",
                                   "self_attn.in_proj_bias",
                                   "self_attn.out_proj.weight",
                                   "self_attn.out_proj.bias",
                                   "linear1.weight",
                                   "linear1.bias",
                                   "linear2.weight",
                                   "linear2.bias",
                                   "norm1.weight",
                                   "norm1.bias",
                                   "norm2.weight",
                                   "norm2.bias"};
  EXPECT_EQ(names(l), want);
  EXPECT_EQ(l.num_params(), 3 * 8 * 8 + 3 * 8 + 8 * 8 + 8 + 16 * 8 + 16 + 8 * 16 + 8 + 4 * 8);
}

TEST(NnSeq, DecoderAndStackNames) {
  nn::TransformerDecoder d(
      {.layer = {.d_model = 4, .nhead = 1, .dim_feedforward = 8}, .num_layers = 2, .final_norm = true});
  auto n = names(d);
  ASSERT_EQ(n.size(), 2u * 18 + 2);
  EXPECT_EQ(n[4], "layers.0.multihead_attn.in_proj_weight");
  EXPECT_EQ(n[17], "layers.0.norm3.bias");
  EXPECT_EQ(n[18], "layers.1.self_attn.in_proj_weight");
  EXPECT_EQ(n.back(), "norm.bias");
  nn::MultiHeadAttention m({.embed_dim = 6, .num_heads = 3, .kdim = 4, .vdim = 5});
  EXPECT_EQ(names(m), (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                                "out_proj.weight", "out_proj.bias"}));
}

TEST(NnSeq, RecurrentNames) {
  nn::LSTM l({.input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true});
  auto n = names(l);
  ASSERT_EQ(n.size(), 16u);
  EXPECT_EQ(n[0], "weight_ih_l0");
  EXPECT_EQ(n[4], "weight_ih_l0_reverse");
  EXPECT_EQ(n[11], "bias_hh_l1");
  EXPECT_EQ(l.weight_ih[0].shape(), (Shape{16, 3}));
  EXPECT_EQ(l.weight_ih[2].shape(), (Shape{16, 8}));
  nn::GRU g({.input_size = 3, .hidden_size = 4, .bias = false});
  EXPECT_EQ(names(g), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  EXPECT_EQ(g.weight_hh[0].shape(), (Shape{12, 4}));
}

TEST(NnSeq, BatchNormBuffersAndModes) {
  nn::BatchNorm1d bn({.num_features = 3});
  auto bufs = bn.named_buffers();
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_EQ(bufs[0].first, "running_mean");
  EXPECT_EQ(bufs[2].first, "num_batches_tracked");
  Tensor x = randn({8, 3}) * 2 + 1;
  Tensor y = bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // running_mean = 0.9 * 0 + 0.1 * batch mean.
  EXPECT_LT(max_diff(bn.running_mean, mean(x, {0}) * 0.1), 1e-6);
  EXPECT_LT(max_diff(bn.running_var, var(x, {0}) * 0.1 + 0.9), 1e-5);
  EXPECT_LT(mean(y, {0}).abs().max().item<double>(), 1e-5);
  bn.eval();
  Tensor ye = bn(x);
  Tensor ref = (x - bn.running_mean) / sqrt(bn.running_var + 1e-5);
  EXPECT_LT(max_diff(ye, ref), 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // Without running stats eval uses batch statistics.
  nn::BatchNorm2d nb({.num_features = 2, .track_running_stats = false});
  EXPECT_TRUE(nb.named_buffers().empty());
  nb.eval();
  Tensor x4 = randn({2, 2, 3, 3});
  EXPECT_LT(mean(nb(x4), {0, 2, 3}).abs().max().item<double>(), 1e-5);
}

TEST(NnSeq, NormLayersShapes) {
  nn::InstanceNorm1d in({.num_features = 3});
  Tensor x = randn({2, 3, 7});
  EXPECT_LT(mean(in(x), {2}).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(in(randn({3, 7})).shape(), (Shape{3, 7}));
  nn::InstanceNorm2d in2({.num_features = 2, .affine = true, .track_running_stats = true});
  EXPECT_EQ(names(in2), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(in2.named_buffers().size(), 3u);
  EXPECT_EQ(in2(randn({2, 2, 3, 3})).shape(), (Shape{2, 2, 3, 3}));
  nn::RMSNorm r({.normalized_shape = {5}});
  Tensor z = randn({4, 5});
  Tensor rz = r(z);
  EXPECT_LT(max_diff(mean(rz * rz, {1}), ones({4})), 1e-4);
}

TEST(NnSeq, Activations) {
  Tensor x = tensor<float>({-2.f, -0.5f, 0.f, 1.5f}, {4});
  EXPECT_EQ(max_diff(nn::ReLU()(x), relu(x)), 0.0);
  EXPECT_LT(max_diff(nn::LeakyReLU({.negative_slope = 0.2})(x), tensor<float>({-0.4f, -0.1f, 0.f, 1.5f}, {4})), 1e-7);
  EXPECT_LT(max_diff(nn::GELU({.approximate = "tanh"})(x), gelu(x, "tanh")), 1e-7);
  EXPECT_LT(max_diff(nn::Softmax({.dim = 0})(x).sum(), scalar_tensor(1.0)), 1e-6);
  EXPECT_EQ(nn::GLU()(randn({3, 8})).shape(), (Shape{3, 4}));
  nn::SwiGLU s({.in = 6, .hidden = 10});
  EXPECT_EQ(names(s), (std::vector<std::string>{"w1.weight", "w2.weight", "w3.weight"}));
  Tensor h = randn({2, 6});
  EXPECT_LT(max_diff(s(h), matmul(silu(matmul(h, s.w1.weight.t())) * matmul(h, s.w3.weight.t()), s.w2.weight.t())),
            1e-5);
  nn::PReLU p({.num_parameters = 3});
  EXPECT_EQ(p(randn({2, 3, 4})).shape(), (Shape{2, 3, 4}));
}

TEST(NnSeq, MhaKvCacheMatchesFullSequence) {
  for (bool bf : {false, true}) {
    nn::MultiHeadAttention m({.embed_dim = 8, .num_heads = 2, .batch_first = bf});
    m.eval();
    const int64_t L = 5, N = 2;
    Tensor x = bf ? randn({N, L, 8}) : randn({L, N, 8});
    const int64_t sd = bf ? 1 : 0;
    Tensor full = m(x, x, x, {.is_causal = true}).output;
    nn::KVCache cache;
    std::vector<Tensor> steps;
    // A chunk of 2, then single tokens.
    Tensor first = x.narrow(sd, 0, 2);
    steps.push_back(m(first, first, first, {.is_causal = true, .cache = &cache}).output);
    for (int64_t t = 2; t < L; ++t) {
      Tensor xt = x.narrow(sd, t, 1);
      steps.push_back(m(xt, xt, xt, {.cache = &cache}).output);
    }
    EXPECT_EQ(cache.length(), L);
    EXPECT_LT(max_diff(cat(steps, sd), full), 1e-5) << "batch_first=" << bf;
  }
}

TEST(NnSeq, DecoderKvCacheMatchesFullSequence) {
  for (bool nf : {false, true}) {
    nn::TransformerDecoder d(
        {.layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true, .norm_first = nf},
         .num_layers = 2,
         .final_norm = true});
    d.eval();
    Tensor tgt = randn({2, 4, 8}), mem = randn({2, 3, 8});
    Tensor full = d(tgt, mem, {.tgt_is_causal = true});
    std::vector<nn::KVCache> caches;
    std::vector<Tensor> steps;
    for (int64_t t = 0; t < 4; ++t) steps.push_back(d(tgt.narrow(1, t, 1), mem, {}, &caches));
    EXPECT_EQ(caches.size(), 2u);
    EXPECT_LT(max_diff(cat(steps, 1), full), 1e-5) << "norm_first=" << nf;
  }
}

TEST(NnSeq, MhaMasksAndWeights) {
  nn::MultiHeadAttention m({.embed_dim = 4, .num_heads = 2, .batch_first = true});
  Tensor x = randn({1, 3, 4});
  Tensor kpm = tensor<bool>({false, false, true}, {1, 3});
  auto r = m(x, x, x, {.key_padding_mask = kpm, .need_weights = true});
  ASSERT_TRUE(r.weights.defined());
  EXPECT_EQ(r.weights.shape(), (Shape{1, 3, 3}));
  EXPECT_LT(r.weights.narrow(2, 2, 1).abs().max().item<double>(), 1e-12);
  EXPECT_LT(max_diff(r.weights.sum({2}), ones({1, 3})), 1e-6);
  auto r2 = m(x, x, x, {.key_padding_mask = kpm});
  EXPECT_LT(max_diff(r.output, r2.output), 1e-5);
  auto r3 = m(x, x, x, {.need_weights = true, .average_attn_weights = false});
  EXPECT_EQ(r3.weights.shape(), (Shape{1, 2, 3, 3}));
}

TEST(NnSeq, RotaryEncodingOffsetAndNorm) {
  for (bool il : {false, true}) {
    nn::RotaryEncoding rope({.head_dim = 6, .interleaved = il});
    Tensor x = randn({2, 3, 7, 6});
    Tensor full = rope(x);
    Tensor tail = rope(x.narrow(2, 4, 3), 4);
    EXPECT_LT(max_diff(tail, full.narrow(2, 4, 3)), 1e-6);
    EXPECT_LT(max_diff((full * full).sum({-1}), (x * x).sum({-1})), 1e-4);
    EXPECT_LT(max_diff(full.narrow(2, 0, 1), x.narrow(2, 0, 1)), 1e-7);  // position 0 is unrotated
  }
  // Relative property: <rope(q, m), rope(k, n)> depends on m - n only.
  nn::RotaryEncoding rope({.head_dim = 4});
  Tensor q = randn({1, 4}), k = randn({1, 4});
  double a = (rope(q, 3) * rope(k, 1)).sum().item<double>();
  double b = (rope(q, 7) * rope(k, 5)).sum().item<double>();
  EXPECT_NEAR(a, b, 1e-5);
}

TEST(NnSeq, PositionalEncoding) {
  nn::PositionalEncoding pe({.d_model = 4, .max_len = 10});
  EXPECT_EQ(pe.named_buffers().size(), 1u);
  Tensor z = zeros({1, 3, 4});
  Tensor y = pe(z, 1);
  auto v = y.contiguous().to_vector<float>();
  EXPECT_NEAR(v[0], std::sin(1.0), 1e-6);
  EXPECT_NEAR(v[1], std::cos(1.0), 1e-6);
  EXPECT_NEAR(v[2], std::sin(1.0 / 100.0), 1e-6);
  nn::PositionalEncoding ps({.d_model = 4, .max_len = 10, .batch_first = false});
  EXPECT_EQ(ps(zeros({3, 2, 4})).shape(), (Shape{3, 2, 4}));
  expect_error([&] { pe(zeros({1, 11, 4})); }, "PositionalEncoding", "max_len=10");
}

TEST(NnSeq, ErrorsNameTheLayer) {
  expect_error([] { nn::LSTM({.input_size = 3, .hidden_size = 4})(randn({5, 2, 4})); }, "LSTM", "input_size=3");
  expect_error([] { nn::GRU({.input_size = 3, .hidden_size = 4})(randn({5, 2, 3}), randn({2, 2, 4})); }, "GRU", "h0");
  expect_error([] { nn::BatchNorm2d({.num_features = 3})(randn({2, 4, 5, 5})); }, "BatchNorm2d", "[2, 4, 5, 5]");
  expect_error([] { nn::BatchNorm1d({.num_features = 3})(randn({2, 3, 4, 4})); }, "BatchNorm1d", "num_features=3");
  expect_error([] { nn::LayerNorm({.normalized_shape = {5}})(randn({2, 4})); }, "LayerNorm", "[2, 4]");
  expect_error([] { nn::GroupNorm({.num_groups = 2, .num_channels = 4})(randn({2, 3, 5})); }, "GroupNorm");
  expect_error([] { nn::GroupNorm({.num_groups = 3, .num_channels = 4}); }, "GroupNorm", "divisible");
  expect_error([] { nn::PReLU({.num_parameters = 3})(randn({2, 4})); }, "PReLU", "num_parameters=3");
  expect_error([] { nn::GLU()(randn({2, 5})); }, "GLU", "even");
  expect_error(
      [] {
        Tensor x = randn({3, 2, 6});
        nn::MultiHeadAttention({.embed_dim = 8, .num_heads = 2})(x, x, x);
      },
      "MultiHeadAttention", "embed_dim=8");
  expect_error(
      [] {
        Tensor x = randn({3, 2, 8});
        nn::MultiHeadAttention({.embed_dim = 8, .num_heads = 2})(x, x, x, {.attn_mask = zeros({2, 3})});
      },
      "MultiHeadAttention", "attn_mask");
  expect_error([] { nn::MultiHeadAttention({.embed_dim = 8, .num_heads = 3}); }, "MultiHeadAttention", "divisible");
  expect_error(
      [] {
        nn::TransformerEncoderLayer({.d_model = 8, .nhead = 2})(randn({2, 3, 6}));
      },
      "TransformerEncoderLayer", "d_model=8");
  expect_error([] { nn::TransformerEncoderLayer({.d_model = 8, .nhead = 2, .activation = "tanh"}); },
               "TransformerEncoderLayer", "activation");
  expect_error([] { nn::RotaryEncoding({.head_dim = 5}); }, "RotaryEncoding", "even");
}

TEST(NnSeq, GradientsFlowThroughLstmAndEncoder) {
  const Device ad = Device::cpu().autodiff();
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true}, ad);
  Tensor x = randn({5, 2, 3}).to(ad).require_grad();
  auto r = lstm(x);
  Gradients g = (r.output.sum() + r.c_n.sum()).backward();
  EXPECT_EQ(x.grad(g).shape(), x.shape());
  for (auto& [n, p] : lstm.named_parameters()) {
    Tensor gp = p.grad(g);
    ASSERT_TRUE(gp.defined()) << n;
    EXPECT_GT(gp.abs().sum().item<double>(), 0.0) << n;
  }
  // Finite-difference check of one input element through the LSTM.
  Tensor xd = x.detach();
  auto f = [&](const Tensor& xi) {
    auto o = lstm(xi);
    return (o.output.sum() + o.c_n.sum()).item<double>();
  };
  const double eps = 1e-2;
  Tensor e = zeros({5, 2, 3}).to(ad);
  e.index_put_({1, 0, 2}, eps);
  const double fd = (f(xd + e) - f(xd - e)) / (2 * eps);
  const double an = x.grad(g).index({1, 0, 2}).item<double>();
  EXPECT_NEAR(fd, an, 2e-3);

  nn::TransformerEncoderLayer enc({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .norm_first = true}, ad);
  enc.eval();
  Tensor s = randn({3, 2, 8}).to(ad).require_grad();
  Gradients g2 = enc(s).square().sum().backward();
  for (auto& [n, p] : enc.named_parameters()) EXPECT_TRUE(p.grad(g2).defined()) << n;
}

TEST(NnSeq, PrintsTree) {
  nn::TransformerEncoder e({.layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 16}, .num_layers = 2});
  std::string s = e.str();
  EXPECT_NE(s.find("TransformerEncoderLayer"), std::string::npos) << s;
  EXPECT_NE(s.find("MultiHeadAttention"), std::string::npos) << s;
  nn::LSTM l({.input_size = 3, .hidden_size = 4});
  EXPECT_NE(l.str().find("LSTM"), std::string::npos);
}

}  // namespace
