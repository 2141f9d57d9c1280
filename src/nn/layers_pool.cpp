// SPDX-License-Identifier: MIT OR Apache-2.0
// MaxPool, AvgPool, AdaptiveAvgPool and AdaptiveMaxPool in 1, 2 and 3 dims (kiln/nn/layers.h).
#include "kiln/error.h"
#include "kiln/nn/layers.h"
#include "layers_util.h"

namespace kiln::nn {

namespace F = functional;
using layers_detail::describe;
using layers_detail::shape_str;
using layers_detail::spatial_names;
using layers_detail::tuple_str;

namespace {

/// Checks x is [N, C, *sp] or [C, *sp] with n spatial dims.
void check_pool_input(const Module& m, const Tensor& x, int n) {
  KILN_CHECK(x.defined() && (x.dim() == n + 1 || x.dim() == n + 2), m.type_name(),
             describe(m) << " expects input [N, C, " << spatial_names(n) << "] or [C, " << spatial_names(n) << "], got "
                         << shape_str(x));
}

std::string bool_str(bool b) { return b ? "true" : "false"; }

}  // namespace

// ---- MaxPoolNd --------------------------------------------------------------------------------

template <int N>
MaxPoolNd<N>::MaxPoolNd(const MaxPoolConfig& c, const Device&) : config(c) {
  const std::string name = type_name();
  const Dims k = c.kernel_size.expand(N, name.c_str(), "kernel_size");
  for (int64_t v : k) KILN_CHECK(v > 0, name, "kernel_size must be positive, got " << tuple_str(k));
  if (!c.stride.values().empty()) c.stride.expand(N, name.c_str(), "stride");
  c.padding.expand(N, name.c_str(), "padding");
  c.dilation.expand(N, name.c_str(), "dilation");
}

template <int N>
Tensor MaxPoolNd<N>::forward(const Tensor& x) const {
  check_pool_input(*this, x, N);
  const F::MaxPoolOptions o{
      .stride = config.stride, .padding = config.padding, .dilation = config.dilation, .ceil_mode = config.ceil_mode};
  if constexpr (N == 1) return F::max_pool1d(x, config.kernel_size, o);
  if constexpr (N == 2) return F::max_pool2d(x, config.kernel_size, o);
  if constexpr (N == 3) return F::max_pool3d(x, config.kernel_size, o);
}

template <int N>
std::pair<Tensor, Tensor> MaxPoolNd<N>::forward_with_indices(const Tensor& x) const {
  check_pool_input(*this, x, N);
  const F::MaxPoolOptions o{
      .stride = config.stride, .padding = config.padding, .dilation = config.dilation, .ceil_mode = config.ceil_mode};
  if constexpr (N == 1) return F::max_pool1d_with_indices(x, config.kernel_size, o);
  if constexpr (N == 2) return F::max_pool2d_with_indices(x, config.kernel_size, o);
  if constexpr (N == 3) return F::max_pool3d_with_indices(x, config.kernel_size, o);
}

template <int N>
std::string MaxPoolNd<N>::extra_repr() const {
  const F::IntList& st = config.stride.values().empty() ? config.kernel_size : config.stride;
  return "kernel_size=" + tuple_str(config.kernel_size, N) + ", stride=" + tuple_str(st, N) +
         ", padding=" + tuple_str(config.padding, N) + ", dilation=" + tuple_str(config.dilation, N) +
         ", ceil_mode=" + bool_str(config.ceil_mode);
}

template struct MaxPoolNd<1>;
template struct MaxPoolNd<2>;
template struct MaxPoolNd<3>;

// ---- AvgPoolNd --------------------------------------------------------------------------------

template <int N>
AvgPoolNd<N>::AvgPoolNd(const AvgPoolConfig& c, const Device&) : config(c) {
  const std::string name = type_name();
  const Dims k = c.kernel_size.expand(N, name.c_str(), "kernel_size");
  for (int64_t v : k) KILN_CHECK(v > 0, name, "kernel_size must be positive, got " << tuple_str(k));
  if (!c.stride.values().empty()) c.stride.expand(N, name.c_str(), "stride");
  c.padding.expand(N, name.c_str(), "padding");
  KILN_CHECK(!c.divisor_override || *c.divisor_override != 0, name, "divisor_override must not be zero");
}

template <int N>
Tensor AvgPoolNd<N>::forward(const Tensor& x) const {
  check_pool_input(*this, x, N);
  const F::AvgPoolOptions o{.stride = config.stride,
                            .padding = config.padding,
                            .ceil_mode = config.ceil_mode,
                            .count_include_pad = config.count_include_pad,
                            .divisor_override = config.divisor_override};
  if constexpr (N == 1) return F::avg_pool1d(x, config.kernel_size, o);
  if constexpr (N == 2) return F::avg_pool2d(x, config.kernel_size, o);
  if constexpr (N == 3) return F::avg_pool3d(x, config.kernel_size, o);
}

template <int N>
std::string AvgPoolNd<N>::extra_repr() const {
  const F::IntList& st = config.stride.values().empty() ? config.kernel_size : config.stride;
  std::string s = "kernel_size=" + tuple_str(config.kernel_size, N) + ", stride=" + tuple_str(st, N) +
                  ", padding=" + tuple_str(config.padding, N);
  if (config.ceil_mode) s += ", ceil_mode=true";
  if (!config.count_include_pad) s += ", count_include_pad=false";
  if (config.divisor_override) s += ", divisor_override=" + std::to_string(*config.divisor_override);
  return s;
}

template struct AvgPoolNd<1>;
template struct AvgPoolNd<2>;
template struct AvgPoolNd<3>;

// ---- adaptive pools ---------------------------------------------------------------------------

template <int N>
AdaptiveAvgPoolNd<N>::AdaptiveAvgPoolNd(const AdaptivePoolConfig& c, const Device&) : config(c) {}

template <int N>
Tensor AdaptiveAvgPoolNd<N>::forward(const Tensor& x) const {
  check_pool_input(*this, x, N);
  if constexpr (N == 1) return F::adaptive_avg_pool1d(x, config.output_size);
  if constexpr (N == 2) return F::adaptive_avg_pool2d(x, config.output_size);
  if constexpr (N == 3) return F::adaptive_avg_pool3d(x, config.output_size);
}

template struct AdaptiveAvgPoolNd<1>;
template struct AdaptiveAvgPoolNd<2>;
template struct AdaptiveAvgPoolNd<3>;

template <int N>
AdaptiveMaxPoolNd<N>::AdaptiveMaxPoolNd(const AdaptivePoolConfig& c, const Device&) : config(c) {}

template <int N>
Tensor AdaptiveMaxPoolNd<N>::forward(const Tensor& x) const {
  check_pool_input(*this, x, N);
  if constexpr (N == 1) return F::adaptive_max_pool1d(x, config.output_size);
  if constexpr (N == 2) return F::adaptive_max_pool2d(x, config.output_size);
  if constexpr (N == 3) return F::adaptive_max_pool3d(x, config.output_size);
}

template <int N>
std::pair<Tensor, Tensor> AdaptiveMaxPoolNd<N>::forward_with_indices(const Tensor& x) const {
  check_pool_input(*this, x, N);
  if constexpr (N == 1) return F::adaptive_max_pool1d_with_indices(x, config.output_size);
  if constexpr (N == 2) return F::adaptive_max_pool2d_with_indices(x, config.output_size);
  if constexpr (N == 3) return F::adaptive_max_pool3d_with_indices(x, config.output_size);
}

template struct AdaptiveMaxPoolNd<1>;
template struct AdaptiveMaxPoolNd<2>;
template struct AdaptiveMaxPoolNd<3>;

}  // namespace kiln::nn
