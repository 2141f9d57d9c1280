// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the fft family (ops.def documents the attributes). Complex
// operands are real tensors with a trailing dim of 2 (re, im); `dim` indexes the complex shape.
#include "ir/attrs.h"
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

void check_float(const Op& op, const TensorDesc& x) {
  KILN_CHECK(is_floating(x.dtype), op_name(op.kind),
             "expects a floating point input, got " << dtype_name(x.dtype).data() << " of shape " << x.shape);
}

/// Checks a complex [..., 2] input of at least one complex dim and that dim indexes it.
void check_complex(const Op& op, const TensorDesc& z, int64_t dim) {
  const int64_t r = static_cast<int64_t>(z.shape.size());
  KILN_CHECK(r >= 2 && z.shape.back() == 2, op_name(op.kind),
             "expects a complex input [..., 2] with at least one complex dim, got shape " << z.shape);
  KILN_CHECK(dim >= 0 && dim < r - 1, op_name(op.kind), "dim " << dim << " out of range for complex input " << z.shape);
}

}  // namespace

void infer_fft(Op& op) {
  const char* name = op_name(op.kind).data();
  const TensorDesc& x = op.inputs[0];
  check_float(op, x);
  KILN_CHECK(!op.attrs.reals.empty(), name, "missing scale attribute");
  switch (op.kind) {
    case OpKind::Fft: {
      KILN_CHECK(op.attrs.ints.size() >= 2, name, "expects ints {dim, inverse}");
      const int64_t d = FftAttrs::decode(op).dim;
      check_complex(op, x, d);
      KILN_CHECK(x.shape[static_cast<size_t>(d)] >= 1, name,
                 "invalid number of data points (0) along dim " << d << " of " << x.shape);
      op.outputs = {contiguous_desc(x.shape, x.dtype)};
      return;
    }
    case OpKind::Rfft: {
      KILN_CHECK(op.attrs.ints.size() >= 1, name, "expects ints {dim}");
      const int64_t r = static_cast<int64_t>(x.shape.size()), d = FftAttrs::decode(op).dim;
      KILN_CHECK(d >= 0 && d < r, name, "dim " << d << " out of range for shape " << x.shape);
      const int64_t n = x.shape[static_cast<size_t>(d)];
      KILN_CHECK(n >= 1, name, "invalid number of data points (0) along dim " << d << " of " << x.shape);
      Shape s = x.shape;
      s[static_cast<size_t>(d)] = n / 2 + 1;
      s.push_back(2);
      op.outputs = {contiguous_desc(s, x.dtype)};
      return;
    }
    case OpKind::Irfft: {
      KILN_CHECK(op.attrs.ints.size() >= 2, name, "expects ints {dim, n}");
      const FftAttrs a = FftAttrs::decode(op);
      const int64_t d = a.dim, n = a.n;
      check_complex(op, x, d);
      KILN_CHECK(n >= 1, name, "invalid number of data points (" << n << ") for input " << x.shape);
      Shape s = x.shape;
      s.pop_back();
      s[static_cast<size_t>(d)] = n;
      op.outputs = {contiguous_desc(s, x.dtype)};
      return;
    }
    default:
      KILN_CHECK(false, name, "not an fft op");
  }
}

}  // namespace kiln::ir
