// SPDX-License-Identifier: MIT OR Apache-2.0
// rnnt_loss against a second implementation (every alignment of the lattice walked in
// probability space, f64), finite differences, and torchaudio's argument rules.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn/loss_rnnt.h>

#include <cmath>
#include <functional>

#include "gradcheck.h"

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::gradcheck;
using kiln::test::rand_input;
using TV = std::vector<Tensor>;

namespace {

/// -log P(y | x) summed over every alignment, by walking them: from (t, u), emit y_u (to
/// (t, u + 1)) or a blank (to (t + 1, u)); a path ends with the blank at (T - 1, U).
double brute_force(const std::vector<double>& x, int64_t T, int64_t W, int64_t V, int64_t b, int64_t Tb,
                   const std::vector<int64_t>& y, int64_t blank, bool log_softmax_first) {
  auto prob = [&](int64_t t, int64_t u, int64_t v) {
    const double* row = x.data() + ((b * T + t) * W + u) * V;
    if (!log_softmax_first) return std::exp(row[v]);
    double z = 0;
    for (int64_t k = 0; k < V; ++k) z += std::exp(row[k]);
    return std::exp(row[v]) / z;
  };
  const int64_t Ub = static_cast<int64_t>(y.size());
  std::function<double(int64_t, int64_t)> walk = [&](int64_t t, int64_t u) -> double {
    double p = 0;
    if (u < Ub) p += prob(t, u, y[u]) * walk(t, u + 1);
    if (t == Tb - 1)
      p += u == Ub ? prob(t, u, blank) : 0.0;
    else
      p += prob(t, u, blank) * walk(t + 1, u);
    return p;
  };
  return -std::log(walk(0, 0));
}

double val(const Tensor& t) { return t.to(Device::cpu(), f64).item<double>(); }

}  // namespace

TEST(RnntLoss, EveryAlignmentSummed) {
  const int64_t B = 4, T = 4, W = 4, V = 5;
  const std::vector<int64_t> tl = {4, 1, 3, 2}, ul = {3, 2, 0, 1};
  std::vector<int64_t> tg = {1, 2, 1, 3, 3, 0, 0, 0, 0, 2, 0, 0};  // [B, 3]
  Tensor logits = rand_input({B, T, W, V}, -2, 2, 11).detach().to(Device::cpu());
  const std::vector<double> x = logits.to_vector<double>();
  for (bool fused : {true, false})
    for (int64_t blank : {-1, 4}) {  // both the last class
      Tensor in = fused ? logits : log_softmax(logits, 3);
      Tensor l = F::rnnt_loss(in, tensor(tg, {B, 3}), tensor(tl, {B}), tensor(ul, {B}),
                              {.blank = blank, .reduction = "none", .fused_log_softmax = fused});
      ASSERT_EQ(l.shape(), Shape({B}));
      const std::vector<double> got = l.to_vector<double>();
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> y(tg.begin() + b * 3, tg.begin() + b * 3 + ul[b]);
        EXPECT_NEAR(got[b], brute_force(x, T, W, V, b, tl[b], y, 4, true), 1e-10) << "sample " << b;
      }
    }
  // Blank 0, f32 logits, the reductions (mean over the batch, as torchaudio).
  std::vector<int64_t> tg0 = {1, 2, 1, 3, 3, 4, 4, 4, 4, 2, 4, 4};
  Tensor l32 = logits.to(f32);
  Tensor none = F::rnnt_loss(l32, tensor(tg0, {B, 3}).to(i32), tensor(tl, {B}).to(i32), tensor(ul, {B}).to(i32),
                             {.blank = 0, .reduction = "none"});
  EXPECT_EQ(none.dtype(), f32);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> y(tg0.begin() + b * 3, tg0.begin() + b * 3 + ul[b]);
    EXPECT_NEAR(none.to_vector<float>()[b], brute_force(x, T, W, V, b, tl[b], y, 0, true), 1e-4);
  }
  Tensor mean = F::rnnt_loss(l32, tensor(tg0, {B, 3}), tensor(tl, {B}), tensor(ul, {B}), {.blank = 0});
  Tensor sum =
      F::rnnt_loss(l32, tensor(tg0, {B, 3}), tensor(tl, {B}), tensor(ul, {B}), {.blank = 0, .reduction = "sum"});
  EXPECT_NEAR(val(mean), val(none.mean()), 1e-5);
  EXPECT_NEAR(val(sum), val(none.sum()), 1e-4);
  // The module, a non-contiguous view of the same values, and f16 logits (computed in f32).
  nn::RNNTLoss m({.blank = 0});
  EXPECT_NEAR(val(m(l32, tensor(tg0, {B, 3}), tensor(tl, {B}), tensor(ul, {B}))), val(mean), 1e-6);
  Tensor strided = l32.transpose(1, 2).contiguous().transpose(1, 2);
  ASSERT_FALSE(strided.is_contiguous());
  EXPECT_NEAR(val(F::rnnt_loss(strided, tensor(tg0, {B, 3}), tensor(tl, {B}), tensor(ul, {B}), {.blank = 0})),
              val(mean), 1e-6);
  Tensor h = F::rnnt_loss(l32.to(f16), tensor(tg0, {B, 3}), tensor(tl, {B}), tensor(ul, {B}), {.blank = 0});
  EXPECT_EQ(h.dtype(), f16);
  EXPECT_NEAR(val(h), val(mean), 2e-2);
}

TEST(RnntLoss, GradientsMatchFiniteDifferences) {
  Tensor tg = tensor<int64_t>({1, 2, 2, 0}, {2, 2});
  for (const char* r : {"none", "mean", "sum"})
    for (bool fused : {true, false}) {
      EXPECT_EQ(gradcheck(
                    [&](const TV& v) {
                      return F::rnnt_loss(v[0], tg, tensor<int64_t>({3, 2}, {2}), tensor<int64_t>({2, 1}, {2}),
                                          {.reduction = r, .fused_log_softmax = fused});
                    },
                    {rand_input({2, 3, 3, 4}, fused ? -2 : -3, fused ? 2 : -0.5, 5)}),
                "")
          << r << (fused ? " fused" : " log-probabilities");
    }
  // Second order (the recursion is made of differentiable ops).
  EXPECT_EQ(kiln::test::gradgradcheck(
                [&](const TV& v) {
                  return F::rnnt_loss(v[0], tg, tensor<int64_t>({2, 2}, {2}), tensor<int64_t>({2, 1}, {2}));
                },
                {rand_input({2, 2, 3, 4}, -1, 1, 6)}),
            "");
}

TEST(RnntLoss, ClampLimitsTheGradientOfEachSample) {
  const Device ad = kiln::test::ad_device();
  Tensor tg = tensor<int64_t>({1, 2, 2, 0}, {2, 2});
  Tensor tl = tensor<int64_t>({3, 3}, {2}), ul = tensor<int64_t>({2, 1}, {2});
  Tensor x0 = rand_input({2, 3, 3, 4}, -3, 3, 9).detach();
  Tensor w = tensor<double>({0.5, 2.0}, {2}, ad);  // upstream gradients of each sample's loss
  auto grad_of = [&](double clamp_to) {
    Tensor x = x0.to(ad).require_grad();
    Tensor l = F::rnnt_loss(x, tg, tl, ul, {.clamp = clamp_to, .reduction = "none"});
    return std::make_pair(l.detach(), (l * w).sum().backward().get(x));
  };
  auto [l_plain, g_plain] = grad_of(-1);
  auto [l_clamped, g_clamped] = grad_of(0.05);
  EXPECT_EQ((l_plain - l_clamped).abs().max().item<double>(), 0.0);  // the values are unchanged
  // Each sample's own gradient clamped, then scaled by its upstream gradient (torchaudio's order).
  Tensor own = g_plain / w.reshape({2, 1, 1, 1});
  Tensor want = clamp(own, Scalar(-0.05), Scalar(0.05)) * w.reshape({2, 1, 1, 1});
  EXPECT_LT((g_clamped - want).abs().max().item<double>(), 1e-12);
  EXPECT_GT((g_plain - g_clamped).abs().max().item<double>(), 1e-3);  // the clamp took effect
}

TEST(RnntLoss, EmptyBatchAndErrors) {
  Tensor e = F::rnnt_loss(zeros({0, 3, 2, 4}), zeros({0, 1}, {.dtype = i64}), zeros({0}, {.dtype = i64}),
                          zeros({0}, {.dtype = i64}), {.reduction = "sum"});
  EXPECT_EQ(val(e), 0.0);
  Tensor x = randn({2, 3, 3, 4});
  Tensor tg = tensor<int64_t>({1, 2, 1, 0}, {2, 2}), tl = tensor<int64_t>({3, 3}, {2}),
         ul = tensor<int64_t>({2, 1}, {2});
  auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  std::string m = error_of([&] { F::rnnt_loss(randn({2, 3, 4}), tg, tl, ul); });
  EXPECT_NE(m.find("[2, 3, 4]"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tensor<int64_t>({1, 3, 1, 0}, {2, 2}), tl, ul); });  // 3 is the blank
  EXPECT_NE(m.find("other than the blank 3"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tg, tensor<int64_t>({4, 3}, {2}), ul); });
  EXPECT_NE(m.find("logit_lengths[0] = 4"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tg, tl, tensor<int64_t>({3, 1}, {2})); });
  EXPECT_NE(m.find("target_lengths[0] = 3"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tg.narrow(1, 0, 1), tl, ul); });
  EXPECT_NE(m.find("S >= max(target_lengths) = 2"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tg, tl, ul, {.blank = 4}); });
  EXPECT_NE(m.find("blank 4 is out of range for 4 classes"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tg, tl, ul, {.reduction = "avg"}); });
  EXPECT_NE(m.find("reduction"), std::string::npos) << m;
  m = error_of([&] { F::rnnt_loss(x, tg, zeros({2}), ul); });
  EXPECT_NE(m.find("integer tensor"), std::string::npos) << m;
}
