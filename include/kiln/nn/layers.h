// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The basic layers (torch.nn names, defaults, parameter names and layouts): Bilinear,
// Embedding, Conv1d/2d/3d, ConvTranspose1d/2d/3d, the pools, the dropouts, Identity, Flatten,
// Unflatten, PixelShuffle/PixelUnshuffle, Upsample, and the containers Sequential and
// ModuleList. Each layer is `X(XConfig, device)` with `forward` and `operator()`; bad input
// throws kiln::Error naming the layer, its config and the input shape.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/nn/config.h"
#include "kiln/nn/functional/conv.h"
#include "kiln/nn/functional/pool.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

// ---- Bilinear, Embedding --------------------------------------------------------------------

/// Config of Bilinear, with torch.nn.Bilinear's names:
/// `Bilinear({.in1_features = 20, .in2_features = 30, .out_features = 40})`.
struct BilinearConfig {
  /// Deprecated spellings of in1_features, in2_features, out_features (-1: not given).
  [[deprecated("use .in1_features")]] int64_t in1 = -1;
  [[deprecated("use .in2_features")]] int64_t in2 = -1;
  [[deprecated("use .out_features")]] int64_t out = -1;
  int64_t in1_features = 0;  ///< features of the first input
  int64_t in2_features = 0;  ///< features of the second input
  int64_t out_features = 0;  ///< output features
  bool bias = true;          ///< add a learnable bias
  DType dtype = f32;
  KILN_CONFIG(BilinearConfig, in1_features, in2_features, out_features, bias, dtype)
};

/// y = x1ᵀ A x2 + b: x1 [..., in1], x2 [..., in2] (same leading dims) -> [..., out]
/// (in1 = in1_features, ...).
/// weight [out, in1, in2], bias [out], both U(-1/sqrt(in1), 1/sqrt(in1)) (torch.nn.Bilinear).
struct Bilinear : Module {
  BilinearConfig config;
  Param weight, bias;
  Bilinear() = default;
  explicit Bilinear(const BilinearConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x1, const Tensor& x2) const;
  Tensor operator()(const Tensor& x1, const Tensor& x2) const { return forward(x1, x2); }
  std::string extra_repr() const override;
  KILN_VISIT(Bilinear, weight, bias)
};

/// Config of Embedding: `Embedding({.num_embeddings = 1000, .embedding_dim = 64})`.
struct EmbeddingConfig {
  int64_t num_embeddings = 0;            ///< rows of the table
  int64_t embedding_dim = 0;             ///< width of a row
  std::optional<int64_t> padding_idx{};  ///< this row starts at zero and gets no gradient (< 0 counts from the end)
  /// Each forward first rescales, in place, the looked-up rows whose norm_type-norm exceeds
  /// max_norm to norm max_norm (scale max_norm / (norm + 1e-7), as PyTorch).
  std::optional<double> max_norm{};
  double norm_type = 2.0;  ///< p of the max_norm norm
  DType dtype = f32;
  KILN_CONFIG(EmbeddingConfig, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, dtype)
};

/// A lookup table: integer indices of any shape [*] -> [*, embedding_dim]. weight
/// [num_embeddings, embedding_dim] ~ N(0, 1), the padding row zero (torch.nn.Embedding;
/// sparse gradients and scale_grad_by_freq are not supported).
struct Embedding : Module {
  EmbeddingConfig config;
  Param weight;
  Embedding() = default;
  explicit Embedding(const EmbeddingConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& indices) const;
  Tensor operator()(const Tensor& indices) const { return forward(indices); }
  std::string extra_repr() const override;
  KILN_VISIT(Embedding, weight)
};

// ---- convolutions ---------------------------------------------------------------------------

/// Config of Conv1d/2d/3d: `Conv2d({.in_channels = 3, .out_channels = 64, .kernel_size = 3,
/// .padding = 1, .bias = false})`. Sizes are one int or one per spatial dim.
struct ConvConfig {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  functional::IntList kernel_size = Dims{};  ///< required
  functional::IntList stride = 1;
  functional::Padding padding = 0;  ///< ints, "same" or "valid"
  functional::IntList dilation = 1;
  int64_t groups = 1;                  ///< in_channels and out_channels must be multiples of it
  bool bias = true;                    ///< add a learnable bias
  std::string padding_mode = "zeros";  ///< "zeros", "reflect", "replicate" or "circular"
  DType dtype = f32;
  KILN_CONFIG(ConvConfig, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
              dtype)
};
using Conv1dConfig = ConvConfig;
using Conv2dConfig = ConvConfig;
using Conv3dConfig = ConvConfig;

/// Convolution over N spatial dims (torch.nn.ConvNd): x [B, in_channels, *sp] or unbatched
/// [in_channels, *sp] -> [B, out_channels, *out]. weight [out_channels, in_channels / groups,
/// *kernel] ~ kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)); bias
/// [out_channels] ~ the same bound; fan_in = in_channels / groups * prod(kernel).
template <int N>
struct ConvNd : Module {
  ConvConfig config;
  Param weight, bias;
  ConvNd() = default;
  explicit ConvNd(const ConvConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor& v) override {
    v.field("weight", weight);
    v.field("bias", bias);
  }
  std::string type_name() const override { return "Conv" + std::to_string(N) + "d"; }

  /// In inference forward ([0]) and conv_act / conv_bn ([1]) keep the op they issued here for
  /// the next call with the same layouts and options (shared by copies of the module; each used
  /// by one call at a time).
  mutable std::shared_ptr<kiln::detail::PreparedOp[]> prepared_;
};
using Conv1d = ConvNd<1>;
using Conv2d = ConvNd<2>;
using Conv3d = ConvNd<3>;
extern template struct ConvNd<1>;
extern template struct ConvNd<2>;
extern template struct ConvNd<3>;

/// Config of ConvTranspose1d/2d/3d (torch.nn.ConvTransposeNd's arguments; padding_mode must
/// be "zeros", the only mode PyTorch supports for transposed convolutions).
struct ConvTransposeConfig {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  functional::IntList kernel_size = Dims{};  ///< required
  functional::IntList stride = 1;
  functional::IntList padding = 0;
  functional::IntList output_padding = 0;  ///< extra size on one side; < stride or < dilation
  int64_t groups = 1;
  bool bias = true;
  functional::IntList dilation = 1;
  DType dtype = f32;
  std::string padding_mode = "zeros";  ///< anything else throws kiln::Error (as PyTorch's ValueError)
  KILN_CONFIG(ConvTransposeConfig, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups,
              bias, dilation, dtype, padding_mode)
};
using ConvTranspose1dConfig = ConvTransposeConfig;
using ConvTranspose2dConfig = ConvTransposeConfig;
using ConvTranspose3dConfig = ConvTransposeConfig;

/// Transposed convolution (torch.nn.ConvTransposeNd): x [B, in_channels, *sp] or
/// [in_channels, *sp] -> [B, out_channels, *out], out = (sp - 1) * stride - 2 * padding +
/// dilation * (k - 1) + output_padding + 1. weight [in_channels, out_channels / groups, *kernel]
/// initialised as PyTorch (kaiming_uniform(a = sqrt(5)) with PyTorch's fan of that layout:
/// fan_in = out_channels / groups * prod(kernel)); bias [out_channels].
template <int N>
struct ConvTransposeNd : Module {
  ConvTransposeConfig config;
  Param weight, bias;
  ConvTransposeNd() = default;
  explicit ConvTransposeNd(const ConvTransposeConfig& c, const Device& device = Device::default_device());
  /// output_size (optional, spatial or full shape) picks output_padding so the result has
  /// that size, as PyTorch's forward(input, output_size).
  Tensor forward(const Tensor& x, const Dims& output_size = {}) const;
  Tensor operator()(const Tensor& x, const Dims& output_size = {}) const { return forward(x, output_size); }
  std::string extra_repr() const override;
  void visit(Visitor& v) override {
    v.field("weight", weight);
    v.field("bias", bias);
  }
  std::string type_name() const override { return "ConvTranspose" + std::to_string(N) + "d"; }
};
using ConvTranspose1d = ConvTransposeNd<1>;
using ConvTranspose2d = ConvTransposeNd<2>;
using ConvTranspose3d = ConvTransposeNd<3>;
extern template struct ConvTransposeNd<1>;
extern template struct ConvTransposeNd<2>;
extern template struct ConvTransposeNd<3>;

// ---- pooling --------------------------------------------------------------------------------

/// Config of MaxPool1d/2d/3d: `MaxPool2d({.kernel_size = 3, .stride = 2, .padding = 1})`.
struct MaxPoolConfig {
  functional::IntList kernel_size = Dims{};  ///< required
  functional::IntList stride = Dims{};       ///< empty: kernel_size
  functional::IntList padding = 0;
  functional::IntList dilation = 1;
  bool ceil_mode = false;
  KILN_CONFIG(MaxPoolConfig, kernel_size, stride, padding, dilation, ceil_mode)
};

/// Max pooling (torch.nn.MaxPoolNd): x [B, C, *sp] or [C, *sp] -> [B, C, *out]; no parameters.
template <int N>
struct MaxPoolNd : Module {
  MaxPoolConfig config;
  MaxPoolNd() = default;
  explicit MaxPoolNd(const MaxPoolConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  /// (values, i64 indices into each plane's flattened spatial dims): return_indices=True.
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x) const;
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "MaxPool" + std::to_string(N) + "d"; }
};
using MaxPool1d = MaxPoolNd<1>;
using MaxPool2d = MaxPoolNd<2>;
using MaxPool3d = MaxPoolNd<3>;
extern template struct MaxPoolNd<1>;
extern template struct MaxPoolNd<2>;
extern template struct MaxPoolNd<3>;

/// Config of AvgPool1d/2d/3d.
struct AvgPoolConfig {
  functional::IntList kernel_size = Dims{};  ///< required
  functional::IntList stride = Dims{};       ///< empty: kernel_size
  functional::IntList padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override{};
  KILN_CONFIG(AvgPoolConfig, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
};

/// Average pooling (torch.nn.AvgPoolNd): x [B, C, *sp] or [C, *sp] -> [B, C, *out].
template <int N>
struct AvgPoolNd : Module {
  AvgPoolConfig config;
  AvgPoolNd() = default;
  explicit AvgPoolNd(const AvgPoolConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "AvgPool" + std::to_string(N) + "d"; }
};
using AvgPool1d = AvgPoolNd<1>;
using AvgPool2d = AvgPoolNd<2>;
using AvgPool3d = AvgPoolNd<3>;
extern template struct AvgPoolNd<1>;
extern template struct AvgPoolNd<2>;
extern template struct AvgPoolNd<3>;

/// Config of the adaptive pools: `AdaptiveAvgPool2d({.output_size = 1})`,
/// `{.output_size = {std::nullopt, 7}}` (nullopt keeps the input's size).
struct AdaptivePoolConfig {
  functional::OutputSize output_size = Dims{};  ///< required
  KILN_CONFIG(AdaptivePoolConfig, output_size)
};

/// Adaptive average pooling (torch.nn.AdaptiveAvgPoolNd): x [B, C, *sp] or [C, *sp] ->
/// [B, C, *output_size].
template <int N>
struct AdaptiveAvgPoolNd : Module {
  AdaptivePoolConfig config;
  AdaptiveAvgPoolNd() = default;
  explicit AdaptiveAvgPoolNd(const AdaptivePoolConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  void visit(Visitor&) override {}
  std::string type_name() const override { return "AdaptiveAvgPool" + std::to_string(N) + "d"; }
};
using AdaptiveAvgPool1d = AdaptiveAvgPoolNd<1>;
using AdaptiveAvgPool2d = AdaptiveAvgPoolNd<2>;
using AdaptiveAvgPool3d = AdaptiveAvgPoolNd<3>;
extern template struct AdaptiveAvgPoolNd<1>;
extern template struct AdaptiveAvgPoolNd<2>;
extern template struct AdaptiveAvgPoolNd<3>;

/// Adaptive max pooling (torch.nn.AdaptiveMaxPoolNd): x [B, C, *sp] or [C, *sp] ->
/// [B, C, *output_size].
template <int N>
struct AdaptiveMaxPoolNd : Module {
  AdaptivePoolConfig config;
  AdaptiveMaxPoolNd() = default;
  explicit AdaptiveMaxPoolNd(const AdaptivePoolConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  /// (values, i64 indices into each plane's flattened spatial dims).
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x) const;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "AdaptiveMaxPool" + std::to_string(N) + "d"; }
};
using AdaptiveMaxPool1d = AdaptiveMaxPoolNd<1>;
using AdaptiveMaxPool2d = AdaptiveMaxPoolNd<2>;
using AdaptiveMaxPool3d = AdaptiveMaxPoolNd<3>;
extern template struct AdaptiveMaxPoolNd<1>;
extern template struct AdaptiveMaxPoolNd<2>;
extern template struct AdaptiveMaxPoolNd<3>;

// ---- dropout --------------------------------------------------------------------------------

/// Config of the dropouts: `Dropout({.p = 0.1})`.
struct DropoutConfig {
  double p = 0.5;  ///< probability of zeroing, in [0, 1]
  KILN_CONFIG(DropoutConfig, p)
};

/// In training mode (Module::is_training()) zeroes each element with probability p and scales
/// the rest by 1 / (1 - p); in eval mode returns x. Any shape.
struct Dropout : Module {
  DropoutConfig config;
  Dropout() = default;
  explicit Dropout(const DropoutConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "Dropout"; }
};

/// Channel-wise dropout (torch.nn.Dropout1d/2d/3d): zeroes whole channels. Dropout1d takes
/// [B, C, L] or [C, L]; Dropout2d [B, C, H, W] (a 3-d input is read as [B, C, L], as PyTorch);
/// Dropout3d [B, C, D, H, W] or [C, D, H, W]. Scaling and train/eval as Dropout.
template <int N>
struct FeatureDropoutNd : Module {
  DropoutConfig config;
  FeatureDropoutNd() = default;
  explicit FeatureDropoutNd(const DropoutConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "Dropout" + std::to_string(N) + "d"; }
};
using Dropout1d = FeatureDropoutNd<1>;
using Dropout2d = FeatureDropoutNd<2>;
using Dropout3d = FeatureDropoutNd<3>;
extern template struct FeatureDropoutNd<1>;
extern template struct FeatureDropoutNd<2>;
extern template struct FeatureDropoutNd<3>;

/// Config of GaussianNoise: `GaussianNoise({.stddev = 0.1})`.
struct GaussianNoiseConfig {
  double stddev = 0.1;  ///< standard deviation of the added noise, >= 0
  KILN_CONFIG(GaussianNoiseConfig, stddev)
};

/// In training mode adds noise drawn from N(0, stddev²) to every element (the noise carries no
/// gradient: d out / d x = 1); in eval mode returns x. A regulariser (Keras' GaussianNoise).
/// Float inputs of any shape.
struct GaussianNoise : Module {
  GaussianNoiseConfig config;
  GaussianNoise() = default;
  explicit GaussianNoise(const GaussianNoiseConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "GaussianNoise"; }
};

// ---- shape layers ---------------------------------------------------------------------------

/// Returns its input.
struct Identity : Module {
  Identity() = default;
  Tensor forward(const Tensor& x) const { return x; }
  Tensor operator()(const Tensor& x) const { return x; }
  void visit(Visitor&) override {}
  std::string type_name() const override { return "Identity"; }
};

/// Config of Flatten (PyTorch's defaults keep the batch dim).
struct FlattenConfig {
  int64_t start_dim = 1;
  int64_t end_dim = -1;
  KILN_CONFIG(FlattenConfig, start_dim, end_dim)
};
/// Flattens dims start_dim..end_dim into one: [B, C, H, W] -> [B, C*H*W] by default.
struct Flatten : Module {
  FlattenConfig config;
  Flatten() = default;
  explicit Flatten(const FlattenConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "Flatten"; }
};

/// Config of Unflatten: `Unflatten({.dim = 1, .sizes = {16, 7, 7}})`.
struct UnflattenConfig {
  int64_t dim = 0;
  Shape sizes = {};  ///< product must equal x.size(dim); one entry may be -1
  KILN_CONFIG(UnflattenConfig, dim, sizes)
};
/// Splits dim into sizes: [B, 784] -> [B, 16, 7, 7].
struct Unflatten : Module {
  UnflattenConfig config;
  Unflatten() = default;
  explicit Unflatten(const UnflattenConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "Unflatten"; }
};

/// Config of PixelShuffle.
struct PixelShuffleConfig {
  int64_t upscale_factor = 1;
  KILN_CONFIG(PixelShuffleConfig, upscale_factor)
};
/// [*, C*r^2, H, W] -> [*, C, H*r, W*r] (torch.nn.PixelShuffle).
struct PixelShuffle : Module {
  PixelShuffleConfig config;
  PixelShuffle() = default;
  explicit PixelShuffle(const PixelShuffleConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "PixelShuffle"; }
};

/// Config of PixelUnshuffle.
struct PixelUnshuffleConfig {
  int64_t downscale_factor = 1;
  KILN_CONFIG(PixelUnshuffleConfig, downscale_factor)
};
/// [*, C, H*r, W*r] -> [*, C*r^2, H, W] (torch.nn.PixelUnshuffle).
struct PixelUnshuffle : Module {
  PixelUnshuffleConfig config;
  PixelUnshuffle() = default;
  explicit PixelUnshuffle(const PixelUnshuffleConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "PixelUnshuffle"; }
};

/// Config of Upsample: interpolate's options, `Upsample({.scale_factor = 2.0, .mode = "bilinear"})`.
using UpsampleConfig = functional::InterpolateOptions;
namespace functional {
// Upsample's config in JSON: {"type": "Upsample", "config": {"size": ..., "mode": ...}}.
KILN_CONFIG_EXTERNAL(InterpolateOptions, "Upsample", size, scale_factor, mode, align_corners, recompute_scale_factor)
}  // namespace functional
/// Resizes x [B, C, *sp] (1 to 3 spatial dims) with interpolate (torch.nn.Upsample).
struct Upsample : Module {
  UpsampleConfig config;
  Upsample() = default;
  explicit Upsample(const UpsampleConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "Upsample"; }
};

// ---- containers -----------------------------------------------------------------------------

/// A chain of modules applied in order (torch.nn.Sequential). Holds any module with a
/// `forward(const Tensor&)` (const or not) returning a Tensor; children are named "0", "1", ...
/// so parameter names match PyTorch's ("downsample.0.weight").
///
///   nn::Sequential block(nn::Conv2d({.in_channels = 3, .out_channels = 8, .kernel_size = 3}),
///                        nn::MaxPool2d({.kernel_size = 2}));
///   block.push_back(nn::Flatten());
///   Tensor y = block(x);
///   auto& conv = block.at<nn::Conv2d>(0);
///
/// Copying a Sequential copies its modules (which share their tensors, like any module copy;
/// nn::deep_copy gives independent tensors).
class Sequential : public Module {
 public:
  Sequential() = default;
  /// Sequential(m0, m1, ...): the modules in order (each copied or moved in).
  template <class... M>
  requires(sizeof...(M) > 0 && (std::is_base_of_v<Module, std::decay_t<M>> && ...) &&
           !(sizeof...(M) == 1 &&
             (std::is_same_v<std::decay_t<M>, Sequential> && ...))) explicit Sequential(M&&... modules) {
    (push_back(std::forward<M>(modules)), ...);
  }
  Sequential(const Sequential& o);
  Sequential(Sequential&&) noexcept = default;
  Sequential& operator=(const Sequential& o);
  Sequential& operator=(Sequential&&) noexcept = default;

  /// Appends a module; returns *this.
  template <class M>
  requires std::is_base_of_v<Module, std::decay_t<M>> Sequential& push_back(M&& module) {
    using T = std::decay_t<M>;
    Entry e;
    e.module = std::make_shared<T>(std::forward<M>(module));
    e.forward = [](Module& m, const Tensor& x) -> Tensor { return static_cast<T&>(m).forward(x); };
    e.clone = [](const Module& m) -> std::shared_ptr<Module> { return std::make_shared<T>(static_cast<const T&>(m)); };
    entries_.push_back(std::move(e));
    return *this;
  }
  /// Number of modules.
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// The i-th module.
  Module& operator[](size_t i);
  const Module& operator[](size_t i) const;
  /// The i-th module as its type M; throws kiln::Error when it is another type.
  template <class M>
  M& at(size_t i) {
    M* p = dynamic_cast<M*>(&(*this)[i]);
    check_type(p != nullptr, i);
    return *p;
  }
  /// x -> m_{n-1}(...m_1(m_0(x))). An empty Sequential returns x.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  void visit(Visitor& v) override;
  std::string type_name() const override { return "Sequential"; }

 private:
  struct Entry {
    std::shared_ptr<Module> module;
    Tensor (*forward)(Module&, const Tensor&) = nullptr;
    std::shared_ptr<Module> (*clone)(const Module&) = nullptr;
  };
  void check_type(bool ok, size_t i) const;
  std::vector<Entry> entries_;
};

/// A list of modules of one type, named "0", "1", ... like torch.nn.ModuleList: a plain
/// std::vector (Visitor walks vectors of modules). For a list of mixed types use Sequential
/// (and `at<M>(i)`) or one field per module.
template <class M>
requires std::is_base_of_v<Module, M>
using ModuleList = std::vector<M>;

}  // namespace kiln::nn
