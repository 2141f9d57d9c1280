// SPDX-License-Identifier: MIT OR Apache-2.0
// Host fast paths of kiln::vision's image ops (image_host.cpp): CPU tensors of f32 or u8 that
// need no gradient, computed plane by plane over rings of padded rows with the SIMD row kernels
// of image_simd.h. The tensor-op forms stay for gradients, f64 and other devices.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::vision::detail {

/// Whether x takes the host fast path: a CPU tensor of f32 or u8 that does not require grad.
bool host_fast(const Tensor& x);

/// Erosion (dilate false) or dilation of x [N, C, H, W] by the element cells [kh * kw]
/// (nonzero = in; anchored at the centre; outside the image ignored), `iterations` times; same
/// dtype as x.
Tensor morph_host(const Tensor& x, const std::vector<uint8_t>& cells, int64_t kh, int64_t kw, bool dilate,
                  int64_t iterations);

/// x correlated with kx along W and ky along H (odd sizes), borders as BORDER_REFLECT_101,
/// times scale plus delta, accumulated in f32; the result in `out` (f32, or u8 rounded half to
/// even and saturated).
Tensor separable_host(const Tensor& x, const std::vector<double>& kx, const std::vector<double>& ky, DType out,
                      double scale = 1, double delta = 0);
/// The same with a sum of separable terms (kx, ky), such as the two of a Laplacian.
Tensor separable_host(const Tensor& x, const std::vector<std::pair<std::vector<double>, std::vector<double>>>& terms,
                      DType out, double scale = 1, double delta = 0);

/// Median of ksize x ksize windows (odd ksize <= 7), edges replicated, by a selection network.
Tensor median_host_network(const Tensor& x, int64_t ksize);
/// The same for u8 x and any odd ksize by a sliding histogram (Huang's algorithm).
Tensor median_host_histogram(const Tensor& x, int64_t ksize);

/// Y = 0.299 R + 0.587 G + 0.114 B of x [N, 3, H, W] (u8: OpenCV's fixed point).
Tensor gray_host(const Tensor& x);

}  // namespace kiln::vision::detail
