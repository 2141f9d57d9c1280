// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Distances and similarities (torch.nn.functional.cosine_similarity, pairwise_distance).
#include "kiln/tensor.h"

namespace kiln::nn::functional {

/// x1 . x2 / max(||x1|| ||x2||, eps) along dim, x1 and x2 broadcast together; the dim is
/// removed. Floating inputs.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
/// ||x1 - x2 + eps||_p over the last dim (x1 and x2 broadcast together), kept with keepdim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6, bool keepdim = false);

}  // namespace kiln::nn::functional
