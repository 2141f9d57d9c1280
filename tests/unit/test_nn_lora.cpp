// SPDX-License-Identifier: MIT OR Apache-2.0
// LoRA: apply_lora adapts the targeted Linear and attention projections and freezes the rest;
// an adapted Linear's output against the formula written out; a short fine-tune changes only
// the adapters and lowers the loss; merge_lora gives plain weights with the same outputs.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <set>

#include "test_util.h"

using namespace kiln;

namespace {

Device ad() { return Device::cpu().autodiff(); }

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  explicit Mlp(const Device& d)
      : fc1({.in_features = 6, .out_features = 8}, d), fc2({.in_features = 8, .out_features = 3}, d) {}
  Tensor forward(const Tensor& x) { return fc2(relu(fc1(x))); }
  KILN_VISIT(Mlp, fc1, fc2)
};

struct Block : nn::Module {
  nn::TransformerEncoderLayer enc;
  nn::Linear head;
  explicit Block(const Device& d)
      : enc({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .batch_first = true}, d),
        head({.in_features = 8, .out_features = 2}, d) {}
  Tensor forward(const Tensor& x) { return head(enc(x)); }
  KILN_VISIT(Block, enc, head)
};

std::set<std::string> names(nn::Module& m) {
  std::set<std::string> r;
  for (auto& [n, t] : m.named_parameters()) r.insert(n);
  return r;
}

}  // namespace

TEST(NnLora, AdaptsTargetsAndFreezesTheRest) {
  manual_seed(1);
  Mlp m(ad());
  Tensor x = randn({5, 6}, {.device = ad()});
  Tensor before = m.forward(x).detach();
  EXPECT_EQ(nn::apply_lora(m, {.rank = 2, .alpha = 4, .targets = {"fc1"}}), 1);
  ASSERT_TRUE(m.fc1.lora.has_value());
  EXPECT_FALSE(m.fc2.lora.has_value());
  EXPECT_TRUE(names(m).count("fc1.lora.lora_A") && names(m).count("fc1.lora.lora_B"));
  EXPECT_EQ(m.fc1.lora->lora_A.shape(), Shape({2, 6}));
  EXPECT_EQ(m.fc1.lora->lora_B.shape(), Shape({8, 2}));
  EXPECT_TRUE(allclose(m.forward(x).detach(), before));  // B starts at zero
  Gradients g = m.forward(x).sum().backward();
  EXPECT_TRUE(m.fc1.lora->lora_A.grad(g).defined() || m.fc1.lora->lora_B.grad(g).defined());
  EXPECT_FALSE(m.fc1.weight.grad(g).defined());
  EXPECT_FALSE(m.fc2.weight.grad(g).defined());
  EXPECT_EQ(nn::lora_parameters(m).size(), 2u);
  EXPECT_ERROR(nn::apply_lora(m, {.targets = {"fc1"}}), "already has");
  Mlp m2(ad());
  EXPECT_ERROR(nn::apply_lora(m2, {.targets = {"fc3"}}), "matches no module");
  EXPECT_ERROR(nn::apply_lora(m2, {.rank = 0}), "rank");
}

TEST(NnLora, OutputIsTheBaseLayerPlusTheScaledLowRankUpdate) {
  manual_seed(2);
  nn::Linear l({.in_features = 5, .out_features = 4, .dtype = f64}, ad());
  nn::apply_lora(l, {.rank = 3, .alpha = 6});
  ASSERT_TRUE(l.lora.has_value());
  l.lora->lora_B = randn({4, 3}, {.dtype = f64, .device = ad()}).require_grad();
  Tensor x = randn({2, 7, 5}, {.dtype = f64, .device = ad()});
  auto W = l.weight.detach().to_vector<double>(), b = l.bias.detach().to_vector<double>();
  auto A = l.lora->lora_A.detach().to_vector<double>(), B = l.lora->lora_B.detach().to_vector<double>();
  auto xv = x.to_vector<double>();
  auto y = l(x).detach().to_vector<double>();
  for (int r = 0; r < 14; ++r)
    for (int o = 0; o < 4; ++o) {
      double want = b[o];
      for (int i = 0; i < 5; ++i) {
        double d = W[o * 5 + i];
        for (int k = 0; k < 3; ++k) d += 2.0 * B[o * 3 + k] * A[k * 5 + i];  // alpha / rank = 2
        want += d * xv[r * 5 + i];
      }
      EXPECT_NEAR(y[r * 4 + o], want, 1e-12);
    }
}

TEST(NnLora, FineTuneThenMergeGivesThePlainModelWithTheSameOutputs) {
  manual_seed(3);
  Block m(ad());
  const std::set<std::string> plain = names(m);
  std::vector<std::pair<std::string, Tensor>> base;
  for (auto& [n, t] : m.named_parameters()) base.emplace_back(n, t.detach().clone());
  // Every Linear (linear1, linear2, head, the attention's out_proj) and q/k/v: 4 + 3 adapters.
  EXPECT_EQ(nn::apply_lora(m, {.rank = 2, .alpha = 4}), 7);
  optim::AdamW opt(nn::lora_parameters(m), {.lr = 1e-2, .weight_decay = 0});
  Tensor x = randn({4, 5, 8}, {.device = ad()}), y = randn({4, 5, 2}, {.device = ad()});
  double first = 0, last = 0;
  for (int s = 0; s < 15; ++s) {
    Tensor loss = nn::functional::mse_loss(m.forward(x), y);
    (s == 0 ? first : last) = loss.item<double>();
    opt.step(loss.backward());
  }
  EXPECT_LT(last, first * 0.9);
  for (auto& [n, t] : base) {  // the base weights did not move
    for (auto& [n2, t2] : m.named_parameters())
      if (n2 == n) EXPECT_TRUE(equal(t2.detach(), t)) << n;
  }
  Tensor adapted = m.forward(x).detach();
  EXPECT_EQ(nn::merge_lora(m), 7);
  EXPECT_EQ(names(m), plain);
  EXPECT_TRUE(nn::lora_parameters(m).empty());
  EXPECT_TRUE(allclose(m.forward(x).detach(), adapted, 1e-5, 1e-5));
  // The merged model is plain: a fresh one loads its state and gives the same outputs.
  manual_seed(99);
  Block fresh(ad());
  auto src = m.state();
  auto dst = fresh.state();
  ASSERT_EQ(src.size(), dst.size());
  {
    NoGradGuard ng;
    for (size_t i = 0; i < src.size(); ++i) dst[i].second.copy_(src[i].second.detach());
  }
  EXPECT_TRUE(allclose(fresh.forward(x).detach(), adapted, 1e-5, 1e-5));
}

TEST(NnLora, SeparateKeyValueProjectionsMerge) {
  manual_seed(4);
  nn::MultiHeadAttention a({.embed_dim = 4, .num_heads = 2, .kdim = 3, .vdim = 5}, ad());
  EXPECT_EQ(nn::apply_lora(a, {.rank = 2, .alpha = 2}), 4);  // q, k, v and out_proj
  ASSERT_TRUE(a.k_lora.has_value());
  EXPECT_EQ(a.k_lora->lora_A.shape(), Shape({2, 3}));
  EXPECT_EQ(a.v_lora->lora_A.shape(), Shape({2, 5}));
  for (auto* ad_ : {&a.q_lora, &a.k_lora, &a.v_lora})
    (*ad_)->lora_B = randn((*ad_)->lora_B.shape(), {.device = ad()}).require_grad();
  a.out_proj.lora->lora_B = randn({4, 2}, {.device = ad()}).require_grad();
  Tensor q = randn({3, 2, 4}, {.device = ad()}), k = randn({6, 2, 3}, {.device = ad()}),
         v = randn({6, 2, 5}, {.device = ad()});
  Tensor before = a(q, k, v).output.detach();
  EXPECT_EQ(nn::merge_lora(a), 4);
  EXPECT_TRUE(allclose(a(q, k, v).output.detach(), before, 1e-5, 1e-5));
}
