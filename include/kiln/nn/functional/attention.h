// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// scaled_dot_product_attention.
#include <functional>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// Options of scaled_dot_product_attention (PyTorch's keyword arguments).
struct SdpaOptions {
  /// Undefined for none. Bool: true = take part in attention; float: added to the scores.
  /// Broadcastable to [..., L, S].
  Tensor attn_mask{};
  /// Probability of zeroing an attention weight (the kept ones are scaled by 1 / (1 - p)).
  double dropout_p = 0.0;
  /// Causal (lower-triangular, top-left aligned) mask; attn_mask must then be undefined.
  bool is_causal = false;
  /// Factor applied to q k^T; default 1 / sqrt(E).
  std::optional<double> scale{};
  /// Grouped-query attention: q has Hq heads (dim -3), k and v Hkv heads, Hq % Hkv == 0; query
  /// head h uses key/value head h / (Hq / Hkv).
  bool enable_gqa = false;
  /// When set, applied to the attention weights [..., L, S] instead of the built-in dropout
  /// (lets a caller inject its own dropout, or a deterministic one in tests). On long
  /// sequences it is called once per query chunk, with [..., chunk, S] weights ([..., chunk,
  /// keys up to the chunk's last row] when causal).
  std::function<Tensor(const Tensor&)> dropout{};
};

/// softmax(q k^T * scale + mask) v for q [..., L, E], k [..., S, E], v [..., S, Ev] ->
/// [..., L, Ev]; batch dims broadcast. A row whose keys are all masked out gives zeros (as
/// PyTorch). f16/bf16 compute in f32. Long sequences (many L x S scores) are processed in query
/// chunks, so the extra memory is O(chunk x S), not O(L x S).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o = {});

}  // namespace kiln::nn::functional
