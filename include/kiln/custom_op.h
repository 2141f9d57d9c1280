// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Custom ops: a kernel written once in the kernel language (kiln/kernel.h) used as a tensor op,
// with a shape rule and a backward, so that it runs on every device and under autodiff
// (docs/kernels.md, "Custom ops"):
//
//   kiln::CustomOp swish({.name = "swish", .kernel = [](const std::vector<kiln::Tensor>& in) {
//     return kiln::kernel::trace("swish", [](kiln::kernel::Builder& b) { ... });
//   }, .backward = ...});
//   kiln::Tensor y = swish(x);
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernel.h"
#include "kiln/tensor.h"

namespace kiln {

/// How a custom op's kernel is launched for one call.
struct CustomLaunch {
  kernel::Dim3 groups;               ///< groups to run
  std::vector<kernel::Arg> scalars;  ///< the kernel's scalar arguments, in declaration order
};

/// What the backward of a custom op receives.
struct CustomGradArgs {
  std::vector<Tensor> inputs;        ///< the op's inputs (recording, for gradients of gradients)
  std::vector<Tensor> outputs;       ///< its outputs (detached: not differentiated again)
  std::vector<Tensor> grad_outputs;  ///< the gradient of each output (zeros where none came)
};

/// The definition of a custom op.
struct CustomOpSpec {
  /// The op's name in errors.
  std::string name;
  /// The kernel for these inputs (traced once per combination of input dtypes and kept). Its
  /// buffers, in declaration order, are the op's inputs, then its outputs, with the tensors'
  /// element types; inputs are made contiguous first. Required.
  std::function<kernel::Kernel(const std::vector<Tensor>& inputs)> kernel;
  /// Output shapes and dtypes. Default: one output with input 0's shape and dtype.
  std::function<std::vector<std::pair<Shape, DType>>(const std::vector<Tensor>& inputs)> outputs;
  /// Groups and scalars of a call. Default: one thread per element of output 0 (every input must
  /// have as many elements), and the element count as the kernel's scalar when it has one.
  std::function<CustomLaunch(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs)> launch;
  /// The gradient of each input (undefined: none), written with tensor ops or other custom ops,
  /// so gradients of gradients work when those do. Empty: the op is not differentiable.
  std::function<std::vector<Tensor>(const CustomGradArgs&)> backward;
};

/// A registered custom op. Calls run the kernel on the CPU (compiled once, cached on disk);
/// inputs on another device are brought to the CPU and the outputs returned to that device, so
/// every device runs it. Pending fused work on the inputs is finished first. Thread-safe.
class CustomOp {
 public:
  /// Checks the spec (a name and a kernel function); throws kiln::Error otherwise.
  explicit CustomOp(CustomOpSpec spec);
  /// Runs the op; returns its outputs.
  std::vector<Tensor> call(const std::vector<Tensor>& inputs) const;
  /// Runs an op with one output.
  template <class... T>
  Tensor operator()(const T&... inputs) const {
    std::vector<Tensor> out = call({inputs...});
    return out.at(0);
  }
  const std::string& name() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

}  // namespace kiln
