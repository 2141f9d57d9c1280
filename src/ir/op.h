// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The op IR: one record per primitive call, shared by every backend and decorator.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::ir {

enum class Family : uint8_t {
  Unary,
  Binary,
  Ternary,
  Creation,
  Reduce,
  Scan,
  Index,
  Movement,
  Contract,
  Conv,
  Pool,
  Norm,
  Linalg,
  Fft
};

enum class OpKind : uint16_t {
#define KILN_OP(name, family, nin, nout) name,
#include "ir/ops.def"
#undef KILN_OP
};
inline constexpr int kNumOps = 0
#define KILN_OP(name, family, nin, nout) +1
#include "ir/ops.def"
#undef KILN_OP
    ;

/// Layout and type of one operand: a strided view (strides and offset in elements).
struct TensorDesc {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  DType dtype = DType::F32;
  /// The content stamp of the buffer when the op was issued (Storage::stamp; 0: not known); on an
  /// output, the stamp of what the op writes. The buffer holds the same bytes whenever two
  /// descriptors carry the same stamp, so a kernel may reuse what it derived from them, or keep
  /// a form of what it wrote for the next reader (not part of the descriptor's identity:
  /// operator==).
  uint64_t stamp = 0;
  int64_t numel() const { return shape_numel(shape); }
  bool is_contiguous() const;
  friend bool operator==(const TensorDesc& a, const TensorDesc& b) {
    return a.shape == b.shape && a.strides == b.strides && a.offset == b.offset && a.dtype == b.dtype;
  }
};
/// A contiguous descriptor of the given shape and dtype.
TensorDesc contiguous_desc(const Shape& shape, DType dtype);

/// Op attributes; the meaning of each slot per op is documented in ops.def.
struct Attrs {
  SmallVec<int64_t, 8> ints;
  SmallVec<double, 4> reals;
  DType dtype = DType::F32;
  friend bool operator==(const Attrs& a, const Attrs& b) {
    return a.ints == b.ints && a.reals == b.reals && a.dtype == b.dtype;
  }
};

/// One primitive call: kind, attributes, and the descriptors of its inputs and outputs.
struct Op {
  OpKind kind{};
  Attrs attrs;
  InlineVec<TensorDesc, 3> inputs;  ///< inline: building, copying or queueing an op allocates nothing
  InlineVec<TensorDesc, 1> outputs;
  friend bool operator==(const Op& a, const Op& b) {
    return a.kind == b.kind && a.attrs == b.attrs && a.inputs == b.inputs && a.outputs == b.outputs;
  }
};

std::string_view op_name(OpKind k);
Family op_family(OpKind k);
/// Declared input count (-1: variadic) and output count.
int op_num_inputs(OpKind k);
int op_num_outputs(OpKind k);

/// Conv's geometry ints for nsp spatial dims (ops.def: groups, nsp, stride, padding, dilation).
inline size_t conv_geometry_ints(int64_t nsp) { return static_cast<size_t>(2 + 3 * nsp); }
/// A convolution's output size along one dim (symmetric padding; the dilated kernel must fit the
/// padded input).
inline int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in + 2 * pad - (dil * (k - 1) + 1)) / stride + 1;
}
/// conv_epilogue bits (ops.def).
inline constexpr int64_t kConvRelu = 1, kConvResidual = 2, kConvScale = 4, kConvShift = 8, kConvClamp = 16,
                         kConvMaxPool = 32;
inline constexpr int64_t kConvEpilogueBits = 63;
/// The ints after a fused max pool's epilogue int: kernel[2], stride[2], padding[2].
inline constexpr size_t kConvPoolInts = 6;
/// Conv's fused epilogue (ops.def): the int after the geometry, 0 (none) when absent. The one
/// raw read of the epilogue bits; ir::ConvAttrs (ir/attrs.h) decodes the rest of the layout.
inline int64_t conv_epilogue(const Op& op) {
  const auto& a = op.attrs.ints;
  if (op.kind != OpKind::Conv || a.size() < 2) return 0;
  const size_t g = conv_geometry_ints(a[1]);
  if (a.size() == g + 1) return a[g];
  return a.size() == g + 1 + kConvPoolInts && (a[g] & kConvMaxPool) ? a[g] : 0;
}
/// Whether Conv's result is max pooled (2 spatial dims; ConvAttrs::pool_kernel etc. hold the window).
inline bool conv_has_pool(const Op& op) { return (conv_epilogue(op) & kConvMaxPool) != 0; }
/// Conv's fused activation: 1 relu, 2 clamp to [attrs.reals[0], attrs.reals[1]], 0 none.
inline int64_t conv_activation(const Op& op) {
  const int64_t e = conv_epilogue(op);
  return (e & kConvRelu) ? 1 : (e & kConvClamp) ? 2 : 0;
}
/// Whether Conv's last input is a residual added before the activation.
inline bool conv_has_residual(const Op& op) { return (conv_epilogue(op) & kConvResidual) != 0; }
/// Whether Conv multiplies its result by a per-channel scale (input conv_scale_input), and adds a
/// per-channel shift (input conv_scale_input + has scale).
inline bool conv_has_scale(const Op& op) { return (conv_epilogue(op) & kConvScale) != 0; }
inline bool conv_has_shift(const Op& op) { return (conv_epilogue(op) & kConvShift) != 0; }
/// Whether Conv (or ConvTranspose) has a bias input.
inline bool conv_has_bias(const Op& op) {
  const size_t extra =
      (conv_has_residual(op) ? 1u : 0u) + (conv_has_scale(op) ? 1u : 0u) + (conv_has_shift(op) ? 1u : 0u);
  return op.inputs.size() == 3 + extra;
}
/// The input index of Conv's per-channel scale (or, without one, of its shift).
inline size_t conv_scale_input(const Op& op) { return conv_has_bias(op) ? 3u : 2u; }

/// Fills op.outputs (contiguous) from op.inputs and op.attrs. Throws kiln::Error on mismatch.
void infer(Op& op);

/// Serialises an op (kind, attrs, descriptors) to bytes, and back. deserialize throws
/// kiln::Error on truncated or malformed input.
std::vector<uint8_t> serialize(const Op& op);
Op deserialize(const uint8_t* data, size_t size);

}  // namespace kiln::ir
