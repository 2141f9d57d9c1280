// SPDX-License-Identifier: MIT OR Apache-2.0
// The module forms of the losses (torch.nn.MSELoss, ...): a config, optional weight buffers
// (PyTorch's state_dict names) and a forward that calls the functional form.
#include <sstream>

#include "kiln/nn/loss.h"

namespace kiln::nn {

namespace F = functional;

namespace {
Tensor on(const Tensor& t, const Device& device) { return t.defined() ? t.to(device).detach() : Tensor(); }
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
std::string red(const std::string& r) { return "reduction=" + r; }
}  // namespace

MSELoss::MSELoss(const MSELossConfig& c, const Device&) : config(c) {}
Tensor MSELoss::forward(const Tensor& input, const Tensor& target) const {
  return F::mse_loss(input, target, config.reduction);
}
std::string MSELoss::extra_repr() const { return red(config.reduction); }

L1Loss::L1Loss(const L1LossConfig& c, const Device&) : config(c) {}
Tensor L1Loss::forward(const Tensor& input, const Tensor& target) const {
  return F::l1_loss(input, target, config.reduction);
}
std::string L1Loss::extra_repr() const { return red(config.reduction); }

LpLoss::LpLoss(const LpLossConfig& c, const Device&) : config(c) {}
Tensor LpLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::lp_loss(input, target, config.p, config.reduction);
}
std::string LpLoss::extra_repr() const { return "p=" + num(config.p) + ", " + red(config.reduction); }

SmoothL1Loss::SmoothL1Loss(const SmoothL1LossConfig& c, const Device&) : config(c) {}
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) const {
  return F::smooth_l1_loss(input, target, config.reduction, config.beta);
}
std::string SmoothL1Loss::extra_repr() const { return red(config.reduction) + ", beta=" + num(config.beta); }

HuberLoss::HuberLoss(const HuberLossConfig& c, const Device&) : config(c) {}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::huber_loss(input, target, config.reduction, config.delta);
}
std::string HuberLoss::extra_repr() const { return red(config.reduction) + ", delta=" + num(config.delta); }

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyLossConfig& c, const Device& device)
    : config(c), weight(on(c.weight, device)) {
  config.weight = Tensor();
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) const {
  F::CrossEntropyOptions o = config;
  o.weight = weight;
  return F::cross_entropy(input, target, o);
}
std::string CrossEntropyLoss::extra_repr() const {
  return red(config.reduction) + ", ignore_index=" + std::to_string(config.ignore_index) +
         ", label_smoothing=" + num(config.label_smoothing);
}

NLLLoss::NLLLoss(const NLLLossConfig& c, const Device& device) : config(c), weight(on(c.weight, device)) {
  config.weight = Tensor();
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) const {
  F::NLLLossOptions o = config;
  o.weight = weight;
  return F::nll_loss(input, target, o);
}
std::string NLLLoss::extra_repr() const {
  return red(config.reduction) + ", ignore_index=" + std::to_string(config.ignore_index);
}

BCELoss::BCELoss(const BCELossConfig& c, const Device& device) : config(c), weight(on(c.weight, device)) {
  config.weight = Tensor();
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) const {
  return F::binary_cross_entropy(input, target, weight, config.reduction);
}
std::string BCELoss::extra_repr() const { return red(config.reduction); }

BCEWithLogitsLoss::BCEWithLogitsLoss(const BCEWithLogitsLossConfig& c, const Device& device)
    : config(c), weight(on(c.weight, device)), pos_weight(on(c.pos_weight, device)) {
  config.weight = Tensor();
  config.pos_weight = Tensor();
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::binary_cross_entropy_with_logits(
      input, target, {.weight = weight, .pos_weight = pos_weight, .reduction = config.reduction});
}
std::string BCEWithLogitsLoss::extra_repr() const { return red(config.reduction); }

KLDivLoss::KLDivLoss(const KLDivLossConfig& c, const Device&) : config(c) {}
Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::kl_div(input, target, config.reduction, config.log_target);
}
std::string KLDivLoss::extra_repr() const {
  return red(config.reduction) + ", log_target=" + (config.log_target ? "true" : "false");
}

PoissonNLLLoss::PoissonNLLLoss(const PoissonNLLLossConfig& c, const Device&) : config(c) {}
Tensor PoissonNLLLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::poisson_nll_loss(input, target, config);
}
std::string PoissonNLLLoss::extra_repr() const {
  return std::string("log_input=") + (config.log_input ? "true" : "false") +
         ", full=" + (config.full ? "true" : "false") + ", eps=" + num(config.eps) + ", " + red(config.reduction);
}

CosineEmbeddingLoss::CosineEmbeddingLoss(const CosineEmbeddingLossConfig& c, const Device&) : config(c) {}
Tensor CosineEmbeddingLoss::forward(const Tensor& input1, const Tensor& input2, const Tensor& target) const {
  return F::cosine_embedding_loss(input1, input2, target, config.margin, config.reduction);
}
std::string CosineEmbeddingLoss::extra_repr() const {
  return "margin=" + num(config.margin) + ", " + red(config.reduction);
}

MarginRankingLoss::MarginRankingLoss(const MarginRankingLossConfig& c, const Device&) : config(c) {}
Tensor MarginRankingLoss::forward(const Tensor& input1, const Tensor& input2, const Tensor& target) const {
  return F::margin_ranking_loss(input1, input2, target, config.margin, config.reduction);
}
std::string MarginRankingLoss::extra_repr() const {
  return "margin=" + num(config.margin) + ", " + red(config.reduction);
}

HingeEmbeddingLoss::HingeEmbeddingLoss(const HingeEmbeddingLossConfig& c, const Device&) : config(c) {}
Tensor HingeEmbeddingLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::hinge_embedding_loss(input, target, config.margin, config.reduction);
}
std::string HingeEmbeddingLoss::extra_repr() const {
  return "margin=" + num(config.margin) + ", " + red(config.reduction);
}

TripletMarginLoss::TripletMarginLoss(const TripletMarginLossConfig& c, const Device&) : config(c) {}
Tensor TripletMarginLoss::forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) const {
  return F::triplet_margin_loss(anchor, positive, negative, config);
}
std::string TripletMarginLoss::extra_repr() const {
  return "margin=" + num(config.margin) + ", p=" + num(config.p) + ", eps=" + num(config.eps) +
         ", swap=" + (config.swap ? "true" : "false") + ", " + red(config.reduction);
}

CTCLoss::CTCLoss(const CTCLossConfig& c, const Device&) : config(c) {}
Tensor CTCLoss::forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths) const {
  return F::ctc_loss(log_probs, targets, input_lengths, target_lengths, config);
}
std::string CTCLoss::extra_repr() const {
  return "blank=" + std::to_string(config.blank) + ", " + red(config.reduction) +
         ", zero_infinity=" + (config.zero_infinity ? "true" : "false");
}

SoftMarginLoss::SoftMarginLoss(const SoftMarginLossConfig& c, const Device&) : config(c) {}
Tensor SoftMarginLoss::forward(const Tensor& input, const Tensor& target) const {
  return F::soft_margin_loss(input, target, config.reduction);
}
std::string SoftMarginLoss::extra_repr() const { return red(config.reduction); }

MultiMarginLoss::MultiMarginLoss(const MultiMarginLossConfig& c, const Device& device)
    : config(c), weight(on(c.weight, device)) {
  config.weight = Tensor();
}
Tensor MultiMarginLoss::forward(const Tensor& input, const Tensor& target) const {
  F::MultiMarginLossOptions o = config;
  o.weight = weight;
  return F::multi_margin_loss(input, target, o);
}
std::string MultiMarginLoss::extra_repr() const {
  return "p=" + std::to_string(config.p) + ", margin=" + num(config.margin) + ", " + red(config.reduction);
}

GaussianNLLLoss::GaussianNLLLoss(const GaussianNLLLossConfig& c, const Device&) : config(c) {}
Tensor GaussianNLLLoss::forward(const Tensor& input, const Tensor& target, const Tensor& var) const {
  return F::gaussian_nll_loss(input, target, var, config);
}
std::string GaussianNLLLoss::extra_repr() const {
  return std::string("full=") + (config.full ? "true" : "false") + ", eps=" + num(config.eps) + ", " +
         red(config.reduction);
}

}  // namespace kiln::nn
