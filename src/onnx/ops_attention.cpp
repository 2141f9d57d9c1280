// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX Attention (opsets 23 to 25): scaled dot-product attention over 4-D [batch, heads, seq,
// head_size] or 3-D [batch, seq, heads * head_size] inputs, with a key/value cache (past_key,
// past_value -> present_key, present_value), grouped-query heads, a boolean or additive mask
// (shorter than the keys: padded as masked), causal masking aligned to the end of the cache,
// sliding windows, per-batch valid key counts (nonpad_kv_seqlen), softcap, the softmax's
// precision, and the scores as a fourth output (qk_matmul_output_mode 0 to 3).
#include <cmath>

#include "kiln/matmul.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

/// [batch, seq, heads * d] -> [batch, heads, seq, d].
Tensor split_heads(const OpContext& c, const Tensor& t, int64_t heads, const char* what) {
  c.check(heads > 0 && t.size(2) % heads == 0, std::string(what) +
                                                   ": a 3-D input needs q_num_heads and kv_num_heads "
                                                   "that divide its last dim " +
                                                   std::to_string(t.size(2)));
  return t.reshape({t.size(0), t.size(1), heads, t.size(2) / heads}).permute({0, 2, 1, 3});
}

/// 0 where allowed, -inf where not, in dtype dt.
Tensor bias_of(const Tensor& allowed, DType dt) {
  return where(allowed, zeros({}, {.dtype = dt, .device = allowed.device()}),
               full({}, -INFINITY, {.dtype = dt, .device = allowed.device()}));
}

/// Key j is allowed for query i when lo <= (i + offset) - j <= hi (lo, hi < 0: unbounded
/// side); offset is a scalar or a [batch] tensor (then the result is [batch, 1, q, kv]).
Tensor band(int64_t q, int64_t kv, const Tensor& offset, int64_t lo, int64_t hi, const Device& dev) {
  Tensor i = arange(q, i64, dev).reshape({q, 1}), j = arange(kv, i64, dev).reshape({1, kv});
  Tensor pos = offset.dim() == 0 ? i + offset : i.reshape({1, 1, q, 1}) + offset.reshape({-1, 1, 1, 1});
  Tensor diff = pos - j;
  Tensor ok = ones(diff.shape(), {.dtype = bool_, .device = dev});
  if (lo >= 0) ok = logical_and(ok, diff <= lo);
  if (hi >= 0) ok = logical_and(ok, diff >= -hi);
  return ok;
}

void attention(OpContext& c) {
  Tensor q = c.x(0), k = c.x(1), v = c.x(2);
  c.check(q.dim() == k.dim() && q.dim() == v.dim() && (q.dim() == 3 || q.dim() == 4),
          "Q, K and V must all be 3-D or all 4-D, got " + to_string(q.shape()) + ", " + to_string(k.shape()) + ", " +
              to_string(v.shape()));
  c.check(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
          "Q, K and V must have one floating dtype");
  const DType dt = q.dtype();
  const bool three_d = q.dim() == 3;
  const bool has_qh = c.has_attr("q_num_heads"), has_kvh = c.has_attr("kv_num_heads");
  if (three_d) {
    q = split_heads(c, q, c.attr_i("q_num_heads", 0), "Q");
    k = split_heads(c, k, c.attr_i("kv_num_heads", 0), "K");
    v = split_heads(c, v, c.attr_i("kv_num_heads", 0), "V");
  } else {
    c.check(c.opset < 25 || (!has_qh && !has_kvh), "q_num_heads and kv_num_heads are for 3-D inputs only");
  }
  c.check(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(3) == q.size(3) && v.size(1) == k.size(1) &&
              v.size(2) == k.size(2),
          "Q " + to_string(q.shape()) + ", K " + to_string(k.shape()) + " and V " + to_string(v.shape()) +
              " do not agree (as [batch, heads, seq, head_size])");
  const int64_t batch = q.size(0), qlen = q.size(2);
  // Scale: sqrt(scale) on Q and on K, in the inputs' dtype, as the reference does.
  const double scale = c.has_attr("scale") ? c.attr_f("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor sq = full({}, std::sqrt(scale), {.dtype = dt, .device = q.device()});
  // The cache: present = past ++ new along the sequence.
  const bool past = c.has(4) || c.has(5);
  c.check(c.has(4) == c.has(5), "past_key and past_value come together");
  const Tensor nonpad = c.has(6) ? c.x(6).to(i64) : Tensor{};
  c.check(!(past && nonpad.defined()), "nonpad_kv_seqlen cannot be combined with past_key / past_value");
  const int64_t past_len = past ? c.x(4).size(2) : 0;
  if (past) {
    k = cat({c.x(4), k}, 2);
    v = cat({c.x(5), v}, 2);
  }
  c.set(1, k);
  c.set(2, v);
  const int64_t kvlen = k.size(2);
  // The additive bias over [..., q, kv]: the mask (padded to kv as masked), causal, window and
  // padding constraints.
  Tensor bias;
  if (c.has(3)) {
    Tensor m = c.x(3);
    const int64_t short_by = kvlen - m.size(-1);
    if (short_by > 0) {
      Shape pads{0, short_by};
      m = m.dtype() == bool_ ? pad(m.to(u8), pads).to(bool_) : pad(m, pads, "constant", -INFINITY);
    }
    bias = m.dtype() == bool_ ? bias_of(m, dt) : m.to(dt);
  }
  const Tensor offset = nonpad.defined() ? nonpad - qlen : full({}, past_len, {.dtype = i64, .device = q.device()});
  const Device dev = q.device();
  if (c.attr_i("is_causal", 0)) {
    Tensor causal = bias_of(band(qlen, kvlen, offset, -1, 0, dev), dt);
    bias = bias.defined() ? bias + causal : causal;
  }
  const int64_t left = c.attr_i("left_window_size", -1), right = c.attr_i("right_window_size", -1);
  if (left >= 0 || right >= 0) {
    Tensor window = bias_of(band(qlen, kvlen, offset, left, right, dev), dt);
    bias = bias.defined() ? bias + window : window;
  }
  if (nonpad.defined()) {
    Tensor valid = arange(kvlen, i64, dev).reshape({1, 1, 1, kvlen}) < nonpad.reshape({batch, 1, 1, 1});
    bias = bias.defined() ? bias + bias_of(valid, dt) : bias_of(valid, dt);
  }
  // Grouped-query attention: each key/value head serves q_heads / kv_heads query heads in turn.
  const int64_t qh = q.size(1), kvh = k.size(1);
  if (qh != kvh) {
    c.check(qh % kvh == 0,
            "q_num_heads " + std::to_string(qh) + " is not a multiple of kv_num_heads " + std::to_string(kvh));
    k = repeat_interleave(k, qh / kvh, 1);
    v = repeat_interleave(v, qh / kvh, 1);
  }
  Tensor scores = matmul(q * sq, (k * sq).transpose(2, 3));
  const float softcap = c.attr_f("softcap", 0.0f);
  if (softcap > 0) scores = tanh(scores / softcap) * softcap;
  const int64_t mode = c.attr_i("qk_matmul_output_mode", 0);
  Tensor qk_out = scores;
  Tensor biased = bias.defined() ? scores + bias : scores;
  if (mode == 2) qk_out = biased;
  if (c.has_attr("softmax_precision"))
    biased = biased.to(to_dtype(c.attr_i("softmax_precision", 1), "softmax_precision"));
  // Softmax whose fully masked rows (max -inf) give 0, not NaN.
  Tensor mx = amax(biased, {-1}, true);
  Tensor e = exp(biased - where(isneginf(mx), zeros_like(mx), mx));
  Tensor s = e.sum({-1}, true);
  Tensor p = e / where(s == 0.0, ones_like(s), s);
  // A row whose bias masks every key attends to nothing: its probabilities are 0.
  if (bias.defined()) p = where(isneginf(amax(bias, {-1}, true)), zeros_like(p), p);
  p = p.to(dt);
  if (mode == 3) qk_out = p;
  c.set(3, qk_out.to(dt));
  Tensor y = matmul(p, v);
  if (three_d) y = y.permute({0, 2, 1, 3}).reshape({batch, qlen, -1});
  c.set(0, y);
}

}  // namespace

void register_attention(Registry& r) { r["Attention"] = attention; }

}  // namespace kiln::onnx
