// SPDX-License-Identifier: MIT OR Apache-2.0
// Typed attribute views: decode from and encode to Op::attrs (layouts in ops.def).
#include "ir/attrs.h"

#include <algorithm>

namespace kiln::ir {

namespace {

/// ints[i], or dflt when absent.
int64_t int_at(const Op& op, size_t i, int64_t dflt = 0) { return i < op.attrs.ints.size() ? op.attrs.ints[i] : dflt; }
double real_at(const Op& op, size_t i, double dflt = 0) { return i < op.attrs.reals.size() ? op.attrs.reals[i] : dflt; }
/// n ints from position at (fewer when the ints end first).
Dims ints_from(const Op& op, size_t at, size_t n) {
  const auto& ints = op.attrs.ints;
  if (at >= ints.size()) return {};
  return Dims(ints.begin() + at, ints.begin() + std::min(at + n, ints.size()));
}
void push(Op& op, const Dims& d) {
  for (int64_t v : d) op.attrs.ints.push_back(v);
}

}  // namespace

ScanAttrs ScanAttrs::decode(const Op& op) {
  ScanAttrs a;
  a.dim = int_at(op, 0);
  if (op.kind == OpKind::Sort) a.descending = int_at(op, 1) != 0;
  return a;
}

void ScanAttrs::encode(Op& op) const {
  op.attrs.ints.clear();
  op.attrs.ints.push_back(dim);
  if (op.kind == OpKind::Sort) op.attrs.ints.push_back(descending ? 1 : 0);
}

IndexAttrs IndexAttrs::decode(const Op& op) {
  IndexAttrs a;
  a.dim = int_at(op, 0);
  a.wrap = int_at(op, 1) != 0;
  a.alpha = real_at(op, 0, 1);
  return a;
}

void IndexAttrs::encode(Op& op) const {
  op.attrs.ints.clear();
  op.attrs.ints.push_back(dim);
  if (op.kind != OpKind::Gather) op.attrs.ints.push_back(wrap ? 1 : 0);
  op.attrs.reals.clear();
  if (op.kind == OpKind::IndexAdd || op.kind == OpKind::IndexCopy) op.attrs.reals.push_back(alpha);
}

ScatterAttrs ScatterAttrs::decode(const Op& op) {
  ScatterAttrs a;
  a.dim = int_at(op, 0);
  a.reduce = int_at(op, 1, kNone);
  a.include_self = int_at(op, 2, 1) != 0;
  return a;
}

void ScatterAttrs::encode(Op& op) const {
  op.attrs.ints.clear();
  for (int64_t v : {dim, reduce, int64_t{include_self ? 1 : 0}}) op.attrs.ints.push_back(v);
}

ReduceAttrs ReduceAttrs::decode(const Op& op) {
  ReduceAttrs a;
  a.keepdim = int_at(op, 0) != 0;
  if (op.attrs.ints.size() > 1) a.dims = ints_from(op, 1, op.attrs.ints.size() - 1);
  if (op.kind == OpKind::Var) {
    a.correction = real_at(op, 0, 1);
    a.sqrt = real_at(op, 1) != 0;
  }
  return a;
}

void ReduceAttrs::encode(Op& op) const {
  op.attrs.ints.clear();
  op.attrs.ints.push_back(keepdim ? 1 : 0);
  push(op, dims);
  op.attrs.reals.clear();
  if (op.kind == OpKind::Var) {
    op.attrs.reals.push_back(correction);
    if (sqrt) op.attrs.reals.push_back(1.0);
  }
}

PadAttrs PadAttrs::decode(const Op& op) {
  PadAttrs a;
  a.mode = int_at(op, 0);
  if (op.attrs.ints.size() > 1) a.pads = ints_from(op, 1, op.attrs.ints.size() - 1);
  a.value = real_at(op, 0);
  return a;
}

void PadAttrs::encode(Op& op) const {
  op.attrs.ints.clear();
  op.attrs.ints.push_back(mode);
  push(op, pads);
  op.attrs.reals.clear();
  op.attrs.reals.push_back(value);
}

FftAttrs FftAttrs::decode(const Op& op) {
  FftAttrs a;
  a.dim = int_at(op, 0);
  if (op.kind == OpKind::Fft) a.inverse = int_at(op, 1) != 0;
  if (op.kind == OpKind::Irfft) a.n = int_at(op, 1);
  a.scale = real_at(op, 0, 1);
  return a;
}

void FftAttrs::encode(Op& op) const {
  op.attrs.ints.clear();
  op.attrs.ints.push_back(dim);
  if (op.kind == OpKind::Fft) op.attrs.ints.push_back(inverse ? 1 : 0);
  if (op.kind == OpKind::Irfft) op.attrs.ints.push_back(n);
  op.attrs.reals.clear();
  op.attrs.reals.push_back(scale);
}

LinalgAttrs LinalgAttrs::decode(const Op& op) {
  LinalgAttrs a;
  switch (op.kind) {
    case OpKind::Cholesky:
      a.upper = int_at(op, 0) != 0;
      break;
    case OpKind::Qr:
      a.qr_mode = int_at(op, 0);
      break;
    case OpKind::Svd:
      a.full_matrices = int_at(op, 0, 1) != 0;
      a.compute_uv = int_at(op, 1, 1) != 0;
      break;
    case OpKind::Eigh:
      a.upper = int_at(op, 0) != 0;
      a.compute_v = int_at(op, 1, 1) != 0;
      break;
    case OpKind::TriangularSolve:
      a.upper = int_at(op, 0) != 0;
      a.left = int_at(op, 1, 1) != 0;
      a.unitriangular = int_at(op, 2) != 0;
      break;
    default:
      break;
  }
  return a;
}

void LinalgAttrs::encode(Op& op) const {
  auto b = [](bool v) { return int64_t{v ? 1 : 0}; };
  auto& i = op.attrs.ints;
  switch (op.kind) {
    case OpKind::Cholesky:
      i = {b(upper)};
      break;
    case OpKind::Qr:
      i = {qr_mode};
      break;
    case OpKind::Svd:
      i = {b(full_matrices), b(compute_uv)};
      break;
    case OpKind::Eigh:
      i = {b(upper), b(compute_v)};
      break;
    case OpKind::TriangularSolve:
      i = {b(upper), b(left), b(unitriangular)};
      break;
    default:
      i.clear();
      break;
  }
}

NormAttrs NormAttrs::decode(const Op& op) {
  NormAttrs a;
  a.ndims = int_at(op, 0);
  a.has_weight = int_at(op, 1) != 0;
  a.has_bias = int_at(op, 2) != 0;
  a.rms = int_at(op, 3) != 0;
  a.groups = int_at(op, 4);
  a.eps = real_at(op, 0);
  return a;
}

void NormAttrs::encode(Op& op) const {
  auto b = [](bool v) { return int64_t{v ? 1 : 0}; };
  op.attrs.ints = {ndims, b(has_weight), b(has_bias), b(rms), groups};
  op.attrs.reals = {eps};
}

PoolAttrs PoolAttrs::decode(const Op& op) {
  PoolAttrs a;
  a.nsp = int_at(op, 0);
  const size_t n = a.nsp > 0 ? static_cast<size_t>(a.nsp) : 0;
  switch (op.kind) {
    case OpKind::MaxPool:
    case OpKind::AvgPool: {
      const bool is_max = op.kind == OpKind::MaxPool;
      a.kernel = ints_from(op, 1, n);
      a.stride = ints_from(op, 1 + n, n);
      a.padding = ints_from(op, 1 + 2 * n, n);
      size_t at = 1 + 3 * n;
      if (is_max) {
        a.dilation = ints_from(op, at, n);
        at += n;
      }
      a.ceil_mode = int_at(op, at) != 0;
      if (is_max) {
        a.with_indices = int_at(op, at + 1) != 0;
      } else {
        a.count_include_pad = int_at(op, at + 1) != 0;
        a.divisor = int_at(op, at + 2);
      }
      break;
    }
    default:
      a.out = ints_from(op, 1, n);
      if (op.kind == OpKind::AdaptiveMaxPool) a.with_indices = int_at(op, 1 + n) != 0;
      break;
  }
  return a;
}

void PoolAttrs::encode(Op& op) const {
  auto b = [](bool v) { return int64_t{v ? 1 : 0}; };
  op.attrs.ints = {nsp};
  switch (op.kind) {
    case OpKind::MaxPool:
      for (const Dims* d : {&kernel, &stride, &padding, &dilation}) push(op, *d);
      op.attrs.ints.push_back(b(ceil_mode));
      op.attrs.ints.push_back(b(with_indices));
      break;
    case OpKind::AvgPool:
      for (const Dims* d : {&kernel, &stride, &padding}) push(op, *d);
      for (int64_t v : {b(ceil_mode), b(count_include_pad), divisor}) op.attrs.ints.push_back(v);
      break;
    default:
      push(op, out);
      if (op.kind == OpKind::AdaptiveMaxPool) op.attrs.ints.push_back(b(with_indices));
      break;
  }
}

int64_t ConvAttrs::epilogue_of(const Op& op) { return conv_epilogue(op); }

ConvAttrs ConvAttrs::decode(const Op& op) {
  ConvAttrs a;
  a.groups = int_at(op, 0, 1);
  a.nsp = int_at(op, 1, 1);
  const size_t n = a.nsp > 0 ? static_cast<size_t>(a.nsp) : 0, g = geometry_ints(a.nsp);
  a.stride = ints_from(op, 2, n);
  a.padding = ints_from(op, 2 + n, n);
  a.dilation = ints_from(op, 2 + 2 * n, n);
  if (op.kind == OpKind::ConvTranspose) a.output_padding = ints_from(op, g, n);
  if (op.kind == OpKind::ConvWeightGrad) a.weight_size = ints_from(op, g, n);
  if (op.kind == OpKind::Conv && op.attrs.ints.size() > g) {
    a.has_epilogue = true;
    a.epilogue = epilogue_of(op);
    if (a.has_pool()) {
      a.pool_kernel = ints_from(op, g + 1, 2);
      a.pool_stride = ints_from(op, g + 3, 2);
      a.pool_padding = ints_from(op, g + 5, 2);
    }
    if (a.epilogue & kConvClamp) {
      a.clamp_lo = real_at(op, 0);
      a.clamp_hi = real_at(op, 1);
    }
  }
  return a;
}

void ConvAttrs::encode(Op& op) const {
  op.attrs.ints = {groups, nsp};
  for (const Dims* d : {&stride, &padding, &dilation}) push(op, *d);
  if (op.kind == OpKind::ConvTranspose) push(op, output_padding);
  if (op.kind == OpKind::ConvWeightGrad) push(op, weight_size);
  op.attrs.reals.clear();
  if (op.kind != OpKind::Conv || !has_epilogue) return;
  op.attrs.ints.push_back(epilogue);
  if (has_pool())
    for (const Dims* d : {&pool_kernel, &pool_stride, &pool_padding}) push(op, *d);
  if (epilogue & kConvClamp) op.attrs.reals = {clamp_lo, clamp_hi};
}

size_t CreationAttrs::shape_start(OpKind k) {
  return k == OpKind::Arange ? 0 : k == OpKind::Fill ? 2 : k == OpKind::RandInt ? 5 : 3;
}

CreationAttrs CreationAttrs::decode(const Op& op) {
  CreationAttrs c;
  const size_t s = shape_start(op.kind);
  if (op.kind != OpKind::Bernoulli)
    for (size_t i = s; i < op.attrs.ints.size(); ++i) c.shape.push_back(op.attrs.ints[i]);
  switch (op.kind) {
    case OpKind::Fill:
      c.has_int = int_at(op, 0) != 0;
      c.int_value = int_at(op, 1);
      c.value = real_at(op, 0);
      break;
    case OpKind::Arange:
      c.start = real_at(op, 0);
      c.step = real_at(op, 1, 1);
      break;
    default:  // the random ops
      c.seed = static_cast<uint64_t>(static_cast<uint32_t>(int_at(op, 0))) |
               (static_cast<uint64_t>(static_cast<uint32_t>(int_at(op, 1))) << 32);
      c.offset = static_cast<uint64_t>(int_at(op, 2));
      c.low = int_at(op, 3);
      c.high = int_at(op, 4);
      c.a = real_at(op, 0);
      c.b = real_at(op, 1, 1);
      break;
  }
  return c;
}

void CreationAttrs::encode(Op& op) const {
  auto& i = op.attrs.ints;
  auto& r = op.attrs.reals;
  i.clear();
  r.clear();
  switch (op.kind) {
    case OpKind::Fill:
      i = {int64_t{has_int ? 1 : 0}, int_value};
      r = {value};
      break;
    case OpKind::Arange:
      r = {start, step};
      break;
    default:
      i = {static_cast<int64_t>(seed & 0xffffffffULL), static_cast<int64_t>(seed >> 32), static_cast<int64_t>(offset)};
      if (op.kind == OpKind::RandInt) {
        i.push_back(low);
        i.push_back(high);
      }
      if (op.kind == OpKind::RandUniform || op.kind == OpKind::RandNormal) r = {a, b};
      break;
  }
  if (op.kind != OpKind::Bernoulli)
    for (int64_t d : shape) i.push_back(d);
}

UnaryAttrs UnaryAttrs::decode(const Op& op) {
  UnaryAttrs u;
  switch (op.kind) {
    case OpKind::Round:
      u.decimals = int_at(op, 0);
      break;
    case OpKind::IsInf:
      u.which = int_at(op, 0);
      break;
    case OpKind::Logit:
      u.eps = real_at(op, 0, -1);
      break;
    case OpKind::LeakyRelu:
      u.slope = real_at(op, 0, 0.01);
      break;
    case OpKind::Elu:
      u.alpha = real_at(op, 0, 1);
      u.scale = real_at(op, 1, 1);
      u.input_scale = real_at(op, 2, 1);
      break;
    case OpKind::Softplus:
      u.beta = real_at(op, 0, 1);
      u.threshold = real_at(op, 1, 20);
      break;
    case OpKind::NanToNum:
      u.nan = real_at(op, 0);
      u.posinf = real_at(op, 1);
      u.neginf = real_at(op, 2);
      break;
    default:
      break;
  }
  return u;
}

void UnaryAttrs::encode(Op& op) const {
  auto& i = op.attrs.ints;
  auto& r = op.attrs.reals;
  i.clear();
  r.clear();
  switch (op.kind) {
    case OpKind::Round:
      i = {decimals};
      break;
    case OpKind::IsInf:
      i = {which};
      break;
    case OpKind::Logit:
      r = {eps};
      break;
    case OpKind::LeakyRelu:
      r = {slope};
      break;
    case OpKind::Elu:
      r = {alpha, scale, input_scale};
      break;
    case OpKind::Softplus:
      r = {beta, threshold};
      break;
    case OpKind::NanToNum:
      r = {nan, posinf, neginf};
      break;
    default:
      break;
  }
}

ClampAttrs ClampAttrs::decode(const Op& op) {
  ClampAttrs a;
  a.has_min = int_at(op, 0) != 0;
  a.has_max = int_at(op, 1) != 0;
  a.min = real_at(op, 0);
  a.max = real_at(op, 1);
  return a;
}

void ClampAttrs::encode(Op& op) const {
  op.attrs.ints = {int64_t{has_min ? 1 : 0}, int64_t{has_max ? 1 : 0}};
  op.attrs.reals = {min, max};
}

}  // namespace kiln::ir
