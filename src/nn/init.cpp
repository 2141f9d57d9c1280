// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/init.h"

#include <cmath>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/linalg.h"
#include "kiln/ops.h"

namespace kiln::nn::init {

namespace {

void check_float(const Tensor& t, const char* op) {
  KILN_CHECK(t.defined(), op, "expects a defined tensor");
  KILN_CHECK(is_floating(t.dtype()), op, "expects a float tensor, got " << dtype_name(t.dtype()));
}

/// Options for drawing values for t: its plain device (no autodiff), f64 for f64 tensors and
/// f32 otherwise (half types are rounded by the copy).
TensorOptions draw_opts(const Tensor& t) {
  return TensorOptions{.dtype = t.dtype() == f64 ? f64 : f32, .device = t.device().without_autodiff()};
}

/// Writes `values` into t's elements without recording a graph; returns t.
Tensor fill(const Tensor& t, const Tensor& values) {
  NoGradGuard guard;
  Tensor raw = t.to(t.device().without_autodiff());  // shares t's data, no tracking
  raw.copy_(values);
  return t;
}

int64_t fan_of(const Tensor& t, const std::string& mode, const char* op) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
  KILN_CHECK(mode == "fan_in" || mode == "fan_out", op,
             "mode must be \"fan_in\" or \"fan_out\", got \"" << mode << "\"");
  return mode == "fan_in" ? fan_in : fan_out;
}

}  // namespace

double calculate_gain(const std::string& nl, std::optional<double> param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "conv_transpose1d" ||
      nl == "conv_transpose2d" || nl == "conv_transpose3d" || nl == "sigmoid")
    return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nl == "selu") return 3.0 / 4.0;
  KILN_CHECK(false, "init.calculate_gain", "unsupported nonlinearity \"" << nl << "\"");
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Shape& shape) {
  KILN_CHECK(shape.size() >= 2, "init.calculate_fan_in_and_fan_out",
             "fan in and fan out need a tensor with at least 2 dims, got " << shape);
  int64_t receptive = 1;
  for (size_t i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

Tensor constant_(const Tensor& t, double value) {
  KILN_CHECK(t.defined(), "init.constant_", "expects a defined tensor");
  return fill(t, full(t.shape(), value, {.dtype = t.dtype(), .device = t.device().without_autodiff()}));
}

Tensor zeros_(const Tensor& t) { return constant_(t, 0.0); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0); }

Tensor eye_(const Tensor& t) {
  KILN_CHECK(t.defined() && t.dim() == 2, "init.eye_",
             "expects a 2-d tensor, got " << (t.defined() ? to_string(t.shape()) : std::string("undefined")));
  return fill(t, eye(t.size(0), t.size(1), {.dtype = t.dtype(), .device = t.device().without_autodiff()}));
}

Tensor uniform_(const Tensor& t, double a, double b) {
  check_float(t, "init.uniform_");
  KILN_CHECK(a <= b, "init.uniform_", "expects a <= b, got a=" << a << ", b=" << b);
  return fill(t, uniform(t.shape(), a, b, draw_opts(t)));
}

Tensor normal_(const Tensor& t, double mean, double std) {
  check_float(t, "init.normal_");
  KILN_CHECK(std >= 0, "init.normal_", "expects std >= 0, got " << std);
  return fill(t, normal(t.shape(), mean, std, draw_opts(t)));
}

Tensor trunc_normal_(const Tensor& t, double mean, double std, double a, double b) {
  check_float(t, "init.trunc_normal_");
  KILN_CHECK(std > 0 && a < b, "init.trunc_normal_",
             "expects std > 0 and a < b, got std=" << std << ", a=" << a << ", b=" << b);
  // Inverse CDF: uniform in [cdf(a), cdf(b)] mapped through the normal quantile (PyTorch's method).
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = cdf((a - mean) / std), u = cdf((b - mean) / std);
  Tensor v = uniform(t.shape(), 2 * l - 1, 2 * u - 1, {.dtype = f64, .device = t.device().without_autodiff()});
  v = erfinv(v) * (std * std::sqrt(2.0)) + mean;
  return fill(t, clamp(v, Scalar(a), Scalar(b)));
}

Tensor xavier_uniform_(const Tensor& t, double gain) {
  check_float(t, "init.xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * std;
  return fill(t, uniform(t.shape(), -bound, bound, draw_opts(t)));
}

Tensor xavier_normal_(const Tensor& t, double gain) {
  check_float(t, "init.xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  return fill(t, normal(t.shape(), 0.0, std, draw_opts(t)));
}

Tensor kaiming_uniform_(const Tensor& t, const KaimingOptions& o) {
  check_float(t, "init.kaiming_uniform_");
  const int64_t fan = fan_of(t, o.mode, "init.kaiming_uniform_");
  if (t.numel() == 0) return t;
  const double gain = calculate_gain(o.nonlinearity, o.a);
  const double bound = std::sqrt(3.0) * gain / std::sqrt(static_cast<double>(fan));
  return fill(t, uniform(t.shape(), -bound, bound, draw_opts(t)));
}

Tensor kaiming_normal_(const Tensor& t, const KaimingOptions& o) {
  check_float(t, "init.kaiming_normal_");
  const int64_t fan = fan_of(t, o.mode, "init.kaiming_normal_");
  if (t.numel() == 0) return t;
  const double gain = calculate_gain(o.nonlinearity, o.a);
  return fill(t, normal(t.shape(), 0.0, gain / std::sqrt(static_cast<double>(fan)), draw_opts(t)));
}

Tensor orthogonal_(const Tensor& t, double gain) {
  check_float(t, "init.orthogonal_");
  KILN_CHECK(t.dim() >= 2, "init.orthogonal_", "expects a tensor with at least 2 dims, got " << t.shape());
  if (t.numel() == 0) return t;
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  Tensor flat = randn({rows, cols}, {.dtype = f64, .device = t.device().without_autodiff()});
  if (rows < cols) flat = flat.t();
  auto [q, r] = linalg::qr(flat);
  q = q * sign(diagonal(r, 0, -2, -1));  // makes the decomposition unique (PyTorch)
  if (rows < cols) q = q.t();
  return fill(t, (q * gain).reshape(t.shape()));
}

}  // namespace kiln::nn::init
