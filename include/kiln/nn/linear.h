// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// nn::Linear: y = x·Wᵀ + b (torch.nn.Linear).
#include "kiln/nn/config.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

/// Config of Linear: `Linear({.in = 784, .out = 10})`.
struct LinearConfig {
  int64_t in = 0;    ///< input features
  int64_t out = 0;   ///< output features
  bool bias = true;  ///< add a learnable bias
  DType dtype = f32;
  KILN_CONFIG(LinearConfig, in, out, bias, dtype)
};

/// x [..., in] -> [..., out]. weight [out, in] and bias [out] (PyTorch's layout and names),
/// initialised like PyTorch: U(-1/sqrt(in), 1/sqrt(in)).
struct Linear : Module {
  LinearConfig config;
  Param weight, bias;
  Linear() = default;
  explicit Linear(const LinearConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(Linear, weight, bias)
};

}  // namespace kiln::nn
