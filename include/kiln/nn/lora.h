// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// LoRA: low-rank adapters on Linear layers and attention projections, for fine-tuning a frozen
// model, and their merge back into plain weights for export (docs/modules.md).
//
//   int64_t n = nn::apply_lora(model, {.rank = 8, .alpha = 16, .targets = {"self_attn", "fc1"}});
//   optim::AdamW opt(nn::lora_parameters(model), {.lr = 1e-3});   // only the adapters train
//   ... fine-tune ...
//   nn::merge_lora(model);           // W += (alpha / rank) B A; the model is plain again
//   store::save(model, "model.safetensors");
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

/// Options of apply_lora.
struct LoraConfig {
  int64_t rank = 8;   ///< r, the adapters' inner size (>= 1)
  double alpha = 16;  ///< the update is scaled by alpha / rank
  /// Module paths to adapt ("encoder.layers.0.self_attn", or a last component such as "fc1" or
  /// "self_attn"): a Linear or MultiHeadAttention is adapted when its path, or the path of a
  /// module holding it, matches. Empty: every Linear and MultiHeadAttention.
  std::vector<std::string> targets{};
};

/// The low-rank update of a weight W [out, in]: delta = scaling · B A with A [rank, in]
/// (initialised as a Linear's weight: U(-1/sqrt(in), 1/sqrt(in))) and B [out, rank] (zeros, so
/// an adapted layer starts equal to the original). Parameter names: "lora_A", "lora_B".
struct LoraAdapter : Module {
  Param lora_A, lora_B;
  double scaling = 1;
  LoraAdapter() = default;
  /// Adapters for a weight [out_features, in_features] of `dtype` on `device`.
  LoraAdapter(int64_t in_features, int64_t out_features, const LoraConfig& c, DType dtype, const Device& device);
  /// scaling · B A: [out, in].
  Tensor delta() const;
  /// scaling · (x Aᵀ) Bᵀ: [..., out] for x [..., in] (the update's output without forming delta).
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;
  KILN_VISIT(LoraAdapter, lora_A, lora_B)
};

/// Freezes `model` and adds adapters to every targeted Linear (its field `lora`) and
/// MultiHeadAttention (`q_lora`, `k_lora`, `v_lora` on the query, key and value projections;
/// its out_proj is a Linear). Only the adapters track gradients afterwards. Returns the number
/// of adapters added; throws when a target matches nothing or a layer already has one.
int64_t apply_lora(Module& model, const LoraConfig& config);
/// The adapters' parameters (what to give the optimizer).
std::vector<Tensor> lora_parameters(Module& model);
/// Folds every adapter into its weight (W += scaling · B A) and removes it: the model has its
/// original structure and state names again, with the fine-tuned weights. The merged weights
/// stay frozen (call unfreeze() to train them). Returns the number of adapters merged.
int64_t merge_lora(Module& model);

}  // namespace kiln::nn
