// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient-ready notifications (autodiff/grad_ready.h): each watched leaf is reported once, with
// its final gradient, as soon as backward has finished it (data-parallel training starts its
// all-reduces from there, src/dist/ddp.cpp).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "autodiff/grad_ready.h"
#include "test_util.h"

using namespace kiln;
using autodiff::GradReadyScope;

namespace {

struct Report {
  std::vector<size_t> order;
  std::vector<Tensor> grads;
  std::vector<int> count;
  explicit Report(size_t n) : grads(n), count(n, 0) {}
  GradReadyScope::Fn fn() {
    return [this](size_t i, const Tensor& g) {
      order.push_back(i);
      grads.at(i) = g;
      ++count.at(i);
    };
  }
};

}  // namespace

TEST(AutodiffGradReady, LayersAreReportedFromTheLastToTheFirst) {
  for (Checkpointing ck : {Checkpointing::None, Checkpointing::Balanced}) {
    Device d = Device::cpu().autodiff({.checkpointing = ck});
    manual_seed(1);
    Tensor x = randn({4, 3}).to(d);
    Tensor w1 = randn({3, 5}).to(d).require_grad(), w2 = randn({5, 5}).to(d).require_grad();
    Tensor w3 = randn({5, 2}).to(d).require_grad();
    Tensor loss = relu(relu(x.matmul(w1)).matmul(w2)).matmul(w3).square().sum();
    Report rep(3);
    Gradients g;
    {
      GradReadyScope scope({w1, w2, w3}, rep.fn());
      g = loss.backward();
    }
    EXPECT_EQ(rep.order, (std::vector<size_t>{2, 1, 0}));
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(rep.count[i], 1);
      Tensor w = i == 0 ? w1 : i == 1 ? w2 : w3;
      EXPECT_TRUE(rep.grads[i].equal(w.grad(g))) << "leaf " << i;
    }
  }
}

TEST(AutodiffGradReady, ALeafUsedTwiceIsReportedOnceWithTheSum) {
  Device d = Device::cpu().autodiff();
  Tensor x = tensor<float>({1, 2, 3}, {3}, d);
  Tensor w = tensor<float>({4, 5, 6}, {3}, d).require_grad();
  Tensor v = tensor<float>({1, 1, 1}, {3}, d).require_grad();
  // w feeds the first and the last op; v only a middle one.
  Tensor a = x * w;
  Tensor b = (a * v).exp().log();
  Tensor y = (b + w * w).sum();
  Report rep(2);
  Gradients g;
  {
    GradReadyScope scope({w, v}, rep.fn());
    g = y.backward();
  }
  EXPECT_EQ(rep.count, (std::vector<int>{1, 1}));
  EXPECT_TRUE(rep.grads[0].allclose(w.grad(g)));
  EXPECT_TRUE(rep.grads[0].allclose(tensor<float>({9, 12, 15}, {3}, d)));  // x * v + 2w
}

TEST(AutodiffGradReady, OnlyWatchedLeavesWithAGradient) {
  Device d = Device::cpu().autodiff();
  Tensor w = ones({2}, {.device = d}).require_grad();
  Tensor unused = ones({2}, {.device = d}).require_grad();
  Tensor h = w * 3;  // not a leaf: never reported
  Tensor plain = ones({2}, {.device = d});
  Report rep(4);
  {
    GradReadyScope scope({w, unused, h, plain}, rep.fn());
    (h * 2).sum().backward();
  }
  EXPECT_EQ(rep.order, (std::vector<size_t>{0}));
  // Without a scope, or outside it, nothing is reported.
  (w * 2).sum().backward();
  EXPECT_EQ(rep.order.size(), 1u);
}

TEST(AutodiffGradReady, ALeafRootAndDuplicates) {
  Device d = Device::cpu().autodiff();
  Tensor w = ones({3}, {.device = d}).require_grad();
  Report rep(2);
  {
    GradReadyScope scope({w, w}, rep.fn());
    w.backward(full({3}, 2.0, {.device = d}));
  }
  EXPECT_EQ(rep.count, (std::vector<int>{1, 1}));
  EXPECT_EQ(rep.grads[1].to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(AutodiffGradReady, ScopesNestAndTheCallbackRunsItsOwnBackward) {
  Device d = Device::cpu().autodiff();
  Tensor w = ones({2}, {.device = d}).require_grad();
  Report outer(1), inner(1);
  int nested_calls = 0;
  GradReadyScope a({w}, outer.fn());
  {
    GradReadyScope b({w}, [&](size_t i, const Tensor& g) {
      inner.fn()(i, g);
      const bool prev = set_grad_enabled(true);  // backward runs its rules without recording
      (w * 5).sum().backward();                  // a backward pass of its own: reported to no scope
      set_grad_enabled(prev);
      ++nested_calls;
    });
    (w * 2).sum().backward();
  }
  EXPECT_EQ(inner.count[0], 1);
  EXPECT_EQ(outer.count[0], 0);
  EXPECT_EQ(nested_calls, 1);
  (w * 2).sum().backward();  // the outer scope is active again
  EXPECT_EQ(outer.count[0], 1);
}
