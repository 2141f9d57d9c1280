// SPDX-License-Identifier: MIT OR Apache-2.0
// The causal decoder-only language model: incremental decoding through the key/value caches
// gives the logits of the full forward (prefix chunks and single tokens), causality, parameter
// names, seeded generation (the same tokens with and without the cache, greedy = argmax of the
// full forward), end-of-sequence handling, gradients, and errors naming the layer. RoPE against
// PyTorch is in the conformance suite (nn_rotary, scripts/golden_cases/nn_seq.py).
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

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return (a.to(f64) - b.to(f64)).abs().max().item<double>();
}

nn::TransformerDecoderOnly small_model() {
  manual_seed(7);
  nn::TransformerDecoderOnly m({.vocab_size = 11, .d_model = 16, .nhead = 2, .num_layers = 2, .dim_feedforward = 24});
  m.eval();
  return m;
}

TEST(NnDecoderOnly, KvCacheMatchesFullForward) {
  auto m = small_model();
  const int64_t N = 2, L = 9;
  Tensor tok = randint(0, 11, {N, L});
  Tensor full = m(tok);
  EXPECT_EQ(full.shape(), (Shape{N, L, 11}));
  // A prefix of 3, a chunk of 2 (causal mask aligned to the cache), then single tokens.
  std::vector<nn::KVCache> caches;
  std::vector<Tensor> steps{m(tok.narrow(1, 0, 3), &caches), m(tok.narrow(1, 3, 2), &caches)};
  for (int64_t t = 5; t < L; ++t) steps.push_back(m(tok.narrow(1, t, 1), &caches));
  ASSERT_EQ(caches.size(), 2u);
  EXPECT_EQ(caches[0].length(), L);
  EXPECT_EQ(caches[1].k.shape(), (Shape{N, 2, L, 8}));
  EXPECT_LT(max_diff(cat(steps, 1), full), 1e-5);
  // Token by token from the start.
  caches.clear();
  steps.clear();
  for (int64_t t = 0; t < L; ++t) steps.push_back(m(tok.narrow(1, t, 1), &caches));
  EXPECT_LT(max_diff(cat(steps, 1), full), 1e-5);
}

TEST(NnDecoderOnly, F64NonContiguousAndEmptyBatch) {
  manual_seed(3);
  nn::TransformerDecoderOnly m({.vocab_size = 7, .d_model = 8, .nhead = 2, .num_layers = 2, .dtype = f64});
  m.eval();
  Tensor tok = randint(0, 7, {5, 3}).transpose(0, 1);  // [3, 5], not contiguous
  ASSERT_FALSE(tok.is_contiguous());
  Tensor full = m(tok);
  EXPECT_EQ(full.dtype(), f64);
  EXPECT_LT(max_diff(full, m(tok.contiguous())), 1e-12);
  std::vector<nn::KVCache> caches;
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < 5; ++t) steps.push_back(m(tok.narrow(1, t, 1), &caches));
  EXPECT_LT(max_diff(cat(steps, 1), full), 1e-12);
  EXPECT_EQ(m(randint(0, 7, {0, 4})).shape(), (Shape{0, 4, 7}));
}

TEST(NnDecoderOnly, CausalAndUnbatched) {
  auto m = small_model();
  Tensor tok = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {6});
  Tensor other = tensor<int64_t>({1, 2, 3, 9, 9, 9}, {6});
  Tensor a = m(tok), b = m(other);
  EXPECT_EQ(a.shape(), (Shape{6, 11}));
  EXPECT_LT(max_diff(a.narrow(0, 0, 3), b.narrow(0, 0, 3)), 1e-6);  // the future does not leak
  EXPECT_GT(max_diff(a.narrow(0, 3, 3), b.narrow(0, 3, 3)), 1e-4);
  EXPECT_LT(max_diff(m(tok.to(i32)), a), 1e-6);
  EXPECT_LT(max_diff(m(tok.unsqueeze(0)).squeeze({0}), a), 1e-6);
}

TEST(NnDecoderOnly, ParameterNames) {
  auto m = small_model();
  std::vector<std::string> n;
  for (auto& [k, t] : m.named_parameters()) n.push_back(k);
  ASSERT_EQ(n.size(), 1u + 2u * 12u + 2u + 1u);
  EXPECT_EQ(n.front(), "embed.weight");
  EXPECT_EQ(n[1], "layers.0.norm1.weight");
  EXPECT_EQ(n[3], "layers.0.attn.qkv.weight");
  EXPECT_EQ(n.back(), "lm_head.weight");
}

TEST(NnDecoderOnly, GenerateSeededWithAndWithoutCache) {
  auto m = small_model();
  Tensor prompt = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  nn::GenerateOptions o{.max_new_tokens = 6, .sampling = {.temperature = 0.9, .top_k = 5, .top_p = 0.9}, .seed = 3};
  Tensor a = nn::generate(m, prompt, o);
  EXPECT_EQ(a.shape(), (Shape{2, 9}));
  EXPECT_EQ(a.dtype(), i64);
  EXPECT_EQ(a.narrow(1, 0, 3).to_vector<int64_t>(), prompt.to_vector<int64_t>());
  Tensor b = nn::generate(m, prompt, o);
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  o.use_cache = false;
  Tensor c = nn::generate(m, prompt, o);
  EXPECT_EQ(a.to_vector<int64_t>(), c.to_vector<int64_t>());
  for (int64_t v : a.to_vector<int64_t>()) EXPECT_TRUE(v >= 0 && v < 11);
  // Greedy: each new token is the argmax of the full forward over what came before.
  Tensor g = nn::generate(m, prompt, {.max_new_tokens = 4, .sampling = {.temperature = 0}});
  for (int64_t t = 3; t < 7; ++t) {
    Tensor want = argmax(m(g.narrow(1, 0, t)).select(1, t - 1), -1);
    EXPECT_EQ(want.to_vector<int64_t>(), g.select(1, t).contiguous().to_vector<int64_t>()) << "t=" << t;
  }
  EXPECT_EQ(nn::generate(m, tensor<int64_t>({4}, {1}), {.max_new_tokens = 2}).shape(), (Shape{3}));
  EXPECT_EQ(nn::generate(m, prompt, {.max_new_tokens = 0}).shape(), (Shape{2, 3}));
}

TEST(NnDecoderOnly, GenerateStopsAtEos) {
  auto m = small_model();
  Tensor prompt = tensor<int64_t>({1, 2}, {1, 2});
  // Greedy decoding with eos = the first greedy token stops after one step.
  Tensor g = nn::generate(m, prompt, {.max_new_tokens = 5, .sampling = {.temperature = 0}});
  const int64_t first = g.select(1, 2).item<int64_t>();
  Tensor e = nn::generate(m, prompt, {.max_new_tokens = 5, .sampling = {.temperature = 0}, .eos_token = first});
  EXPECT_EQ(e.shape(), (Shape{1, 3}));
}

TEST(NnDecoderOnly, TrainsWithAutodiff) {
  manual_seed(1);
  Device d = Device::cpu().autodiff();
  nn::TransformerDecoderOnly m({.vocab_size = 5, .d_model = 8, .nhead = 2, .num_layers = 1}, d);
  optim::Adam opt(m.parameters(), {.lr = 1e-2});
  // Learn the cycle 0 1 2 3 4 0 1 ...
  Tensor seq = remainder(arange(0, 17, 1, i64), 5).unsqueeze(0).to(d);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor logits = m(seq.narrow(1, 0, 16));
    Tensor loss = nn::functional::cross_entropy(logits.reshape({16, 5}), seq.narrow(1, 1, 16).reshape({16}));
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    opt.step(loss.backward());
  }
  EXPECT_LT(last, 0.3 * first) << first << " -> " << last;
}

TEST(NnDecoderOnly, GradientMatchesFiniteDifferences) {
  manual_seed(5);
  const Device d = Device::cpu().autodiff();
  nn::TransformerDecoderOnly m({.vocab_size = 6, .d_model = 8, .nhead = 2, .num_layers = 1, .dtype = f64}, d);
  Tensor tok = randint(0, 6, {2, 4}).to(d);
  Tensor r = randn({2, 4, 6}, {.dtype = f64}).to(d);
  auto loss = [&] { return (m(tok) * r).sum(); };
  Tensor g = m.layers[0].attn.qkv.weight.grad(loss().backward());
  const Tensor w0 = m.layers[0].attn.qkv.weight.detach().clone();
  // Entries of the query, key and value rows (RoPE acts on q and k).
  for (int64_t row : {1, 10, 19}) {
    std::vector<double> e(24 * 8, 0.0);
    e[static_cast<size_t>(row * 8 + 3)] = 1e-6;
    Tensor bump = tensor<double>(e, {24, 8}).to(d);
    m.layers[0].attn.qkv.weight = (w0 + bump).detach().require_grad();
    const double up = loss().item<double>();
    m.layers[0].attn.qkv.weight = (w0 - bump).detach().require_grad();
    const double down = loss().item<double>();
    const double fd = (up - down) / 2e-6;
    EXPECT_GT(std::abs(fd), 1e-3) << "row " << row;
    EXPECT_NEAR(g.select(0, row).select(0, 3).item<double>(), fd, 1e-6) << "row " << row;
  }
}

TEST(NnDecoderOnly, Errors) {
  auto m = small_model();
  expect_error([&] { m(randn({2, 3})); }, "TransformerDecoderOnly", "integer");
  expect_error([&] { nn::TransformerDecoderOnly({.vocab_size = 4, .d_model = 6, .nhead = 2}); }, "CausalSelfAttention",
               "even");
  expect_error([&] { nn::generate(m, tensor<int64_t>({1}, {1}), {.max_new_tokens = -1}); }, "generate",
               "max_new_tokens");
  std::vector<nn::KVCache> caches;
  m(randint(0, 11, {2, 3}), &caches);
  expect_error([&] { m(randint(0, 11, {3, 1}), &caches); }, "CausalSelfAttention", "cache");
}

}  // namespace
