// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/transformer.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/nn/functional/attention.h"
#include "kiln/nn/init.h"
#include "kiln/ops.h"
#include "seq_util.h"

namespace kiln::nn {
namespace F = kiln::nn::functional;
using detail::shape_str;

namespace {
Tensor zeros_on(const Shape& s, DType dt, const Device& device) {
  Tensor z = zeros(s, {.dtype = dt, .device = device.without_autodiff()});
  return device.has_autodiff() ? z.to(device) : z;
}
Tensor from_f64(const std::vector<double>& v, const Shape& s, DType dt, const Device& device) {
  Tensor t = tensor<double>(v, s, device.without_autodiff()).to(dt);
  return device.has_autodiff() ? t.to(device) : t;
}
// An additive float mask from a PyTorch-style mask (bool: true = masked out).
Tensor additive(const Tensor& m, DType dt) {
  if (m.dtype() == kiln::bool_) {
    return masked_fill(zeros_on(m.shape(), dt, m.device()), m, -std::numeric_limits<double>::infinity());
  }
  return m.dtype() == dt ? m : m.to(dt);
}
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
}  // namespace

// ---- MultiHeadAttention -------------------------------------------------------------------

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionConfig& c, const Device& device) : config(c) {
  const int64_t E = c.embed_dim;
  KILN_CHECK(E > 0 && c.num_heads > 0 && E % c.num_heads == 0, "MultiHeadAttention",
             "MultiHeadAttention needs embed_dim divisible by num_heads, got embed_dim=" << E << ", num_heads="
                                                                                         << c.num_heads);
  if (config.kdim == 0) config.kdim = E;
  if (config.vdim == 0) config.vdim = E;
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  auto xavier = [&](int64_t out, int64_t in) {
    const double b = std::sqrt(6.0 / static_cast<double>(in + out));
    return make_param(uniform({out, in}, -b, b, o), device);
  };
  if (config.kdim == E && config.vdim == E) {
    in_proj_weight = xavier(3 * E, E);
  } else {
    q_proj_weight = xavier(E, E);
    k_proj_weight = xavier(E, config.kdim);
    v_proj_weight = xavier(E, config.vdim);
  }
  if (c.bias) in_proj_bias = make_param(zeros({3 * E}, o), device);
  if (c.add_bias_kv) {
    bias_k = make_param(init::xavier_normal_(empty({1, 1, E}, o)), device);
    bias_v = make_param(init::xavier_normal_(empty({1, 1, E}, o)), device);
  }
  out_proj = Linear({.in_features = E, .out_features = E, .bias = c.bias, .dtype = c.dtype}, device);
  if (c.bias) out_proj.bias = make_param(zeros({E}, o), device);
}

AttentionOutput MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const AttentionOptions& o) const {
  const int64_t E = config.embed_dim, H = config.num_heads, Dh = E / H;
  const bool bf = config.batch_first;
  auto cfg = [&] {
    std::ostringstream s;
    s << "MultiHeadAttention(embed_dim=" << E << ", num_heads=" << H << ", kdim=" << config.kdim
      << ", vdim=" << config.vdim << ", batch_first=" << (bf ? "true" : "false") << ")";
    return s.str();
  };
  const bool ranks_ok = query.defined() && key.defined() && value.defined() && (query.dim() == 2 || query.dim() == 3) &&
                        key.dim() == query.dim() && value.dim() == query.dim();
  KILN_CHECK(
      ranks_ok && query.size(-1) == E && key.size(-1) == config.kdim && value.size(-1) == config.vdim &&
          key.size(-2 + (query.dim() == 3 && !bf ? -1 : 0)) == value.size(-2 + (query.dim() == 3 && !bf ? -1 : 0)),
      "MultiHeadAttention",
      cfg() << " expects query " << (bf ? "[N, L, " : "[L, N, ") << E << "], key " << (bf ? "[N, S, " : "[S, N, ")
            << config.kdim << "], value " << (bf ? "[N, S, " : "[S, N, ") << config.vdim
            << "] (or unbatched [L, E], [S, kdim], [S, vdim]), got query " << shape_str(query) << ", key "
            << shape_str(key) << ", value " << shape_str(value));
  const bool unbatched = query.dim() == 2;
  auto to_nle = [&](const Tensor& t) { return unbatched ? t.unsqueeze(0) : (bf ? t : t.transpose(0, 1)); };
  Tensor q = to_nle(query), k = to_nle(key), v = to_nle(value);
  const int64_t N = q.size(0), L = q.size(1);
  KILN_CHECK(k.size(0) == N && v.size(0) == N, "MultiHeadAttention",
             cfg() << " expects query, key and value with the same batch size, got query " << shape_str(query)
                   << ", key " << shape_str(key) << ", value " << shape_str(value));

  Tensor wq, wk, wv, bq, bk, bv;
  if (in_proj_weight.defined()) {
    wq = in_proj_weight.narrow(0, 0, E);
    wk = in_proj_weight.narrow(0, E, E);
    wv = in_proj_weight.narrow(0, 2 * E, E);
  } else {
    wq = q_proj_weight;
    wk = k_proj_weight;
    wv = v_proj_weight;
  }
  if (q_lora) wq = wq + q_lora->delta();
  if (k_lora) wk = wk + k_lora->delta();
  if (v_lora) wv = wv + v_lora->delta();
  if (in_proj_bias.defined()) {
    bq = in_proj_bias.narrow(0, 0, E);
    bk = in_proj_bias.narrow(0, E, E);
    bv = in_proj_bias.narrow(0, 2 * E, E);
  }
  auto heads = [&](const Tensor& t) { return t.reshape({t.size(0), t.size(1), H, Dh}).transpose(1, 2); };
  q = heads(linear(q, wq, bq));  // [N, H, L, Dh]
  k = heads(linear(k, wk, bk));  // [N, H, S, Dh]
  v = heads(linear(v, wv, bv));
  KILN_CHECK(!o.cache || !(config.add_bias_kv || config.add_zero_attn), "MultiHeadAttention",
             cfg() << ": a KVCache cannot be combined with add_bias_kv or add_zero_attn");
  if (o.cache) {
    if (o.cache->k.defined()) {
      KILN_CHECK(
          o.cache->k.dim() == 4 && o.cache->k.size(0) == N && o.cache->k.size(1) == H && o.cache->k.size(3) == Dh,
          "MultiHeadAttention",
          cfg() << " KVCache holds keys " << shape_str(o.cache->k) << ", expected [" << N << ", " << H << ", S, " << Dh
                << "]");
      k = cat({o.cache->k, k}, 2);
      v = cat({o.cache->v, v}, 2);
    }
    o.cache->k = k;
    o.cache->v = v;
  }
  const int64_t S = k.size(2), past = S - L;
  const DType dt = q.dtype();

  Tensor mask;  // additive, broadcastable to [N, H, L, S]
  auto add_mask = [&](const Tensor& m) { mask = mask.defined() ? mask + m : m; };
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    const bool ok = (m.dim() == 2 && m.size(0) == L && m.size(1) == S) ||
                    (m.dim() == 3 && m.size(0) == N * H && m.size(1) == L && m.size(2) == S);
    KILN_CHECK(ok, "MultiHeadAttention",
               cfg() << " expects attn_mask [" << L << ", " << S << "] or [" << N * H << ", " << L << ", " << S
                     << "], got " << shape_str(m));
    Tensor a = additive(m, dt);
    add_mask(m.dim() == 3 ? a.reshape({N, H, L, S}) : a);
  }
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    const bool ok = unbatched ? (m.dim() == 1 && m.size(0) == S) : (m.dim() == 2 && m.size(0) == N && m.size(1) == S);
    KILN_CHECK(ok, "MultiHeadAttention",
               cfg() << " expects key_padding_mask " << (unbatched ? "[" : "[" + std::to_string(N) + ", ") << S
                     << "], got " << shape_str(m));
    add_mask(additive(m, dt).reshape({N, 1, 1, S}));
  }
  if (o.is_causal) {
    std::vector<double> c(static_cast<size_t>(L * S), 0.0);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = i + past + 1; j < S; ++j)
        c[static_cast<size_t>(i * S + j)] = -std::numeric_limits<double>::infinity();
    add_mask(from_f64(c, {L, S}, dt, q.device()));
  }

  // add_bias_kv / add_zero_attn: extra keys and values that every query may attend to (the
  // masks get matching zero columns, as PyTorch pads them).
  auto append_kv = [&](const Tensor& ek, const Tensor& ev) {
    k = cat({k, ek}, 2);
    v = cat({v, ev}, 2);
    if (mask.defined()) {
      Shape ms = mask.shape();
      ms[ms.size() - 1] = 1;
      mask = cat({mask, zeros_on(ms, mask.dtype(), mask.device())}, -1);
    }
  };
  if (config.add_bias_kv)
    append_kv(bias_k.reshape({1, H, 1, Dh}).expand({N, H, 1, Dh}), bias_v.reshape({1, H, 1, Dh}).expand({N, H, 1, Dh}));
  if (config.add_zero_attn) {
    Tensor z = zeros_on({N, H, 1, Dh}, dt, q.device());
    append_kv(z, z);
  }

  const double p = is_training() ? config.dropout : 0.0;
  AttentionOutput r;
  Tensor out;
  if (!o.need_weights) {
    out = F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask, .dropout_p = p});
  } else {
    Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(Dh)));
    if (mask.defined()) scores = scores + mask;
    Tensor w = detail::dropout(softmax(scores, -1), p, p > 0);
    out = matmul(w, v);
    r.weights = o.average_attn_weights ? mean(w, {1}) : w;
    if (unbatched) r.weights = r.weights.squeeze({0});
  }
  out = out_proj(out.transpose(1, 2).reshape({N, L, E}));
  r.output = unbatched ? out.squeeze({0}) : (bf ? out : out.transpose(0, 1));
  return r;
}

std::string MultiHeadAttention::extra_repr() const {
  std::ostringstream s;
  s << "embed_dim=" << config.embed_dim << ", num_heads=" << config.num_heads;
  if (config.kdim != config.embed_dim || config.vdim != config.embed_dim)
    s << ", kdim=" << config.kdim << ", vdim=" << config.vdim;
  if (config.dropout > 0) s << ", dropout=" << config.dropout;
  if (config.batch_first) s << ", batch_first=true";
  if (config.add_bias_kv) s << ", add_bias_kv=true";
  if (config.add_zero_attn) s << ", add_zero_attn=true";
  return s.str();
}

// ---- Transformer layers -------------------------------------------------------------------

namespace {
void check_layer_config(const TransformerLayerConfig& c, const char* name) {
  KILN_CHECK(c.d_model > 0 && c.nhead > 0 && c.d_model % c.nhead == 0 && c.dim_feedforward > 0, name,
             name << " needs d_model divisible by nhead and dim_feedforward > 0, got d_model=" << c.d_model
                  << ", nhead=" << c.nhead << ", dim_feedforward=" << c.dim_feedforward);
  KILN_CHECK(c.activation == "relu" || c.activation == "gelu", name,
             name << " activation must be \"relu\" or \"gelu\", got \"" << c.activation << "\"");
}
MultiHeadAttentionConfig attn_config(const TransformerLayerConfig& c) {
  return {.embed_dim = c.d_model,
          .num_heads = c.nhead,
          .dropout = c.dropout,
          .bias = c.bias,
          .batch_first = c.batch_first,
          .dtype = c.dtype};
}
LayerNormConfig norm_config(const TransformerLayerConfig& c) {
  return {.normalized_shape = {c.d_model}, .eps = c.layer_norm_eps, .bias = c.bias, .dtype = c.dtype};
}
void check_input(const TransformerLayerConfig& c, const Tensor& x, const char* name, const char* what) {
  KILN_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3) && x.size(-1) == c.d_model, name,
             name << "(d_model=" << c.d_model << ", nhead=" << c.nhead
                  << ", batch_first=" << (c.batch_first ? "true" : "false") << ") expects " << what << " "
                  << (c.batch_first ? "[N, S, " : "[S, N, ") << c.d_model << "] or [S, " << c.d_model << "], got "
                  << shape_str(x));
}
std::string layer_repr(const TransformerLayerConfig& c) {
  return "d_model=" + std::to_string(c.d_model) + ", nhead=" + std::to_string(c.nhead) +
         ", dim_feedforward=" + std::to_string(c.dim_feedforward) + ", dropout=" + num(c.dropout) +
         ", activation=" + c.activation + ", norm_first=" + (c.norm_first ? "true" : "false");
}
Tensor feed_forward(const TransformerLayerConfig& c, const Linear& l1, const Linear& l2, const Tensor& x,
                    bool training) {
  Tensor h = l1(x);
  h = c.activation == "gelu" ? gelu(h) : relu(h);
  return detail::dropout(l2(detail::dropout(h, c.dropout, training)), c.dropout, training);
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerConfig& c, const Device& device) : config(c) {
  check_layer_config(c, "TransformerEncoderLayer");
  self_attn = MultiHeadAttention(attn_config(c), device);
  linear1 =
      Linear({.in_features = c.d_model, .out_features = c.dim_feedforward, .bias = c.bias, .dtype = c.dtype}, device);
  linear2 =
      Linear({.in_features = c.dim_feedforward, .out_features = c.d_model, .bias = c.bias, .dtype = c.dtype}, device);
  norm1 = LayerNorm(norm_config(c), device);
  norm2 = LayerNorm(norm_config(c), device);
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) const {
  check_input(config, src, "TransformerEncoderLayer", "src");
  const bool tr = is_training();
  AttentionOptions ao{
      .key_padding_mask = src_key_padding_mask, .attn_mask = src_mask, .is_causal = is_causal && !src_mask.defined()};
  auto sa = [&](const Tensor& x) { return detail::dropout(self_attn(x, x, x, ao).output, config.dropout, tr); };
  Tensor x = src;
  if (config.norm_first) {
    x = x + sa(norm1(x));
    x = x + feed_forward(config, linear1, linear2, norm2(x), tr);
  } else {
    x = norm1(x + sa(x));
    x = norm2(x + feed_forward(config, linear1, linear2, x, tr));
  }
  return x;
}
std::string TransformerEncoderLayer::extra_repr() const { return layer_repr(config); }

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerConfig& c, const Device& device) : config(c) {
  check_layer_config(c, "TransformerDecoderLayer");
  self_attn = MultiHeadAttention(attn_config(c), device);
  multihead_attn = MultiHeadAttention(attn_config(c), device);
  linear1 =
      Linear({.in_features = c.d_model, .out_features = c.dim_feedforward, .bias = c.bias, .dtype = c.dtype}, device);
  linear2 =
      Linear({.in_features = c.dim_feedforward, .out_features = c.d_model, .bias = c.bias, .dtype = c.dtype}, device);
  norm1 = LayerNorm(norm_config(c), device);
  norm2 = LayerNorm(norm_config(c), device);
  norm3 = LayerNorm(norm_config(c), device);
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const DecoderOptions& o) const {
  check_input(config, tgt, "TransformerDecoderLayer", "tgt");
  check_input(config, memory, "TransformerDecoderLayer", "memory");
  const bool tr = is_training();
  AttentionOptions self_o{.key_padding_mask = o.tgt_key_padding_mask,
                          .attn_mask = o.tgt_mask,
                          .is_causal = o.tgt_is_causal && !o.tgt_mask.defined(),
                          .cache = o.cache};
  AttentionOptions cross_o{.key_padding_mask = o.memory_key_padding_mask, .attn_mask = o.memory_mask};
  auto sa = [&](const Tensor& x) { return detail::dropout(self_attn(x, x, x, self_o).output, config.dropout, tr); };
  auto ca = [&](const Tensor& x) {
    return detail::dropout(multihead_attn(x, memory, memory, cross_o).output, config.dropout, tr);
  };
  Tensor x = tgt;
  if (config.norm_first) {
    x = x + sa(norm1(x));
    x = x + ca(norm2(x));
    x = x + feed_forward(config, linear1, linear2, norm3(x), tr);
  } else {
    x = norm1(x + sa(x));
    x = norm2(x + ca(x));
    x = norm3(x + feed_forward(config, linear1, linear2, x, tr));
  }
  return x;
}
std::string TransformerDecoderLayer::extra_repr() const { return layer_repr(config); }

// ---- Stacks -------------------------------------------------------------------------------

TransformerEncoder::TransformerEncoder(const TransformerStackConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.num_layers >= 1, "TransformerEncoder", "TransformerEncoder needs num_layers >= 1, got " << c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) layers.emplace_back(c.layer, device);
  if (c.final_norm) norm.emplace(norm_config(c.layer), device);
}
Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                   bool is_causal) const {
  Tensor x = src;
  for (const auto& l : layers) x = l(x, mask, src_key_padding_mask, is_causal);
  return norm ? (*norm)(x) : x;
}
std::string TransformerEncoder::extra_repr() const { return "num_layers=" + std::to_string(config.num_layers); }

TransformerDecoder::TransformerDecoder(const TransformerStackConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.num_layers >= 1, "TransformerDecoder", "TransformerDecoder needs num_layers >= 1, got " << c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) layers.emplace_back(c.layer, device);
  if (c.final_norm) norm.emplace(norm_config(c.layer), device);
}
Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const DecoderOptions& o,
                                   std::vector<KVCache>* caches) const {
  KILN_CHECK(o.cache == nullptr, "TransformerDecoder",
             "TransformerDecoder takes one KVCache per layer through `caches`, not DecoderOptions::cache");
  if (caches && caches->size() != layers.size()) caches->resize(layers.size());
  Tensor x = tgt;
  for (size_t i = 0; i < layers.size(); ++i) {
    DecoderOptions lo = o;
    if (caches) lo.cache = &(*caches)[i];
    x = layers[i](x, memory, lo);
  }
  return norm ? (*norm)(x) : x;
}
std::string TransformerDecoder::extra_repr() const { return "num_layers=" + std::to_string(config.num_layers); }

// ---- Positional encodings -----------------------------------------------------------------

PositionalEncoding::PositionalEncoding(const PositionalEncodingConfig& c, const Device& device) : config(c) {
  KILN_CHECK(
      c.d_model > 0 && c.max_len > 0, "PositionalEncoding",
      "PositionalEncoding needs d_model > 0 and max_len > 0, got d_model=" << c.d_model << ", max_len=" << c.max_len);
  std::vector<double> v(static_cast<size_t>(c.max_len * c.d_model));
  const double k = -std::log(10000.0) / static_cast<double>(c.d_model);
  for (int64_t pos = 0; pos < c.max_len; ++pos)
    for (int64_t i = 0; i < c.d_model; i += 2) {
      const double a = static_cast<double>(pos) * std::exp(static_cast<double>(i) * k);
      v[static_cast<size_t>(pos * c.d_model + i)] = std::sin(a);
      if (i + 1 < c.d_model) v[static_cast<size_t>(pos * c.d_model + i + 1)] = std::cos(a);
    }
  pe = from_f64(v, {c.max_len, c.d_model}, c.dtype, device);
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t offset) const {
  const int64_t d = config.d_model;
  const bool ok = x.defined() && (x.dim() == 2 || x.dim() == 3) && x.size(-1) == d;
  const int64_t S = ok ? (x.dim() == 3 && !config.batch_first ? x.size(0) : x.size(-2)) : 0;
  KILN_CHECK(ok && offset >= 0 && offset + S <= config.max_len, "PositionalEncoding",
             "PositionalEncoding(d_model="
                 << d << ", max_len=" << config.max_len << ", batch_first=" << (config.batch_first ? "true" : "false")
                 << ") expects input " << (config.batch_first ? "[N, S, " : "[S, N, ") << d << "] or [S, " << d
                 << "] with offset + S <= max_len, got " << shape_str(x) << " at offset " << offset);
  Tensor p = pe.narrow(0, offset, S);
  if (x.dim() == 3 && !config.batch_first) p = p.unsqueeze(1);
  return detail::dropout(x + p, config.dropout, is_training());
}
std::string PositionalEncoding::extra_repr() const {
  return "d_model=" + std::to_string(config.d_model) + ", max_len=" + std::to_string(config.max_len);
}

RotaryEncoding::RotaryEncoding(const RotaryEncodingConfig& c, const Device&) : config(c) {
  KILN_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "RotaryEncoding",
             "RotaryEncoding needs an even head_dim > 0, got " << c.head_dim);
}

Tensor RotaryEncoding::forward(const Tensor& x, int64_t offset) const {
  const int64_t d = config.head_dim, h = d / 2;
  KILN_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == d && offset >= 0, "RotaryEncoding",
             "RotaryEncoding(head_dim=" << d << ") expects input [..., seq, " << d << "] and offset >= 0, got "
                                        << shape_str(x) << " at offset " << offset);
  const int64_t S = x.size(-2);
  std::vector<double> cs(static_cast<size_t>(S * h)), sn(static_cast<size_t>(S * h));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < h; ++i) {
      const double a = static_cast<double>(offset + s) *
                       std::pow(config.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      cs[static_cast<size_t>(s * h + i)] = std::cos(a);
      sn[static_cast<size_t>(s * h + i)] = std::sin(a);
    }
  Tensor c = from_f64(cs, {S, h}, x.dtype(), x.device()), s = from_f64(sn, {S, h}, x.dtype(), x.device());
  if (!config.interleaved) {
    Tensor x1 = x.narrow(-1, 0, h), x2 = x.narrow(-1, h, h);
    return cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
  }
  Shape pairs = x.shape();
  pairs.back() = h;
  pairs.push_back(2);
  Tensor xr = x.reshape(pairs);
  Tensor a = xr.select(-1, 0), b = xr.select(-1, 1);
  return stack({a * c - b * s, a * s + b * c}, -1).reshape(x.shape());
}
std::string RotaryEncoding::extra_repr() const {
  return "head_dim=" + std::to_string(config.head_dim) + ", theta=" + num(config.theta) +
         (config.interleaved ? ", interleaved=true" : "");
}

}  // namespace kiln::nn
