// SPDX-License-Identifier: MIT OR Apache-2.0
// Bilinear, Embedding, the dropouts, the shape layers and Sequential (kiln/nn/layers.h).
#include <cmath>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/nn/functional/activation.h"
#include "kiln/nn/layers.h"
#include "kiln/ops.h"
#include "layers_util.h"

namespace kiln::nn {

namespace F = functional;
using layers_detail::describe;
using layers_detail::shape_str;

namespace {

/// Runs f and re-throws a kiln::Error with the layer and the input shape in front.
template <class Fn>
Tensor named(const Module& m, const Tensor& x, Fn&& f) {
  try {
    return f();
  } catch (const Error& e) {
    ::kiln::detail::throw_error("[" + m.type_name() + "] " + describe(m) + " failed on input " + shape_str(x) + ": " +
                                e.what());
  }
}

std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

}  // namespace

// ---- Bilinear ---------------------------------------------------------------------------------

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
namespace {
/// The config with the deprecated .in1/.in2/.out folded into the *_features fields.
BilinearConfig resolved(BilinearConfig c) {
  if (c.in1 >= 0) c.in1_features = c.in1;
  if (c.in2 >= 0) c.in2_features = c.in2;
  if (c.out >= 0) c.out_features = c.out;
  c.in1 = c.in2 = c.out = -1;
  return c;
}
}  // namespace
#pragma GCC diagnostic pop

Bilinear::Bilinear(const BilinearConfig& cfg, const Device& device) : config(resolved(cfg)) {
  const BilinearConfig& c = config;
  KILN_CHECK(c.in1_features > 0 && c.in2_features > 0 && c.out_features >= 0, "Bilinear",
             "in1_features and in2_features must be positive and out_features >= 0, got in1_features="
                 << c.in1_features << ", in2_features=" << c.in2_features << ", out_features=" << c.out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(c.in1_features));
  const TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  weight = make_param(uniform({c.out_features, c.in1_features, c.in2_features}, -bound, bound, o), device);
  if (c.bias) bias = make_param(uniform({c.out_features}, -bound, bound, o), device);
}

Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) const {
  const int64_t in1 = config.in1_features, in2 = config.in2_features;
  const bool ok = x1.defined() && x2.defined() && x1.dim() >= 1 && x1.dim() == x2.dim() && x1.size(-1) == in1 &&
                  x2.size(-1) == in2 &&
                  Shape(x1.shape().begin(), x1.shape().end() - 1) == Shape(x2.shape().begin(), x2.shape().end() - 1);
  KILN_CHECK(ok, "Bilinear",
             describe(*this) << " expects inputs [..., " << in1 << "] and [..., " << in2
                             << "] with the same leading dims, got " << shape_str(x1) << " and " << shape_str(x2));
  return F::bilinear(x1, x2, weight, bias);
}

std::string Bilinear::extra_repr() const {
  return "in1_features=" + std::to_string(config.in1_features) +
         ", in2_features=" + std::to_string(config.in2_features) +
         ", out_features=" + std::to_string(config.out_features) + ", bias=" + (config.bias ? "true" : "false");
}

// ---- Embedding --------------------------------------------------------------------------------

Embedding::Embedding(const EmbeddingConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.num_embeddings >= 0 && c.embedding_dim >= 0, "Embedding",
             "num_embeddings and embedding_dim must be >= 0, got " << c.num_embeddings << ", " << c.embedding_dim);
  if (c.padding_idx) {
    const int64_t p = *c.padding_idx;
    KILN_CHECK(p >= -c.num_embeddings && p < c.num_embeddings, "Embedding",
               "padding_idx must be within num_embeddings (" << c.num_embeddings << "), got " << p);
    if (p < 0) config.padding_idx = p + c.num_embeddings;
  }
  Tensor w = randn({c.num_embeddings, c.embedding_dim}, {.dtype = c.dtype, .device = device.without_autodiff()});
  if (config.padding_idx) w.index_put_({*config.padding_idx}, 0.0);
  weight = make_param(w, device);
}

Tensor Embedding::forward(const Tensor& indices) const {
  KILN_CHECK(
      indices.defined() && !is_floating(indices.dtype()) && indices.dtype() != DType::Bool, "Embedding",
      describe(*this) << " expects integer indices, got "
                      << (indices.defined() ? std::string(dtype_name(indices.dtype())) : std::string("undefined"))
                      << shape_str(indices));
  return named(*this, indices,
               [&] { return F::embedding(indices, weight, config.padding_idx, config.max_norm, config.norm_type); });
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(config.num_embeddings) + ", " + std::to_string(config.embedding_dim);
  if (config.padding_idx) s += ", padding_idx=" + std::to_string(*config.padding_idx);
  if (config.max_norm) s += ", max_norm=" + num(*config.max_norm);
  if (config.max_norm && config.norm_type != 2.0) s += ", norm_type=" + num(config.norm_type);
  return s;
}

// ---- dropout ----------------------------------------------------------------------------------

Dropout::Dropout(const DropoutConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.p >= 0.0 && c.p <= 1.0, "Dropout", "p must be in [0, 1], got " << c.p);
}

Tensor Dropout::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && is_floating(x.dtype()), "Dropout",
             describe(*this) << " expects a float input, got " << shape_str(x));
  return F::dropout(x, config.p, is_training());
}

std::string Dropout::extra_repr() const { return "p=" + num(config.p); }

GaussianNoise::GaussianNoise(const GaussianNoiseConfig& c, const Device&) : config(c) {
  KILN_CHECK(std::isfinite(c.stddev) && c.stddev >= 0.0, "GaussianNoise",
             "stddev must be finite and >= 0, got " << c.stddev);
}

Tensor GaussianNoise::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && is_floating(x.dtype()), "GaussianNoise",
             describe(*this) << " expects a float input, got " << shape_str(x));
  if (!is_training() || config.stddev == 0.0 || x.numel() == 0) return x;
  return x + randn_like(x) * config.stddev;
}

std::string GaussianNoise::extra_repr() const { return "stddev=" + num(config.stddev); }

template <int N>
FeatureDropoutNd<N>::FeatureDropoutNd(const DropoutConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.p >= 0.0 && c.p <= 1.0, type_name(), "p must be in [0, 1], got " << c.p);
}

template <int N>
Tensor FeatureDropoutNd<N>::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && is_floating(x.dtype()) && (x.dim() == N + 1 || x.dim() == N + 2), type_name(),
             describe(*this) << " expects a float input [N, C, " << layers_detail::spatial_names(N) << "] or [C, "
                             << layers_detail::spatial_names(N) << "], got " << shape_str(x));
  if constexpr (N == 1) return F::dropout1d(x, config.p, is_training());
  if constexpr (N == 2) return F::dropout2d(x, config.p, is_training());
  return F::dropout3d(x, config.p, is_training());
}

template <int N>
std::string FeatureDropoutNd<N>::extra_repr() const {
  return "p=" + num(config.p);
}

template struct FeatureDropoutNd<1>;
template struct FeatureDropoutNd<2>;
template struct FeatureDropoutNd<3>;

// ---- shape layers -----------------------------------------------------------------------------

Flatten::Flatten(const FlattenConfig& c, const Device&) : config(c) {}
Tensor Flatten::forward(const Tensor& x) const {
  return named(*this, x, [&] { return flatten(x, config.start_dim, config.end_dim); });
}
std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(config.start_dim) + ", end_dim=" + std::to_string(config.end_dim);
}

Unflatten::Unflatten(const UnflattenConfig& c, const Device&) : config(c) {}
Tensor Unflatten::forward(const Tensor& x) const {
  return named(*this, x, [&] { return unflatten(x, config.dim, config.sizes); });
}
std::string Unflatten::extra_repr() const {
  return "dim=" + std::to_string(config.dim) + ", unflattened_size=" + layers_detail::tuple_str(config.sizes);
}

PixelShuffle::PixelShuffle(const PixelShuffleConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.upscale_factor > 0, "PixelShuffle", "upscale_factor must be positive, got " << c.upscale_factor);
}
Tensor PixelShuffle::forward(const Tensor& x) const {
  return named(*this, x, [&] { return F::pixel_shuffle(x, config.upscale_factor); });
}
std::string PixelShuffle::extra_repr() const { return "upscale_factor=" + std::to_string(config.upscale_factor); }

PixelUnshuffle::PixelUnshuffle(const PixelUnshuffleConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.downscale_factor > 0, "PixelUnshuffle", "downscale_factor must be positive, got " << c.downscale_factor);
}
Tensor PixelUnshuffle::forward(const Tensor& x) const {
  return named(*this, x, [&] { return F::pixel_unshuffle(x, config.downscale_factor); });
}
std::string PixelUnshuffle::extra_repr() const { return "downscale_factor=" + std::to_string(config.downscale_factor); }

Upsample::Upsample(const UpsampleConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.size.values().empty() != c.scale_factor.values().empty(), "Upsample",
             "exactly one of size and scale_factor must be given");
}
Tensor Upsample::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.dim() >= 3 && x.dim() <= 5, "Upsample",
             describe(*this) << " expects input [N, C, *spatial] with 1 to 3 spatial dims, got " << shape_str(x));
  return named(*this, x, [&] { return F::interpolate(x, config); });
}
std::string Upsample::extra_repr() const {
  std::string s;
  if (!config.size.values().empty()) {
    s = "size=" + layers_detail::tuple_str(config.size.values());
  } else {
    s = "scale_factor=(";
    const auto& v = config.scale_factor.values();
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
    s += ")";
  }
  s += ", mode=" + config.mode;
  if (config.align_corners) s += std::string(", align_corners=") + (*config.align_corners ? "true" : "false");
  return s;
}

// ---- Sequential -------------------------------------------------------------------------------

Sequential::Sequential(const Sequential& o) : Module(o) {
  entries_.reserve(o.entries_.size());
  for (const Entry& e : o.entries_) entries_.push_back({e.clone(*e.module), e.forward, e.clone});
}

Sequential& Sequential::operator=(const Sequential& o) {
  if (this != &o) {
    Sequential copy(o);
    Module::operator=(o);
    entries_ = std::move(copy.entries_);
  }
  return *this;
}

Module& Sequential::operator[](size_t i) {
  KILN_CHECK(i < entries_.size(), "Sequential",
             "index " << static_cast<int64_t>(i) << " out of range for " << static_cast<int64_t>(entries_.size())
                      << " modules");
  return *entries_[i].module;
}

const Module& Sequential::operator[](size_t i) const { return const_cast<Sequential&>(*this)[i]; }

void Sequential::check_type(bool ok, size_t i) const {
  KILN_CHECK(ok, "Sequential",
             "module " << static_cast<int64_t>(i) << " is a " << entries_[i].module->type_name()
                       << ", not the type asked for");
}

Tensor Sequential::forward(const Tensor& x) const {
  Tensor y = x;
  for (const Entry& e : entries_) y = e.forward(*e.module, y);
  return y;
}

void Sequential::visit(Visitor& v) {
  for (size_t i = 0; i < entries_.size(); ++i) v.field(std::to_string(i), *entries_[i].module);
}

}  // namespace kiln::nn
