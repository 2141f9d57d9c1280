// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Gradient-ready notifications: the backward pass tells a caller the moment the gradient of a
// chosen leaf is final, while the rest of the pass still runs. Data-parallel training
// (src/dist/ddp.cpp) starts the all-reduce of a bucket of gradients from here, so that
// communication overlaps the rest of backward (PyTorch's DDP hooks the AccumulateGrad nodes the
// same way).
//
// A leaf's gradient is final once every node of the graph with an edge to that leaf has run or
// can no longer run: the engine runs nodes in decreasing creation order (Note [Autodiff design]
// in graph.h), so after the node of sequence number s, no node numbered above s receives a
// gradient any more. Before the pass the engine counts, for each watched leaf, the edges that
// reach it from the nodes under the root; it decrements those counts as the pass moves below
// each node, and reports a leaf when its count reaches zero.
#include <cstddef>
#include <functional>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::autodiff {

/// While alive, backward passes run on this thread report the gradients of `leaves`: fn(i, g)
/// is called once for each leaves[i] that the pass gives a gradient, with that gradient, as soon
/// as no later step of the pass can add to it (in the order they become final; the rest, if
/// any, just before backward returns). Leaves the pass gives no gradient are not reported.
/// Tensors that are not leaves (results of recorded ops) are never reported. The callback runs
/// inside backward (grad mode off, unless create_graph); an exception it throws leaves backward. Scopes do not nest:
/// the innermost one is active, and it is not active for backward passes run from inside its callback.
class GradReadyScope {
 public:
  using Fn = std::function<void(size_t index, const Tensor& grad)>;
  GradReadyScope(std::vector<Tensor> leaves, Fn fn);
  ~GradReadyScope();
  GradReadyScope(const GradReadyScope&) = delete;
  GradReadyScope& operator=(const GradReadyScope&) = delete;

  const std::vector<Tensor>& leaves() const { return leaves_; }
  const Fn& fn() const { return fn_; }

 private:
  std::vector<Tensor> leaves_;
  Fn fn_;
  GradReadyScope* prev_;
};

/// The scope active on this thread (nullptr when none); for the engine.
GradReadyScope* current_grad_ready_scope();

}  // namespace kiln::autodiff
