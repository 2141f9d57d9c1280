// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the nn ops (ops.def): MatMul and the convolutions here, the pools in
// nn_grad_pool.cpp, LayerNorm in nn_grad_norm.cpp. All are written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
//
// Note [Convolution gradients]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The three conv primitives are bilinear and each one's gradients are the other two:
//   y = Conv(x, w):            dx = ConvTranspose(gy, w)  (torch.nn.grad.conv*_input),
//                              dw = ConvWeightGrad(x, gy) (torch.nn.grad.conv*_weight);
//   y = ConvTranspose(x, w):   dx = Conv(gy, w),           dw = ConvWeightGrad(gy, x);
//   w = ConvWeightGrad(x, gy): dx = ConvTranspose(gy, gw), dgy = Conv(x, gw);
// with the stride, padding, dilation and groups of the forward op. ConvTranspose's trailing
// output_padding elements beyond the last stride step that any input reaches are cut off its
// gradient first (they have no dependence on the input), so the shapes fit Conv exactly. A bias
// gets the gradient summed over every dim but the channel.
#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

void register_nn_pool_grads();  // nn_grad_pool.cpp
void register_nn_norm_grads();  // nn_grad_norm.cpp

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
namespace F = kiln::nn::functional;
namespace NG = kiln::nn::grad;
[[maybe_unused]] void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
[[maybe_unused]] void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }

using ir::ConvAttrs;

Tensor conv(const ConvAttrs& a, const Tensor& x, const Tensor& w) {
  const F::ConvOptions o{.stride = a.stride, .padding = a.padding, .dilation = a.dilation, .groups = a.groups};
  return a.nsp == 1 ? F::conv1d(x, w, {}, o) : a.nsp == 2 ? F::conv2d(x, w, {}, o) : F::conv3d(x, w, {}, o);
}

/// Gradient of Conv with respect to its input of shape `in` (a ConvTranspose).
Tensor conv_input(const ConvAttrs& a, const Shape& in, const Tensor& w, const Tensor& gy) {
  const NG::ConvGradOptions o{.stride = a.stride, .padding = a.padding, .dilation = a.dilation, .groups = a.groups};
  return a.nsp == 1   ? NG::conv1d_input(in, w, gy, o)
         : a.nsp == 2 ? NG::conv2d_input(in, w, gy, o)
                      : NG::conv3d_input(in, w, gy, o);
}

/// Gradient of Conv with respect to its weight of shape `ws` (a ConvWeightGrad).
Tensor conv_weight(const ConvAttrs& a, const Tensor& x, const Shape& ws, const Tensor& gy) {
  const NG::ConvGradOptions o{.stride = a.stride, .padding = a.padding, .dilation = a.dilation, .groups = a.groups};
  return a.nsp == 1   ? NG::conv1d_weight(x, ws, gy, o)
         : a.nsp == 2 ? NG::conv2d_weight(x, ws, gy, o)
                      : NG::conv3d_weight(x, ws, gy, o);
}

/// Sum of g over every dim but the channel dim 1 (a bias gradient).
Tensor bias_grad(const Tensor& g) {
  Dims d{0};
  for (int64_t i = 2; i < g.dim(); ++i) d.push_back(i);
  return g.sum(d);
}
}  // namespace

void register_nn_grads() {
  using K = ir::OpKind;
  // MatMul [B, M, K] x [B, K, N] [+ bias [N]]; a batch stride 0 (broadcast) input gets its
  // gradient summed, the bias the sum of the gradient's rows.
  // A 2-d input that is a transposed view (linear's weight.t()) gets its gradient computed
  // transposed and handed back as a transposed view, so the gradient reaching the weight
  // through the view is contiguous (optimizer updates then run on contiguous memory).
  rule(K::MatMul, kSaveInputs, [](C c) -> V {
    const Tensor& g = c.grads[0];
    // (matmul hands 2-d operands over as a batch of one, [1, R, C]; the output is [1, M, N])
    auto transposed = [&g](const ir::TensorDesc& d) {
      if (d.shape.size() != 3 || d.shape[0] != 1 || g.dim() != 3 || g.size(0) != 1) return false;
      return d.shape[1] > 1 && d.shape[2] > 1 && d.strides[1] == 1 && d.strides[2] == d.shape[1];
    };
    Tensor ga, gb;
    if (c.needs(0))
      ga = transposed(c.op.inputs[0]) ? matmul(c.inputs[1], g.mT()).mT()
                                      : sum_to(matmul(g, c.inputs[1].mT()), c.op.inputs[0].shape);
    if (c.needs(1))
      gb = transposed(c.op.inputs[1]) ? matmul(g.mT(), c.inputs[0]).mT()
                                      : sum_to(matmul(c.inputs[0].mT(), g), c.op.inputs[1].shape);
    if (c.op.inputs.size() < 3) return {ga, gb};
    return {ga, gb, c.needs(2) ? g.sum({0, 1}) : Tensor{}};
  });

  // Note [Convolution gradients].
  rule(K::Conv, kSaveInputs, [](C c) -> V {
    const ConvAttrs a = ConvAttrs::decode(c.op);
    const Tensor& g = c.grads[0];
    V r(c.op.inputs.size());
    if (c.needs(0)) r[0] = conv_input(a, c.op.inputs[0].shape, c.inputs[1], g);
    if (c.needs(1)) r[1] = conv_weight(a, c.inputs[0], c.op.inputs[1].shape, g);
    if (r.size() > 2 && c.needs(2)) r[2] = bias_grad(g);
    return r;
  });
  rule(K::ConvTranspose, kSaveInputs, [](C c) -> V {
    const ConvAttrs a = ConvAttrs::decode(c.op);
    const Shape& xs = c.op.inputs[0].shape;
    const Shape& ws = c.op.inputs[1].shape;
    V r(c.op.inputs.size());
    if (r.size() > 2 && c.needs(2)) r[2] = bias_grad(c.grads[0]);
    if (!c.needs(0) && !c.needs(1)) return r;
    // Cut the output_padding elements no input reaches (Note [Convolution gradients]).
    Tensor g = c.grads[0];
    for (int64_t i = 0; i < a.nsp; ++i) {
      const int64_t eff = a.dilation[i] * (ws[2 + i] - 1) + 1;
      const int64_t len =
          (xs[2 + i] - 1) * a.stride[i] - 2 * a.padding[i] + eff + std::min(a.output_padding[i], a.stride[i] - 1);
      if (len < g.size(2 + i)) g = g.narrow(2 + i, 0, len);
    }
    if (c.needs(0)) r[0] = conv(a, g, c.inputs[1]);
    if (c.needs(1)) r[1] = conv_weight(a, g, ws, c.inputs[0]);
    return r;
  });
  rule(K::ConvWeightGrad, kSaveInputs, [](C c) -> V {
    const ConvAttrs a = ConvAttrs::decode(c.op);
    const Tensor& g = c.grads[0];  // [O, C/groups, *k]
    return {c.needs(0) ? conv_input(a, c.op.inputs[0].shape, g, c.inputs[1]) : Tensor(),
            c.needs(1) ? conv(a, c.inputs[0], g) : Tensor()};
  });

  register_nn_pool_grads();
  register_nn_norm_grads();
}

}  // namespace kiln::autodiff
