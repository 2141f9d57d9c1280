// SPDX-License-Identifier: MIT OR Apache-2.0
#include "autodiff/rules.h"

#include "kiln/ops.h"

namespace kiln::autodiff {

void register_all_rules() {
  register_unary_grads();
  register_binary_grads();
  register_reduce_grads();
  register_index_grads();
  register_movement_grads();
  register_nn_grads();
  register_linalg_grads();
  register_fft_grads();
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  KILN_ASSERT(lead >= 0);
  Dims dims;
  for (int64_t i = 0; i < g.dim(); ++i)
    if (i < lead || (shape[static_cast<size_t>(i - lead)] == 1 && g.size(i) != 1)) dims.push_back(i);
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

}  // namespace kiln::autodiff
