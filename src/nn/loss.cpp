// SPDX-License-Identifier: MIT OR Apache-2.0
// The loss functions of kiln::nn::functional, written with public differentiable ops so that
// autodiff gives their gradients. Formulas follow PyTorch's (aten/src/ATen/native/Loss*.cpp and
// torch/nn/functional.py), including its reductions; ctc_loss is in loss_ctc.cpp.
#include "kiln/nn/loss.h"

#include <cmath>

#include "kiln/error.h"
#include "kiln/nn/functional/distance.h"
#include "kiln/ops.h"
#include "loss_util.h"

namespace kiln::nn::functional {

using detail_loss::check_reduction;
using detail_loss::reduce;
using detail_loss::shape_str;

namespace {

void check_broadcast(const char* op, const Tensor& a, const Tensor& b, const char* an = "input",
                     const char* bn = "target") {
  KILN_CHECK(a.defined() && b.defined(), op, op << " expects defined " << an << " and " << bn);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const size_t n = std::max(sa.size(), sb.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < sa.size() ? sa[sa.size() - 1 - i] : 1;
    const int64_t db = i < sb.size() ? sb[sb.size() - 1 - i] : 1;
    KILN_CHECK(da == db || da == 1 || db == 1, op,
               op << " expects " << bn << " of the " << an << "'s shape (or broadcastable to it): " << an << " "
                  << shape_str(a) << ", " << bn << " " << shape_str(b));
  }
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  KILN_CHECK(input.defined() && target.defined(), op, op << " expects defined input and target");
  KILN_CHECK(
      input.shape() == target.shape(), op,
      op << " expects target of the input's shape: input " << shape_str(input) << ", target " << shape_str(target));
}

// A float view of t (integer targets are promoted as PyTorch's binary ops do).
Tensor as_float(const Tensor& t) { return t.is_floating_point() ? t : t.to(f32); }

}  // namespace

// ---- regression losses ----------------------------------------------------------------------

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction("mse_loss", reduction);
  check_broadcast("mse_loss", input, target);
  return reduce(square(input - target), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction("l1_loss", reduction);
  check_broadcast("l1_loss", input, target);
  return reduce(abs(input - target), reduction);
}

Tensor lp_loss(const Tensor& input, const Tensor& target, double p, const std::string& reduction) {
  check_reduction("lp_loss", reduction);
  check_broadcast("lp_loss", input, target);
  KILN_CHECK(std::isfinite(p) && p > 0, "lp_loss", "lp_loss expects a finite exponent p > 0, got " << p);
  KILN_CHECK(input.is_floating_point(), "lp_loss",
             "lp_loss expects a floating input, got " << to_string(input.dtype()));
  if (p == 1) return reduce(abs(input - target), reduction);
  if (p == 2) return reduce(square(input - target), reduction);
  return reduce(abs(input - target).pow(p), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  check_reduction("smooth_l1_loss", reduction);
  check_broadcast("smooth_l1_loss", input, target);
  KILN_CHECK(beta >= 0, "smooth_l1_loss", "smooth_l1_loss does not support negative values for beta, got " << beta);
  Tensor d = abs(input - target);
  if (beta == 0) return reduce(d, reduction);
  return reduce(where(d < beta, square(d) * (0.5 / beta), d - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  check_reduction("huber_loss", reduction);
  check_broadcast("huber_loss", input, target);
  KILN_CHECK(delta > 0, "huber_loss", "huber_loss does not support non-positive values for delta, got " << delta);
  Tensor d = abs(input - target);
  return reduce(where(d < delta, square(d) * 0.5, (d - 0.5 * delta) * delta), reduction);
}

// ---- classification losses -------------------------------------------------------------------

namespace {

// Checks the target of nll_loss / cross_entropy (class indices) against input; returns the class dim.
int64_t check_class_target(const char* op, const Tensor& input, const Tensor& target) {
  KILN_CHECK(input.defined() && target.defined(), op, op << " expects defined input and target");
  KILN_CHECK(input.dim() >= 1, op, op << " expects input [C], [N, C] or [N, C, d1, ...], got " << shape_str(input));
  KILN_CHECK(!target.is_floating_point() && target.dtype() != DType::Bool, op,
             op << " expects integer class indices as target (or class probabilities of the input's shape), got "
                << to_string(target.dtype()) << " " << shape_str(target) << " for input " << shape_str(input));
  if (input.dim() == 1) {
    KILN_CHECK(
        target.dim() == 0, op,
        op << " expects a 0-d target for an unbatched input " << shape_str(input) << ", got " << shape_str(target));
    return 0;
  }
  Shape expect = input.shape();
  expect.erase(1);
  KILN_CHECK(target.shape() == expect, op,
             op << " expects target " << to_string(expect) << " (input [N, C, d1, ...] without C) for input "
                << shape_str(input) << ", got " << shape_str(target));
  return 1;
}

// Class indices must lie in [0, C) or equal ignore_index (a cheap host check; skipped where the
// device holds no values).
void check_class_range(const char* op, const Tensor& target, int64_t num_classes, int64_t ignore_index) {
  if (target.numel() == 0 || target.device().is_null()) return;
  Tensor kept = where(target == ignore_index, scalar_tensor(0, target.dtype(), target.device()), target);
  const int64_t lo = kept.min().item<int64_t>();
  const int64_t hi = kept.max().item<int64_t>();
  KILN_CHECK(lo >= 0 && hi < num_classes, op,
             op << " target class " << (lo < 0 ? lo : hi) << " is out of bounds for " << num_classes
                << " classes (indices must be in [0, " << num_classes << ") or equal ignore_index " << ignore_index
                << ")");
}

void check_weight(const char* op, const Tensor& weight, int64_t num_classes) {
  if (!weight.defined()) return;
  KILN_CHECK(weight.numel() == num_classes && weight.dim() <= 1, op,
             op << " weight tensor should be defined either for all " << num_classes
                << " classes or no classes but got weight tensor of shape: " << shape_str(weight));
}

// nll_loss on validated arguments; cdim is the class dim (0 or 1).
Tensor nll_impl(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                const std::string& reduction, int64_t cdim) {
  Tensor tgt = target.to(i64);
  Tensor keep = tgt != ignore_index;
  Tensor safe = where(keep, tgt, scalar_tensor(0, i64, tgt.device()));
  Tensor picked = gather(input, cdim, safe.unsqueeze(cdim)).squeeze({cdim});
  Tensor w;
  if (weight.defined()) {
    w = index_select(weight.to(input.dtype()).reshape({-1}), 0, safe.reshape({-1})).reshape(safe.shape());
  } else {
    w = ones_like(picked);
  }
  w = where(keep, w, 0.0);
  Tensor loss = where(keep, -(picked * w), 0.0);
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.sum();
  return loss.sum() / w.sum();
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  check_reduction("nll_loss", o.reduction);
  const int64_t cdim = check_class_target("nll_loss", input, target);
  const int64_t C = input.size(cdim);
  check_weight("nll_loss", o.weight, C);
  check_class_range("nll_loss", target, C, o.ignore_index);
  return nll_impl(input, target, o.weight, o.ignore_index, o.reduction, cdim);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  check_reduction(op, o.reduction);
  KILN_CHECK(input.defined() && target.defined(), op, "cross_entropy expects defined input and target");
  KILN_CHECK(input.dim() >= 1, op,
             "cross_entropy expects input [C], [N, C] or [N, C, d1, ...], got " << shape_str(input));
  KILN_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, op,
             "cross_entropy label_smoothing must be between 0.0 and 1.0, got " << o.label_smoothing);
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.size(cdim);
  check_weight(op, o.weight, C);
  Tensor x = as_float(input);
  Tensor logp = log_softmax(x, cdim);
  // Weight viewed to broadcast along the class dim: [C] or [1, C, 1, ...].
  Tensor wview;
  if (o.weight.defined()) {
    Shape ws(static_cast<size_t>(input.dim()), 1);
    ws[static_cast<size_t>(cdim)] = C;
    wview = o.weight.to(logp.dtype()).reshape(ws);
  }
  const double ls = o.label_smoothing;

  if (target.shape() == input.shape() && target.is_floating_point()) {  // class probabilities
    KILN_CHECK(o.ignore_index < 0, op, "cross_entropy: ignore_index is not supported for floating point target");
    Tensor t = ls > 0 ? target * (1 - ls) + ls / static_cast<double>(C) : target;
    Tensor prod = wview.defined() ? logp * wview * t : logp * t;
    if (o.reduction == "none") return -prod.sum({cdim});
    if (o.reduction == "sum") return -prod.sum();
    if (input.numel() == 0) return -prod.sum() * std::nan("");
    return -prod.sum() / static_cast<double>(input.numel() / C);
  }
  check_class_target(op, input, target);
  check_class_range(op, target, C, o.ignore_index);
  Tensor nll = nll_impl(logp, target, o.weight, o.ignore_index, o.reduction, cdim);
  if (ls <= 0) return nll;

  // Label smoothing with class indices (PyTorch's cross_entropy_loss_label_smoothing).
  Tensor tgt = target.to(i64);
  Tensor keep = tgt != o.ignore_index;
  Tensor smooth = wview.defined() ? -(logp * wview).sum({cdim}) : -logp.sum({cdim});
  smooth = where(keep, smooth, 0.0);
  Tensor ret;
  if (o.reduction == "mean") {
    if (o.weight.defined()) {
      Tensor safe = where(keep, tgt, scalar_tensor(0, i64, tgt.device()));
      Tensor tw = index_select(o.weight.to(logp.dtype()).reshape({-1}), 0, safe.reshape({-1})).reshape(safe.shape());
      ret = smooth.sum() / where(keep, tw, 0.0).sum();
    } else {
      ret = smooth.sum() / keep.sum().to(smooth.dtype());
    }
  } else if (o.reduction == "sum") {
    ret = smooth.sum();
  } else {
    ret = smooth;
  }
  return nll * (1 - ls) + ret * (ls / static_cast<double>(C));
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  const char* op = "binary_cross_entropy";
  check_reduction(op, reduction);
  check_same_shape(op, input, target);
  if (weight.defined()) check_broadcast(op, input, weight, "input", "weight");
  Tensor x = as_float(input);
  // log clamped to >= -100 as PyTorch; the inner where keeps the gradient finite at 0 and 1.
  Tensor pos = x > 0;
  Tensor neg = x < 1;
  Tensor logx = clamp_min(where(pos, log(where(pos, x, 1.0)), -100.0), -100.0);
  Tensor log1mx = clamp_min(where(neg, log(where(neg, 1.0 - x, 1.0)), -100.0), -100.0);
  Tensor loss = -(target * logx + (1.0 - target) * log1mx);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsOptions& o) {
  const char* op = "binary_cross_entropy_with_logits";
  check_reduction(op, o.reduction);
  check_same_shape(op, input, target);
  if (o.weight.defined()) check_broadcast(op, input, o.weight, "input", "weight");
  if (o.pos_weight.defined()) check_broadcast(op, input, o.pos_weight, "input", "pos_weight");
  Tensor x = as_float(input);
  Tensor sp = softplus(-x);  // -log(sigmoid(x)), stable for large |x|
  Tensor loss;
  if (o.pos_weight.defined()) {
    Tensor lw = (o.pos_weight - 1.0) * target + 1.0;
    loss = (1.0 - target) * x + lw * sp;
  } else {
    loss = (1.0 - target) * x + sp;
  }
  if (o.weight.defined()) loss = loss * o.weight;
  return reduce(loss, o.reduction);
}

// ---- distribution losses ----------------------------------------------------------------------

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  const char* op = "kl_div";
  KILN_CHECK(reduction == "batchmean" || reduction == "none" || reduction == "mean" || reduction == "sum", op,
             "kl_div reduction must be 'none', 'mean', 'sum' or 'batchmean', got '" << reduction << "'");
  check_broadcast(op, input, target);
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // xlogy(t, t) - t * input, with 0 log 0 = 0.
    Tensor zero = target == 0;
    Tensor xlogy = where(zero, 0.0, target * log(where(zero, 1.0, target)));
    loss = xlogy - target * input;
  }
  if (reduction == "batchmean") {
    Tensor s = loss.sum();
    return input.dim() == 0 ? s : s / static_cast<double>(input.size(0));
  }
  return reduce(loss, reduction);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& o) {
  const char* op = "poisson_nll_loss";
  check_reduction(op, o.reduction);
  check_broadcast(op, input, target);
  Tensor loss = o.log_input ? exp(input) - target * input : input - target * log(input + o.eps);
  if (o.full) {
    Tensor small = target <= 1;
    Tensor t = where(small, 1.0, as_float(target));  // the masked positions never see log(t <= 1)
    Tensor stirling = t * log(t) - t + log(t * 6.283185307179586) * 0.5;
    loss = loss + where(small, 0.0, stirling);
  }
  return reduce(loss, o.reduction);
}

// ---- embedding and ranking losses ---------------------------------------------------------------

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                             const std::string& reduction) {
  const char* op = "cosine_embedding_loss";
  check_reduction(op, reduction);
  KILN_CHECK(input1.defined() && input2.defined() && target.defined(), op,
             "cosine_embedding_loss expects defined input1, input2 and target");
  KILN_CHECK(
      target.dim() == 0 || target.dim() == 1, op,
      "cosine_embedding_loss expects a 0-d or 1-d target (multi-target not supported), got " << shape_str(target));
  const int64_t d = target.dim();
  KILN_CHECK(input1.dim() == d + 1 && input2.dim() == d + 1, op,
             "cosine_embedding_loss: a " << d << "-d target expects " << d + 1 << "-d inputs, got input1 "
                                         << shape_str(input1) << ", input2 " << shape_str(input2) << ", target "
                                         << shape_str(target));
  KILN_CHECK(input1.shape() == input2.shape() && (d == 0 || input1.size(0) == target.size(0)), op,
             "cosine_embedding_loss expects input1 and input2 [N, D] and target [N], got input1 "
                 << shape_str(input1) << ", input2 " << shape_str(input2) << ", target " << shape_str(target));
  constexpr double kEps = 1e-12;
  Tensor prod = (input1 * input2).sum({d});
  Tensor m1 = (input1 * input1).sum({d}) + kEps;
  Tensor m2 = (input2 * input2).sum({d}) + kEps;
  Tensor cos = prod / sqrt(m1 * m2);
  Tensor pos = 1.0 - cos;
  Tensor neg = clamp_min(cos - margin, 0.0);
  Tensor out = where(target == 1, pos, 0.0) + where(target == -1, neg, 0.0);
  return reduce(out, reduction);
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                           const std::string& reduction) {
  const char* op = "margin_ranking_loss";
  check_reduction(op, reduction);
  KILN_CHECK(input1.defined() && input2.defined() && target.defined(), op,
             "margin_ranking_loss expects defined input1, input2 and target");
  KILN_CHECK(input1.dim() == input2.dim() && input1.dim() == target.dim(), op,
             "margin_ranking_loss: all input tensors should have the same number of dimensions, but got input1 "
                 << shape_str(input1) << ", input2 " << shape_str(input2) << ", target " << shape_str(target));
  check_broadcast(op, input1, input2, "input1", "input2");
  check_broadcast(op, input1, target, "input1", "target");
  check_broadcast(op, input2, target, "input2", "target");
  return reduce(clamp_min(-target * (input1 - input2) + margin, 0.0), reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin, const std::string& reduction) {
  const char* op = "hinge_embedding_loss";
  check_reduction(op, reduction);
  check_broadcast(op, input, target);
  Tensor x = as_float(input);
  Tensor margin_clamp = clamp_min(margin - x, 0.0);
  Tensor out = where(target != 1, margin_clamp, 0.0) + where(target != -1, x, 0.0);
  return reduce(out, reduction);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& o) {
  const char* op = "triplet_margin_loss";
  check_reduction(op, o.reduction);
  KILN_CHECK(anchor.defined() && positive.defined() && negative.defined(), op,
             "triplet_margin_loss expects defined anchor, positive and negative");
  KILN_CHECK(anchor.dim() == positive.dim() && anchor.dim() == negative.dim() && anchor.dim() >= 1, op,
             "triplet_margin_loss: the anchor, positive, and negative tensors are expected to have the same number "
             "of dimensions (1 or more), but got: anchor "
                 << shape_str(anchor) << ", positive " << shape_str(positive) << ", and negative "
                 << shape_str(negative));
  check_broadcast(op, anchor, positive, "anchor", "positive");
  check_broadcast(op, anchor, negative, "anchor", "negative");
  Tensor dpos = pairwise_distance(anchor, positive, o.p, o.eps);
  Tensor dneg = pairwise_distance(anchor, negative, o.p, o.eps);
  if (o.swap) dneg = minimum(dneg, pairwise_distance(positive, negative, o.p, o.eps));
  return reduce(clamp_min(dpos - dneg + o.margin, 0.0), o.reduction);
}

}  // namespace kiln::nn::functional
