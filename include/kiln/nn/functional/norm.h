// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Normalisation: layer_norm, rms_norm, group_norm, instance_norm, batch_norm, local_response_norm, normalize.
// All take floating point inputs; an undefined Tensor (`{}`) stands for an absent optional.
#include <optional>

#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// Layer normalisation over the trailing dims: x [*, normalized_shape] -> same shape and dtype,
/// y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance of each
/// normalised slice. weight and bias (optional) have shape normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

/// layer_norm that also returns the statistics it used (PyTorch's native_layer_norm): y, and
/// mean and rstd = 1 / sqrt(var + eps) of shape x.shape with the normalised dims set to 1
/// (f32 for f32/f16/bf16 inputs, f64 for f64).
struct LayerNormResult {
  Tensor output, mean, rstd;
};
LayerNormResult native_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                                  const Tensor& bias = {}, double eps = 1e-5);

/// Root-mean-square normalisation over the trailing dims: x [*, normalized_shape] -> same
/// shape, y = x / sqrt(mean(x^2) + eps) * weight. eps defaults to the machine epsilon of the
/// compute type (f32 for f32/f16/bf16, f64 for f64), as PyTorch.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = {});

/// Group normalisation: x [N, C, *] with C divisible by num_groups; each group of C/num_groups
/// channels of a sample is normalised over its channels and spatial positions, then scaled by
/// weight [C] and shifted by bias [C] per channel. Same shape and dtype as x.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

/// Options of instance_norm (PyTorch's keyword arguments). Running stats are [C] tensors.
struct InstanceNormOptions {
  Tensor running_mean{}, running_var{}, weight{}, bias{};
  bool use_input_stats = true;
  double momentum = 0.1;
  double eps = 1e-5;
};
/// Instance normalisation: x [N, C, *] with at least one spatial dim; each (sample, channel)
/// plane is normalised over its spatial positions (use_input_stats), or with the running
/// statistics. With use_input_stats and running stats given, these are updated in place:
/// running = (1 - momentum) * running + momentum * (batch average of the per-instance mean /
/// unbiased variance). weight/bias [C] scale and shift per channel.
Tensor instance_norm(const Tensor& x, const InstanceNormOptions& options = {});

/// Options of batch_norm (PyTorch's keyword arguments). weight and bias are [C].
struct BatchNormOptions {
  Tensor weight{}, bias{};
  bool training = false;
  double momentum = 0.1;
  double eps = 1e-5;
};
/// Batch normalisation: x [N, C, *] normalised per channel. In training the statistics are the
/// mean and biased variance over N and the spatial dims, and running_mean / running_var ([C],
/// optional) are updated IN PLACE with momentum (the variance unbiased, as PyTorch). In
/// evaluation the running stats (required) are used. Same shape and dtype as x.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormOptions& options = {});

/// Local response normalisation across channels: x [N, C, *] (3-d or more),
/// y = x / (k + alpha / size * sum of x^2 over the `size` neighbouring channels)^beta, the window
/// centred as PyTorch's (size/2 before, (size-1)/2 after, zero-padded).
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);

/// x / max(||x||_p along dim, eps), the norm broadcast along dim. Same shape as x.
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

}  // namespace kiln::nn::functional
