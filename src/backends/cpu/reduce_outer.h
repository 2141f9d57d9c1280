// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Sum and Mean over the leading rows of a contiguous [rows, width] value, in two steps that give
// the bits of the Sum / Mean kernels (reduce.cpp, Note [Reduction order], outer layout): leaves
// of kRowLeaf rows, then the kernel's pairwise tree over the leaves. The fusion decorator's row
// pipelines compute the leaves block by block, while the rows are in the cache.
#include <cstdint>

#include "ir/op.h"

namespace kiln::cpu::outer {

/// Rows per leaf: blocks of rows that start at a multiple of it hold whole leaves.
int64_t leaf_rows();
/// Whether op (Sum or Mean, f32 or f64) reduces exactly the leading dims of a contiguous input
/// with the outer layout (at least 2 rows, at least 4 kept elements per row); rows and width
/// are then the reduced and kept element counts.
bool supports(const ir::Op& op, int64_t& rows, int64_t& width);
/// The partial sums of leaves [r0 / leaf_rows(), ceil(r1 / leaf_rows())) of x (rows r0..r1 of
/// [rows, width], r0 a multiple of leaf_rows(), r1 one too or the last row) into
/// partial[leaf * width], in x's dtype.
void leaves(DType t, const void* x, int64_t width, int64_t r0, int64_t r1, void* partial);
/// out[c] (width values) = the tree of the leaves of `rows` rows in partial, divided by rows for
/// a Mean: what the kernel computes.
void finish(DType t, bool mean, int64_t rows, int64_t width, const void* partial, void* out);

}  // namespace kiln::cpu::outer
