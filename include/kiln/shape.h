// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
#include <cstdint>
#include <string>

#include "kiln/small_vector.h"

namespace kiln {

/// Sizes of a tensor's dimensions, outermost first. Rank is dynamic; up to 6 dims stay inline.
using Shape = SmallVec<int64_t, 6>;
/// Element strides, one per dimension (may be 0 for broadcast views, or negative after flip).
using Strides = SmallVec<int64_t, 6>;
/// A list of dimension indices; negative values count from the end.
using Dims = SmallVec<int64_t, 6>;

/// Product of the sizes (1 for a 0-d shape).
int64_t shape_numel(const Shape& s);
/// Row-major strides of a contiguous tensor of shape s.
Strides contiguous_strides(const Shape& s);
/// "[2, 3, 4]".
std::string to_string(const Shape& s);
/// Broadcasts two shapes (NumPy rules); throws kiln::Error naming op on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Wraps a possibly negative dim into [0, rank); throws kiln::Error naming op when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

}  // namespace kiln
