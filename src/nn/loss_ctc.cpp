// SPDX-License-Identifier: MIT OR Apache-2.0
// ctc_loss: the CTC forward (alpha) recursion in log space, one step per time frame, written
// with public differentiable ops so that autodiff gives the gradient.
//
// Note [CTC with finite log-zero]
// Unreachable states hold kNeg = -1e30 instead of -inf: a log-sum-exp over three -inf values
// would give NaN gradients (exp(-inf - -inf)). With a finite floor those states contribute
// exp(-1e30 - x) = 0 to every reachable one, so values and gradients of feasible alignments are
// unchanged. A sample whose final log-likelihood stays near kNeg has no valid alignment: its
// loss is +inf (0 with zero_infinity), as PyTorch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/error.h"
#include "kiln/nn/loss.h"
#include "kiln/ops.h"
#include "loss_util.h"

namespace kiln::nn::functional {

using detail_loss::check_reduction;
using detail_loss::lengths_of;
using detail_loss::lse;
using detail_loss::shape_str;

namespace {
constexpr double kNeg = detail_loss::kLogZero;
}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& options) {
  return ctc_loss(log_probs, targets, lengths_of("ctc_loss", "input_lengths", input_lengths),
                  lengths_of("ctc_loss", "target_lengths", target_lengths), options);
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, const CTCLossOptions& o) {
  const char* op = "ctc_loss";
  check_reduction(op, o.reduction);
  KILN_CHECK(log_probs.defined() && targets.defined(), op, "ctc_loss expects defined log_probs and targets");
  KILN_CHECK(log_probs.dim() == 3 || log_probs.dim() == 2, op,
             "ctc_loss expects log_probs [T, N, C] or [T, C] (unbatched), got " << shape_str(log_probs));
  const bool unbatched = log_probs.dim() == 2;
  Tensor x = unbatched ? log_probs.unsqueeze(1) : log_probs;
  const int64_t T = x.size(0), N = x.size(1), C = x.size(2);
  KILN_CHECK(static_cast<int64_t>(input_lengths.size()) == N && static_cast<int64_t>(target_lengths.size()) == N, op,
             "ctc_loss expects input_lengths and target_lengths of batch size "
                 << N << " for log_probs " << shape_str(log_probs) << ", got " << input_lengths.size() << " and "
                 << target_lengths.size());
  KILN_CHECK(o.blank >= 0 && o.blank < C, op, "ctc_loss blank must be in [0, " << C << "), got " << o.blank);
  int64_t smax = 0, stotal = 0;
  for (int64_t n = 0; n < N; ++n) {
    KILN_CHECK(input_lengths[n] >= 0 && input_lengths[n] <= T, op,
               "ctc_loss input_lengths[" << n << "] = " << input_lengths[n] << " must be in [0, T = " << T << "]");
    KILN_CHECK(target_lengths[n] >= 0, op,
               "ctc_loss target_lengths[" << n << "] = " << target_lengths[n] << " must be >= 0");
    smax = std::max(smax, target_lengths[n]);
    stotal += target_lengths[n];
  }

  // Targets on the host, padded to [N, smax].
  KILN_CHECK(!targets.is_floating_point(), op, "ctc_loss expects integer targets, got " << to_string(targets.dtype()));
  const std::vector<int64_t> tv = targets.to(i64).reshape({-1}).to_vector<int64_t>();
  std::vector<int64_t> padded(static_cast<size_t>(N * smax), o.blank);
  const bool concatenated = unbatched ? true : targets.dim() == 1;
  if (concatenated) {
    KILN_CHECK(targets.dim() == 1 && targets.numel() >= stotal, op,
               "ctc_loss expects concatenated targets of length sum(target_lengths) = "
                   << stotal << " (or padded [N, S]), got " << shape_str(targets));
    int64_t off = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < target_lengths[n]; ++s) padded[n * smax + s] = tv[off++];
  } else {
    KILN_CHECK(targets.dim() == 2 && targets.size(0) == N && targets.size(1) >= smax, op,
               "ctc_loss expects padded targets [N = " << N << ", S >= max(target_lengths) = " << smax << "], got "
                                                       << shape_str(targets));
    const int64_t S = targets.size(1);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < target_lengths[n]; ++s) padded[n * smax + s] = tv[n * S + s];
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < target_lengths[n]; ++s) {
      const int64_t c = padded[n * smax + s];
      KILN_CHECK(c >= 0 && c < C, op,
                 "ctc_loss target " << c << " (sample " << n << ", position " << s << ") is out of range for " << C
                                    << " classes");
    }

  // Extended labels (blank, l1, blank, l2, ..., blank), the skip transitions and the start mask.
  const int64_t L = 2 * smax + 1;
  std::vector<int64_t> ext(static_cast<size_t>(N * L), o.blank);
  std::vector<bool> skip(static_cast<size_t>(N * L), false), start(static_cast<size_t>(N * L), false);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t s = 1; s < L; s += 2) ext[n * L + s] = padded[n * smax + s / 2];
    for (int64_t s = 3; s < L; s += 2) skip[n * L + s] = ext[n * L + s] != ext[n * L + s - 2];
    start[n * L] = input_lengths[n] > 0;
    if (L > 1) start[n * L + 1] = input_lengths[n] > 0 && target_lengths[n] > 0;
  }
  const Device dev = x.device();
  const DType out_dtype = x.dtype();
  Tensor xf = x.dtype() == f64 ? x : x.to(f32);
  const DType ct = xf.dtype();
  Tensor ext_t = tensor(ext, {N, L}, dev);
  Tensor skip_t = tensor(skip, {N, L}, dev);
  Tensor start_t = tensor(start, {N, L}, dev);

  Tensor neg_full = full({N, L}, kNeg, {.dtype = ct, .device = dev});
  Tensor lp;  // [T, N, L]: log-probability of each extended label at each frame
  if (T > 0) lp = clamp_min(gather(xf, 2, ext_t.unsqueeze(0).expand({T, N, L}).contiguous()), kNeg);
  Tensor alpha = T > 0 ? where(start_t, lp.select(0, 0), neg_full) : neg_full;
  const int64_t tmax = N > 0 ? *std::max_element(input_lengths.begin(), input_lengths.end()) : 0;
  Tensor neg1 = full({N, 1}, kNeg, {.dtype = ct, .device = dev});
  Tensor neg2 = full({N, std::min<int64_t>(2, L)}, kNeg, {.dtype = ct, .device = dev});
  for (int64_t t = 1; t < tmax; ++t) {
    Tensor a2 = L > 1 ? cat({neg1, alpha.narrow(1, 0, L - 1)}, 1) : neg_full;
    Tensor a3 = L > 2 ? where(skip_t, cat({neg2, alpha.narrow(1, 0, L - 2)}, 1), neg_full) : neg_full;
    Tensor next = lse(alpha, a2, a3) + lp.select(0, t);
    bool all_active = true;
    std::vector<bool> active(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) all_active &= (active[n] = input_lengths[n] > t);
    alpha = all_active ? next : where(tensor(active, {N, 1}, dev), next, alpha);
  }

  // log-likelihood: the last blank or the last label of each target.
  std::vector<int64_t> i_last(static_cast<size_t>(N)), i_prev(static_cast<size_t>(N));
  std::vector<bool> has_label(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    i_last[n] = 2 * target_lengths[n];
    i_prev[n] = std::max<int64_t>(2 * target_lengths[n] - 1, 0);
    has_label[n] = target_lengths[n] > 0;
  }
  Tensor e1 = gather(alpha, 1, tensor(i_last, {N, 1}, dev));
  Tensor e2 = where(tensor(has_label, {N, 1}, dev), gather(alpha, 1, tensor(i_prev, {N, 1}, dev)), neg1);
  Tensor loss = -lse(e1, e2).reshape({N});
  Tensor impossible = loss > -kNeg / 10;
  loss = where(impossible, o.zero_infinity ? 0.0 : std::numeric_limits<double>::infinity(), loss);
  if (ct != out_dtype) loss = loss.to(out_dtype);

  if (o.reduction == "mean") {
    std::vector<double> tl(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) tl[n] = static_cast<double>(std::max<int64_t>(target_lengths[n], 1));
    return (loss / tensor(tl, {N}, dev).to(loss.dtype())).mean();
  }
  if (o.reduction == "sum") return loss.sum();
  return unbatched ? loss.reshape({}) : loss;
}

}  // namespace kiln::nn::functional
