// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers shared by the loss files (loss.cpp, loss_ctc.cpp).
#include <string>

#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::nn::functional::detail_loss {

/// Throws unless reduction is "none", "mean" or "sum".
inline void check_reduction(const char* op, const std::string& reduction) {
  KILN_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum", op,
             op << " reduction must be 'none', 'mean' or 'sum', got '" << reduction << "'");
}

/// Applies a validated reduction (the mean of an empty tensor is NaN, as PyTorch).
inline Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.sum();
  return loss.mean();
}

/// "[2, 3]", or "undefined".
inline std::string shape_str(const Tensor& t) { return t.defined() ? to_string(t.shape()) : std::string("undefined"); }

}  // namespace kiln::nn::functional::detail_loss
