// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Sum and Mean of every element of a contiguous f32 value, in two steps that give the bits of the
// Sum / Mean kernels (reduce.cpp, Note [Reduction order], inner layout): leaves of leaf_elems()
// consecutive elements, then the kernel's pairwise tree over the leaves. The fusion decorator
// computes the leaves tile by tile while a fused chain's values are in the cache, so a full
// reduction of any length ends the chain without its result going through memory.
#include <cstdint>

#include "ir/op.h"

namespace kiln::cpu::full {

/// Elements per leaf: ranges that start at a multiple of it hold whole leaves.
int64_t leaf_elems();
/// Whether op is a Sum or Mean of every dim of a contiguous f32 input into f32, long enough
/// (n elements) that the kernel reduces it by leaves.
bool supports(const ir::Op& op, int64_t& n);
/// partial[li] for the leaves li of elements [e0, e1) (e0 a multiple of leaf_elems(), e1 one
/// too or the last element); x points at element e0.
void leaves(const float* x, int64_t e0, int64_t e1, float* partial);
/// The kernel's result from the partials of the leaves of n elements (divided by n for a Mean).
float finish(bool mean, int64_t n, const float* partial);

}  // namespace kiln::cpu::full
