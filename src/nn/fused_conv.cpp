// SPDX-License-Identifier: MIT OR Apache-2.0
// nn::conv_act and nn::conv_bn: convolution, batch norm, residual and activation; in inference
// one convolution with the Conv op's fused epilogue.
#include "autodiff/graph.h"
#include "kiln/autodiff.h"
#include "kiln/nn/fused.h"
#include "kiln/ops.h"
#include "layers_util.h"
#include "ops/conv_epilogue.h"
#include "ops/prepared.h"

namespace kiln::nn {

namespace F = functional;

namespace {

bool has_pool(const FusedConvOptions& o) { return !o.pool_kernel_size.values().empty(); }

/// The separate modules and ops (training, gradients, or a form the fused op does not take).
Tensor separate(const Tensor& y, const FusedConvOptions& o) {
  Tensor z = o.residual.defined() ? y + o.residual : y;
  if (o.act == FusedConvOptions::Act::Relu) z = relu(z);
  if (o.act == FusedConvOptions::Act::Clamp) z = clamp(z, o.min, o.max);
  return has_pool(o) ? F::max_pool2d(z, o.pool_kernel_size, o.pool) : z;
}

/// The pool's window when the fused op can take it (dilation 1, floor mode, no residual, valid
/// sizes; else the separate ops run, with their checks). Lists expand as max_pool2d's do (a
/// wrong count is its error).
bool fused_pool(const FusedConvOptions& o, F::ConvEpilogue& e) {
  if (o.residual.defined() || o.pool.ceil_mode) return false;
  const char* api = "max_pool2d";
  const Dims k = o.pool_kernel_size.expand(2, api, "kernel_size");
  const Dims s = o.pool.stride.values().empty() ? k : o.pool.stride.expand(2, api, "stride");
  const Dims p = o.pool.padding.expand(2, api, "padding"), d = o.pool.dilation.expand(2, api, "dilation");
  for (int i = 0; i < 2; ++i)
    if (k[i] < 1 || s[i] < 1 || p[i] < 0 || 2 * p[i] > k[i] || d[i] != 1) return false;
  e.pool_kernel = k;
  e.pool_stride = s;
  e.pool_padding = p;
  return true;
}

using Key = SmallVec<int64_t, 32>;

int64_t bits_of(double v) {  // no bit cast from <bit>: emscripten's libc++ has none
  int64_t b;
  static_assert(sizeof b == sizeof v);
  __builtin_memcpy(&b, &v, sizeof b);
  return b;
}

/// The key of a conv_act / conv_bn call's op: the module's (layers_detail::conv_key, with which
/// of the six operands are given) and the options. False when the call does not keep its op.
template <int N>
bool prepared_key(const ConvNd<N>& conv, const FusedConvOptions& o, const Tensor (&in)[6], Key& key) {
  int64_t given = 0;
  for (int i = 0; i < 6; ++i) given |= in[i].defined() ? int64_t{1} << i : 0;
  if (!layers_detail::conv_key(conv, 1, given, key)) return false;
  key.push_back(static_cast<int64_t>(o.act));
  key.push_back(bits_of(o.min));
  key.push_back(bits_of(o.max));
  for (const Dims* d :
       {&o.pool_kernel_size.values(), &o.pool.stride.values(), &o.pool.padding.values(), &o.pool.dilation.values()}) {
    key.push_back(static_cast<int64_t>(d->size()));
    for (int64_t x : *d) key.push_back(x);
  }
  key.push_back(o.pool.ceil_mode);
  return true;
}

/// bn: null for conv_act.
template <int N, class BN>
Tensor run(const ConvNd<N>& conv, const BN* bn, const Tensor& x, const FusedConvOptions& o) {
  KILN_CHECK(N == 2 || !has_pool(o), bn ? "conv_bn" : "conv_act",
             "the max pool option needs a 2-d convolution, got a " << N << "-d one");
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
  const Tensor in[6] = {x, conv.weight, conv.bias, affine.first, affine.second, r};
  Key key;
  const bool keep = prepared_key(conv, o, in, key);
  if (keep)
    if (Tensor y = kiln::detail::run_prepared(&conv.prepared_[1], in, key); y.defined()) return y;
  F::ConvEpilogue e;
  if (keep) {
    e.keep = &conv.prepared_[1];
    e.key = key;
  }
  e.scale = affine.first;
  e.shift = affine.second;
  e.residual = r;
  e.act = o.act == FusedConvOptions::Act::Relu ? 1 : o.act == FusedConvOptions::Act::Clamp ? 2 : 0;
  e.lo = o.min;
  e.hi = o.max;
  if (has_pool(o) && !fused_pool(o, e)) return separate_ops();
  const F::ConvOptions co{.stride = conv.config.stride,
                          .padding = conv.config.padding,
                          .dilation = conv.config.dilation,
                          .groups = conv.config.groups};
  Tensor y = F::conv_with_epilogue(N, x, conv.weight, conv.bias, co, e);
  return y.defined() ? y : separate_ops();  // a residual that broadcasts, a pool that does not fit
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
