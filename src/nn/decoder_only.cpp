// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/decoder_only.h"

#include "kiln/autodiff.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/nn/functional/attention.h"
#include "kiln/ops.h"
#include "seq_util.h"

namespace kiln::nn {
namespace F = kiln::nn::functional;
using detail::shape_str;

// ---- CausalSelfAttention ------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(int64_t d, int64_t h, double p, double theta, DType dtype,
                                         const Device& device)
    : d_model(d), nhead(h), dropout(p) {
  KILN_CHECK(d > 0 && h > 0 && d % h == 0 && (d / h) % 2 == 0, "CausalSelfAttention",
             "CausalSelfAttention needs d_model divisible by nhead with an even head size, got d_model="
                 << d << ", nhead=" << h);
  qkv = Linear({.in_features = d, .out_features = 3 * d, .dtype = dtype}, device);
  out_proj = Linear({.in_features = d, .out_features = d, .dtype = dtype}, device);
  rope = RotaryEncoding({.head_dim = d / h, .theta = theta});
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache* cache) const {
  KILN_CHECK(
      x.defined() && x.dim() == 3 && x.size(2) == d_model, "CausalSelfAttention",
      "CausalSelfAttention(d_model=" << d_model << ") expects x [N, L, " << d_model << "], got " << shape_str(x));
  const int64_t N = x.size(0), L = x.size(1), H = nhead, D = d_model / nhead;
  const int64_t past = cache ? cache->length() : 0;
  KILN_CHECK(!cache || past == 0 || (cache->k.size(0) == N && cache->k.size(1) == H && cache->k.size(3) == D),
             "CausalSelfAttention",
             "CausalSelfAttention: the cache holds keys " << shape_str(cache->k) << ", which do not fit x "
                                                          << shape_str(x) << " with " << H << " heads");
  Tensor y = qkv(x);
  auto heads = [&](int64_t i) { return y.narrow(-1, i * d_model, d_model).reshape({N, L, H, D}).transpose(1, 2); };
  Tensor q = rope(heads(0), past), k = rope(heads(1), past), v = heads(2);
  if (cache) {
    if (past > 0) {
      k = cat({cache->k, k}, 2);
      v = cat({cache->v, v}, 2);
    }
    cache->k = k;
    cache->v = v;
  }
  F::SdpaOptions so{.dropout_p = is_training() ? dropout : 0.0};
  if (past == 0) {
    so.is_causal = L > 1;
  } else if (L > 1) {
    // Query i (position past + i) sees keys 0..past + i: the causal mask aligned to the last key.
    const Device dev = x.device().without_autodiff();
    Tensor qi = arange(past, past + L, 1, i64, dev).unsqueeze(1);
    Tensor kj = arange(0, past + L, 1, i64, dev).unsqueeze(0);
    so.attn_mask = kj <= qi;
  }
  Tensor o = F::scaled_dot_product_attention(q, k, v, so);
  return out_proj(o.transpose(1, 2).reshape({N, L, d_model}));
}

std::string CausalSelfAttention::extra_repr() const {
  return "d_model=" + std::to_string(d_model) + ", nhead=" + std::to_string(nhead);
}

// ---- DecoderOnlyBlock ---------------------------------------------------------------------

DecoderOnlyBlock::DecoderOnlyBlock(const DecoderOnlyConfig& c, const Device& device) : dropout(c.dropout) {
  const int64_t ff = c.dim_feedforward > 0 ? c.dim_feedforward : 4 * c.d_model;
  norm1 = LayerNorm({.normalized_shape = {c.d_model}, .eps = c.layer_norm_eps, .dtype = c.dtype}, device);
  norm2 = LayerNorm({.normalized_shape = {c.d_model}, .eps = c.layer_norm_eps, .dtype = c.dtype}, device);
  attn = CausalSelfAttention(c.d_model, c.nhead, c.dropout, c.rope_theta, c.dtype, device);
  linear1 = Linear({.in_features = c.d_model, .out_features = ff, .dtype = c.dtype}, device);
  linear2 = Linear({.in_features = ff, .out_features = c.d_model, .dtype = c.dtype}, device);
}

Tensor DecoderOnlyBlock::forward(const Tensor& x, KVCache* cache) const {
  const bool tr = is_training();
  Tensor h = x + detail::dropout(attn(norm1(x), cache), dropout, tr);
  return h + detail::dropout(linear2(gelu(linear1(norm2(h)))), dropout, tr);
}

// ---- TransformerDecoderOnly ---------------------------------------------------------------

TransformerDecoderOnly::TransformerDecoderOnly(const DecoderOnlyConfig& c, const Device& device) : config(c) {
  KILN_CHECK(c.vocab_size > 0 && c.d_model > 0 && c.num_layers >= 1 && c.dropout >= 0 && c.dropout < 1,
             "TransformerDecoderOnly",
             "TransformerDecoderOnly needs vocab_size > 0, d_model > 0, num_layers >= 1 and dropout in [0, 1), got "
             "vocab_size="
                 << c.vocab_size << ", d_model=" << c.d_model << ", num_layers=" << c.num_layers
                 << ", dropout=" << c.dropout);
  embed = Embedding({.num_embeddings = c.vocab_size, .embedding_dim = c.d_model, .dtype = c.dtype}, device);
  for (int64_t i = 0; i < c.num_layers; ++i) layers.emplace_back(c, device);
  norm = LayerNorm({.normalized_shape = {c.d_model}, .eps = c.layer_norm_eps, .dtype = c.dtype}, device);
  lm_head = Linear({.in_features = c.d_model, .out_features = c.vocab_size, .bias = false, .dtype = c.dtype}, device);
}

Tensor TransformerDecoderOnly::forward(const Tensor& tokens, std::vector<KVCache>* caches) const {
  KILN_CHECK(tokens.defined() && (tokens.dim() == 1 || tokens.dim() == 2) && is_integral(tokens.dtype()) &&
                 tokens.size(-1) >= 1,
             "TransformerDecoderOnly",
             "TransformerDecoderOnly expects integer token ids [N, L] or [L] with L >= 1, got "
                 << shape_str(tokens) << " " << dtype_name(tokens.dtype()));
  if (tokens.dim() == 1) return forward(tokens.unsqueeze(0), caches).squeeze({0});
  if (caches && caches->size() != layers.size()) caches->resize(layers.size());
  Tensor x = embed(tokens);
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i](x, caches ? &(*caches)[i] : nullptr);
  return lm_head(norm(x));
}

std::string TransformerDecoderOnly::extra_repr() const {
  return "vocab_size=" + std::to_string(config.vocab_size) + ", d_model=" + std::to_string(config.d_model) +
         ", nhead=" + std::to_string(config.nhead) + ", num_layers=" + std::to_string(config.num_layers);
}

// ---- generate ------------------------------------------------------------------------------

Tensor generate(const TransformerDecoderOnly& model, const Tensor& prompt, const GenerateOptions& o) {
  KILN_CHECK(prompt.defined() && (prompt.dim() == 1 || prompt.dim() == 2) && is_integral(prompt.dtype()) &&
                 prompt.size(-1) >= 1 && o.max_new_tokens >= 0,
             "generate",
             "generate expects an integer prompt [N, P] or [P] with P >= 1 and max_new_tokens >= 0, got "
                 << shape_str(prompt) << " " << dtype_name(prompt.dtype()) << ", max_new_tokens=" << o.max_new_tokens);
  if (prompt.dim() == 1) return generate(model, prompt.unsqueeze(0), o).squeeze({0});
  NoGradGuard no_grad;
  if (o.seed) manual_seed(*o.seed);
  Tensor seq = prompt.to(i64);
  std::vector<KVCache> caches;
  Tensor logits = model(seq, o.use_cache ? &caches : nullptr);
  Tensor done;
  for (int64_t t = 0; t < o.max_new_tokens; ++t) {
    Tensor last = logits.narrow(1, logits.size(1) - 1, 1).squeeze({1});
    Tensor next = F::sample_logits(last, o.sampling).to(i64);
    if (o.eos_token) {
      next = done.defined() ? where(done, Scalar(*o.eos_token), next) : next;
      done = next == Scalar(*o.eos_token);
    }
    seq = cat({seq, next.unsqueeze(1)}, 1);
    if (done.defined() && all(done).item<bool>()) break;
    if (t + 1 < o.max_new_tokens) logits = o.use_cache ? model(next.unsqueeze(1), &caches) : model(seq);
  }
  return seq;
}

}  // namespace kiln::nn
