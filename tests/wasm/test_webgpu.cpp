// SPDX-License-Identifier: MIT OR Apache-2.0
// The WebGPU device's own checks, beside the conformance suite that runs on it: a custom op's
// kernel launched in WebGPU memory (the launcher of kernel/launch.h), forward and backward
// against the same function written with tensor ops, and errors that name the device. Run in the
// page by the CTest wasm_webgpu_conformance; skipped where the program has no WebGPU device
// (node has neither navigator.gpu nor JSPI).
#include <gtest/gtest.h>
#include <kiln/custom_op.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <string>

using namespace kiln;
namespace K = kiln::kernel;

namespace {

bool has_webgpu() {
  const std::vector<std::string> names = Device::list();
  return std::find(names.begin(), names.end(), "webgpu") != names.end();
}

/// y = x * sigmoid(x) (SiLU), one thread per element.
K::Kernel silu_kernel() {
  return K::trace("silu_webgpu", [](K::Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    K::Val n = b.scalar<int32_t>("n");
    b.group_size(64);
    K::Val i = K::global_id();
    K::if_(i < n, [&] { y[i] = x[i] * K::sigmoid(x[i]); });
  });
}

Tensor silu_ops(const Tensor& x) { return x * sigmoid(x); }

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.detach().to(Device::cpu(), f64) - b.detach().to(Device::cpu(), f64)).abs().max().item<double>();
}

}  // namespace

TEST(WebGpu, CustomOpRunsInDeviceMemoryWithItsBackward) {
  if (!has_webgpu()) GTEST_SKIP() << "no WebGPU device here (a page of a browser with WebGPU and JSPI has one)";
  CustomOp silu({.name = "silu_webgpu",
                 .kernel = [](const std::vector<Tensor>&) { return silu_kernel(); },
                 .backward = [](const CustomGradArgs& a) -> std::vector<Tensor> {
                   const Tensor s = sigmoid(a.inputs[0]);
                   return {a.grad_outputs[0] * (s + a.inputs[0] * s * (1.0 - s))};
                 }});
  const Device d = Device::webgpu().autodiff();
  manual_seed(3);
  const Tensor x = (randn({1000}) * 4.0).to(d).require_grad();
  reset_fallback_counts();
  const Tensor y = silu(x);
  EXPECT_LE(max_diff(y, silu_ops(x)), 1e-6);
  EXPECT_TRUE(fallback_counts().empty()) << "the custom op went through the CPU";
  const Tensor g = y.sum().backward().get(x), want = silu_ops(x).sum().backward().get(x);
  EXPECT_LE(max_diff(g, want), 1e-6);
}

TEST(WebGpu, ValuesRoundTripAndShapesAreChecked) {
  if (!has_webgpu()) GTEST_SKIP() << "no WebGPU device here (a page of a browser with WebGPU and JSPI has one)";
  const Device d = Device::webgpu();
  // bytes that are not whole 4-byte words, written and read at odd offsets
  const Tensor b = tensor<uint8_t>({1, 2, 3, 4, 5, 6, 7}).to(d);
  b.narrow(0, 2, 3).copy_(tensor<uint8_t>({30, 40, 50}).to(d));
  EXPECT_EQ(b.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 30, 40, 50, 6, 7}));
  EXPECT_EQ(b.narrow(0, 3, 3).to_vector<uint8_t>(), (std::vector<uint8_t>{40, 50, 6}));
  try {
    (void)(ones({2, 3}).to(d) + ones({4}).to(d));
    FAIL() << "mismatched shapes were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
}
