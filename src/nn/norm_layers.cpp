// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/norm_layers.h"

#include <array>
#include <mutex>
#include <sstream>
#include <tuple>

#include "core/backend.h"
#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/nn/functional/norm.h"
#include "kiln/ops.h"
#include "nn/batch_norm_eval.h"

namespace kiln::nn {
namespace F = kiln::nn::functional;
namespace {
std::string shape_str(const Tensor& x) { return x.defined() ? to_string(x.shape()) : std::string("undefined"); }
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
const char* tf(bool b) { return b ? "true" : "false"; }
Tensor buffer(Tensor t, const Device& device) { return device.has_autodiff() ? t.to(device) : t; }

// running stats (mean 0, var 1, count 0) on device.
void make_stats(int64_t c, DType dt, const Device& device, Buffer& rm, Buffer& rv, Buffer& nbt) {
  TensorOptions o{.dtype = dt, .device = device.without_autodiff()};
  rm = buffer(zeros({c}, o), device);
  rv = buffer(ones({c}, o), device);
  nbt = buffer(zeros({}, {.dtype = i64, .device = device.without_autodiff()}), device);
}
}  // namespace

// ---- BatchNorm ----------------------------------------------------------------------------

// The eval-mode coefficients and what they were computed from: the contents of weight, bias,
// running_mean and running_var (their storages' stamps, renewed by every in-place write, queued
// or not, and their offsets), and eps.
struct BatchNormBase::EvalCache {
  // Per source tensor (weight, bias, running mean and variance): its storage's content stamp
  // (Storage::stamp: unique across storages, renewed by every write; 0: absent) and offset.
  struct Src {
    uint64_t stamp = 0;
    int64_t offset = 0;
    bool operator==(const Src&) const = default;
  };
  std::mutex mu;
  std::array<Src, 4> src;
  double eps = 0;
  Device device;
  DType dtype = f32;
  Tensor scale, shift;
};

BatchNormBase::BatchNormBase(const BatchNormConfig& c, const Device& device, const char* name) : config(c) {
  KILN_CHECK(c.num_features > 0, name, name << " needs num_features > 0, got " << c.num_features);
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  if (c.affine) {
    weight = make_param(ones({c.num_features}, o), device);
    bias = make_param(zeros({c.num_features}, o), device);
  }
  if (c.track_running_stats)
    make_stats(c.num_features, c.dtype, device, running_mean, running_var, num_batches_tracked);
  eval_cache_ = std::make_shared<EvalCache>();
}

Tensor BatchNormBase::run(const Tensor& x, const char* name, int64_t rank_a, int64_t rank_b) const {
  const int64_t c = config.num_features;
  KILN_CHECK(x.defined() && (x.dim() == rank_a || x.dim() == rank_b) && x.size(1) == c, name,
             name << "(num_features=" << c << ") expects input "
                  << (rank_a == 2   ? "[N, C] or [N, C, L]"
                      : rank_a == 4 ? "[N, C, H, W]"
                                    : "[N, C, D, H, W]")
                  << " with C = " << c << ", got " << shape_str(x));
  const bool training = is_training();
  double factor = config.momentum.value_or(0.0);
  if (training && config.track_running_stats) {
    Tensor n = num_batches_tracked;
    n.copy_(n + 1);
    if (!config.momentum) factor = 1.0 / static_cast<double>(n.to(Device::cpu()).item<int64_t>());
  }
  const bool use_batch = training || !config.track_running_stats;
  if (training && stats_reducer) return run_synced(x, factor);
  if (!use_batch)
    if (Tensor y = run_eval_cached(x); y.defined()) return y;
  Tensor rm = running_mean, rv = running_var;  // undefined when not tracked
  return F::batch_norm(x, rm, rv,
                       {.weight = weight, .bias = bias, .training = use_batch, .momentum = factor, .eps = config.eps});
}

Tensor BatchNormBase::run_synced(const Tensor& x, double momentum) const {
  // Two reductions over the processes: the sums (with the element count) give the global mean,
  // then the squared deviations from it give the biased variance (no cancellation of E[x^2] -
  // E[x]^2). Both sums carry gradients, so each process's input gradient is the one-process
  // gradient of its part of the batch. Low-precision inputs are computed in f32.
  const int64_t c = config.num_features;
  const DType ct = x.dtype() == f64 ? f64 : f32;
  const Tensor xf = x.dtype() == ct ? x : x.to(ct);
  Dims dims{0};
  Shape per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = c;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const double local_n = x.numel() == 0 ? 0.0 : static_cast<double>(x.numel() / c);
  const Tensor part = cat({xf.sum(dims), full({1}, local_n, {.dtype = ct, .device = x.device()})});
  const Tensor total = stats_reducer->sum(part);
  const double n = total.narrow(0, c, 1).detach().to(Device::cpu()).to(f64).item<double>();
  KILN_CHECK(n > 1, "SyncBatchNorm",
             "synchronised batch norm expects more than 1 value per channel over all processes when training, got "
                 << n << " (input " << shape_str(x) << ")");
  const Tensor mean = total.narrow(0, 0, c) / n;
  const Tensor centred = xf - mean.reshape(per_channel);
  const Tensor var = stats_reducer->sum((centred * centred).sum(dims)) / n;
  Tensor y = centred * (var + config.eps).rsqrt().reshape(per_channel);
  if (weight.defined()) y = y * weight.to(ct).reshape(per_channel);
  if (bias.defined()) y = y + bias.to(ct).reshape(per_channel);
  if (config.track_running_stats) {
    NoGradGuard no_grad;
    Tensor rm = running_mean, rv = running_var;
    rm.copy_(rm * (1.0 - momentum) + mean.detach().to(rm.dtype()) * momentum);
    rv.copy_(rv * (1.0 - momentum) + (var.detach() * (n / (n - 1))).to(rv.dtype()) * momentum);
  }
  return y.dtype() == x.dtype() ? y : y.to(x.dtype());
}

Tensor BatchNormBase::run_eval_cached(const Tensor& x) const {
  auto [scale, shift] = eval_affine(x);
  return scale.defined() ? F::apply_channel_affine(x, scale, shift) : Tensor{};
}

std::pair<Tensor, Tensor> BatchNormBase::eval_affine(const Tensor& x) const {
  // Only for f32/f64 inputs with weight, bias and statistics of their dtype and device (others
  // take functional::batch_norm's casts and checks), when nothing needs gradients of the
  // coefficients (weight and bias trained in eval mode).
  if (!x.defined() || is_training() || !config.track_running_stats) return {};
  const DType dt = x.dtype();
  if (!eval_cache_ || (dt != f32 && dt != f64) || !running_mean.defined() || !running_var.defined()) return {};
  const Tensor* ts[4] = {&weight, &bias, &running_mean, &running_var};
  for (const Tensor* t : ts)
    if (t->defined() &&
        (t->dtype() != dt || t->device() != x.device() || t->numel() != config.num_features || !t->impl().storage))
      return {};
  if (grad_enabled() && ((weight.defined() && weight.requires_grad()) || (bias.defined() && bias.requires_grad())))
    return {};
  EvalCache& c = *eval_cache_;
  std::lock_guard<std::mutex> lock(c.mu);
  auto src_of = [&](size_t i) {
    return ts[i]->defined() ? EvalCache::Src{ts[i]->impl().storage->stamp, ts[i]->storage_offset()} : EvalCache::Src{};
  };
  bool hit = c.scale.defined() && c.eps == config.eps && c.device == x.device() && c.dtype == dt;
  for (size_t i = 0; hit && i < 4; ++i) hit = c.src[i] == src_of(i);
  if (!hit) {
    // The same ops as functional::batch_norm in eval mode, so the results are bitwise its own.
    std::tie(c.scale, c.shift) =
        F::batch_norm_eval_coefficients(running_mean, running_var, weight, bias, config.eps, dt);
    for (size_t i = 0; i < 4; ++i) c.src[i] = src_of(i);
    c.eps = config.eps;
    c.device = x.device();
    c.dtype = dt;
  }
  return {c.scale, c.shift};
}

std::string BatchNormBase::extra_repr() const {
  return std::to_string(config.num_features) + ", eps=" + num(config.eps) +
         ", momentum=" + (config.momentum ? num(*config.momentum) : std::string("None")) +
         ", affine=" + tf(config.affine) + ", track_running_stats=" + tf(config.track_running_stats);
}

// ---- LayerNorm ----------------------------------------------------------------------------

LayerNorm::LayerNorm(const LayerNormConfig& c, const Device& device) : config(c) {
  KILN_CHECK(!c.normalized_shape.empty(), "LayerNorm", "LayerNorm needs a non-empty normalized_shape");
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  if (c.elementwise_affine) {
    weight = make_param(ones(c.normalized_shape, o), device);
    if (c.bias) bias = make_param(zeros(c.normalized_shape, o), device);
  }
}

namespace {
bool trailing_match(const Tensor& x, const Shape& ns) {
  if (!x.defined() || x.dim() < static_cast<int64_t>(ns.size())) return false;
  const int64_t off = x.dim() - static_cast<int64_t>(ns.size());
  for (size_t i = 0; i < ns.size(); ++i)
    if (x.size(off + static_cast<int64_t>(i)) != ns[i]) return false;
  return true;
}
}  // namespace

Tensor LayerNorm::forward(const Tensor& x) const {
  KILN_CHECK(trailing_match(x, config.normalized_shape), "LayerNorm",
             "LayerNorm(normalized_shape=" << to_string(config.normalized_shape) << ") expects input [*, "
                                           << to_string(config.normalized_shape) << "], got " << shape_str(x));
  return F::layer_norm(x, config.normalized_shape, weight, bias, config.eps);
}
std::string LayerNorm::extra_repr() const {
  return to_string(config.normalized_shape) + ", eps=" + num(config.eps) +
         ", elementwise_affine=" + tf(config.elementwise_affine) + ", bias=" + tf(config.bias);
}

// ---- GroupNorm ----------------------------------------------------------------------------

GroupNorm::GroupNorm(const GroupNormConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.num_groups > 0 && c.num_channels > 0 && c.num_channels % c.num_groups == 0, "GroupNorm",
             "GroupNorm needs num_channels divisible by num_groups, got num_groups="
                 << c.num_groups << ", num_channels=" << c.num_channels);
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  if (c.affine) {
    weight = make_param(ones({c.num_channels}, o), device);
    bias = make_param(zeros({c.num_channels}, o), device);
  }
}

Tensor GroupNorm::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.dim() >= 2 && x.size(1) == config.num_channels, "GroupNorm",
             "GroupNorm(num_groups=" << config.num_groups << ", num_channels=" << config.num_channels
                                     << ") expects input [N, " << config.num_channels << ", *], got " << shape_str(x));
  return F::group_norm(x, config.num_groups, weight, bias, config.eps);
}
std::string GroupNorm::extra_repr() const {
  return std::to_string(config.num_groups) + ", " + std::to_string(config.num_channels) + ", eps=" + num(config.eps) +
         ", affine=" + tf(config.affine);
}

// ---- InstanceNorm -------------------------------------------------------------------------

InstanceNormBase::InstanceNormBase(const InstanceNormConfig& c, const Device& device, const char* name) : config(c) {
  KILN_CHECK(c.num_features > 0, name, name << " needs num_features > 0, got " << c.num_features);
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  if (c.affine) {
    weight = make_param(ones({c.num_features}, o), device);
    bias = make_param(zeros({c.num_features}, o), device);
  }
  if (c.track_running_stats)
    make_stats(c.num_features, c.dtype, device, running_mean, running_var, num_batches_tracked);
}

Tensor InstanceNormBase::run(const Tensor& x, const char* name, int64_t rank) const {
  const int64_t c = config.num_features;
  const bool ok = x.defined() && (x.dim() == rank || x.dim() == rank - 1) && x.size(x.dim() == rank ? 1 : 0) == c;
  KILN_CHECK(ok, name,
             name << "(num_features=" << c << ") expects input "
                  << (rank == 3 ? "[N, C, L] or [C, L]" : "[N, C, H, W] or [C, H, W]") << " with C = " << c << ", got "
                  << shape_str(x));
  const bool unbatched = x.dim() == rank - 1;
  Tensor in = unbatched ? x.unsqueeze(0) : x;
  const bool use_input = is_training() || !config.track_running_stats;
  if (use_input && config.track_running_stats) {
    Tensor n = num_batches_tracked;
    n.copy_(n + 1);
  }
  Tensor y = F::instance_norm(in, {.running_mean = running_mean,
                                   .running_var = running_var,
                                   .weight = weight,
                                   .bias = bias,
                                   .use_input_stats = use_input,
                                   .momentum = config.momentum,
                                   .eps = config.eps});
  return unbatched ? y.squeeze({0}) : y;
}

std::string InstanceNormBase::extra_repr() const {
  return std::to_string(config.num_features) + ", eps=" + num(config.eps) + ", momentum=" + num(config.momentum) +
         ", affine=" + tf(config.affine) + ", track_running_stats=" + tf(config.track_running_stats);
}

// ---- RMSNorm ------------------------------------------------------------------------------

RMSNorm::RMSNorm(const RMSNormConfig& c, const Device& device) : config(c) {
  KILN_CHECK(!c.normalized_shape.empty(), "RMSNorm", "RMSNorm needs a non-empty normalized_shape");
  if (c.elementwise_affine)
    weight = make_param(ones(c.normalized_shape, {.dtype = c.dtype, .device = device.without_autodiff()}), device);
}

Tensor RMSNorm::forward(const Tensor& x) const {
  KILN_CHECK(trailing_match(x, config.normalized_shape), "RMSNorm",
             "RMSNorm(normalized_shape=" << to_string(config.normalized_shape) << ") expects input [*, "
                                         << to_string(config.normalized_shape) << "], got " << shape_str(x));
  return F::rms_norm(x, config.normalized_shape, weight, config.eps);
}
std::string RMSNorm::extra_repr() const {
  return to_string(config.normalized_shape) + ", eps=" + (config.eps ? num(*config.eps) : std::string("None")) +
         ", elementwise_affine=" + tf(config.elementwise_affine);
}

}  // namespace kiln::nn
