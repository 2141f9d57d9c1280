// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Sampling from logits for generation: top-k and top-p (nucleus) filtering and one draw per row.
#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// logits [..., V] with every entry below the k-th largest of its row set to -inf (ties with
/// the k-th are kept). k <= 0 or k >= V leaves the logits unchanged.
Tensor top_k_filter(const Tensor& logits, int64_t k);
/// logits [..., V] keeping, per row, the smallest set of largest-probability entries whose
/// softmax probabilities sum to at least top_p (always the most likely one); the rest -inf.
/// top_p in (0, 1]; 1 leaves the logits unchanged.
Tensor top_p_filter(const Tensor& logits, double top_p);

/// Options of sample_logits.
struct SamplingOptions {
  double temperature = 1.0;  ///< logits are divided by it; 0 picks the argmax (greedy)
  int64_t top_k = 0;         ///< 0: no top-k filtering
  double top_p = 1.0;        ///< 1: no nucleus filtering
};
/// One token id per row of logits [V] or [N, V] -> [] or [N] (i64): temperature, then top-k,
/// then top-p, then a multinomial draw (seeded by manual_seed).
Tensor sample_logits(const Tensor& logits, const SamplingOptions& o = {});

}  // namespace kiln::nn::functional
