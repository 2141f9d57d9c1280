// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Finite-difference gradient checks for tests: compares the gradients backward() returns with
// central differences in f64 (as torch.autograd.gradcheck), and the same for gradients of
// gradients (gradgradcheck).
#include <kiln/kiln.h>

#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::test {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Uses the default device (KILN_DEVICE, else the CPU) with autodiff; inputs are moved there as
/// f64 leaves.
inline Device ad_device() { return Device::default_device().autodiff(); }

/// Random f64 input of the given shape on the autodiff device (values in [lo, hi)).
inline Tensor rand_input(const Shape& s, double lo = -1, double hi = 1, uint64_t seed = 1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = u(g);
  return tensor(v, s, ad_device());
}

/// Returns "" when the analytic gradients of sum(f(x) * w) (w fixed random weights) match
/// central differences for every input, else a description of the first mismatch.
inline std::string gradcheck(const Fn& f, std::vector<Tensor> inputs, double eps = 1e-6, double atol = 1e-5,
                             double rtol = 1e-4) {
  for (auto& x : inputs) x = x.detach().to(ad_device()).to(f64).contiguous().require_grad();
  Tensor y = f(inputs);
  std::vector<double> w(static_cast<size_t>(y.numel()));
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (auto& v : w) v = u(g);
  Tensor wt = tensor(w, y.shape(), ad_device());
  auto objective = [&](const std::vector<Tensor>& xs) {  // grad mode stays on: f may call backward
    return (f(xs).to(f64) * wt).sum().item<double>();
  };
  Gradients grads = (y.to(f64) * wt).sum().backward();
  std::ostringstream err;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor gi = inputs[i].grad(grads);
    std::vector<double> analytic = gi.defined() ? gi.to_vector<double>() : std::vector<double>(inputs[i].numel(), 0.0);
    std::vector<double> base = inputs[i].to_vector<double>();
    for (size_t j = 0; j < base.size(); ++j) {
      std::vector<Tensor> xs = inputs;
      std::vector<double> p = base, m = base;
      p[j] += eps;
      m[j] -= eps;
      xs[i] = tensor(p, inputs[i].shape(), ad_device());
      double fp = objective(xs);
      xs[i] = tensor(m, inputs[i].shape(), ad_device());
      double fm = objective(xs);
      double numeric = (fp - fm) / (2 * eps);
      if (std::abs(numeric - analytic[j]) > atol + rtol * std::abs(numeric)) {
        err << "input " << i << " element " << j << ": analytic " << analytic[j] << ", numeric " << numeric;
        return err.str();
      }
    }
  }
  return "";
}

/// Checks the gradients of the gradients: the function x -> sum(grad(sum(f(x) * w)) * v)
/// passes gradcheck, with the inner gradient computed under create_graph.
inline std::string gradgradcheck(const Fn& f, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-4,
                                 double rtol = 1e-3) {
  Fn inner = [f](const std::vector<Tensor>& xs) {
    std::vector<Tensor> ys;
    for (auto& x : xs) ys.push_back(x.requires_grad() ? x : x.detach().require_grad());
    Tensor y = f(ys);
    Gradients g = (y * (1.0 + 0.1 * arange(y.numel(), f64, y.device()).reshape(y.shape())))
                      .sum()
                      .backward({.create_graph = true});
    Tensor total;
    for (size_t i = 0; i < ys.size(); ++i) {
      Tensor gi = ys[i].grad(g);
      if (!gi.defined()) continue;
      Tensor term = (gi * gi).sum();
      total = total.defined() ? total + term : term;
    }
    return total;
  };
  return gradcheck(inner, inputs, eps, atol, rtol);
}

}  // namespace kiln::test
