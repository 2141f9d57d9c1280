// SPDX-License-Identifier: MIT OR Apache-2.0
// nn::conv_act and nn::conv_bn: in inference one convolution with the rest as its epilogue,
// bitwise the modules and ops one after the other; otherwise exactly those ops.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/onednn.h"
#include "fusion/fusion.h"
#include "restore_onednn.h"
#include "test_util.h"

using namespace kiln;
using Act = nn::FusedConvOptions::Act;
namespace F = nn::functional;

namespace {

/// Ops that reached the fusion decorator since the last reset (queued, run at once, or eager).
int64_t ops_seen() {
  const fusion::Stats s = fusion::stats();
  return s.recorded + s.eager + s.small_direct;
}

/// Turns the fusion decorator on for a test (KILN_FUSION=0 makes it a pass-through), then back.
struct FusionOn {
  bool saved = fusion::enabled();
  FusionOn() { fusion::set_enabled(true); }
  ~FusionOn() { fusion::set_enabled(saved); }
};

/// a and b bit for bit (NaN where a has NaN).
void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto x = a.to(f64).to_vector<double>(), y = b.to(f64).to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << what << " " << i;
    } else {
      EXPECT_EQ(x[i], y[i]) << what << " " << i;
      if (x[i] != y[i]) return;
    }
  }
}

/// One form: spatial dims, batch, whether the batch norm is there, the options' parts.
struct Form {
  int nsp;
  int64_t batch;
  bool bn;
  Act act;
  double lo, hi;
  bool residual;
};

std::string describe(const Form& f, DType dt, bool onednn) {
  return std::to_string(f.nsp) + "-d b=" + std::to_string(f.batch) + (f.bn ? " bn" : "") +
         " act=" + std::to_string(static_cast<int>(f.act)) + (f.residual ? " residual" : "") + " " +
         std::string(dtype_name(dt)) + (onednn ? " oneDNN" : " portable");
}

/// Builds the modules of form f on dev, runs conv_act / conv_bn and the separate ops on the same
/// input (with NaN and inf in it) and compares them; returns both results.
template <int N, class BN>
std::pair<Tensor, Tensor> run_form(const Form& f, DType dt, const Device& dev, bool training, bool eval_stats) {
  manual_seed(7);
  nn::ConvNd<N> conv({.in_channels = 6, .out_channels = 16, .kernel_size = 3, .padding = 1, .dtype = dt}, dev);
  BN bn({.num_features = 16, .dtype = dt}, dev);
  if (eval_stats) {  // running statistics away from 0 / 1, a trained weight and bias
    NoGradGuard g;
    bn.running_mean.copy_(randn({16}, {.dtype = dt, .device = dev}));
    bn.running_var.copy_(rand({16}, {.dtype = dt, .device = dev}) + 0.5);
    bn.weight.copy_(randn({16}, {.dtype = dt, .device = dev}));
    bn.bias.copy_(randn({16}, {.dtype = dt, .device = dev}));
  }
  if (!training) bn.eval();
  Shape xs{f.batch, 6};
  for (int i = 0; i < N; ++i) xs.push_back(9 - i);
  Tensor x = randn(xs, {.dtype = dt, .device = dev}) * 4.0;
  {
    NoGradGuard g;
    x.narrow(1, 0, 1).narrow(2, 0, 1).fill_(NAN);  // NaN and inf reach some outputs
    x.narrow(1, 1, 1).narrow(2, 1, 1).fill_(INFINITY);
  }
  Shape ys = xs;
  ys[1] = 16;
  Tensor r = f.residual ? randn(ys, {.dtype = dt, .device = dev}) : Tensor{};
  nn::FusedConvOptions o{.residual = r, .act = f.act, .min = f.lo, .max = f.hi};
  Tensor want = f.bn ? bn(conv(x)) : conv(x);
  if (r.defined()) want = want + r;
  if (f.act == Act::Relu) want = relu(want);
  if (f.act == Act::Clamp) want = clamp(want, f.lo, f.hi);
  Tensor got = f.bn ? nn::conv_bn(conv, bn, x, o) : nn::conv_act(conv, x, o);
  return {want, got};
}

std::pair<Tensor, Tensor> run_any(const Form& f, DType dt, const Device& dev, bool training = false,
                                  bool eval_stats = true) {
  if (f.nsp == 1) return run_form<1, nn::BatchNorm1d>(f, dt, dev, training, eval_stats);
  if (f.nsp == 2) return run_form<2, nn::BatchNorm2d>(f, dt, dev, training, eval_stats);
  return run_form<3, nn::BatchNorm3d>(f, dt, dev, training, eval_stats);
}

const Form kForms[] = {
    {2, 1, true, Act::Relu, 0, 0, false}, {2, 3, true, Act::Relu, 0, 0, true},    {2, 1, true, Act::Clamp, 0, 6, false},
    {2, 4, true, Act::None, 0, 0, true},  {2, 2, false, Act::Clamp, -1, 1, true}, {2, 1, false, Act::Relu, 0, 0, false},
    {2, 1, false, Act::None, 0, 0, true}, {2, 2, true, Act::Clamp, 2, -2, false},  // lo > hi gives hi
    {1, 2, true, Act::Relu, 0, 0, true},  {3, 2, true, Act::Clamp, 0, 6, false},
};

}  // namespace

TEST(FusedConv, InferenceIsOneConvolutionWithTheSeparateResult) {
  const test::RestoreOnednnAndThreads restore;
  for (DType dt : {f32, f64})
    for (bool onednn : {true, false}) {
      if (dt == f64 && onednn) continue;
      cpu::onednn::set_enabled(onednn && restore.saved);
      for (const Form& f : kForms)
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          const std::string what = describe(f, dt, onednn) + " t=" + std::to_string(threads);
          NoGradGuard no_grad;
          auto [want, got] = run_any(f, dt, Device::cpu());
          expect_same(want, got, what);
          auto [w2, g2] = run_any(f, dt, Device::cpu().without_fusion());
          expect_same(w2, g2, what + " plain CPU");
        }
    }
}

TEST(FusedConv, InferenceRunsOneOp) {
  // Counted by the fusion decorator, which KILN_FUSION=0 turns into a pass-through.
  const FusionOn on;
  NoGradGuard no_grad;
  manual_seed(3);
  const Device dev = Device::cpu().without_fusion().fusion();  // the fused CPU, whatever KILN_FUSION says
  nn::Conv2d conv({.in_channels = 4, .out_channels = 8, .kernel_size = 3, .padding = 1}, dev);
  nn::BatchNorm2d bn({.num_features = 8}, dev);
  bn.eval();
  Tensor x = randn({1, 4, 6, 6}, {.device = dev}), r = randn({1, 8, 6, 6}, {.device = dev});
  nn::FusedConvOptions o{.residual = r, .act = Act::Relu};
  Tensor warm = nn::conv_bn(conv, bn, x, o);  // computes the batch norm's coefficients
  sync(dev);
  fusion::reset_stats();
  Tensor y = nn::conv_bn(conv, bn, x, o);
  sync(dev);
  EXPECT_EQ(ops_seen(), 1);
  fusion::reset_stats();
  Tensor z = relu(bn(conv(x)) + r);
  sync(dev);
  EXPECT_GE(ops_seen(), 4);
  expect_same(z, y, "conv_bn against the modules");
  fusion::reset_stats();
  Tensor a = nn::conv_act(conv, x, {.act = Act::Clamp, .min = 0, .max = 6});
  sync(dev);
  EXPECT_EQ(ops_seen(), 1);
  expect_same(clamp(conv(x), 0, 6), a, "conv_act against the module and clamp");
}

TEST(FusedConv, TrainingAndGradientsRunTheSeparateOps) {
  // Training mode: batch statistics, the running ones updated once per call, as the modules do.
  for (const Form& f : {kForms[0], kForms[1], kForms[9]}) {
    auto [want, got] = run_any(f, f32, Device::cpu(), /*training=*/true, /*eval_stats=*/false);
    expect_same(want, got, describe(f, f32, true) + " training");
  }
  // Gradients recorded in eval mode: the separate ops, so gradients reach every parameter.
  const Device dev = Device::cpu().autodiff();
  manual_seed(4);
  nn::Conv2d conv({.in_channels = 3, .out_channels = 5, .kernel_size = 3, .padding = 1}, dev);
  nn::BatchNorm2d bn({.num_features = 5}, dev);
  bn.eval();
  Tensor x = randn({2, 3, 5, 5}, {.device = dev}), r = randn({2, 5, 5, 5}, {.device = dev});
  auto loss_of = [&](bool fused) {
    Tensor y = fused ? nn::conv_bn(conv, bn, x, {.residual = r, .act = Act::Relu}) : relu(bn(conv(x)) + r);
    return (y * y).sum();
  };
  auto gf = loss_of(true).backward(), gs = loss_of(false).backward();
  for (const Tensor* p : {&conv.weight, &conv.bias, &bn.weight, &bn.bias}) {
    ASSERT_TRUE(gf.get(*p).defined());
    expect_same(gs.get(*p), gf.get(*p), "gradient");
  }
  // Without gradients on the autodiff device: the fused form, the same values.
  NoGradGuard no_grad;
  expect_same(relu(bn(conv(x)) + r), nn::conv_bn(conv, bn, x, {.residual = r, .act = Act::Relu}), "no grad");
}

TEST(FusedConv, OtherShapesAndBadInputFallBackOrFail) {
  NoGradGuard no_grad;
  manual_seed(5);
  nn::Conv2d conv({.in_channels = 4, .out_channels = 8, .kernel_size = 3, .padding = 1});
  nn::BatchNorm2d bn({.num_features = 8});
  bn.eval();
  Tensor x = randn({2, 4, 6, 6});
  // A residual that broadcasts: the separate ops (Add broadcasts).
  Tensor rb = randn({1, 8, 1, 1});
  expect_same(relu(bn(conv(x)) + rb), nn::conv_bn(conv, bn, x, {.residual = rb, .act = Act::Relu}), "broadcast");
  // Unbatched input: the modules' own handling.
  Tensor xu = randn({4, 6, 6});
  expect_same(bn(conv(xu.unsqueeze(0))).squeeze({0}), nn::conv_bn(conv, bn, xu.unsqueeze(0)).squeeze({0}), "unbatched");
  // Wrong channels: the convolution's own error.
  test::expect_error([&] { nn::conv_bn(conv, bn, randn({2, 5, 6, 6})); }, "Conv2d");
  // A batch norm over other channels: the batch norm's error.
  nn::BatchNorm2d bn4({.num_features = 4});
  bn4.eval();
  test::expect_error([&] { nn::conv_bn(conv, bn4, x); }, "BatchNorm2d");
}

TEST(FusedConv, MaxPoolIsPartOfTheConvolution) {
  // conv_bn / conv_act with a max pool: bitwise the modules, the activation and max_pool2d, with
  // the pool fused (one op; oneDNN pools each image's blocked output) or not (windows it does not
  // take), on both paths, f32 and f64, 1 and 2 threads, NaN and inf in the input.
  const test::RestoreOnednnAndThreads restore;
  struct PoolCase {
    int64_t k, s, p, dil;
    bool ceil;
  };
  const PoolCase pools[] = {
      {3, 2, 1, 1, false}, {2, 2, 0, 1, false}, {3, 1, 1, 1, false}, {3, 2, 1, 2, false}, {3, 2, 0, 1, true}};
  for (DType dt : {f32, f64})
    for (bool onednn : {true, false}) {
      if (dt == f64 && onednn) continue;
      cpu::onednn::set_enabled(onednn && restore.saved);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (const PoolCase& pc : pools)
          for (int64_t batch : {1, 3})
            for (bool with_bn : {true, false}) {
              NoGradGuard no_grad;
              manual_seed(9);
              nn::Conv2d conv({.in_channels = 3, .out_channels = 16, .kernel_size = 3, .padding = 1, .dtype = dt});
              nn::BatchNorm2d bn({.num_features = 16, .dtype = dt});
              bn.running_mean.copy_(randn({16}, {.dtype = dt}));
              bn.running_var.copy_(rand({16}, {.dtype = dt}) + 0.5);
              bn.eval();
              Tensor x = randn({batch, 3, 11, 10}, {.dtype = dt}) * 3.0;
              x.narrow(2, 4, 1).narrow(3, 2, 1).fill_(NAN);
              x.narrow(2, 7, 1).narrow(3, 7, 1).fill_(INFINITY);
              const F::MaxPoolOptions po{.stride = Dims{pc.s, pc.s},
                                         .padding = Dims{pc.p, pc.p},
                                         .dilation = Dims{pc.dil, pc.dil},
                                         .ceil_mode = pc.ceil};
              const nn::FusedConvOptions o{.act = Act::Relu, .pool_kernel_size = Dims{pc.k, pc.k}, .pool = po};
              Tensor want = F::max_pool2d(relu(with_bn ? bn(conv(x)) : conv(x)), Dims{pc.k, pc.k}, po);
              Tensor got = with_bn ? nn::conv_bn(conv, bn, x, o) : nn::conv_act(conv, x, o);
              expect_same(want, got,
                          std::string(dtype_name(dt)) + (onednn ? " oneDNN" : " portable") +
                              " t=" + std::to_string(threads) + " b=" + std::to_string(batch) +
                              " k=" + std::to_string(pc.k) + " s=" + std::to_string(pc.s) +
                              " dil=" + std::to_string(pc.dil) + (pc.ceil ? " ceil" : "") + (with_bn ? " bn" : ""));
            }
      }
    }
}

TEST(FusedConv, MaxPoolRunsOneOpAndChecksItsInput) {
  const FusionOn on;
  NoGradGuard no_grad;
  manual_seed(3);
  const Device dev = Device::cpu().without_fusion().fusion();
  nn::Conv2d conv({.in_channels = 4, .out_channels = 16, .kernel_size = 3, .padding = 1}, dev);
  nn::BatchNorm2d bn({.num_features = 16}, dev);
  bn.eval();
  Tensor x = randn({1, 4, 8, 8}, {.device = dev});
  const nn::FusedConvOptions o{
      .act = Act::Clamp, .min = 0, .max = 6, .pool_kernel_size = 2, .pool = {.stride = Dims{2, 2}}};
  Tensor warm = nn::conv_bn(conv, bn, x, o);
  sync(dev);
  fusion::reset_stats();
  Tensor y = nn::conv_bn(conv, bn, x, o);
  sync(dev);
  EXPECT_EQ(ops_seen(), 1);
  EXPECT_EQ(y.shape(), (Shape{1, 16, 4, 4}));
  expect_same(F::max_pool2d(clamp(bn(conv(x)), 0, 6), 2, {.stride = Dims{2, 2}}), y, "clamp and pool");
  // With a residual the pool runs as its own op after the fused rest, and gives the same values.
  Tensor r = randn({1, 16, 8, 8}, {.device = dev});
  expect_same(F::max_pool2d(relu(bn(conv(x)) + r), 3, {.stride = Dims{2, 2}, .padding = Dims{1, 1}}),
              nn::conv_bn(conv, bn, x,
                          {.residual = r,
                           .act = Act::Relu,
                           .pool_kernel_size = 3,
                           .pool = {.stride = Dims{2, 2}, .padding = Dims{1, 1}}}),
              "residual and pool");
  // A window larger than the output, padding over half the window: max_pool2d's own errors.
  test::expect_error(
      [&] {
        nn::conv_bn(conv, bn, randn({1, 4, 2, 2}, {.device = dev}), {.pool_kernel_size = 3});
      },
      "max_pool2d");
  test::expect_error(
      [&] {
        nn::conv_bn(conv, bn, x, {.pool_kernel_size = 2, .pool = {.padding = Dims{2, 2}}});
      },
      "max_pool2d");
  // A pool after a 1-d convolution: refused.
  nn::Conv1d c1({.in_channels = 4, .out_channels = 16, .kernel_size = 3}, dev);
  test::expect_error(
      [&] {
        nn::conv_act(c1, randn({1, 4, 8}, {.device = dev}), {.pool_kernel_size = 2});
      },
      "conv_act", "2-d convolution");
}

TEST(FusedConv, RepeatedCallsReuseTheirOpAndFollowEveryChange) {
  // In inference a module keeps the op of its last call (forward, conv_act or conv_bn) and only
  // binds new buffers when the next call has the same layouts and options (Note [Prepared
  // steps]); every change below must give the separate ops' result again.
  NoGradGuard no_grad;
  for (const Device& dev : {Device::cpu(), Device::cpu().without_fusion()}) {
    manual_seed(11);
    nn::Conv2d conv({.in_channels = 4, .out_channels = 8, .kernel_size = 3, .padding = 1}, dev);
    nn::BatchNorm2d bn({.num_features = 8}, dev);
    bn.running_mean.copy_(randn({8}, {.device = dev}));
    bn.running_var.copy_(rand({8}, {.device = dev}) + 0.5);
    bn.eval();
    const TensorOptions on{.device = dev};
    // The module's convolution through the functional form (no kept op), and through the module
    // (forward keeps its op in the slot conv_act / conv_bn use).
    auto plain = [](const nn::Conv2d& c, const Tensor& x) {
      return F::conv2d(x, c.weight, c.bias,
                       {.stride = c.config.stride,
                        .padding = c.config.padding,
                        .dilation = c.config.dilation,
                        .groups = c.config.groups});
    };
    auto check = [&](const nn::Conv2d& c, const Tensor& x, const nn::FusedConvOptions& o, bool with_bn,
                     const std::string& what) {
      Tensor y = plain(c, x);
      expect_same(y, c(x), what + " (forward)");
      Tensor want = with_bn ? bn(y) : y;
      if (o.residual.defined()) want = want + o.residual;
      if (o.act == Act::Relu) want = relu(want);
      if (o.act == Act::Clamp) want = clamp(want, o.min, o.max);
      if (!o.pool_kernel_size.values().empty()) want = F::max_pool2d(want, o.pool_kernel_size, o.pool);
      expect_same(want, with_bn ? nn::conv_bn(c, bn, x, o) : nn::conv_act(c, x, o), what);
    };
    Tensor x = randn({2, 4, 7, 7}, on), r = randn({2, 8, 7, 7}, on);
    const nn::FusedConvOptions relu_only{.act = Act::Relu};
    check(conv, x, relu_only, true, "first call");
    check(conv, x, relu_only, true, "second call (the kept op)");
    check(conv, randn({2, 4, 7, 7}, on), relu_only, true, "another input of the same layout");
    conv.weight.mul_(-0.5);
    check(conv, x, relu_only, true, "weights changed in place");
    conv.bias = randn({8}, on);
    check(conv, x, relu_only, true, "bias replaced");
    bn.running_var.add_(2.0);
    check(conv, x, relu_only, true, "batch norm statistics changed");
    check(conv, x, {.residual = r, .act = Act::Relu}, true, "with a residual");
    check(conv, x, {.residual = randn({2, 8, 7, 7}, on), .act = Act::Relu}, true, "another residual");
    check(conv, x, {.act = Act::Clamp, .min = -1, .max = 1}, true, "clamp");
    check(conv, x, {.act = Act::Clamp, .min = -0.25, .max = 0.5}, true, "other clamp bounds");
    check(conv, x, relu_only, false, "conv_act on the same module");
    check(conv, x, {.act = Act::Relu, .pool_kernel_size = 3, .pool = {.stride = Dims{2, 2}, .padding = Dims{1, 1}}},
          true, "with a max pool");
    check(conv, x, {.act = Act::Relu, .pool_kernel_size = 2, .pool = {.stride = Dims{2, 2}}}, true, "another pool");
    check(conv, randn({1, 4, 9, 5}, on), relu_only, true, "another shape");
    check(conv, randn({2, 7, 7, 4}, on).permute({0, 3, 1, 2}), relu_only, true, "a channels-last input");
    check(conv, randn({3, 4, 7, 7}, on).narrow(0, 1, 2), relu_only, true, "an input at an offset");
    check(conv, x, relu_only, true, "the first layout again");
    conv.config.stride = 2;
    check(conv, x, relu_only, true, "stride changed in the module's config");
    conv.config.padding = Dims{0, 1};
    check(conv, x, relu_only, true, "padding changed");
    conv.config.padding = "same";
    conv.config.stride = 1;
    check(conv, x, relu_only, true, "padding \"same\"");
    check(conv, x, relu_only, true, "padding \"same\" again");
    // A copy shares the module's slot; with weights of its own it gives its own result.
    nn::Conv2d copy = conv;
    copy.weight = randn({8, 4, 3, 3}, on);
    check(copy, x, relu_only, true, "a copy with other weights");
    check(conv, x, relu_only, true, "the original after its copy");
  }
}

TEST(FusedConv, ConcurrentCallsOnOneModuleGiveEachTheirOwnResult) {
  NoGradGuard no_grad;
  manual_seed(12);
  nn::Conv2d conv({.in_channels = 3, .out_channels = 8, .kernel_size = 3, .padding = 1});
  nn::BatchNorm2d bn({.num_features = 8});
  bn.eval();
  std::vector<Tensor> xs, want;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(randn({1, 3, 6 + i % 2, 6}));
    want.push_back(relu(bn(conv(xs.back()))));
  }
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      NoGradGuard g;
      for (int it = 0; it < 200; ++it) {
        const size_t i = static_cast<size_t>((it + t) % 4);
        Tensor y = nn::conv_bn(conv, bn, xs[i], {.act = Act::Relu});
        if (!equal(y, want[i])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}
