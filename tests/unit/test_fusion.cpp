// SPDX-License-Identifier: MIT OR Apache-2.0
// The fusion decorator (Device::cpu().fusion()): results equal to the unfused CPU device (the
// fused kernels call the same CPU kernels per tile, so elementwise chains match bitwise), flush
// points, dead-code elimination, buffers held by live tensors, plan caching, composition with
// autodiff either way, a property test over random op streams, and training losses.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "autodiff/graph.h"
#include "backends/cpu/onednn.h"
#include "fusion/fusion.h"
#include "fusion_small_limit.h"
#include "restore_onednn.h"
#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

/// The CPU without fusion (the reference), whatever the default CPU device is.
Device plain() { return Device::cpu().without_fusion(); }
Device fused() { return plain().fusion(); }

/// Max |a - b| / (atol + rtol |b|) over all elements (both read as f64); NaNs must match.
::testing::AssertionResult close(const Tensor& a, const Tensor& b, double rtol = 1e-6, double atol = 1e-6) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes " << to_string(a.shape()) << " vs " << to_string(b.shape());
  if (a.dtype() != b.dtype()) return ::testing::AssertionFailure() << "dtypes differ";
  auto va = a.to(plain()).to_vector<double>(), vb = b.to(plain()).to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) != std::isnan(vb[i]))
      return ::testing::AssertionFailure() << "NaN mismatch at " << i << ": " << va[i] << " vs " << vb[i];
    if (std::isnan(va[i]) || va[i] == vb[i]) continue;
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
  }
  return ::testing::AssertionSuccess();
}

Tensor gelu_composite(const Tensor& x) { return x * 0.5 * (erf(x / std::sqrt(2.0)) + 1.0); }

using test::SmallLimit;

using test::RestoreOnednnAndThreads;

}  // namespace

TEST(Fusion, DeviceComposesWithAutodiffEitherWay) {
  Device a = plain().fusion().autodiff();
  Device b = plain().autodiff().fusion();
  EXPECT_EQ(a, b);
  EXPECT_TRUE(a.has_fusion());
  EXPECT_TRUE(a.has_autodiff());
  EXPECT_EQ(a.without_autodiff(), fused());
  EXPECT_EQ(fused().fusion(), fused());
  EXPECT_FALSE(plain().has_fusion());
  EXPECT_TRUE(fused().is_cpu());
  EXPECT_EQ(fused().str(), "cpu+fusion");
  EXPECT_EQ(Device::from_string("cpu-fusion"), fused());
  EXPECT_EQ(plain().autodiff().without_autodiff(), plain());
}

TEST(Fusion, ElementwiseChainMatchesUnfusedAndElidesIntermediates) {
  manual_seed(7);
  Tensor xc = randn({37, 1000}, {.device = plain()});
  Tensor xf = xc.to(fused());
  fusion::reset_stats();
  Tensor yf = gelu_composite(xf);
  EXPECT_EQ(fusion::stats().fused_groups, 0) << "nothing runs before a read";
  Tensor yc = gelu_composite(xc);
  EXPECT_EQ(yf.to_vector<float>(), yc.to_vector<float>());  // same kernels per tile: bitwise
  fusion::Stats s = fusion::stats();
  EXPECT_EQ(s.fused_groups, 1);
  EXPECT_EQ(s.fused_ops, 5);
  EXPECT_EQ(s.intermediates_elided, 4);
}

TEST(Fusion, BroadcastScalarsCastsAndMasks) {
  auto f = [](const Device& d) {
    manual_seed(8);
    Tensor x = randn({6, 5, 7}, {.device = d});
    Tensor b = randn({7}, {.device = d});
    Tensor c = randn({5, 1}, {.device = d});
    Tensor t = x.transpose(0, 2).transpose(0, 2);  // a strided view of x
    Tensor m = gt(x, 0.25);
    Tensor y = where(m, exp(x + b) * c, sigmoid(t) - 1.0);
    Tensor z = (y.to(f64) * 3.0 + 1).to(f32);
    return std::vector<Tensor>{y, z, m};
  };
  auto a = f(plain()), b = f(fused());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 0, 0)) << i;
}

TEST(Fusion, TrailingRowOpsMatch) {
  auto f = [](const Device& d) {
    manual_seed(9);
    Tensor x = randn({33, 129}, {.device = d});
    Tensor w = randn({129}, {.device = d});
    Tensor h = x * 2.0 + 1.0;
    std::vector<Tensor> out;
    out.push_back(sum(exp(h * 0.1), {-1}));
    out.push_back(mean(tanh(h), {-1}, true));
    out.push_back(amax(h * h, {-1}));
    out.push_back(softmax(h - 3.0, -1));
    out.push_back(log_softmax(sigmoid(h), -1));
    out.push_back(F::layer_norm(relu(h) + 0.5, {129}, w, w * 0.1));
    out.push_back(F::rms_norm(h * 0.5, {129}, w));
    return out;
  };
  fusion::reset_stats();
  auto a = f(plain()), b = f(fused());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 1e-6, 1e-6)) << i;
  EXPECT_GE(fusion::stats().fused_groups, 5);
}

TEST(Fusion, DeadCodeIsNotComputedButLiveTensorsAre) {
  const SmallLimit all(0);  // small tensors: every op queued
  Tensor x = ones({1000}, {.device = fused()});
  fusion::reset_stats();
  Tensor kept = exp(x) + 1.0;           // held: must be materialised
  { Tensor unused = sin(kept) * 2.0; }  // dropped before any read: never computed
  Tensor y = kept * 3.0;
  sync(fused());
  fusion::Stats s = fusion::stats();
  EXPECT_EQ(s.dead, 2);
  EXPECT_FLOAT_EQ(kept.to_vector<float>()[5], std::exp(1.0f) + 1.0f);
  EXPECT_FLOAT_EQ(y.to_vector<float>()[999], (std::exp(1.0f) + 1.0f) * 3.0f);
}

TEST(Fusion, FlushPointsReadWriteAndEagerOps) {
  Tensor x = arange(0, 12, 1, f32, fused()).reshape({3, 4});
  Tensor y = x * 2.0 + 1.0;
  EXPECT_FLOAT_EQ(y.sum().item<float>(), 2 * 66 + 12);  // read in the middle
  y.add_(1.0);                                          // in-place on a computed buffer
  Tensor z = y * y;
  y.fill_(0.0);  // write after a queued read
  EXPECT_FLOAT_EQ(z.to_vector<float>()[11], 24.0f * 24.0f);
  EXPECT_FLOAT_EQ(y.to_vector<float>()[3], 0.0f);
  Tensor idx = tensor<int64_t>({2, 0}, {2}, fused());
  Tensor g = index_select(exp(x), 0, idx);  // not fusable: flushes, then runs directly
  EXPECT_FLOAT_EQ(g.to_vector<float>()[0], std::exp(8.0f));
  EXPECT_THROW(index_select(x + 1.0, 0, tensor<int64_t>({5}, {1}, fused())), kiln::Error);  // errors stay synchronous
  // a slice written through a view while the base is queued
  Tensor b = x + 0.0;
  b.narrow(1, 0, 2).copy_(zeros({3, 2}, {.device = fused()}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{0, 0, 2, 3, 0, 0, 6, 7, 0, 0, 10, 11}));
}

TEST(Fusion, LargeResultsStreamedPastTheCachesMatch) {
  // >= 16 MB results take the non-temporal store path; the size is not a multiple of the tile.
  const int64_t n = (int64_t{4} << 20) + 1234;
  manual_seed(4);
  Tensor xc = randn({n}, {.device = plain()});
  Tensor xf = xc.to(fused());
  Tensor hf = exp(xf * 0.25), yf = tanh(hf - 1.0) * xf;  // hf is held: stored too
  Tensor hc = exp(xc * 0.25), yc = tanh(hc - 1.0) * xc;
  EXPECT_EQ(yf.to_vector<float>(), yc.to_vector<float>());
  EXPECT_EQ(hf.to_vector<float>(), hc.to_vector<float>());
}

TEST(Fusion, PlansAreCachedAcrossSizes) {
  const SmallLimit all(0);  // small tensors: every op queued
  fusion::reset_stats();
  for (int64_t n : {1000, 5000, 20000, 7}) {
    Tensor x = ones({n}, {.device = fused()});
    Tensor y = gelu_composite(x);
    EXPECT_NEAR(y.to_vector<float>().back(), 0.8413447f, 1e-6);
  }
  fusion::Stats s = fusion::stats();
  EXPECT_EQ(s.fused_groups, 4);
  EXPECT_EQ(s.plans_built, 1);
  EXPECT_EQ(s.plan_hits, 3);
}

TEST(Fusion, DisabledPassesThrough) {
  fusion::set_enabled(false);
  fusion::reset_stats();
  Tensor x = ones({100}, {.device = fused()});
  Tensor y = exp(x) * 2.0;
  EXPECT_EQ(fusion::stats().recorded, 0);
  EXPECT_FLOAT_EQ(y.to_vector<float>()[0], 2 * std::exp(1.0f));
  fusion::set_enabled(true);
}

TEST(Fusion, ResultsDoNotDependOnThreadCount) {
  const int nt = num_threads();
  manual_seed(3);
  Tensor x = randn({300, 513}).to(fused());
  std::vector<float> ref;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    Tensor y = log_softmax(gelu_composite(x) * 1.5, -1);
    if (ref.empty())
      ref = y.to_vector<float>();
    else
      EXPECT_EQ(y.to_vector<float>(), ref) << t << " threads";
  }
  set_num_threads(nt);
}

// ---- autodiff through fusion ---------------------------------------------------------------------

namespace {
using Fn1 = std::function<Tensor(const std::vector<Tensor>&)>;
void expect_same_grads(const Fn1& f, const std::vector<Shape>& shapes, DType dt = f32) {
  for (const Device& fd : {plain().fusion().autodiff(), plain().autodiff().fusion()}) {
    manual_seed(11);
    std::vector<Tensor> xc, xf;
    for (auto& s : shapes) {
      Tensor r = randn(s, {.dtype = dt});
      xc.push_back(r.to(plain().autodiff()).require_grad());
      xf.push_back(r.to(fd).require_grad());
    }
    Tensor yc = f(xc), yf = f(xf);
    EXPECT_TRUE(close(yf, yc, 1e-6, 1e-6));
    Gradients gc = yc.sum().backward(), gf = yf.sum().backward();
    for (size_t i = 0; i < xc.size(); ++i) EXPECT_TRUE(close(xf[i].grad(gf), xc[i].grad(gc), 1e-5, 1e-6)) << i;
  }
}
}  // namespace

TEST(FusionAutodiff, ElementwiseCompositesHaveTheSameGradients) {
  expect_same_grads([](const auto& v) { return gelu_composite(v[0]); }, {{64, 33}});
  expect_same_grads([](const auto& v) { return tanh(v[0] * v[1] + v[2]) * sigmoid(v[0]); }, {{8, 16}, {16}, {8, 1}});
  expect_same_grads([](const auto& v) { return where(gt(v[0], 0.0), v[0] * v[1], exp(v[1] * 0.5)); }, {{5, 7}, {5, 7}});
  expect_same_grads([](const auto& v) { return pow(abs(v[0]) + 1.0, 1.5) / (v[1] * v[1] + 2.0); }, {{40}, {40}}, f64);
}

TEST(FusionAutodiff, RowOpsHaveTheSameGradients) {
  expect_same_grads([](const auto& v) { return log_softmax(v[0] * 2.0 + v[1], -1); }, {{9, 31}, {31}});
  expect_same_grads([](const auto& v) { return softmax(exp(v[0] * 0.1), -1) * v[0]; }, {{9, 31}});
  expect_same_grads([](const auto& v) { return F::layer_norm(v[0] * 3.0 - 1.0, {31}, v[1], v[2]); },
                    {{9, 31}, {31}, {31}});
  expect_same_grads([](const auto& v) { return sum(square(v[0] - 0.5), {-1}, true) * v[0]; }, {{9, 31}});
}

TEST(FusionAutodiff, BalancedCheckpointingComposes) {
  Device d = plain().autodiff({.checkpointing = Checkpointing::Balanced}).fusion();
  EXPECT_EQ(autodiff::checkpointing(d), Checkpointing::Balanced);
  manual_seed(5);
  Tensor r = randn({16, 24});
  Tensor xc = r.to(plain().autodiff()).require_grad(), xf = r.to(d).require_grad();
  Tensor yc = gelu_composite(tanh(xc) * 2.0).sum(), yf = gelu_composite(tanh(xf) * 2.0).sum();
  EXPECT_TRUE(close(xf.grad(yf.backward()), xc.grad(yc.backward()), 1e-5, 1e-6));
}

// ---- property test: random op streams -----------------------------------------------------------

TEST(Fusion, IndependentOpsRunBeforeTheGroupThatGoesOnPastThem) {
  const SmallLimit all(0);  // small tensors: every op queued
  // Batch-norm backward shape: full-size steps with per-channel coefficients computed between
  // them. The coefficient ops read nothing the full-size group writes, so they run first and
  // the full-size steps form one group.
  auto f = [](const Device& d) {
    manual_seed(21);
    Tensor x = randn({8, 6, 5, 7}, {.device = d}), g = randn({8, 6, 5, 7}, {.device = d});
    Tensor mean = x.mean({0, 2, 3}, true), var = x.var({0, 2, 3}, 0, true);
    Tensor xc = x - mean;
    Tensor invstd = rsqrt(var + 1e-5);
    Tensor a = xc * invstd;
    Tensor coef = invstd * invstd * 0.5;  // per channel, between two full-size steps
    Tensor y = a * coef + g;
    Tensor w = mean.expand({8, 6, 5, 7}) + y;  // a stride-0 view of the full shape is a gather
    return std::vector<Tensor>{y, w};
  };
  auto a = f(plain());
  fusion::reset_stats();
  auto b = f(fused());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 0, 0)) << i;
  const fusion::Stats s = fusion::stats();
  EXPECT_EQ(s.fused_groups, 2) << "the per-channel chain, then all full-size steps";
  EXPECT_EQ(s.fused_ops, 4 + 5);
}

TEST(Fusion, HoistingRespectsInPlaceWrites) {
  const SmallLimit all(0);  // small tensors: every op queued
  // A per-channel op that overwrites what the group read, or reads what it wrote, keeps its
  // place in the stream; one that writes a buffer the group reads later runs first.
  auto f = [](const Device& d) {
    manual_seed(22);
    Tensor x = randn({16, 40}, {.device = d});
    Tensor c = randn({1, 40}, {.device = d}), k = randn({1, 40}, {.device = d});
    Tensor y1 = x * c;
    c.mul_(2.0);         // overwrites an operand of y1: after y1
    Tensor y2 = y1 + c;  // reads the new c
    k.add_(1.0);         // independent of the group: runs first
    Tensor y3 = y2 * k;
    Tensor y4 = y3 - 1.0;
    return std::vector<Tensor>{y1, y2, y3, y4, c, k};
  };
  auto a = f(plain());
  fusion::reset_stats();
  auto b = f(fused());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 0, 0)) << i;
  EXPECT_EQ(fusion::stats().fused_ops, 3) << "y2, y3, y4; y1 and the two in-place ops alone";
}

TEST(Fusion, ConvFollowedByReluRunsAsOneConvolution) {
  const SmallLimit all(0);  // small tensors: every op queued
  // f32 (oneDNN post-op where built in) and f64 (the portable kernel, then the activation);
  // with and without bias; strided and padded; gradients through autodiff too.
  for (DType dt : {f32, f64}) {
    for (bool bias : {true, false}) {
      auto f = [&](const Device& d) {
        manual_seed(31);
        Device ad = d.autodiff();
        Tensor x = randn({3, 4, 11, 9}, {.dtype = dt, .device = ad});
        Tensor w = randn({6, 4, 3, 3}, {.dtype = dt, .device = ad}).require_grad();
        Tensor b = bias ? randn({6}, {.dtype = dt, .device = ad}).require_grad() : Tensor();
        Tensor y = relu(F::conv2d(x, w, b, {.stride = 2, .padding = 1}));
        auto g = (y * y).sum().backward();
        std::vector<Tensor> out{y.detach(), g.get(w)};
        if (bias) out.push_back(g.get(b));
        return out;
      };
      auto a = f(plain());
      fusion::reset_stats();
      auto b = f(fused());
      EXPECT_EQ(fusion::stats().epilogues, 1) << dtype_name(dt) << " bias " << bias;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 1e-5, 1e-5)) << i;
    }
  }
  // NaN passes through the fused ReLU as through the Relu kernel (oneDNN's own ReLU would turn
  // it into 0: Note [Convolution activations] in conv_onednn.cpp).
  {
    manual_seed(33);
    std::vector<float> v = randn({2, 4, 8, 8}).to_vector<float>();
    v[10] = std::nanf("");
    Tensor xn = tensor(v, {2, 4, 8, 8}), wn = randn({16, 4, 3, 3});
    fusion::reset_stats();
    Tensor y = relu(F::conv2d(xn.to(fused()), wn.to(fused()), {}, {.padding = 1}));
    auto got = y.to_vector<float>();
    EXPECT_EQ(fusion::stats().epilogues, 1);
    auto want = relu(F::conv2d(xn.to(plain()), wn.to(plain()), {}, {.padding = 1})).to_vector<float>();
    int nans = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i;
      nans += std::isnan(want[i]) ? 1 : 0;
    }
    EXPECT_EQ(nans, 16 * 9) << "a 3x3 patch of every output channel";
  }
  // A convolution whose result is still held (or read by another op) keeps it.
  manual_seed(32);
  Tensor x = randn({2, 3, 8, 8}, {.device = fused()}), w = randn({5, 3, 3, 3}, {.device = fused()});
  fusion::reset_stats();
  Tensor c = F::conv2d(x, w);
  Tensor r = relu(c);
  EXPECT_TRUE(close(r, relu(F::conv2d(x.to(plain()), w.to(plain()))), 1e-6, 1e-6));
  EXPECT_TRUE(close(c, F::conv2d(x.to(plain()), w.to(plain())), 1e-6, 1e-6));
  EXPECT_EQ(fusion::stats().epilogues, 0);
}

namespace {

// Runs f on the plain and on the fused CPU: the fused run must make one convolution with `ops`
// ops in its epilogue and give the plain results bit for bit (NaN where they have NaN). Returns
// the number of NaNs.
int expect_conv_epilogue(const std::function<std::vector<double>(const Device&)>& f, int64_t ops,
                         const std::string& what) {
  auto a = f(plain());
  fusion::reset_stats();
  auto got = f(fused());
  EXPECT_EQ(fusion::stats().epilogues, 1) << what;
  EXPECT_EQ(fusion::stats().conv_epilogue_ops, ops) << what;
  EXPECT_EQ(got.size(), a.size()) << what;
  int nans = 0;
  for (size_t i = 0; i < a.size() && i < got.size(); ++i) {
    nans += std::isnan(a[i]) ? 1 : 0;
    if (std::isnan(a[i]))
      EXPECT_TRUE(std::isnan(got[i])) << what << " " << i;
    else
      EXPECT_EQ(got[i], a[i]) << what << " " << i;
  }
  return nans;
}

/// Calls f(dt, onednn, form) for forms 0..forms-1: f32 through oneDNN (where built in) and
/// through the portable kernel, and f64 (portable); even forms on 2 threads, odd ones on 1.
void for_conv_configs(int forms, const std::function<void(DType, bool, int)>& f) {
  const RestoreOnednnAndThreads restore;
  for (DType dt : {f32, f64})
    for (bool onednn : {true, false})
      for (int form = 0; form < forms; ++form) {
        if (dt == f64 && onednn) continue;
        cpu::onednn::set_enabled(onednn && restore.saved);
        set_num_threads(form % 2 ? 1 : 2);
        f(dt, onednn, form);
      }
}

}  // namespace

TEST(Fusion, ConvPerChannelScaleAndShiftRunInTheConvolution) {
  const SmallLimit all(0);  // small tensors: every op queued
  // A batch norm in eval mode (x * scale + shift, one value per channel) after a convolution,
  // then a residual add and a relu, as one convolution: each step rounds as the separate op, so
  // results are bitwise the unfused ones. f32 with oneDNN (per share of images: 3 images on 2
  // threads) and with the portable kernel, f64; scale and shift as [C, 1, 1] or [1, C, 1, 1],
  // each alone; nn::BatchNorm2d in eval mode; NaN in the input.
  for_conv_configs(6, [&](DType dt, bool onednn, int form) {
    auto f = [&](const Device& d) {
      manual_seed(60 + form);
      std::vector<double> xv = randn({3, 5, 9, 9}, {.dtype = f64}).to_vector<double>();
      xv[100] = std::nan("");
      Tensor x = tensor(xv, {3, 5, 9, 9}).to(dt).to(d);
      Tensor w = randn({6, 5, 3, 3}, {.dtype = dt, .device = d});
      Tensor b = form == 1 ? Tensor() : randn({6}, {.dtype = dt, .device = d});
      Tensor sc = randn({6, 1, 1}, {.dtype = dt, .device = d}), sh = randn({1, 6, 1, 1}, {.dtype = dt, .device = d});
      Tensor r = randn({3, 6, 9, 9}, {.dtype = dt, .device = d});
      Tensor c = F::conv2d(x, w, b, {.padding = 1});
      Tensor y;
      if (form == 0) y = c * sc + sh;
      if (form == 1) y = relu(sc * c + sh);
      if (form == 2) y = relu(c * sc + sh + r);
      if (form == 3) y = relu(c * sc);
      if (form == 4) y = sh + c + r;
      if (form == 5) {
        nn::BatchNorm2d bn({.num_features = 6, .dtype = dt}, d);
        (void)bn(randn({4, 6, 9, 9}, {.dtype = dt, .device = d}) * 3 + 1);  // running statistics
        bn.train(false);
        c = Tensor();
        y = relu(bn(F::conv2d(x, w, b, {.padding = 1})));  // the conv's result a temporary
      }
      c = Tensor();  // dead before the flush: only the epilogue reads it
      return y.to(f64).to_vector<double>();
    };
    const std::string what =
        std::string(dtype_name(dt)) + (onednn ? " onednn" : " portable") + " form " + std::to_string(form);
    const int64_t ops[] = {2, 3, 4, 2, 2, 3};  // Mul, Add, residual Add, Relu: what each form has
    const int nans = expect_conv_epilogue(f, ops[form], what);
    EXPECT_EQ(nans, 6 * 9) << what << ": a 3x3 patch of each output channel";
  });
}

TEST(Fusion, ConvFollowedByClampRunsInTheConvolution) {
  const SmallLimit all(0);  // small tensors: every op queued
  // ReLU6 (clamp to [0, 6]) and other clamps after a convolution, alone or after a batch norm's
  // scale and shift or a residual, as one convolution: bitwise the unfused result (NaN passes
  // as through the Clamp kernel). f32 with oneDNN (a 3x3 and a 1x1 convolution, which take
  // different paths) and with the portable kernel, f64; one bound only; lo > hi (all hi).
  for_conv_configs(6, [&](DType dt, bool onednn, int form) {
    const int64_t k = form % 3 == 1 ? 1 : 3;
    auto f = [&](const Device& d) {
      manual_seed(70 + form);
      std::vector<double> xv = (randn({3, 16, 9, 9}, {.dtype = f64}) * 4).to_vector<double>();
      xv[100] = std::nan("");
      Tensor x = tensor(xv, {3, 16, 9, 9}).to(dt).to(d);
      Tensor w = randn({16, 16, k, k}, {.dtype = dt, .device = d});
      Tensor b = randn({16}, {.dtype = dt, .device = d});
      Tensor sc = randn({16, 1, 1}, {.dtype = dt, .device = d}), sh = randn({16, 1, 1}, {.dtype = dt, .device = d});
      Tensor c = F::conv2d(x, w, b, {.padding = k / 2});
      Tensor y;
      if (form == 0) y = clamp(c, 0.0, 6.0);
      if (form == 1) y = clamp(c * sc + sh, 0.0, 6.0);
      if (form == 2) y = clamp(c + x, std::nullopt, 1.5);
      if (form == 3) y = clamp(c, -2.0, std::nullopt);
      if (form == 4) y = clamp(c, 3.0, -1.0);  // lo > hi: every value hi (NaN stays)
      if (form == 5) y = clamp(c * sc, -0.5, 0.5);
      c = Tensor();  // dead before the flush: only the epilogue reads it
      return y.to(f64).to_vector<double>();
    };
    const std::string what =
        std::string(dtype_name(dt)) + (onednn ? " onednn" : " portable") + " form " + std::to_string(form);
    const int64_t ops[] = {1, 3, 2, 1, 1, 2};  // Mul, Add, residual Add, Clamp: what each form has
    EXPECT_GT(expect_conv_epilogue(f, ops[form], what), 0) << what;
  });
}

TEST(Fusion, ConvResidualAddRunsInTheConvolution) {
  const SmallLimit all(0);  // small tensors: every op queued
  // conv + r, relu(conv + r) and relu(r + conv) as one convolution: f32 with oneDNN (added per
  // share of images: 3 images on 2 threads split unevenly) and with the portable kernel, f64;
  // with and without bias; the residual the block's input or a second convolution (computed
  // before or after the first); gradients through autodiff too.
  for_conv_configs(6, [&](DType dt, bool onednn, int form) {
    const bool bias = form < 3, relu_after = form != 2, down = form >= 4;
    auto f = [&](const Device& d) {
      manual_seed(40 + form);
      Device ad = d.autodiff();
      Tensor x = randn({3, 6, 9, 9}, {.dtype = dt, .device = ad});
      Tensor w = randn({6, 6, 3, 3}, {.dtype = dt, .device = ad}).require_grad();
      Tensor wd = randn({6, 6, 1, 1}, {.dtype = dt, .device = ad}).require_grad();
      Tensor b = bias ? randn({6}, {.dtype = dt, .device = ad}).require_grad() : Tensor();
      Tensor r = form == 4 ? F::conv2d(x, wd) : x;  // form 5: the shortcut's conv comes after
      Tensor c = F::conv2d(x, w, b, {.padding = 1});
      if (form == 5) r = F::conv2d(x, wd);
      Tensor sum = form == 3 ? r + c : c + r;
      c = Tensor();                 // dead before the flush: only the sum reads it
      if (form == 5) r = Tensor();  // the shortcut's conv is the one next to the sum
      Tensor y = form == 2 ? sum : relu(sum);
      sum = Tensor();
      auto g = (y * y).sum().backward();
      std::vector<Tensor> out{y.detach(), g.get(w)};
      if (bias) out.push_back(g.get(b));
      if (down) out.push_back(g.get(wd));
      return out;
    };
    auto a = f(plain());
    fusion::reset_stats();
    auto b = f(fused());
    const std::string what =
        std::string(dtype_name(dt)) + (onednn ? " onednn" : " portable") + " form " + std::to_string(form);
    EXPECT_EQ(fusion::stats().epilogues, 1) << what;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 1e-5, 1e-5)) << what << " " << i;
  });
  // Not fused: a residual that broadcasts along the width (neither per channel nor whole), an
  // in-place sum (it would overwrite the residual the convolution reads), a convolution result
  // still held. Results as unfused.
  manual_seed(47);
  Tensor x = randn({2, 4, 8, 8}), w = randn({4, 4, 3, 3}), t = randn({8});
  for (int form = 0; form < 3; ++form) {
    auto f = [&](const Device& d) {
      Tensor xd = x.to(d), wd = w.to(d), r = x.to(d).clone();
      Tensor c = F::conv2d(xd, wd, Tensor(), {.padding = 1});
      if (form == 0) {
        Tensor sum = c + t.to(d);
        c = Tensor();
        return std::vector<Tensor>{relu(sum)};
      }
      if (form == 1) {
        Tensor c2 = F::conv2d(xd, wd, Tensor(), {.padding = 1});
        c = Tensor();
        r.add_(c2);
        return std::vector<Tensor>{relu(r)};
      }
      return std::vector<Tensor>{relu(c + r), c};
    };
    auto a = f(plain());
    fusion::reset_stats();
    auto b = f(fused());
    EXPECT_EQ(fusion::stats().epilogues, 0) << form;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 1e-6, 1e-6)) << form;
  }
}

TEST(Fusion, MatMulEpiloguesRunPerRowBlock) {
  // The ops after a product with a large result that read it element for element (bias,
  // activation, residual, scale, a row op closing them) run over each row block of the product
  // right after it; a result nothing else reads is never materialised. A GEMM may sum a block
  // of rows in another order than the whole product (oneDNN's, and the portable one for some
  // layouts), so results are compared within a tolerance.
  struct Case {
    const char* name;
    int64_t b, m, k, n;
    std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)> f;
    bool fuses;
  };
  const std::vector<Case> cases = {
      {"bias relu", 1, 1200, 40, 500, [](auto& x, auto& w, auto& b, auto&) { return relu(matmul(x, w) + b); }, true},
      {"scale gelu residual", 1, 1200, 40, 500,
       [](auto& x, auto& w, auto&, auto& r) { return gelu(matmul(x, w) * 0.5) + r; }, true},
      {"batched bias tanh", 3, 100, 16, 2000, [](auto& x, auto& w, auto& b, auto&) { return tanh(matmul(x, w) + b); },
       true},
      {"softmax tail", 1, 2400, 24, 256, [](auto& x, auto& w, auto& b, auto&) { return softmax(matmul(x, w) + b, -1); },
       true},
      {"product kept", 1, 1200, 40, 500,
       [](auto& x, auto& w, auto& b, auto&) {
         Tensor p = matmul(x, w);
         return cat({relu(p + b), p}, 0);
       },
       true},
      {"transposed weight (linear)", 1, 1200, 40, 500,
       [](auto& x, auto& w, auto& b, auto&) { return silu(F::linear(x, w.t().contiguous(), b)); }, true},
      {"linear's bias in the product, batch folded", 3, 400, 40, 500,
       [](auto& x, auto& w, auto& b, auto&) { return relu(F::linear(x, w.t().contiguous(), b.reshape({500}))); }, true},
      {"strided operands", 1, 1200, 40, 500,
       [](auto& x, auto& w, auto& b, auto&) {
         Tensor xt = x.t().contiguous().t();  // column-major x
         return relu(matmul(xt, w.t().contiguous().t()) - b);
       },
       true},
      {"weight shared over the batch", 3, 400, 16, 500,
       [](auto& x, auto& w, auto& b, auto&) {
         return tanh(matmul(x, w.expand({3, 16, 500})) * b);
       },
       true},
      {"transposed read", 1, 800, 40, 800, [](auto& x, auto& w, auto&, auto&) { return matmul(x, w).t() * 2.0; },
       false},
      {"reads the last row", 1, 1200, 40, 500,
       [](auto& x, auto& w, auto&, auto&) {
         Tensor p = matmul(x, w);
         return p + p.narrow(0, 1199, 1);  // needs the whole product before the first block's epilogue
       },
       false},
      {"column-wise softmax", 1, 1200, 40, 500,  // the Mul is the epilogue; the softmax runs alone
       [](auto& x, auto& w, auto&, auto&) { return softmax(matmul(x, w) * 2.0, 0); }, true},
      {"small result", 1, 100, 40, 300,  // stays in the cache between the product and the group
       [](auto& x, auto& w, auto& b, auto&) { return relu(matmul(x, w) + b); }, false},
  };
  for (DType dt : {f32, f64})
    for (const Case& c : cases) {
      auto run = [&](const Device& d) {
        manual_seed(51);
        const Shape xs = c.b == 1 ? Shape{c.m, c.k} : Shape{c.b, c.m, c.k};
        const Shape ys = c.b == 1 ? Shape{c.m, c.n} : Shape{c.b, c.m, c.n};
        Tensor x = randn(xs, {.dtype = dt, .device = d}), w = randn({c.k, c.n}, {.dtype = dt, .device = d});
        Tensor b = randn({c.n}, {.dtype = dt, .device = d}), r = randn(ys, {.dtype = dt, .device = d});
        return c.f(x, w, b, r);
      };
      Tensor ref = run(plain());
      fusion::reset_stats();
      Tensor got = run(fused());
      EXPECT_TRUE(close(got, ref, 1e-5, 1e-5)) << c.name << " " << dtype_name(dt);
      EXPECT_EQ(fusion::stats().epilogues, c.fuses ? 1 : 0) << c.name << " " << dtype_name(dt);
    }
  // In place: a step that overwrites the product's input runs after the whole product.
  auto inplace = [](const Device& d) {
    manual_seed(52);
    Tensor x = randn({1200, 500}, {.device = d}), w = randn({500, 500}, {.device = d});
    Tensor y = matmul(x, w);
    x.mul_(0.5).add_(y);
    return std::vector<Tensor>{x, y};
  };
  auto a = inplace(plain());
  fusion::reset_stats();
  auto b = inplace(fused());
  EXPECT_EQ(fusion::stats().epilogues, 0);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(close(b[i], a[i], 1e-5, 1e-5)) << i;
}

TEST(Fusion, SmallOpsRunAtOnceUnlessANamedBufferIsQueued) {
  // Results of at most small_limit() elements: the op runs at once when no queued op names its
  // buffers, and is queued otherwise (it reads a queued value, or writes one a queued op reads).
  const SmallLimit lim(4096);
  auto f = [](const Device& d) {
    manual_seed(41);
    Tensor x = randn({1, 3, 8, 8}, {.device = d}), w = randn({8, 3, 3, 3}, {.device = d});
    Tensor r = relu(F::conv2d(x, w));  // [1, 8, 6, 6]: not queued for its activation
    Tensor s = randn({64, 64}, {.device = d});
    Tensor big = randn({64, 65}, {.device = d});
    Tensor k = randn({1, 65}, {.device = d});
    Tensor a = gelu_composite(s);    // 4096 elements: each op at once
    Tensor b = gelu_composite(big);  // 4160: queued
    Tensor m = b.mean({1}, true);    // small, reads a queued value: queued
    Tensor c = m * 2.0 + 1.0;        // likewise
    Tensor y = big * k;              // queued, reads k
    k.add_(1.0);                     // small, but overwrites what y reads: queued after it
    Tensor z = s * 3.0;              // at once
    return std::vector<Tensor>{r, a, b, m, c, y, k, z};
  };
  auto ref = f(plain());
  fusion::reset_stats();
  auto got = f(fused());
  sync(fused());
  const fusion::Stats st = fusion::stats();
  EXPECT_EQ(st.recorded, 5 + 1 + 2 + 1 + 1) << "big's chain, its mean, c, y and k's update";
  EXPECT_GE(st.small_direct, 5 + 1 + 1) << "a's chain, the relu, z";
  EXPECT_EQ(st.epilogues, 0);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(close(got[i], ref[i], 0, 0)) << i;
  {
    const SmallLimit all(0);  // the same stream with every op queued
    fusion::reset_stats();
    auto q = f(fused());
    sync(fused());
    EXPECT_EQ(fusion::stats().small_direct, 0);
    EXPECT_EQ(fusion::stats().epilogues, 1);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(close(q[i], ref[i], 1e-6, 1e-6)) << i;
  }
}

TEST(Fusion, MemoryOfValuesDyingInsideAFlushIsReused) {
  // Eight 4 MB values, each read once by the op after it and then dropped, in one flush: each
  // op gives its buffers back when it has run, so the next value reuses the memory.
  const Device d = fused();
  Tensor x = randn({1024, 1024}, {.device = d});
  sync(d);
  reset_peak_memory(d);
  const int64_t before = memory_stats(d).in_use;
  std::vector<Tensor> means;
  for (int i = 0; i < 8; ++i) means.push_back((x * double(i + 1)).mean({0}));  // not a tail: alone
  sync(d);
  const int64_t peak = memory_stats(d).peak - before, value = int64_t{1024} * 1024 * 4;
  EXPECT_LT(peak, 3 * value) << "peak " << peak << " bytes above the start";
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(close(means[static_cast<size_t>(i)], (x.to(plain()) * double(i + 1)).mean({0}), 1e-6, 1e-6));
}

TEST(FusionProperty, RandomOpStreamsMatchUnfused) {
  std::mt19937 rng(1234);
  int64_t pipelines = 0, column_sums = 0;  // row pipelines, and sums over the rows in them (rows.cpp)
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int trial = 0; trial < 100; ++trial) {
    const uint32_t seed = static_cast<uint32_t>(rng());
    const int64_t rows = 1 + pick(40), cols = 1 + pick(300);
    const DType dt = pick(3) == 0 ? f64 : f32;
    const int nops = 3 + pick(14);
    std::vector<int> prog;
    for (int i = 0; i < 3 * nops; ++i) prog.push_back(static_cast<int>(rng() % 1000));
    std::vector<int> reads;  // positions where the stream is read in the middle
    for (int i = 0; i < nops; ++i) reads.push_back(pick(5) == 0);
    auto run = [&](const Device& d) {
      manual_seed(seed);
      std::vector<Tensor> vals = {randn({rows, cols}, {.dtype = dt, .device = d}),
                                  randn({cols}, {.dtype = dt, .device = d}),
                                  randn({rows, 1}, {.dtype = dt, .device = d})};
      const Tensor w = randn({cols, cols}, {.dtype = dt, .device = d}) * (1.0 / std::sqrt(double(cols)));
      std::vector<Tensor> outs;
      for (int i = 0; i < nops; ++i) {
        const Tensor& a = vals[static_cast<size_t>(prog[3 * i + 1]) % vals.size()];
        const Tensor& b = vals[static_cast<size_t>(prog[3 * i + 2]) % vals.size()];
        Tensor y;
        switch (prog[3 * i] % 22) {
          case 0:
            y = a + b;
            break;
          case 1:
            y = a * b;
            break;
          case 2:
            y = a - b * 0.5;
            break;
          case 3:
            y = tanh(a);
            break;
          case 4:
            y = exp(a * 0.1);
            break;
          case 5:
            y = where(gt(a, b), a, b);
            break;
          case 6:
            y = sigmoid(a) * 2.0 - 1.0;
            break;
          case 7:
            y = maximum(a, b);
            break;
          case 8:
            y = a.to(dt == f32 ? f64 : f32).square().to(dt);
            break;
          case 9:
            y = (a.dim() == 2 && a.size(1) == cols) ? softmax(a, -1) : erf(a);
            break;
          case 10:
            y = (a.dim() == 2) ? sum(a * a, {-1}, true) : abs(a);
            break;
          case 11:
            y = (a.dim() == 2 && a.size(0) == rows && a.size(1) == cols) ? a.t().contiguous().t() * 1.0 : a + 1.0;
            break;
          case 12:
            y = clamp(a, -0.5, 0.5);
            break;
          case 13:
            y = (a.dim() == 2) ? amax(a, {-1}, true) : neg(a);
            break;
          case 14:
            y = a / (abs(b) + 1.0);
            break;
          case 19:  // a reduction leading a chain (row pipelines)
            y = (a.dim() == 2) ? (a - mean(a, {-1}, true)) * b : a * 0.5;
            break;
          case 20:  // a sum over the rows (a bias gradient; inside a row pipeline when it follows one)
            y = (a.dim() == 2) ? sum((a - amax(a, {-1}, true)) * b, {0}, true) : a + 0.5;
            break;
          case 18:  // not queued: runs at once, after the queue when it reads or writes a queued value
            y = (a.dim() == 2) ? cumsum(a, -1) * 0.5 : a - 1.0;
            break;
          case 15:  // a product and its epilogue
            y = (a.dim() == 2 && a.size(1) == cols) ? relu(matmul(a, w) + b) : a * 2.0;
            break;
          case 16:
          case 17: {  // in place: the value changes under later readers (and set-aside ops)
            Tensor w = a;
            bool fits = b.dim() <= a.dim();  // b broadcasts to a's shape
            for (int64_t q = 1; fits && q <= b.dim(); ++q) fits = b.size(-q) == 1 || b.size(-q) == a.size(-q);
            if (fits)
              w.mul_(0.5).add_(b);
            else
              w.mul_(1.5);
            y = w * 1.0;
            break;
          }
          default:
            y = gelu(a);
            break;
        }
        if (reads[static_cast<size_t>(i)]) (void)y.sum().item<double>();
        vals.push_back(y);
        if (vals.size() > 6) {
          outs.push_back(vals[3]);
          vals.erase(vals.begin() + 3);  // drops a handle: its value may become dead
        }
      }
      for (size_t k = 3; k < vals.size(); ++k) outs.push_back(vals[k]);
      return outs;
    };
    // Ops on small tensors run at once or are queued: every mix of the two paths.
    const int64_t limits[] = {0, 64, 1024, 4096};
    const SmallLimit lim(limits[trial % 4]);
    auto a = run(plain());
    fusion::reset_stats();
    auto b = run(fused());
    for (const Tensor& t : b) (void)t.sum().item<double>();
    pipelines += fusion::stats().row_pipelines;
    column_sums += fusion::stats().pipeline_column_sums;
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_TRUE(close(b[k], a[k], 0, 0))
          << "trial " << trial << " output " << k << " rows " << rows << " cols " << cols;
  }
  EXPECT_GE(pipelines, 100) << "row pipelines in the random streams (275 before cases 19 and 20)";
  EXPECT_GE(column_sums, 5) << "sums over the rows inside row pipelines (11 when written)";
}

TEST(FusionProperty, RandomProductEpiloguesMatchUnfused) {
  // Products large enough for the row-block epilogue (2 MB and up): random sizes, batches,
  // transposed weights, dtypes, thread counts, epilogues (a row op, a mask, an in-place step,
  // the product read again), and the product kept or not.
  std::mt19937 rng(4321);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int threads = num_threads();
  int64_t fused_epilogues = 0;
  for (int trial = 0; trial < 16; ++trial) {
    set_num_threads(1 + pick(2));
    const int64_t B = pick(3) == 0 ? 2 : 1, M = 600 + pick(900), K = 1 + pick(80), N = 900 + pick(700);
    const DType dt = pick(4) == 0 ? f64 : f32;
    const int kind = pick(6);
    const bool transposed = pick(2) != 0, kept = pick(4) == 0;
    auto run = [&](const Device& d) {
      manual_seed(static_cast<uint64_t>(trial));
      Tensor x = randn(B == 1 ? Shape{M, K} : Shape{B, M, K}, {.dtype = dt, .device = d});
      Tensor w = transposed ? randn({N, K}, {.dtype = dt, .device = d}).t() : randn({K, N}, {.dtype = dt, .device = d});
      Tensor b = randn({N}, {.dtype = dt, .device = d});
      Tensor p = matmul(x, w);
      Tensor y;
      switch (kind) {
        case 0:
          y = relu(p + b);
          break;
        case 1:
          y = gelu(p * 0.25) - b;
          break;
        case 2:
          y = softmax(p + b, -1);
          break;
        case 3:
          y = where(gt(p, b), p, b * 2.0);
          break;
        case 4:
          y = sigmoid(p).mul_(b);
          break;
        default:
          y = tanh(p * b + 1.0) + p;
          break;
      }
      return kept ? std::vector<Tensor>{y, p} : std::vector<Tensor>{y};
    };
    auto a = run(plain());
    fusion::reset_stats();
    auto c = run(fused());
    sync(fused());
    fused_epilogues += fusion::stats().epilogues;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(close(c[i], a[i], 1e-5, 1e-5)) << "trial " << trial << " output " << i << " kind " << kind;
  }
  set_num_threads(threads);
  EXPECT_GE(fused_epilogues, 12) << "most products ran with their epilogue";
}

// ---- training ------------------------------------------------------------------------------------

namespace {
struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  nn::LayerNorm ln;
  Mlp(const Device& d)
      : fc1({.in = 8, .out = 32}, d), fc2({.in = 32, .out = 3}, d), ln({.normalized_shape = {32}}, d) {}
  Tensor forward(const Tensor& x) const { return fc2(gelu(ln(fc1(x))) * 0.5 + 0.1); }
  KILN_VISIT(Mlp, fc1, fc2, ln)
};

std::vector<double> train_losses(const Device& d) {
  manual_seed(3);
  Tensor y = randint(0, 3, {128}, {.dtype = i64, .device = d});
  Tensor x = randn({128, 8}, {.device = d}) + y.to(f32).unsqueeze(1);
  manual_seed(1);
  Mlp model(d);
  optim::Adam opt(model.parameters(), {.lr = 1e-2});
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    Tensor loss = F::cross_entropy(model.forward(x), y);
    losses.push_back(loss.item<double>());
    opt.step(loss.backward());
  }
  return losses;
}
}  // namespace

TEST(FusionTraining, MlpLossesMatchUnfused) {
  const SmallLimit all(0);  // small tensors: every op queued
  fusion::reset_stats();
  auto a = train_losses(plain().autodiff());
  auto b = train_losses(plain().fusion().autodiff());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * (1 + std::abs(a[i]))) << "step " << i;
  EXPECT_LT(a.back(), a.front());
  EXPECT_GT(fusion::stats().fused_groups, 30);
}
