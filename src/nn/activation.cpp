// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/activation.h"

#include <sstream>

#include "kiln/error.h"
#include "kiln/nn/functional/activation.h"
#include "kiln/ops.h"

namespace kiln::nn {
namespace {
std::string shape_str(const Tensor& x) { return x.defined() ? to_string(x.shape()) : std::string("undefined"); }
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
}  // namespace

Tensor ReLU::forward(const Tensor& x) const { return relu(x); }
Tensor LeakyReLU::forward(const Tensor& x) const { return leaky_relu(x, config.negative_slope); }
std::string LeakyReLU::extra_repr() const { return "negative_slope=" + num(config.negative_slope); }

PReLU::PReLU(const PReLUConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.num_parameters >= 1, "PReLU", "PReLU num_parameters must be >= 1, got " << c.num_parameters);
  weight =
      make_param(full({c.num_parameters}, c.init, {.dtype = c.dtype, .device = device.without_autodiff()}), device);
}

Tensor PReLU::forward(const Tensor& x) const {
  const int64_t n = config.num_parameters;
  KILN_CHECK(
      x.defined() && (n == 1 || (x.dim() >= 2 && x.size(1) == n) || (x.dim() == 1 && x.size(0) == n)), "PReLU",
      "PReLU(num_parameters=" << n << ") expects input [N, " << n << ", *] or [" << n << "], got " << shape_str(x));
  return functional::prelu(x, weight);
}
std::string PReLU::extra_repr() const { return "num_parameters=" + std::to_string(config.num_parameters); }

Tensor GELU::forward(const Tensor& x) const { return gelu(x, config.approximate); }
std::string GELU::extra_repr() const { return "approximate=" + config.approximate; }
Tensor SiLU::forward(const Tensor& x) const { return silu(x); }
Tensor Mish::forward(const Tensor& x) const { return mish(x); }
Tensor Tanh::forward(const Tensor& x) const { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) const { return sigmoid(x); }
Tensor SELU::forward(const Tensor& x) const { return selu(x); }
Tensor Hardswish::forward(const Tensor& x) const { return hardswish(x); }

Tensor Softmax::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && config.dim >= -std::max<int64_t>(x.dim(), 1) && config.dim < std::max<int64_t>(x.dim(), 1),
             "Softmax", "Softmax(dim=" << config.dim << ") got input " << shape_str(x));
  return softmax(x, config.dim);
}
std::string Softmax::extra_repr() const { return "dim=" + std::to_string(config.dim); }
Tensor LogSoftmax::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && config.dim >= -std::max<int64_t>(x.dim(), 1) && config.dim < std::max<int64_t>(x.dim(), 1),
             "LogSoftmax", "LogSoftmax(dim=" << config.dim << ") got input " << shape_str(x));
  return log_softmax(x, config.dim);
}
std::string LogSoftmax::extra_repr() const { return "dim=" + std::to_string(config.dim); }

Tensor Softplus::forward(const Tensor& x) const { return softplus(x, config.beta, config.threshold); }
std::string Softplus::extra_repr() const { return "beta=" + num(config.beta) + ", threshold=" + num(config.threshold); }
Tensor ELU::forward(const Tensor& x) const { return elu(x, config.alpha); }
std::string ELU::extra_repr() const { return "alpha=" + num(config.alpha); }

Tensor GLU::forward(const Tensor& x) const {
  const int64_t d = config.dim;
  KILN_CHECK(x.defined() && x.dim() >= 1 && d >= -x.dim() && d < x.dim() && x.size(d) % 2 == 0, "GLU",
             "GLU(dim=" << d << ") expects an input whose dim " << d << " has an even size, got " << shape_str(x));
  auto halves = chunk(x, 2, d);
  return halves[0] * sigmoid(halves[1]);
}
std::string GLU::extra_repr() const { return "dim=" + std::to_string(config.dim); }

SwiGLU::SwiGLU(const SwiGLUConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.in > 0 && c.hidden > 0 && c.out >= 0, "SwiGLU",
             "SwiGLU needs in > 0 and hidden > 0, got in=" << c.in << ", hidden=" << c.hidden << ", out=" << c.out);
  if (config.out == 0) config.out = c.in;
  w1 = Linear({.in_features = c.in, .out_features = c.hidden, .bias = c.bias, .dtype = c.dtype}, device);
  w2 = Linear({.in_features = c.hidden, .out_features = config.out, .bias = c.bias, .dtype = c.dtype}, device);
  w3 = Linear({.in_features = c.in, .out_features = c.hidden, .bias = c.bias, .dtype = c.dtype}, device);
}

Tensor SwiGLU::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == config.in, "SwiGLU",
             "SwiGLU(in=" << config.in << ", hidden=" << config.hidden << ", out=" << config.out
                          << ") expects input [..., " << config.in << "], got " << shape_str(x));
  return w2(silu(w1(x)) * w3(x));
}
std::string SwiGLU::extra_repr() const {
  return "in=" + std::to_string(config.in) + ", hidden=" + std::to_string(config.hidden) +
         ", out=" + std::to_string(config.out) + ", bias=" + (config.bias ? "true" : "false");
}

Tensor LogSigmoid::forward(const Tensor& x) const { return functional::logsigmoid(x); }
Tensor Tanhshrink::forward(const Tensor& x) const { return functional::tanhshrink(x); }
Tensor Hardshrink::forward(const Tensor& x) const { return functional::hardshrink(x, config.lambd); }
std::string Hardshrink::extra_repr() const { return num(config.lambd); }
Tensor Softshrink::forward(const Tensor& x) const { return functional::softshrink(x, config.lambd); }
std::string Softshrink::extra_repr() const { return num(config.lambd); }
Tensor Threshold::forward(const Tensor& x) const { return functional::threshold(x, config.threshold, config.value); }
std::string Threshold::extra_repr() const {
  return "threshold=" + num(config.threshold) + ", value=" + num(config.value);
}
Tensor Hardtanh::forward(const Tensor& x) const { return hardtanh(x, config.min_val, config.max_val); }
std::string Hardtanh::extra_repr() const {
  return "min_val=" + num(config.min_val) + ", max_val=" + num(config.max_val);
}
Tensor CELU::forward(const Tensor& x) const { return celu(x, config.alpha); }
std::string CELU::extra_repr() const { return "alpha=" + num(config.alpha); }
Tensor RReLU::forward(const Tensor& x) const { return functional::rrelu(x, config.lower, config.upper, is_training()); }
std::string RReLU::extra_repr() const { return "lower=" + num(config.lower) + ", upper=" + num(config.upper); }

}  // namespace kiln::nn
