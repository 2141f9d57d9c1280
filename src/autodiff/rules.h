// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Registration of the gradient rules. Each op family registers the rules of its primitives
// from the file beside its frontend (src/ops/<family>_grad.cpp); register_all_rules() calls them
// all once, the first time a rule is looked up.
#include "autodiff/graph.h"

namespace kiln::autodiff {

void register_all_rules();

void register_unary_grads();
void register_binary_grads();
void register_reduce_grads();
void register_index_grads();
void register_movement_grads();
void register_nn_grads();
void register_linalg_grads();
void register_fft_grads();

/// Sums g over the dims that were broadcast to go from `shape` to g's shape (reverse of
/// broadcasting): the gradient of an input that was broadcast in a binary op.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace kiln::autodiff
