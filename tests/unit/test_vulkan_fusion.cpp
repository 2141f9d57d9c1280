// SPDX-License-Identifier: MIT OR Apache-2.0
// Fusion on the Vulkan device (src/backends/vulkan/fusion.cpp): the planner's groups run as
// one kernel each, with the bits of the same ops run one kernel per op (`.without_fusion()`).
// The conformance suite runs on the fused device too ("vulkan-fusion" in KILN_TEST_DEVICES).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backends/vulkan/context.h"
#include "fusion/fusion.h"
#include "kiln/nn/functional/norm.h"
#include "require_vulkan.h"

using namespace kiln;

namespace {

/// Dispatches recorded on Vulkan device 0 so far.
int64_t dispatches() { return vulkan::Context::get(0).stats().dispatches; }

}  // namespace

TEST(VulkanFusion, ChainsRunAsOneKernelWithTheBitsOfOneKernelPerOp) {
  REQUIRE_VULKAN();
  const Device fused = Device::vulkan().fusion(), plain = fused.without_fusion();
  ASSERT_TRUE(fused.has_fusion());
  // Broadcast and strided operands, a scalar, a bool step, f16 rounding between steps.
  const Tensor x = randn({64, 130}), y = randn({130}), z = randn({64, 1}), t = randn({130, 64});
  auto chain = [&](const Device& d, int64_t* n) {
    const Tensor a = x.to(d), b = y.to(d), c = z.to(d), tt = t.to(d).transpose(0, 1);
    sync(d);
    const int64_t before = dispatches();
    Tensor r = ((a * b + c).exp() - tt).sigmoid() * 0.5f + (a > c).to(f32);
    Tensor h = (r.to(f16) * 3.0f).to(f32) - r;
    Tensor out = where(a < 0.0f, h, r.tanh());
    sync(d);
    *n = dispatches() - before;
    return out.to(Device::cpu());
  };
  int64_t nf = 0, np = 0;
  fusion::reset_stats();
  const Tensor rf = chain(fused, &nf), rp = chain(plain, &np);
  EXPECT_TRUE(rf.equal(rp)) << (rf - rp).abs().max().item<float>();
  EXPECT_GT(fusion::stats().fused_ops, 10);
  EXPECT_LT(nf * 3, np) << nf << " fused dispatches, " << np << " unfused";
}

namespace {

/// f run on the fused and the plain Vulkan device from the same inputs (copied there by f):
/// the results must be the same bits; returns the dispatches each took.
template <class F>
std::pair<int64_t, int64_t> fused_and_plain(const F& f) {
  const Device fused = Device::vulkan().fusion(), plain = fused.without_fusion();
  int64_t n[2] = {0, 0};
  std::vector<Tensor> out[2];
  for (int q = 0; q < 2; ++q) {
    const Device& d = q == 0 ? fused : plain;
    // A warm-up run, its results kept so that it executes: on a cold cache the autotuner times
    // the matmul's variants (3 runs each) the first time it meets the shape.
    const std::vector<Tensor> warm = f(d);
    sync(d);
    if (q == 0) fusion::reset_stats();  // the callers read the counted run's statistics
    const int64_t before = dispatches();
    std::vector<Tensor> r = f(d);
    sync(d);
    n[q] = dispatches() - before;
    for (const Tensor& t : r) out[q].push_back(t.to(Device::cpu()));
  }
  for (size_t i = 0; i < out[0].size(); ++i)
    EXPECT_TRUE(out[0][i].equal(out[1][i])) << "result " << i << ": " << out[0][i] << " vs " << out[1][i];
  return {n[0], n[1]};
}

}  // namespace

TEST(VulkanFusion, ARowOpReadsTheChainInItsOwnKernel) {
  REQUIRE_VULKAN();
  const Tensor x = randn({33, 300}), y = randn({300}), w = randn({300}), b = randn({300});
  namespace F = nn::functional;
  // Each chain and the row op closing it: one kernel, the row op's own arithmetic.
  const std::vector<std::function<Tensor(const Tensor&)>> rows = {
      [](const Tensor& v) { return v.sum({-1}); },
      [](const Tensor& v) { return mean(v, {-1}, true); },
      [](const Tensor& v) { return amax(v, {-1}); },
      [](const Tensor& v) { return var(v, {-1}); },
      [](const Tensor& v) { return softmax(v, -1); },
      [](const Tensor& v) { return log_softmax(v, -1); },
      [&](const Tensor& v) { return F::layer_norm(v, {300}, w.to(v.device()), b.to(v.device())); },
      [](const Tensor& v) { return v.sum(); },
  };
  for (size_t q = 0; q < rows.size(); ++q) {
    SCOPED_TRACE("row op " + std::to_string(q));
    fusion::reset_stats();
    const auto [nf, np] = fused_and_plain([&](const Device& d) {
      const Tensor a = x.to(d), c = y.to(d);
      sync(d);
      return std::vector<Tensor>{rows[q]((a * c + 1.0f).tanh() * 2.0f)};
    });
    EXPECT_EQ(nf, 1) << np << " unfused";
  }
  // Attention's scores: a product, scaled and masked, then softmax (short rows).
  {
    const Tensor q = randn({2, 2, 4, 8}), k = randn({2, 2, 6, 8}), m = randn({4, 6});
    const auto [nf2, np2] = fused_and_plain([&](const Device& d) {
      const Tensor a = q.to(d), b = k.to(d), c = m.to(d);
      sync(d);
      const Tensor p = softmax(matmul(a, b.transpose(-2, -1)) * 0.35f + c, -1);
      return std::vector<Tensor>{p, p.mean({1})};
    });
    EXPECT_LT(nf2, np2);
  }
  // Steps the group stores, one of them the row op's input (nll_loss's chain).
  {
    const Tensor t = tensor<int64_t>({1, -100, 2, 0, 3}, {5});
    const auto [nf2, np2] = fused_and_plain([&](const Device& d) {
      const Tensor v = x.to(d).reshape({-1}).narrow(0, 0, 5), keep = t.to(d) != int64_t{-100};
      sync(d);
      const Tensor w = where(keep, ones_like(v), 0.0);
      const Tensor loss = where(keep, -(v * w), 0.0);
      return std::vector<Tensor>{loss.sum(), w, loss};
    });
    EXPECT_LT(nf2, np2);
  }
  // A step stored in place over memory the chain reads, then a row op reading it in passes.
  fused_and_plain([&](const Device& d) {
    Tensor a = x.to(d);
    const Tensor c = y.to(d);
    sync(d);
    a.add_(c.exp());
    return std::vector<Tensor>{F::layer_norm(a, {300}), var(a, {-1}), a};
  });
  // A step the group stores (a tensor still holds it) and one read after the row op.
  const auto [nf, np] = fused_and_plain([&](const Device& d) {
    const Tensor a = x.to(d), c = y.to(d);
    sync(d);
    const Tensor h = (a - c).exp();
    const Tensor s = h.sum({-1}, true);
    return std::vector<Tensor>{s, h, h / s};
  });
  EXPECT_LT(nf, np);
}

TEST(VulkanFusion, AProductRunsItsEpilogueInItsKernel) {
  REQUIRE_VULKAN();
  const Tensor a = randn({4, 40, 24}), w = randn({24, 36}), bias = randn({36});
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "the product kept" : "the product only in registers");
    fusion::reset_stats();
    const auto [nf, np] = fused_and_plain([&](const Device& d) {
      const Tensor x = a.to(d), m = w.to(d), c = bias.to(d);
      sync(d);
      const Tensor p = matmul(x, m);
      std::vector<Tensor> r{((p + c).relu() * 0.5f - 1.0f).sigmoid()};
      if (keep) r.push_back(p);
      return r;
    });
    EXPECT_EQ(fusion::stats().epilogues, 1);
    EXPECT_EQ(nf, 1) << np << " unfused";
  }
}

TEST(VulkanFusion, AConvolutionRunsItsEpilogueInItsKernel) {
  REQUIRE_VULKAN();
  namespace F = nn::functional;
  const Tensor x = randn({2, 3, 12, 12}), w = randn({8, 3, 3, 3}), b = randn({8}), scale = randn({1, 8, 1, 1}),
               shift = randn({1, 8, 1, 1}), res = randn({2, 8, 12, 12});
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "the convolution's result kept" : "the result only in registers");
    fusion::reset_stats();
    const auto [nf, np] = fused_and_plain([&](const Device& d) {
      const Tensor xd = x.to(d), wd = w.to(d), bd = b.to(d), sd = scale.to(d), hd = shift.to(d), rd = res.to(d);
      sync(d);
      // A batch norm in eval mode, a residual and an activation after the convolution.
      const Tensor y = F::conv2d(xd, wd, bd, {.padding = 1});
      std::vector<Tensor> r{((y * sd + hd) + rd).relu().tanh()};
      if (keep) r.push_back(y);
      return r;
    });
    EXPECT_EQ(fusion::stats().epilogues, 1);
    EXPECT_EQ(nf, 1) << np << " unfused";
  }
}
