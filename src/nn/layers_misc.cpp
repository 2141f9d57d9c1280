// SPDX-License-Identifier: MIT OR Apache-2.0
// Bilinear, Embedding, the dropouts, the shape layers and Sequential (kiln/nn/layers.h).
#include <cmath>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/matmul.h"
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

/// x * mask / (1 - p) with mask ~ Bernoulli(1 - p) of `mask_shape` (broadcast over x).
Tensor apply_dropout(const Tensor& x, double p, const Shape& mask_shape) {
  if (p == 1.0) return x * 0.0;
  const Device plain = x.device().without_autodiff();
  Tensor mask = bernoulli(mask_shape, 1.0 - p, {.dtype = x.dtype(), .device = plain}) * (1.0 / (1.0 - p));
  return x * mask.to(x.device());
}

}  // namespace

// ---- Bilinear ---------------------------------------------------------------------------------

Bilinear::Bilinear(const BilinearConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.in1 > 0 && c.in2 > 0 && c.out >= 0, "Bilinear",
             "in1 and in2 must be positive and out >= 0, got in1=" << c.in1 << ", in2=" << c.in2 << ", out=" << c.out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(c.in1));
  const TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  weight = make_param(uniform({c.out, c.in1, c.in2}, -bound, bound, o), device);
  if (c.bias) bias = make_param(uniform({c.out}, -bound, bound, o), device);
}

Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) const {
  const bool ok = x1.defined() && x2.defined() && x1.dim() >= 1 && x1.dim() == x2.dim() && x1.size(-1) == config.in1 &&
                  x2.size(-1) == config.in2 &&
                  Shape(x1.shape().begin(), x1.shape().end() - 1) == Shape(x2.shape().begin(), x2.shape().end() - 1);
  KILN_CHECK(ok, "Bilinear",
             describe(*this) << " expects inputs [..., " << config.in1 << "] and [..., " << config.in2
                             << "] with the same leading dims, got " << shape_str(x1) << " and " << shape_str(x2));
  Shape lead(x1.shape().begin(), x1.shape().end() - 1);
  const int64_t n = shape_numel(lead);
  Tensor a = x1.reshape({n, config.in1}), b = x2.reshape({n, config.in2});
  // t[n, o, j] = sum_i a[n, i] W[o, i, j]; y[n, o] = sum_j t[n, o, j] b[n, j].
  Tensor w = weight.permute({1, 0, 2}).reshape({config.in1, config.out * config.in2});
  Tensor t = matmul(a, w).reshape({n, config.out, config.in2});
  Tensor y = sum(t * b.unsqueeze(1), {-1});
  if (bias.defined()) y = y + bias;
  lead.push_back(config.out);
  return y.reshape(lead);
}

std::string Bilinear::extra_repr() const {
  return "in1=" + std::to_string(config.in1) + ", in2=" + std::to_string(config.in2) +
         ", out=" + std::to_string(config.out) + ", bias=" + (config.bias ? "true" : "false");
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
  if (config.max_norm && indices.numel() > 0) {
    // torch.embedding_renorm_: rescale the looked-up rows in place, outside autodiff.
    NoGradGuard guard;
    Tensor data = weight.detach();
    Tensor rows = unique(indices.reshape({-1}).to(i64)).values;
    Tensor sel = index_select(data, 0, rows);
    Tensor nrm = norm(sel, config.norm_type, {1}, /*keepdim=*/true);
    const double mx = *config.max_norm;
    Tensor scale = where(nrm > mx, mx / (nrm + 1e-7), 1.0);
    data.index_put_({rows}, sel * scale);
  }
  Tensor w = weight;
  if (config.padding_idx && weight.requires_grad()) {
    // The padding row reads a detached copy, so it gets no gradient (as PyTorch).
    Tensor row = (arange(config.num_embeddings, i64, weight.device()) == *config.padding_idx).unsqueeze(1);
    w = where(row, weight.detach(), weight);
  }
  return named(*this, indices, [&] { return embedding(indices, w); });
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
  if (!is_training() || config.p == 0.0) return x;
  return apply_dropout(x, config.p, x.shape());
}

std::string Dropout::extra_repr() const { return "p=" + num(config.p); }

template <int N>
FeatureDropoutNd<N>::FeatureDropoutNd(const DropoutConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.p >= 0.0 && c.p <= 1.0, type_name(), "p must be in [0, 1], got " << c.p);
}

template <int N>
Tensor FeatureDropoutNd<N>::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && is_floating(x.dtype()) && (x.dim() == N + 1 || x.dim() == N + 2), type_name(),
             describe(*this) << " expects a float input [N, C, " << layers_detail::spatial_names(N) << "] or [C, "
                             << layers_detail::spatial_names(N) << "], got " << shape_str(x));
  if (!is_training() || config.p == 0.0) return x;
  // Batched: one draw per (n, c); unbatched: per c. A 3-d input to Dropout2d is [N, C, L] (PyTorch).
  const int64_t keep = (x.dim() == N + 2 || N == 2) ? 2 : 1;
  Shape ms(static_cast<size_t>(x.dim()), 1);
  for (int64_t d = 0; d < keep; ++d) ms[static_cast<size_t>(d)] = x.size(d);
  return apply_dropout(x, config.p, ms);
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
