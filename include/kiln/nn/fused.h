// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Module chains with a fused inference form: a convolution, optionally a batch norm, then a
// residual add and an activation (conv_act, conv_bn).
#include "kiln/nn/functional/pool.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/norm_layers.h"

namespace kiln::nn {

/// What conv_act and conv_bn apply after the convolution (and batch norm): a residual add,
/// then an activation, then a max pool.
struct FusedConvOptions {
  Tensor residual{};  ///< added before the activation (undefined: none)
  enum class Act { None, Relu, Clamp } act = Act::None;
  double min = 0, max = 0;  ///< Clamp's bounds (kiln::clamp's rules: min > max gives max)
  /// A max pool of the result (2-d convolutions; empty: none), as functional::max_pool2d(y,
  /// pool_kernel_size, pool). Fused in inference with dilation 1, floor mode and no residual.
  functional::IntList pool_kernel_size = Dims{};
  functional::MaxPoolOptions pool = {};
};

/// pool(act(conv(x) + residual)): x [N, C, *sp] -> [N, O, *out] (pooled), the same result as the
/// module and ops one after the other, which is what runs while gradients are recorded. Without
/// gradients (inference) it is one convolution that adds the residual and applies the activation
/// (and the pool) to its output while that is in the cache: bitwise the separate result, without
/// the passes over memory and the dispatch of the other ops. The residual must then have the
/// output's shape, dtype and device (else the separate ops run, and broadcast). A max pool needs
/// a 2-d convolution (kiln::Error otherwise).
Tensor conv_act(const Conv1d& conv, const Tensor& x, const FusedConvOptions& options = {});
Tensor conv_act(const Conv2d& conv, const Tensor& x, const FusedConvOptions& options = {});
Tensor conv_act(const Conv3d& conv, const Tensor& x, const FusedConvOptions& options = {});

/// act(bn(conv(x)) + residual), as conv_act with a batch norm after the convolution: in eval
/// mode without gradients the convolution also applies the batch norm's kept per-channel scale
/// and shift (BatchNormBase::eval_affine), each step rounded as the separate op; in training,
/// or while gradients are recorded, the modules and ops run one after the other.
Tensor conv_bn(const Conv1d& conv, const BatchNorm1d& bn, const Tensor& x, const FusedConvOptions& options = {});
Tensor conv_bn(const Conv2d& conv, const BatchNorm2d& bn, const Tensor& x, const FusedConvOptions& options = {});
Tensor conv_bn(const Conv3d& conv, const BatchNorm3d& bn, const Tensor& x, const FusedConvOptions& options = {});

}  // namespace kiln::nn
