// SPDX-License-Identifier: MIT OR Apache-2.0
// The functional activations, dropouts, embedding and bilinear (kiln/nn/functional/activation.h);
// the modules of kiln/nn/layers.h and activation.h call these.
#include <cmath>
#include <string>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/nn/functional/activation.h"
#include "kiln/ops.h"

namespace kiln::nn::functional {

namespace {

std::string shape_of(const Tensor& x) { return x.defined() ? to_string(x.shape()) : std::string("undefined"); }

void check_dropout(const char* op, const Tensor& x, double p) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, op, "dropout probability has to be between 0 and 1, but got " << p);
  KILN_CHECK(x.defined() && is_floating(x.dtype()), op,
             "expects a floating-point input, got " << (x.defined() ? dtype_name(x.dtype()).data() : "undefined")
                                                    << shape_of(x));
}

/// A keep mask of shape mask_shape (ones with probability 1 - p), on x's device, not tracked.
Tensor keep_mask(const Tensor& x, double p, const Shape& mask_shape) {
  const Device plain = x.device().without_autodiff();
  return bernoulli(mask_shape, 1.0 - p, {.dtype = x.dtype(), .device = plain}).to(x.device());
}

/// The mask shape of a channel dropout: [N, C, 1, ...] batched, [C, 1, ...] unbatched.
Shape feature_mask_shape(const Tensor& x, int64_t keep) {
  Shape ms(static_cast<size_t>(x.dim()), 1);
  for (int64_t d = 0; d < keep; ++d) ms[static_cast<size_t>(d)] = x.size(d);
  return ms;
}

Tensor plain_dropout(const Tensor& x, double p, const Shape& mask_shape) {
  if (p == 1.0) return x * 0.0;
  return x * (keep_mask(x, p, mask_shape) * (1.0 / (1.0 - p)));
}

// PyTorch's _dropout_impl with alpha: out = x * a * m + alpha * a * (m - 1) + alpha * a * p.
Tensor alpha_impl(const Tensor& x, double p, const Shape& mask_shape) {
  if (p == 1.0) return x * 0.0;
  constexpr double kAlpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kAlpha * kAlpha * p + 1.0) * (1.0 - p));
  Tensor m = keep_mask(x, p, mask_shape);
  Tensor b = (m - 1.0) * (kAlpha * a) + kAlpha * a * p;
  return x * (m * a) + b;
}

Tensor feature_dropout(const char* op, const Tensor& x, double p, bool training, int64_t n) {
  check_dropout(op, x, p);
  KILN_CHECK(x.dim() == n + 1 || x.dim() == n + 2, op,
             "expects an input [N, C, *] or [C, *] with " << n << " spatial dims, got " << shape_of(x));
  if (!training || p == 0.0 || x.numel() == 0) return x;
  // Batched: one draw per (n, c); unbatched: per c. A 3-d input to dropout2d is [N, C, L] (PyTorch).
  const int64_t keep = (x.dim() == n + 2 || n == 2) ? 2 : 1;
  return plain_dropout(x, p, feature_mask_shape(x, keep));
}

}  // namespace

Tensor prelu(const Tensor& x, const Tensor& weight) {
  KILN_CHECK(x.defined() && weight.defined() && weight.dim() <= 1, "prelu",
             "expects an input and a weight [1] or [C], got " << shape_of(x) << " and " << shape_of(weight));
  const int64_t n = weight.numel();
  KILN_CHECK(n == 1 || (x.dim() >= 2 && x.size(1) == n) || (x.dim() == 1 && x.size(0) == n), "prelu",
             "weight of " << n << " values expects input [N, " << n << ", *] or [" << n << "], got " << shape_of(x));
  Tensor w = weight.reshape({n});
  if (n > 1 && x.dim() >= 2) {
    Shape s(static_cast<size_t>(x.dim() - 1), 1);
    s[0] = n;
    w = w.reshape(s);
  } else if (n == 1) {
    w = w.reshape({});
  }
  return where(x >= 0, x, w * x);
}

Tensor glu(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.defined() && x.dim() >= 1 && dim >= -x.dim() && dim < x.dim() && x.size(dim) % 2 == 0, "glu",
             "expects an input whose dim " << dim << " has an even size, got " << shape_of(x));
  auto halves = chunk(x, 2, dim);
  return halves[0] * sigmoid(halves[1]);
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_dropout("dropout", x, p);
  if (!training || p == 0.0 || x.numel() == 0) return x;
  return plain_dropout(x, p, x.shape());
}

Tensor dropout1d(const Tensor& x, double p, bool training) { return feature_dropout("dropout1d", x, p, training, 1); }
Tensor dropout2d(const Tensor& x, double p, bool training) { return feature_dropout("dropout2d", x, p, training, 2); }
Tensor dropout3d(const Tensor& x, double p, bool training) { return feature_dropout("dropout3d", x, p, training, 3); }

Tensor alpha_dropout(const Tensor& x, double p, bool training) {
  check_dropout("alpha_dropout", x, p);
  if (!training || p == 0.0 || x.numel() == 0) return x;
  return alpha_impl(x, p, x.shape());
}

Tensor feature_alpha_dropout(const Tensor& x, double p, bool training) {
  check_dropout("feature_alpha_dropout", x, p);
  KILN_CHECK(x.dim() >= 2, "feature_alpha_dropout", "expects an input [N, C, *], got " << shape_of(x));
  if (!training || p == 0.0 || x.numel() == 0) return x;
  return alpha_impl(x, p, feature_mask_shape(x, 2));
}

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx,
                 std::optional<double> max_norm, double norm_type) {
  KILN_CHECK(input.defined() && !is_floating(input.dtype()) && input.dtype() != DType::Bool, "embedding",
             "expects integer indices, got " << (input.defined() ? dtype_name(input.dtype()).data() : "undefined")
                                             << shape_of(input));
  KILN_CHECK(weight.defined() && weight.dim() == 2, "embedding",
             "expects a weight [num_embeddings, embedding_dim], got " << shape_of(weight));
  const int64_t num = weight.size(0);
  if (padding_idx) {
    KILN_CHECK(*padding_idx >= -num && *padding_idx < num, "embedding",
               "padding_idx must be within num_embeddings (" << num << "), got " << *padding_idx);
    if (*padding_idx < 0) *padding_idx += num;
  }
  if (max_norm && input.numel() > 0) {
    // torch.embedding_renorm_: rescale the looked-up rows in place, outside autodiff.
    NoGradGuard guard;
    Tensor data = weight.detach();
    Tensor rows = unique(input.reshape({-1}).to(i64)).values;
    Tensor sel = index_select(data, 0, rows);
    Tensor nrm = norm(sel, norm_type, {1}, /*keepdim=*/true);
    Tensor scale = where(nrm > *max_norm, *max_norm / (nrm + 1e-7), 1.0);
    data.index_put_({rows}, sel * scale);
  }
  Tensor w = weight;
  if (padding_idx && weight.requires_grad()) {
    // The padding row reads a detached copy, so it gets no gradient (as PyTorch).
    Tensor row = (arange(num, i64, weight.device()) == *padding_idx).unsqueeze(1);
    w = where(row, weight.detach(), weight);
  }
  return ::kiln::embedding(input, w);
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  const bool ok = x1.defined() && x2.defined() && weight.defined() && weight.dim() == 3 && x1.dim() >= 1 &&
                  x1.dim() == x2.dim() && x1.size(-1) == weight.size(1) && x2.size(-1) == weight.size(2) &&
                  Shape(x1.shape().begin(), x1.shape().end() - 1) == Shape(x2.shape().begin(), x2.shape().end() - 1);
  KILN_CHECK(ok, "bilinear",
             "expects inputs [..., in1] and [..., in2] with the same leading dims and a weight [out, in1, in2], got "
                 << shape_of(x1) << ", " << shape_of(x2) << " and weight " << shape_of(weight));
  const int64_t in1 = weight.size(1), in2 = weight.size(2), out = weight.size(0);
  Shape lead(x1.shape().begin(), x1.shape().end() - 1);
  const int64_t n = shape_numel(lead);
  Tensor a = x1.reshape({n, in1}), b = x2.reshape({n, in2});
  // t[n, o, j] = sum_i a[n, i] W[o, i, j]; y[n, o] = sum_j t[n, o, j] b[n, j].
  Tensor t = matmul(a, weight.permute({1, 0, 2}).reshape({in1, out * in2})).reshape({n, out, in2});
  Tensor y = sum(t * b.unsqueeze(1), {-1});
  if (bias.defined()) y = y + bias;
  lead.push_back(out);
  return y.reshape(lead);
}

}  // namespace kiln::nn::functional

// ---- further activations (torch.nn.functional's names and NaN behaviour) ---------------------

namespace kiln::nn::functional {

namespace {
void check_float_input(const char* op, const Tensor& x) {
  KILN_CHECK(x.defined() && is_floating(x.dtype()), op,
             "expects a floating-point input, got " << (x.defined() ? dtype_name(x.dtype()).data() : "undefined")
                                                    << shape_of(x));
}
void check_lambd(const char* op, double lambd) {
  KILN_CHECK(lambd >= 0, op, "lambda must be greater or equal to 0, but found to be " << lambd);
}
}  // namespace

Tensor logsigmoid(const Tensor& x) {
  check_float_input("logsigmoid", x);
  return minimum(x, 0.0) - log1p(exp(-abs(x)));
}

Tensor hardshrink(const Tensor& x, double lambd) {
  check_float_input("hardshrink", x);
  check_lambd("hardshrink", lambd);
  return where(abs(x) <= lambd, 0.0, x);  // NaN stays NaN
}

Tensor softshrink(const Tensor& x, double lambd) {
  check_float_input("softshrink", x);
  check_lambd("softshrink", lambd);
  return where(x > lambd, x - lambd, where(x < -lambd, x + lambd, x * 0.0));
}

Tensor tanhshrink(const Tensor& x) {
  check_float_input("tanhshrink", x);
  return x - tanh(x);
}

Tensor threshold(const Tensor& x, double threshold, double value) {
  KILN_CHECK(x.defined(), "threshold", "expects a defined input");
  // value takes x's dtype (an integer x stays integer, as in PyTorch)
  const Scalar v = is_floating(x.dtype()) ? Scalar(value) : Scalar(static_cast<int64_t>(value));
  return where(x <= threshold, v, x);
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training) {
  check_float_input("rrelu", x);
  KILN_CHECK(lower <= upper, "rrelu", "lower bound " << lower << " must not exceed upper bound " << upper);
  if (!training) return leaky_relu(x, (lower + upper) / 2);
  const Device plain = x.device().without_autodiff();
  Tensor slope = uniform(x.shape(), lower, upper, {.dtype = x.dtype(), .device = plain}).to(x.device());
  return where(x <= 0.0, x * slope, x);
}

}  // namespace kiln::nn::functional
