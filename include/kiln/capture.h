// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Graph capture: run a function on the capture device, which computes nothing and records every
// primitive op it is asked to run, and get the op graph back (docs/export.md).
//
//   kiln::CapturedGraph g = kiln::capture(model, [&](const std::vector<Tensor>& x) {
//     return std::vector<Tensor>{model.forward(x[0])};
//   }, {kiln::zeros({1, 784})});
//   std::cout << g.str();
//
// Values are buffers: every op input is a view (TensorDesc: shape, strides, offset) of a value,
// since views never reach a backend in Kiln. A value is a graph input, a parameter (named by its
// state-dict name), a constant (bytes written from the host inside the function: tensor({...}),
// the 0-d tensor of `x * 0.5`) or the output of an op. An op that reads only constants is
// computed while capturing and its result is a constant (shape arithmetic that the program reads
// back, as in an imported ONNX model), so the graph holds the ops that depend on the inputs.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {
namespace ir {
struct Op;
}
namespace nn {
class Module;
}

/// One value of a captured graph: a buffer.
struct CapturedValue {
  enum class Kind : uint8_t { Input, Param, Constant, Op };
  Kind kind = Kind::Op;
  std::string name;  ///< an input's name, a parameter's state-dict name; empty for others
  /// Inputs, parameters and op outputs: the tensor's shape (contiguous). Constants: one dim,
  /// the element count in the dtype of their first use.
  Shape shape;
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;  ///< parameters and constants: their data
  int64_t op = -1;             ///< Kind::Op: the index of the op that wrote it
};

/// A view of a value, as an op input or a graph output reads it.
struct CapturedUse {
  int64_t value = -1;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  ///< in elements
  DType dtype = DType::F32;
};

/// One recorded primitive: its IR record (kind, attributes, descriptors) and the values it
/// reads (inputs[i] is viewed by op.inputs[i]) and writes.
struct CapturedNode {
  std::shared_ptr<const ir::Op> op;
  std::vector<int64_t> inputs, outputs;
};

/// A captured op graph.
struct CapturedGraph {
  std::vector<CapturedValue> values;
  std::vector<CapturedNode> nodes;
  std::vector<int64_t> inputs;       ///< values, in the order of the example inputs
  std::vector<int64_t> params;       ///< values, in state-dict order
  std::vector<CapturedUse> outputs;  ///< in the order the function returned them
  std::vector<std::string> output_names;
  /// The op names of the nodes in order ("MatMul", "Relu", ...).
  std::vector<std::string> op_names() const;
  /// One line per node: "%4 = MatMul(%0, fc1.weight) [2, 3] f32".
  std::string str() const;
};

/// Options of capture().
struct CaptureOptions {
  /// Names of the graph inputs (default "input", or "input0", "input1", ... for several).
  std::vector<std::string> input_names;
  /// Names of the graph outputs (default "output", or "output0", ...).
  std::vector<std::string> output_names;
};

using CaptureFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// The capture device ("capture" in Device::list()): allocates no memory and computes nothing
/// (a kind of null device: is_null() is true, so checks that need values are skipped), keeps the
/// bytes written to it from the host, and records the ops run on it while capture() runs.
/// Reading a value that an op computed throws kiln::Error naming that op.
Device capture_device();

/// Runs fn once on the capture device with copies of example_inputs and returns its op graph.
/// Throws kiln::Error when fn reads a computed value on the host (`.item()`, `to_vector`), or
/// uses a tensor computed outside fn on the capture device.
CapturedGraph capture(const CaptureFunction& fn, const std::vector<Tensor>& example_inputs,
                      const CaptureOptions& options = {});
/// The same with the parameters and buffers of `module` recorded by their state-dict names
/// (fn calls the module; it runs on the capture device and is moved back afterwards).
CapturedGraph capture(nn::Module& module, const CaptureFunction& fn, const std::vector<Tensor>& example_inputs,
                      const CaptureOptions& options = {});

}  // namespace kiln
