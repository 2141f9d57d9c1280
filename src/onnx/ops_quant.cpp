// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX integer and quantized products: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.
// The uint8 / int8 operands, their zero points subtracted, are multiplied in f64, which holds
// every int32 sum of such products exactly; the convolutions run through Conv's mapping (same
// attributes: pads, strides, dilations, group, auto_pad).
#include "kiln/matmul.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

/// v - zp in f64; zp (optional) is one value, or one per index of dim `axis` of v.
Tensor minus_zero_point(const Tensor& v, const Tensor& zp, int64_t axis) {
  Tensor f = v.to(f64);
  if (!zp.defined() || zp.numel() == 0) return f;
  if (zp.numel() == 1) return f - zp.reshape({}).to(f64);
  Shape s(static_cast<size_t>(v.dim()), 1);
  s[static_cast<size_t>(axis < 0 ? axis + v.dim() : axis)] = zp.numel();
  return f - zp.reshape(s).to(f64);
}

/// Conv's mapping on (x, w[, b]) with this node's attributes.
Tensor conv_of(const OpContext& c, const Tensor& x, const Tensor& w, const Tensor& b = {}) {
  OpContext sub{c.node, c.opset, c.device, {x, w, b}, std::vector<Tensor>(1)};
  registry().find("Conv")->run(sub);
  return sub.out[0];
}

void check_int8(const OpContext& c, const Tensor& t, const char* what) {
  c.check(t.dtype() == u8 || t.dtype() == i8,
          std::string(what) + " must be uint8 or int8, got " + std::string(dtype_name(t.dtype())));
}

/// round half to even, saturated to the range of dt (uint8 or int8).
Tensor requantize(const Tensor& y, DType dt) {
  const double lo = dt == u8 ? 0 : -128, hi = dt == u8 ? 255 : 127;
  return cast(clamp(round(y), lo, hi), dt);
}

/// x_scale * w_scale / y_scale as f32 (as the reference computes it); a per-channel w_scale
/// [M] becomes [1, M, 1, ...] for an output of rank `rank`.
Tensor multiplier(const Tensor& xs, const Tensor& ws, const Tensor& ys, int64_t rank) {
  Tensor m = xs.to(f32).reshape({}) * ws.to(f32) / ys.to(f32).reshape({});
  if (m.numel() > 1) {
    Shape s(static_cast<size_t>(rank), 1);
    s[1] = m.numel();
    m = m.reshape(s);
  }
  return m.to(f64);
}

}  // namespace

void register_quant(Registry& r) {
  // A [.., M, K] @ B [.., K, N] -> int32; a_zero_point per row of A, b_zero_point per column.
  r["MatMulInteger"] = [](OpContext& c) {
    const Tensor &a = c.x(0), &b = c.x(1);
    check_int8(c, a, "A");
    check_int8(c, b, "B");
    const Tensor af = minus_zero_point(a, c.has(2) ? c.x(2) : Tensor{}, -2);
    const Tensor bf = minus_zero_point(b, c.has(3) ? c.x(3) : Tensor{}, -1);
    c.set(0, cast(matmul(af, bf), i32));
  };
  r["ConvInteger"] = [](OpContext& c) {
    const Tensor &x = c.x(0), &w = c.x(1);
    check_int8(c, x, "x");
    check_int8(c, w, "w");
    const Tensor xf = minus_zero_point(x, c.has(2) ? c.x(2) : Tensor{}, 1);
    const Tensor wf = minus_zero_point(w, c.has(3) ? c.x(3) : Tensor{}, 0);
    c.set(0, cast(conv_of(c, xf, wf), i32));
  };
  // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
  r["QLinearMatMul"] = [](OpContext& c) {
    const Tensor &a = c.x(0), &b = c.x(3);
    check_int8(c, a, "a");
    check_int8(c, b, "b");
    Tensor prod = matmul(minus_zero_point(a, c.x(2), -2), minus_zero_point(b, c.x(5), -1));
    Tensor m = (c.x(1).to(f32).reshape({}) * c.x(4).to(f32) / c.x(6).to(f32).reshape({})).to(f64);
    Tensor y = prod * m;
    if (c.has(7)) y = y + c.x(7).to(f64).reshape({});
    c.set(0, requantize(y, c.has(7) ? c.x(7).dtype() : a.dtype()));
  };
  // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point[, B int32].
  r["QLinearConv"] = [](OpContext& c) {
    const Tensor &x = c.x(0), &w = c.x(3);
    check_int8(c, x, "x");
    check_int8(c, w, "w");
    Tensor acc = conv_of(c, minus_zero_point(x, c.x(2), 1), minus_zero_point(w, c.x(5), 0),
                         c.has(8) ? c.x(8).to(f64) : Tensor{});
    Tensor y = acc * multiplier(c.x(1), c.x(4), c.x(6), acc.dim());
    if (c.has(7)) y = y + c.x(7).to(f64).reshape({});
    c.set(0, requantize(y, c.has(7) ? c.x(7).dtype() : x.dtype()));
  };
}

}  // namespace kiln::onnx
