// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// ONNX export: a captured graph (kiln/capture.h) written as an ONNX model (docs/export.md).
//
//   kiln::onnx::export_model(model, [&](const std::vector<Tensor>& x) {
//     return std::vector<Tensor>{model.forward(x[0])};
//   }, {kiln::zeros({1, 784})}, "mlp.onnx", {.dynamic = {{"input", {0}}}});
//
// Parameters become initializers named by their state-dict names; views of op inputs become
// Reshape / Slice / Transpose / Expand nodes; an op without an ONNX form is a kiln::Error naming it.
#include <map>
#include <string>
#include <vector>

#include "kiln/capture.h"

namespace kiln::onnx {

/// Options of export_model.
struct ExportOptions {
  /// Dynamic axes: input or output name -> its dims whose size may change ({"input", {0}}: a
  /// dynamic batch). A graph that fixes such a dim (a reshape to its example size) is an error.
  std::map<std::string, std::vector<int64_t>> dynamic;
  /// The default-domain opset, 17 to 21: each op is written in that opset's form (the axes of
  /// ReduceMean, ReduceMax, ... are an input from 18).
  int64_t opset = 17;
  /// Graph input and output names (default: "input"/"output", or numbered for several).
  std::vector<std::string> input_names, output_names;
  std::string producer = "kiln";
  /// Fold views of parameters (a linear layer's transposed weight) into initializers of their
  /// own, named after the parameter ("fc1.weight_3"), instead of Transpose / Reshape nodes over
  /// the state-dict initializer. Constants are always folded.
  bool fold_constants = false;
};

/// The ONNX ModelProto bytes of a captured graph.
std::string export_bytes(const CapturedGraph& graph, const ExportOptions& options = {});
/// Writes a captured graph as an ONNX model file.
void export_model(const CapturedGraph& graph, const std::string& path, const ExportOptions& options = {});
/// Captures fn on module with example_inputs (kiln::capture) in eval mode (dropout off, batch
/// norm on its running statistics; the module's mode is restored after) and writes the graph.
void export_model(nn::Module& module, const CaptureFunction& fn, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options = {});

}  // namespace kiln::onnx
