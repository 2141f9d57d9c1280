// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/linear.h"

#include <cmath>

#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/ops.h"
#include "ops/prepared.h"

namespace kiln::nn {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
namespace {
/// The config with the deprecated .in/.out folded into .in_features/.out_features.
LinearConfig resolved(LinearConfig c) {
  KILN_CHECK((c.in < 0 || c.in_features == 0 || c.in == c.in_features) &&
                 (c.out < 0 || c.out_features == 0 || c.out == c.out_features),
             "Linear", "give in_features and out_features once (.in and .out are their old spellings)");
  if (c.in >= 0) c.in_features = c.in;
  if (c.out >= 0) c.out_features = c.out;
  c.in = c.out = -1;
  return c;
}
}  // namespace
#pragma GCC diagnostic pop

Linear::Linear(const LinearConfig& cfg, const Device& device)
    : config(resolved(cfg)), prepared_(std::make_shared<kiln::detail::PreparedOp>()) {
  const LinearConfig& c = config;
  KILN_CHECK(c.in_features >= 0 && c.out_features >= 0, "Linear",
             "in_features and out_features must be >= 0, got in_features=" << c.in_features
                                                                           << ", out_features=" << c.out_features);
  const double bound = c.in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(c.in_features)) : 0.0;
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  weight = make_param(uniform({c.out_features, c.in_features}, -bound, bound, o), device);
  if (c.bias) bias = make_param(uniform({c.out_features}, -bound, bound, o), device);
}

Tensor Linear::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == config.in_features, "Linear",
             "Linear(in_features=" << config.in_features << ", out_features=" << config.out_features
                                   << ") expects input [..., " << config.in_features << "], got "
                                   << (x.defined() ? to_string(x.shape()) : std::string("undefined")));
  if (prepared_ && !lora && weight.dim() == 2) {
    // Inference: the op of the last call when the layouts are the same, else the one MatMul op
    // linear issues for the plain case, kept for the next call (Note [Prepared steps]).
    const Tensor in[3] = {x, weight, bias};
    const int64_t key[1] = {bias.defined()};
    if (Tensor y = kiln::detail::run_prepared(prepared_.get(), in, key); y.defined()) return y;
    if (Tensor y = kiln::detail::matmul_op(x.dim() == 1 ? x.unsqueeze(0) : x, weight.t(), bias,
                                           x.dim() == 1 ? nullptr : prepared_.get(), in, key);
        y.defined())
      return x.dim() == 1 ? y.squeeze({0}) : y;
  }
  Tensor y = linear(x, weight, bias);
  return lora ? y + lora->forward(x) : y;
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(config.in_features) + ", out_features=" + std::to_string(config.out_features) +
         ", bias=" + (config.bias ? "true" : "false");
}

}  // namespace kiln::nn
