// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Argument types shared by the NN functional ops.
#include <cstdint>
#include <initializer_list>

#include "kiln/shape.h"

namespace kiln::nn::functional {

/// One int, or one per spatial dim: a single value is repeated for every spatial dim, as
/// PyTorch's `_pair`/`_triple` do. `IntList(2)`, `IntList{1, 2}`, `IntList(Dims{...})`.
class IntList {
 public:
  IntList(int64_t v) : v_{v} {}  // NOLINT(google-explicit-constructor): as in PyTorch, 2 means (2, 2)
  IntList(std::initializer_list<int64_t> v) : v_(v) {}
  IntList(Dims v) : v_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  /// The values for n spatial dims; throws kiln::Error naming `op` and `what` when the list
  /// has neither 1 nor n entries.
  Dims expand(int64_t n, const char* op, const char* what) const;
  const Dims& values() const { return v_; }

 private:
  Dims v_;
};

}  // namespace kiln::nn::functional
