// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Loss functions: the functional forms in kiln::nn::functional (torch.nn.functional's names,
// arguments and defaults) and the module forms in kiln::nn (torch.nn.MSELoss, ...).
//
// Every loss takes a `reduction`: "none" (per-element or per-sample losses), "mean" (the
// default) or "sum"; kl_div also takes "batchmean". All are written with public differentiable
// ops, so on an autodiff device backward() gives their gradients. An undefined Tensor (`{}`)
// stands for an absent optional (weight, pos_weight). Bad shapes throw kiln::Error naming the
// loss and the shapes.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/nn/config.h"
#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// Mean squared error (input - target)^2. input and target broadcast together (PyTorch
/// warns, Kiln accepts); "none" returns the broadcast shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

/// Mean absolute error |input - target|; shapes as mse_loss.
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

/// General Lp loss |input - target|^p (p > 0; p = 1 is l1_loss, p = 2 is mse_loss); shapes as
/// mse_loss. For p < 1 the gradient where input == target is infinite.
Tensor lp_loss(const Tensor& input, const Tensor& target, double p = 2.0, const std::string& reduction = "mean");

/// Smooth L1: 0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (beta = 0 is
/// l1_loss). Shapes as mse_loss.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      double beta = 1.0);

/// Huber: 0.5 d^2 where d = |input - target| < delta, else delta (d - 0.5 delta). Shapes as
/// mse_loss.
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double delta = 1.0);

/// Options of nll_loss (PyTorch's keyword arguments).
struct NLLLossOptions {
  Tensor weight{};                 ///< [C] class weights (optional)
  int64_t ignore_index = -100;     ///< target value that contributes neither loss nor weight
  std::string reduction = "mean";  ///< "mean" divides by the summed weights of the counted targets
};

/// Negative log-likelihood of log-probabilities. input [C] with target [] (unbatched),
/// [N, C] with target [N], or [N, C, d1, ...] with target [N, d1, ...] (integer class indices
/// in [0, C) or ignore_index). loss_i = -weight[t_i] * input[i, t_i]; "none" returns the target's
/// shape; "mean" is sum(loss) / sum(weight[t_i]) over non-ignored targets (NaN when all are
/// ignored or the batch is empty, as PyTorch).
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});

/// Options of cross_entropy (PyTorch's keyword arguments).
struct CrossEntropyOptions {
  Tensor weight{};                 ///< [C] class weights (optional)
  int64_t ignore_index = -100;     ///< with class indices only
  std::string reduction = "mean";  ///< "none", "mean" or "sum"
  double label_smoothing = 0.0;    ///< in [0, 1]: mixes the target with the uniform distribution
};

/// log_softmax over the class dim followed by nll_loss. input [C], [N, C] or [N, C, d1, ...]
/// (logits); target either integer class indices (shapes as nll_loss) or class probabilities
/// of the input's shape (float; "mean" then divides by N * d1 * ..., unweighted, as PyTorch).
/// Reductions, weights, ignore_index and label smoothing exactly as PyTorch.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

/// Binary cross entropy of probabilities input in [0, 1] against target of the same shape:
/// -w (t log x + (1 - t) log(1 - x)), each log clamped to >= -100 as PyTorch. weight
/// (optional) broadcasts to input.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");

/// Options of binary_cross_entropy_with_logits.
struct BCEWithLogitsOptions {
  Tensor weight{};                 ///< broadcasts to input (optional)
  Tensor pos_weight{};             ///< weight of positive examples, broadcast along the last dim (optional)
  std::string reduction = "mean";  ///< "none", "mean" or "sum"
};

/// sigmoid + binary cross entropy in one numerically stable expression:
/// w ((1 - t) x + (1 + (pw - 1) t) softplus(-x)). input and target have the same shape.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});

/// Kullback-Leibler divergence with input log-probabilities: target (log t - input) (with
/// 0 log 0 = 0), or exp(t) (t - input) when log_target. reduction may be "batchmean" (sum
/// divided by input.size(0), the mathematically correct KL); "mean" averages over elements.
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);

/// Options of poisson_nll_loss.
struct PoissonNLLLossOptions {
  bool log_input = true;  ///< input is log(rate): exp(input) - target input; else input - target log(input + eps)
  bool full = false;      ///< add the Stirling term t log t - t + 0.5 log(2 pi t) where t > 1
  double eps = 1e-8;
  std::string reduction = "mean";
  KILN_CONFIG(PoissonNLLLossConfig, log_input, full, eps, reduction)
};

/// Poisson negative log-likelihood; input and target broadcast together.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& options = {});

/// 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1 (0 otherwise).
/// x1, x2 [N, D] with y [N], or [D] with y [] (unbatched). "none" returns y's shape.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                             const std::string& reduction = "mean");

/// max(0, -y (x1 - x2) + margin); x1, x2 and y have the same rank and broadcast together.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                           const std::string& reduction = "mean");

/// x where y != -1 plus max(0, margin - x) where y != 1; input and target broadcast together.
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            const std::string& reduction = "mean");

/// Options of triplet_margin_loss.
struct TripletMarginLossOptions {
  double margin = 1.0;
  double p = 2.0;     ///< norm degree of the pairwise distance
  double eps = 1e-6;  ///< added to the difference before the norm (PyTorch's pairwise_distance)
  bool swap = false;  ///< use min(d(a, n), d(p, n)) as the negative distance
  std::string reduction = "mean";
  KILN_CONFIG(TripletMarginLossConfig, margin, p, eps, swap, reduction)
};

/// max(0, margin + d(a, p) - d(a, n)) with d(x, y) = ||x - y + eps||_p over the last dim.
/// anchor, positive and negative have the same rank: [N, D] (result [N] for "none") or [D].
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& options = {});

/// log(1 + exp(-y x)) for labels y of +-1; input and target broadcast together.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

/// -(y log sigmoid(x) + (1 - y) log sigmoid(-x)), times weight [C] when given, averaged over
/// the C classes: input and target [N, C] (or [C]) -> [N] for "none".
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                   const std::string& reduction = "mean");

/// Options of multi_margin_loss.
struct MultiMarginLossOptions {
  int64_t p = 1;  ///< 1 or 2
  double margin = 1.0;
  Tensor weight{};  ///< [C] class weights (optional), applied by the target's class
  std::string reduction = "mean";
};
/// Multi-class hinge: sum over i != y of max(0, margin - x[y] + x[i])^p, times weight[y],
/// divided by C. input [N, C] with target [N] of class indices (or [C] with a 0-d target).
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, const MultiMarginLossOptions& options = {});

/// Options of gaussian_nll_loss.
struct GaussianNLLLossOptions {
  bool full = false;  ///< add 0.5 log(2 pi)
  double eps = 1e-6;  ///< var is clamped at eps (the clamp passes no gradient, as in PyTorch)
  std::string reduction = "mean";
  KILN_CONFIG(GaussianNLLLossConfig, full, eps, reduction)
};
/// 0.5 (log var + (input - target)^2 / var): the negative log-likelihood of target under
/// N(input, var). var has input's shape, or input's with the last dim 1 or without it
/// (one variance for a row); negative entries are an error.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& options = {});

/// Options of ctc_loss.
struct CTCLossOptions {
  int64_t blank = 0;               ///< index of the blank class
  std::string reduction = "mean";  ///< "mean": each loss divided by its target length, then averaged
  bool zero_infinity = false;      ///< infinite losses (impossible alignments) and their gradients become 0
  KILN_CONFIG(CTCLossConfig, blank, reduction, zero_infinity)
};

/// Connectionist temporal classification. log_probs [T, N, C] (log_softmax outputs) or [T, C]
/// (unbatched); targets [N, S] padded (S >= every target length) or 1-d, the targets
/// concatenated (length sum(target_lengths)); input_lengths and target_lengths [N] integers
/// (input_lengths <= T). Computed with the alpha recursion in log space (a loop over time), so
/// autodiff differentiates it. "none" returns [N] (or [] unbatched).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& options = {});
/// ctc_loss with the lengths given as host vectors.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, const CTCLossOptions& options = {});

}  // namespace kiln::nn::functional

namespace kiln::nn {

/// Config of the losses whose only option is the reduction.
struct ReductionConfig {
  std::string reduction = "mean";  ///< "none", "mean" or "sum"
  KILN_CONFIG(ReductionConfig, reduction)
};
using MSELossConfig = ReductionConfig;
using L1LossConfig = ReductionConfig;

/// Config of LpLoss.
struct LpLossConfig {
  double p = 2.0;  ///< the exponent, > 0
  std::string reduction = "mean";
  KILN_CONFIG(LpLossConfig, p, reduction)
};

/// Config of SmoothL1Loss.
struct SmoothL1LossConfig {
  std::string reduction = "mean";
  double beta = 1.0;
  KILN_CONFIG(SmoothL1LossConfig, reduction, beta)
};
/// Config of HuberLoss.
struct HuberLossConfig {
  std::string reduction = "mean";
  double delta = 1.0;
  KILN_CONFIG(HuberLossConfig, reduction, delta)
};
/// Config of BCELoss (weight broadcasts to the input).
struct BCELossConfig {
  Tensor weight{};
  std::string reduction = "mean";
};
/// Config of KLDivLoss.
struct KLDivLossConfig {
  std::string reduction = "mean";  ///< or "batchmean"
  bool log_target = false;
  KILN_CONFIG(KLDivLossConfig, reduction, log_target)
};
/// Config of the margin losses (CosineEmbeddingLoss, MarginRankingLoss: margin 0 by default).
struct MarginLossConfig {
  double margin = 0.0;
  std::string reduction = "mean";
  KILN_CONFIG(MarginLossConfig, margin, reduction)
};
using CosineEmbeddingLossConfig = MarginLossConfig;
using MarginRankingLossConfig = MarginLossConfig;
/// Config of HingeEmbeddingLoss.
struct HingeEmbeddingLossConfig {
  double margin = 1.0;
  std::string reduction = "mean";
  KILN_CONFIG(HingeEmbeddingLossConfig, margin, reduction)
};
using CrossEntropyLossConfig = functional::CrossEntropyOptions;
using NLLLossConfig = functional::NLLLossOptions;
using BCEWithLogitsLossConfig = functional::BCEWithLogitsOptions;
using PoissonNLLLossConfig = functional::PoissonNLLLossOptions;
using GaussianNLLLossConfig = functional::GaussianNLLLossOptions;
/// Config of SoftMarginLoss.
struct SoftMarginLossConfig {
  std::string reduction = "mean";
  KILN_CONFIG(SoftMarginLossConfig, reduction)
};
using MultiMarginLossConfig = functional::MultiMarginLossOptions;
using TripletMarginLossConfig = functional::TripletMarginLossOptions;
using CTCLossConfig = functional::CTCLossOptions;

/// torch.nn.MSELoss: input, target (broadcast) -> loss (scalar, or the shape for "none").
struct MSELoss : Module {
  MSELossConfig config;
  MSELoss() = default;
  explicit MSELoss(const MSELossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(MSELoss, config)
};

/// torch.nn.L1Loss: input, target (broadcast) -> loss.
struct L1Loss : Module {
  L1LossConfig config;
  L1Loss() = default;
  explicit L1Loss(const L1LossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(L1Loss, config)
};

/// General Lp loss |input - target|^p (functional::lp_loss): input, target (broadcast) -> loss.
struct LpLoss : Module {
  LpLossConfig config;
  LpLoss() = default;
  explicit LpLoss(const LpLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(LpLoss, config)
};

/// torch.nn.SmoothL1Loss: input, target (broadcast) -> loss.
struct SmoothL1Loss : Module {
  SmoothL1LossConfig config;
  SmoothL1Loss() = default;
  explicit SmoothL1Loss(const SmoothL1LossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(SmoothL1Loss, config)
};

/// torch.nn.HuberLoss: input, target (broadcast) -> loss.
struct HuberLoss : Module {
  HuberLossConfig config;
  HuberLoss() = default;
  explicit HuberLoss(const HuberLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(HuberLoss, config)
};

/// torch.nn.CrossEntropyLoss: logits [N, C, ...] and class indices or probabilities -> loss.
/// The class weights are the buffer `weight` (PyTorch's state_dict name), absent when not given.
struct CrossEntropyLoss : Module {
  CrossEntropyLossConfig config;
  Buffer weight;
  CrossEntropyLoss() = default;
  explicit CrossEntropyLoss(const CrossEntropyLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(CrossEntropyLoss, weight)
};

/// torch.nn.NLLLoss: log-probabilities [N, C, ...] and class indices -> loss. Buffer `weight`.
struct NLLLoss : Module {
  NLLLossConfig config;
  Buffer weight;
  NLLLoss() = default;
  explicit NLLLoss(const NLLLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(NLLLoss, weight)
};

/// torch.nn.BCELoss: probabilities and targets of the same shape -> loss. Buffer `weight`.
struct BCELoss : Module {
  BCELossConfig config;
  Buffer weight;
  BCELoss() = default;
  explicit BCELoss(const BCELossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(BCELoss, weight)
};

/// torch.nn.BCEWithLogitsLoss: logits and targets of the same shape -> loss. Buffers `weight`
/// and `pos_weight`.
struct BCEWithLogitsLoss : Module {
  BCEWithLogitsLossConfig config;
  Buffer weight, pos_weight;
  BCEWithLogitsLoss() = default;
  explicit BCEWithLogitsLoss(const BCEWithLogitsLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(BCEWithLogitsLoss, weight, pos_weight)
};

/// torch.nn.KLDivLoss: log-probabilities input and target (probabilities or log) -> loss.
struct KLDivLoss : Module {
  KLDivLossConfig config;
  KLDivLoss() = default;
  explicit KLDivLoss(const KLDivLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(KLDivLoss, config)
};

/// torch.nn.PoissonNLLLoss: input (log rate unless log_input = false) and counts -> loss.
struct PoissonNLLLoss : Module {
  PoissonNLLLossConfig config;
  PoissonNLLLoss() = default;
  explicit PoissonNLLLoss(const PoissonNLLLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(PoissonNLLLoss, config)
};

/// torch.nn.SoftMarginLoss: input and +-1 labels (broadcast) -> loss.
struct SoftMarginLoss : Module {
  SoftMarginLossConfig config;
  SoftMarginLoss() = default;
  explicit SoftMarginLoss(const SoftMarginLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(SoftMarginLoss, config)
};

/// torch.nn.MultiMarginLoss: scores [N, C] and class indices [N] -> loss. Buffer `weight`.
struct MultiMarginLoss : Module {
  MultiMarginLossConfig config;
  Buffer weight;
  MultiMarginLoss() = default;
  explicit MultiMarginLoss(const MultiMarginLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(MultiMarginLoss, weight)
};

/// torch.nn.GaussianNLLLoss: mean, target and variance -> loss.
struct GaussianNLLLoss : Module {
  GaussianNLLLossConfig config;
  GaussianNLLLoss() = default;
  explicit GaussianNLLLoss(const GaussianNLLLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var) const;
  Tensor operator()(const Tensor& input, const Tensor& target, const Tensor& var) const {
    return forward(input, target, var);
  }
  std::string extra_repr() const override;
  KILN_VISIT(GaussianNLLLoss, config)
};

/// torch.nn.CosineEmbeddingLoss: x1, x2 [N, D] and y [N] of +-1 -> loss.
struct CosineEmbeddingLoss : Module {
  CosineEmbeddingLossConfig config;
  CosineEmbeddingLoss() = default;
  explicit CosineEmbeddingLoss(const CosineEmbeddingLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) const;
  Tensor operator()(const Tensor& input1, const Tensor& input2, const Tensor& target) const {
    return forward(input1, input2, target);
  }
  std::string extra_repr() const override;
  KILN_VISIT(CosineEmbeddingLoss, config)
};

/// torch.nn.MarginRankingLoss: x1, x2 and y of +-1 (broadcast) -> loss.
struct MarginRankingLoss : Module {
  MarginRankingLossConfig config;
  MarginRankingLoss() = default;
  explicit MarginRankingLoss(const MarginRankingLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) const;
  Tensor operator()(const Tensor& input1, const Tensor& input2, const Tensor& target) const {
    return forward(input1, input2, target);
  }
  std::string extra_repr() const override;
  KILN_VISIT(MarginRankingLoss, config)
};

/// torch.nn.HingeEmbeddingLoss: input and y of +-1 (broadcast) -> loss.
struct HingeEmbeddingLoss : Module {
  HingeEmbeddingLossConfig config;
  HingeEmbeddingLoss() = default;
  explicit HingeEmbeddingLoss(const HingeEmbeddingLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
  std::string extra_repr() const override;
  KILN_VISIT(HingeEmbeddingLoss, config)
};

/// torch.nn.TripletMarginLoss: anchor, positive, negative [N, D] -> loss.
struct TripletMarginLoss : Module {
  TripletMarginLossConfig config;
  TripletMarginLoss() = default;
  explicit TripletMarginLoss(const TripletMarginLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) const;
  Tensor operator()(const Tensor& anchor, const Tensor& positive, const Tensor& negative) const {
    return forward(anchor, positive, negative);
  }
  std::string extra_repr() const override;
  KILN_VISIT(TripletMarginLoss, config)
};

/// torch.nn.CTCLoss: log_probs [T, N, C], targets, input_lengths [N], target_lengths [N] -> loss.
struct CTCLoss : Module {
  CTCLossConfig config;
  CTCLoss() = default;
  explicit CTCLoss(const CTCLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths) const;
  Tensor operator()(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                    const Tensor& target_lengths) const {
    return forward(log_probs, targets, input_lengths, target_lengths);
  }
  std::string extra_repr() const override;
  KILN_VISIT(CTCLoss, config)
};

}  // namespace kiln::nn
