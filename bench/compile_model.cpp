// SPDX-License-Identifier: MIT OR Apache-2.0
// The compile-time benchmark: a user's model file. bench/run.sh times compiling it at -O2
// (target: <= 1.5 s); the bench build compiles it too so it never rots.
#include <kiln/kiln.h>

#include <vector>

namespace model {

using namespace kiln;

/// Parameters of a tiny two-layer classifier, kept as plain tensors.
struct Params {
  Tensor w1, b1, w2, b2;
};

/// Random parameters: weights ~ N(0, 1/fan_in), zero biases.
Params init(int64_t in, int64_t hidden, int64_t out, const Device& device) {
  Params p;
  p.w1 = randn({hidden, in}, {.dtype = f32, .device = device}) / static_cast<double>(in);
  p.b1 = zeros({hidden}, {.dtype = f32, .device = device});
  p.w2 = randn({out, hidden}, {.dtype = f32, .device = device}) / static_cast<double>(hidden);
  p.b2 = zeros({out}, {.dtype = f32, .device = device});
  return p;
}

/// A dense layer written with broadcasting: x [B, in], w [out, in] -> [B, out].
Tensor dense(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor prod = x.unsqueeze(1) * w.unsqueeze(0);  // [B, out, in]
  return prod.sum({-1}) + b;
}

/// Forward pass: dense -> gelu -> dense -> log_softmax.
Tensor forward(const Params& p, const Tensor& x) {
  Tensor h = gelu(dense(x, p.w1, p.b1));
  h = where(isfinite(h), h, zeros_like(h));
  return dense(h, p.w2, p.b2).log_softmax(-1);
}

/// Mean negative log-likelihood of integer targets [B].
Tensor nll(const Tensor& log_probs, const Tensor& targets) {
  Tensor picked = gather(log_probs, 1, targets.unsqueeze(1)).squeeze({1});
  return -picked.mean();
}

/// Accuracy of predictions against targets, as a float in [0, 1].
float accuracy(const Tensor& log_probs, const Tensor& targets) {
  Tensor hits = (log_probs.argmax(-1) == targets).to(f32);
  return hits.mean().item<float>();
}

}  // namespace model
