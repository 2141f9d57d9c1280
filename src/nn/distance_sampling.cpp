// SPDX-License-Identifier: MIT OR Apache-2.0
// Distances and similarities (kiln/nn/functional/distance.h) and sampling from logits
// (kiln/nn/functional/sampling.h), as compositions of tensor ops: every device, autodiff.
#include <cmath>
#include <limits>

#include "kiln/error.h"
#include "kiln/nn/functional/distance.h"
#include "kiln/nn/functional/sampling.h"
#include "kiln/ops.h"

namespace kiln::nn::functional {

namespace {
Tensor as_floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(DType::F32); }
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  KILN_CHECK(x1.defined() && x2.defined(), op, "expects defined x1 and x2");
  const Shape s = broadcast_shapes(x1.shape(), x2.shape(), op);
  const auto nd = static_cast<int64_t>(s.size());
  KILN_CHECK(dim >= -std::max<int64_t>(nd, 1) && dim < std::max<int64_t>(nd, 1), op,
             "dim " << dim << " is out of range for x1 " << x1.shape() << " and x2 " << x2.shape());
  const Tensor a = as_floating(x1).expand(s), b = as_floating(x2).expand(s);
  // Each side is divided by its own norm clamped at eps; as in PyTorch the clamp changes the
  // value only, the gradient is that of the norm.
  auto clamped_norm = [&](const Tensor& x) {
    Tensor n = norm(x, 2, {dim}, /*keepdim=*/true);
    const Tensor nd_ = n.detach();
    return n + (clamp_min(nd_, eps) - nd_);
  };
  return ((a / clamped_norm(a)) * (b / clamped_norm(b))).sum({dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  KILN_CHECK(x1.defined() && x2.defined(), "pairwise_distance", "expects defined x1 and x2");
  const Tensor d = as_floating(x1) - as_floating(x2) + eps;
  if (d.dim() == 0) return norm(d.unsqueeze(0), p, {0});  // a 0-d difference: its own dim
  return norm(d, p, {-1}, keepdim);
}

Tensor top_k_filter(const Tensor& logits, int64_t k) {
  KILN_CHECK(logits.defined() && logits.dim() >= 1, "top_k_filter",
             "expects logits [..., V], got " << (logits.defined() ? to_string(logits.shape()) : "undefined"));
  if (k <= 0 || k >= logits.size(-1)) return logits;
  const Tensor kth = topk(logits, k, -1).first.narrow(-1, k - 1, 1);  // [..., 1]
  return where(logits < kth, -kInf, logits);
}

Tensor top_p_filter(const Tensor& logits, double top_p) {
  KILN_CHECK(logits.defined() && logits.dim() >= 1, "top_p_filter",
             "expects logits [..., V], got " << (logits.defined() ? to_string(logits.shape()) : "undefined"));
  KILN_CHECK(top_p > 0 && top_p <= 1, "top_p_filter", "top_p must be in (0, 1], got " << top_p);
  if (top_p >= 1 || logits.size(-1) == 0) return logits;
  const auto [sorted, order] = sort(logits, -1, /*descending=*/true);
  const Tensor probs = softmax(sorted.to(DType::F64), -1);
  // An entry is dropped when the mass before it already reaches top_p (the first never is).
  const Tensor before = cumsum(probs, -1) - probs;
  const Tensor drop_sorted = before >= top_p;
  const Tensor drop = scatter(zeros_like(drop_sorted), -1, order, drop_sorted);
  return where(drop, -kInf, logits);
}

Tensor sample_logits(const Tensor& logits, const SamplingOptions& o) {
  const char* op = "sample_logits";
  KILN_CHECK(logits.defined() && (logits.dim() == 1 || logits.dim() == 2) && is_floating(logits.dtype()), op,
             "expects floating logits [V] or [N, V], got "
                 << (logits.defined() ? to_string(logits.shape()) + " " + std::string(dtype_name(logits.dtype()))
                                      : std::string("undefined")));
  KILN_CHECK(o.temperature >= 0, op, "temperature must be non-negative, got " << o.temperature);
  const Tensor l = logits.detach();
  if (o.temperature == 0) return argmax(l, -1);
  Tensor z = top_p_filter(top_k_filter(l / o.temperature, o.top_k), o.top_p);
  const Tensor probs = softmax(z.to(DType::F64), -1);
  const Tensor ids = multinomial(probs, 1, /*replacement=*/true);
  return ids.squeeze({-1});
}

}  // namespace kiln::nn::functional
