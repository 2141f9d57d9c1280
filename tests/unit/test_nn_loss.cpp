// SPDX-License-Identifier: MIT OR Apache-2.0
// The loss functions (kiln/nn/loss.h). Values and input gradients are compared with PyTorch by
// the conformance suite (scripts/golden_cases/nn_loss.py); here: hand-computed values, edge
// cases, errors, the module forms, and finite-difference gradient checks in f64.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::gradcheck;
using kiln::test::rand_input;
using TV = std::vector<Tensor>;

namespace {
double val(const Tensor& t) { return t.to(f64).item<double>(); }

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// ---- values ---------------------------------------------------------------------------------

TEST(NNLoss, RegressionValues) {
  Tensor x = tensor({1.f, 2.f, -1.f, 0.5f}, {4});
  Tensor y = tensor({0.f, 0.f, 0.f, 0.f}, {4});
  EXPECT_NEAR(val(F::mse_loss(x, y)), (1 + 4 + 1 + 0.25) / 4, 1e-6);
  EXPECT_NEAR(val(F::mse_loss(x, y, "sum")), 6.25, 1e-6);
  EXPECT_EQ(F::mse_loss(x, y, "none").shape(), Shape({4}));
  EXPECT_NEAR(val(F::l1_loss(x, y)), 4.5 / 4, 1e-6);
  // smooth_l1 (beta 1): 0.5, 1.5, 0.5, 0.125; huber (delta 1) is the same for beta = delta = 1.
  EXPECT_NEAR(val(F::smooth_l1_loss(x, y, "sum")), 2.625, 1e-6);
  EXPECT_NEAR(val(F::huber_loss(x, y, "sum")), 2.625, 1e-6);
  // huber = delta * smooth_l1 with beta = delta.
  EXPECT_NEAR(val(F::huber_loss(x, y, "sum", 0.7)), 0.7 * val(F::smooth_l1_loss(x, y, "sum", 0.7)), 1e-5);
  EXPECT_NEAR(val(F::smooth_l1_loss(x, y, "sum", 0.0)), val(F::l1_loss(x, y, "sum")), 1e-6);
}

TEST(NNLoss, CrossEntropyMatchesLogSoftmaxNll) {
  Tensor x = randn({5, 4});
  Tensor t = tensor<int64_t>({0, 3, 1, 1, 2}, {5});
  Tensor a = F::cross_entropy(x, t);
  Tensor b = F::nll_loss(log_softmax(x, 1), t);
  EXPECT_NEAR(val(a), val(b), 1e-5);
  // Probabilities equal to one-hot targets give the same loss.
  Tensor oh = one_hot(t, 4).to(f32);
  EXPECT_NEAR(val(F::cross_entropy(x, oh)), val(a), 1e-5);
  // Weighted mean divides by the summed weights of the targets.
  Tensor w = tensor({1.f, 2.f, 3.f, 4.f}, {4});
  Tensor per = F::cross_entropy(x, t, {.weight = w, .reduction = "none"});
  EXPECT_NEAR(val(F::cross_entropy(x, t, {.weight = w})), val(per.sum()) / (1 + 4 + 2 + 2 + 3), 1e-5);
}

TEST(NNLoss, EdgeCases) {
  const Tensor ignored = tensor<int64_t>({-100, -100, -100}, {3});
  EXPECT_TRUE(std::isnan(val(F::cross_entropy(randn({3, 4}), ignored))));  // all ignored: NaN, as PyTorch
  EXPECT_TRUE(std::isnan(val(F::nll_loss(randn({3, 4}), ignored))));
  EXPECT_EQ(val(F::nll_loss(randn({3, 4}), ignored, {.reduction = "sum"})), 0.0);
  // Empty batch: NaN mean, 0 sum, empty "none".
  Tensor e = zeros({0, 4});
  Tensor et = zeros({0}, {.dtype = i64});
  EXPECT_TRUE(std::isnan(val(F::cross_entropy(e, et))));
  EXPECT_EQ(val(F::cross_entropy(e, et, {.reduction = "sum"})), 0.0);
  EXPECT_EQ(F::cross_entropy(e, et, {.reduction = "none"}).shape(), Shape({0}));
  EXPECT_TRUE(std::isnan(val(F::mse_loss(e, e))));
  // BCE clamps log to -100.
  EXPECT_NEAR(val(F::binary_cross_entropy(tensor({0.f}, {1}), tensor({1.f}, {1}))), 100.0, 1e-4);
  // BCE with logits is stable for large logits.
  Tensor big = tensor({-200.f, 200.f}, {2});
  Tensor l = F::binary_cross_entropy_with_logits(big, tensor({1.f, 0.f}, {2}), {.reduction = "none"});
  EXPECT_NEAR(l.to_vector<float>()[0], 200.f, 1e-3);
  EXPECT_NEAR(l.to_vector<float>()[1], 200.f, 1e-3);
  // kl_div: 0 log 0 = 0, and batchmean divides by the batch size.
  Tensor q = log(tensor({0.5f, 0.5f, 0.25f, 0.75f}, {2, 2}));
  Tensor p = tensor({0.f, 1.f, 0.5f, 0.5f}, {2, 2});
  EXPECT_FALSE(std::isnan(val(F::kl_div(q, p, "sum"))));
  EXPECT_NEAR(val(F::kl_div(q, p, "batchmean")), val(F::kl_div(q, p, "sum")) / 2, 1e-6);
}

TEST(NNLoss, CtcSimple) {
  // One frame, one label: the loss is -log p(label).
  Tensor lp = log(tensor({0.2f, 0.7f, 0.1f}, {1, 1, 3}));
  Tensor l = F::ctc_loss(lp, tensor<int64_t>({1}, {1, 1}), std::vector<int64_t>{1}, std::vector<int64_t>{1},
                         {.reduction = "sum"});
  EXPECT_NEAR(val(l), -std::log(0.7), 1e-5);
  // Two frames, label "1": paths 1-1, b-1, 1-b.
  Tensor lp2 = log(tensor({0.2f, 0.7f, 0.1f, 0.5f, 0.4f, 0.1f}, {2, 1, 3}));
  double p = 0.7 * 0.4 + 0.2 * 0.4 + 0.7 * 0.5;
  EXPECT_NEAR(val(F::ctc_loss(lp2, tensor<int64_t>({1}, {1}), tensor<int64_t>({2}, {1}), tensor<int64_t>({1}, {1}),
                              {.reduction = "sum"})),
              -std::log(p), 1e-5);
  // Impossible alignment: inf, or 0 with zero_infinity.
  Tensor tg = tensor<int64_t>({1, 1}, {1, 2});
  EXPECT_TRUE(std::isinf(val(F::ctc_loss(lp2, tg, std::vector<int64_t>{2}, std::vector<int64_t>{2}))));
  EXPECT_EQ(val(F::ctc_loss(lp2, tg, std::vector<int64_t>{2}, std::vector<int64_t>{2}, {.zero_infinity = true})), 0.0);
}

// ---- errors ---------------------------------------------------------------------------------

TEST(NNLoss, Errors) {
  std::string m = error_of([] { F::cross_entropy(randn({4, 5}), zeros({3}, {.dtype = i64})); });
  EXPECT_NE(m.find("[cross_entropy]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  EXPECT_NE(m.find("[3]"), std::string::npos) << m;
  m = error_of([] { F::nll_loss(randn({2, 3}), tensor<int64_t>({0, 3}, {2})); });
  EXPECT_NE(m.find("out of bounds for 3 classes"), std::string::npos) << m;
  m = error_of([] { F::cross_entropy(randn({2, 3}), tensor<int64_t>({-1, 0}, {2})); });
  EXPECT_NE(m.find("out of bounds"), std::string::npos) << m;
  m = error_of([] { F::cross_entropy(randn({2, 3}), zeros({2})); });  // float target, wrong shape
  EXPECT_NE(m.find("[cross_entropy]"), std::string::npos) << m;
  m = error_of([] { F::mse_loss(randn({2, 3}), randn({4})); });
  EXPECT_NE(m.find("[mse_loss]"), std::string::npos) << m;
  m = error_of([] { F::mse_loss(randn({2}), randn({2}), "avg"); });
  EXPECT_NE(m.find("reduction"), std::string::npos) << m;
  m = error_of([] { F::binary_cross_entropy(rand({2, 3}), rand({3})); });
  EXPECT_NE(m.find("[binary_cross_entropy]"), std::string::npos) << m;
  m = error_of([] { F::nll_loss(randn({2, 3}), zeros({2}, {.dtype = i64}), {.weight = ones({4})}); });
  EXPECT_NE(m.find("weight"), std::string::npos) << m;
  m = error_of([] {
    F::ctc_loss(randn({3, 2, 4}), zeros({2, 2}, {.dtype = i64}), std::vector<int64_t>{3, 5},
                std::vector<int64_t>{1, 1});
  });
  EXPECT_NE(m.find("[ctc_loss]"), std::string::npos) << m;
  m = error_of([] { F::triplet_margin_loss(randn({2, 3}), randn({3}), randn({2, 3})); });
  EXPECT_NE(m.find("[triplet_margin_loss]"), std::string::npos) << m;
  m = error_of([] { F::cosine_embedding_loss(randn({2, 3}), randn({2, 3}), ones({2, 1})); });
  EXPECT_NE(m.find("[cosine_embedding_loss]"), std::string::npos) << m;
}

// ---- modules --------------------------------------------------------------------------------

TEST(NNLoss, Modules) {
  Tensor x = randn({4, 3}), t = tensor<int64_t>({0, 2, 1, 2}, {4});
  Tensor w = tensor({1.f, 0.5f, 2.f}, {3});
  nn::CrossEntropyLoss ce({.weight = w, .label_smoothing = 0.1});
  EXPECT_NEAR(val(ce(x, t)), val(F::cross_entropy(x, t, {.weight = w, .label_smoothing = 0.1})), 1e-6);
  auto bufs = ce.named_buffers();
  ASSERT_EQ(bufs.size(), 1u);
  EXPECT_EQ(bufs[0].first, "weight");
  EXPECT_EQ(ce.num_params(), 0);
  EXPECT_NE(ce.str().find("CrossEntropyLoss"), std::string::npos);
  nn::CrossEntropyLoss plain;
  EXPECT_TRUE(plain.named_buffers().empty());
  EXPECT_NEAR(val(plain(x, t)), val(F::cross_entropy(x, t)), 1e-6);

  nn::MSELoss mse({.reduction = "sum"});
  Tensor y = randn({4, 3});
  EXPECT_NEAR(val(mse(x, y)), val(F::mse_loss(x, y, "sum")), 1e-5);
  nn::BCEWithLogitsLoss bce({.pos_weight = full({3}, 2.0)});
  EXPECT_EQ(bce.named_buffers().size(), 1u);
  Tensor p = rand({4, 3});
  EXPECT_NEAR(val(bce(x, p)), val(F::binary_cross_entropy_with_logits(x, p, {.pos_weight = full({3}, 2.0)})), 1e-6);
  nn::TripletMarginLoss tm({.margin = 0.5, .swap = true});
  EXPECT_NE(tm.extra_repr().find("swap=true"), std::string::npos);
  nn::KLDivLoss kl({.reduction = "batchmean", .log_target = true});
  EXPECT_NEAR(val(kl(x, y)), val(F::kl_div(x, y, "batchmean", true)), 1e-5);
  nn::CTCLoss ctc({.blank = 0, .reduction = "sum"});
  Tensor lp = log_softmax(randn({5, 2, 4}), 2);
  Tensor tg = tensor<int64_t>({1, 2, 3, 3}, {2, 2});
  Tensor il = tensor<int64_t>({5, 4}, {2}), tl = tensor<int64_t>({2, 2}, {2});
  EXPECT_NEAR(val(ctc(lp, tg, il, tl)), val(F::ctc_loss(lp, tg, il, tl, {.reduction = "sum"})), 1e-6);
  // Moving a loss with weights moves its buffers.
  nn::NLLLoss nll({.weight = w});
  nll.to(Device::cpu().autodiff());
  EXPECT_TRUE(nll.weight.device().has_autodiff());
}

// ---- gradients (finite differences in f64) ----------------------------------------------------

TEST(NNLoss, GradRegressionAndBinary) {
  Tensor y = rand_input({3, 4}, -1, 1, 11);
  for (const char* r : {"mean", "sum", "none"}) {
    EXPECT_EQ(gradcheck([&](const TV& v) { return F::mse_loss(v[0], y, r); }, {rand_input({3, 4}, -1, 1, 1)}), "");
    EXPECT_EQ(
        gradcheck([&](const TV& v) { return F::smooth_l1_loss(v[0], y, r, 0.5); }, {rand_input({3, 4}, -2, 2, 2)}), "");
    EXPECT_EQ(gradcheck([&](const TV& v) { return F::huber_loss(v[0], y, r, 0.8); }, {rand_input({3, 4}, -2, 2, 3)}),
              "");
  }
  Tensor t = rand_input({3, 4}, 0, 1, 12).detach();
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::binary_cross_entropy(v[0], t, v[1]); },
                      {rand_input({3, 4}, 0.05, 0.95, 4), rand_input({4}, 0.5, 2, 5)}),
            "");
  EXPECT_EQ(gradcheck(
                [&](const TV& v) {
                  return F::binary_cross_entropy_with_logits(v[0], v[1], {.weight = v[2], .pos_weight = v[3]});
                },
                {rand_input({3, 4}, -4, 4, 6), t, rand_input({3, 1}, 0.5, 2, 7), rand_input({4}, 0.5, 3, 8)}),
            "");
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::kl_div(v[0], v[1], "batchmean"); },
                      {rand_input({3, 4}, -3, 0, 9), rand_input({3, 4}, 0.1, 1, 10)}),
            "");
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::poisson_nll_loss(v[0], t * 4, {.log_input = false, .full = true}); },
                      {rand_input({3, 4}, 0.2, 3, 13)}),
            "");
}

TEST(NNLoss, GradClassification) {
  Tensor t = tensor<int64_t>({0, 2, -100, 1}, {4}, kiln::test::ad_device());
  Tensor w = rand_input({3}, 0.5, 2, 20).detach();
  for (const char* r : {"mean", "sum", "none"}) {
    EXPECT_EQ(gradcheck(
                  [&](const TV& v) {
                    return F::cross_entropy(v[0], t, {.weight = w, .reduction = r, .label_smoothing = 0.15});
                  },
                  {rand_input({4, 3}, -2, 2, 21)}),
              "");
    EXPECT_EQ(gradcheck([&](const TV& v) { return F::nll_loss(v[0], t, {.weight = w, .reduction = r}); },
                        {rand_input({4, 3}, -2, 2, 22)}),
              "");
  }
  Tensor probs = rand_input({2, 3, 2}, 0, 1, 23).detach();
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::cross_entropy(v[0], probs, {.weight = w, .label_smoothing = 0.1}); },
                      {rand_input({2, 3, 2}, -2, 2, 24)}),
            "");
}

TEST(NNLoss, GradEmbedding) {
  Tensor y = tensor({1., -1., 1.}, {3}, kiln::test::ad_device());
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::cosine_embedding_loss(v[0], v[1], y, 0.1); },
                      {rand_input({3, 4}, -1, 1, 30), rand_input({3, 4}, -1, 1, 31)}),
            "");
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::margin_ranking_loss(v[0], v[1], y, 0.2, "sum"); },
                      {rand_input({3}, -1, 1, 32), rand_input({3}, -1, 1, 33)}),
            "");
  EXPECT_EQ(gradcheck([&](const TV& v) { return F::hinge_embedding_loss(v[0], y, 0.7); }, {rand_input({3}, -1, 1, 34)}),
            "");
  for (double p : {1.0, 2.0, 3.0})
    EXPECT_EQ(gradcheck(
                  [&](const TV& v) {
                    return F::triplet_margin_loss(v[0], v[1], v[2], {.margin = 3.0, .p = p, .swap = true});
                  },
                  {rand_input({3, 4}, -1, 1, 35), rand_input({3, 4}, -1, 1, 36), rand_input({3, 4}, -1, 1, 37)}),
              "");
}

TEST(NNLoss, GradCtc) {
  const Device ad = kiln::test::ad_device();
  Tensor tg = tensor<int64_t>({1, 2, 2, 3, 1, 0}, {2, 3}, ad);
  for (const char* r : {"mean", "sum", "none"}) {
    EXPECT_EQ(gradcheck(
                  [&](const TV& v) {
                    return F::ctc_loss(log_softmax(v[0], 2), tg, std::vector<int64_t>{6, 5}, std::vector<int64_t>{3, 2},
                                       {.reduction = r});
                  },
                  {rand_input({6, 2, 4}, -2, 2, 40)}),
              "");
  }
}
