// SPDX-License-Identifier: MIT OR Apache-2.0
// Row kernels of kiln::vision's host fast paths (image_host.cpp): each computes one output row
// of n elements from k input rows given as pointers (the callers shift the pointers to express
// horizontal taps), with Highway SIMD chosen at run time (scalar loops without Highway).
// `dst` never aliases an input row.
#pragma once

#include <cstdint>

namespace kiln::vision::detail {

/// dst[x] = min (or max) over i < k of src[i][x]; k >= 1.
void minmax_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max);
void minmax_rows(float* dst, const float* const* src, int k, int64_t n, bool max);

/// dst[x] = bias + sum over i < k of w[i] * src[i][x], accumulated in f32 in the order of i.
void dot_rows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n);
/// The same over u8 rows (each value converted to f32).
void dot_rows(float* dst, const uint8_t* const* src, const float* w, int k, float bias, int64_t n);

/// dst[x] = src[x] rounded half to even and saturated to [0, 255].
void f32_to_u8(uint8_t* dst, const float* src, int64_t n);

/// dst[x] = (4899 r[x] + 9617 g[x] + 1868 b[x] + 2^13) >> 14 (OpenCV's RGB to grey in u8).
void gray_u8(uint8_t* dst, const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n);

/// dst[x] = the median of src[i][x] over i < k, k = 1, 9, 25 or 49 (square windows of 1 to 7),
/// by a selection network.
void median_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n);
void median_rows(float* dst, const float* const* src, int k, int64_t n);

/// lo and hi = the least and greatest of v[0..n), n >= 1.
void minmax_f32(const float* v, int64_t n, float& lo, float& hi);

/// One row of the bilateral filter over c = 1 or 3 planes: for each x < n, with the k taps
/// pixels src[i * c + ch][x] (i < k) and the centre pixels centre[ch][x], each tap weighs
/// sw[i] * colour(sum over ch of |src - centre|) and dst[ch][x] is the weighted mean (u8: rounded
/// half to even). u8: colour(d) = lut[d]; f32: lut read at d * scale with linear interpolation,
/// the index clamped to bins (lut holds bins + 2 values). Taps are summed in the order of i.
void bilateral_row(uint8_t* const* dst, const uint8_t* const* src, const uint8_t* const* centre, int c, const float* sw,
                   int k, const float* lut, int64_t n);
void bilateral_row(float* const* dst, const float* const* src, const float* const* centre, int c, const float* sw,
                   int k, const float* lut, float scale, int bins, int64_t n);

}  // namespace kiln::vision::detail
