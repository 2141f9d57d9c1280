// SPDX-License-Identifier: MIT OR Apache-2.0
// Internal to the micro target of ONNX code generation (codegen_micro*.cpp): a model lowered to
// a straight list of kernel calls over fixed shapes, its arena plan, and its emission.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "../micro/kiln_micro.h"
#include "kiln/onnx_micro.h"
#include "onnx/ops.h"

namespace kiln::onnx::micro {

/// One kernel call of the lowered model. `in` are the run-time values it reads (graph inputs or
/// values computed by earlier steps), `out` the one value it writes; constants it reads are in
/// w / b (owned, already transformed: transposed, scaled, folded).
struct Step {
  enum Kind { Conv, Linear, MatMul, MaxPool, AvgPool, Unary, Binary, Affine, Softmax, Reduce, Permute, Concat, Alias };
  Kind kind = Alias;
  std::string what;  ///< "Conv 'conv1'" for comments and messages
  std::vector<std::string> in;
  std::string out;
  kiln_micro::Conv2dParams conv{};
  kiln_micro::LinearParams lin{};
  kiln_micro::Pool2dParams pool{};
  kiln_micro::BroadcastParams bc{};
  kiln_micro::PermuteParams perm{};
  kiln_micro::BinOp bop = kiln_micro::kAdd;
  std::string unary;  ///< relu, clip, leaky_relu, sigmoid, tanh, exp
  float alpha = 0, lo = 0, hi = 0;
  int const_side = -1;                    ///< Binary: the operand (0 a, 1 b) that is the constant w; -1 none
  int32_t outer = 0, len = 0, inner = 0;  ///< Softmax / Affine / Reduce extents
  kiln_micro::ReduceOp rop = kiln_micro::kReduceMean;
  int32_t batch = 1;  ///< MatMul: products of [m, k] x [k, n] one after another
  std::vector<float> w, b;
  /// Concat: per part, its run-time value (index into `in`) or -1 for a constant (in `parts_c`),
  /// its row length and its offset in the output row.
  struct Part {
    int in = -1;
    std::vector<float> data;
    int32_t len = 0, offset = 0;
  };
  std::vector<Part> parts;
  int32_t rows = 0, row_len = 0;  ///< Concat: the output as [rows, row_len]
  bool inplace_ok = false;        ///< out may share the storage of in[0] (elementwise)
};

/// A lowered model: its inputs and outputs (value names, fixed shapes) and its steps.
struct Lowered {
  std::vector<std::string> inputs, outputs;
  std::map<std::string, std::vector<int64_t>> shape;  ///< every run-time value's shape
  std::vector<Step> steps;
  /// Outputs that are constants (they do not depend on the inputs): copied from these.
  std::map<std::string, std::vector<float>> const_outputs;
};

/// Lowers the model at `path` (codegen_micro.cpp): fixes shapes, folds constants, maps nodes to
/// kernels and fuses Conv + BatchNormalization, Linear + bias and Conv/Linear + Relu/Clip.
Lowered lower(const std::string& path, const MicroOptions& o);

/// Where each run-time value lives, from the liveness plan (codegen_micro_emit.cpp).
struct Plan {
  std::map<std::string, int> input_of;    ///< value -> graph input index (read in place)
  std::map<std::string, int64_t> offset;  ///< value -> byte offset in the arena
  int64_t arena_bytes = 0, lower_bound = 0;
};

/// Plans the arena of m: values that alias (reshapes, in-place elementwise) share storage;
/// storages get offsets greedily, largest first, reusing space whose lifetime is over.
Plan plan_arena(const Lowered& m);

/// Writes <name>.h, <name>.cpp and the kernel files; fills r's paths and counts.
void emit(const Lowered& m, const Plan& p, const MicroOptions& o, const std::string& name, MicroResult& r);

}  // namespace kiln::onnx::micro
