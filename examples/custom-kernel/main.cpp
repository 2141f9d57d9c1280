// SPDX-License-Identifier: MIT OR Apache-2.0
// A custom op written once in the kernel language: the tanh form of GELU fused into one kernel,
// with its backward written with tensor ops. It runs on every device of this build (the CPU, its
// fusion and autodiff layers, and in Vulkan memory when there is a device), checked against the function
// written with tensor ops, and its gradient against central finite differences.
//
//   custom-kernel        prints each check and "passed" (exit status 0) or what failed (1)
#include <kiln/custom_op.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>

using namespace kiln;
namespace K = kiln::kernel;

namespace {

constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)

/// gelu(x) = 0.5 x (1 + tanh(c (x + 0.044715 x^3))), one thread per element, in one kernel.
K::Kernel gelu_kernel() {
  return K::trace("fused_gelu_tanh", [](K::Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    K::Val n = b.scalar<int32_t>("n");
    b.group_size(128);
    K::Val i = K::global_id();
    K::if_(i < n, [&] {
      K::Val v = x[i];
      K::Val inner = static_cast<float>(kC) * (v + 0.044715f * v * v * v);
      y[i] = 0.5f * v * (1.0f + K::tanh(inner));
    });
  });
}

/// The same function with tensor ops: the reference, and what the backward differentiates.
Tensor gelu_ops(const Tensor& x) { return 0.5 * x * (1.0 + tanh(kC * (x + 0.044715 * x * x * x))); }

/// d gelu / dx with tensor ops (so gradients of gradients work too).
std::vector<Tensor> gelu_backward(const CustomGradArgs& a) {
  const Tensor& x = a.inputs[0];
  Tensor t = tanh(kC * (x + 0.044715 * x * x * x));
  Tensor d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kC * (1.0 + 3 * 0.044715 * x * x);
  return {a.grad_outputs[0] * d};
}

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.detach().to(Device::cpu(), f64) - b.detach().to(Device::cpu(), f64)).abs().max().item<double>();
}

}  // namespace

int main() {
  CustomOp gelu({.name = "fused_gelu",
                 .kernel = [](const std::vector<Tensor>&) { return gelu_kernel(); },
                 .backward = gelu_backward});
  std::vector<Device> devices = {Device::cpu().without_fusion(), Device::cpu(), Device::cpu().autodiff()};
  for (const std::string& name : Device::list())
    if (name.rfind("vulkan", 0) == 0) devices.push_back(Device::from_string(name).autodiff());
  bool ok = true;
  manual_seed(0);
  Tensor x0 = randn({1000}) * 3.0;
  for (const Device& d : devices) {
    Tensor x = x0.to(d);
    double value_err = max_diff(gelu(x), gelu_ops(x));
    std::printf("%-24s values: max |kernel - tensor ops| = %.2e\n", d.str().c_str(), value_err);
    ok = ok && value_err <= 1e-5;
  }
  // The gradient against central differences of the op itself (f64 arithmetic on f32 values).
  const Device ad = Device::cpu().autodiff();
  Tensor x = tensor<float>({-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f}).to(ad).require_grad();
  Tensor g = gelu(x).sum().backward().get(x);
  const double h = 1e-2;
  Tensor xd = x.detach().to(f64);
  Tensor fd = (gelu_ops(xd + h) - gelu_ops(xd - h)) / (2 * h);
  Tensor fd_kernel = (gelu(x.detach() + static_cast<float>(h)) - gelu(x.detach() - static_cast<float>(h))) / (2 * h);
  double grad_err = max_diff(g, fd), kernel_fd_err = max_diff(g, fd_kernel);
  std::printf("gradient: max |backward - finite differences| = %.2e (of the kernel itself: %.2e)\n", grad_err,
              kernel_fd_err);
  ok = ok && grad_err <= 1e-4 && kernel_fd_err <= 2e-3;
  std::printf(ok ? "passed\n" : "FAILED\n");
  return ok ? 0 : 1;
}
