// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// ONNX import, run-time path: load a .onnx model and run it on any device with shapes known
// only at run time. `kiln::onnx::Model m("model.onnx", device); auto outs = m.run({x});`
// The protobuf decoding is Kiln's own (no libprotobuf). Bad models throw kiln::Error naming the
// node and the problem; a model with unsupported ops gets one error listing all of them.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::onnx {

/// One dimension of a declared shape: a fixed size, or a symbolic name (dim_param) / unknown.
struct Dim {
  std::optional<int64_t> value;  ///< the size, when fixed
  std::string param;             ///< the symbolic name ("batch", "seq"), may be empty
};

/// A graph input or output as declared in the model.
struct ValueInfo {
  std::string name;
  std::optional<DType> dtype;  ///< absent for types Kiln has no dtype for (or non-tensors)
  bool has_shape = false;      ///< false when the model declares no shape (any rank)
  std::vector<Dim> shape;
};

/// An op the run-time path cannot execute.
struct UnsupportedOp {
  std::string op_type;
  std::string domain;     ///< "" for the default ONNX domain
  std::string node_name;  ///< may be empty in the model
  int64_t opset = 0;      ///< the model's opset version for that domain
  std::string reason;     ///< "no kernel", "unsupported domain", ...
};

/// Options of Model loading.
struct LoadOptions {
  /// Load even when some ops are unsupported (see Model::unsupported); running such a node
  /// throws. By default loading throws one kiln::Error listing every unsupported op.
  bool allow_unsupported = false;
  /// Load-time optimisations: constant folding (nodes whose inputs are all constants run once at
  /// load) and folding inference BatchNormalization into a preceding Conv's constant weights.
  /// Results may differ from the unoptimised graph by float rounding.
  bool optimize = true;
};

/// A loaded ONNX model. Cheap to copy (shares the loaded graph and weights); `run` is const and
/// does not change the model.
class Model {
 public:
  /// Loads the file at `path` onto `device` (weights live there; ops run there; outputs are
  /// returned there). On the fused CPU the model's own plan runs on the plain CPU: it fuses
  /// conv+activation, matmul+bias and layer norm itself.
  explicit Model(const std::string& path, const Device& device = Device::default_device(),
                 const LoadOptions& options = {});
  /// Loads a model from its serialized bytes.
  static Model from_bytes(std::string_view bytes, const Device& device = Device::default_device(),
                          const LoadOptions& options = {});

  /// Runs the graph on the inputs, in the order of inputs() (graph inputs that have an
  /// initializer are optional and are not listed there). Returns the outputs in the order of
  /// outputs(). Shapes may differ from run to run (dynamic batch and sequence lengths).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  /// `m.run({x, y})`: the same (avoids an ambiguity with the named overload).
  std::vector<Tensor> run(std::initializer_list<Tensor> inputs) const { return run(std::vector<Tensor>(inputs)); }
  /// The same with inputs by name; a name that is an initializer overrides it.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) const;

  /// Graph inputs to feed (those without an initializer), with declared dtypes and shapes.
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  /// Every op that cannot run (empty unless loaded with allow_unsupported).
  const std::vector<UnsupportedOp>& unsupported() const;
  /// The model's opset version for `domain` ("" = ai.onnx), 0 when it imports none.
  int64_t opset(const std::string& domain = "") const;
  const Device& device() const;
  /// The main graph's run-time plan, one line per step in run order: the node's op type and
  /// name, then what the plan fused into it ("Conv conv2 + Conv conv3 + residual Add + Relu").
  /// With `optimize = false`: one line per node, nothing fused.
  std::vector<std::string> plan() const;

  struct Impl;

 private:
  explicit Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// Decodes a serialized TensorProto (a .pb file of the ONNX test data) into a tensor on device.
Tensor tensor_from_proto(std::string_view bytes, const Device& device = Device::default_device());
/// Reads and decodes a TensorProto file.
Tensor load_tensor_proto(const std::string& path, const Device& device = Device::default_device());
/// The op types (default domain) the run-time path implements, sorted.
std::vector<std::string> supported_ops();

// ---- the op mapping as functions (used by generated code) ------------------------------------

namespace ops {

/// An ONNX attribute value: `{"axis", 1}`, `{"perm", std::vector<int64_t>{0, 2, 1}}`,
/// `{"mode", "linear"}`, `{"value", tensor}`.
struct Attr {
  enum class Kind { Int, Float, String, Ints, Floats, Tensor };
  Kind kind = Kind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  kiln::Tensor t;
  Attr(int v) : kind(Kind::Int), i(v) {}                                    // NOLINT
  Attr(int64_t v) : kind(Kind::Int), i(v) {}                                // NOLINT
  Attr(float v) : kind(Kind::Float), f(v) {}                                // NOLINT
  Attr(double v) : kind(Kind::Float), f(static_cast<float>(v)) {}           // NOLINT
  Attr(const char* v) : kind(Kind::String), s(v) {}                         // NOLINT
  Attr(std::string v) : kind(Kind::String), s(std::move(v)) {}              // NOLINT
  Attr(std::vector<int64_t> v) : kind(Kind::Ints), ints(std::move(v)) {}    // NOLINT
  Attr(std::vector<float> v) : kind(Kind::Floats), floats(std::move(v)) {}  // NOLINT
  Attr(kiln::Tensor v) : kind(Kind::Tensor), t(std::move(v)) {}             // NOLINT
};
/// Named attributes of one op call.
using Attrs = std::vector<std::pair<std::string, Attr>>;

/// Runs the ONNX op `op_type` (default domain) with the semantics of `opset`: the same function
/// the run-time path runs for such a node. Absent optional inputs are undefined tensors.
/// Returns `n_outputs` outputs (an optional output the op does not produce is undefined).
/// Throws kiln::Error for an unknown op or bad inputs.
std::vector<Tensor> call(const std::string& op_type, int64_t opset, const std::vector<Tensor>& inputs,
                         const Attrs& attrs = {}, size_t n_outputs = 1);

// Control flow in generated code (If, Loop, Scan), with the run-time path's semantics.

/// The value of a one-element condition tensor (If's cond, Loop's cond); throws otherwise.
bool condition(const Tensor& cond);
/// Loop's trip count M (a one-element integer tensor).
int64_t trip_count(const Tensor& m);
/// A Scan input with its scan axis moved first (`axis` may be negative) and, when `reverse`,
/// its elements in reverse order.
Tensor scan_input(const Tensor& x, int64_t axis, bool reverse);
/// The common length of Scan inputs made by scan_input (0 for none); throws when they differ.
int64_t scan_length(const std::vector<Tensor>& xs);
/// The per-iteration values of a Loop or Scan output stacked along `axis` of the result
/// (reversed first when `reverse`); throws for zero iterations (the shape is unknown).
Tensor stack_steps(const std::vector<Tensor>& steps, int64_t axis = 0, bool reverse = false);

// Shape values in generated code. ONNX computes shapes with ops on small integer tensors
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape); generated code runs those on the host as
// std::vector<int64_t> (a rank-0 value holds one element), with the ops' semantics, and makes a
// tensor of one only where a tensor op reads it.

/// ONNX Shape: the sizes of x's dims [start, end) (negative counts from the end, clamped).
std::vector<int64_t> shape_of(const Tensor& x, int64_t start = 0, int64_t end = INT64_MAX);
/// ONNX Gather on axis 0 of a 1-d shape value: data[i] for each index (negative counts from
/// the end); throws for an index out of range.
std::vector<int64_t> gather_ints(const std::vector<int64_t>& data, const std::vector<int64_t>& indices);
/// ONNX Squeeze of a 1-d shape value of one element; throws for any other length.
std::vector<int64_t> squeeze_ints(const std::vector<int64_t>& v);
/// ONNX Concat of 1-d shape values.
std::vector<int64_t> concat_ints(const std::vector<std::vector<int64_t>>& parts);
/// ONNX Add/Sub/Mul/Div ('+', '-', '*', '/') of integer shape values with broadcasting (one
/// element against n); '/' truncates toward zero. Throws for lengths that do not broadcast and
/// for a division by zero.
std::vector<int64_t> int_binary(char op, const std::vector<int64_t>& a, const std::vector<int64_t>& b);
/// ONNX Cast of a shape value to i64 (unchanged) or i32 (wrapped to 32 bits).
std::vector<int64_t> cast_ints(const std::vector<int64_t>& v, DType to);
/// A shape value as a tensor of `dtype` on `device`: rank 0 when `scalar` (one element), else 1-d.
Tensor ints_tensor(const std::vector<int64_t>& v, bool scalar, DType dtype, const Device& device);
/// ONNX Reshape: a 0 in `shape` keeps x's size of that dim (unless `allowzero`), one -1 is
/// inferred.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape, bool allowzero = false);

// The run-time path's semantics of a few tensor ops, as functions (generated code calls them
// when their index arguments are constants or shape values). Axes may be negative.

/// ONNX Slice: along each axis (default 0, 1, ...), [start, end) by step (default 1, not 0),
/// clamped to the dim as ONNX clamps them; a negative step walks backwards.
Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
             const std::vector<int64_t>& axes = {}, const std::vector<int64_t>& steps = {});
/// ONNX Squeeze: the given axes (each of size 1), or every axis of size 1 when none is given.
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes = {});
/// ONNX Concat of xs (at least one) along axis of the first input's rank.
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
/// ONNX ConstantOfShape: a tensor of `shape` (no negative size) filled with value as dtype.
Tensor constant_of_shape(const std::vector<int64_t>& shape, Scalar value, DType dtype, const Device& device);
/// ONNX Gather: x's slices along axis at indices (any shape; negative ones count from the end)
/// -> x.shape[:axis] + indices.shape + x.shape[axis+1:].
Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis = 0);
/// ONNX Div: a / b broadcast, truncating for integers, in a's dtype.
Tensor div(const Tensor& a, const Tensor& b);
/// ONNX Pow: a ** b broadcast, in a's dtype (integer bases with float exponents computed in f64).
Tensor pow(const Tensor& a, const Tensor& b);
/// ONNX Reduce{Sum,Mean,Prod,Max,Min,L1,L2,LogSum,LogSumExp,SumSquare} (`op`) of x over axes
/// (negative count from the end; none: every axis, or x itself with noop_with_empty_axes), in
/// x's dtype (integer means, norms and logs computed in f64).
Tensor reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = true,
              bool noop_with_empty_axes = false);

}  // namespace ops

// ---- code generation -----------------------------------------------------------------------

/// Options of generate().
struct GenerateOptions {
  std::string out_dir = ".";  ///< where <file>.h, <file>.cpp and <file>.safetensors go
  std::string name;           ///< the C++ struct name ("MyModel"); default from the file name
  std::string file_stem;      ///< file names; default snake_case of name ("my_model")
};

/// What generate() wrote.
struct GenerateResult {
  std::string header, source, weights;  ///< paths written
  int64_t modules = 0;                  ///< nn sub-modules (Conv2d, Linear, BatchNorm2d, ...)
  int64_t generic_calls = 0;            ///< nodes emitted as kiln::onnx::ops::call
  int64_t fused_convs = 0;  ///< Conv [-> BatchNormalization] [-> Add] [-> act] chains as nn::conv_bn / conv_act
};

/// Writes readable C++ for the model at `model_path`: a kiln::nn::Module struct with named
/// sub-modules (Conv -> nn::Conv2d, Gemm/MatMul with a constant weight -> nn::Linear,
/// BatchNormalization -> nn::BatchNorm2d, LayerNormalization -> nn::LayerNorm, ...),
/// parameters for the other float initializers, a visit() listing them, a constructor (the model
/// starts in eval mode, as ONNX inference) and a straight-line forward(); and a safetensors
/// file of the weights whose names equal the module's state() names, so
/// `kiln::store::load(model, weights)` loads it strictly. Shapes stay dynamic: Shape/Reshape
/// chains become run-time code. Throws one kiln::Error listing every unsupported op, like Model.
GenerateResult generate(const std::string& model_path, const GenerateOptions& options = {});

}  // namespace kiln::onnx
