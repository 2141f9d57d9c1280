// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Reverse-mode automatic differentiation. Switch it on per device with
// `Device::cpu().autodiff()`; tensors on such a device record the ops applied to them once
// `require_grad()` is called on an input, and `loss.backward()` returns their gradients.
#include <memory>
#include <unordered_map>

#include "kiln/tensor.h"

namespace kiln {

/// The result of a backward pass: the gradient of every tensor it reached that requires
/// gradients (leaves, and intermediate tensors still alive). Look one up with `x.grad(grads)`.
class Gradients {
 public:
  /// The gradient of t, or an undefined tensor when t has none.
  Tensor get(const Tensor& t) const;
  /// Removes and returns t's gradient (undefined when none).
  Tensor remove(const Tensor& t);
  /// Number of tensors with a gradient.
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }

  /// For the engine: adds g to the gradient held for `key` (summing over uses).
  void accumulate(const std::shared_ptr<AutogradMeta>& key, const Tensor& g);

 private:
  struct Entry {
    std::shared_ptr<AutogradMeta> key;  // keeps the key alive while the entry exists
    Tensor grad;
  };
  std::unordered_map<const AutogradMeta*, Entry> map_;
};

/// True unless a NoGradGuard is active on this thread.
bool grad_enabled();
/// Sets whether ops are recorded on this thread; returns the previous setting.
bool set_grad_enabled(bool on);

/// Within its scope ops record no graph (inference, optimizer updates). Nests.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(set_grad_enabled(false)) {}
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace kiln
