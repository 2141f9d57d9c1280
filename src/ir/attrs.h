// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Typed views of op attributes: one struct per attribute family. ops.def documents each layout;
// decode reads it from Op::attrs (ints, reals) and encode writes it back, so the serialised form
// (ir::serialize) is unchanged and decode(encode(a)) == a. decode reads a missing optional value
// as its default and never reads past the end of ints or reals (infer checks the sizes).
#include <cstdint>

#include "ir/op.h"
#include "kiln/shape.h"

namespace kiln::ir {

/// Softmax, LogSoftmax, CumSum, CumProd, CumMax, CumMin, Sort and Cat: ints = {dim} (Sort:
/// {dim, descending}).
struct ScanAttrs {
  int64_t dim = 0;
  bool descending = false;  ///< Sort only
  static ScanAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// IndexSelect, Gather, IndexAdd, IndexCopy: ints = {dim, wrap} (Gather: {dim}); IndexAdd and
/// IndexCopy carry reals = {alpha}.
struct IndexAttrs {
  int64_t dim = 0;
  bool wrap = false;  ///< negative indices count from the end
  double alpha = 1;   ///< IndexAdd's factor (IndexCopy carries it too, unread)
  static IndexAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// Scatter: ints = {dim, reduce, include_self}.
struct ScatterAttrs {
  enum Reduce : int64_t { kNone = 0, kSum = 1, kProd = 2, kMean = 3, kAmax = 4, kAmin = 5 };
  int64_t dim = 0;
  int64_t reduce = kNone;
  bool include_self = true;
  static ScatterAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// The Reduce family: ints = {keepdim, dims...}; Var: reals = {correction, sqrt}.
struct ReduceAttrs {
  bool keepdim = false;
  Dims dims{};
  double correction = 1;  ///< Var only
  bool sqrt = false;      ///< Var only: the standard deviation
  static ReduceAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// Pad: ints = {mode, pads...} ({lo, hi} pairs from the last dim), reals = {value}.
struct PadAttrs {
  enum Mode : int64_t { kConstant = 0, kReflect = 1, kReplicate = 2, kCircular = 3 };
  int64_t mode = kConstant;
  Dims pads{};
  double value = 0;
  /// Number of padded dims (pads.size() / 2), counted from the last.
  size_t npad() const { return pads.size() / 2; }
  static PadAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// Fft: ints = {dim, inverse}; Rfft: {dim}; Irfft: {dim, n}; all reals = {scale}.
struct FftAttrs {
  int64_t dim = 0;
  bool inverse = false;  ///< Fft only
  int64_t n = 0;         ///< Irfft only: the real length
  double scale = 1;
  static FftAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// Linalg flags: Cholesky {upper}; Qr {mode}; Svd {full_matrices, compute_uv}; Eigh {upper,
/// compute_v}; TriangularSolve {upper, left, unitriangular}; LuFactor none.
struct LinalgAttrs {
  bool upper = false;
  int64_t qr_mode = 0;  ///< 0 reduced, 1 complete, 2 r
  bool full_matrices = true, compute_uv = true;
  bool compute_v = true;
  bool left = true, unitriangular = false;
  static LinalgAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// LayerNorm: ints = {ndims, has_weight, has_bias, rms, groups}, reals = {eps}.
struct NormAttrs {
  int64_t ndims = 1;
  bool has_weight = false, has_bias = false, rms = false;
  int64_t groups = 0;  ///< > 0: GroupNorm (absent in a 4-int form)
  double eps = 1e-5;
  static NormAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// The Pool family: MaxPool {nsp, kernel, stride, padding, dilation, ceil_mode, with_indices};
/// AvgPool {nsp, kernel, stride, padding, ceil_mode, count_include_pad, divisor};
/// AdaptiveAvgPool {nsp, out}; AdaptiveMaxPool {nsp, out, with_indices}; MaxUnpool {nsp, out}.
struct PoolAttrs {
  int64_t nsp = 0;
  Dims kernel{}, stride{}, padding{}, dilation{};  ///< MaxPool, AvgPool (AvgPool: dilation empty)
  Dims out{};                                      ///< the adaptive pools and MaxUnpool
  bool ceil_mode = false;
  bool with_indices = false;       ///< MaxPool, AdaptiveMaxPool
  bool count_include_pad = false;  ///< AvgPool
  int64_t divisor = 0;             ///< AvgPool: 0 = none
  static PoolAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// The Conv family: ints = {groups, nsp, stride, padding, dilation} + output_padding
/// (ConvTranspose) or weight_size (ConvWeightGrad), or for Conv an optional fused epilogue int
/// followed, with kConvMaxPool, by the pool window {kernel[2], stride[2], padding[2]}; a fused
/// clamp's bounds in reals = {lo, hi}.
struct ConvAttrs {
  int64_t groups = 1, nsp = 1;
  Dims stride{}, padding{}, dilation{};
  Dims output_padding{};                              ///< ConvTranspose
  Dims weight_size{};                                 ///< ConvWeightGrad: the weight's spatial sizes
  bool has_epilogue = false;                          ///< Conv: the epilogue int is present (it may be 0)
  int64_t epilogue = 0;                               ///< kConv* bits
  Dims pool_kernel{}, pool_stride{}, pool_padding{};  ///< with kConvMaxPool
  double clamp_lo = 0, clamp_hi = 0;                  ///< with kConvClamp

  /// The number of geometry ints for nsp spatial dims.
  static size_t geometry_ints(int64_t nsp) { return conv_geometry_ints(nsp); }
  /// The epilogue bits of a Conv op without decoding the rest (0 when absent or malformed;
  /// ir::conv_epilogue).
  static int64_t epilogue_of(const Op& op);
  bool has_pool() const { return (epilogue & kConvMaxPool) != 0; }
  bool has_residual() const { return (epilogue & kConvResidual) != 0; }
  bool has_scale() const { return (epilogue & kConvScale) != 0; }
  bool has_shift() const { return (epilogue & kConvShift) != 0; }
  /// 1 relu, 2 clamp to [clamp_lo, clamp_hi], 0 none.
  int64_t activation() const { return (epilogue & kConvRelu) ? 1 : (epilogue & kConvClamp) ? 2 : 0; }
  static ConvAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// The Creation family and Bernoulli: ints = {own ints..., shape...} (Bernoulli: no shape).
///   Fill {has_int, int_value} reals {value}; Arange {} (its shape is {n}) reals {start, step}; RandUniform and
///   RandNormal {seed_lo32, seed_hi32, offset} reals {low, high} or {mean, std}; RandInt {seed_lo32,
///   seed_hi32, offset, low, high}; Bernoulli {seed_lo32, seed_hi32, offset}.
struct CreationAttrs {
  Shape shape{};
  bool has_int = false;           ///< Fill: the value is the integer int_value (exact)
  int64_t int_value = 0;          ///< Fill
  double value = 0;               ///< Fill
  double start = 0, step = 1;     ///< Arange
  uint64_t seed = 0, offset = 0;  ///< random ops: Philox key and first block
  int64_t low = 0, high = 0;      ///< RandInt: [low, high)
  double a = 0, b = 1;            ///< RandUniform {low, high}, RandNormal {mean, std}
  /// Where the shape starts in ints (the op's own ints before it; Bernoulli: its count).
  static size_t shape_start(OpKind k);
  static CreationAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// Unary parameters: Round ints {decimals}; IsInf ints {which: 0 both signs, 1 +inf, -1 -inf};
/// Logit reals {eps} (< 0: none); LeakyRelu {slope}; Elu {alpha, scale, input_scale}; Softplus
/// {beta, threshold}; NanToNum {nan, posinf, neginf}. Other unary ops carry none.
struct UnaryAttrs {
  int64_t decimals = 0;                          ///< Round
  int64_t which = 0;                             ///< IsInf
  double eps = -1;                               ///< Logit
  double slope = 0.01;                           ///< LeakyRelu
  double alpha = 1, scale = 1, input_scale = 1;  ///< Elu
  double beta = 1, threshold = 20;               ///< Softplus
  double nan = 0, posinf = 0, neginf = 0;        ///< NanToNum
  static UnaryAttrs decode(const Op& op);
  void encode(Op& op) const;
};

/// Clamp: ints = {has_min, has_max}, reals = {min, max}.
struct ClampAttrs {
  bool has_min = false, has_max = false;
  double min = 0, max = 0;
  static ClampAttrs decode(const Op& op);
  void encode(Op& op) const;
};

}  // namespace kiln::ir
