// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the norm family (ops.def documents the attributes).
#include "ir/attrs.h"
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

void infer_norm(Op& op) {
  const char* name = op_name(op.kind).data();
  KILN_CHECK((op.attrs.ints.size() == 4 || op.attrs.ints.size() == 5) && op.attrs.reals.size() == 1, name,
             "expects ints {ndims, has_weight, has_bias, rms[, groups]} and reals {eps}");
  const NormAttrs a = NormAttrs::decode(op);
  const int64_t nd = a.ndims, groups = a.groups;
  const bool has_w = a.has_weight, has_b = a.has_bias, rms = a.rms;
  KILN_CHECK(!(rms && has_b), name, "RMSNorm takes no bias");
  const size_t nin = 1 + (has_w ? 1 : 0) + (has_b ? 1 : 0);
  KILN_CHECK(op.inputs.size() == nin, name,
             "expects " << static_cast<long long>(nin) << " inputs, got " << static_cast<long long>(op.inputs.size()));
  const TensorDesc& x = op.inputs[0];
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  KILN_CHECK(nd >= 1 && nd <= rank, name, "cannot normalise the last " << nd << " dims of shape " << x.shape);
  KILN_CHECK(is_floating(x.dtype), name, "expects a floating point input, got " << dtype_name(x.dtype).data());
  KILN_CHECK(groups >= 0, name, "groups must be >= 0, got " << groups);
  if (groups > 0) {
    KILN_CHECK(rank >= 2 && nd == rank - 1 && !rms && x.shape[1] % groups == 0, name,
               "group mode needs x [N, C, *] with C divisible by " << groups << ", ndims = rank - 1 and no rms; got "
                                                                   << x.shape << " and ndims " << nd);
  }
  const DType acc = x.dtype == DType::F64 ? DType::F64 : DType::F32;
  const Shape param_shape = groups > 0 ? Shape{x.shape[1]} : Shape(x.shape.end() - nd, x.shape.end());
  for (size_t i = 1; i < op.inputs.size(); ++i) {
    const TensorDesc& p = op.inputs[i];
    const char* what = (i == 1 && has_w) ? "weight" : "bias";
    KILN_CHECK(p.shape == param_shape, name, "expected " << what << " of shape " << param_shape << ", got " << p.shape);
    KILN_CHECK(p.dtype == x.dtype || p.dtype == acc, name,
               what << " dtype " << dtype_name(p.dtype).data() << " does not match the input's "
                    << dtype_name(x.dtype).data());
  }
  Shape stat = x.shape;
  if (groups > 0)
    stat = Shape{x.shape[0], groups};
  else
    for (int64_t i = rank - nd; i < rank; ++i) stat[static_cast<size_t>(i)] = 1;
  op.outputs = {contiguous_desc(x.shape, x.dtype), contiguous_desc(stat, acc), contiguous_desc(stat, acc)};
}

}  // namespace kiln::ir
