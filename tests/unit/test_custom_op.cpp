// SPDX-License-Identifier: MIT OR Apache-2.0
// Custom ops (kiln/custom_op.h): a kernel of the kernel language as a tensor op, checked against
// the same function written with tensor ops (values, first and second derivatives), on strided,
// empty and 0-d inputs, on the fusion device, and with bad kernels and inputs.
#include <gtest/gtest.h>

#include "kiln/autodiff.h"
#include "kiln/custom_op.h"
#include "kiln/ops.h"

using namespace kiln;
namespace K = kiln::kernel;

namespace {

/// y = x * sigmoid(x), one thread per element.
K::Kernel swish_kernel() {
  return K::trace("swish_f32", [](K::Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    K::Val n = b.scalar<int32_t>("n");
    b.group_size(64);
    K::Val i = K::global_id();
    K::if_(i < n, [&] {
      K::Val v = x[i];
      y[i] = v * K::sigmoid(v);
    });
  });
}

/// d/dx swish = s + x s (1 - s), written with tensor ops (so it is differentiable again).
std::vector<Tensor> swish_backward(const CustomGradArgs& a) {
  const Tensor& x = a.inputs[0];
  Tensor s = sigmoid(x);
  return {a.grad_outputs[0] * (s + x * s * (1.0 - s))};
}

CustomOp swish_op() {
  return CustomOp({.name = "swish",
                   .kernel = [](const std::vector<Tensor>&) { return swish_kernel(); },
                   .backward = swish_backward});
}

/// (y, z) = (a * b + c, a - b) over T; buffers declared one statement each (declaration order).
template <class T>
K::Kernel fma_diff_kernel(const char* name) {
  return K::trace(name, [](K::Builder& b) {
    auto a = b.input<T>("a");
    auto bb = b.input<T>("b");
    auto c = b.input<T>("c");
    auto y = b.output<T>("y");
    auto z = b.output<T>("z");
    K::Val n = b.scalar<int32_t>("n");
    K::Val i = K::global_id();
    K::if_(i < n, [&] {
      K::Val av = a[i];
      K::Val bv = bb[i];
      K::Val cv = c[i];
      y[i] = av * bv + cv;
      z[i] = av - bv;
    });
  });
}

double max_diff(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0) return 0;
  return (a.detach().to(f64) - b.detach().to(f64)).abs().max().item<double>();
}

}  // namespace

TEST(CustomOp, ValuesMatchTensorOpsOnAnyLayout) {
  CustomOp swish = swish_op();
  manual_seed(1);
  Tensor x = randn({37, 5}) * 3.0;
  EXPECT_LE(max_diff(swish(x), x * sigmoid(x)), 1e-6);
  Tensor xt = x.transpose(0, 1);  // strided: made contiguous for the kernel
  Tensor yt = swish(xt);
  EXPECT_EQ(yt.shape(), xt.shape());
  EXPECT_LE(max_diff(yt, xt * sigmoid(xt)), 1e-6);
  EXPECT_EQ(swish(empty({0, 3})).shape(), (Shape{0, 3}));
  Tensor s = scalar_tensor(0.5, f32, Device::cpu());
  EXPECT_LE(max_diff(swish(s), s * sigmoid(s)), 1e-6);
  EXPECT_EQ(swish(s).dim(), 0);
}

TEST(CustomOp, GradientsOfFirstAndSecondOrder) {
  CustomOp swish = swish_op();
  const Device d = Device::cpu().autodiff();
  manual_seed(2);
  Tensor x = (randn({64}) * 2.0).to(d).require_grad();
  Tensor w = randn({64}).to(d);
  Gradients g = (swish(x) * w).sum().backward({.create_graph = true});
  Tensor x2 = x.detach().to(d).require_grad();
  Gradients ref = (x2 * sigmoid(x2) * w).sum().backward({.create_graph = true});
  EXPECT_LE(max_diff(g.get(x), ref.get(x2)), 1e-5);
  // Second order through the backward's tensor ops.
  Gradients gg = g.get(x).sum().backward();
  Gradients rr = ref.get(x2).sum().backward();
  EXPECT_LE(max_diff(gg.get(x), rr.get(x2)), 1e-5);
}

TEST(CustomOp, FiniteDifferences) {
  CustomOp swish = swish_op();
  const Device d = Device::cpu().autodiff();
  Tensor x = tensor<float>({-2.0f, -0.3f, 0.0f, 0.7f, 3.0f}).to(d).require_grad();
  Tensor g = swish(x).sum().backward().get(x);
  const double h = 1e-3;
  Tensor xd = x.detach();
  Tensor fd = (swish(xd + h) - swish(xd - h)) / (2 * h);
  EXPECT_LE(max_diff(g, fd), 2e-3);
}

TEST(CustomOp, SeveralInputsAndOutputsAndDtypes) {
  // (a * b + c, a - b) in f32 or i32, the kernel traced per dtype.
  CustomOp fma_diff({.name = "fma_diff",
                     .kernel =
                         [](const std::vector<Tensor>& in) {
                           return in[0].dtype() == f32 ? fma_diff_kernel<float>("fma_diff_f32")
                                                       : fma_diff_kernel<int32_t>("fma_diff_i32");
                         },
                     .outputs =
                         [](const std::vector<Tensor>& in) {
                           return std::vector<std::pair<Shape, DType>>{{in[0].shape(), in[0].dtype()},
                                                                       {in[0].shape(), in[0].dtype()}};
                         }});
  for (DType dt : {f32, i32}) {
    Tensor a = arange(12, dt).reshape({3, 4});
    Tensor b = arange(12, dt).reshape({3, 4}) - 5;
    Tensor c = full({3, 4}, 2, {.dtype = dt});
    std::vector<Tensor> out = fma_diff.call({a, b, c});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(out[0].equal(a * b + c)) << dtype_name(dt);
    EXPECT_TRUE(out[1].equal(a - b)) << dtype_name(dt);
    EXPECT_EQ(out[0].dtype(), dt);
  }
  // Inputs of other lengths than the output would be read out of range: refused.
  EXPECT_THROW(fma_diff.call({ones({3, 4}), ones({2}), ones({3, 4})}), Error);
  // Not differentiable (no backward): outputs do not require gradients.
  Tensor a = ones({4}).to(Device::cpu().autodiff()).require_grad();
  EXPECT_FALSE(fma_diff.call({a, a, a})[0].requires_grad());
}

TEST(CustomOp, RunsOnTheFusionDeviceAfterPendingWork) {
  CustomOp swish = swish_op();
  const Device d = Device::cpu().fusion();
  manual_seed(3);
  Tensor x = randn({100}).to(d);
  Tensor h = x * 2.0 + 1.0;  // pending fused work, finished before the kernel reads it
  Tensor y = swish(h);
  EXPECT_EQ(y.device(), d);
  Tensor hc = (x * 2.0 + 1.0).to(Device::cpu());
  EXPECT_LE(max_diff(y.to(Device::cpu()), hc * sigmoid(hc)), 1e-5);
}

TEST(CustomOp, BadSpecsAndInputs) {
  EXPECT_THROW(CustomOp({.name = "x"}), Error);                                                          // no kernel
  EXPECT_THROW(CustomOp({.kernel = [](const std::vector<Tensor>&) { return swish_kernel(); }}), Error);  // no name
  CustomOp swish = swish_op();
  EXPECT_THROW(swish(ones({3}, {.dtype = f64})), Error);  // kernels have no f64
  EXPECT_THROW(swish(ones({3}, {.dtype = i32})), Error);  // the kernel's buffer holds f32
  EXPECT_THROW(swish.call({}), Error);
  EXPECT_THROW(swish(Tensor()), Error);
  CustomOp two_outputs({.name = "wrong_count",
                        .kernel = [](const std::vector<Tensor>&) { return swish_kernel(); },
                        .outputs =
                            [](const std::vector<Tensor>& in) {
                              return std::vector<std::pair<Shape, DType>>{{in[0].shape(), f32}, {in[0].shape(), f32}};
                            }});
  EXPECT_THROW(two_outputs(ones({3})), Error);  // 2 buffers for 1 input and 2 outputs
  CustomOp bad_backward(
      {.name = "bad_backward",
       .kernel = [](const std::vector<Tensor>&) { return swish_kernel(); },
       .backward = [](const CustomGradArgs& a) { return std::vector<Tensor>{a.grad_outputs[0].sum()}; }});
  Tensor x = ones({4}).to(Device::cpu().autodiff()).require_grad();
  EXPECT_THROW(bad_backward(x).sum().backward(), Error);  // a gradient of the wrong shape
}

TEST(CustomOp, RunsInVulkanMemoryWithGradients) {
  // lavapipe runs Vulkan on the CPU in CI (scripts/install-deps.sh installs it).
  std::vector<std::string> vk;
  for (const std::string& name : Device::list())
    if (name.rfind("vulkan", 0) == 0) vk.push_back(name);
  if (vk.empty()) GTEST_SKIP() << "no Vulkan device on this machine";
  CustomOp swish = swish_op();
  manual_seed(4);
  Tensor x0 = randn({3, 70}) * 2.0;
  for (const std::string& name : vk) {
    const Device d = Device::from_string(name).autodiff();
    Tensor x = x0.to(d).require_grad();
    Tensor y = swish(x.narrow(1, 5, 60));  // a view with an offset: copied to a fresh buffer
    EXPECT_EQ(y.device(), d);
    Tensor xc = x0.narrow(1, 5, 60);
    EXPECT_LE(max_diff(y.to(Device::cpu()), xc * sigmoid(xc)), 1e-5) << name;
    Tensor g = y.sum().backward().get(x).to(Device::cpu());
    Tensor s = sigmoid(xc);
    EXPECT_LE(max_diff(g.narrow(1, 5, 60), s + xc * s * (1.0 - s)), 1e-5) << name;
    EXPECT_EQ(g.narrow(1, 0, 5).abs().max().item<float>(), 0.0f) << name;
  }
}
