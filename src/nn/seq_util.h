// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal helpers of the sequence layers (recurrent.cpp, transformer.cpp).
#include <string>

#include "kiln/ops.h"

namespace kiln::nn::detail {

inline std::string shape_str(const Tensor& x) { return x.defined() ? to_string(x.shape()) : std::string("undefined"); }

/// Inverted dropout: zeroes elements with probability p and scales the rest by 1 / (1 - p);
/// identity when !training or p == 0.
inline Tensor dropout(const Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (p >= 1.0) return x * 0.0;
  Tensor keep = bernoulli(full_like(x.detach(), 1.0 - p));
  return x * keep * (1.0 / (1.0 - p));
}

}  // namespace kiln::nn::detail
