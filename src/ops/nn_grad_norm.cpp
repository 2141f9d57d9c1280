// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rule of the LayerNorm primitive (layer norm, RMS norm, group norm; ops.def), written
// with public ops so it is differentiable itself (Note [Autodiff design] in src/autodiff/graph.h).
//
// Note [LayerNorm gradient]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// With the saved statistics, x_hat = (x - mean) * rstd (x * rstd for rms) over M normalised
// elements, and gh = gy * weight:
//   dx = rstd * (gh - mean(gh) - x_hat * mean(gh * x_hat))   (no mean(gh) term for rms)
//   dweight = sum(gy * x_hat), dbias = sum(gy) over the non-normalised positions.
// The mean and rstd outputs are differentiable too (mean = sum(x) / M, d rstd / dx =
// -rstd^2 * x_hat / M): their gradients are added when defined. That is not only for callers of
// native_layer_norm: under create_graph the formula above reads the saved mean / rstd, which
// are outputs of this very node, so gradients of gradients come back through them.
// Group norm (groups = G) views x as [N, G, C/G * spatial] with the [N, G] statistics; its
// weight and bias are per channel [C]. Everything is computed in the statistics' dtype (f32
// for f16/bf16 inputs, as the forward) and cast back to each input's dtype by the engine.
#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }

Tensor add_opt(const Tensor& a, const Tensor& b) { return !a.defined() ? b : !b.defined() ? a : a + b; }

std::vector<Tensor> layer_norm_grad(C c) {
  const ir::NormAttrs a = ir::NormAttrs::decode(c.op);
  const int64_t nd = a.ndims, groups = a.groups;
  const bool has_w = a.has_weight, has_b = a.has_bias, rms = a.rms;
  const Shape& xs = c.op.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(xs.size());
  const Tensor& rstd0 = c.outputs[2];
  const DType acc = rstd0.dtype();
  V r(c.op.inputs.size());

  // The reduction layout: `rs` (x viewed so the statistics of shape `ss` broadcast against it)
  // and the reduced dims `red`.
  Shape rs = xs, ss = c.op.outputs[2].shape;
  Dims red;
  if (groups > 0) {
    const int64_t N = xs[0];
    rs = {N, groups, N * groups == 0 ? 0 : shape_numel(xs) / (N * groups)};
    ss = {N, groups, 1};
    red = {2};
  } else {
    for (int64_t i = rank - nd; i < rank; ++i) red.push_back(i);
  }
  int64_t M = 1;
  for (int64_t d : red) M *= rs[static_cast<size_t>(d)];
  const double inv_m = M > 0 ? 1.0 / static_cast<double>(M) : 0.0;

  Tensor x = c.inputs[0].to(acc).reshape(rs);
  Tensor rstd = rstd0.reshape(ss);
  Tensor xhat = rms ? x * rstd : (x - c.outputs[1].reshape(ss)) * rstd;  // rs layout

  // Per-parameter view: weight/bias broadcast against x's own shape.
  Shape ps;
  Dims param_red;  // dims of x summed for the parameter gradients
  if (groups > 0) {
    ps = Shape(static_cast<size_t>(rank), int64_t{1});
    ps[1] = xs[1];
    param_red.push_back(0);
    for (int64_t i = 2; i < rank; ++i) param_red.push_back(i);
  } else {
    ps = Shape(xs.end() - nd, xs.end());
    for (int64_t i = 0; i < rank - nd; ++i) param_red.push_back(i);
  }
  auto to_param = [&](const Tensor& t, size_t input) {  // sum an x-shaped tensor to a parameter
    Tensor s = param_red.empty() ? t : t.sum(param_red);
    return s.reshape(c.op.inputs[input].shape);
  };

  const Tensor& gy0 = c.grads[0];
  Tensor gx;
  if (gy0.defined()) {
    Tensor gy = gy0.to(acc);
    if (has_w && c.needs(1)) r[1] = to_param(gy * xhat.reshape(xs), 1);
    if (has_b && c.needs(has_w ? 2 : 1)) r[has_w ? 2 : 1] = to_param(gy, has_w ? 2 : 1);
    if (c.needs(0)) {
      Tensor gh = has_w ? (gy * c.inputs[1].to(acc).reshape(ps)).reshape(rs) : gy.reshape(rs);
      Tensor proj = xhat * ((gh * xhat).sum(red, true) * inv_m);
      Tensor inner = rms ? gh - proj : gh - gh.sum(red, true) * inv_m - proj;
      gx = rstd * inner;
    }
  }
  if (c.needs(0)) {
    if (!rms && c.grads[1].defined()) gx = add_opt(gx, c.grads[1].to(acc).reshape(ss) * inv_m);
    if (c.grads[2].defined()) gx = add_opt(gx, c.grads[2].to(acc).reshape(ss) * square(rstd) * xhat * (-inv_m));
    if (gx.defined()) r[0] = gx.expand(rs).reshape(xs);
  }
  return r;
}
}  // namespace

void register_nn_norm_grads() {
  // Note [LayerNorm gradient].
  rule(ir::OpKind::LayerNorm, kSaveBoth, [](C c) -> V { return layer_norm_grad(c); });
}

}  // namespace kiln::autodiff
