// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Pooling, interpolation, grid sampling and pixel shuffle (PyTorch's torch.nn.functional
// names and semantics). Pooling inputs are [N, C, *spatial] or unbatched [C, *spatial] with
// 1, 2 or 3 spatial dims; results keep the batching of the input.
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/nn/functional/common.h"
#include "kiln/tensor.h"

namespace kiln::nn::functional {

// ---- max / avg pooling ----------------------------------------------------------------------

/// Options of max_pool1d/2d/3d; kernel_size is a separate argument.
struct MaxPoolOptions {
  IntList stride = Dims{};  ///< empty (the default): kernel_size
  IntList padding = 0;      ///< implicit -inf padding on both sides; at most kernel_size / 2
  IntList dilation = 1;     ///< spacing of the window's taps
  bool ceil_mode = false;   ///< ceil instead of floor for the output size (the last window
                            ///< must start inside the input or its left padding)
};

/// Max over sliding windows: x [N, C, L] or [C, L] -> [N, C, L_out]; float or integer dtypes.
/// L_out = floor((L + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1 (ceil with
/// ceil_mode). A NaN in a window wins.
Tensor max_pool1d(const Tensor& x, IntList kernel_size, const MaxPoolOptions& options = {});
/// x [N, C, H, W] or [C, H, W] -> [N, C, H_out, W_out].
Tensor max_pool2d(const Tensor& x, IntList kernel_size, const MaxPoolOptions& options = {});
/// x [N, C, D, H, W] or [C, D, H, W] -> [N, C, D_out, H_out, W_out].
Tensor max_pool3d(const Tensor& x, IntList kernel_size, const MaxPoolOptions& options = {});
/// The max pools with PyTorch's return_indices: (values, i64 indices of the same shape). An
/// index is the position of the max in the flattened spatial dims of its (n, c) plane.
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, IntList kernel_size,
                                                  const MaxPoolOptions& options = {});
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size,
                                                  const MaxPoolOptions& options = {});
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, IntList kernel_size,
                                                  const MaxPoolOptions& options = {});

/// Options of avg_pool1d/2d/3d; kernel_size is a separate argument.
struct AvgPoolOptions {
  IntList stride = Dims{};  ///< empty (the default): kernel_size
  IntList padding = 0;      ///< implicit zero padding on both sides; at most kernel_size / 2
  bool ceil_mode = false;
  bool count_include_pad = true;              ///< padded zeros count in the divisor
  std::optional<int64_t> divisor_override{};  ///< divide by this instead of the window size
};

/// Mean over sliding windows: x [N, C, L] or [C, L] -> [N, C, L_out] (output size as
/// max_pool1d without dilation); float dtypes or i64 (integer division, as PyTorch).
Tensor avg_pool1d(const Tensor& x, IntList kernel_size, const AvgPoolOptions& options = {});
/// x [N, C, H, W] or [C, H, W] -> [N, C, H_out, W_out].
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, const AvgPoolOptions& options = {});
/// x [N, C, D, H, W] or [C, D, H, W] -> [N, C, D_out, H_out, W_out].
Tensor avg_pool3d(const Tensor& x, IntList kernel_size, const AvgPoolOptions& options = {});

// ---- adaptive pooling -------------------------------------------------------------------------

/// Output size of the adaptive pools and interpolate: one size for every spatial dim, or one
/// per dim where std::nullopt keeps the input's size (PyTorch's None): `{std::nullopt, 7}`.
class OutputSize {
 public:
  OutputSize(int64_t v) : v_{v} {}  // NOLINT(google-explicit-constructor): 7 means (7, 7)
  OutputSize(std::initializer_list<std::optional<int64_t>> v) : v_(v) {}
  OutputSize(const Dims& v) : v_(v.begin(), v.end()) {}  // NOLINT(google-explicit-constructor)
  explicit OutputSize(std::vector<std::optional<int64_t>> v) : v_(std::move(v)) {}
  /// The sizes as given (one entry, or one per spatial dim; nullopt keeps the input's size).
  const std::vector<std::optional<int64_t>>& values() const { return v_; }
  /// The sizes for the trailing n dims of `in`; throws kiln::Error naming `op` when the list
  /// has neither 1 nor n entries or a size is negative.
  Dims resolve(const Shape& in, int64_t n, const char* op) const;

 private:
  std::vector<std::optional<int64_t>> v_;
};

/// Mean over adaptive windows: x [N, C, L] or [C, L] -> [N, C, out]; window i covers
/// [floor(i * L / out), ceil((i + 1) * L / out)). Float dtypes.
Tensor adaptive_avg_pool1d(const Tensor& x, OutputSize output_size);
/// x [N, C, H, W] or [C, H, W] -> [N, C, oh, ow].
Tensor adaptive_avg_pool2d(const Tensor& x, OutputSize output_size);
/// x [N, C, D, H, W] or [C, D, H, W] -> [N, C, od, oh, ow].
Tensor adaptive_avg_pool3d(const Tensor& x, OutputSize output_size);
/// Max over the same adaptive windows (float dtypes; a NaN wins).
Tensor adaptive_max_pool1d(const Tensor& x, OutputSize output_size);
Tensor adaptive_max_pool2d(const Tensor& x, OutputSize output_size);
Tensor adaptive_max_pool3d(const Tensor& x, OutputSize output_size);
/// (values, i64 indices into each plane's flattened spatial dims), as return_indices=True.
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, OutputSize output_size);
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, OutputSize output_size);
std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, OutputSize output_size);

// ---- max unpooling ------------------------------------------------------------------------------

/// Options of max_unpool1d/2d/3d.
struct MaxUnpoolOptions {
  IntList stride = Dims{};  ///< empty (the default): kernel_size
  IntList padding = 0;
  /// Spatial output size (or the full [N, C, *spatial] size); empty (the default):
  /// (in - 1) * stride - 2 * padding + kernel_size. A given size must lie strictly within
  /// stride of that.
  Shape output_size = {};
};
/// The partial inverse of max pooling: x and i64 indices [N, C, *in] (or [C, *in], as
/// returned by max_poolNd_with_indices) -> [N, C, *out], zero except out[n, c][indices] = x.
/// Float dtypes. Throws for an index outside the output plane.
Tensor max_unpool1d(const Tensor& x, const Tensor& indices, IntList kernel_size, const MaxUnpoolOptions& options = {});
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, IntList kernel_size, const MaxUnpoolOptions& options = {});
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, IntList kernel_size, const MaxUnpoolOptions& options = {});

// ---- interpolation ----------------------------------------------------------------------------

/// Scale factors of interpolate: one for every spatial dim, or one per dim.
class ScaleList {
 public:
  ScaleList(double v) : v_{v} {}  // NOLINT(google-explicit-constructor): 2.0 means (2.0, 2.0)
  ScaleList(std::initializer_list<double> v) : v_(v) {}
  ScaleList(std::vector<double> v) : v_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  const std::vector<double>& values() const { return v_; }

 private:
  std::vector<double> v_;
};

/// Options of interpolate: exactly one of size and scale_factor:
/// `interpolate(x, {.size = {64, 64}, .mode = "bilinear"})`, `interpolate(x, {.scale_factor = 2.0})`.
struct InterpolateOptions {
  IntList size = Dims{};                           ///< output spatial size (empty: not given)
  ScaleList scale_factor = std::vector<double>{};  ///< output size = floor(input size * scale) (empty: not given)
  /// "nearest", "nearest-exact", "linear" (3-d input), "bilinear" (4-d), "bicubic" (4-d),
  /// "trilinear" (5-d) or "area" (adaptive average pooling).
  std::string mode = "nearest";
  /// Linear modes: map corner pixel centres onto each other (default false).
  std::optional<bool> align_corners{};
  /// With scale_factor: recompute the scale from the integer output size instead of using
  /// scale_factor in the coordinate mapping (PyTorch's flag).
  std::optional<bool> recompute_scale_factor{};
};
/// Resizes x [N, C, *spatial] (1 to 3 spatial dims) with PyTorch's coordinate rules:
/// nearest picks floor(dst * scale), nearest-exact floor((dst + 0.5) * scale), linear modes
/// interpolate between neighbours (align_corners selects the mapping), bicubic uses the cubic
/// convolution with A = -0.75 and clamped borders, area averages adaptive windows. Float
/// dtypes (nearest modes also take integers). Built from index_select and weighted sums.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

/// Options of grid_sample.
struct GridSampleOptions {
  std::string mode = "bilinear";       ///< "bilinear", "nearest" or "bicubic" (4-d only)
  std::string padding_mode = "zeros";  ///< "zeros", "border" or "reflection"
  bool align_corners = false;          ///< -1 and 1 are the centres (true) or edges of the corner pixels
};
/// Samples x [N, C, H, W] at grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo], or x [N, C, D, H, W] at
/// grid [N, Do, Ho, Wo, 3] -> [N, C, Do, Ho, Wo] (bilinear means trilinear there). Grid values
/// are (x, y[, z]) normalised to [-1, 1]. Float dtypes; grid has x's dtype.
Tensor grid_sample(const Tensor& x, const Tensor& grid, const GridSampleOptions& options = {});
/// Sampling grid of the affine maps theta [N, 2, 3] for size = {N, C, H, W} -> [N, H, W, 2],
/// or theta [N, 3, 4] for size = {N, C, D, H, W} -> [N, D, H, W, 3]. Float dtypes.
Tensor affine_grid(const Tensor& theta, const Shape& size, bool align_corners = false);

/// Rearranges x [*, C * r^2, H, W] -> [*, C, H * r, W * r] (r = upscale_factor).
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
/// The inverse: x [*, C, H * r, W * r] -> [*, C * r^2, H, W].
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

}  // namespace kiln::nn::functional
