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

/// An ONNX tensor name with the dims of it that are dynamic (at most one). A dynamic dim may be
/// a dynamic count times `mult` (a batch merged with the dim after it, [B*T]): the dynamic step
/// is mult * (the product of the later dims) elements.
struct Named {
  std::string name;
  std::vector<bool> dynamic;
  int64_t mult = 1;
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
  void define(int64_t v, std::string name, std::vector<bool> dynamic, int64_t mult = 1);
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
  std::vector<Named> values_;  ///< a value's ONNX name (contiguous, its shape); empty: not yet
  std::map<std::string, Named> views_;
  std::map<std::string, std::string> consts_;
  int64_t counter_ = 0;
};

/// Lowers node i of the graph (export_ops.cpp). Throws kiln::Error for an op without an ONNX form.
void lower_op(Exporter& e, const CapturedNode& n);
/// The ONNX TensorProto data type of a dtype.
int32_t onnx_type(DType t);

}  // namespace kiln::onnx::exporter
