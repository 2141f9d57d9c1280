// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Convolutions: conv1d/2d/3d, conv_transpose1d/2d/3d, unfold, fold, and the convolution
// gradients of torch.nn.grad (conv*_input, conv*_weight).
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kiln/nn/functional/common.h"
#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// Padding of a convolution: an int (every spatial dim), one int per spatial dim, or the
/// string "same" (output size = input size; stride must be 1; odd total padding puts the extra
/// element on the right, as PyTorch) or "valid" (no padding).
class Padding {
 public:
  enum class Mode : uint8_t { Explicit, Same, Valid };
  template <std::integral I>
  Padding(I v) : values_(static_cast<int64_t>(v)) {}  // NOLINT(google-explicit-constructor)
  Padding(std::initializer_list<int64_t> v) : values_(v) {}
  Padding(Dims v) : values_(std::move(v)) {}     // NOLINT(google-explicit-constructor)
  Padding(IntList v) : values_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  /// "same" or "valid"; anything else throws kiln::Error when the convolution runs.
  Padding(const char* mode) : values_(0), text_(mode) {}             // NOLINT(google-explicit-constructor)
  Padding(std::string mode) : values_(0), text_(std::move(mode)) {}  // NOLINT(google-explicit-constructor)
  /// The mode; throws kiln::Error naming `op` for an unknown string.
  Mode mode(const char* op) const;
  const IntList& values() const { return values_; }
  const std::string& text() const { return text_; }

 private:
  IntList values_;
  std::string text_;
};

/// Options of conv1d/2d/3d (PyTorch's keyword arguments).
struct ConvOptions {
  IntList stride = 1;
  Padding padding = 0;
  IntList dilation = 1;
  int64_t groups = 1;
};

/// Convolution over 1, 2 or 3 spatial dims (cross-correlation, as PyTorch).
/// input [N, C, *sp] or unbatched [C, *sp]; weight [O, C/groups, *k]; bias [O] or undefined.
/// Result [N, O, *out] (or [O, *out]), out = (sp + 2*pad - dilation*(k-1) - 1) / stride + 1.
/// Float dtypes only; input, weight and bias share one dtype.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const ConvOptions& options = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const ConvOptions& options = {});
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const ConvOptions& options = {});

/// Options of conv_transpose1d/2d/3d (PyTorch's argument order: stride, padding,
/// output_padding, groups, dilation).
struct ConvTransposeOptions {
  IntList stride = 1;
  IntList padding = 0;
  IntList output_padding = 0;
  int64_t groups = 1;
  IntList dilation = 1;
};

/// Transposed convolution (the gradient of conv with respect to its input).
/// input [N, C, *sp] or [C, *sp]; weight [C, O/groups, *k]; bias [O] or undefined.
/// Result [N, O, *out], out = (sp-1)*stride - 2*pad + dilation*(k-1) + output_padding + 1.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const ConvTransposeOptions& options = {});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const ConvTransposeOptions& options = {});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const ConvTransposeOptions& options = {});

/// Extracts sliding blocks (im2col): input [N, C, H, W] or [C, H, W] -> [N, C*kh*kw, L]
/// (or [C*kh*kw, L]), L = number of block positions. Any dtype.
Tensor unfold(const Tensor& input, IntList kernel_size, IntList dilation = 1, IntList padding = 0, IntList stride = 1);
/// Sums sliding blocks back into an image (col2im), the adjoint of unfold:
/// input [N, C*kh*kw, L] or [C*kh*kw, L] -> [N, C, output_size...] (or [C, ...]).
Tensor fold(const Tensor& input, IntList output_size, IntList kernel_size, IntList dilation = 1, IntList padding = 0,
            IntList stride = 1);

}  // namespace kiln::nn::functional

namespace kiln::nn::grad {

/// Options of the convolution gradients (explicit padding only, as torch.nn.grad).
struct ConvGradOptions {
  functional::IntList stride = 1;
  functional::IntList padding = 0;
  functional::IntList dilation = 1;
  int64_t groups = 1;
};

/// Gradient of conv{1,2,3}d with respect to its input: input_size is the full input shape
/// [N, C, *sp]; weight [O, C/groups, *k]; grad_output [N, O, *out] -> [N, C, *sp].
Tensor conv1d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output,
                    const ConvGradOptions& options = {});
Tensor conv2d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output,
                    const ConvGradOptions& options = {});
Tensor conv3d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output,
                    const ConvGradOptions& options = {});
/// Gradient of conv{1,2,3}d with respect to its weight: input [N, C, *sp]; weight_size the
/// full weight shape [O, C/groups, *k]; grad_output [N, O, *out] -> weight_size.
Tensor conv1d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output,
                     const ConvGradOptions& options = {});
Tensor conv2d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output,
                     const ConvGradOptions& options = {});
Tensor conv3d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output,
                     const ConvGradOptions& options = {});

}  // namespace kiln::nn::grad
