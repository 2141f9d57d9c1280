// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal: the ONNX op mapping shared by the run-time path (and later code generation).
// Each ops_<family>.cpp registers its ops into the registry with register_<family>().
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ops.h"
#include "kiln/tensor.h"
#include "onnx/proto.h"

namespace kiln::detail {
struct PreparedOp;
}  // namespace kiln::detail

namespace kiln::onnx {

struct OpContext;
struct EmitContext;
using detail::PreparedOp;
using OpFn = std::function<void(OpContext&)>;
/// Code generation of one node: appends C++ statements to `EmitContext::code` that compute
/// the node's outputs, and returns true; false leaves the node to the generic emitter (a call
/// into kiln::onnx::ops::call, which runs the op's OpFn).
using EmitFn = std::function<bool(EmitContext&)>;

/// One op of the mapping: how it runs (run time and generic generated code) and, optionally,
/// a specialised emitter for generated code (nn modules, plain Kiln calls).
struct OpEntry {
  OpFn run;
  EmitFn emit;
};

/// The op mapping shared by the run-time path and code generation.
struct Registry {
  std::unordered_map<std::string, OpEntry> ops;
  /// `r["Relu"] = [](OpContext& c) {...};` sets the run function.
  OpFn& operator[](const std::string& op) { return ops[op].run; }
  /// Sets the specialised emitter of `op` (beside its run function).
  void emit(const std::string& op, EmitFn f) { ops[op].emit = std::move(f); }
  const OpEntry* find(const std::string& op) const {
    auto it = ops.find(op);
    return it == ops.end() ? nullptr : &it->second;
  }
};

/// What an op sees when it runs: its node, the model's opset, inputs (undefined Tensor for an
/// absent optional input) and outputs to fill.
struct OpContext {
  const proto::NodeP& node;
  int64_t opset;
  Device device;
  std::vector<Tensor> in;
  std::vector<Tensor> out;
  /// Runs a subgraph (an attribute of this node) with the given inputs, in a scope that sees
  /// this node's scope; returns its outputs.
  std::function<std::vector<Tensor>(const proto::GraphP&, const std::vector<Tensor>&)> run_graph;
  /// What the run-time plan fused into this node: 0 none, 1 relu, 2 clip to [post_lo, post_hi]
  /// (Conv, Add), 3 add the bias in input 2 (MatMul followed by Add of a constant [N]). The op
  /// applies it to its output.
  int post = 0;
  float post_lo = 0, post_hi = 0;
  /// Conv: the plan fused a following Add of another value, in[res] (-1: none), added before
  /// the activation; res_first: it was the Add's first operand (whose dtype the Add keeps).
  int res = -1;
  bool res_first = false;
  /// On a device without data (the null device): per input, its value on the CPU when the plan
  /// knows it there (constants, shape computations), else undefined; null elsewhere. value()
  /// reads it.
  const std::vector<Tensor>* host = nullptr;
  /// The run-time plan's slot(s) for the op this step issues (Note [Prepared steps] in
  /// ops/prepared.h): Conv, MatMul and Gemm steps, two for a Conv pair; null elsewhere.
  PreparedOp* prep = nullptr;

  std::string where() const;  ///< "node 'name' (Op)" for messages
  [[noreturn]] void fail(const std::string& msg) const;
  void check(bool cond, const std::string& msg) const {
    if (!cond) fail(msg);
  }
  /// The same for a fixed message, which is built only when the check fails.
  void check(bool cond, const char* msg) const {
    if (!cond) fail(msg);
  }
  size_t n_in() const { return in.size(); }
  bool has(size_t i) const { return i < in.size() && in[i].defined(); }
  const Tensor& x(size_t i) const;
  /// Input i for reading its values on the host (shape-like inputs, bounds, scales): its CPU
  /// value when the plan has one (OpContext::host), else x(i).
  const Tensor& value(size_t i) const;
  bool has_attr(std::string_view n) const { return node.attr(n) != nullptr; }
  int64_t attr_i(std::string_view n, int64_t def) const;
  float attr_f(std::string_view n, float def) const;
  std::string attr_s(std::string_view n, const std::string& def) const;
  std::vector<int64_t> attr_ints(std::string_view n) const;
  std::vector<float> attr_floats(std::string_view n) const;
  const proto::TensorP* attr_t(std::string_view n) const;
  const proto::GraphP* attr_g(std::string_view n) const;
  /// Input i read to the host as integers (shape-like inputs: Reshape's shape, Slice's starts...).
  std::vector<int64_t> ints_in(size_t i) const;
  void set(size_t i, Tensor t) {
    if (i < out.size()) out[i] = std::move(t);
  }
};

/// A shape value in generated code (see kiln::onnx::ops::shape_of): a host
/// std::vector<int64_t> that stands for a small integer tensor of rank 0 (one element) or 1.
struct ShapeArg {
  std::string expr;   ///< C++ expression of type std::vector<int64_t>; empty: not a shape value
  int rank = -1;      ///< 0 or 1
  DType dtype = i64;  ///< i64 or i32 (the tensor's dtype when one is made of it)
};

/// What an emitter sees: the node, the C++ expressions of its inputs, the constant values of
/// inputs that are initializers or Constant outputs, known ranks, and the variable names of its
/// outputs. Emitters add sub-modules with add_module (their state is written to the weights
/// file under "<member>.<suffix>") and append statements to `code`.
struct EmitContext {
  const proto::NodeP& node;
  int64_t opset;
  std::vector<std::string> out;           ///< output variable names ("" = output unused)
  std::vector<const Tensor*> consts;      ///< constant value of input i, or null
  std::vector<int> rank;                  ///< rank of input i, -1 when unknown
  std::vector<int> out_rank;              ///< ranks of the outputs, when the emitter knows them
  std::function<std::string(size_t)> in;  ///< C++ expression of input i ("" when absent)
  /// Adds a member `type name;` built in the constructor as `name = type(ctor_args, device);`
  /// holding `state` (suffix -> tensor); returns the member's name.
  std::function<std::string(const std::string& type, const std::string& ctor_args,
                            const std::vector<std::pair<std::string, Tensor>>& state)>
      add_module;
  std::string code;  ///< statements appended by the emitter
  /// Per input: the input as a shape value, when it is one (computed by an earlier node) or is
  /// an integer constant of rank 0 or 1 with few elements.
  std::vector<ShapeArg> shape_in;
  /// Outputs the emitter made shape values (assign_shape); others are tensors.
  std::vector<ShapeArg> shape_out;
  /// MatMul: a constant [N] that code generation folds in from the Add after it (out[0] is then
  /// the Add's output). An emitter that cannot add it returns false.
  const Tensor* bias = nullptr;

  size_t n_in() const { return node.input.size(); }
  bool has(size_t i) const { return i < node.input.size() && !node.input[i].empty(); }
  const Tensor* constant(size_t i) const { return i < consts.size() ? consts[i] : nullptr; }
  int64_t attr_i(std::string_view n, int64_t def) const;
  float attr_f(std::string_view n, float def) const;
  std::string attr_s(std::string_view n, const std::string& def) const;
  std::vector<int64_t> attr_ints(std::string_view n) const;
  /// `Tensor <out0> = <expr>;`
  void assign(const std::string& expr);
  /// Input i as a shape value, or null.
  const ShapeArg* shape(size_t i) const {
    return i < shape_in.size() && !shape_in[i].expr.empty() ? &shape_in[i] : nullptr;
  }
  /// `const std::vector<int64_t> <out i> = <expr>;`: output i becomes a shape value.
  void assign_shape(size_t i, const std::string& expr, int rank, DType dtype);
};

/// C++ expression of a dtype: "kiln::f32", "kiln::bool_".
std::string dtype_expr(DType d);
/// C++ list literal of integers: "{1, 2, 3}".
std::string int_list(const std::vector<int64_t>& v);
/// A float as a C++ literal that reads back exactly.
std::string float_lit(double v);

/// Tensor from a TensorProto (throws naming `what` for bad or unsupported data).
Tensor tensor_from(const proto::TensorP& t, const Device& device, const std::string& what);
/// ONNX data type -> Kiln dtype; throws for types Kiln lacks.
DType to_dtype(int32_t onnx_type, const std::string& what);
bool has_dtype(int32_t onnx_type);
/// Wraps a possibly negative axis into [0, rank); throws naming the node.
int64_t axis_of(const OpContext& c, int64_t axis, int64_t rank);
Dims to_dims(const std::vector<int64_t>& v);
Shape to_shape(const std::vector<int64_t>& v);

/// Resize's input coordinate of output position x along an axis of `in` elements
/// (coordinate_transformation_mode m; `out` is in * scale when scales are given, which ONNX keeps
/// fractional for align_corners, else the requested size; roi for tf_crop_and_resize), and the
/// nearest input index of coordinate x (nearest_mode). Shared by the run-time op and the micro
/// target's tables (ops_resize.cpp).
double resize_original_coord(const std::string& m, double x, double scale, int64_t in, double out, double roi_lo = 0,
                             double roi_hi = 1);
int64_t resize_nearest_index(const std::string& mode, double x);

void register_elementwise(Registry& r);
void register_reduce(Registry& r);
void register_shape(Registry& r);
void register_nn(Registry& r);
void register_control(Registry& r);
void register_resize(Registry& r);
void register_recurrent(Registry& r);
void register_attention(Registry& r);
void register_detection(Registry& r);
void register_set(Registry& r);
void register_quant(Registry& r);
void register_signal(Registry& r);

/// A Conv followed by a second Conv (`second`, with its fused activation post2 / lo2 / hi2) that
/// alone reads the first one's output, paired by the run-time plan: inputs x, w1, b1, w2, b2
/// (absent biases undefined); output the second conv's. Two Conv ops, each with its epilogue.
void run_conv_pair(OpContext& c, const proto::NodeP& second, int post2, float lo2, float hi2);
/// A Conv (with its fused activation) followed by a MaxPool (`pool`, values only) that alone reads
/// its output, fused by the run-time plan: inputs x, w [, b]; output the pool's. One Conv op with
/// the max pool in its epilogue (ops.def) when the window allows; else the two run one by one.
void run_conv_pool(OpContext& c, const proto::NodeP& pool);
/// The Add the plan fused into a Conv (OpContext::res): y + in[res] as that Add computes it.
Tensor add_residual(const OpContext& c, const Tensor& y);
/// y, or y cast to dt (ONNX keeps an op's input dtype where Kiln promotes).
Tensor keep_dtype(const Tensor& y, DType dt);
/// Indices as i64 with negative ones counted from the end of a dim of size `dim` (ONNX Gather
/// and its relatives); host indices without negatives are returned as they are.
Tensor fix_negative(const Tensor& idx, int64_t dim);

/// Runs one op with the given node description (the generic path of generated code).
std::vector<Tensor> run_node(const proto::NodeP& node, int64_t opset, const std::vector<Tensor>& inputs,
                             const Device& device);

/// All ops (built once).
const Registry& registry();

/// Whether t is a contiguous f32 tensor with storage on a CPU device (plain or fused), whose
/// memory host_f32 can hand to host kernels.
bool host_f32_ok(const Tensor& t);
/// Host memory of such a tensor at its first element; queued fused work on it runs first.
float* host_f32(const Tensor& t);

}  // namespace kiln::onnx
