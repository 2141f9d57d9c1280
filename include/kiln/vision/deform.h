// SPDX-License-Identifier: MIT OR Apache-2.0
// Deformable convolution (torchvision.ops.deform_conv2d): each kernel tap reads the input at its
// regular position plus a learned offset, by bilinear interpolation (zero outside the input),
// optionally scaled by a modulation mask (DCNv2). Built from tensor ops, so it runs on every
// device and is differentiable with respect to the input, offset, mask, weight and bias.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::vision {

/// A pair of sizes (height, width) for stride, padding and dilation.
struct Hw {
  int64_t height = 1;
  int64_t width = 1;
};

/// Options of deform_conv2d (torchvision's defaults).
struct DeformConvOptions {
  Hw stride{1, 1};
  Hw padding{0, 0};
  Hw dilation{1, 1};
};

/// input [B, Cin, H, W], offset [B, 2 * G * kh * kw, oh, ow], weight [Cout, Cin / groups, kh, kw]
/// -> [B, Cout, oh, ow] with oh = (H + 2 ph - dh (kh - 1) - 1) / sh + 1 (ow likewise). The
/// weight groups are Cin / weight.size(1); the G offset groups each move the taps of Cin / G
/// consecutive input channels. Offset channel (g * kh * kw + k) * 2 holds the y and the next the
/// x displacement of tap k = i * kw + j. mask (optional) [B, G * kh * kw, oh, ow] scales each
/// sample; bias (optional) [Cout]. Float dtypes, one device.
Tensor deform_conv2d(const Tensor& input, const Tensor& offset, const Tensor& weight, const Tensor& bias = {},
                     const DeformConvOptions& options = {}, const Tensor& mask = {});

}  // namespace kiln::vision
