// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Normalisation layers: BatchNorm1d/2d/3d, LayerNorm, GroupNorm, InstanceNorm1d/2d, RMSNorm
// (torch.nn's names, defaults, parameters and buffers).
#include <memory>
#include <optional>

#include "kiln/nn/config.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

/// Config of BatchNorm1d/2d/3d: `BatchNorm2d({.num_features = 64})`.
struct BatchNormConfig {
  int64_t num_features = 0;              ///< C
  double eps = 1e-5;                     ///< added to the variance
  std::optional<double> momentum = 0.1;  ///< running-stat update factor; nullopt = cumulative average
  bool affine = true;                    ///< learnable weight (ones) and bias (zeros) [C]
  bool track_running_stats = true;       ///< keep running_mean/running_var/num_batches_tracked buffers
  DType dtype = f32;
  KILN_CONFIG(BatchNormConfig, num_features, eps, momentum, affine, track_running_stats, dtype)
};

/// Sums a tensor over the processes that share each batch, differentiably (the gradient of the sum
/// is the sum of its gradients over the same processes): what synchronised batch norm needs. Set
/// on a batch norm by kiln::dist::convert_sync_batch_norm (docs/distributed.md).
struct BatchStatsReducer {
  virtual ~BatchStatsReducer() = default;
  /// The sum of t over the processes; every process calls it in the same order.
  virtual Tensor sum(const Tensor& t) const = 0;
};

/// Shared implementation of BatchNorm1d/2d/3d. In training (or without running stats) the
/// batch statistics are used and, when tracked, running_mean / running_var [C] are updated in
/// place (unbiased variance) and num_batches_tracked (i64 scalar) incremented; in eval the
/// running statistics are used. In eval, without gradients for weight and bias, the per-channel
/// scale and shift are kept between calls until weight, bias, the running statistics (any write
/// into them, in place or not) or eps change, so a call is one multiply and one add.
/// With a stats_reducer, training statistics are those of the global batch: the per-channel sums
/// of every process's part, as if one process normalised the whole batch.
struct BatchNormBase : Module {
  BatchNormConfig config;
  Param weight, bias;
  Buffer running_mean, running_var, num_batches_tracked;
  /// Synchronised batch norm: sums the batch statistics over processes (null: this batch alone).
  std::shared_ptr<const BatchStatsReducer> stats_reducer;
  BatchNormBase() = default;
  BatchNormBase(const BatchNormConfig& c, const Device& device, const char* name);
  std::string extra_repr() const override;
  /// In eval mode with running statistics, for an input like x (f32 or f64): the per-channel
  /// scale and shift [C] with forward(x) = x * scale + shift, each step rounded (the kept
  /// coefficients). Undefined tensors when that form does not apply: training, no running
  /// statistics, weight or bias recording gradients, or parameters of another dtype or device.
  std::pair<Tensor, Tensor> eval_affine(const Tensor& x) const;

 protected:
  Tensor run(const Tensor& x, const char* name, int64_t rank_a, int64_t rank_b) const;
  /// Training with stats_reducer: x [N, C, *] normalised with the global batch's statistics.
  Tensor run_synced(const Tensor& x, double momentum) const;

 private:
  struct EvalCache;  // norm_layers.cpp
  mutable std::shared_ptr<EvalCache> eval_cache_;
  Tensor run_eval_cached(const Tensor& x) const;  // undefined when the cache does not apply
};

/// x [N, C] or [N, C, L] -> same shape.
struct BatchNorm1d : BatchNormBase {
  BatchNorm1d() = default;
  explicit BatchNorm1d(const BatchNormConfig& c, const Device& device = Device::default_device())
      : BatchNormBase(c, device, "BatchNorm1d") {}
  Tensor forward(const Tensor& x) const { return run(x, "BatchNorm1d", 2, 3); }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(BatchNorm1d, weight, bias, running_mean, running_var, num_batches_tracked)
};
/// x [N, C, H, W] -> same shape.
struct BatchNorm2d : BatchNormBase {
  BatchNorm2d() = default;
  explicit BatchNorm2d(const BatchNormConfig& c, const Device& device = Device::default_device())
      : BatchNormBase(c, device, "BatchNorm2d") {}
  Tensor forward(const Tensor& x) const { return run(x, "BatchNorm2d", 4, 4); }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(BatchNorm2d, weight, bias, running_mean, running_var, num_batches_tracked)
};
/// x [N, C, D, H, W] -> same shape.
struct BatchNorm3d : BatchNormBase {
  BatchNorm3d() = default;
  explicit BatchNorm3d(const BatchNormConfig& c, const Device& device = Device::default_device())
      : BatchNormBase(c, device, "BatchNorm3d") {}
  Tensor forward(const Tensor& x) const { return run(x, "BatchNorm3d", 5, 5); }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(BatchNorm3d, weight, bias, running_mean, running_var, num_batches_tracked)
};

/// Config of LayerNorm: `LayerNorm({.normalized_shape = {512}})`.
struct LayerNormConfig {
  Shape normalized_shape;  ///< the trailing dims normalised over
  double eps = 1e-5;
  bool elementwise_affine = true;  ///< learnable weight (ones) [normalized_shape]
  bool bias = true;                ///< learnable bias (zeros), when elementwise_affine
  DType dtype = f32;
  KILN_CONFIG(LayerNormConfig, normalized_shape, eps, elementwise_affine, bias, dtype)
};
/// x [*, normalized_shape] -> same shape, normalised over the trailing dims.
struct LayerNorm : Module {
  LayerNormConfig config;
  Param weight, bias;
  LayerNorm() = default;
  explicit LayerNorm(const LayerNormConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(LayerNorm, weight, bias)
};

/// Config of GroupNorm: `GroupNorm({.num_groups = 8, .num_channels = 64})`.
struct GroupNormConfig {
  int64_t num_groups = 0;
  int64_t num_channels = 0;  ///< C, divisible by num_groups
  double eps = 1e-5;
  bool affine = true;  ///< learnable weight (ones) and bias (zeros) [C]
  DType dtype = f32;
  KILN_CONFIG(GroupNormConfig, num_groups, num_channels, eps, affine, dtype)
};
/// x [N, C, *] -> same shape; each group of C / num_groups channels is normalised.
struct GroupNorm : Module {
  GroupNormConfig config;
  Param weight, bias;
  GroupNorm() = default;
  explicit GroupNorm(const GroupNormConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(GroupNorm, weight, bias)
};

/// Config of InstanceNorm1d/2d (PyTorch's defaults: no affine, no running stats).
struct InstanceNormConfig {
  int64_t num_features = 0;  ///< C
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = false;
  bool track_running_stats = false;
  DType dtype = f32;
  KILN_CONFIG(InstanceNormConfig, num_features, eps, momentum, affine, track_running_stats, dtype)
};
/// Shared implementation of InstanceNorm1d/2d: each (sample, channel) plane is normalised over
/// its spatial positions (running statistics in eval when tracked).
struct InstanceNormBase : Module {
  InstanceNormConfig config;
  Param weight, bias;
  Buffer running_mean, running_var, num_batches_tracked;
  InstanceNormBase() = default;
  InstanceNormBase(const InstanceNormConfig& c, const Device& device, const char* name);
  std::string extra_repr() const override;

 protected:
  Tensor run(const Tensor& x, const char* name, int64_t rank) const;
};
/// x [N, C, L] (or unbatched [C, L]) -> same shape.
struct InstanceNorm1d : InstanceNormBase {
  InstanceNorm1d() = default;
  explicit InstanceNorm1d(const InstanceNormConfig& c, const Device& device = Device::default_device())
      : InstanceNormBase(c, device, "InstanceNorm1d") {}
  Tensor forward(const Tensor& x) const { return run(x, "InstanceNorm1d", 3); }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(InstanceNorm1d, weight, bias, running_mean, running_var, num_batches_tracked)
};
/// x [N, C, H, W] (or unbatched [C, H, W]) -> same shape.
struct InstanceNorm2d : InstanceNormBase {
  InstanceNorm2d() = default;
  explicit InstanceNorm2d(const InstanceNormConfig& c, const Device& device = Device::default_device())
      : InstanceNormBase(c, device, "InstanceNorm2d") {}
  Tensor forward(const Tensor& x) const { return run(x, "InstanceNorm2d", 4); }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(InstanceNorm2d, weight, bias, running_mean, running_var, num_batches_tracked)
};

/// Config of RMSNorm (torch.nn.RMSNorm): `RMSNorm({.normalized_shape = {512}})`.
struct RMSNormConfig {
  Shape normalized_shape;
  std::optional<double> eps{};     ///< default: machine epsilon of the compute type
  bool elementwise_affine = true;  ///< learnable weight (ones) [normalized_shape]
  DType dtype = f32;
  KILN_CONFIG(RMSNormConfig, normalized_shape, eps, elementwise_affine, dtype)
};
/// x [*, normalized_shape] -> same shape, x / rms(x) * weight over the trailing dims.
struct RMSNorm : Module {
  RMSNormConfig config;
  Param weight;
  RMSNorm() = default;
  explicit RMSNorm(const RMSNormConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  KILN_VISIT(RMSNorm, weight)
};
/// Deprecated spellings of RMSNorm and RMSNormConfig.
using RmsNorm [[deprecated("use RMSNorm")]] = RMSNorm;
using RmsNormConfig [[deprecated("use RMSNormConfig")]] = RMSNormConfig;

}  // namespace kiln::nn
