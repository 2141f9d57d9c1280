// SPDX-License-Identifier: MIT OR Apache-2.0
// Shape and dtype inference for the conv family (ops.def documents the attributes).
#include <algorithm>

#include "core/checked.h"
#include "ir/attrs.h"
#include "ir/infer_families.h"
#include "kiln/error.h"

namespace kiln::ir {

namespace {

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

}  // namespace

void infer_conv(Op& op) {
  const char* name = op_name(op.kind).data();
  const auto& a = op.attrs.ints;
  KILN_CHECK(a.size() >= 2, name, "expects ints {groups, nsp, ...}, got " << a.size() << " values");
  const ConvAttrs ca = ConvAttrs::decode(op);
  const int64_t groups = ca.groups, nsp = ca.nsp;
  KILN_CHECK(nsp >= 1 && nsp <= 3, name, "supports 1 to 3 spatial dims, got " << nsp);
  const size_t extra = op.kind == OpKind::Conv ? 0 : static_cast<size_t>(nsp);
  const size_t geo = ConvAttrs::geometry_ints(nsp);
  if (op.kind == OpKind::Conv && a.size() > geo) {  // + fused epilogue (+ pool window)
    const int64_t e = a[geo];                       // the raw value: validated before ConvAttrs reads it
    KILN_CHECK(e >= 0 && e <= kConvEpilogueBits, name,
               "fused epilogue must be 0 to 63 (bit 0 relu, bit 1 residual, bit 2 scale, bit 3 shift, bit 4 clamp, "
               "bit 5 max pool), got "
                   << e);
    KILN_CHECK(a.size() == geo + 1 + ((e & kConvMaxPool) ? kConvPoolInts : 0), name,
               "expects " << geo + 1 + ((e & kConvMaxPool) ? kConvPoolInts : 0) << " ints with fused epilogue " << e
                          << ", got " << a.size());
    KILN_CHECK((e & (kConvRelu | kConvClamp)) != (kConvRelu | kConvClamp), name,
               "fused epilogue: relu and clamp exclude each other");
    KILN_CHECK(!(e & kConvClamp) || op.attrs.reals.size() == 2, name,
               "fused clamp needs reals {lo, hi}, got " << op.attrs.reals.size() << " values");
    KILN_CHECK(!(e & kConvMaxPool) || (nsp == 2 && !(e & kConvResidual)), name,
               "a fused max pool needs 2 spatial dims and no residual");
  } else
    KILN_CHECK(a.size() == static_cast<size_t>(2 + 3 * nsp) + extra, name,
               "expects " << 2 + 3 * nsp + static_cast<int64_t>(extra) << " ints for " << nsp << " spatial dims, got "
                          << a.size());
  KILN_CHECK(groups >= 1, name, "groups must be positive, got " << groups);
  auto stride = [&](int64_t i) { return ca.stride[static_cast<size_t>(i)]; };
  auto pad = [&](int64_t i) { return ca.padding[static_cast<size_t>(i)]; };
  auto dil = [&](int64_t i) { return ca.dilation[static_cast<size_t>(i)]; };
  // output_padding (ConvTranspose) or the weight's spatial sizes (ConvWeightGrad)
  const Dims& ext_dims = op.kind == OpKind::ConvTranspose ? ca.output_padding : ca.weight_size;
  auto ext = [&](int64_t i) { return ext_dims[static_cast<size_t>(i)]; };
  for (int64_t i = 0; i < nsp; ++i) {
    KILN_CHECK(stride(i) >= 1, name, "stride must be positive, got " << stride(i));
    KILN_CHECK(pad(i) >= 0, name, "padding must be non-negative, got " << pad(i));
    KILN_CHECK(dil(i) >= 1, name, "dilation must be positive, got " << dil(i));
  }
  const size_t rank = static_cast<size_t>(nsp + 2);
  const bool wgrad = op.kind == OpKind::ConvWeightGrad;
  const size_t res = ca.has_residual() ? 1 : 0;
  const size_t fused = res + (ca.has_scale() ? 1 : 0) + (ca.has_shift() ? 1 : 0);  // epilogue inputs
  if (wgrad)
    KILN_CHECK(op.inputs.size() == 2, name, "expects 2 inputs, got " << op.inputs.size());
  else
    KILN_CHECK(op.inputs.size() == 2 + fused || op.inputs.size() == 3 + fused, name,
               "expects " << 2 + fused << " or " << 3 + fused << " inputs, got " << op.inputs.size());
  const TensorDesc &x = op.inputs[0], &w = op.inputs[1];
  KILN_CHECK(is_float_dtype(x.dtype), name, "expects a floating-point input, got " << dtype_name(x.dtype).data());
  for (const auto& d : op.inputs)
    KILN_CHECK(d.dtype == x.dtype, name,
               "expects one dtype for all inputs, got " << dtype_name(x.dtype).data() << " and "
                                                        << dtype_name(d.dtype).data());
  KILN_CHECK(x.shape.size() == rank && w.shape.size() == rank, name,
             "expects " << rank << "-d input and " << (wgrad ? "grad_output" : "weight") << ", got " << x.shape
                        << " and " << w.shape);
  const int64_t N = x.shape[0], C = x.shape[1];
  Shape out(rank);
  out[0] = N;
  if (op.kind == OpKind::Conv) {
    const int64_t O = w.shape[0];
    KILN_CHECK(O % groups == 0, name,
               "out_channels " << O << " (weight " << w.shape << ") must be divisible by groups " << groups);
    KILN_CHECK(C == w.shape[1] * groups, name,
               "input " << x.shape << " has " << C << " channels, expected " << w.shape[1] * groups << " (weight "
                        << w.shape << ", groups " << groups << ")");
    out[1] = O;
    for (int64_t i = 0; i < nsp; ++i) {
      const size_t d = static_cast<size_t>(2 + i);
      const int64_t eff = detail::checked_add(detail::checked_mul(dil(i), w.shape[d] - 1, name), 1, name);
      const int64_t padded = detail::checked_add(x.shape[d], detail::checked_mul(2, pad(i), name), name);
      KILN_CHECK(padded >= eff, name,
                 "kernel size " << eff << " (dilated) is larger than the padded input size " << padded << " (input "
                                << x.shape << ", weight " << w.shape << ")");
      out[d] = conv_out_size(x.shape[d], w.shape[d], stride(i), pad(i), dil(i));
    }
    if (conv_has_bias(op)) {
      const TensorDesc& b = op.inputs[2];
      KILN_CHECK(b.shape.size() == 1 && b.shape[0] == O, name, "bias must have shape [" << O << "], got " << b.shape);
    }
    for (size_t i = conv_scale_input(op), e = i + fused - res; i < e; ++i)
      KILN_CHECK(op.inputs[i].shape == Shape{O}, name,
                 "the fused per-channel scale and shift must have shape [" << O << "], got " << op.inputs[i].shape);
    if (res)
      KILN_CHECK(op.inputs.back().shape == out, name,
                 "residual must have the output's shape " << out << ", got " << op.inputs.back().shape);
    if (ca.has_pool()) {
      for (size_t i = 0; i < 2; ++i) {
        const int64_t k = ca.pool_kernel[i], st = ca.pool_stride[i], pd = ca.pool_padding[i], d = out[2 + i];
        KILN_CHECK(k >= 1 && st >= 1 && pd >= 0 && 2 * pd <= k, name,
                   "fused max pool: kernel " << k << ", stride " << st << " and padding " << pd
                                             << " must be positive, positive and at most half the kernel");
        const int64_t padded = detail::checked_add(d, detail::checked_mul(2, pd, name), name);
        KILN_CHECK(padded >= k, name,
                   "fused max pool: kernel " << k << " is larger than the padded convolution output " << padded);
        out[2 + i] = (padded - k) / st + 1;
      }
    }
  } else if (op.kind == OpKind::ConvTranspose) {
    KILN_CHECK(
        C == w.shape[0], name,
        "input " << x.shape << " has " << C << " channels, expected " << w.shape[0] << " (weight " << w.shape << ")");
    KILN_CHECK(C % groups == 0, name, "in_channels " << C << " must be divisible by groups " << groups);
    const int64_t O = w.shape[1] * groups;
    out[1] = O;
    for (int64_t i = 0; i < nsp; ++i) {
      const size_t d = static_cast<size_t>(2 + i);
      KILN_CHECK(ext(i) >= 0 && (ext(i) < stride(i) || ext(i) < dil(i)), name,
                 "output_padding " << ext(i) << " must be smaller than either stride " << stride(i) << " or dilation "
                                   << dil(i));
      // In 128 bits, then checked: every term may be as large as int64 allows.
      const __int128 o = static_cast<__int128>(x.shape[d] - 1) * stride(i) - static_cast<__int128>(2) * pad(i) +
                         static_cast<__int128>(dil(i)) * (w.shape[d] - 1) + ext(i) + 1;
      KILN_CHECK(o <= INT64_MAX, name,
                 "output size does not fit in int64 (input " << x.shape << ", weight " << w.shape << ")");
      out[d] = static_cast<int64_t>(std::max<__int128>(o, INT64_MIN));
      KILN_CHECK(out[d] >= 1 || x.shape[d] == 0, name,
                 "output size " << out[d] << " is too small (input " << x.shape << ", weight " << w.shape << ")");
      if (out[d] < 0) out[d] = 0;
    }
    if (op.inputs.size() == 3) {
      const TensorDesc& b = op.inputs[2];
      KILN_CHECK(b.shape.size() == 1 && b.shape[0] == O, name, "bias must have shape [" << O << "], got " << b.shape);
    }
  } else {
    // ConvWeightGrad(x [N, C, *in], grad_out [N, O, *out]) -> [O, C/groups, *k].
    const int64_t O = w.shape[1];
    KILN_CHECK(w.shape[0] == N, name, "input " << x.shape << " and grad_output " << w.shape << " differ in batch size");
    KILN_CHECK(C % groups == 0 && O % groups == 0, name,
               "channels " << C << " and " << O << " must be divisible by groups " << groups);
    out[0] = O;
    out[1] = C / groups;
    for (int64_t i = 0; i < nsp; ++i) {
      const size_t d = static_cast<size_t>(2 + i);
      const int64_t k = ext(i);
      KILN_CHECK(k >= 1, name, "kernel size must be positive, got " << k);
      const int64_t eff = detail::checked_add(detail::checked_mul(dil(i), k - 1, name), 1, name);
      const int64_t padded = detail::checked_add(x.shape[d], detail::checked_mul(2, pad(i), name), name);
      KILN_CHECK(padded >= eff && (padded - eff) / stride(i) + 1 == w.shape[d], name,
                 "grad_output " << w.shape << " does not match input " << x.shape << " with kernel size " << k);
      out[d] = k;
    }
  }
  op.outputs = {contiguous_desc(out, x.dtype)};
}

}  // namespace kiln::ir
