// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// SIMD kernel of max pooling's fast path (pool_hwy.cpp; Note [Max pool fast path] in pool.cpp).
#include <cstdint>

namespace kiln::cpu::vec {

/// Max pool with indices over the n interior columns of one f32 output row: width stride 2,
/// kernel kh x kw (kh in 1..3, kw in 2..3). rows[j] points at window row j's first tap of
/// column 0 (all taps of all n columns lie inside the row), rb[j] is that element's flattened
/// index in the plane. Writes y[0..n) and yi[0..n) bitwise as the scalar loop (row-major taps,
/// `v > max || isnan(v)`). Returns false, writing nothing, when it does not apply (no SIMD,
/// n too small, other kernel sizes).
bool max_pool_interior_f32(const float* const* rows, const int32_t* rb, int kh, int kw, int64_t n, float* y,
                           int64_t* yi);

/// Values-only max pool of `count` whole f32 output rows, width stride 2, kernel width kw (2 or
/// 3), left padding PW, output row r at y + r * OW: its nrows[r] >= 1 window rows (each W wide,
/// in window order) are the next nrows[r] pointers of rows. Reduces each column over the rows,
/// pads with -inf, then takes the maximum of each output's kw taps in order: bitwise as
/// max_pool_values (`v > max || isnan(v)`). buf holds count * max_pool_rows_stride(W, PW, OW)
/// floats. False, writing nothing, when it does not apply.
bool max_pool_rows_values_f32(const float* const* rows, const int32_t* nrows, int64_t count, int kw, int64_t W,
                              int64_t PW, int64_t OW, float* buf, float* y);
/// Floats per output row in that buffer: the padded columns, and room for vector over-reads.
inline int64_t max_pool_rows_stride(int64_t W, int64_t PW, int64_t OW) {
  return ((2 * OW + 32 > PW + W ? 2 * OW + 32 : PW + W) + 15) / 16 * 16;
}

/// Values-only 2-d max pool of f32 planes laid out in blocks of 16 channels ([planes][H][W][16],
/// oneDNN's nChw16c), into the same layout [planes][OH][OW][16]: kernel k, stride s, symmetric
/// padding p <= k / 2 per dim (so every window holds an input pixel), dilation 1. Each channel is
/// pooled in max_pool_values' order (a column's maximum over the window rows, then the columns,
/// `v > max || isnan(v)`), so results are bitwise those of the plain layout. Only output rows
/// [oy0, oy1) of each plane (oy1 < 0: OH).
void max_pool_blocked16_f32(const float* x, int64_t planes, int64_t H, int64_t W, const int64_t* k, const int64_t* s,
                            const int64_t* p, int64_t OH, int64_t OW, float* y, int64_t oy0 = 0, int64_t oy1 = -1);

}  // namespace kiln::cpu::vec
