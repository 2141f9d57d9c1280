// SPDX-License-Identifier: MIT OR Apache-2.0
// nn::conv_act and nn::conv_bn: convolution, batch norm, residual and activation; in inference
// one convolution with the Conv op's fused epilogue.
#include "autodiff/graph.h"
#include "kiln/autodiff.h"
#include "kiln/nn/fused.h"
#include "kiln/ops.h"
#include "ops/conv_epilogue.h"

namespace kiln::nn {

namespace F = functional;

namespace {

/// The separate modules and ops (training, gradients, or a form the fused op does not take).
Tensor separate(const Tensor& y, const FusedConvOptions& o) {
  Tensor z = o.residual.defined() ? y + o.residual : y;
  switch (o.act) {
    case FusedConvOptions::Act::Relu:
      return relu(z);
    case FusedConvOptions::Act::Clamp:
      return clamp(z, o.min, o.max);
    case FusedConvOptions::Act::None:
      break;
  }
  return z;
}

/// bn: null for conv_act.
template <int N, class BN>
Tensor run(const ConvNd<N>& conv, const BN* bn, const Tensor& x, const FusedConvOptions& o) {
  auto separate_ops = [&] { return separate(bn ? (*bn)(conv(x)) : conv(x), o); };
  const Tensor& r = o.residual;
  bool fused = x.defined() && x.dim() == N + 2 && conv.config.padding_mode == "zeros" &&
               (!bn || conv.config.out_channels == bn->config.num_features) && x.size(1) == conv.config.in_channels &&
               x.dtype() == conv.weight.dtype() && (x.dtype() == f32 || x.dtype() == f64) &&
               x.device() == conv.weight.device();
  fused = fused && !(grad_enabled() && (autodiff::requires_grad(x) || autodiff::requires_grad(conv.weight) ||
                                        autodiff::requires_grad(conv.bias) || autodiff::requires_grad(r)));
  std::pair<Tensor, Tensor> affine;
  if (fused && bn) {
    affine = bn->eval_affine(x);
    fused = affine.first.defined();
  }
  if (fused && r.defined()) fused = r.dtype() == x.dtype() && r.device() == x.device();
  if (!fused) return separate_ops();
  F::ConvEpilogue e;
  e.scale = affine.first;
  e.shift = affine.second;
  e.residual = r;
  e.act = o.act == FusedConvOptions::Act::Relu ? 1 : o.act == FusedConvOptions::Act::Clamp ? 2 : 0;
  e.lo = o.min;
  e.hi = o.max;
  const F::ConvOptions co{.stride = conv.config.stride,
                          .padding = conv.config.padding,
                          .dilation = conv.config.dilation,
                          .groups = conv.config.groups};
  Tensor y = F::conv_with_epilogue(N, x, conv.weight, conv.bias, co, e);
  return y.defined() ? y : separate_ops();  // a residual that broadcasts
}

}  // namespace

Tensor conv_act(const Conv1d& conv, const Tensor& x, const FusedConvOptions& options) {
  return run<1, BatchNorm1d>(conv, nullptr, x, options);
}
Tensor conv_act(const Conv2d& conv, const Tensor& x, const FusedConvOptions& options) {
  return run<2, BatchNorm2d>(conv, nullptr, x, options);
}
Tensor conv_act(const Conv3d& conv, const Tensor& x, const FusedConvOptions& options) {
  return run<3, BatchNorm3d>(conv, nullptr, x, options);
}
Tensor conv_bn(const Conv1d& conv, const BatchNorm1d& bn, const Tensor& x, const FusedConvOptions& options) {
  return run(conv, &bn, x, options);
}
Tensor conv_bn(const Conv2d& conv, const BatchNorm2d& bn, const Tensor& x, const FusedConvOptions& options) {
  return run(conv, &bn, x, options);
}
Tensor conv_bn(const Conv3d& conv, const BatchNorm3d& bn, const Tensor& x, const FusedConvOptions& options) {
  return run(conv, &bn, x, options);
}

}  // namespace kiln::nn
