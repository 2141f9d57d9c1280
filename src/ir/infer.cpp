// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for every primitive, by family.
#include <algorithm>

#include "core/checked.h"
#include "ir/attrs.h"
#include "ir/infer_families.h"
#include "ir/op.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

bool bool_output(OpKind k) {
  switch (k) {
    case OpKind::LogicalNot:
    case OpKind::IsNan:
    case OpKind::IsInf:
    case OpKind::IsFinite:
    case OpKind::LogicalAnd:
    case OpKind::LogicalOr:
    case OpKind::LogicalXor:
    case OpKind::Eq:
    case OpKind::Ne:
    case OpKind::Lt:
    case OpKind::Le:
    case OpKind::Gt:
    case OpKind::Ge:
    case OpKind::Any:
    case OpKind::All:
      return true;
    default:
      return false;
  }
}

void expect_inputs(const Op& op, size_t n) {
  KILN_CHECK(op.inputs.size() == n, op_name(op.kind),
             "expects " << static_cast<long long>(n) << " inputs, got " << static_cast<long long>(op.inputs.size()));
}

void infer_reduce(Op& op) {
  expect_inputs(op, 1);
  const TensorDesc& x = op.inputs[0];
  KILN_CHECK(!op.attrs.ints.empty(), op_name(op.kind), "missing keepdim attribute");
  const ReduceAttrs a = ReduceAttrs::decode(op);
  const bool keepdim = a.keepdim;
  int64_t rank = static_cast<int64_t>(x.shape.size());
  SmallVec<bool, 8> reduced(static_cast<size_t>(rank), false);
  for (int64_t d : a.dims) {
    KILN_CHECK(d >= 0 && d < std::max<int64_t>(rank, 1), op_name(op.kind),
               "dim " << d << " out of range for shape " << x.shape);
    if (rank > 0) reduced[static_cast<size_t>(d)] = true;
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[static_cast<size_t>(i)])
      out.push_back(x.shape[static_cast<size_t>(i)]);
    else if (keepdim)
      out.push_back(1);
  }
  DType dt = x.dtype;
  switch (op.kind) {
    case OpKind::Sum:
    case OpKind::Prod:
    case OpKind::Mean:
      dt = op.attrs.dtype;
      break;
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      dt = DType::I64;
      break;
    case OpKind::Any:
    case OpKind::All:
      dt = DType::Bool;
      break;
    default:
      break;
  }
  op.outputs = {contiguous_desc(out, dt)};
}

}  // namespace

void infer(Op& op) {
  const char* name = op_name(op.kind).data();
  int nin = op_num_inputs(op.kind);
  if (nin >= 0) expect_inputs(op, static_cast<size_t>(nin));
  switch (op_family(op.kind)) {
    case Family::Unary: {
      const TensorDesc& x = op.inputs[0];
      if (op.kind == OpKind::Copy && !op.outputs.empty()) return;  // writing into a given view
      DType dt = op.kind == OpKind::Cast ? op.attrs.dtype : bool_output(op.kind) ? DType::Bool : x.dtype;
      op.outputs = {contiguous_desc(x.shape, dt)};
      return;
    }
    case Family::Binary: {
      const TensorDesc &a = op.inputs[0], &b = op.inputs[1];
      KILN_CHECK(
          a.dtype == b.dtype, name,
          "inputs must share a dtype, got " << dtype_name(a.dtype).data() << " and " << dtype_name(b.dtype).data());
      Shape s = broadcast_shapes(a.shape, b.shape, name);
      op.outputs.resize(1);
      op.outputs[0].shape = std::move(s);
      op.outputs[0].strides = contiguous_strides(op.outputs[0].shape);
      op.outputs[0].offset = 0;
      op.outputs[0].dtype = bool_output(op.kind) ? DType::Bool : a.dtype;
      return;
    }
    case Family::Ternary: {
      const TensorDesc &c = op.inputs[0], &a = op.inputs[1], &b = op.inputs[2];
      if (op.kind == OpKind::Where) {
        KILN_CHECK(c.dtype == DType::Bool, name, "condition must be bool, got " << dtype_name(c.dtype).data());
        KILN_CHECK(a.dtype == b.dtype, name, "branches must share a dtype");
      } else {
        KILN_CHECK(a.dtype == b.dtype && c.dtype == a.dtype, name, "inputs must share a dtype");
      }
      Shape s = broadcast_shapes(broadcast_shapes(c.shape, a.shape, name), b.shape, name);
      op.outputs = {contiguous_desc(s, a.dtype)};
      return;
    }
    case Family::Creation: {
      KILN_CHECK(op.attrs.ints.size() >= CreationAttrs::shape_start(op.kind), name, "missing attributes");
      const Shape s = CreationAttrs::decode(op).shape;
      for (auto d : s) KILN_CHECK(d >= 0, name, "negative size in shape " << s);
      op.outputs = {contiguous_desc(s, op.attrs.dtype)};
      return;
    }
    case Family::Reduce:
      infer_reduce(op);
      return;
    case Family::Scan: {
      const TensorDesc& x = op.inputs[0];
      KILN_CHECK(!op.attrs.ints.empty(), name, "missing dim attribute");
      int64_t d = ScanAttrs::decode(op).dim;
      KILN_CHECK(d >= 0 && d < std::max<int64_t>(static_cast<int64_t>(x.shape.size()), 1), name,
                 "dim " << d << " out of range for shape " << x.shape);
      switch (op.kind) {
        case OpKind::CumSum:
        case OpKind::CumProd:
          op.outputs = {contiguous_desc(x.shape, op.attrs.dtype)};
          break;
        case OpKind::CumMax:
        case OpKind::CumMin:
        case OpKind::Sort:
          op.outputs = {contiguous_desc(x.shape, x.dtype), contiguous_desc(x.shape, DType::I64)};
          break;
        default:
          op.outputs = {contiguous_desc(x.shape, x.dtype)};
      }
      return;
    }
    case Family::Index: {
      const TensorDesc& x = op.inputs[0];
      const TensorDesc& idx = op.inputs[1];
      KILN_CHECK(idx.dtype == DType::I64, name, "index must be i64, got " << dtype_name(idx.dtype).data());
      KILN_CHECK(!op.attrs.ints.empty(), name, "missing dim attribute");
      int64_t rank = static_cast<int64_t>(x.shape.size());
      int64_t d = op.kind == OpKind::Scatter ? ScatterAttrs::decode(op).dim : IndexAttrs::decode(op).dim;
      KILN_CHECK(d >= 0 && d < std::max<int64_t>(rank, 1), name, "dim " << d << " out of range for shape " << x.shape);
      if (op.kind == OpKind::IndexSelect) {
        Shape s = x.shape;
        if (rank > 0) s[static_cast<size_t>(d)] = idx.numel();
        op.outputs = {contiguous_desc(s, x.dtype)};
      } else if (op.kind == OpKind::Gather) {
        // 0-d counts as 1-d (PyTorch's ensure_nonempty_dim).
        KILN_CHECK(std::max<size_t>(idx.shape.size(), 1) == std::max<size_t>(x.shape.size(), 1), name,
                   "index rank must equal input rank: " << idx.shape << " vs " << x.shape);
        op.outputs = {contiguous_desc(idx.shape, x.dtype)};
      } else {
        KILN_CHECK(op.inputs[2].dtype == x.dtype, name, "src dtype must equal the input's");
        op.outputs = {contiguous_desc(x.shape, x.dtype)};
      }
      return;
    }
    case Family::Movement: {
      if (op.kind == OpKind::Cat) {
        KILN_CHECK(!op.inputs.empty() && !op.attrs.ints.empty(), name, "needs inputs and a dim");
        int64_t d = ScanAttrs::decode(op).dim;
        Shape s = op.inputs[0].shape;
        KILN_CHECK(d >= 0 && d < static_cast<int64_t>(s.size()), name, "dim " << d << " out of range for shape " << s);
        for (size_t i = 1; i < op.inputs.size(); ++i) {
          const Shape& si = op.inputs[i].shape;
          KILN_CHECK(si.size() == s.size() && op.inputs[i].dtype == op.inputs[0].dtype, name,
                     "inputs must share rank and dtype: " << s << " vs " << si);
          for (size_t j = 0; j < s.size(); ++j)
            if (static_cast<int64_t>(j) != d)
              KILN_CHECK(si[j] == s[j], name,
                         "sizes must match except in dim " << d << ": " << op.inputs[0].shape << " vs " << si);
          s[static_cast<size_t>(d)] = detail::checked_add(s[static_cast<size_t>(d)], si[static_cast<size_t>(d)], name);
        }
        op.outputs = {contiguous_desc(s, op.inputs[0].dtype)};
      } else {  // Pad
        const TensorDesc& x = op.inputs[0];
        KILN_CHECK(!op.attrs.ints.empty(), name, "missing mode attribute");
        const PadAttrs pa = PadAttrs::decode(op);
        size_t npads = pa.pads.size();
        KILN_CHECK(npads % 2 == 0 && npads / 2 <= x.shape.size(), name, "bad pads for shape " << x.shape);
        const int64_t mode = pa.mode;
        KILN_CHECK(mode >= 0 && mode <= 3, name, "unknown padding mode " << mode);
        Shape s = x.shape;
        for (size_t i = 0; i < npads / 2; ++i) {
          size_t d = s.size() - 1 - i;
          const int64_t lo = pa.pads[2 * i], hi = pa.pads[2 * i + 1], n = s[d];
          // Non-constant modes read inside the input only: reflect needs pad < n, circular pad <= n.
          KILN_CHECK(
              mode == 0 || (lo >= 0 && hi >= 0 &&
                            ((lo == 0 && hi == 0) ||
                             (n > 0 && (mode != 1 || (lo < n && hi < n)) && (mode != 3 || (lo <= n && hi <= n))))),
              name, "padding (" << lo << ", " << hi << ") is invalid in mode " << mode << " for shape " << x.shape);
          s[d] = detail::checked_add(detail::checked_add(s[d], lo, name), hi, name);
          KILN_CHECK(s[d] >= 0, name,
                     "padding makes dim " << static_cast<long long>(d) << " negative for shape " << x.shape);
        }
        op.outputs = {contiguous_desc(s, x.dtype)};
      }
      return;
    }
    case Family::Contract:
      return infer_contract(op);
    case Family::Conv:
      return infer_conv(op);
    case Family::Pool:
      return infer_pool(op);
    case Family::Norm:
      return infer_norm(op);
    case Family::Linalg:
      return infer_linalg(op);
    case Family::Fft:
      return infer_fft(op);
  }
}

}  // namespace kiln::ir
