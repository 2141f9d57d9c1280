// SPDX-License-Identifier: MIT OR Apache-2.0
// Conv1d/2d/3d and ConvTranspose1d/2d/3d (kiln/nn/layers.h).
#include <cmath>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layers.h"
#include "kiln/ops.h"
#include "layers_util.h"
#include "ops/conv_epilogue.h"
#include "ops/prepared.h"

namespace kiln::nn {

namespace F = functional;
using layers_detail::describe;
using layers_detail::shape_str;
using layers_detail::spatial_names;
using layers_detail::tuple_str;

namespace {

/// "[N, 3, H, W] or [3, H, W]".
std::string expected_input(int n, int64_t channels) {
  return "[N, " + std::to_string(channels) + ", " + spatial_names(n) + "] or [" + std::to_string(channels) + ", " +
         spatial_names(n) + "]";
}

std::string layer_name(const char* base, int n) { return std::string(base) + std::to_string(n) + "d"; }

}  // namespace

// ---- ConvNd ----------------------------------------------------------------------------------

template <int N>
ConvNd<N>::ConvNd(const ConvConfig& c, const Device& device) : config(c), prepared_(new kiln::detail::PreparedOp[2]) {
  const std::string name = layer_name("Conv", N);
  const Dims k = c.kernel_size.expand(N, name.c_str(), "kernel_size");
  c.stride.expand(N, name.c_str(), "stride");
  c.dilation.expand(N, name.c_str(), "dilation");
  KILN_CHECK(c.in_channels > 0 && c.out_channels > 0 && c.groups > 0, name,
             "in_channels, out_channels and groups must be positive, got in_channels="
                 << c.in_channels << ", out_channels=" << c.out_channels << ", groups=" << c.groups);
  KILN_CHECK(c.in_channels % c.groups == 0 && c.out_channels % c.groups == 0, name,
             "in_channels (" << c.in_channels << ") and out_channels (" << c.out_channels
                             << ") must be divisible by groups (" << c.groups << ")");
  for (int64_t v : k) KILN_CHECK(v > 0, name, "kernel_size must be positive, got " << tuple_str(k));
  KILN_CHECK(
      c.padding_mode == "zeros" || c.padding_mode == "reflect" || c.padding_mode == "replicate" ||
          c.padding_mode == "circular",
      name,
      "padding_mode must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got \"" << c.padding_mode << "\"");
  const auto mode = c.padding.mode(name.c_str());
  if (mode == F::Padding::Mode::Same)
    for (int64_t s : c.stride.expand(N, name.c_str(), "stride"))
      KILN_CHECK(s == 1, name, "padding=\"same\" is not supported for strided convolutions");
  if (mode == F::Padding::Mode::Explicit) c.padding.values().expand(N, name.c_str(), "padding");

  Shape ws{c.out_channels, c.in_channels / c.groups};
  for (int64_t v : k) ws.push_back(v);
  const TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  weight = make_param(empty(ws, o), device);
  init::kaiming_uniform_(weight, {.a = std::sqrt(5.0)});
  if (c.bias) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(ws).first;
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    bias = make_param(uniform({c.out_channels}, -bound, bound, o), device);
  }
}

template <int N>
Tensor ConvNd<N>::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && (x.dim() == N + 1 || x.dim() == N + 2) && x.size(-(N + 1)) == config.in_channels,
             type_name(),
             describe(*this) << " expects input " << expected_input(N, config.in_channels) << ", got " << shape_str(x));
  F::ConvOptions o{
      .stride = config.stride, .padding = config.padding, .dilation = config.dilation, .groups = config.groups};
  SmallVec<int64_t, 32> key;
  if (x.dim() == N + 2 && !(grad_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad())) &&
      layers_detail::conv_key(*this, 0, bias.defined(), key)) {
    // Inference: the op of the last call when the layouts are the same, else the one conv_nd
    // issues, kept for the next call (Note [Prepared steps]).
    const Tensor in[3] = {x, weight, bias};
    if (Tensor y = kiln::detail::run_prepared(&prepared_[0], in, key); y.defined()) return y;
    return F::conv_kept(N, x, weight, bias, o, &prepared_[0], key);
  }
  Tensor in = x;
  if (config.padding_mode != "zeros") {
    // Pad explicitly with the mode, then convolve without padding (PyTorch's
    // _reversed_padding_repeated_twice).
    const char* name = "conv";
    const Dims k = config.kernel_size.expand(N, name, "kernel_size");
    const Dims dil = config.dilation.expand(N, name, "dilation");
    const auto mode = config.padding.mode(name);
    Dims pads;  // last dim first: lo, hi, ...
    for (int d = N - 1; d >= 0; --d) {
      int64_t lo = 0, hi = 0;
      if (mode == F::Padding::Mode::Same) {
        const int64_t total = dil[static_cast<size_t>(d)] * (k[static_cast<size_t>(d)] - 1);
        lo = total / 2;
        hi = total - lo;
      } else if (mode == F::Padding::Mode::Explicit) {
        lo = hi = config.padding.values().expand(N, name, "padding")[static_cast<size_t>(d)];
      }
      pads.push_back(lo);
      pads.push_back(hi);
    }
    in = pad(x, pads, config.padding_mode);
    o.padding = 0;
  }
  if constexpr (N == 1) return F::conv1d(in, weight, bias, o);
  if constexpr (N == 2) return F::conv2d(in, weight, bias, o);
  if constexpr (N == 3) return F::conv3d(in, weight, bias, o);
}

template <int N>
std::string ConvNd<N>::extra_repr() const {
  std::string s = std::to_string(config.in_channels) + ", " + std::to_string(config.out_channels) +
                  ", kernel_size=" + tuple_str(config.kernel_size, N) + ", stride=" + tuple_str(config.stride, N);
  auto nondefault = [](const F::IntList& l, int64_t def) { return l.values().size() != 1 || l.values()[0] != def; };
  if (!config.padding.text().empty())
    s += ", padding=" + config.padding.text();
  else if (nondefault(config.padding.values(), 0))
    s += ", padding=" + tuple_str(config.padding.values(), N);
  if (nondefault(config.dilation, 1)) s += ", dilation=" + tuple_str(config.dilation, N);
  if (config.groups != 1) s += ", groups=" + std::to_string(config.groups);
  if (!config.bias) s += ", bias=false";
  if (config.padding_mode != "zeros") s += ", padding_mode=" + config.padding_mode;
  return s;
}

template struct ConvNd<1>;
template struct ConvNd<2>;
template struct ConvNd<3>;

// ---- ConvTransposeNd ------------------------------------------------------------------------

template <int N>
ConvTransposeNd<N>::ConvTransposeNd(const ConvTransposeConfig& c, const Device& device) : config(c) {
  const std::string name = layer_name("ConvTranspose", N);
  const Dims k = c.kernel_size.expand(N, name.c_str(), "kernel_size");
  c.stride.expand(N, name.c_str(), "stride");
  c.padding.expand(N, name.c_str(), "padding");
  c.output_padding.expand(N, name.c_str(), "output_padding");
  c.dilation.expand(N, name.c_str(), "dilation");
  KILN_CHECK(c.padding_mode == "zeros", name,
             name << " only supports padding_mode \"zeros\" (as PyTorch), got \"" << c.padding_mode << "\"");
  KILN_CHECK(c.in_channels > 0 && c.out_channels > 0 && c.groups > 0, name,
             "in_channels, out_channels and groups must be positive, got in_channels="
                 << c.in_channels << ", out_channels=" << c.out_channels << ", groups=" << c.groups);
  KILN_CHECK(c.in_channels % c.groups == 0 && c.out_channels % c.groups == 0, name,
             "in_channels (" << c.in_channels << ") and out_channels (" << c.out_channels
                             << ") must be divisible by groups (" << c.groups << ")");
  for (int64_t v : k) KILN_CHECK(v > 0, name, "kernel_size must be positive, got " << tuple_str(k));

  Shape ws{c.in_channels, c.out_channels / c.groups};
  for (int64_t v : k) ws.push_back(v);
  const TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  weight = make_param(empty(ws, o), device);
  init::kaiming_uniform_(weight, {.a = std::sqrt(5.0)});
  if (c.bias) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(ws).first;
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    bias = make_param(uniform({c.out_channels}, -bound, bound, o), device);
  }
}

template <int N>
Tensor ConvTransposeNd<N>::forward(const Tensor& x, const Dims& output_size) const {
  KILN_CHECK(x.defined() && (x.dim() == N + 1 || x.dim() == N + 2) && x.size(-(N + 1)) == config.in_channels,
             type_name(),
             describe(*this) << " expects input " << expected_input(N, config.in_channels) << ", got " << shape_str(x));
  const char* name = "conv_transpose";
  F::ConvTransposeOptions o{.stride = config.stride,
                            .padding = config.padding,
                            .output_padding = config.output_padding,
                            .groups = config.groups,
                            .dilation = config.dilation};
  if (!output_size.empty()) {
    // PyTorch's _output_padding: the padding that gives the requested size.
    const int64_t lead = x.dim() - N;
    Dims want = output_size;
    if (static_cast<int64_t>(want.size()) == N + lead) want = Dims(want.begin() + lead, want.end());
    KILN_CHECK(static_cast<int64_t>(want.size()) == N, type_name(),
               describe(*this) << " expects output_size with " << N << " or " << N + lead << " entries, got "
                               << to_string(output_size));
    const Dims st = config.stride.expand(N, name, "stride"), p = config.padding.expand(N, name, "padding"),
               dil = config.dilation.expand(N, name, "dilation"), k = config.kernel_size.expand(N, name, "kernel_size");
    Dims op;
    for (size_t d = 0; d < static_cast<size_t>(N); ++d) {
      const int64_t lo = (x.size(lead + static_cast<int64_t>(d)) - 1) * st[d] - 2 * p[d] + dil[d] * (k[d] - 1) + 1;
      const int64_t hi = lo + st[d] - 1;
      KILN_CHECK(want[d] >= lo && want[d] <= hi, type_name(),
                 describe(*this) << ": requested output_size " << to_string(output_size) << " is not within [" << lo
                                 << ", " << hi << "] in spatial dim " << static_cast<int64_t>(d) << " for input "
                                 << shape_str(x));
      op.push_back(want[d] - lo);
    }
    o.output_padding = op;
  }
  if constexpr (N == 1) return F::conv_transpose1d(x, weight, bias, o);
  if constexpr (N == 2) return F::conv_transpose2d(x, weight, bias, o);
  if constexpr (N == 3) return F::conv_transpose3d(x, weight, bias, o);
}

template <int N>
std::string ConvTransposeNd<N>::extra_repr() const {
  std::string s = std::to_string(config.in_channels) + ", " + std::to_string(config.out_channels) +
                  ", kernel_size=" + tuple_str(config.kernel_size, N) + ", stride=" + tuple_str(config.stride, N);
  auto nondefault = [](const F::IntList& l, int64_t def) { return l.values().size() != 1 || l.values()[0] != def; };
  if (nondefault(config.padding, 0)) s += ", padding=" + tuple_str(config.padding, N);
  if (nondefault(config.output_padding, 0)) s += ", output_padding=" + tuple_str(config.output_padding, N);
  if (nondefault(config.dilation, 1)) s += ", dilation=" + tuple_str(config.dilation, N);
  if (config.groups != 1) s += ", groups=" + std::to_string(config.groups);
  if (!config.bias) s += ", bias=false";
  return s;
}

template struct ConvTransposeNd<1>;
template struct ConvTransposeNd<2>;
template struct ConvTransposeNd<3>;

}  // namespace kiln::nn
