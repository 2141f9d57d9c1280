// SPDX-License-Identifier: MIT OR Apache-2.0
// Internal to the micro target of ONNX code generation (codegen_micro*.cpp): a model lowered to
// a straight list of kernel calls over fixed shapes, its arena plan, and its emission.
#pragma once

#include <algorithm>
#include <cstdint>
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
  enum Kind {
    Conv,
    Linear,
    MatMul,
    MaxPool,
    AvgPool,
    Unary,
    Binary,
    Affine,
    Softmax,
    Reduce,
    Permute,
    Concat,
    Alias,
    ConvTranspose,
    Resize,
    Gather,
    CastInt,
    LayerNorm,
    Lstm
  };
  Kind kind = Alias;
  std::string what;  ///< "Conv 'conv1'" for comments and messages
  std::vector<std::string> in;
  std::string out;
  /// Further values the step writes (LSTM: Y_h, Y_c and its scratch), planned like `out`.
  std::vector<std::string> more_out;
  kiln_micro::Conv2dParams conv{};
  kiln_micro::ConvTranspose2dParams convt{};
  kiln_micro::Resize2dParams resize{};
  kiln_micro::LstmParams lstm{};
  kiln_micro::LinearParams lin{};
  kiln_micro::Pool2dParams pool{};
  kiln_micro::BroadcastParams bc{};
  kiln_micro::PermuteParams perm{};
  kiln_micro::BinOp bop = kiln_micro::kAdd;
  std::string unary;  ///< relu, clip, leaky_relu, sigmoid, tanh, exp, erf
  float alpha = 0, lo = 0, hi = 0;
  int const_side = -1;                    ///< Binary: the operand (0 a, 1 b) that is the constant w; -1 none
  int32_t outer = 0, len = 0, inner = 0;  ///< Softmax / Affine / Reduce extents
  kiln_micro::ReduceOp rop = kiln_micro::kReduceMean;
  int32_t batch = 1;  ///< MatMul: products of [m, k] x [k, n] one after another; Gather: indices
  int32_t x_off = 0;  ///< Permute: the first element of x read (a Slice or Split view)
  /// Resize: the row and column tables y0, y1, x0, x1 (w, b: the weights wy, wx); Gather: the
  /// constant indices, when they are not a run-time value.
  std::vector<std::vector<int32_t>> tables;
  /// Lstm: the run-time initial h / c (index into `in`), -1 for the constants h0 / c0 (or none).
  int h0_in = -1, c0_in = -1;
  std::vector<float> h0, c0, peep;  ///< Lstm: constant initial states, peepholes [num_dir, 3 * hidden]
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
  /// Run-time integer values (graph inputs and their views) -> their C type (int64_t, int32_t).
  std::map<std::string, std::string> int_type;
  /// Outputs that are constants (they do not depend on the inputs): copied from these.
  std::map<std::string, std::vector<float>> const_outputs;
};

/// What the lowering of one node sees (built in codegen_micro.cpp): the node, its input values
/// (run-time ones as zeros of their fixed shapes), which inputs are run-time values, its outputs'
/// values and the opset.
struct NodeView {
  const proto::NodeP& n;
  const std::vector<Tensor>& in;
  const std::vector<Tensor>& outs;
  std::vector<bool> rt;
  int64_t opset = 0;
  std::string what;
  bool is_rt(size_t i) const { return i < rt.size() && rt[i]; }
};

/// Lowers the ops of codegen_micro_ops.cpp (ConvTranspose, Resize, Upsample, Gather, Cast from integers,
/// LayerNormalization, Erf, Slice, Split, LSTM) into m's steps. Returns false when v's op is not
/// one of them; `why` is set when the op is one of them but this form is not supported.
bool lower_more(const NodeView& v, Lowered& m, std::string& why);

using Ints = std::vector<int64_t>;
inline Ints dims_of(const Tensor& t) { return Ints(t.shape().begin(), t.shape().end()); }
inline int64_t prod(const Ints& v, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, v.size()); ++i) p *= v[i];
  return p;
}
inline Ints contiguous_strides(const Ints& s) {
  Ints st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}
inline std::vector<float> floats(const Tensor& t) { return cast(t, f32).contiguous().to_vector<float>(); }
inline int64_t attr_i(const proto::NodeP& n, const char* k, int64_t def) {
  const auto* a = n.attr(k);
  return a ? a->i : def;
}
inline float attr_f(const proto::NodeP& n, const char* k, float def) {
  const auto* a = n.attr(k);
  return a ? a->f : def;
}
inline std::string attr_s(const proto::NodeP& n, const char* k, const std::string& def) {
  const auto* a = n.attr(k);
  return a ? a->s : def;
}
inline Ints attr_ints(const proto::NodeP& n, const char* k, Ints def) {
  const auto* a = n.attr(k);
  return a && !a->ints.empty() ? a->ints : def;
}

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
