// SPDX-License-Identifier: MIT OR Apache-2.0
// Normalisation frontends (kiln/nn/functional/norm.h). layer_norm and rms_norm are the
// LayerNorm primitive; group_norm and instance_norm reshape onto it and apply the per-channel
// affine with public ops; batch_norm, local_response_norm and normalize are composites of
// public ops (reductions and elementwise), so a later autodiff can differentiate them as is.
#include "kiln/nn/functional/norm.h"

#include <cfloat>
#include <cmath>

#include "ir/attrs.h"
#include "kiln/autodiff.h"
#include "nn/batch_norm_eval.h"
#include "ops/dispatch.h"

namespace kiln::nn::functional {

using ir::OpKind;

namespace {

/// Float inputs stay as they are; integers and bools turn into f32 (as other float-only ops).
Tensor float_input(const char* api, const Tensor& x) {
  detail::check_defined(api, x);
  return is_floating(x.dtype()) ? x : cast(x, kDefaultFloat);
}

/// Composites compute f16/bf16 in f32 and round once at the end.
DType compute_dtype(DType d) { return d == DType::F16 || d == DType::BF16 ? DType::F32 : d; }

/// A per-channel [C] tensor viewed as [1, C, 1, ..., 1] to broadcast against x [N, C, *].
Tensor channel_view(const Tensor& t, int64_t rank) {
  Shape s(static_cast<size_t>(rank), int64_t{1});
  s[1] = t.numel();
  return t.reshape(s);
}

void check_channel_param(const char* api, const char* what, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  detail::check_same_device(api, x, p);
  KILN_CHECK(p.numel() == x.size(1), api,
             "expected " << what << " with " << x.size(1) << " elements (the channels of input of shape " << x.shape()
                         << "), got shape " << p.shape());
}

/// Dims {0, 2, 3, ..., rank-1}: everything but the channel dim.
Dims non_channel_dims(int64_t rank) {
  Dims d{0};
  for (int64_t i = 2; i < rank; ++i) d.push_back(i);
  return d;
}

/// Weight/bias as the LayerNorm primitive takes them: x's dtype, or f32 for an f16/bf16 x.
Tensor param_input(const Tensor& p, DType xd) {
  const DType acc = xd == DType::F64 ? DType::F64 : DType::F32;
  return p.dtype() == xd || p.dtype() == acc ? p : cast(p, xd);
}

/// The LayerNorm primitive: x (float), flags and optional parameters already checked.
LayerNormResult run_layer_norm(const char* api, const Tensor& x, int64_t nd, const Tensor& weight, const Tensor& bias,
                               double eps, bool rms, int64_t groups) {
  std::vector<Tensor> inputs{x};
  if (weight.defined()) inputs.push_back(param_input(weight, x.dtype()));
  if (bias.defined()) inputs.push_back(param_input(bias, x.dtype()));
  ir::Op op = detail::make_op(OpKind::LayerNorm);
  ir::NormAttrs{
      .ndims = nd, .has_weight = weight.defined(), .has_bias = bias.defined(), .rms = rms, .groups = groups, .eps = eps}
      .encode(op);
  auto r = detail::run(api, op, x.device(), inputs);
  return {r[0], r[1], r[2]};
}

LayerNormResult layer_norm_impl(const char* api, const Tensor& x_in, const Shape& ns, const Tensor& weight,
                                const Tensor& bias, double eps, bool rms) {
  Tensor x = float_input(api, x_in);
  const int64_t nd = static_cast<int64_t>(ns.size());
  KILN_CHECK(nd >= 1, api,
             "expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, "
             "but got normalized_shape = "
                 << ns);
  bool match = x.dim() >= nd;
  for (int64_t i = 0; match && i < nd; ++i) match = x.size(x.dim() - nd + i) == ns[static_cast<size_t>(i)];
  KILN_CHECK(match, api,
             "given normalized_shape=" << ns << ", expected input with shape [*, " << to_string(ns).substr(1)
                                       << ", but got input of size " << x.shape());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    detail::check_same_device(api, x, *p);
    KILN_CHECK(p->shape() == ns, api,
               "expected " << what << " to be of same shape as normalized_shape, but got " << what << " of shape "
                           << p->shape() << " and normalized_shape = " << ns);
  }
  return run_layer_norm(api, x, nd, weight, bias, eps, rms, 0);
}

/// x * scale + shift with per-channel [C] tensors broadcast over x [N, C, *] (PyTorch's
/// batch-norm formula: scale = invstd * weight, shift = bias - mean * scale).
std::pair<Tensor, Tensor> affine_coefficients(const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                              const Tensor& bias) {
  const int64_t C = invstd.numel();
  const DType cd = invstd.dtype();
  Tensor scale = weight.defined() ? invstd * detail::cast_if_needed(weight.reshape({C}), cd) : invstd;
  Tensor shift = mean * scale;
  shift = bias.defined() ? detail::cast_if_needed(bias.reshape({C}), cd) - shift : -shift;
  return {scale, shift};
}
Tensor channel_affine(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& bias) {
  auto [scale, shift] = affine_coefficients(mean, invstd, weight, bias);
  return apply_channel_affine(x, scale, shift);
}

}  // namespace

std::pair<Tensor, Tensor> batch_norm_eval_coefficients(const Tensor& rm, const Tensor& rv, const Tensor& weight,
                                                       const Tensor& bias, double eps, DType cd) {
  const int64_t C = rm.numel();
  Tensor mean = detail::cast_if_needed(rm.reshape({C}), cd);
  Tensor invstd = rsqrt(detail::cast_if_needed(rv.reshape({C}), cd) + eps);
  return affine_coefficients(mean, invstd, weight, bias);
}

Tensor apply_channel_affine(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  return x * channel_view(scale, x.dim()) + channel_view(shift, x.dim());
}

// ---- layer_norm / rms_norm ---------------------------------------------------------------------

LayerNormResult native_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                  const Tensor& bias, double eps) {
  return layer_norm_impl("native_layer_norm", x, normalized_shape, weight, bias, eps, false);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return layer_norm_impl("layer_norm", x, normalized_shape, weight, bias, eps, false).output;
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  detail::check_defined("rms_norm", x);
  const double e = eps ? *eps : x.dtype() == DType::F64 ? DBL_EPSILON : FLT_EPSILON;
  return layer_norm_impl("rms_norm", x, normalized_shape, weight, Tensor(), e, true).output;
}

// ---- group_norm ----------------------------------------------------------------------------------

Tensor group_norm(const Tensor& x_in, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* api = "group_norm";
  Tensor x = float_input(api, x_in);
  KILN_CHECK(x.dim() >= 2, api, "expected at least 2 dimensions for input tensor but received " << x.dim());
  const int64_t N = x.size(0), C = x.size(1);
  KILN_CHECK(num_groups > 0, api, "num_groups must be positive, got " << num_groups);
  KILN_CHECK(C % num_groups == 0, api,
             "expected number of channels in input to be divisible by num_groups, but got input of shape "
                 << x.shape() << " and num_groups=" << num_groups);
  check_channel_param(api, "weight", weight, x);
  check_channel_param(api, "bias", bias, x);
  const int64_t per_group = x.numel() / std::max<int64_t>(1, N * num_groups);
  KILN_CHECK(N * per_group != 1 || x.numel() == 0, api,
             "expected more than 1 value per channel when training, got input size " << x.shape());
  const Tensor w = weight.defined() ? weight.reshape({C}) : weight, b = bias.defined() ? bias.reshape({C}) : bias;
  return run_layer_norm(api, x, x.dim() - 1, w, b, eps, false, num_groups).output;
}

// ---- instance_norm -------------------------------------------------------------------------------

Tensor instance_norm(const Tensor& x_in, const InstanceNormOptions& o) {
  const char* api = "instance_norm";
  Tensor x = float_input(api, x_in);
  KILN_CHECK(x.dim() >= 2, api, "expected input of shape [N, C, *], got " << x.shape());
  const int64_t N = x.size(0), C = x.size(1);
  check_channel_param(api, "weight", o.weight, x);
  check_channel_param(api, "bias", o.bias, x);
  check_channel_param(api, "running_mean", o.running_mean, x);
  check_channel_param(api, "running_var", o.running_var, x);
  KILN_CHECK(o.running_mean.defined() == o.running_var.defined(), api,
             "running_mean and running_var must be given together");
  const DType out = x.dtype(), cd = compute_dtype(out);
  if (!o.use_input_stats) {
    KILN_CHECK(o.running_mean.defined(), api,
               "expected running_mean and running_var to be defined when use_input_stats is false");
    Tensor rm = detail::cast_if_needed(o.running_mean.reshape({C}), cd);
    Tensor rv = detail::cast_if_needed(o.running_var.reshape({C}), cd);
    Tensor y = channel_affine(detail::cast_if_needed(x, cd), rm, rsqrt(rv + o.eps), o.weight, o.bias);
    return detail::cast_if_needed(y, out);
  }
  const int64_t S = N * C == 0 ? 0 : x.numel() / (N * C);
  KILN_CHECK(S != 1, api, "expected more than 1 spatial element when training, got input size " << x.shape());
  if (x.numel() == 0) return x.clone();
  const Tensor w = o.weight.defined() ? o.weight.reshape({C}) : o.weight;
  const Tensor b = o.bias.defined() ? o.bias.reshape({C}) : o.bias;
  auto r = run_layer_norm(api, x, x.dim() - 1, w, b, o.eps, false, C);
  if (o.running_mean.defined() && x.numel() > 0) {
    // running = (1 - m) * running + m * (batch average of each instance's mean / unbiased var).
    NoGradGuard no_grad;  // buffers, not part of the autodiff graph (as PyTorch)
    const DType sd = o.running_mean.dtype();
    Tensor m = detail::cast_if_needed(r.mean.mean({0}), sd);
    Tensor v = detail::cast_if_needed(var(detail::cast_if_needed(x, cd).reshape({N, C, S}), {2}, 1.0).mean({0}), sd);
    Tensor rm = o.running_mean, rv = o.running_var;
    rm.copy_((m * o.momentum + rm.reshape({C}) * (1 - o.momentum)).reshape(rm.shape()));
    rv.copy_((v * o.momentum + rv.reshape({C}) * (1 - o.momentum)).reshape(rv.shape()));
  }
  return r.output;
}

// ---- batch_norm ----------------------------------------------------------------------------------

Tensor batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormOptions& o) {
  const char* api = "batch_norm";
  Tensor x = float_input(api, x_in);
  KILN_CHECK(x.dim() >= 2, api, "expected input of shape [N, C, *], got " << x.shape());
  const int64_t C = x.size(1), rank = x.dim();
  check_channel_param(api, "weight", o.weight, x);
  check_channel_param(api, "bias", o.bias, x);
  check_channel_param(api, "running_mean", running_mean, x);
  check_channel_param(api, "running_var", running_var, x);
  KILN_CHECK(running_mean.defined() == running_var.defined(), api,
             "running_mean and running_var must be given together");
  const int64_t count = C == 0 ? 0 : x.numel() / C;
  if (o.training) {
    KILN_CHECK(count != 1, api, "Expected more than 1 value per channel when training, got input size " << x.shape());
    KILN_CHECK(o.eps > 0, api, "batch_norm eps must be positive during training, but got " << o.eps);
  }
  KILN_CHECK(o.eps >= 0, api, "batch_norm eps must be non-negative, but got " << o.eps);
  KILN_CHECK(o.training || running_mean.defined(), api, "running_mean must be defined in evaluation mode");
  const DType out = x.dtype(), cd = compute_dtype(out);
  if (x.numel() == 0) return x.clone();
  Tensor xc = detail::cast_if_needed(x, cd);
  Tensor mean, invstd;
  if (o.training) {
    const Dims dims = non_channel_dims(rank);
    mean = kiln::mean(xc, dims);
    Tensor var_b = var(xc, dims, 0.0);
    invstd = rsqrt(var_b + o.eps);
    if (running_mean.defined()) {
      NoGradGuard no_grad;  // buffers, not part of the autodiff graph (as PyTorch)
      const DType sd = running_mean.dtype();
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      Tensor m = detail::cast_if_needed(mean, sd), v = detail::cast_if_needed(var_b * unbias, sd);
      Tensor rm = running_mean, rv = running_var;
      rm.copy_((m * o.momentum + rm.reshape({C}) * (1 - o.momentum)).reshape(rm.shape()));
      rv.copy_((v * o.momentum + rv.reshape({C}) * (1 - o.momentum)).reshape(rv.shape()));
    }
  } else {
    auto [scale, shift] = batch_norm_eval_coefficients(running_mean, running_var, o.weight, o.bias, o.eps, cd);
    return detail::cast_if_needed(apply_channel_affine(xc, scale, shift), out);
  }
  return detail::cast_if_needed(channel_affine(xc, mean, invstd, o.weight, o.bias), out);
}

// ---- local_response_norm ---------------------------------------------------------------------------

Tensor local_response_norm(const Tensor& x_in, int64_t size, double alpha, double beta, double k) {
  const char* api = "local_response_norm";
  Tensor x = float_input(api, x_in);
  KILN_CHECK(x.dim() >= 3, api, "expected 3D or higher dimensionality input (got " << x.dim() << " dimensions)");
  KILN_CHECK(size > 0, api, "size must be positive, got " << size);
  if (x.numel() == 0) return x;
  const int64_t C = x.size(1);
  // Squares zero-padded along channels: size/2 before, (size-1)/2 after (PyTorch's window).
  Tensor sq = x * x;
  Shape lo = x.shape(), hi = x.shape();
  lo[1] = size / 2;
  hi[1] = (size - 1) / 2;
  Tensor padded = cat({zeros(lo, {.dtype = x.dtype(), .device = x.device()}), sq,
                       zeros(hi, {.dtype = x.dtype(), .device = x.device()})},
                      1);
  Tensor win;
  if (size <= 16) {
    win = padded.narrow(1, 0, C);
    for (int64_t j = 1; j < size; ++j) win = win + padded.narrow(1, j, C);
  } else {
    // Window sums as differences of a running sum (accumulated in f64 by cumsum).
    Shape z = x.shape();
    z[1] = 1;
    Tensor cs = cumsum(cat({zeros(z, {.dtype = x.dtype(), .device = x.device()}), padded}, 1), 1, DType::F64);
    win = cast(cs.narrow(1, size, C) - cs.narrow(1, 0, C), x.dtype());
  }
  Tensor div = pow(win / static_cast<double>(size) * alpha + k, Scalar(beta));
  return x / div;
}

// ---- normalize --------------------------------------------------------------------------------------

Tensor normalize(const Tensor& x_in, double p, int64_t dim, double eps) {
  const char* api = "normalize";
  Tensor x = float_input(api, x_in);
  const int64_t d = wrap_dim(dim, x.dim(), api);
  Tensor denom = clamp_min(norm(x, p, {d}, true), eps);
  return x / denom;
}

}  // namespace kiln::nn::functional
