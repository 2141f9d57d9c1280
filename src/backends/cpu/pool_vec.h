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

/// Values only, in max_pool_values' order (each tap's maximum over the window rows first, then
/// over the taps, so NaN and signed-zero winners match it): same arguments and return.
bool max_pool_interior_values_f32(const float* const* rows, int kh, int kw, int64_t n, float* y);

}  // namespace kiln::cpu::vec
