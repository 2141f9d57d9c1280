// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Attention and transformers: MultiHeadAttention (with a key/value cache for incremental
// decoding), TransformerEncoderLayer / TransformerDecoderLayer and their stacks,
// PositionalEncoding (sinusoidal) and RotaryEncoding (RoPE). Parameter names follow torch.nn
// (self_attn.in_proj_weight, linear1.weight, norm1.bias, layers.0...), so a PyTorch state_dict
// maps 1:1 onto named_parameters().
#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/config.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/module.h"
#include "kiln/nn/norm_layers.h"

namespace kiln::nn {

/// Config of MultiHeadAttention: `MultiHeadAttention({.embed_dim = 512, .num_heads = 8})`.
struct MultiHeadAttentionConfig {
  int64_t embed_dim = 0;  ///< E, divisible by num_heads
  int64_t num_heads = 1;
  double dropout = 0.0;        ///< dropout on the attention weights (training only)
  bool bias = true;            ///< in_proj_bias and out_proj.bias
  bool add_bias_kv = false;    ///< learnable bias_k, bias_v [1, 1, E] appended to the keys and values
  bool add_zero_attn = false;  ///< append a zero key and value (after bias_k / bias_v)
  int64_t kdim = 0;            ///< key features; 0 = embed_dim
  int64_t vdim = 0;            ///< value features; 0 = embed_dim
  bool batch_first = false;    ///< [N, L, E] instead of [L, N, E]
  DType dtype = f32;
  KILN_CONFIG(MultiHeadAttentionConfig, embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
              batch_first, dtype)
};

/// Keys and values of the previous steps of an incremental decoding, per layer:
/// k, v [N, num_heads, S_cached, head_dim] (undefined when empty). MultiHeadAttention::forward
/// appends the new keys and values and attends over the whole cache.
struct KVCache {
  Tensor k, v;
  /// Number of cached positions.
  int64_t length() const { return k.defined() ? k.size(-2) : 0; }
  void clear() { k = v = Tensor(); }
};

/// Options of MultiHeadAttention::forward (PyTorch's keyword arguments).
struct AttentionOptions {
  /// [N, S] (unbatched [S]); bool: true = ignore this key (PyTorch's convention), float: added.
  Tensor key_padding_mask{};
  /// [L, S] or [N*num_heads, L, S]; bool: true = NOT allowed to attend (PyTorch's
  /// convention), float: added to the scores. With a cache S counts the cached keys too.
  Tensor attn_mask{};
  /// Return the attention weights (else `weights` is undefined and a fused kernel is used).
  bool need_weights = false;
  /// Average the returned weights over heads ([N, L, S]) or keep them ([N, H, L, S]).
  bool average_attn_weights = true;
  /// Causal mask, aligned to the last key (query i sees keys up to S - L + i); combined with
  /// attn_mask when both are given.
  bool is_causal = false;
  /// Incremental decoding: keys and values of earlier steps; updated in place.
  KVCache* cache = nullptr;
};

/// Result of MultiHeadAttention::forward.
struct AttentionOutput {
  Tensor output;   ///< [L, N, E] ([N, L, E] batch_first, [L, E] unbatched)
  Tensor weights;  ///< [N, L, S] or [N, H, L, S] when need_weights; else undefined
};

/// Multi-head attention (torch.nn.MultiheadAttention). query [L, N, E], key [S, N, kdim],
/// value [S, N, vdim] ([N, *, *] with batch_first; unbatched [L, E] etc.). When kdim == vdim ==
/// E the projection is one packed in_proj_weight [3E, E] (PyTorch's name and Xavier-uniform
/// init); otherwise separate q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight
/// [E, vdim] (as PyTorch does for different dims). in_proj_bias [3E] and out_proj.bias start at
/// zero; out_proj is a Linear(E, E).
struct MultiHeadAttention : Module {
  MultiHeadAttentionConfig config;
  Param in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias;
  Param bias_k, bias_v;  ///< [1, 1, E] with add_bias_kv (Xavier-normal init, as PyTorch)
  Linear out_proj;
  /// LoRA adapters of the query, key and value projections (nn::apply_lora).
  std::optional<LoraAdapter> q_lora, k_lora, v_lora;
  MultiHeadAttention() = default;
  explicit MultiHeadAttention(const MultiHeadAttentionConfig& c, const Device& device = Device::default_device());
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const AttentionOptions& o = {}) const;
  AttentionOutput operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                             const AttentionOptions& o = {}) const {
    return forward(query, key, value, o);
  }
  std::string extra_repr() const override;
  KILN_VISIT(MultiHeadAttention, in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, bias_k,
             bias_v, out_proj, q_lora, k_lora, v_lora)
};

/// Config of TransformerEncoderLayer / TransformerDecoderLayer (torch.nn's defaults).
struct TransformerLayerConfig {
  int64_t d_model = 0;
  int64_t nhead = 1;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  ///< "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  ///< pre-norm (x + f(norm(x))) instead of post-norm (norm(x + f(x)))
  bool bias = true;         ///< biases of the linear layers, attention and layer norms
  DType dtype = f32;
  KILN_CONFIG(TransformerLayerConfig, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
              norm_first, bias, dtype)
};

/// One encoder block: self-attention then a feed-forward network linear2(dropout(act(linear1)))
/// each with a residual connection and LayerNorm. src [S, N, d_model] ([N, S, d_model]
/// batch_first; unbatched [S, d_model]) -> same shape. Names: self_attn, linear1, linear2,
/// norm1, norm2 (dropout layers have no parameters).
struct TransformerEncoderLayer : Module {
  TransformerLayerConfig config;
  MultiHeadAttention self_attn;
  Linear linear1, linear2;
  LayerNorm norm1, norm2;
  TransformerEncoderLayer() = default;
  explicit TransformerEncoderLayer(const TransformerLayerConfig& c, const Device& device = Device::default_device());
  /// src_mask [S, S] or [N*nhead, S, S] and src_key_padding_mask [N, S] as AttentionOptions.
  Tensor forward(const Tensor& src, const Tensor& src_mask = {}, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false) const;
  Tensor operator()(const Tensor& src, const Tensor& src_mask = {}, const Tensor& src_key_padding_mask = {},
                    bool is_causal = false) const {
    return forward(src, src_mask, src_key_padding_mask, is_causal);
  }
  std::string extra_repr() const override;
  KILN_VISIT(TransformerEncoderLayer, self_attn, linear1, linear2, norm1, norm2)
};

/// Masks and cache of TransformerDecoderLayer::forward.
struct DecoderOptions {
  Tensor tgt_mask{}, memory_mask{}, tgt_key_padding_mask{}, memory_key_padding_mask{};
  bool tgt_is_causal = false;
  /// Incremental decoding: the self-attention's keys and values of earlier target positions.
  KVCache* cache = nullptr;
};

/// One decoder block: self-attention, cross-attention over `memory`, feed-forward; residuals
/// and LayerNorms (norm1..3). tgt [T, N, d_model], memory [S, N, d_model] (batch_first
/// [N, *, d_model]) -> tgt's shape. Names: self_attn, multihead_attn, linear1, linear2, norm1,
/// norm2, norm3.
struct TransformerDecoderLayer : Module {
  TransformerLayerConfig config;
  MultiHeadAttention self_attn, multihead_attn;
  Linear linear1, linear2;
  LayerNorm norm1, norm2, norm3;
  TransformerDecoderLayer() = default;
  explicit TransformerDecoderLayer(const TransformerLayerConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderOptions& o = {}) const;
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderOptions& o = {}) const {
    return forward(tgt, memory, o);
  }
  std::string extra_repr() const override;
  KILN_VISIT(TransformerDecoderLayer, self_attn, multihead_attn, linear1, linear2, norm1, norm2, norm3)
};

/// Config of TransformerEncoder / TransformerDecoder: num_layers copies of `layer` (each
/// initialised independently) and an optional final LayerNorm(d_model) named "norm".
struct TransformerStackConfig {
  TransformerLayerConfig layer;
  int64_t num_layers = 1;
  bool final_norm = false;
  KILN_CONFIG(TransformerStackConfig, layer, num_layers, final_norm)
};

/// A stack of encoder layers ("layers.0.self_attn...", "norm.weight"); shapes as the layer.
struct TransformerEncoder : Module {
  TransformerStackConfig config;
  std::vector<TransformerEncoderLayer> layers;
  std::optional<LayerNorm> norm;
  TransformerEncoder() = default;
  explicit TransformerEncoder(const TransformerStackConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& src, const Tensor& mask = {}, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false) const;
  Tensor operator()(const Tensor& src, const Tensor& mask = {}, const Tensor& src_key_padding_mask = {},
                    bool is_causal = false) const {
    return forward(src, mask, src_key_padding_mask, is_causal);
  }
  std::string extra_repr() const override;
  KILN_VISIT(TransformerEncoder, layers, norm)
};

/// A stack of decoder layers. `caches` (one KVCache per layer, resized as needed) enables
/// incremental decoding; otherwise o.cache must be null.
struct TransformerDecoder : Module {
  TransformerStackConfig config;
  std::vector<TransformerDecoderLayer> layers;
  std::optional<LayerNorm> norm;
  TransformerDecoder() = default;
  explicit TransformerDecoder(const TransformerStackConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderOptions& o = {},
                 std::vector<KVCache>* caches = nullptr) const;
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderOptions& o = {},
                    std::vector<KVCache>* caches = nullptr) const {
    return forward(tgt, memory, o, caches);
  }
  std::string extra_repr() const override;
  KILN_VISIT(TransformerDecoder, layers, norm)
};

/// Config of PositionalEncoding.
struct PositionalEncodingConfig {
  int64_t d_model = 0;
  int64_t max_len = 5000;
  double dropout = 0.0;     ///< dropout after adding the encoding (training only)
  bool batch_first = true;  ///< x [N, S, d] (or [S, d]); false: [S, N, d]
  DType dtype = f32;
  KILN_CONFIG(PositionalEncodingConfig, d_model, max_len, dropout, batch_first, dtype)
};
/// Adds the sinusoidal encoding of "Attention is all you need": pe[pos, 2i] = sin(pos /
/// 10000^(2i/d)), pe[pos, 2i+1] = cos(...). The table is a buffer `pe` [max_len, d_model].
/// forward(x, offset): positions offset .. offset+S-1 (for cached decoding).
struct PositionalEncoding : Module {
  PositionalEncodingConfig config;
  Buffer pe;
  PositionalEncoding() = default;
  explicit PositionalEncoding(const PositionalEncodingConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x, int64_t offset = 0) const;
  Tensor operator()(const Tensor& x, int64_t offset = 0) const { return forward(x, offset); }
  std::string extra_repr() const override;
  KILN_VISIT(PositionalEncoding, pe)
};

/// Config of RotaryEncoding.
struct RotaryEncodingConfig {
  int64_t head_dim = 0;      ///< even
  double theta = 10000.0;    ///< base of the frequencies theta^(-2i/head_dim)
  bool interleaved = false;  ///< rotate pairs (x[2i], x[2i+1]) (GPT-J / torchtune) instead of
                             ///< halves (x[i], x[i + d/2]) (GPT-NeoX / Hugging Face LLaMA)
  KILN_CONFIG(RotaryEncodingConfig, head_dim, theta, interleaved)
};
/// Rotary position embedding (RoPE) for x [..., seq, head_dim] -> same shape: position
/// offset + s rotates each pair of features by (offset + s) * theta^(-2i/head_dim). No
/// parameters; the angles are computed in f64 for the positions asked.
struct RotaryEncoding : Module {
  RotaryEncodingConfig config;
  RotaryEncoding() = default;
  explicit RotaryEncoding(const RotaryEncodingConfig& c, const Device& device = Device::default_device());
  Tensor forward(const Tensor& x, int64_t offset = 0) const;
  Tensor operator()(const Tensor& x, int64_t offset = 0) const { return forward(x, offset); }
  std::string extra_repr() const override;
  void visit(Visitor&) override {}
  std::string type_name() const override { return "RotaryEncoding"; }
};

}  // namespace kiln::nn
