// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal: batch norm in eval mode as a per-channel affine map (src/ops/norm.cpp), shared by
// functional::batch_norm and the BatchNorm modules, which keep the coefficients between calls.
#include <utility>

#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// scale [C] and shift [C] of y = x * scale + shift for running statistics rm, rv [C] (any
/// shape of C elements), optional weight and bias [C], in compute dtype cd (PyTorch's formula:
/// scale = weight / sqrt(rv + eps), shift = bias - rm * scale).
std::pair<Tensor, Tensor> batch_norm_eval_coefficients(const Tensor& rm, const Tensor& rv, const Tensor& weight,
                                                       const Tensor& bias, double eps, DType cd);
/// x [N, C, *] * scale + shift, scale and shift [C] broadcast over the channel dim.
Tensor apply_channel_affine(const Tensor& x, const Tensor& scale, const Tensor& shift);

}  // namespace kiln::nn::functional
