// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Activation functions as modules (torch.nn.ReLU, GELU, ..., GLU) and SwiGLU, the gated MLP of
// LLaMA-style transformers. Element-wise activations keep the input's shape and dtype.
#include <string>

#include "kiln/nn/config.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/module.h"

/// A module with no fields: an empty visit and its type name.
#define KILN_NN_NO_FIELDS_(Type)               \
  void visit(::kiln::nn::Visitor&) override {} \
  std::string type_name() const override { return #Type; }

namespace kiln::nn {

/// max(x, 0); x [*] -> [*].
struct ReLU : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(ReLU)
};

/// Config of LeakyReLU.
struct LeakyReLUConfig {
  double negative_slope = 0.01;  ///< slope for x < 0
  KILN_CONFIG(LeakyReLUConfig, negative_slope)
};
/// x for x >= 0, negative_slope * x otherwise; x [*] -> [*].
struct LeakyReLU : Module {
  LeakyReLUConfig config;
  LeakyReLU() = default;
  explicit LeakyReLU(const LeakyReLUConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(LeakyReLU)
};

/// Config of PReLU: one learnable slope, or one per channel (num_parameters = C).
struct PReLUConfig {
  int64_t num_parameters = 1;  ///< 1, or the channel count (dim 1 of the input)
  double init = 0.25;          ///< initial slope
  DType dtype = f32;
  KILN_CONFIG(PReLUConfig, num_parameters, init, dtype)
};
/// x for x >= 0, weight * x otherwise; x [N, C, *] (or [C] / [] ) -> same shape. weight
/// [num_parameters] is broadcast along the channel dim 1 (dim 0 for a 1-d input).
struct PReLU : Module {
  PReLUConfig config;
  Param weight;
  PReLU() = default;
  explicit PReLU(const PReLUConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(PReLU, weight)
};

/// Config of GELU.
struct GELUConfig {
  std::string approximate = "none";  ///< "none" (erf) or "tanh"
  KILN_CONFIG(GELUConfig, approximate)
};
/// Gaussian error linear unit; x [*] -> [*].
struct GELU : Module {
  GELUConfig config;
  GELU() = default;
  explicit GELU(const GELUConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(GELU)
};

/// x * sigmoid(x); x [*] -> [*].
struct SiLU : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(SiLU)
};
/// x * tanh(softplus(x)); x [*] -> [*].
struct Mish : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(Mish)
};
/// tanh(x); x [*] -> [*].
struct Tanh : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(Tanh)
};
/// 1 / (1 + exp(-x)); x [*] -> [*].
struct Sigmoid : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(Sigmoid)
};
/// Scaled ELU with PyTorch's constants; x [*] -> [*].
struct SELU : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(SELU)
};
/// x * relu6(x + 3) / 6; x [*] -> [*].
struct Hardswish : Module {
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_NN_NO_FIELDS_(Hardswish)
};

/// Config of Softmax / LogSoftmax / GLU: the dim they act along.
struct SoftmaxConfig {
  int64_t dim = -1;
  KILN_CONFIG(SoftmaxConfig, dim)
};
/// softmax along config.dim; x [*] -> [*].
struct Softmax : Module {
  SoftmaxConfig config;
  Softmax() = default;
  explicit Softmax(const SoftmaxConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(Softmax)
};
/// log(softmax) along config.dim; x [*] -> [*].
struct LogSoftmax : Module {
  SoftmaxConfig config;
  LogSoftmax() = default;
  explicit LogSoftmax(const SoftmaxConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(LogSoftmax)
};

/// Config of Softplus.
struct SoftplusConfig {
  double beta = 1.0;        ///< log(1 + exp(beta x)) / beta
  double threshold = 20.0;  ///< linear above beta x > threshold
  KILN_CONFIG(SoftplusConfig, beta, threshold)
};
/// log(1 + exp(beta x)) / beta; x [*] -> [*].
struct Softplus : Module {
  SoftplusConfig config;
  Softplus() = default;
  explicit Softplus(const SoftplusConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(Softplus)
};

/// Config of ELU.
struct ELUConfig {
  double alpha = 1.0;
  KILN_CONFIG(ELUConfig, alpha)
};
/// x for x > 0, alpha (exp(x) - 1) otherwise; x [*] -> [*].
struct ELU : Module {
  ELUConfig config;
  ELU() = default;
  explicit ELU(const ELUConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(ELU)
};

/// Declares a configured activation module: Type(config), forward, operator() and extra_repr.
#define KILN_NN_CONFIGURED_ACTIVATION_(Type)                                                      \
  struct Type : Module {                                                                          \
    Type##Config config;                                                                          \
    Type() = default;                                                                             \
    explicit Type(const Type##Config& c, const Device& = Device::default_device()) : config(c) {} \
    Tensor forward(const Tensor& x) const;                                                        \
    Tensor operator()(const Tensor& x) const { return forward(x); }                               \
    std::string extra_repr() const override;                                                      \
    KILN_NN_NO_FIELDS_(Type)                                                                      \
  };
/// Declares an activation module without options.
#define KILN_NN_PLAIN_ACTIVATION_(Type)                             \
  struct Type : Module {                                            \
    Tensor forward(const Tensor& x) const;                          \
    Tensor operator()(const Tensor& x) const { return forward(x); } \
    KILN_NN_NO_FIELDS_(Type)                                        \
  };

/// log(sigmoid(x)); x [*] -> [*].
KILN_NN_PLAIN_ACTIVATION_(LogSigmoid)
/// x - tanh(x); x [*] -> [*].
KILN_NN_PLAIN_ACTIVATION_(Tanhshrink)

/// Config of Hardshrink and Softshrink.
struct HardshrinkConfig {
  double lambd = 0.5;  ///< the half-width of the band set to zero (>= 0)
  KILN_CONFIG(HardshrinkConfig, lambd)
};
using SoftshrinkConfig = HardshrinkConfig;
/// x where |x| > lambd, else 0; x [*] -> [*].
KILN_NN_CONFIGURED_ACTIVATION_(Hardshrink)
/// x -+ lambd outside [-lambd, lambd], else 0; x [*] -> [*].
KILN_NN_CONFIGURED_ACTIVATION_(Softshrink)

/// Config of Threshold.
struct ThresholdConfig {
  double threshold = 0.0;  ///< x <= threshold is replaced
  double value = 0.0;      ///< by this
  KILN_CONFIG(ThresholdConfig, threshold, value)
};
/// x where x > threshold, else value; x [*] -> [*].
KILN_NN_CONFIGURED_ACTIVATION_(Threshold)

/// Config of Hardtanh.
struct HardtanhConfig {
  double min_val = -1.0, max_val = 1.0;
  KILN_CONFIG(HardtanhConfig, min_val, max_val)
};
/// clamp(x, min_val, max_val); x [*] -> [*].
KILN_NN_CONFIGURED_ACTIVATION_(Hardtanh)

/// Config of CELU.
struct CELUConfig {
  double alpha = 1.0;
  KILN_CONFIG(CELUConfig, alpha)
};
/// max(0, x) + min(0, alpha (exp(x / alpha) - 1)); x [*] -> [*].
KILN_NN_CONFIGURED_ACTIVATION_(CELU)

/// Config of RReLU.
struct RReLUConfig {
  double lower = 1.0 / 8, upper = 1.0 / 3;  ///< range of the random negative slope
  KILN_CONFIG(RReLUConfig, lower, upper)
};
/// Randomized leaky ReLU: a slope drawn from [lower, upper] per element in training, their
/// mean in evaluation; x [*] -> [*].
KILN_NN_CONFIGURED_ACTIVATION_(RReLU)

/// Gated linear unit: x split in halves a, b along config.dim -> a * sigmoid(b). The size of
/// that dim must be even; the output has half of it.
struct GLU : Module {
  SoftmaxConfig config;
  GLU() = default;
  explicit GLU(const SoftmaxConfig& c, const Device& = Device::default_device()) : config(c) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_NN_NO_FIELDS_(GLU)
};

/// Config of SwiGLU: `SwiGLU({.in = 512, .hidden = 1376})`.
struct SwiGLUConfig {
  int64_t in = 0;      ///< input features (d_model)
  int64_t hidden = 0;  ///< inner features of the gate and up projections
  int64_t out = 0;     ///< output features; 0 means `in`
  bool bias = false;   ///< biases on w1, w2, w3 (LLaMA uses none)
  DType dtype = f32;
  KILN_CONFIG(SwiGLUConfig, in, hidden, out, bias, dtype)
};
/// The gated MLP of LLaMA: w2(silu(w1(x)) * w3(x)). x [..., in] -> [..., out]. w1 and w3 are
/// Linear(in -> hidden) (gate and up projections), w2 Linear(hidden -> out) (down projection);
/// named "w1", "w2", "w3" as in Meta's LLaMA reference code, initialised like Linear.
struct SwiGLU : Module {
  SwiGLUConfig config;
  Linear w1, w2, w3;
  SwiGLU() = default;
  explicit SwiGLU(const SwiGLUConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(SwiGLU, w1, w2, w3)
};

}  // namespace kiln::nn
