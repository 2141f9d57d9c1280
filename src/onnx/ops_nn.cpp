// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX neural-network ops: Conv, ConvTranspose, MaxPool, AveragePool, Global*Pool, LpPool,
// MaxUnpool, BatchNormalization, InstanceNormalization, LayerNormalization, RMSNormalization, GroupNormalization,
// LRN, MeanVarianceNormalization, Gemm, MatMul. Asymmetric and auto pads become explicit pads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/parallel.h"
#include "ir/attrs.h"
#include "kiln/autodiff.h"
#include "kiln/matmul.h"
#include "kiln/nn/functional/conv.h"
#include "kiln/nn/functional/norm.h"
#include "kiln/nn/functional/pool.h"
#include "onnx/ops.h"
#include "ops/conv_epilogue.h"
#include "ops/dispatch.h"
#include "ops/prepared.h"

namespace kiln::onnx {

namespace F = kiln::nn::functional;
using detail::keep_prepared;
using detail::matmul_op;
using detail::run_prepared;

namespace {

struct Window {
  Dims k, s, d, lo, hi;
};

/// The integer-list attribute `name` of c's node as Dims (empty when absent), without copying it
/// through a std::vector: this runs for every conv and pool call of the run-time path.
Dims attr_dims(const OpContext& c, std::string_view name) {
  const proto::AttrP* a = c.node.attr(name);
  return a ? Dims(a->ints.begin(), a->ints.end()) : Dims{};
}

// Kernel, strides, dilations and begin/end pads of a conv or pool over n spatial dims.
Window window(const OpContext& c, const Tensor& x, int64_t n, Dims k) {
  Window w;
  w.k = std::move(k);
  w.s = attr_dims(c, "strides");
  w.d = attr_dims(c, "dilations");
  if (w.s.empty()) w.s.resize(n, 1);
  if (w.d.empty()) w.d.resize(n, 1);
  c.check(static_cast<int64_t>(w.k.size()) == n && static_cast<int64_t>(w.s.size()) == n &&
              static_cast<int64_t>(w.d.size()) == n,
          "kernel_shape/strides/dilations must have one value per spatial dim");
  for (int64_t i = 0; i < n; ++i) c.check(w.s[i] > 0 && w.d[i] > 0 && w.k[i] > 0, "bad kernel/stride/dilation");
  const proto::AttrP* apa = c.node.attr("auto_pad");
  const std::string_view ap = apa ? std::string_view(apa->s) : std::string_view("NOTSET");
  const Dims pads = attr_dims(c, "pads");
  w.lo.resize(n, 0);
  w.hi.resize(n, 0);
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (int64_t i = 0; i < n; ++i) {
      int64_t in = x.size(2 + i);
      int64_t out = (in + w.s[i] - 1) / w.s[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.s[i] + (w.k[i] - 1) * w.d[i] + 1 - in);
      w.lo[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.hi[i] = total - w.lo[i];
    }
  } else if (ap == "NOTSET" || ap.empty()) {
    if (!pads.empty()) {
      c.check(static_cast<int64_t>(pads.size()) == 2 * n, "pads must have 2 values per spatial dim");
      for (int64_t i = 0; i < n; ++i) {
        w.lo[i] = pads[i];
        w.hi[i] = pads[i + n];
      }
    }
  } else {
    c.check(ap == "VALID", "unknown auto_pad '" + std::string(ap) + "'");
  }
  return w;
}

Tensor pad_spatial(const Tensor& x, const Window& w, double value) {
  Shape kp;
  bool any = false;
  for (size_t i = w.lo.size(); i-- > 0;) {
    kp.push_back(w.lo[i]);
    kp.push_back(w.hi[i]);
    any = any || w.lo[i] || w.hi[i];
  }
  return any ? pad(x, kp, "constant", value) : x;
}

Dims kernel_from(const OpContext& c, const Tensor* weight, int64_t n) {
  Dims k = attr_dims(c, "kernel_shape");
  if (k.empty() && weight)
    for (int64_t i = 0; i < n; ++i) k.push_back(weight->size(2 + i));
  return k;
}

Tensor conv_nd(const Tensor& x, const Tensor& w, const Tensor& b, const F::ConvOptions& o, int64_t n,
               const OpContext& c) {
  if (n == 1) return F::conv1d(x, w, b, o);
  if (n == 2) return F::conv2d(x, w, b, o);
  if (n == 3) return F::conv3d(x, w, b, o);
  c.fail("only 1 to 3 spatial dims are supported");
}

Tensor channel_view(const Tensor& v, int64_t rank) {
  Shape s(rank - 1, 1);
  s[0] = v.numel();
  return v.reshape(s);
}

// Pooling with Kiln's built-in (symmetric, small) padding when it applies, else explicit pads.
bool symmetric_small(const Window& w) {
  for (size_t i = 0; i < w.k.size(); ++i)
    if (w.lo[i] != w.hi[i] || w.lo[i] > w.k[i] / 2) return false;
  return true;
}

Tensor global_offsets(const Tensor& idx, const Tensor& x) {
  // ONNX MaxPool indices index the flattened [N, C, *spatial] input.
  int64_t plane = 1;
  for (int64_t i = 2; i < x.dim(); ++i) plane *= x.size(i);
  Shape s(idx.dim(), 1);
  s[0] = x.size(0);
  s[1] = x.size(1);
  Tensor base = arange(x.size(0) * x.size(1), i64, x.device()).reshape(s) * plane;
  return idx + base;
}

#if defined(__GNUC__) && !defined(__clang__)
#define KILN_NO_TRAP __attribute__((optimize("no-trapping-math")))  // lets GCC vectorize selects
#else
#define KILN_NO_TRAP
#endif
// Also compiled for AVX-512 / AVX2 (picked at run time).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KILN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_CLONES
#endif

/// m[i] = max(m[i], r[i]) with NaN propagating (a NaN in r wins; a NaN in m stays); branch-free
/// (bitwise or, no short-circuit), so it vectorizes.
KILN_CLONES KILN_NO_TRAP void max_into(float* __restrict m, const float* __restrict r, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const bool take = (r[i] > m[i]) | (r[i] != r[i]);
    m[i] = take ? r[i] : m[i];
  }
}

// MaxPool over 2 spatial dims straight on the host (f32 CPU contiguous, dilation 1, symmetric
// pads of at most half the window, floor mode, no indices). Per output row: the max of the
// window's input rows into a row padded with -inf, the max over each kw-wide run (kw shifted
// vector passes), then every sw-th of those. False when it does not apply.
bool max_pool2d_direct(OpContext& c, const Tensor& x, const Window& w, bool ceil_mode) {
  if (x.dim() != 4 || ceil_mode || !host_f32_ok(x) || x.numel() == 0) return false;
  for (int i = 0; i < 2; ++i)
    if (w.d[i] != 1 || w.lo[i] != w.hi[i] || w.lo[i] > w.k[i] / 2) return false;
  const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t kh = w.k[0], kw = w.k[1], sh = w.s[0], sw = w.s[1], ph = w.lo[0], pw = w.lo[1];
  const int64_t Ho = (H + 2 * ph - kh) / sh + 1, Wo = (W + 2 * pw - kw) / sw + 1;
  if (Ho <= 0 || Wo <= 0 || kh > H + 2 * ph || kw > W + 2 * pw) return false;
  Tensor y = empty({x.size(0), x.size(1), Ho, Wo}, {.dtype = f32, .device = x.device()});
  const float* xp = host_f32(x);
  float* yp = host_f32(y);
  const int64_t Wp = W + 2 * pw, Wr = Wp - kw + 1;  // padded row; runs of kw
  parallel_for(P * Ho, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, kh * W)), [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(Wp), -INFINITY), run(static_cast<size_t>(Wr));
    for (int64_t pr = b; pr < e; ++pr) {
      const int64_t p = pr / Ho, oy = pr % Ho;
      const int64_t y0 = std::max<int64_t>(0, oy * sh - ph), y1 = std::min<int64_t>(H, oy * sh - ph + kh);
      const float* xs = xp + p * H * W;
      std::copy(xs + y0 * W, xs + y0 * W + W, row.begin() + pw);
      for (int64_t iy = y0 + 1; iy < y1; ++iy) max_into(row.data() + pw, xs + iy * W, W);
      std::copy(row.begin(), row.begin() + Wr, run.begin());
      for (int64_t kx = 1; kx < kw; ++kx) max_into(run.data(), row.data() + kx, Wr);
      float* dst = yp + pr * Wo;
      for (int64_t ox = 0; ox < Wo; ++ox) dst[ox] = run[ox * sw];
    }
  });
  c.set(0, y);
  return true;
}

}  // namespace

Tensor add_residual(const OpContext& c, const Tensor& y) {
  const Tensor& r = c.x(static_cast<size_t>(c.res));
  return c.res_first ? keep_dtype(add(r, y), r.dtype()) : keep_dtype(add(y, r), y.dtype());
}

namespace {

/// The Conv op (ops.def) of x by wt with the given epilogue, built here and dispatched as it
/// stands: what nn::functional::conv_with_epilogue issues, without its argument parsing (a
/// convolution step of a small model costs little more than its op). Null when an operand or
/// the geometry is not the plain case (contiguous operands of one float dtype and device, no
/// gradient to record, sizes that fit); the caller then takes the functional path, which also
/// raises the errors. With `keep`, whose inputs x, wt, b and res are (c.in[0], [1], [2] and
/// [c.res]), the op is kept in keep->prep for the next run (Note [Prepared steps]).
Tensor conv_op(const Tensor& x, const Tensor& wt, const Tensor& b, const Window& w, bool sym, int64_t groups,
               const Tensor& res, int act, double lo, double hi, const Window* pool, const OpContext* keep) {
  const int64_t n = x.dim() - 2;
  const DType dt = x.dtype();
  const Device& dev = x.device();
  const Tensor* ops[] = {&x, &wt, &b, &res};
  for (const Tensor* t : ops)
    if (t->defined() &&
        (t->dtype() != dt || !t->is_contiguous() || t->device() != dev || (t->requires_grad() && grad_enabled())))
      return {};
  const int64_t O = wt.size(0);
  if ((dt != f32 && dt != f64) || groups < 1 || O % groups != 0 || x.size(1) != wt.size(1) * groups ||
      (b.defined() && (b.dim() != 1 || b.size(0) != O)) || (pool && (n != 2 || res.defined())))
    return {};
  Shape out{x.size(0), O};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = sym ? w.lo[i] : 0, eff = w.d[i] * (wt.size(2 + i) - 1) + 1;
    if (x.size(2 + i) + 2 * p < eff) return {};
    out.push_back(ir::conv_out_size(x.size(2 + i), wt.size(2 + i), w.s[i], p, w.d[i]));
  }
  if (res.defined() && res.shape() != out) return {};
  for (size_t i = 0; pool && i < 2; ++i)
    if (out[2 + i] + 2 * pool->lo[i] < pool->k[i]) return {};
  // ir::ConvAttrs::encode's layout (ops.def), written here without building the attribute record.
  ir::Op op;
  op.kind = ir::OpKind::Conv;
  auto& ints = op.attrs.ints;
  ints.push_back(groups);
  ints.push_back(n);
  for (int64_t i = 0; i < n; ++i) ints.push_back(w.s[i]);
  for (int64_t i = 0; i < n; ++i) ints.push_back(sym ? w.lo[i] : 0);
  for (int64_t i = 0; i < n; ++i) ints.push_back(w.d[i]);
  const int64_t bits = (res.defined() ? ir::kConvResidual : 0) | (act == 1 ? ir::kConvRelu : 0) |
                       (act == 2 ? ir::kConvClamp : 0) | (pool ? ir::kConvMaxPool : 0);
  if (bits) ints.push_back(bits);
  if (pool)
    for (const Dims* d : {&pool->k, &pool->s, &pool->lo})
      for (size_t i = 0; i < 2; ++i) ints.push_back((*d)[i]);
  if (act == 2) {
    op.attrs.reals.push_back(std::min(lo, hi));  // lo > hi gives hi everywhere (kiln::clamp)
    op.attrs.reals.push_back(hi);
  }
  static const char* const names[] = {"conv1d", "conv2d", "conv3d"};
  const char* api = names[n - 1];
  Tensor y;
  if (b.defined())
    y = res.defined() ? detail::run(api, op, dev, {x, wt, b, res})[0] : detail::run1(api, op, {x, wt, b});
  else
    y = res.defined() ? detail::run(api, op, dev, {x, wt, res})[0] : detail::run1(api, op, {x, wt});
  if (keep && keep->prep) {
    int src[4] = {0, 1}, k = 2;
    if (b.defined()) src[k++] = 2;
    if (res.defined()) src[k++] = keep->res;
    keep_prepared(keep->prep, api, op, dev, keep->in, std::span<const int>(src, static_cast<size_t>(k)), y.shape());
  }
  return y;
}

/// Conv of c's node (inputs x, w [, b]) with what the plan fused into it: its residual Add
/// (c.res), its activation (c.post) and, when `pool` is given, a MaxPool after them (explicit,
/// symmetric pads of at most half the window, dilation 1, floor mode, values only; the plan
/// fuses no other). One Conv op with the IR's epilogue (ops.def) where it takes them, which a
/// backend without that capability receives as the op sequence (src/ops/composites.cpp); else
/// the ops one by one (a residual that broadcasts or of another dtype, inputs that record a
/// gradient, a pool window larger than the convolution's output).
Tensor conv_fused(const OpContext& c, const Window* pool) {
  if (Tensor y = run_prepared(c.prep, c.in); y.defined()) return y;
  const Tensor &x = c.x(0), &wt = c.x(1);
  const int64_t n = x.dim() - 2;
  c.check(n >= 1 && n <= 3 && wt.dim() == x.dim(), "needs [N, C, *spatial] input and matching weight");
  const Window w = window(c, x, n, kernel_from(c, &wt, n));
  const int64_t groups = c.attr_i("group", 1);
  bool sym = true;
  for (int64_t i = 0; i < n; ++i) sym = sym && w.lo[i] == w.hi[i];
  const Tensor xi = sym ? x : pad_spatial(x, w, 0);
  const Tensor b = c.has(2) ? c.x(2) : Tensor{};
  const Tensor res = c.res >= 0 ? c.x(static_cast<size_t>(c.res)) : Tensor{};
  const int act = c.post == 1 ? 1 : c.post == 2 ? 2 : 0;
  if (Tensor y = conv_op(xi, wt, b, w, sym, groups, res, act, c.post_lo, c.post_hi, pool, sym ? &c : nullptr);
      y.defined())
    return y;
  F::ConvOptions o;
  o.stride = w.s;
  o.dilation = w.d;
  o.groups = groups;
  if (sym) o.padding = w.lo;
  const bool epilogue = act != 0 || res.defined() || pool;
  bool fusable = epilogue && (x.dtype() == f32 || x.dtype() == f64) && wt.dtype() == x.dtype() &&
                 (!b.defined() || b.dtype() == x.dtype()) && (!res.defined() || res.dtype() == x.dtype()) &&
                 (!pool || (n == 2 && !res.defined()));
  if (fusable && grad_enabled())
    for (const Tensor* t : {&x, &wt, &b, &res}) fusable = fusable && !(t->defined() && t->requires_grad());
  if (fusable) {
    F::ConvEpilogue e;
    e.residual = res;
    e.act = act;
    e.lo = c.post_lo;
    e.hi = c.post_hi;
    if (pool) {
      e.pool_kernel = pool->k;
      e.pool_stride = pool->s;
      e.pool_padding = pool->lo;
    }
    Tensor y = F::conv_with_epilogue(n, xi, wt, b, o, e);
    if (y.defined()) return y;
  }
  Tensor y = conv_nd(xi, wt, b, o, n, c);
  if (res.defined()) y = add_residual(c, y);
  if (act == 1) y = relu(y);
  if (act == 2) y = clamp(y, c.post_lo, c.post_hi);
  return y;
}

}  // namespace

void run_conv_pair(OpContext& c, const proto::NodeP& second, int post2, float lo2, float hi2) {
  // Inputs: x, wa, ba (or undefined), wb, bb (or undefined) [, the second's residual (c.res)].
  // Two Conv ops; on the CPU the second reads the blocked form the first kept of its output
  // (the CPU convolution's Note [Kept blocked outputs]). Each has its prepared slot (c.prep[0]
  // and [1]), whose inputs are numbered as ca's and cb's below.
  const Tensor ba = c.has(2) ? c.x(2) : Tensor{}, bb = c.has(4) ? c.x(4) : Tensor{};
  PreparedOp* const pb = c.prep ? c.prep + 1 : nullptr;
  if (Tensor ya = run_prepared(c.prep, std::span<const Tensor>(c.in.data(), std::min<size_t>(3, c.in.size())));
      ya.defined() && c.has(3)) {
    const Tensor in_b[4] = {std::move(ya), c.in[3], bb, c.res >= 0 ? c.x(static_cast<size_t>(c.res)) : Tensor{}};
    if (Tensor y = run_prepared(pb, in_b); y.defined()) return c.set(0, std::move(y));
    OpContext cb{second, c.opset, c.device, {in_b[0], in_b[1], bb}, {Tensor{}}, {}, post2, lo2, hi2};
    cb.prep = pb;
    if (c.res >= 0) {
      cb.in.push_back(in_b[3]);
      cb.res = 3;
      cb.res_first = c.res_first;
    }
    return c.set(0, conv_fused(cb, nullptr));
  }
  OpContext ca{c.node, c.opset, c.device, {c.x(0), c.x(1), ba}, {Tensor{}}, {}, c.post, c.post_lo, c.post_hi};
  ca.prep = c.prep;
  OpContext cb{second, c.opset, c.device, {conv_fused(ca, nullptr), c.x(3), bb}, {Tensor{}}, {}, post2, lo2, hi2};
  cb.prep = pb;
  if (c.res >= 0) {
    cb.in.push_back(c.x(static_cast<size_t>(c.res)));
    cb.res = 3;
    cb.res_first = c.res_first;
  }
  c.set(0, conv_fused(cb, nullptr));
}

void run_conv_pool(OpContext& c, const proto::NodeP& pool) {
  // c.prep keeps only the one Conv op with the pool in its epilogue: the whole step.
  if (Tensor y = run_prepared(c.prep, c.in); y.defined()) return c.set(0, std::move(y));
  const Tensor& x = c.x(0);
  OpContext cp{pool, c.opset, c.device, {Tensor{}}, {Tensor{}}, {}};
  if (x.dim() == 4 && c.res < 0 && cp.attr_i("ceil_mode", 0) == 0) {
    // The pool's window from its attributes (the plan fuses only explicit pads, which do not
    // depend on the input size).
    const Window wp = window(cp, x, 2, kernel_from(cp, nullptr, 2));
    bool ok = wp.k.size() == 2;
    for (size_t i = 0; ok && i < 2; ++i) ok = wp.d[i] == 1 && wp.lo[i] == wp.hi[i] && 2 * wp.lo[i] <= wp.k[i];
    if (ok) {
      c.set(0, conv_fused(c, &wp));
      return;
    }
  }
  c.prep = nullptr;  // the Conv alone is not the step's result
  cp.in[0] = conv_fused(c, nullptr);
  registry().find("MaxPool")->run(cp);
  c.set(0, cp.out[0]);
}

void register_nn(Registry& r) {
  r["Conv"] = [](OpContext& c) { c.set(0, conv_fused(c, nullptr)); };
  r["ConvTranspose"] = [](OpContext& c) {
    const Tensor &x = c.x(0), &wt = c.x(1);
    int64_t n = x.dim() - 2;
    c.check(n >= 1 && n <= 3 && wt.dim() == x.dim(), "needs [N, C, *spatial] input and matching weight");
    Dims k = kernel_from(c, &wt, n);
    std::vector<int64_t> s = c.attr_ints("strides"), d = c.attr_ints("dilations"), op = c.attr_ints("output_padding"),
                         os = c.attr_ints("output_shape"), pads = c.attr_ints("pads");
    if (s.empty()) s.assign(n, 1);
    if (d.empty()) d.assign(n, 1);
    if (op.empty()) op.assign(n, 0);
    std::string ap = c.attr_s("auto_pad", "NOTSET");
    std::vector<int64_t> lo(n, 0), hi(n, 0);
    if (!pads.empty() && ap == "NOTSET") {
      c.check(static_cast<int64_t>(pads.size()) == 2 * n, "pads must have 2 values per spatial dim");
      for (int64_t i = 0; i < n; ++i) {
        lo[i] = pads[i];
        hi[i] = pads[i + n];
      }
    }
    if (os.size() > static_cast<size_t>(n)) os.erase(os.begin(), os.end() - n);
    if (!os.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      for (int64_t i = 0; i < n; ++i) {
        int64_t in = x.size(2 + i);
        int64_t target = !os.empty() ? os[i] : in * s[i];
        int64_t total = s[i] * (in - 1) + op[i] + ((k[i] - 1) * d[i] + 1) - target;
        int64_t half = static_cast<int64_t>(std::floor(static_cast<double>(total) / 2));  // Python's //
        if (ap == "SAME_UPPER") {
          lo[i] = half;
          hi[i] = total - half;
        } else {
          lo[i] = total - half;
          hi[i] = half;
        }
      }
    }
    F::ConvTransposeOptions o;
    o.stride = to_dims(s);
    o.dilation = to_dims(d);
    o.groups = c.attr_i("group", 1);
    Tensor y;
    if (n == 1)
      y = F::conv_transpose1d(x, wt, {}, o);
    else if (n == 2)
      y = F::conv_transpose2d(x, wt, {}, o);
    else
      y = F::conv_transpose3d(x, wt, {}, o);
    // Full output, then crop the pads and add output_padding at the end.
    for (int64_t i = 0; i < n; ++i) {
      int64_t ax = 2 + i;
      int64_t full = y.size(ax);
      int64_t want = full + op[i] - lo[i] - hi[i];
      c.check(want >= 0, "negative output size");
      if (lo[i] < 0 || hi[i] - op[i] < 0) {
        Shape kp(2 * (y.dim() - 1 - ax), 0);
        kp.push_back(std::max<int64_t>(0, -lo[i]));
        kp.push_back(std::max<int64_t>(0, op[i] - hi[i]));
        y = pad(y, kp);
        int64_t start = std::max<int64_t>(0, lo[i]);
        y = y.narrow(ax, start, want);
      } else {
        y = y.narrow(ax, lo[i], want);
      }
    }
    if (c.has(2)) y = y + channel_view(c.x(2), y.dim());
    c.set(0, y.contiguous());
  };
  r["MaxPool"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t n = x.dim() - 2;
    c.check(n >= 1 && n <= 3, "needs [N, C, *spatial] input with 1 to 3 spatial dims");
    Window w = window(c, x, n, kernel_from(c, nullptr, n));
    F::MaxPoolOptions o;
    o.stride = w.s;
    o.dilation = w.d;
    o.ceil_mode = c.attr_i("ceil_mode", 0) != 0;
    Tensor xi = x;
    bool want_idx = c.out.size() > 1 && !c.node.output[1].empty();
    // Width stride 2 with a window 2 or 3 wide: the CPU kernel's fast path (whole rows in SIMD)
    // is faster; other windows run here.
    const bool kernel_fast = n == 2 && w.s[1] == 2 && (w.k[1] == 2 || w.k[1] == 3) && w.d[1] == 1;
    if (!want_idx && n == 2 && !kernel_fast && max_pool2d_direct(c, x, w, o.ceil_mode)) return;
    if (symmetric_small(w)) {
      o.padding = w.lo;
    } else {
      c.check(!want_idx, "indices with asymmetric or large pads are not supported");
      double lowest = is_floating(x.dtype()) ? -INFINITY : static_cast<double>(std::numeric_limits<int64_t>::min());
      xi = pad_spatial(x, w, lowest);
    }
    Dims k = w.k;
    if (!want_idx) {
      Tensor y = n == 1 ? F::max_pool1d(xi, k, o) : n == 2 ? F::max_pool2d(xi, k, o) : F::max_pool3d(xi, k, o);
      c.set(0, y);
      return;
    }
    auto [y, idx] = n == 1   ? F::max_pool1d_with_indices(xi, k, o)
                    : n == 2 ? F::max_pool2d_with_indices(xi, k, o)
                             : F::max_pool3d_with_indices(xi, k, o);
    if (c.attr_i("storage_order", 0) == 1) {
      c.check(n == 2, "storage_order 1 needs 2 spatial dims");
      int64_t H = x.size(2), W = x.size(3);
      idx = (idx % W) * H + div(idx, W, "floor");
    }
    c.set(0, y);
    c.set(1, global_offsets(idx, x));
  };
  r["AveragePool"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t n = x.dim() - 2;
    c.check(n >= 1 && n <= 3, "needs [N, C, *spatial] input with 1 to 3 spatial dims");
    Window w = window(c, x, n, kernel_from(c, nullptr, n));
    for (int64_t dd : w.d) c.check(dd == 1, "dilations are not supported for AveragePool");
    bool include = c.attr_i("count_include_pad", 0) != 0;
    F::AvgPoolOptions o;
    o.stride = w.s;
    o.ceil_mode = c.attr_i("ceil_mode", 0) != 0;
    o.count_include_pad = include;
    Dims k = w.k;
    auto pool = [&](const Tensor& t) {
      return n == 1 ? F::avg_pool1d(t, k, o) : n == 2 ? F::avg_pool2d(t, k, o) : F::avg_pool3d(t, k, o);
    };
    if (symmetric_small(w)) {
      o.padding = w.lo;
      c.set(0, pool(x));
      return;
    }
    Tensor xp = pad_spatial(x, w, 0);
    if (include) {
      c.set(0, pool(xp));
      return;
    }
    Tensor mask = pad_spatial(ones(x.shape(), {.dtype = x.dtype(), .device = x.device()}), w, 0);
    c.set(0, pool(xp) / pool(mask));
  };
  r["GlobalAveragePool"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Dims d;
    for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
    c.set(0, mean(x, d, true));
  };
  r["GlobalMaxPool"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Dims d;
    for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
    c.set(0, amax(x, d, true));
  };
  r["MaxUnpool"] = [](OpContext& c) {
    const Tensor &x = c.x(0), &idx = c.x(1);
    int64_t n = x.dim() - 2;
    std::vector<int64_t> k = c.attr_ints("kernel_shape"), s = c.attr_ints("strides"), p = c.attr_ints("pads");
    if (s.empty()) s.assign(n, 1);
    if (p.empty()) p.assign(2 * n, 0);
    c.check(static_cast<int64_t>(k.size()) == n, "kernel_shape must have one value per spatial dim");
    Shape out{x.size(0), x.size(1)};
    for (int64_t i = 0; i < n; ++i) out.push_back((x.size(2 + i) - 1) * s[i] + k[i] - p[i] - p[i + n]);
    // Indices address the default output shape; a given output_shape pads it at the end.
    Tensor flat = zeros({shape_numel(out)}, {.dtype = x.dtype(), .device = x.device()});
    Tensor y = flat.scatter(0, idx.reshape({-1}), x.reshape({-1})).reshape(out);
    if (c.has(2)) {
      Shape want = to_shape(c.ints_in(2));
      c.check(static_cast<int64_t>(want.size()) == x.dim(), "output_shape must have the input's rank");
      Shape kp;
      for (int64_t i = x.dim() - 1; i >= 2; --i) {
        c.check(want[i] >= out[i], "output_shape smaller than the default output");
        kp.push_back(0);
        kp.push_back(want[i] - out[i]);
      }
      y = pad(y, kp);
    }
    c.set(0, y);
  };
  r["LpPool"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t n = x.dim() - 2;
    double p = static_cast<double>(c.attr_i("p", 2));
    Window w = window(c, x, n, kernel_from(c, nullptr, n));
    F::AvgPoolOptions o;
    o.stride = w.s;
    o.ceil_mode = c.attr_i("ceil_mode", 0) != 0;
    Tensor xp = pad_spatial(pow(abs(x), p), w, 0);
    Dims k = w.k;
    int64_t ks = 1;
    for (int64_t v : w.k) ks *= v;
    Tensor a = n == 1 ? F::avg_pool1d(xp, k, o) : n == 2 ? F::avg_pool2d(xp, k, o) : F::avg_pool3d(xp, k, o);
    c.set(0, pow(a * static_cast<double>(ks), 1.0 / p));
  };
  r["BatchNormalization"] = [](OpContext& c) {
    const Tensor &x = c.x(0), &scale = c.x(1), &b = c.x(2), &m = c.x(3), &v = c.x(4);
    double eps = c.attr_f("epsilon", 1e-5f);
    int64_t rank = x.dim();
    bool training = c.opset >= 14 && c.attr_i("training_mode", 0) != 0;
    if (!training) {
      Tensor y = (x - channel_view(m, rank)) / sqrt(channel_view(v, rank) + eps) * channel_view(scale, rank) +
                 channel_view(b, rank);
      c.set(0, y.to(x.dtype()));
      return;
    }
    double mom = c.attr_f("momentum", 0.9f);
    Dims d{0};
    for (int64_t i = 2; i < rank; ++i) d.push_back(i);
    Tensor bm = mean(x, d), bv = var(x, d, 0);
    Tensor y = (x - channel_view(bm, rank)) / sqrt(channel_view(bv, rank) + eps) * channel_view(scale, rank) +
               channel_view(b, rank);
    c.set(0, y);
    c.set(1, m * mom + bm * (1 - mom));
    c.set(2, v * mom + bv * (1 - mom));
  };
  r["InstanceNormalization"] = [](OpContext& c) {
    const Tensor &x = c.x(0), &scale = c.x(1), &b = c.x(2);
    double eps = c.attr_f("epsilon", 1e-5f);
    Dims d;
    for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
    Tensor mu = mean(x, d, true), v = var(x, d, 0, true);
    c.set(0, (x - mu) / sqrt(v + eps) * channel_view(scale, x.dim()) + channel_view(b, x.dim()));
  };
  r["LayerNormalization"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t a = axis_of(c, c.attr_i("axis", -1), x.dim());
    double eps = c.attr_f("epsilon", 1e-5f);
    Shape ns(x.shape().begin() + a, x.shape().end());
    // The fused kernel when scale and bias have the normalised shape (no broadcasting).
    const bool fused = x.dtype() == f32 && c.x(1).dtype() == f32 && c.x(1).shape() == ns &&
                       (!c.has(2) || (c.x(2).dtype() == f32 && c.x(2).shape() == ns));
    if (fused) {
      const bool stats = (c.node.output.size() > 1 && !c.node.output[1].empty()) ||
                         (c.node.output.size() > 2 && !c.node.output[2].empty());
      if (!stats) {
        c.set(0, nn::functional::layer_norm(x, ns, c.x(1), c.has(2) ? c.x(2) : Tensor{}, eps));
        return;
      }
      auto r = nn::functional::native_layer_norm(x, ns, c.x(1), c.has(2) ? c.x(2) : Tensor{}, eps);
      c.set(0, r.output);
      c.set(1, r.mean);
      c.set(2, r.rstd);
      return;
    }
    Dims d;
    for (int64_t i = a; i < x.dim(); ++i) d.push_back(i);
    Tensor xf = x.dtype() == f64 ? x : x.to(f32);
    Tensor mu = mean(xf, d, true);
    Tensor v = mean(square(xf - mu), d, true);
    Tensor inv = rsqrt(v + eps);
    Tensor y = ((xf - mu) * inv).to(x.dtype()) * c.x(1);
    if (c.has(2)) y = y + c.x(2);
    c.set(0, y);
    c.set(1, mu);
    c.set(2, inv);
  };
  // opset 23: y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale, computed in f32
  // (stash_type 1) or f64 for f64 inputs, scale broadcast against x.
  r["RMSNormalization"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    const int64_t a = axis_of(c, c.attr_i("axis", -1), x.dim());
    const double eps = c.attr_f("epsilon", 1e-5f);
    Dims d;
    for (int64_t i = a; i < x.dim(); ++i) d.push_back(i);
    const Tensor xf = x.dtype() == f64 ? x : x.to(f32);
    c.set(0, (xf * rsqrt(mean(square(xf), d, true) + eps)).to(x.dtype()) * c.x(1));
  };
  r["GroupNormalization"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t g = c.attr_i("num_groups", 1);
    double eps = c.attr_f("epsilon", 1e-5f);
    Shape s{x.size(0), g, -1};
    Tensor xr = x.reshape(s);
    Tensor mu = mean(xr, {2}, true), v = var(xr, {2}, 0, true);
    Tensor y = ((xr - mu) / sqrt(v + eps)).reshape(x.shape());
    const Tensor &sc = c.x(1), &b = c.x(2);
    if (sc.numel() == x.size(1)) {
      y = y * channel_view(sc, x.dim()) + channel_view(b, x.dim());
    } else {  // opset 18: per-group scale and bias
      Tensor sg = sc.repeat_interleave(x.size(1) / g), bg = b.repeat_interleave(x.size(1) / g);
      y = y * channel_view(sg, x.dim()) + channel_view(bg, x.dim());
    }
    c.set(0, y);
  };
  r["LRN"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t size = c.attr_i("size", 1);
    double alpha = c.attr_f("alpha", 1e-4f), beta = c.attr_f("beta", 0.75f), bias = c.attr_f("bias", 1.0f);
    // ONNX window: floor((size-1)/2) before, ceil((size-1)/2) after.
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    Tensor sq = square(x);
    Shape kp(2 * (x.dim() - 2), 0);
    kp.push_back(before);
    kp.push_back(after);
    Tensor sp = pad(sq, kp);
    Tensor acc = zeros_like(x);
    for (int64_t i = 0; i < size; ++i) acc = acc + sp.narrow(1, i, x.size(1));
    c.set(0, x / pow(acc * (alpha / static_cast<double>(size)) + bias, beta));
  };
  r["MeanVarianceNormalization"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> axes = c.attr_ints("axes");
    if (axes.empty()) axes = {0, 2, 3};
    Dims d;
    for (int64_t a : axes) d.push_back(axis_of(c, a, x.dim()));
    Tensor mu = mean(x, d, true);
    Tensor v = mean(square(x - mu), d, true);
    c.set(0, (x - mu) / (sqrt(v) + 1e-9));
  };
  r["Gemm"] = [](OpContext& c) {
    if (Tensor y = run_prepared(c.prep, c.in); y.defined()) return c.set(0, std::move(y));
    Tensor a = c.x(0), b = c.x(1);
    const bool ta = c.attr_i("transA", 0) != 0, tb = c.attr_i("transB", 0) != 0;
    double alpha = c.attr_f("alpha", 1.0f), beta = c.attr_f("beta", 1.0f);
    if (ta) a = a.t();
    if (tb) b = b.t();
    // A + B C with a [N] or [1, N] C of the product's f32 / f64 dtype: one MatMul op onto C
    // (addmm), no separate Add.
    if (c.has(2) && alpha == 1.0 && beta == 1.0 && a.dim() == 2 && b.dim() == 2 && a.dtype() == b.dtype() &&
        (a.dtype() == f32 || a.dtype() == f64) && c.x(2).dtype() == a.dtype() && c.x(2).numel() == b.size(1) &&
        (c.x(2).dim() == 1 || (c.x(2).dim() == 2 && c.x(2).size(0) == 1))) {
      const Tensor bias = c.x(2).reshape({b.size(1)});
      // The MatMul op addmm issues; kept for the next run when the bias is a view of input 2
      // (matmul_op takes a and b as views).
      if (Tensor y = matmul_op(a, b, bias, c.x(2).is_contiguous() ? c.prep : nullptr, c.in); y.defined())
        return c.set(0, y);
      c.set(0, addmm(bias, a, b));
      return;
    }
    Tensor y = matmul(a, b);
    if (alpha != 1.0) y = y * alpha;
    if (c.has(2) && beta != 0) y = y + (beta == 1.0 ? c.x(2) : c.x(2) * beta);
    c.set(0, y.to(c.x(0).dtype()));
  };
  r["MatMul"] = [](OpContext& c) {
    if (Tensor y = run_prepared(c.prep, c.in); y.defined()) return c.set(0, std::move(y));
    const Tensor &a = c.x(0), &b = c.x(1);
    if (Tensor y = matmul_op(a, b, c.post == 3 ? c.x(2) : Tensor{}, c.prep, c.in); y.defined()) {
      c.set(0, y);
      return;
    }
    if (c.post != 3) {
      c.set(0, matmul(a, b));
      return;
    }
    // The bias the plan fused from a following Add (input 2, a constant [N]): one MatMul op that
    // accumulates onto it (linear by the transposed view of b) when the dtypes allow.
    const Tensor& bias = c.x(2);
    if (b.dim() == 2 && a.dim() >= 1 && bias.dim() == 1 && bias.size(0) == b.size(1) && a.dtype() == b.dtype() &&
        bias.dtype() == a.dtype() && (a.dtype() == f32 || a.dtype() == f64) && a.size(-1) == b.size(0)) {
      c.set(0, linear(a, b.t(), bias));
      return;
    }
    c.set(0, matmul(a, b) + bias);
  };

  // ---- code generation: ops with constant weights become nn modules -----------------------
  r.emit("Conv", [](EmitContext& e) {
    const Tensor *w = e.constant(1), *b = e.has(2) ? e.constant(2) : nullptr;
    if (!w || (e.has(2) && !b) || w->dim() < 3 || w->dim() > 5 || !is_floating(w->dtype())) return false;
    int64_t n = w->dim() - 2;
    std::string ap = e.attr_s("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID" && !ap.empty()) return false;
    std::vector<int64_t> k = e.attr_ints("kernel_shape"), s = e.attr_ints("strides"), d = e.attr_ints("dilations"),
                         pads = e.attr_ints("pads");
    for (int64_t i = 0; i < n; ++i)
      if (!k.empty() && k[i] != w->size(2 + i)) return false;
    if (s.empty()) s.assign(n, 1);
    if (d.empty()) d.assign(n, 1);
    std::vector<int64_t> p(n, 0);
    if (ap != "VALID" && !pads.empty()) {
      if (static_cast<int64_t>(pads.size()) != 2 * n) return false;
      for (int64_t i = 0; i < n; ++i) {
        if (pads[i] != pads[i + n]) return false;  // asymmetric: the generic path pads explicitly
        p[i] = pads[i];
      }
    }
    int64_t groups = e.attr_i("group", 1);
    std::vector<int64_t> ks(w->shape().begin() + 2, w->shape().end());
    std::string args = "{.in_channels = " + std::to_string(w->size(1) * groups) +
                       ", .out_channels = " + std::to_string(w->size(0)) + ", .kernel_size = kiln::Dims" +
                       int_list(ks) + ", .stride = kiln::Dims" + int_list(s) + ", .padding = kiln::Dims" + int_list(p) +
                       ", .dilation = kiln::Dims" + int_list(d) + ", .groups = " + std::to_string(groups) +
                       ", .bias = " + (b ? "true" : "false") + "}";
    std::vector<std::pair<std::string, Tensor>> st{{"weight", *w}};
    if (b) st.emplace_back("bias", *b);
    std::string m = e.add_module("kiln::nn::Conv" + std::to_string(n) + "d", args, st);
    e.assign(m + "(" + e.in(0) + ")");
    e.out_rank = {static_cast<int>(n + 2)};
    return true;
  });
  r.emit("ConvTranspose", [](EmitContext& e) {
    const Tensor *w = e.constant(1), *b = e.has(2) ? e.constant(2) : nullptr;
    if (!w || (e.has(2) && !b) || w->dim() < 3 || w->dim() > 5 || !is_floating(w->dtype())) return false;
    int64_t n = w->dim() - 2;
    std::string ap = e.attr_s("auto_pad", "NOTSET");
    if ((ap != "NOTSET" && !ap.empty()) || e.node.attr("output_shape")) return false;
    std::vector<int64_t> s = e.attr_ints("strides"), d = e.attr_ints("dilations"), pads = e.attr_ints("pads"),
                         op = e.attr_ints("output_padding"), k = e.attr_ints("kernel_shape");
    for (int64_t i = 0; i < n; ++i)
      if (!k.empty() && k[i] != w->size(2 + i)) return false;
    if (s.empty()) s.assign(n, 1);
    if (d.empty()) d.assign(n, 1);
    if (op.empty()) op.assign(n, 0);
    std::vector<int64_t> p(n, 0);
    if (!pads.empty()) {
      if (static_cast<int64_t>(pads.size()) != 2 * n) return false;
      for (int64_t i = 0; i < n; ++i) {
        if (pads[i] != pads[i + n]) return false;
        p[i] = pads[i];
      }
    }
    int64_t groups = e.attr_i("group", 1);
    std::vector<int64_t> ks(w->shape().begin() + 2, w->shape().end());
    std::string args = "{.in_channels = " + std::to_string(w->size(0)) +
                       ", .out_channels = " + std::to_string(w->size(1) * groups) + ", .kernel_size = kiln::Dims" +
                       int_list(ks) + ", .stride = kiln::Dims" + int_list(s) + ", .padding = kiln::Dims" + int_list(p) +
                       ", .output_padding = kiln::Dims" + int_list(op) + ", .groups = " + std::to_string(groups) +
                       ", .bias = " + (b ? "true" : "false") + ", .dilation = kiln::Dims" + int_list(d) + "}";
    std::vector<std::pair<std::string, Tensor>> st{{"weight", *w}};
    if (b) st.emplace_back("bias", *b);
    std::string m = e.add_module("kiln::nn::ConvTranspose" + std::to_string(n) + "d", args, st);
    e.assign(m + "(" + e.in(0) + ")");
    e.out_rank = {static_cast<int>(n + 2)};
    return true;
  });
  // Pools with a kernel_shape, explicit symmetric pads of at most half the kernel and no
  // indices output -> functional::max_pool / avg_pool (the run-time op's calls for them).
  auto pool_window = [](EmitContext& e, int64_t& n, std::string& args) {
    const std::vector<int64_t> k = e.attr_ints("kernel_shape");
    n = static_cast<int64_t>(k.size());
    const std::string ap = e.attr_s("auto_pad", "NOTSET");
    if (n < 1 || n > 3 || (e.rank[0] >= 0 && e.rank[0] != n + 2) || (ap != "NOTSET" && ap != "VALID" && !ap.empty()))
      return false;
    std::vector<int64_t> s = e.attr_ints("strides"), pads = e.attr_ints("pads"), p(k.size(), 0);
    if (s.empty()) s.assign(k.size(), 1);
    if (s.size() != k.size()) return false;
    if (ap != "VALID" && !pads.empty()) {
      if (pads.size() != 2 * k.size()) return false;
      for (size_t i = 0; i < k.size(); ++i) {
        if (pads[i] != pads[i + k.size()] || pads[i] > k[i] / 2) return false;
        p[i] = pads[i];
      }
    }
    for (size_t i = 0; i < k.size(); ++i)
      if (k[i] < 1 || s[i] < 1) return false;
    args =
        "kiln::Dims" + int_list(k) + ", {.stride = kiln::Dims" + int_list(s) + ", .padding = kiln::Dims" + int_list(p);
    return true;
  };
  r.emit("MaxPool", [pool_window](EmitContext& e) {
    if (e.out.size() > 1 && !e.out[1].empty()) return false;
    if (e.attr_i("storage_order", 0) != 0) return false;
    int64_t n = 0;
    std::string args;
    if (!pool_window(e, n, args)) return false;
    std::vector<int64_t> d = e.attr_ints("dilations");
    if (d.empty()) d.assign(static_cast<size_t>(n), 1);
    if (static_cast<int64_t>(d.size()) != n) return false;
    for (int64_t v : d)
      if (v < 1) return false;
    args += ", .dilation = kiln::Dims" + int_list(d) +
            ", .ceil_mode = " + (e.attr_i("ceil_mode", 0) ? "true" : "false") + "}";
    e.assign("kiln::nn::functional::max_pool" + std::to_string(n) + "d(" + e.in(0) + ", " + args + ")");
    e.out_rank = {static_cast<int>(n + 2)};
    return true;
  });
  r.emit("AveragePool", [pool_window](EmitContext& e) {
    int64_t n = 0;
    std::string args;
    if (!pool_window(e, n, args)) return false;
    for (int64_t v : e.attr_ints("dilations"))
      if (v != 1) return false;
    args += std::string(", .ceil_mode = ") + (e.attr_i("ceil_mode", 0) ? "true" : "false") +
            ", .count_include_pad = " + (e.attr_i("count_include_pad", 0) ? "true" : "false") + "}";
    e.assign("kiln::nn::functional::avg_pool" + std::to_string(n) + "d(" + e.in(0) + ", " + args + ")");
    e.out_rank = {static_cast<int>(n + 2)};
    return true;
  });
  // Global pools over the spatial dims of an input of known rank -> mean / amax, keepdim.
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    r.emit(op, [avg = std::string(op) == "GlobalAveragePool"](EmitContext& e) {
      const int rank = e.rank.empty() ? -1 : e.rank[0];
      if (rank < 3) return false;
      std::vector<int64_t> d;
      for (int64_t i = 2; i < rank; ++i) d.push_back(i);
      e.assign(std::string(avg ? "kiln::mean(" : "kiln::amax(") + e.in(0) + ", kiln::Dims" + int_list(d) + ", true)");
      e.out_rank = {rank};
      return true;
    });
  r.emit("BatchNormalization", [](EmitContext& e) {
    // Inference-mode BN over [N, C, *] with constant statistics -> nn::BatchNorm{1,2,3}d.
    if (e.out.size() != 1 || (e.opset >= 14 && e.attr_i("training_mode", 0) != 0)) return false;
    int rank = e.rank.empty() ? -1 : e.rank[0];
    if (rank < 2 || rank > 5) return false;
    const Tensor* t[4];
    for (size_t i = 0; i < 4; ++i) {
      t[i] = e.constant(i + 1);
      if (!t[i] || t[i]->dim() != 1 || !is_floating(t[i]->dtype())) return false;
    }
    int nd = rank <= 3 ? 1 : rank - 2;
    std::string args = "{.num_features = " + std::to_string(t[0]->size(0)) +
                       ", .eps = " + float_lit(e.attr_f("epsilon", 1e-5f)) +
                       ", .momentum = " + float_lit(1.0 - e.attr_f("momentum", 0.9f)) + "}";
    std::string m = e.add_module("kiln::nn::BatchNorm" + std::to_string(nd) + "d", args,
                                 {{"weight", *t[0]},
                                  {"bias", *t[1]},
                                  {"running_mean", *t[2]},
                                  {"running_var", *t[3]},
                                  {"num_batches_tracked", zeros({}, {.dtype = i64, .device = Device::cpu()})}});
    e.assign(m + "(" + e.in(0) + ")");
    e.out_rank = {rank};
    return true;
  });
  r.emit("LayerNormalization", [](EmitContext& e) {
    // Last-axis LN with a constant [D] scale (and bias) -> nn::LayerNorm.
    const Tensor *w = e.constant(1), *b = e.has(2) ? e.constant(2) : nullptr;
    if (e.out.size() > 1 && (!e.out[1].empty() || (e.out.size() > 2 && !e.out[2].empty()))) return false;
    if (!w || w->dim() != 1 || (e.has(2) && (!b || b->dim() != 1)) || !is_floating(w->dtype())) return false;
    int64_t axis = e.attr_i("axis", -1);
    if (!(axis == -1 || (e.rank[0] >= 0 && axis == e.rank[0] - 1))) return false;
    std::string args = "{.normalized_shape = kiln::Shape{" + std::to_string(w->size(0)) +
                       "}, .eps = " + float_lit(e.attr_f("epsilon", 1e-5f)) + ", .bias = " + (b ? "true" : "false") +
                       "}";
    std::vector<std::pair<std::string, Tensor>> st{{"weight", *w}};
    if (b) st.emplace_back("bias", *b);
    std::string m = e.add_module("kiln::nn::LayerNorm", args, st);
    e.assign(m + "(" + e.in(0) + ")");
    e.out_rank = {e.rank[0]};
    return true;
  });
  r.emit("Gemm", [](EmitContext& e) {
    // y = x W^T + b with constant W (and b) -> nn::Linear.
    const Tensor *w = e.constant(1), *b = e.has(2) ? e.constant(2) : nullptr;
    if (!w || w->dim() != 2 || !is_floating(w->dtype()) || e.attr_i("transA", 0) != 0) return false;
    if (e.attr_f("alpha", 1.0f) != 1.0f || (e.has(2) && e.attr_f("beta", 1.0f) != 1.0f)) return false;
    Tensor wt = e.attr_i("transB", 0) ? *w : w->t().contiguous();
    int64_t out = wt.size(0), in = wt.size(1);
    if (e.has(2) && (!b || b->numel() != out)) return false;
    std::vector<std::pair<std::string, Tensor>> st{{"weight", wt}};
    if (b) st.emplace_back("bias", b->reshape({out}));
    std::string m = e.add_module("kiln::nn::Linear",
                                 "{.in_features = " + std::to_string(in) + ", .out_features = " + std::to_string(out) +
                                     ", .bias = " + (b ? "true" : "false") + "}",
                                 st);
    e.assign(m + "(" + e.in(0) + ")");
    e.out_rank = {2};
    return true;
  });
  r.emit("MatMul", [](EmitContext& e) {
    // x @ W with a constant 2-D W -> nn::Linear (weight = W^T), with the bias code generation
    // folded in from a following Add (e.bias) when there is one.
    const Tensor* w = e.constant(1);
    if (!w || w->dim() != 2 || !is_floating(w->dtype()) || e.rank[0] == 1) {
      if (w || e.constant(0) || e.bias) return false;
      e.assign("kiln::matmul(" + e.in(0) + ", " + e.in(1) + ")");
      return true;
    }
    const Tensor* b = e.bias;
    if (b && (b->dim() != 1 || b->dtype() != w->dtype() || b->size(0) != w->size(1))) return false;
    std::vector<std::pair<std::string, Tensor>> st{{"weight", w->t().contiguous()}};
    if (b) st.emplace_back("bias", *b);
    std::string m = e.add_module("kiln::nn::Linear",
                                 "{.in_features = " + std::to_string(w->size(0)) + ", .out_features = " +
                                     std::to_string(w->size(1)) + ", .bias = " + (b ? "true" : "false") + "}",
                                 st);
    e.assign(m + "(" + e.in(0) + ")");
    if (e.rank[0] >= 0) e.out_rank = {e.rank[0]};
    return true;
  });
}

bool host_f32_ok(const Tensor& t) {
  return t.device().is_cpu() && t.dtype() == f32 && t.is_contiguous() && t.impl().storage;
}

float* host_f32(const Tensor& t) {
  char* base = static_cast<char*>(host_storage_data(t));
  KILN_CHECK(base != nullptr, "onnx", "a CPU tensor without host memory");
  return reinterpret_cast<float*>(base + t.storage_offset() * 4);
}

}  // namespace kiln::onnx
