// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers of kiln::vision's image ops: input checks and the u8 <-> f32 round trip.
#pragma once

#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tensor.h"
#include "kiln/vision/image.h"

namespace kiln::vision::detail {

/// Checks x is a defined [N, C, H, W] image (channels == 0: any count) of f32, f64 or u8.
inline void check_image(const char* op, const Tensor& x, int64_t channels = 0) {
  KILN_CHECK(x.defined(), op, "image is undefined");
  KILN_CHECK(x.dim() == 4, op, "image [N, C, H, W] expected, got " << to_string(x.shape()));
  KILN_CHECK(channels == 0 || x.size(1) == channels, op,
             "image with " << channels << " channels expected, got " << to_string(x.shape()));
  KILN_CHECK(x.dtype() == f32 || x.dtype() == f64 || x.dtype() == u8, op,
             "f32, f64 or u8 image expected, got " << dtype_name(x.dtype()));
}

/// x as a float tensor to compute on (u8 becomes f32).
inline Tensor as_float(const Tensor& x) { return x.dtype() == u8 ? x.to(f32) : x; }

/// A float result back in the dtype of `like`: u8 rounded half to even and saturated.
inline Tensor back_to(const Tensor& y, const Tensor& like) {
  if (like.dtype() != u8) return y;
  return clamp(round(y), 0, 255).to(u8);
}

/// Where each output pixel of a warp reads the source (warp.cpp): `corners` source positions per
/// output pixel (4 for bilinear, 1 for nearest) and their weights; positions outside the image
/// read index 0 with weight 0.
struct WarpSamples {
  WarpSamples(int64_t h, int64_t w, int64_t oh, int64_t ow, bool linear);
  /// Output pixel o reads source position (sx, sy), in 1/32 pixel when linear, else in pixels.
  void put(int64_t o, int64_t sx, int64_t sy);
  /// The warped image [N, C, oh, ow] of x [N, C, h, w] (u8 rounded back), by index_select.
  Tensor gather(const Tensor& x) const;
  int64_t h, w, oh, ow;
  bool linear;
  int corners;
  std::vector<int64_t> pos;
  std::vector<double> wt;
};

/// The checks common to the warps: x an image, m [rows, 3], a known interpolation, dsize >= 0.
void check_warp(const char* op, const Tensor& x, const Tensor& m, int64_t rows, const std::string& interpolation,
                ImageSize dsize);

}  // namespace kiln::vision::detail
