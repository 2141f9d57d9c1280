// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the pool family (ops.def documents the attributes). The
// frontends in src/ops/pool.cpp check arguments with friendlier messages first; these checks
// guard ops that arrive by other routes (deserialised, remote).
#include "ir/attrs.h"
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

/// PyTorch's pooling_output_shape: floor or ceil division, and with ceil_mode the last window
/// must start inside the input or the left padding.
/// Computed in 128 bits (every argument may be as large as int64 allows); a result outside
/// int64 raises kiln::Error("[name] ...").
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode, const char* name) {
  using I = __int128;
  I num = I{in} + I{2} * pad - I{dil} * (k - 1) - 1 + (ceil_mode ? I{stride} - 1 : I{0});
  I q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);
  I out = q + 1;
  if (ceil_mode && (out - 1) * stride >= I{in} + pad) --out;
  KILN_CHECK(out <= INT64_MAX && out >= INT64_MIN, name,
             "output size does not fit in int64 (input size " << in << ", kernel " << k << ", padding " << pad << ")");
  return static_cast<int64_t>(out);
}

}  // namespace

void infer_pool(Op& op) {
  const char* name = op_name(op.kind).data();
  const auto& a = op.attrs.ints;
  KILN_CHECK(!a.empty() && a[0] >= 1 && a[0] <= 3, name, "expected 1 to 3 spatial dims in the attributes");
  const int64_t nsp = a[0];
  const size_t n = static_cast<size_t>(nsp);
  KILN_CHECK(!op.inputs.empty(), name, "expected an input");
  const TensorDesc& x = op.inputs[0];
  KILN_CHECK(static_cast<int64_t>(x.shape.size()) == nsp + 2, name,
             "expected a [N, C, *spatial] input with " << nsp << " spatial dims, got shape " << x.shape);
  Shape out(x.shape.begin(), x.shape.begin() + 2);
  bool with_indices = false;
  switch (op.kind) {
    case OpKind::MaxPool:
    case OpKind::AvgPool: {
      const bool is_max = op.kind == OpKind::MaxPool;
      const size_t want = 1 + 3 * n + (is_max ? n + 2 : 3);
      KILN_CHECK(a.size() == want, name, "expected " << want << " int attributes, got " << a.size());
      const PoolAttrs pa = PoolAttrs::decode(op);
      for (size_t d = 0; d < n; ++d) {
        int64_t k = pa.kernel[d], s = pa.stride[d], p = pa.padding[d], dil = is_max ? pa.dilation[d] : 1;
        KILN_CHECK(k > 0 && s > 0 && dil > 0 && p >= 0, name,
                   "kernel, stride and dilation must be positive and padding non-negative");
        KILN_CHECK(p <= k / 2, name,
                   "pad should be at most half of kernel size, but got pad=" << p << ", kernel_size=" << k);
        int64_t o = pool_out(x.shape[2 + d], k, p, s, dil, pa.ceil_mode, name);
        KILN_CHECK(o >= 1, name,
                   "input spatial shape " << x.shape << " is too small for the window: output size " << o);
        out.push_back(o);
      }
      if (is_max) with_indices = pa.with_indices;
      break;
    }
    case OpKind::AdaptiveAvgPool:
    case OpKind::AdaptiveMaxPool: {
      const size_t want = 1 + n + (op.kind == OpKind::AdaptiveMaxPool ? 1 : 0);
      KILN_CHECK(a.size() == want, name, "expected " << want << " int attributes, got " << a.size());
      const PoolAttrs pa = PoolAttrs::decode(op);
      for (int64_t o : pa.out) {
        KILN_CHECK(o >= 0, name, "output size must be non-negative, got " << o);
        out.push_back(o);
      }
      with_indices = pa.with_indices;
      break;
    }
    case OpKind::MaxUnpool: {
      KILN_CHECK(a.size() == 1 + n, name, "expected " << 1 + n << " int attributes, got " << a.size());
      KILN_CHECK(op.inputs.size() == 2, name, "expected (input, indices)");
      const TensorDesc& idx = op.inputs[1];
      KILN_CHECK(idx.dtype == DType::I64, name, "indices must be int64, got " << dtype_name(idx.dtype).data());
      KILN_CHECK(idx.shape == x.shape, name,
                 "expected indices of the input's shape " << x.shape << ", got " << idx.shape);
      for (int64_t o : PoolAttrs::decode(op).out) {
        KILN_CHECK(o >= 0, name, "output size must be non-negative, got " << o);
        out.push_back(o);
      }
      break;
    }
    default:
      KILN_CHECK(false, name, "not a pool op");
  }
  op.outputs.clear();
  op.outputs.push_back(contiguous_desc(out, x.dtype));
  if (op.kind == OpKind::MaxPool || op.kind == OpKind::AdaptiveMaxPool)
    op.outputs.push_back(contiguous_desc(with_indices ? out : Shape{0}, DType::I64));
}

}  // namespace kiln::ir
