// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX recurrent ops: RNN, GRU, LSTM (forward, reverse, bidirectional; layout 0 and 1; clip;
// peepholes; linear_before_reset; activations Sigmoid/Tanh/Relu/HardSigmoid/LeakyRelu/...).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/backend.h"
#include "kiln/matmul.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  Tensor operator()(const Tensor& x) const {
    if (name == "Sigmoid") return sigmoid(x);
    if (name == "Tanh") return tanh(x);
    if (name == "Relu") return relu(x);
    if (name == "LeakyRelu") return leaky_relu(x, alpha);
    if (name == "ThresholdedRelu") return where(x > alpha, x, zeros_like(x));
    if (name == "ScaledTanh") return tanh(x * beta) * alpha;
    if (name == "HardSigmoid") return clamp(x * alpha + beta, 0.0, 1.0);
    if (name == "Elu") return elu(x, alpha);
    if (name == "Softsign") return softsign(x);
    if (name == "Softplus") return log1p(exp(x));
    if (name == "Affine") return x * alpha + beta;
    KILN_CHECK(false, "onnx", "unsupported RNN activation '" << name << "'");
    __builtin_unreachable();
  }
};

std::vector<Act> activations(const OpContext& c, const std::vector<std::string>& defaults, int64_t dirs) {
  const proto::AttrP* a = c.node.attr("activations");
  std::vector<std::string> names = a ? a->strings : std::vector<std::string>{};
  std::vector<float> al = c.attr_floats("activation_alpha"), be = c.attr_floats("activation_beta");
  size_t per = defaults.size();
  std::vector<Act> out;
  for (int64_t d = 0; d < dirs; ++d)
    for (size_t i = 0; i < per; ++i) {
      size_t k = static_cast<size_t>(d) * per + i;
      Act x;
      x.name = k < names.size() ? names[k] : defaults[i];
      bool given = k < names.size();
      x.alpha = given && k < al.size() ? al[k] : (x.name == "LeakyRelu" ? 0.01 : x.name == "HardSigmoid" ? 0.2 : 1.0);
      x.beta = given && k < be.size() ? be[k] : (x.name == "HardSigmoid" ? 0.5 : x.name == "ScaledTanh" ? 1.0 : 0.0);
      out.push_back(x);
    }
  return out;
}

enum class Kind { RNN, GRU, LSTM };

// ---- fused LSTM (CPU, f32, default activations) --------------------------------------------
// Note [fused LSTM]: the op-by-op recurrence dispatches ~15 Kiln ops per step, which dominates
// small models (hidden 24: each op is a few dozen flops). The common case (what PyTorch exports:
// Sigmoid/Tanh/Tanh, no clip, no peepholes, no input_forget) runs here instead: the input
// projection of all steps is one matmul, then per step one small gemm (h . R^T, accumulated onto
// the precomputed projection) and one pass computing gates, cell and hidden state in place.

// GCC if-converts (and so vectorizes) the clamps only without trapping math.
#if defined(__GNUC__) && !defined(__clang__)
#define KILN_VEC_MATH __attribute__((always_inline, optimize("no-trapping-math"))) inline
#define KILN_VEC_LOOP __attribute__((optimize("no-trapping-math")))
#else
#define KILN_VEC_MATH inline
#define KILN_VEC_LOOP
#endif

/// e^x for x in [-88, 88] (clamped), relative error ~2e-7; branch-free so loops vectorize.
KILN_VEC_MATH float fast_exp(float x) {
  x = x < -88.0f ? -88.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Round to nearest with the 1.5 * 2^23 trick (vectorizes, unlike nearbyint).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;  // ln2 split in two for exactness
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

// The per-step kernels, compiled for AVX-512 / AVX2 as well as the baseline (picked at run time).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KILN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_CLONES
#endif

/// g[b, :] += h[b, :] . R^T for b < B, with rt = R^T [H, G] row-major (axpy form: vectorizes
/// over the G gates, unlike G dot products of length H).
KILN_CLONES void add_recurrent(float* __restrict g, const float* __restrict h, const float* __restrict rt, int64_t B,
                               int64_t H, int64_t G) {
  for (int64_t bi = 0; bi < B; ++bi) {
    float* __restrict gb = g + bi * G;
    for (int64_t k = 0; k < H; ++k) {
      const float hk = h[bi * H + k];
      const float* __restrict r = rt + k * G;
      for (int64_t j = 0; j < G; ++j) gb[j] += hk * r[j];
    }
  }
}

/// One step's gates -> cell and hidden state (gates i, o, f, c; in place in g).
KILN_CLONES KILN_VEC_LOOP void lstm_cell(float* g, float* cp, float* hp, float* tmp, int64_t B, int64_t H) {
  const int64_t G = 4 * H;
  for (int64_t bi = 0; bi < B; ++bi) {
    float* gb = g + bi * G;
    for (int64_t j = 0; j < 3 * H; ++j) gb[j] = 1.0f / (1.0f + fast_exp(-gb[j]));
    for (int64_t j = 3 * H; j < G; ++j) gb[j] = 2.0f / (1.0f + fast_exp(-2.0f * gb[j])) - 1.0f;
    float* cb = cp + bi * H;
    float* hb = hp + bi * H;
    for (int64_t j = 0; j < H; ++j) {
      cb[j] = gb[2 * H + j] * cb[j] + gb[j] * gb[3 * H + j];
      tmp[j] = 2.0f / (1.0f + fast_exp(-2.0f * cb[j])) - 1.0f;
    }
    for (int64_t j = 0; j < H; ++j) hb[j] = gb[H + j] * tmp[j];
  }
}

/// One direction of a default LSTM; x [T, B, I], w [4H, I], r [4H, H], b [8H] or undefined,
/// h0 / c0 [B, H] or undefined. Writes Y [T, B, H] and returns (h, c) as [B, H] tensors.
/// Host loops only (a handful of Kiln ops per call: small models are dominated by dispatch).
std::pair<Tensor, Tensor> lstm_fused(const Tensor& x, const Tensor& w, const Tensor& r, const Tensor& b,
                                     const Tensor& h0, const Tensor& c0, bool reverse, Tensor& Y) {
  const int64_t T = x.size(0), B = x.size(1), I = x.size(2), G = w.size(0), H = G / 4;
  const TensorOptions o{.dtype = f32, .device = x.device()};
  const Tensor xc = x.contiguous(), wc = w.contiguous(), rc = r.contiguous();
  // Input projections of all steps (+ both biases): [T, B, 4H].
  Tensor xw = matmul(xc.reshape({T * B, I}), wc.t()).contiguous();
  float* gx = host_f32(xw);
  if (b.defined()) {
    const Tensor bc = b.contiguous();
    const float* bp = host_f32(bc);
    std::vector<float> bs(static_cast<size_t>(G));
    for (int64_t j = 0; j < G; ++j) bs[j] = bp[j] + bp[G + j];
    for (int64_t row = 0; row < T * B; ++row)
      for (int64_t j = 0; j < G; ++j) gx[row * G + j] += bs[j];
  }
  // R^T [H, 4H].
  const float* rp = host_f32(rc);
  std::vector<float> rt(static_cast<size_t>(H * G));
  for (int64_t j = 0; j < G; ++j)
    for (int64_t k = 0; k < H; ++k) rt[k * G + j] = rp[j * H + k];
  Tensor h = empty({B, H}, o), cell = empty({B, H}, o);
  float *hp = host_f32(h), *cp = host_f32(cell), *yp = host_f32(Y);
  const size_t state_bytes = static_cast<size_t>(B * H) * sizeof(float);
  if (h0.defined())
    std::memcpy(hp, host_f32(h0.contiguous()), state_bytes);
  else
    std::memset(hp, 0, state_bytes);
  if (c0.defined())
    std::memcpy(cp, host_f32(c0.contiguous()), state_bytes);
  else
    std::memset(cp, 0, state_bytes);
  std::vector<float> tmp(static_cast<size_t>(H));
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    float* g = gx + t * B * G;
    add_recurrent(g, hp, rt.data(), B, H, G);
    lstm_cell(g, cp, hp, tmp.data(), B, H);
    std::memcpy(yp + t * B * H, hp, state_bytes);
  }
  return {h, cell};
}

bool lstm_fusable(const OpContext& c, const std::vector<Act>& acts, bool has_clip, bool input_forget) {
  const Tensor& x = c.x(0);
  if (!x.device().is_cpu() || x.dtype() != f32 || c.x(1).dtype() != f32 || c.x(2).dtype() != f32) return false;
  if (has_clip || input_forget || c.has(7)) return false;
  for (size_t i = 0; i < acts.size(); ++i)
    if (acts[i].name != (i % 3 == 0 ? "Sigmoid" : "Tanh")) return false;
  for (size_t i : {3, 5, 6})
    if (c.has(i) && c.x(i).dtype() != f32) return false;
  return true;
}

void recurrent(OpContext& c, Kind kind) {
  int64_t gates = kind == Kind::RNN ? 1 : kind == Kind::GRU ? 3 : 4;
  Tensor x = c.x(0);
  const Tensor &W = c.x(1), &R = c.x(2);
  int64_t layout = c.attr_i("layout", 0);
  if (layout) x = x.transpose(0, 1);  // -> [seq, batch, input]
  std::string dir = c.attr_s("direction", "forward");
  int64_t dirs = dir == "bidirectional" ? 2 : 1;
  int64_t H = c.attr_i("hidden_size", R.size(-1));
  int64_t T = x.size(0), B = x.size(1);
  c.check(W.dim() == 3 && W.size(0) == dirs && W.size(1) == gates * H, "W must be [dirs, gates*hidden, input]");
  if (c.has(4)) {
    for (int64_t l : c.ints_in(4)) c.check(l == T, "varying sequence_lens are not supported");
  }
  double clip = c.attr_f("clip", 0.0f);
  bool has_clip = c.has_attr("clip");
  std::vector<std::string> defs = kind == Kind::RNN   ? std::vector<std::string>{"Tanh"}
                                  : kind == Kind::GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  auto acts = activations(c, defs, dirs);
  size_t per = defs.size();
  bool lbr = c.attr_i("linear_before_reset", 0) != 0;
  bool input_forget = c.attr_i("input_forget", 0) != 0;
  auto opts = TensorOptions{.dtype = x.dtype(), .device = x.device()};
  std::vector<Tensor> ys, hs, cs;
  const bool fused = kind == Kind::LSTM && lstm_fusable(c, acts, has_clip, input_forget);
  for (int64_t d = 0; d < dirs && fused; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    auto state = [&](size_t i) {
      if (!c.has(i)) return Tensor{};
      Tensor s0 = c.x(i);
      if (layout) s0 = s0.transpose(0, 1);
      return s0.select(0, d);
    };
    Tensor Y = empty({T, B, H}, opts);
    auto [h, cell] = lstm_fused(x, W.select(0, d), R.select(0, d), c.has(3) ? c.x(3).select(0, d) : Tensor{}, state(5),
                                state(6), reverse, Y);
    ys.push_back(Y);
    hs.push_back(h);
    cs.push_back(cell);
  }
  for (int64_t d = 0; d < dirs && !fused; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    Tensor w = W.select(0, d), rr = R.select(0, d);
    Tensor wb = zeros({gates * H}, opts), rb = zeros({gates * H}, opts);
    if (c.has(3)) {
      Tensor b = c.x(3).select(0, d);
      wb = b.narrow(0, 0, gates * H);
      rb = b.narrow(0, gates * H, gates * H);
    }
    Tensor h = c.has(5) ? c.x(5) : zeros({dirs, B, H}, opts);
    if (c.has(5) && layout) h = h.transpose(0, 1);
    h = h.select(0, d);
    Tensor cell;
    Tensor p;
    if (kind == Kind::LSTM) {
      cell = c.has(6) ? c.x(6) : zeros({dirs, B, H}, opts);
      if (c.has(6) && layout) cell = cell.transpose(0, 1);
      cell = cell.select(0, d);
      p = c.has(7) ? c.x(7).select(0, d) : zeros({3 * H}, opts);
    }
    const Act* a = &acts[static_cast<size_t>(d) * per];
    auto clipf = [&](const Tensor& t) { return has_clip ? clamp(t, -clip, clip) : t; };
    // Input projections for all steps at once: [T, B, gates*H].
    Tensor xw = matmul(x, w.t()) + wb;
    std::vector<Tensor> steps(static_cast<size_t>(T));
    for (int64_t s = 0; s < T; ++s) {
      int64_t t = reverse ? T - 1 - s : s;
      Tensor xt = xw.select(0, t);
      if (kind == Kind::RNN) {
        h = a[0](clipf(xt + matmul(h, rr.t()) + rb));
      } else if (kind == Kind::GRU) {
        Tensor rz = rr.narrow(0, 0, H), rr_ = rr.narrow(0, H, H), rh = rr.narrow(0, 2 * H, H);
        Tensor z = a[0](clipf(xt.narrow(1, 0, H) + matmul(h, rz.t()) + rb.narrow(0, 0, H)));
        Tensor r = a[0](clipf(xt.narrow(1, H, H) + matmul(h, rr_.t()) + rb.narrow(0, H, H)));
        Tensor hh;
        if (lbr)
          hh = a[1](clipf(xt.narrow(1, 2 * H, H) + r * (matmul(h, rh.t()) + rb.narrow(0, 2 * H, H))));
        else
          hh = a[1](clipf(xt.narrow(1, 2 * H, H) + matmul(r * h, rh.t()) + rb.narrow(0, 2 * H, H)));
        h = (1.0 - z) * hh + z * h;
      } else {
        Tensor g = xt + matmul(h, rr.t()) + rb;  // gates i, o, f, c
        Tensor gi = g.narrow(1, 0, H) + p.narrow(0, 0, H) * cell;
        Tensor gf = g.narrow(1, 2 * H, H) + p.narrow(0, 2 * H, H) * cell;
        Tensor i = a[0](clipf(gi));
        Tensor f = input_forget ? 1.0 - i : a[0](clipf(gf));
        Tensor ct = a[1](clipf(g.narrow(1, 3 * H, H)));
        cell = f * cell + i * ct;
        Tensor o = a[0](clipf(g.narrow(1, H, H) + p.narrow(0, H, H) * cell));
        h = o * a[2](cell);
      }
      steps[static_cast<size_t>(t)] = h;
    }
    ys.push_back(stack(steps, 0));  // [T, B, H]
    hs.push_back(h);
    if (kind == Kind::LSTM) cs.push_back(cell);
  }
  // [T, dirs, B, H], [dirs, B, H] (one direction: views, no copies).
  Tensor Y = dirs == 1 ? ys[0].unsqueeze(1) : stack(ys, 1);
  Tensor Yh = dirs == 1 ? hs[0].unsqueeze(0) : stack(hs, 0);
  Tensor Yc = kind != Kind::LSTM ? Tensor{} : dirs == 1 ? cs[0].unsqueeze(0) : stack(cs, 0);
  if (layout) {
    Y = Y.permute({2, 0, 1, 3}).contiguous();
    Yh = Yh.transpose(0, 1).contiguous();
    if (Yc.defined()) Yc = Yc.transpose(0, 1).contiguous();
  }
  c.set(0, Y);
  c.set(1, Yh);
  if (kind == Kind::LSTM) c.set(2, Yc);
}

}  // namespace

void register_recurrent(Registry& r) {
  r["RNN"] = [](OpContext& c) { recurrent(c, Kind::RNN); };
  r["GRU"] = [](OpContext& c) { recurrent(c, Kind::GRU); };
  r["LSTM"] = [](OpContext& c) { recurrent(c, Kind::LSTM); };
}

}  // namespace kiln::onnx
