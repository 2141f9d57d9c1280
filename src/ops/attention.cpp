// SPDX-License-Identifier: MIT OR Apache-2.0
// scaled_dot_product_attention, a composite of matmul, softmax and masking (PyTorch's math
// path), with grouped-query heads through broadcasting (no repeated k/v) and query chunking
// for long sequences.
#include "kiln/nn/functional/attention.h"

#include <cmath>
#include <limits>

#include "kiln/matmul.h"
#include "ops/dispatch.h"

namespace kiln::nn::functional {

namespace {

// Note [Attention chunking]: the scores of one query chunk are [batch, chunk, S]. Above
// kChunkAbove score elements in all, queries are processed in chunks of about kChunkTarget
// score elements, and the chunk outputs are concatenated: the peak extra memory is a few
// chunk-sized temporaries instead of several [batch, L, S] ones. Causal attention chunks above
// kChunkTarget scores, in chunks of half that, as each chunk then skips the keys no row of it
// can see (b4 h8 L=S=256, 2^21 scores: 5.9 -> 4.9 ms at 1 thread, 3.1 -> 2.4 ms at 2, against
// one pass with the whole mask).
constexpr int64_t kChunkAbove = int64_t{1} << 22;
constexpr int64_t kChunkTarget = int64_t{1} << 20;

const char* dname(DType t) { return dtype_name(t).data(); }

/// An additive mask: 0 where keep is true, -inf elsewhere, in dtype dt.
Tensor additive(const Tensor& keep, DType dt) {
  return detail::cast_if_needed(where(keep, Scalar(0.0), Scalar(-std::numeric_limits<double>::infinity())), dt);
}

/// Attention of queries q (a chunk of rows starting at row0 of the full L) against all keys.
/// mask: undefined, bool or additive float (already cut to the chunk's rows). Masks are added
/// to the scores (one pass, cheaper than a masked fill); the rows that a mask blanks out
/// completely are found on the mask itself, not on the scores.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, int64_t row0,
              const SdpaOptions& o) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor s = matmul(q, k.mT());  // q is pre-scaled
  if (causal) {
    const int64_t c = q.size(-2), S = k.size(-2);
    s = add(s, additive(tril(ones({c, S}, {.dtype = DType::Bool, .device = q.device()}), row0), s.dtype()));
  }
  Tensor dead;  // [..., c, 1]: rows with every key masked out
  if (mask.defined()) {
    if (mask.dtype() == DType::Bool) {
      s = add(s, additive(mask, s.dtype()));
      dead = logical_not(any(mask, {-1}, true));
    } else {
      s = add(s, mask);
      dead = all(eq(mask, Scalar(-inf)), {-1}, true);
    }
  }
  Tensor w = softmax(s, -1);
  s = Tensor();
  // Fully masked rows give 0 rather than NaN (PyTorch's safe softmax): on the weights when a
  // dropout sees them, else on the (smaller) output.
  const bool drop = o.dropout || o.dropout_p > 0;
  if (dead.defined() && drop) w = w.masked_fill(dead, Scalar(0));
  if (o.dropout)
    w = o.dropout(w);
  else if (o.dropout_p > 0)
    w = mul(w, bernoulli(w.shape(), 1.0 - o.dropout_p, {.dtype = w.dtype(), .device = w.device()})) /
        Scalar(1.0 - o.dropout_p);
  Tensor out = matmul(w, v);
  if (dead.defined() && !drop) out = out.masked_fill(dead, Scalar(0));
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q0, const Tensor& k0, const Tensor& v0, const SdpaOptions& o) {
  const char* api = "scaled_dot_product_attention";
  detail::check_defined(api, q0);
  detail::check_defined(api, k0);
  detail::check_defined(api, v0);
  detail::check_same_device(api, q0, k0);
  detail::check_same_device(api, q0, v0);
  KILN_CHECK(q0.dtype() == k0.dtype() && q0.dtype() == v0.dtype(), api,
             "expected query, key and value to have the same dtype, but got "
                 << dname(q0.dtype()) << ", " << dname(k0.dtype()) << " and " << dname(v0.dtype()));
  KILN_CHECK(is_floating(q0.dtype()), api, "expected floating point inputs, got " << dname(q0.dtype()));
  KILN_CHECK(q0.dim() >= 2 && k0.dim() >= 2 && v0.dim() >= 2, api,
             "expected q, k, v with at least 2 dims, got shapes " << q0.shape() << ", " << k0.shape() << " and "
                                                                  << v0.shape());
  KILN_CHECK(q0.size(-1) == k0.size(-1), api,
             "query and key must have the same embedding size, got shapes " << q0.shape() << " and " << k0.shape());
  KILN_CHECK(k0.size(-2) == v0.size(-2), api,
             "key and value must have the same sequence length, got shapes " << k0.shape() << " and " << v0.shape());
  KILN_CHECK(o.dropout_p >= 0 && o.dropout_p < 1, api, "dropout_p must be in [0, 1), got " << o.dropout_p);
  KILN_CHECK(!(o.is_causal && o.attn_mask.defined()), api, "explicit attn_mask should not be set when is_causal=true");
  const int64_t L = q0.size(-2), S = k0.size(-2), E = q0.size(-1);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(E));
  const DType dt = q0.dtype();
  const DType ct = dt == DType::F16 || dt == DType::BF16 ? DType::F32 : dt;
  Tensor q = detail::cast_if_needed(q0, ct), k = detail::cast_if_needed(k0, ct), v = detail::cast_if_needed(v0, ct);
  Tensor mask = o.attn_mask;
  if (mask.defined()) {
    detail::check_same_device(api, q0, mask);
    KILN_CHECK(mask.dtype() == DType::Bool || is_floating(mask.dtype()), api,
               "expected attn_mask of dtype bool or float, got " << dname(mask.dtype()));
    if (mask.dtype() != DType::Bool) mask = detail::cast_if_needed(mask, ct);
    KILN_CHECK(mask.dim() >= 1, api, "attn_mask must have at least 1 dim, got shape " << mask.shape());
    // Broadcastable to the scores [..., L, S] (the broadcast of q's and k's batch dims; with
    // gqa, k's heads count as q's).
    Shape qb(q0.shape().begin(), q0.shape().end() - 2), kb(k0.shape().begin(), k0.shape().end() - 2);
    if (o.enable_gqa && !qb.empty() && !kb.empty()) kb.back() = 1;
    Shape scores = broadcast_shapes(qb, kb, api);
    scores.push_back(L);
    scores.push_back(S);
    bool ok = mask.dim() <= static_cast<int64_t>(scores.size());
    for (int64_t i = 1; ok && i <= mask.dim(); ++i) {
      int64_t m = mask.size(-i), t = scores[scores.size() - static_cast<size_t>(i)];
      ok = m == t || m == 1;
    }
    KILN_CHECK(ok, api,
               "attn_mask of shape " << mask.shape() << " does not broadcast to the attention scores " << scores);
  }
  // Grouped-query attention: split q's heads into [Hkv, G] and broadcast k, v over G.
  bool grouped = false;
  if (o.enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3) {
    const int64_t Hq = q.size(-3), Hk = k.size(-3), Hv = v.size(-3);
    KILN_CHECK(Hk > 0 && Hv > 0 && Hq % Hk == 0 && Hq % Hv == 0, api,
               "number of heads in key and value must divide the number of heads in query, got shapes "
                   << q0.shape() << ", " << k0.shape() << " and " << v0.shape());
    if (Hk == Hv && Hk != Hq) {
      const int64_t G = Hq / Hk;
      q = q.unflatten(-3, {Hk, G});
      k = k.unsqueeze(-3);
      v = v.unsqueeze(-3);
      if (mask.defined() && mask.dim() >= 3)
        mask = mask.size(-3) == 1 ? mask.unsqueeze(-3) : mask.unflatten(-3, {Hk, G});
      grouped = true;
    } else {
      if (Hk != Hq) k = k.repeat_interleave(Hq / Hk, -3);
      if (Hv != Hq) v = v.repeat_interleave(Hq / Hv, -3);
    }
  }
  q = mul(q, Scalar(scale));
  // Batch of the scores (broadcast of q's and k's leading dims).
  Shape qb(q.shape().begin(), q.shape().end() - 2), kb(k.shape().begin(), k.shape().end() - 2);
  const int64_t batch = shape_numel(broadcast_shapes(qb, kb, api));
  Tensor out;
  // Causal attention chunks earlier: a chunk skips the keys after its last row.
  const int64_t chunk_above = o.is_causal ? kChunkTarget : kChunkAbove;
  if (batch * L * S <= chunk_above || L <= 1) {
    out = attend(q, k, v, mask, o.is_causal, 0, o);
  } else {
    const int64_t target = o.is_causal ? kChunkTarget / 2 : kChunkTarget;
    const int64_t chunk = std::max<int64_t>(1, target / std::max<int64_t>(1, batch * S));
    std::vector<Tensor> parts;
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
      const int64_t c = std::min(chunk, L - r0);
      Tensor m = mask;
      if (m.defined() && m.dim() >= 2 && m.size(-2) != 1) m = m.narrow(-2, r0, c);
      if (o.is_causal && r0 + c < S) {
        // Keys after the chunk's last row are masked for every row of it: leave them out.
        const int64_t s = r0 + c;
        parts.push_back(attend(q.narrow(-2, r0, c), k.narrow(-2, 0, s), v.narrow(-2, 0, s), m, true, r0, o));
        continue;
      }
      parts.push_back(attend(q.narrow(-2, r0, c), k, v, m, o.is_causal, r0, o));
    }
    out = cat(parts, -2);
  }
  if (grouped) out = out.flatten(-4, -3);
  return detail::cast_if_needed(out, dt);
}

}  // namespace kiln::nn::functional
