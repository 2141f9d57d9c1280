// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// nn::Linear: y = x·Wᵀ + b (torch.nn.Linear).
#include <optional>

#include "kiln/nn/config.h"
#include "kiln/nn/lora.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

// The deprecated fields' own default initialisers must not warn wherever a LinearConfig is
// default-constructed (a Linear member, a vector of configs): only code that names them should.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/// Config of Linear, with torch.nn.Linear's names: `Linear({.in_features = 784, .out_features = 10})`.
struct LinearConfig {
  /// Deprecated spellings of in_features / out_features (-1: not given), kept so that older
  /// code compiles; they come first so either spelling may be followed by .bias and .dtype.
  [[deprecated("use .in_features")]] int64_t in = -1;
  [[deprecated("use .out_features")]] int64_t out = -1;
  int64_t in_features = 0;   ///< size of each input sample
  int64_t out_features = 0;  ///< size of each output sample
  bool bias = true;          ///< add a learnable bias
  DType dtype = f32;
  KILN_CONFIG(LinearConfig, in_features, out_features, bias, dtype)
};
#pragma GCC diagnostic pop

/// x [..., in_features] -> [..., out_features]. weight [out_features, in_features] and bias
/// [out_features] (PyTorch's layout and names), initialised like PyTorch: U(-1/sqrt(in), 1/sqrt(in)).
/// With a LoRA adapter (nn::apply_lora) the output adds lora(x).
struct Linear : Module {
  LinearConfig config;
  Param weight, bias;
  std::optional<LoraAdapter> lora;  ///< set by apply_lora, folded in by merge_lora
  Linear() = default;
  explicit Linear(const LinearConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(Linear, weight, bias, lora)

  /// Inference calls keep the op they issued here for the next call with the same layouts
  /// (shared by copies of the module; used by one call at a time).
  mutable std::shared_ptr<kiln::detail::PreparedOp> prepared_;
};

}  // namespace kiln::nn
