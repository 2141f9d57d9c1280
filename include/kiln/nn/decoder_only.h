// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A causal (decoder-only) transformer language model: token embedding, pre-norm blocks of
// causal self-attention with rotary position embeddings and a GELU feed-forward network, a final
// LayerNorm and a linear head over the vocabulary. One KVCache per block makes incremental
// decoding cost O(length) per new token; generate() samples continuations with
// functional::sample_logits (temperature, top-k, top-p, seeded).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/config.h"
#include "kiln/nn/functional/sampling.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/module.h"
#include "kiln/nn/norm_layers.h"
#include "kiln/nn/transformer.h"

namespace kiln::nn {

/// Config of TransformerDecoderOnly:
/// `TransformerDecoderOnly({.vocab_size = 256, .d_model = 64, .nhead = 4, .num_layers = 2})`.
struct DecoderOnlyConfig {
  int64_t vocab_size = 0;
  int64_t d_model = 0;  ///< divisible by nhead; d_model / nhead even (RoPE)
  int64_t nhead = 1;
  int64_t num_layers = 1;
  int64_t dim_feedforward = 0;  ///< 0: 4 * d_model
  double dropout = 0.0;         ///< on attention weights and residual branches (training only)
  double rope_theta = 10000.0;  ///< base of the rotary frequencies
  double layer_norm_eps = 1e-5;
  DType dtype = f32;
  KILN_CONFIG(DecoderOnlyConfig, vocab_size, d_model, nhead, num_layers, dim_feedforward, dropout, rope_theta,
              layer_norm_eps, dtype)
};

/// Causal multi-head self-attention with RoPE on queries and keys. x [N, L, E] -> [N, L, E].
/// With a cache, the new positions are numbered from cache->length(), attend to the cached keys
/// and to each other causally, and their (rotated) keys and values are appended to the cache.
/// Names: qkv (Linear E -> 3E, packed q, k, v), out_proj (Linear E -> E).
struct CausalSelfAttention : Module {
  int64_t d_model = 0, nhead = 1;
  double dropout = 0.0;
  Linear qkv, out_proj;
  RotaryEncoding rope;
  CausalSelfAttention() = default;
  CausalSelfAttention(int64_t d_model, int64_t nhead, double dropout, double rope_theta, DType dtype,
                      const Device& device = Device::default_device());
  Tensor forward(const Tensor& x, KVCache* cache = nullptr) const;
  Tensor operator()(const Tensor& x, KVCache* cache = nullptr) const { return forward(x, cache); }
  std::string extra_repr() const override;
  KILN_VISIT(CausalSelfAttention, qkv, out_proj, rope)
};

/// One pre-norm block: x + attn(norm1(x)), then x + linear2(gelu(linear1(norm2(x)))).
/// x [N, L, E] -> [N, L, E].
struct DecoderOnlyBlock : Module {
  double dropout = 0.0;
  LayerNorm norm1, norm2;
  CausalSelfAttention attn;
  Linear linear1, linear2;
  DecoderOnlyBlock() = default;
  explicit DecoderOnlyBlock(const DecoderOnlyConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x, KVCache* cache = nullptr) const;
  Tensor operator()(const Tensor& x, KVCache* cache = nullptr) const { return forward(x, cache); }
  KILN_VISIT(DecoderOnlyBlock, norm1, attn, norm2, linear1, linear2)
};

/// A causal language model. tokens [N, L] (or [L]) of integer ids in [0, vocab_size) ->
/// logits [N, L, vocab_size] (or [L, vocab_size]); position l sees tokens 0..l only.
/// With `caches` (one KVCache per block, resized as needed) the call continues the sequence
/// the caches hold: feeding a prefix and then one token at a time gives the logits of the full
/// forward over the whole sequence. Names: embed, layers.i..., norm, lm_head.
struct TransformerDecoderOnly : Module {
  DecoderOnlyConfig config;
  Embedding embed;
  std::vector<DecoderOnlyBlock> layers;
  LayerNorm norm;
  Linear lm_head;
  TransformerDecoderOnly() = default;
  explicit TransformerDecoderOnly(const DecoderOnlyConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& tokens, std::vector<KVCache>* caches = nullptr) const;
  Tensor operator()(const Tensor& tokens, std::vector<KVCache>* caches = nullptr) const {
    return forward(tokens, caches);
  }
  std::string extra_repr() const override;
  KILN_VISIT(TransformerDecoderOnly, embed, layers, norm, lm_head)
};

/// Options of generate().
struct GenerateOptions {
  int64_t max_new_tokens = 16;
  functional::SamplingOptions sampling{};  ///< temperature (0: greedy), top_k, top_p
  std::optional<uint64_t> seed{};          ///< manual_seed(seed) before the first draw
  bool use_cache = true;                   ///< false: a full forward over the sequence per token
  /// Once a row draws this id it keeps emitting it; generation stops when every row has.
  std::optional<int64_t> eos_token{};
};

/// Continues `prompt` [N, P] (or [P]), P >= 1, integer ids, by up to max_new_tokens sampled
/// tokens -> i64 [N, P + T] (or [P + T]), T <= max_new_tokens (fewer only when every row hit
/// eos_token). Runs without recording gradients. The same seed gives the same tokens, with and
/// without the cache.
Tensor generate(const TransformerDecoderOnly& model, const Tensor& prompt, const GenerateOptions& o = {});

}  // namespace kiln::nn
