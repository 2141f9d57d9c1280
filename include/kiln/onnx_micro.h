// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// ONNX -> freestanding C++ for microcontrollers (`kiln-onnx MODEL.onnx --target micro`,
// docs/micro.md): one source and one header with no heap, exceptions, RTTI or threads, a static
// arena sized at generation time from a liveness plan, weights as const arrays, and an entry
// point that returns an error code for bad buffers. The kernels it calls (kiln_micro.h/.cpp)
// are written beside it. Shapes are fixed at generation time.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::onnx {

/// Options of generate_micro().
struct MicroOptions {
  std::string out_dir = ".";  ///< where <name>.h, <name>.cpp, kiln_micro.h and kiln_micro.cpp go
  /// The C identifier prefix and file stem: the entry point is <name>_run; default: the model's
  /// file name in snake_case.
  std::string name;
  /// Sizes of symbolic input dims by name (dim_param), e.g. {"batch", 1}.
  std::map<std::string, int64_t> dims;
  /// Whole input shapes by input name; they override the declared shapes.
  std::map<std::string, std::vector<int64_t>> shapes;
  /// Graph inputs bound to constants, by input name: the path of a TensorProto file (.pb) holding
  /// the value (a model that takes its weights as inputs). Bound inputs leave the entry point.
  std::map<std::string, std::string> constants;
};

/// What generate_micro() wrote and planned.
struct MicroResult {
  std::string header, source;        ///< paths of the model's files
  std::vector<std::string> kernels;  ///< paths of the kernel files written beside them
  int64_t arena_bytes = 0;           ///< the static arena (greedy offsets of the liveness plan)
  int64_t lower_bound_bytes = 0;     ///< the plan's bound: the most bytes live at one step
  int64_t weight_bytes = 0;          ///< const data (weights, folded constants)
  int64_t steps = 0;                 ///< kernel calls per inference
  std::vector<std::string> plan;     ///< one line per step: kernel, node, output shape
};

/// Generates the micro target of the ONNX model at `model_path`. Every run-time value must be
/// f32 with a shape fixed by the inputs' shapes (declared, or given in options); nodes whose
/// inputs are all constants (or shapes) are folded. Throws kiln::Error naming the input whose
/// shape is not fixed, or listing every unsupported op (with its node) at once.
MicroResult generate_micro(const std::string& model_path, const MicroOptions& options = {});

/// The op types the micro target runs at inference time (others may still be folded when
/// their inputs are constants).
std::vector<std::string> micro_ops();

}  // namespace kiln::onnx
