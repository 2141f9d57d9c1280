// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers of kiln::vision's image ops: input checks and the u8 <-> f32 round trip.
#pragma once

#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tensor.h"

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

}  // namespace kiln::vision::detail
