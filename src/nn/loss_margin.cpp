// SPDX-License-Identifier: MIT OR Apache-2.0
// The soft-margin, multi-margin and Gaussian negative log-likelihood losses
// (kiln/nn/loss.h), with PyTorch's semantics, written with differentiable tensor ops.
#include <cmath>

#include "kiln/error.h"
#include "kiln/nn/functional/activation.h"
#include "kiln/nn/loss.h"
#include "kiln/ops.h"
#include "loss_util.h"

namespace kiln::nn::functional {

using detail_loss::check_reduction;
using detail_loss::reduce;
using detail_loss::shape_str;

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const char* op = "soft_margin_loss";
  check_reduction(op, reduction);
  KILN_CHECK(input.defined() && target.defined(), op, "expects defined input and target");
  broadcast_shapes(input.shape(), target.shape(), op);
  return reduce(softplus(-target * input, 1.0, 20.0), reduction);  // log(1 + exp(-y x)), stable
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   const std::string& reduction) {
  const char* op = "multilabel_soft_margin_loss";
  check_reduction(op, reduction);
  KILN_CHECK(
      input.defined() && target.defined() && input.dim() >= 1 && input.dim() <= 2 && input.shape() == target.shape(),
      op,
      "expects input and target of one shape [N, C] or [C], got input " << shape_str(input) << ", target "
                                                                        << shape_str(target));
  Tensor loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input));
  if (weight.defined()) loss = loss * weight;
  return reduce(loss.mean({-1}), reduction);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const MultiMarginLossOptions& o) {
  const char* op = "multi_margin_loss";
  check_reduction(op, o.reduction);
  KILN_CHECK(o.p == 1 || o.p == 2, op, "only p == 1 and p == 2 supported, got p = " << o.p);
  KILN_CHECK(input.defined() && target.defined() && (input.dim() == 2 || input.dim() == 1) &&
                 target.dim() == input.dim() - 1 && (input.dim() == 1 || target.size(0) == input.size(0)),
             op,
             "expects input [N, C] with target [N] (or [C] with a 0-d target), got input "
                 << shape_str(input) << ", target " << shape_str(target));
  KILN_CHECK(!is_floating(target.dtype()) && target.dtype() != DType::Bool, op,
             "expects integer class indices, got a " << dtype_name(target.dtype()) << " target");
  const Tensor x = input.dim() == 1 ? input.unsqueeze(0) : input;
  const Tensor y = (input.dim() == 1 ? target.unsqueeze(0) : target).to(DType::I64).unsqueeze(1);  // [N, 1]
  const int64_t c = x.size(1);
  KILN_CHECK(c > 0 || x.size(0) == 0, op, "expects at least one class, got input " << shape_str(input));
  if (target.numel() > 0 && !target.device().is_null())
    KILN_CHECK((y >= 0).all().item<bool>() && (y < c).all().item<bool>(), op,
               "target out of range [0, " << c << ") for input " << shape_str(input));
  const Tensor xy = x.gather(1, y);              // [N, 1] the target's score
  Tensor m = clamp_min(x - xy + o.margin, 0.0);  // [N, C]
  if (o.p == 2) m = m * m;
  m = where(arange(c, DType::I64, x.device()) == y, 0.0, m);  // i != y only
  if (o.weight.defined()) m = m * o.weight.gather(0, y.squeeze({1})).unsqueeze(1);
  Tensor loss = m.sum({1}) / static_cast<double>(c);
  if (input.dim() == 1) loss = loss.squeeze({0});
  return reduce(loss, o.reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& o) {
  const char* op = "gaussian_nll_loss";
  check_reduction(op, o.reduction);
  KILN_CHECK(input.defined() && target.defined() && var.defined(), op, "expects defined input, target and var");
  Tensor v = var;
  // var: input's shape, or with its last dim 1 or missing (one variance per row).
  if (v.shape() != input.shape()) {
    Shape without_last(input.shape().begin(), input.shape().end() - (input.dim() > 0 ? 1 : 0));
    if (input.dim() > 0 && v.shape() == without_last) {
      v = v.unsqueeze(-1);
    } else {
      Shape last_one = input.shape();
      if (!last_one.empty()) last_one.back() = 1;
      KILN_CHECK(input.dim() > 0 && v.shape() == last_one, op,
                 "var of shape " << shape_str(var) << " does not fit input " << shape_str(input)
                                 << " (the same shape, or with its last dim 1 or without it)");
    }
  }
  broadcast_shapes(input.shape(), target.shape(), op);
  KILN_CHECK(o.eps > 0, op, "eps must be positive, got " << o.eps);
  if (v.numel() > 0 && !v.device().is_null())
    KILN_CHECK(!(v < 0).any().item<bool>(), op, "var " << shape_str(var) << " has negative entries");
  // The clamp changes values only: the gradient flows to var as if unclamped (PyTorch clamps
  // under no_grad).
  const Tensor vd = v.detach();
  v = v + (clamp_min(vd, o.eps) - vd);
  Tensor loss = (log(v) + square(input - target) / v) * 0.5;
  if (o.full) loss = loss + 0.5 * std::log(2 * M_PI);
  return reduce(loss, o.reduction);
}

}  // namespace kiln::nn::functional
