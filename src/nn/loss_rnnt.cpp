// SPDX-License-Identifier: MIT OR Apache-2.0
// rnnt_loss: the transducer's forward (alpha) recursion in log space, one step per anti-diagonal
// d = t + u of the [T, U + 1] lattice, written with public differentiable ops so that autodiff
// gives the gradient. Cells of a diagonal depend only on the previous diagonal:
//   alpha(t, u) = lse(alpha(t - 1, u) + blank(t - 1, u), alpha(t, u - 1) + emit(t, u - 1))
// so each step is a few ops over [B, U + 1]. The lattice is read in skewed form, skew[b, d, u] =
// value[b, d - u, u], gathered once; cells off the lattice hold the finite log-zero of
// loss_util.h (Note [CTC with finite log-zero] in loss_ctc.cpp) and never feed a cell on it.
#include "kiln/nn/loss_rnnt.h"

#include <algorithm>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "loss_util.h"

namespace kiln::nn::functional {

using detail_loss::check_reduction;
using detail_loss::kLogZero;
using detail_loss::lengths_of;
using detail_loss::lse;
using detail_loss::shape_str;

namespace {

/// skew[b, d, u] = v[b, d - u, u] for d in [0, T + U), u in [0, W); kLogZero off the lattice.
/// v is [B, T, W'] with W' <= W (columns past W' are off the lattice too).
Tensor skew(const Tensor& v, int64_t W) {
  const int64_t B = v.size(0), T = v.size(1), Wv = v.size(2), D = T + W - 1;
  std::vector<int64_t> idx(static_cast<size_t>(D * W));
  const int64_t off = T * Wv;  // the appended log-zero column
  for (int64_t d = 0; d < D; ++d)
    for (int64_t u = 0; u < W; ++u) {
      const int64_t t = d - u;
      idx[d * W + u] = (t >= 0 && t < T && u < Wv) ? t * Wv + u : off;
    }
  Tensor flat = cat({v.reshape({B, T * Wv}), full({B, 1}, kLogZero, {.dtype = v.dtype(), .device = v.device()})}, 1);
  Tensor it = tensor(idx, {1, D * W}, v.device()).expand({B, D * W});
  return gather(flat, 1, it).reshape({B, D, W});
}

/// The loss of each sample, [B], from logits x [B, T, W, V] (f32 or f64) and validated lengths
/// and targets (padded [B, W - 1] with the blank).
Tensor rnnt_costs(const Tensor& x, const std::vector<int64_t>& padded, const std::vector<int64_t>& tl,
                  const std::vector<int64_t>& ul, int64_t blank, bool fused_log_softmax) {
  const int64_t B = x.size(0), T = x.size(1), W = x.size(2), U = W - 1;
  const Device dev = x.device();
  Tensor lp = fused_log_softmax ? log_softmax(x, 3) : x;
  lp = clamp_min(lp, kLogZero);
  // blank(t, u) [B, T, W] and emit(t, u) = lp(t, u, y_{u+1}) [B, T, U].
  Tensor blank_lp = lp.select(3, blank);
  Tensor skew_blank = skew(blank_lp, W);  // [B, D, W]
  Tensor skew_emit;
  if (U > 0) {
    Tensor y = tensor(padded, {B, 1, U, 1}, dev).expand({B, T, U, 1});
    skew_emit = skew(gather(lp.narrow(2, 0, U), 3, y).squeeze(Dims{3}), W);
  }
  const int64_t D = T + W - 1;
  std::vector<double> a0(static_cast<size_t>(W), kLogZero);
  a0[0] = 0;
  Tensor alpha = tensor(a0, {1, W}, dev).to(x.dtype()).expand({B, W});
  Tensor neg1 = full({B, 1}, kLogZero, {.dtype = x.dtype(), .device = dev});
  // The diagonal each sample ends on, and its cell (T_b - 1, U_b): collected when reached.
  std::vector<Tensor> ends(static_cast<size_t>(B));
  auto collect = [&](int64_t d) {
    for (int64_t b = 0; b < B; ++b)
      if (tl[b] - 1 + ul[b] == d) ends[b] = alpha.select(0, b).select(0, ul[b]);
  };
  collect(0);
  for (int64_t d = 1; d < D; ++d) {
    Tensor from_blank = alpha + skew_blank.select(1, d - 1);
    Tensor next = from_blank;
    if (U > 0) {
      Tensor e = alpha.narrow(1, 0, U) + skew_emit.select(1, d - 1).narrow(1, 0, U);
      next = lse(from_blank, cat({neg1, e}, 1));
    }
    alpha = next;
    collect(d);
  }
  // The final blank at (T_b - 1, U_b).
  Tensor flat = blank_lp.reshape({B, T * W});
  std::vector<int64_t> fi(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) fi[b] = (tl[b] - 1) * W + ul[b];
  Tensor final_blank = gather(flat, 1, tensor(fi, {B, 1}, dev)).reshape({B});
  return -(stack(ends, 0) + final_blank);
}

}  // namespace

Tensor rnnt_loss(const Tensor& logits, const Tensor& targets, const Tensor& logit_lengths, const Tensor& target_lengths,
                 const RNNTLossOptions& o) {
  const char* op = "rnnt_loss";
  check_reduction(op, o.reduction);
  KILN_CHECK(logits.defined() && logits.dim() == 4 && logits.is_floating_point(), op,
             "rnnt_loss expects float logits [B, T, U + 1, V], got "
                 << (logits.defined() ? to_string(logits.dtype()) + " " + shape_str(logits) : "undefined"));
  const int64_t B = logits.size(0), T = logits.size(1), W = logits.size(2), V = logits.size(3);
  KILN_CHECK(W >= 1 && V >= 1, op, "rnnt_loss expects U + 1 >= 1 and V >= 1, got logits " << shape_str(logits));
  const int64_t blank = o.blank < 0 ? o.blank + V : o.blank;
  KILN_CHECK(blank >= 0 && blank < V, op, "rnnt_loss blank " << o.blank << " is out of range for " << V << " classes");
  const std::vector<int64_t> tl = lengths_of(op, "logit_lengths", logit_lengths);
  const std::vector<int64_t> ul = lengths_of(op, "target_lengths", target_lengths);
  KILN_CHECK(static_cast<int64_t>(tl.size()) == B && static_cast<int64_t>(ul.size()) == B, op,
             "rnnt_loss expects logit_lengths and target_lengths of batch size "
                 << B << " for logits " << shape_str(logits) << ", got " << tl.size() << " and " << ul.size());
  int64_t umax = 0;
  for (int64_t b = 0; b < B; ++b) {
    KILN_CHECK(tl[b] >= 1 && tl[b] <= T, op,
               "rnnt_loss logit_lengths[" << b << "] = " << tl[b] << " must be in [1, T = " << T << "]");
    KILN_CHECK(ul[b] >= 0 && ul[b] < W, op,
               "rnnt_loss target_lengths[" << b << "] = " << ul[b] << " must be in [0, U = " << W - 1 << "] for logits "
                                           << shape_str(logits));
    umax = std::max(umax, ul[b]);
  }
  KILN_CHECK(targets.defined() && targets.dim() == 2 && !targets.is_floating_point() && targets.size(0) == B &&
                 targets.size(1) >= umax,
             op,
             "rnnt_loss expects integer targets [B = "
                 << B << ", S >= max(target_lengths) = " << umax << "], got "
                 << (targets.defined() ? to_string(targets.dtype()) + " " + shape_str(targets) : "undefined"));
  // Targets on the host, padded to [B, U] with the blank (those cells are never reached).
  const int64_t U = W - 1, S = targets.size(1);
  const std::vector<int64_t> tv = targets.to(i64).reshape({-1}).to_vector<int64_t>();
  std::vector<int64_t> padded(static_cast<size_t>(B * U), blank);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t u = 0; u < ul[b]; ++u) {
      const int64_t c = tv[b * S + u];
      KILN_CHECK(c >= 0 && c < V && c != blank, op,
                 "rnnt_loss target " << c << " (sample " << b << ", position " << u << ") must be a class in [0, " << V
                                     << ") other than the blank " << blank);
      padded[b * U + u] = c;
    }
  if (B == 0)  // an empty batch: no losses (the mean of none is NaN, as PyTorch)
    return detail_loss::reduce(zeros({0}, {.dtype = logits.dtype(), .device = logits.device()}), o.reduction);

  Tensor x = logits.dtype() == f64 ? logits : logits.to(f32);
  Tensor loss;
  if (o.clamp > 0 && x.requires_grad()) {
    // torchaudio's clamp: each sample's gradient with respect to its logits, clamped, then
    // scaled by the gradient of its loss. Computed now by a backward of its own, and attached
    // as the gradient of a term whose value is 0 (first order only, as torchaudio).
    Tensor xd = x.detach().require_grad();
    Tensor costs = rnnt_costs(xd, padded, tl, ul, blank, o.fused_log_softmax);
    Tensor g = clamp(costs.sum().backward().get(xd), Scalar(-o.clamp), Scalar(o.clamp));
    loss = costs.detach() + ((x - x.detach()) * g).sum({1, 2, 3});
  } else {
    loss = rnnt_costs(x, padded, tl, ul, blank, o.fused_log_softmax);
  }
  if (loss.dtype() != logits.dtype()) loss = loss.to(logits.dtype());
  return detail_loss::reduce(loss, o.reduction);
}

}  // namespace kiln::nn::functional

namespace kiln::nn {

RNNTLoss::RNNTLoss(const RNNTLossConfig& c, const Device&) : config(c) {}
Tensor RNNTLoss::forward(const Tensor& logits, const Tensor& targets, const Tensor& logit_lengths,
                         const Tensor& target_lengths) const {
  return functional::rnnt_loss(logits, targets, logit_lengths, target_lengths, config);
}
std::string RNNTLoss::extra_repr() const {
  return "blank=" + std::to_string(config.blank) + ", clamp=" + std::to_string(config.clamp) +
         ", reduction=" + config.reduction + ", fused_log_softmax=" + (config.fused_log_softmax ? "true" : "false");
}

}  // namespace kiln::nn
