// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The ONNX exporter's state (internal): export.cpp turns values and views into ONNX names,
// export_ops.cpp lowers each Kiln primitive to ONNX nodes.
#include <map>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/onnx_export.h"
#include "onnx/export_proto.h"

namespace kiln::onnx::exporter {

/// An ONNX tensor name with the dims of it that are dynamic (at most one). A dynamic dim may
/// merge the dynamic count with static dims around it: its size is outer * count * mult, in
/// that order in memory (a batch merged with the dim after it, [B*T], has mult T; time-major
/// rows [T*B] have outer T). The dynamic step is mult * (the product of the later dims) elements.
struct Named {
  std::string name;
  std::vector<bool> dynamic;
  int64_t mult = 1;
  int64_t outer = 1;
};

/// Errors of the exporter start with this op name.
inline constexpr const char* kApi = "onnx export";

class Exporter {
 public:
  Exporter(const CapturedGraph& g, const ExportOptions& o);
  std::string run();

  // For the op lowering (export_ops.cpp).
  /// The ONNX tensor of a view of value v (an op input or a graph output).
  Named view(int64_t v, const ir::TensorDesc& d);
  /// An i64 1-d initializer holding v.
  std::string ints(const std::vector<int64_t>& v);
  /// A 0-d initializer of dtype holding x.
  std::string scalar(double x, DType dtype);
  /// An initializer with the given bytes.
  std::string initializer(const std::string& hint, DType dtype, const Shape& shape, std::string raw);
  /// Adds a node; returns its first output's name (a fresh one when outs is empty).
  std::string node(const std::string& op_type, std::vector<std::string> ins, std::vector<Attr> attrs = {},
                   std::vector<std::string> outs = {});
  std::string fresh(const std::string& hint);
  /// A Reduce* node over axes: the axes as an attribute or, where the opset takes them so
  /// (ReduceSum from 13, the others from 18), as an input.
  std::string reduce(const std::string& op_type, const std::string& x, const std::vector<int64_t>& axes, bool keep,
                     std::vector<std::string> outs = {});
  /// Names value v (an op output) with its dynamic dims.
  void define(int64_t v, std::string name, std::vector<bool> dynamic, int64_t mult = 1, int64_t outer = 1);
  /// Per dim of view d of value v: whether v is the same along it (a size-1 or stride-0 dim, a
  /// Fill, a constant with equal values along it, an op whose inputs are), so that a consumer
  /// may take one slice and let ONNX broadcasting expand it along a dynamic dim.
  std::vector<bool> uniform(int64_t v, const ir::TensorDesc& d);
  /// Records along which dims op output v is the same (uniform's source for op outputs).
  void set_uniform(int64_t v, std::vector<bool> u) { uniform_[static_cast<size_t>(v)] = std::move(u); }
  /// The ONNX name that value v's op output should take.
  std::string out_name(int64_t v) const { return std::string("v").append(std::to_string(v)); }
  const CapturedGraph& graph() const { return g_; }

 private:
  Named lower_view(int64_t v, const ir::TensorDesc& d);
  void lower_node(size_t i);
  const CapturedGraph& g_;
  const ExportOptions& o_;
  std::vector<Node> nodes_;
  std::vector<Initializer> inits_;
  std::vector<Named> values_;               ///< a value's ONNX name (contiguous, its shape); empty: not yet
  std::vector<std::vector<bool>> uniform_;  ///< per op output and dim: the same along it
  std::map<std::string, Named> views_;
  std::map<std::string, std::string> consts_;
  int64_t counter_ = 0;
};

/// Lowers node i of the graph (export_ops.cpp). Throws kiln::Error for an op without an ONNX form.
void lower_op(Exporter& e, const CapturedNode& n);
/// The ONNX TensorProto data type of a dtype.
int32_t onnx_type(DType t);

}  // namespace kiln::onnx::exporter
