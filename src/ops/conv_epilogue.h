// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal: a convolution with the Conv op's fused epilogue (ops.def), for callers that record
// no gradient through it (the op's gradient rule knows no epilogue): nn::conv_bn in inference.
#include <span>

#include "kiln/nn/functional/conv.h"

namespace kiln::detail {
struct PreparedOp;
}  // namespace kiln::detail

namespace kiln::nn::functional {

/// y = maxpool(act((conv(x, w) + bias) * scale[c] + shift[c] + residual)), each step rounded as
/// the separate op would be. scale and shift [O] (undefined: none), residual [N, O, *out] (undefined:
/// none), all of x's dtype and device.
struct ConvEpilogue {
  Tensor scale, shift, residual;
  int act = 0;  ///< 0 none, 1 relu, 2 clamp to [lo, hi] (lo > hi gives hi, NaN passes)
  double lo = 0, hi = 0;
  /// Then a 2-d max pool (no residual): kernel, stride, padding (<= kernel / 2) per spatial
  /// dim; dilation 1, floor mode, values only. Empty: none.
  Dims pool_kernel, pool_stride, pool_padding;
  /// Where to keep the op for the next call (Note [Prepared steps] in ops/prepared.h), with the
  /// key of what built it; null: nowhere. The op is kept only when every operand is the given
  /// tensor itself (x, weight, bias, scale, shift, residual; no contiguous copy, no padding):
  /// the slot's sources are those six, in that order.
  kiln::detail::PreparedOp* keep = nullptr;
  std::span<const int64_t> key;
};

/// conv1d/2d/3d (nsp spatial dims, batched x only) followed by the epilogue, as one op; an
/// undefined tensor when the residual does not have the output's shape (it would broadcast).
Tensor conv_with_epilogue(int64_t nsp, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const ConvOptions& options, const ConvEpilogue& epilogue);

/// conv1d/2d/3d (nsp spatial dims) as conv_nd issues it, the op kept in `keep` with `key` when
/// x, weight and bias are its operands unchanged (no contiguous copy, no padding, batched x):
/// the slot's sources are those three, in that order (Note [Prepared steps]).
Tensor conv_kept(int64_t nsp, const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options,
                 kiln::detail::PreparedOp* keep, std::span<const int64_t> key);

}  // namespace kiln::nn::functional
