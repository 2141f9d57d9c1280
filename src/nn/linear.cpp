// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/linear.h"

#include <cmath>

#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/ops.h"

namespace kiln::nn {

Linear::Linear(const LinearConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.in >= 0 && c.out >= 0, "Linear", "in and out must be >= 0, got in=" << c.in << ", out=" << c.out);
  const double bound = c.in > 0 ? 1.0 / std::sqrt(static_cast<double>(c.in)) : 0.0;
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  weight = make_param(uniform({c.out, c.in}, -bound, bound, o), device);
  if (c.bias) bias = make_param(uniform({c.out}, -bound, bound, o), device);
}

Tensor Linear::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == config.in, "Linear",
             "Linear(in=" << config.in << ", out=" << config.out << ") expects input [..., " << config.in << "], got "
                          << (x.defined() ? to_string(x.shape()) : std::string("undefined")));
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in=" + std::to_string(config.in) + ", out=" + std::to_string(config.out) +
         ", bias=" + (config.bias ? "true" : "false");
}

}  // namespace kiln::nn
