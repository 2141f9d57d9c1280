// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Vectorised (Highway, runtime-dispatched) paths for contiguous f32 rows. Each returns false
// when it has no fast path for the op, and the caller falls back to scalar code.
#include <cstdint>

#include "ir/op.h"

namespace kiln::cpu::vec {

bool unary_f32(const ir::Op& op, const float* in, float* out, int64_t n);
/// out = exp(in) for n contiguous floats (in may equal out); false without SIMD.
bool exp_f32(const float* in, float* out, int64_t n);
/// a, b: row pointers; sa, sb: 1 (contiguous) or 0 (broadcast scalar).
bool binary_f32(ir::OpKind kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n);

/// Sum of n contiguous floats (a fixed lane/accumulator layout: deterministic for a target).
float sum_f32(const float* q, int64_t n);
/// Max (or min) of n >= 1 contiguous floats; NaN if any element is NaN.
float extreme_f32(const float* q, int64_t n, bool is_max);

/// Softmax (or log-softmax) of one contiguous row of n >= 1 floats, x -> y (may alias).
void softmax_f32(const float* x, float* y, int64_t n, bool log);

}  // namespace kiln::cpu::vec
