// SPDX-License-Identifier: MIT OR Apache-2.0
// Backend capabilities and the CPU fallback (src/ops/fallback.cpp) on the subset device: ops it
// does not support run on the CPU with their buffers copied through read and write, give the
// CPU's values, stay on the subset device, are counted per op, and work under autodiff and for
// writes into an existing tensor.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/nn/fused.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend.h"
#include "test_util.h"

using namespace kiln;

namespace {

Device subset() { return Device::from_string("subset"); }

int64_t fallbacks(const std::string& key) {
  for (const auto& [k, n] : fallback_counts())
    if (k == key) return n;
  return 0;
}

std::vector<float> values(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::abs(want[i])) << i;
}

}  // namespace

TEST(Fallback, DeviceNamesAndList) {
  const std::vector<std::string> names = Device::list();
  for (const char* n : {"cpu", "cpu-fusion", "cpu-plain", "null", "subset"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(Device::from_string("cpu-plain"), Device::cpu().without_fusion());
  EXPECT_EQ(Device::from_string("subset:0"), subset());
  EXPECT_EQ(subset().str(), "subset");
  test::expect_error([] { Device::from_string("tpu"); }, "Device", "known: cpu");
  test::expect_error([] { Device::from_string("cpu:3"); }, "Device", "only index 0");
}

TEST(Fallback, SupportsAnswersPerOp) {
  ir::Op add, mm;
  add.kind = ir::OpKind::Add;
  mm.kind = ir::OpKind::MatMul;
  EXPECT_TRUE(subset().backend()->supports(add));
  EXPECT_FALSE(subset().backend()->supports(mm));
  EXPECT_TRUE(subset().autodiff().backend()->supports(add));  // decorators ask the wrapped backend
  EXPECT_FALSE(subset().autodiff().backend()->supports(mm));
  EXPECT_TRUE(Device::cpu().backend()->supports(mm));
}

TEST(Fallback, UnsupportedOpsRunOnTheCpuAndAreCounted) {
  reset_fallback_counts();
  manual_seed(3);
  Tensor a = randn({5, 7}), b = randn({7, 3});
  Tensor c = matmul(a, b), s = softmax(a, 1), m = a.sum({0});
  Tensor as = a.to(subset()), bs = b.to(subset());
  Tensor cs = matmul(as, bs), ss = softmax(as, 1), ms = as.sum({0});
  EXPECT_EQ(cs.device(), subset());
  EXPECT_EQ(values(cs), values(c));  // the CPU's kernel on copies: the same bits
  EXPECT_EQ(values(ms), values(m));
  expect_near(values(ss), values(s));  // softmax runs as its composite: within rounding
  EXPECT_GE(fallbacks("subset: MatMul"), 1);
  EXPECT_GE(fallbacks("subset: Softmax (composite)"), 1);
  EXPECT_EQ(fallbacks("subset: Softmax"), 0);
  const int64_t before = fallbacks("subset: Add");
  Tensor e = as + bs.sum();  // Add runs on the device itself (Sum falls back)
  EXPECT_EQ(fallbacks("subset: Add"), before);
  EXPECT_EQ(values(e), values(a + b.sum()));
  reset_fallback_counts();
  EXPECT_TRUE(fallback_counts().empty());
}

TEST(Fallback, WritesIntoExistingTensorsAndViews) {
  Tensor x = arange(0, 24, 1, f32).reshape({4, 6});
  Tensor xs = x.to(subset());
  x.index_put_({Slice{1, 3}}, 7.f);
  xs.index_put_({Slice{1, 3}}, 7.f);
  EXPECT_EQ(values(xs), values(x));
  // A view's offset and strides survive the copy down and up (the whole buffer is staged).
  Tensor v = xs.slice(1, 1, 5, 2).t();
  EXPECT_EQ(values(v.flip({0}).cumsum(0)), values(x.slice(1, 1, 5, 2).t().flip({0}).cumsum(0)));
}

TEST(Fallback, AutodiffThroughFallbacks) {
  std::vector<float> first;
  for (const Device& dev : {Device::cpu().autodiff(), subset().autodiff()}) {
    manual_seed(5);
    Tensor w = randn({4, 3}).to(dev).require_grad();
    Tensor x = randn({2, 4}).to(dev);
    Tensor loss = softmax(matmul(x, w), 1).square().sum();
    Gradients grads = loss.backward();
    if (dev.type() == DeviceType::CPU)
      first = values(w.grad(grads));
    else
      expect_near(values(w.grad(grads)), first);
  }
}

TEST(Fallback, CompositesKeepTheDataOnTheDevice) {
  // Softmax has a composite form: on the subset device it runs as amax, sub, exp, sum and div
  // there (the reductions among them fall back one by one), never as one CPU softmax.
  reset_fallback_counts();
  manual_seed(9);
  Tensor x = randn({3, 5, 7}, {.dtype = f64});
  for (int64_t dim : {0, 1, 2}) {
    Tensor xs = x.to(subset());
    const auto a = log_softmax(xs, dim).to(Device::cpu()).to_vector<double>();
    const auto b = log_softmax(x, dim).to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << dim << " " << i;
  }
  EXPECT_EQ(fallbacks("subset: LogSoftmax (composite)"), 3);
  EXPECT_EQ(fallbacks("subset: LogSoftmax"), 0);
  EXPECT_GE(fallbacks("subset: Max"), 3);  // a piece the device lacks goes to the CPU alone
  EXPECT_EQ(fallbacks("subset: Exp"), 0);  // the ones it has run there
}

TEST(Fallback, FusedConvolutionReachesADeviceWithoutItAsTheOpSequence) {
  // conv_bn's one fused Conv (scale, shift, residual, activation, max pool in its epilogue) is an
  // optional capability: the subset device gets the plain Conv and the separate ops, with the
  // same bits as the fused CPU form (which rounds each step as the separate op does).
  NoGradGuard no_grad;
  manual_seed(11);
  nn::Conv2d conv({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .padding = 1}, Device::cpu());
  nn::BatchNorm2d bn({.num_features = 4}, Device::cpu());
  bn.eval();
  Tensor x = randn({2, 3, 8, 8}), res = randn({2, 4, 8, 8});
  const nn::FusedConvOptions with_res{.residual = res, .act = nn::FusedConvOptions::Act::Relu};
  const nn::FusedConvOptions with_pool{
      .act = nn::FusedConvOptions::Act::Clamp, .min = -0.5, .max = 0.5, .pool_kernel_size = Dims{2, 2}};
  const std::vector<float> want_res = values(nn::conv_bn(conv, bn, x, with_res));
  const std::vector<float> want_pool = values(nn::conv_bn(conv, bn, x, with_pool));
  conv.to(subset());
  bn.to(subset());
  reset_fallback_counts();
  nn::FusedConvOptions res_on = with_res;
  res_on.residual = res.to(subset());
  EXPECT_EQ(values(nn::conv_bn(conv, bn, x.to(subset()), res_on)), want_res);
  EXPECT_EQ(values(nn::conv_bn(conv, bn, x.to(subset()), with_pool)), want_pool);
  EXPECT_EQ(fallbacks("subset: Conv (composite)"), 2);  // the fused form, as its op sequence
  EXPECT_EQ(fallbacks("subset: Conv"), 2);              // whose plain convolution the CPU runs
  EXPECT_GE(fallbacks("subset: MaxPool"), 1);
  EXPECT_EQ(fallbacks("subset: Add"), 0);  // the elementwise steps run on the device
}
