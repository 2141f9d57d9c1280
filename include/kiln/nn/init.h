// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Initialisers (torch.nn.init): each fills a tensor in place — a layer's Param, or any tensor —
// and returns the same handle, so `init::kaiming_normal_(conv.weight, {.mode = "fan_out"});`
// re-initialises a layer. The fill writes through the handle without recording a graph (the
// tensor keeps tracking gradients if it did). Values are drawn on the tensor's device with
// Kiln's generator (seed it with kiln::manual_seed); distributions, bounds and fan rules are
// PyTorch's. Float tensors only; the shape rules (fans need >= 2 dims) throw kiln::Error naming
// the initialiser.
#include <optional>
#include <string>
#include <utility>

#include "kiln/tensor.h"

namespace kiln::nn::init {

/// The recommended gain for a nonlinearity (torch.nn.init.calculate_gain): "linear", "conv1d",
/// "conv2d", "conv3d", "conv_transpose1d/2d/3d", "sigmoid" -> 1; "tanh" -> 5/3; "relu" ->
/// sqrt(2); "leaky_relu" -> sqrt(2 / (1 + slope^2)) (param = slope, default 0.01); "selu" ->
/// 3/4. Throws kiln::Error for any other name.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = {});

/// (fan_in, fan_out) of a weight shape [out, in, *kernel] (torch's
/// _calculate_fan_in_and_fan_out): fan_in = in * prod(kernel), fan_out = out * prod(kernel).
/// Needs at least 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Shape& shape);

/// Fills t with `value`.
Tensor constant_(const Tensor& t, double value);
/// Fills t with 0 / 1.
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);
/// Fills a 2-d tensor with the identity (eye_ in PyTorch; non-square: ones on the diagonal).
Tensor eye_(const Tensor& t);
/// U(a, b).
Tensor uniform_(const Tensor& t, double a = 0.0, double b = 1.0);
/// N(mean, std^2).
Tensor normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
/// N(mean, std^2) truncated to [a, b] (inverse-CDF sampling, as PyTorch).
Tensor trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0);
/// Glorot: U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)). >= 2 dims.
Tensor xavier_uniform_(const Tensor& t, double gain = 1.0);
/// Glorot: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)). >= 2 dims.
Tensor xavier_normal_(const Tensor& t, double gain = 1.0);

/// Options of the Kaiming (He) initialisers, PyTorch's defaults.
struct KaimingOptions {
  double a = 0.0;                           ///< negative slope of leaky_relu (used by that gain only)
  std::string mode = "fan_in";              ///< "fan_in" (preserves forward variance) or "fan_out"
  std::string nonlinearity = "leaky_relu";  ///< a name accepted by calculate_gain
};
/// U(-bound, bound), bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
/// >= 2 dims. A layer's default (PyTorch's): kaiming_uniform_(w, {.a = std::sqrt(5.0)}).
Tensor kaiming_uniform_(const Tensor& t, const KaimingOptions& options = {});
/// N(0, std^2), std = gain / sqrt(fan). >= 2 dims.
Tensor kaiming_normal_(const Tensor& t, const KaimingOptions& options = {});
/// A (semi-)orthogonal matrix times gain: t viewed as [size(0), numel / size(0)] gets the Q of
/// the QR of a normal matrix with the signs of diag(R) folded in (as PyTorch). >= 2 dims.
Tensor orthogonal_(const Tensor& t, double gain = 1.0);

}  // namespace kiln::nn::init
