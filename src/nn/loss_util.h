// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers shared by the loss files (loss.cpp, loss_ctc.cpp, loss_rnnt.cpp).
#include <cstdint>
#include <string>
#include <vector>

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

/// The log of zero for the alignment recursions (Note [CTC with finite log-zero] in loss_ctc.cpp).
constexpr double kLogZero = -1e30;

/// log(exp(a) + exp(b) [+ exp(c)]) with the maximum detached (it cancels out of the gradient).
inline Tensor lse(const Tensor& a, const Tensor& b, const Tensor& c = {}) {
  Tensor m = maximum(a, b);
  if (c.defined()) m = maximum(m, c);
  m = m.detach();
  Tensor s = exp(a - m) + exp(b - m);
  if (c.defined()) s = s + exp(c - m);
  return m + log(s);
}

/// "[2, 3]", or "undefined".
inline std::string shape_str(const Tensor& t) { return t.defined() ? to_string(t.shape()) : std::string("undefined"); }

/// The values of a 0-d or 1-d integer tensor of lengths (`what`, in op's errors).
inline std::vector<int64_t> lengths_of(const char* op, const char* what, const Tensor& t) {
  KILN_CHECK(t.defined() && t.dim() <= 1 && !t.is_floating_point(), op,
             op << " expects " << what << " as a 0-d or 1-d integer tensor, got "
                << (t.defined() ? to_string(t.dtype()) + " " + shape_str(t) : "undefined"));
  return t.to(i64).reshape({-1}).to_vector<int64_t>();
}

}  // namespace kiln::nn::functional::detail_loss
