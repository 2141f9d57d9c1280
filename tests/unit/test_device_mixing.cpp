// SPDX-License-Identifier: MIT OR Apache-2.0
// Decorated forms of one base device mix in one op (Note [Mixed decorations] in
// src/ops/dispatch.cpp); truly different devices give an error naming the argument and the fix.
#include <gtest/gtest.h>

#include <string>

#include "kiln/kiln.h"
#include "kiln/nn.h"

using namespace kiln;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(DeviceMixing, PlainInputWithAutodiffWeightTrains) {
  const Device ad = Device::cpu().autodiff();
  manual_seed(0);
  nn::Linear lin({.in_features = 3, .out_features = 2}, ad);
  Tensor x = randn({4, 3});  // the default device, no autodiff: takes part as a constant
  Tensor y = lin(x);
  EXPECT_TRUE(y.device().has_autodiff());
  Gradients g = y.sum().backward();
  ASSERT_TRUE(lin.weight.grad(g).defined());
  Tensor want = x.sum({0}).unsqueeze(0).expand({2, 3});
  EXPECT_TRUE(lin.weight.grad(g).to(Device::cpu()).allclose(want, 1e-5, 1e-5));
  // The same with the plain tensor second.
  Tensor z = x * lin.weight.sum();
  EXPECT_TRUE(z.device().has_autodiff());
}

TEST(DeviceMixing, RandpermIndexOnTheDefaultDevice) {
  const Device ad = Device::cpu().autodiff();
  Tensor x = arange(10, f32, ad).require_grad();
  Tensor idx = randperm(10);  // default device
  Tensor y = index_select(x, 0, idx);
  EXPECT_EQ(y.sum().item<double>(), 45.0);
  Gradients g = y.sum().backward();
  EXPECT_TRUE(x.grad(g).equal(ones({10}).to(ad)));
  // The options form, like the other creation functions.
  Tensor p = randperm(6, {.dtype = i64, .device = ad});
  EXPECT_EQ(p.dtype(), i64);
  EXPECT_TRUE(p.device() == ad);
  EXPECT_EQ(randperm(5).dtype(), i64);
  EXPECT_EQ(randperm(5, {.dtype = f32}).sum().item<double>(), 10.0);
}

TEST(DeviceMixing, FusedAndPlainCpuMix) {
  const Device plain = Device::cpu().without_fusion(), fused = Device::cpu().without_fusion().fusion();
  Tensor a = ones({3}, {.device = plain}), b = full({3}, 2.0, {.device = fused});
  EXPECT_EQ((a + b).sum().item<double>(), 9.0);
  EXPECT_EQ((b + a).sum().item<double>(), 9.0);
  Tensor c = ones({3}, {.device = fused});
  c.add_(a);  // in place: the output keeps its device
  EXPECT_EQ(c.sum().item<double>(), 6.0);
}

TEST(DeviceMixing, DifferentDevicesNameTheArgumentAndTheFix) {
  Tensor x = randn({4, 3}, {.device = Device::cpu().autodiff()});
  Tensor idx = zeros({2}, {.dtype = i64, .device = Device::null()});
  std::string msg = error_of([&] { (void)index_select(x, 0, idx); });
  EXPECT_NE(msg.find("[index_select] expected all tensors on one device, but `index` is on null and `input` is on cpu"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("index.to(input.device())"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("fusion"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("autodiff"), std::string::npos) << msg;
  Tensor w = randn({2, 3}, {.device = Device::null()});
  msg = error_of([&] { (void)linear(x, w); });
  EXPECT_NE(msg.find("`weight` is on null"), std::string::npos) << msg;
  msg = error_of([&] { (void)(x + randn({3}, {.device = Device::null()})); });
  EXPECT_NE(msg.find(".to("), std::string::npos) << msg;
}
