// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the linalg family (ops.def documents the attributes).
#include <algorithm>

#include "ir/attrs.h"
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

/// Checks a batched float matrix input and returns its batch shape; m, n are its last two dims.
Shape matrix_batch(const Op& op, const TensorDesc& a, int64_t& m, int64_t& n) {
  const char* name = op_name(op.kind).data();
  KILN_CHECK(a.dtype == DType::F32 || a.dtype == DType::F64, name,
             "expected a float32 or float64 matrix, got " << dtype_name(a.dtype).data() << " of shape " << a.shape);
  KILN_CHECK(a.shape.size() >= 2, name, "expected a tensor with 2 or more dims [..., m, n], got shape " << a.shape);
  m = a.shape[a.shape.size() - 2];
  n = a.shape[a.shape.size() - 1];
  return Shape(a.shape.begin(), a.shape.end() - 2);
}

Shape with(Shape s, std::initializer_list<int64_t> tail) {
  for (auto d : tail) s.push_back(d);
  return s;
}

void check_square(const Op& op, const TensorDesc& a, int64_t m, int64_t n) {
  KILN_CHECK(m == n, op_name(op.kind).data(),
             "expected batches of square matrices, got shape " << a.shape << " (" << m << " by " << n << ")");
}

}  // namespace

void infer_linalg(Op& op) {
  const char* name = op_name(op.kind).data();
  const int nin = op.kind == OpKind::TriangularSolve ? 2 : 1;
  KILN_CHECK(static_cast<int>(op.inputs.size()) == nin, name,
             "expects " << nin << " inputs, got " << static_cast<long long>(op.inputs.size()));
  const TensorDesc& a = op.inputs[0];
  int64_t m = 0, n = 0;
  Shape batch = matrix_batch(op, a, m, n);
  const DType dt = a.dtype;
  const int64_t k = std::min(m, n);
  op.outputs.clear();
  auto out = [&](const Shape& s, DType t) { op.outputs.push_back(contiguous_desc(s, t)); };
  switch (op.kind) {
    case OpKind::LuFactor:
      out(a.shape, dt);
      out(with(batch, {k}), DType::I64);
      out(batch, DType::I64);
      out(with(batch, {m}), DType::I64);
      return;
    case OpKind::Cholesky:
      check_square(op, a, m, n);
      out(a.shape, dt);
      out(batch, DType::I64);
      return;
    case OpKind::Qr: {
      const int64_t mode = LinalgAttrs::decode(op).qr_mode;
      KILN_CHECK(mode >= 0 && mode <= 2, name, "mode must be 0 (reduced), 1 (complete) or 2 (r), got " << mode);
      if (mode == 2) {
        out(Shape{0}, dt);
        out(with(batch, {k, n}), dt);
      } else if (mode == 1) {
        out(with(batch, {m, m}), dt);
        out(a.shape, dt);
      } else {
        out(with(batch, {m, k}), dt);
        out(with(batch, {k, n}), dt);
      }
      return;
    }
    case OpKind::Svd: {
      const LinalgAttrs at = LinalgAttrs::decode(op);
      const bool full = at.full_matrices, uv = at.compute_uv;
      out(uv ? with(batch, {m, full ? m : k}) : Shape{0}, dt);
      out(with(batch, {k}), dt);
      out(uv ? with(batch, {full ? n : k, n}) : Shape{0}, dt);
      return;
    }
    case OpKind::Eigh:
      check_square(op, a, m, n);
      out(with(batch, {n}), dt);
      out(LinalgAttrs::decode(op).compute_v ? a.shape : Shape{0}, dt);
      return;
    case OpKind::TriangularSolve: {
      check_square(op, a, m, n);
      const TensorDesc& b = op.inputs[1];
      KILN_CHECK(b.dtype == dt, name,
                 "expected b to have a's dtype " << dtype_name(dt).data() << ", got " << dtype_name(b.dtype).data());
      KILN_CHECK(b.shape.size() >= 2, name, "expected b with 2 or more dims, got shape " << b.shape);
      const bool left = LinalgAttrs::decode(op).left;
      int64_t br = b.shape[b.shape.size() - 2], bc = b.shape[b.shape.size() - 1];
      KILN_CHECK(left ? br == n : bc == n, name,
                 "incompatible shapes a " << a.shape << " and b " << b.shape << " for a " << (left ? "left" : "right")
                                          << " solve");
      Shape bb(b.shape.begin(), b.shape.end() - 2);
      out(with(broadcast_shapes(batch, bb, name), {br, bc}), dt);
      return;
    }
    default:
      KILN_CHECK(false, name, "is not a linalg op");
  }
}

}  // namespace kiln::ir
