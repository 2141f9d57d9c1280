// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The RNN transducer loss (Graves 2012), as torchaudio.functional.rnnt_loss and
// torchaudio.transforms.RNNTLoss.
#include <cstdint>
#include <string>

#include "kiln/nn/config.h"
#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// Options of rnnt_loss (torchaudio's names and defaults).
struct RNNTLossOptions {
  int64_t blank = -1;              ///< index of the blank class; negative counts from the end (-1: the last)
  double clamp = -1;               ///< > 0: the gradient with respect to logits is clamped to [-clamp, clamp]
  std::string reduction = "mean";  ///< "none" ([B]), "mean" (over the batch) or "sum"
  bool fused_log_softmax = true;   ///< log_softmax over the classes first; false: logits are log-probabilities
  KILN_CONFIG(RNNTLossConfig, blank, clamp, reduction, fused_log_softmax)
};

/// The negative log-likelihood of each target sequence under an RNN transducer, summed over
/// every alignment. logits [B, T, U + 1, V] (joint network outputs: frame t, u labels emitted),
/// targets [B, S] integers (S >= every target length; entries past a target's length are
/// ignored), logit_lengths [B] in [1, T], target_lengths [B] in [0, U]. Computed with the alpha
/// recursion in log space along the anti-diagonals t + u, written with differentiable ops, so
/// autodiff gives the gradient (of any order). f16 and bf16 logits are computed in f32.
Tensor rnnt_loss(const Tensor& logits, const Tensor& targets, const Tensor& logit_lengths, const Tensor& target_lengths,
                 const RNNTLossOptions& options = {});

}  // namespace kiln::nn::functional

namespace kiln::nn {

using RNNTLossConfig = functional::RNNTLossOptions;

/// torchaudio.transforms.RNNTLoss: logits, targets, logit_lengths, target_lengths -> loss.
struct RNNTLoss : Module {
  RNNTLossConfig config;
  RNNTLoss() = default;
  explicit RNNTLoss(const RNNTLossConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& logits, const Tensor& targets, const Tensor& logit_lengths,
                 const Tensor& target_lengths) const;
  Tensor operator()(const Tensor& logits, const Tensor& targets, const Tensor& logit_lengths,
                    const Tensor& target_lengths) const {
    return forward(logits, targets, logit_lengths, target_lengths);
  }
  std::string extra_repr() const override;
  KILN_VISIT(RNNTLoss, config)
};

}  // namespace kiln::nn
