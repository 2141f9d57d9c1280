// SPDX-License-Identifier: MIT OR Apache-2.0
// Kiln micro kernels (kiln_micro.h). Freestanding: no heap, no libm; loops are written so that
// their innermost level runs along contiguous memory and accumulates per lane (no cross-lane
// reduction), which GCC vectorises for Helium (MVE) at -O3 without reassociating floats.
#include "kiln_micro.h"

// GCC 12 vectorises y += a * x for MVE as vmul + vadd (it has no vector FMA pattern for MVE);
// the two hot loops (conv rows, linear rows) use the intrinsics instead, tail-predicated.
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
#include <arm_mve.h>
#define KILN_MICRO_MVE 1
#endif

namespace kiln_micro {

namespace {

// Applies act to n values in place (one loop per kind, so each vectorises).
void apply_act(float* y, int32_t n, Act act, float lo, float hi) {
#ifdef KILN_MICRO_MVE
  if (act != kActNone) {  // max(y, lo) then min(y, hi); ReLU: max(y, 0)
    const float32x4_t l = vdupq_n_f32(act == kActRelu ? 0.0f : lo), h = vdupq_n_f32(hi);
    for (int32_t i = 0; i < n; i += 4) {
      const mve_pred16_t p = vctp32q(static_cast<uint32_t>(n - i));
      float32x4_t v = vmaxnmq_f32(vldrwq_z_f32(y + i, p), l);
      if (act == kActClip) v = vminnmq_f32(v, h);
      vstrwq_p_f32(y + i, v, p);
    }
    return;
  }
#endif
  if (act == kActRelu) {
    for (int32_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
  } else if (act == kActClip) {
    for (int32_t i = 0; i < n; ++i) y[i] = y[i] < lo ? lo : (y[i] > hi ? hi : y[i]);
  }
}

// y[i] += a * x[i] for i in [0, n).
inline void axpy(float* __restrict y, const float* __restrict x, float a, int32_t n) {
#ifdef KILN_MICRO_MVE
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
  if (i < n) {
    const mve_pred16_t p = vctp32q(static_cast<uint32_t>(n - i));
    vstrwq_p_f32(y + i, vfmaq_n_f32(vldrwq_z_f32(y + i, p), vldrwq_z_f32(x + i, p), a), p);
  }
#else
  for (int32_t i = 0; i < n; ++i) y[i] += a * x[i];
#endif
}

// The output positions o in [0, out) whose input position o * s - pad + k lies in [0, len):
// [*lo, *hi).
inline void valid_range(int32_t out, int32_t len, int32_t s, int32_t pad, int32_t k, int32_t* lo, int32_t* hi) {
  const int32_t off = k - pad;  // input position of output 0
  int32_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int32_t b = len - off <= 0 ? 0 : (len - off + s - 1) / s;
  if (b > out) b = out;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

// The input positions i in [0, len) whose output position i * s + off lies in [0, out) (a
// transposed conv's scatter): [*lo, *hi).
inline void scatter_range(int32_t len, int32_t out, int32_t s, int32_t off, int32_t* lo, int32_t* hi) {
  const int32_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  const int32_t rem = out - 1 - off;
  int32_t b = rem < 0 ? 0 : rem / s + 1;
  if (b > len) b = len;
  *lo = a;
  *hi = b > a ? b : a;
}

// One output of a conv at (oy, ox) whose window may cross the input's border: acc plus the
// products over kernel rows [ky0, ky1), the kernel columns inside the input and the input
// channels, in that order (the order of every conv path, so that all agree bitwise).
// xg: the group's first input plane; wo: the output channel's weights; iy0 = oy * sh - pt.
inline float conv_edge(const Conv2dParams& p, const float* xg, const float* wo, int32_t cin_g, int32_t ky0, int32_t ky1,
                       int32_t iy0, int32_t ox, float acc) {
  const int32_t ix0 = ox * p.sw - p.pl, plane = p.h * p.w, wstride = p.kh * p.kw;
  for (int32_t ky = ky0; ky < ky1; ++ky)
    for (int32_t kx = 0; kx < p.kw; ++kx) {
      const int32_t ix = ix0 + kx * p.dw;
      if (ix < 0 || ix >= p.w) continue;
      const float* xr = xg + (iy0 + ky * p.dh) * p.w + ix;
      const float* wr = wo + ky * p.kw + kx;
      for (int32_t icg = 0; icg < cin_g; ++icg) acc += wr[icg * wstride] * xr[icg * plane];
    }
  return acc;
}

// Outputs [lo, hi) of one row whose windows lie inside the input (no bounds checks), each
// accumulated in a register in the order of conv_edge.
inline void conv_interior(const Conv2dParams& p, const float* xg, const float* wo, int32_t cin_g, int32_t ky0,
                          int32_t ky1, int32_t iy0, int32_t lo, int32_t hi, float bias, float* __restrict yr) {
  const int32_t kw = p.kw, dw = p.dw, sw = p.sw, w = p.w, dh = p.dh, pl = p.pl;
  const int32_t plane = p.h * p.w, wstride = p.kh * p.kw;
  if (cin_g == 1 && kw == 3 && dw == 1) {  // depthwise and single-channel 3-wide kernels
    for (int32_t ox = lo; ox < hi; ++ox) {
      float acc = bias;
      const float* xo = xg + ox * sw - pl;
      for (int32_t ky = ky0; ky < ky1; ++ky) {
        const float* xr = xo + (iy0 + ky * dh) * w;
        const float* wr = wo + ky * 3;
        acc += wr[0] * xr[0];
        acc += wr[1] * xr[1];
        acc += wr[2] * xr[2];
      }
      yr[ox] = acc;
    }
    return;
  }
  for (int32_t ox = lo; ox < hi; ++ox) {
    float acc = bias;
    const float* xo = xg + ox * sw - pl;
    for (int32_t ky = ky0; ky < ky1; ++ky)
      for (int32_t kx = 0; kx < kw; ++kx) {
        const float* xr = xo + (iy0 + ky * dh) * w + kx * dw;
        const float* wr = wo + ky * kw + kx;
        for (int32_t icg = 0; icg < cin_g; ++icg) acc += wr[icg * wstride] * xr[icg * plane];
      }
    yr[ox] = acc;
  }
}

}  // namespace

#ifdef KILN_MICRO_MVE
// One output row of a stride-1 conv with Helium, eight outputs at a time (two vectors) in the
// order of conv_edge. Input lanes outside the row (the padding) are predicated off per kernel
// column, so the border needs no scalar code: an off lane loads 0 and adds 0 * w.
static void conv_row_mve(const Conv2dParams& p, const float* xg, const float* wo, int32_t cin_g, int32_t ky0,
                         int32_t ky1, int32_t iy0, float bias, float* __restrict yr) {
  const int32_t kw = p.kw, dw = p.dw, w = p.w, dh = p.dh, ow = p.ow, pl = p.pl;
  const int32_t plane = p.h * p.w, wstride = p.kh * p.kw;
  const uint32x4_t width = vdupq_n_u32(static_cast<uint32_t>(w));
  mve_pred16_t m0[16], m1[16];
  for (int32_t ox = 0; ox < ow; ox += 8) {
    const int32_t left = ow - ox;
    const mve_pred16_t t0 = vctp32q(static_cast<uint32_t>(left)),
                       t1 = vctp32q(static_cast<uint32_t>(left > 4 ? left - 4 : 0));
    for (int32_t kx = 0; kx < kw; ++kx) {
      const uint32_t start = static_cast<uint32_t>(ox - pl + kx * dw);  // may wrap below 0: then >= w
      m0[kx] = t0 & vcmphiq_u32(width, vidupq_n_u32(start, 1));
      m1[kx] = t1 & vcmphiq_u32(width, vidupq_n_u32(start + 4, 1));
    }
    float32x4_t a0 = vdupq_n_f32(bias), a1 = a0;
    const float* xo = xg + ox - pl;
    if (cin_g == 1 && kw == 3) {  // single-channel 3-wide kernels (first layers, depthwise), unrolled
      for (int32_t ky = ky0; ky < ky1; ++ky) {
        const float* xr = xo + (iy0 + ky * dh) * w;
        const float* wr = wo + ky * 3;
        a0 = vfmaq_n_f32(a0, vldrwq_z_f32(xr, m0[0]), wr[0]);
        a1 = vfmaq_n_f32(a1, vldrwq_z_f32(xr + 4, m1[0]), wr[0]);
        a0 = vfmaq_n_f32(a0, vldrwq_z_f32(xr + dw, m0[1]), wr[1]);
        a1 = vfmaq_n_f32(a1, vldrwq_z_f32(xr + dw + 4, m1[1]), wr[1]);
        a0 = vfmaq_n_f32(a0, vldrwq_z_f32(xr + 2 * dw, m0[2]), wr[2]);
        a1 = vfmaq_n_f32(a1, vldrwq_z_f32(xr + 2 * dw + 4, m1[2]), wr[2]);
      }
      vstrwq_p_f32(yr + ox, a0, t0);
      vstrwq_p_f32(yr + ox + 4, a1, t1);
      continue;
    }
    for (int32_t ky = ky0; ky < ky1; ++ky)
      for (int32_t kx = 0; kx < kw; ++kx) {
        const float* xr = xo + (iy0 + ky * dh) * w + kx * dw;
        const float* wr = wo + ky * kw + kx;
        const mve_pred16_t q0 = m0[kx], q1 = m1[kx];
        for (int32_t icg = 0; icg < cin_g; ++icg) {
          const float wv = wr[icg * wstride];
          a0 = vfmaq_n_f32(a0, vldrwq_z_f32(xr, q0), wv);
          a1 = vfmaq_n_f32(a1, vldrwq_z_f32(xr + 4, q1), wv);
          xr += plane;
        }
      }
    vstrwq_p_f32(yr + ox, a0, t0);
    vstrwq_p_f32(yr + ox + 4, a1, t1);
  }
}
#endif

void conv2d(const Conv2dParams& p, const float* x, const float* w, const float* b, float* y) {
  const int32_t cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
  const int32_t plane_out = p.oh * p.ow;
  // The outputs whose window columns all lie inside the input: [in_lo, in_hi).
  int32_t in_lo, in_hi;
  valid_range(p.ow, p.w - (p.kw - 1) * p.dw, p.sw, p.pl, 0, &in_lo, &in_hi);
  for (int32_t n = 0; n < p.n; ++n) {
    for (int32_t oc = 0; oc < p.c_out; ++oc) {
      float* __restrict yp = y + (n * p.c_out + oc) * plane_out;
      const float bias = b ? b[oc] : 0.0f;
      const int32_t g = oc / cout_g;
      const float* xg = x + (n * p.c_in + g * cin_g) * p.h * p.w;
      const float* wo = w + oc * cin_g * p.kh * p.kw;
      for (int32_t oy = 0; oy < p.oh; ++oy) {
        const int32_t iy0 = oy * p.sh - p.pt;
        int32_t ky0, ky1;  // kernel rows inside the input
        valid_range(p.kh, p.h, p.dh, -iy0, 0, &ky0, &ky1);
        float* yr = yp + oy * p.ow;
#ifdef KILN_MICRO_MVE
        if (p.sw == 1 && p.kw <= 16) {
          conv_row_mve(p, xg, wo, cin_g, ky0, ky1, iy0, bias, yr);
          continue;
        }
#endif
        for (int32_t ox = 0; ox < in_lo; ++ox) yr[ox] = conv_edge(p, xg, wo, cin_g, ky0, ky1, iy0, ox, bias);
        conv_interior(p, xg, wo, cin_g, ky0, ky1, iy0, in_lo, in_hi, bias, yr);
        for (int32_t ox = in_hi > in_lo ? in_hi : in_lo; ox < p.ow; ++ox)
          yr[ox] = conv_edge(p, xg, wo, cin_g, ky0, ky1, iy0, ox, bias);
      }
      apply_act(yp, plane_out, p.act, p.lo, p.hi);
    }
  }
}

void linear(const LinearParams& p, const float* x, const float* wt, const float* b, float* y) {
  for (int32_t m = 0; m < p.m; ++m) {
    float* __restrict yr = y + m * p.n;
    const float* br = b ? b + (p.bias_rows ? m * p.n : 0) : nullptr;
    if (br) {
      for (int32_t j = 0; j < p.n; ++j) yr[j] = br[j];
    } else {
      for (int32_t j = 0; j < p.n; ++j) yr[j] = 0.0f;
    }
    const float* xr = x + m * p.k;
    for (int32_t k = 0; k < p.k; ++k) {
      const float a = xr[k];
      axpy(yr, wt + k * p.n, a, p.n);
    }
    apply_act(yr, p.n, p.act, p.lo, p.hi);
  }
}

void max_pool2d(const Pool2dParams& p, const float* x, float* y) {
  for (int32_t c = 0; c < p.planes; ++c) {
    const float* xp = x + c * p.h * p.w;
    float* yp = y + c * p.oh * p.ow;
    int32_t oy_done = 0;
#ifdef KILN_MICRO_MVE
    // 2x2 windows, stride 2, no padding: four outputs from two deinterleaving loads per input
    // row (vld2q), for the rows and columns whose windows lie inside the input.
    if (p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.pt == 0 && p.pl == 0) {
      const int32_t rows = p.oh < p.h / 2 ? p.oh : p.h / 2, cols = p.ow < p.w / 2 ? p.ow : p.w / 2;
      const int32_t full = cols / 4 * 4;
      for (int32_t oy = 0; oy < rows; ++oy) {
        const float* r0 = xp + 2 * oy * p.w;
        const float* r1 = r0 + p.w;
        float* yr = yp + oy * p.ow;
        for (int32_t ox = 0; ox < full; ox += 4) {
          const float32x4x2_t a = vld2q_f32(r0 + 2 * ox), b = vld2q_f32(r1 + 2 * ox);
          vst1q_f32(yr + ox, vmaxnmq_f32(vmaxnmq_f32(a.val[0], a.val[1]), vmaxnmq_f32(b.val[0], b.val[1])));
        }
        for (int32_t ox = full; ox < p.ow; ++ox) {
          const int32_t x0 = 2 * ox, xb = x0 + 2 > p.w ? p.w : x0 + 2;
          float m = r0[x0];
          for (int32_t ix = x0; ix < xb; ++ix) {
            m = r0[ix] > m ? r0[ix] : m;
            m = r1[ix] > m ? r1[ix] : m;
          }
          yr[ox] = m;
        }
      }
      oy_done = rows;
    }
#endif
    for (int32_t oy = oy_done; oy < p.oh; ++oy) {
      const int32_t y0 = oy * p.sh - p.pt;
      const int32_t ya = y0 < 0 ? 0 : y0, yb = y0 + p.kh > p.h ? p.h : y0 + p.kh;
      for (int32_t ox = 0; ox < p.ow; ++ox) {
        const int32_t x0 = ox * p.sw - p.pl;
        const int32_t xa = x0 < 0 ? 0 : x0, xb = x0 + p.kw > p.w ? p.w : x0 + p.kw;
        float m = -3.402823466e38f;
        bool any = false;
        for (int32_t iy = ya; iy < yb; ++iy)
          for (int32_t ix = xa; ix < xb; ++ix) {
            const float v = xp[iy * p.w + ix];
            if (!any || v > m) m = v;
            any = true;
          }
        yp[oy * p.ow + ox] = m;
      }
    }
  }
}

void avg_pool2d(const Pool2dParams& p, const float* x, float* y) {
  for (int32_t c = 0; c < p.planes; ++c) {
    const float* xp = x + c * p.h * p.w;
    float* yp = y + c * p.oh * p.ow;
    for (int32_t oy = 0; oy < p.oh; ++oy) {
      const int32_t y0 = oy * p.sh - p.pt;
      const int32_t ya = y0 < 0 ? 0 : y0, yb = y0 + p.kh > p.h ? p.h : y0 + p.kh;
      for (int32_t ox = 0; ox < p.ow; ++ox) {
        const int32_t x0 = ox * p.sw - p.pl;
        const int32_t xa = x0 < 0 ? 0 : x0, xb = x0 + p.kw > p.w ? p.w : x0 + p.kw;
        float s = 0.0f;
        for (int32_t iy = ya; iy < yb; ++iy)
          for (int32_t ix = xa; ix < xb; ++ix) s += xp[iy * p.w + ix];
        int32_t count = (yb - ya) * (xb - xa);
        if (p.count_include_pad) {
          const int32_t pya = y0 < -p.pt ? -p.pt : y0, pyb = y0 + p.kh > p.h + p.pb ? p.h + p.pb : y0 + p.kh;
          const int32_t pxa = x0 < -p.pl ? -p.pl : x0, pxb = x0 + p.kw > p.w + p.pr ? p.w + p.pr : x0 + p.kw;
          count = (pyb - pya) * (pxb - pxa);
        }
        yp[oy * p.ow + ox] = count > 0 ? s / static_cast<float>(count) : 0.0f;
      }
    }
  }
}

void relu(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void clip(int32_t n, const float* x, float* y, float lo, float hi) {
  for (int32_t i = 0; i < n; ++i) y[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
}

void leaky_relu(int32_t n, const float* x, float* y, float alpha) {
  for (int32_t i = 0; i < n; ++i) y[i] = x[i] >= 0.0f ? x[i] : alpha * x[i];
}

namespace {

inline float sigmoid_one(float v) { return 1.0f / (1.0f + expf_approx(-v)); }

// tanh(v) = sign(v) * (1 - 2 / (exp(2|v|) + 1)); small |v| by its odd series, where the
// difference would cancel.
inline float tanh_one(float v) {
  const float a = v < 0.0f ? -v : v;
  const float big = 1.0f - 2.0f / (expf_approx(2.0f * a) + 1.0f);
  const float a2 = a * a;
  const float small = a * (1.0f + a2 * (-0.333333333f + a2 * (0.133333333f + a2 * -0.0539682540f)));
  const float t = a < 0.125f ? small : big;
  return v < 0.0f ? -t : t;
}

}  // namespace

void sigmoid(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = sigmoid_one(x[i]);
}

void tanh(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = tanh_one(x[i]);
}

void exp(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = expf_approx(x[i]);
}

namespace {

// y[i] = a[i] op b[i] along one row of len with a_s, b_s in {0, 1} (the broadcast pattern of the
// innermost dim); each pattern is its own loop so that it vectorises.
template <BinOp OP>
inline float bin_one(float a, float b) {
  if (OP == kAdd) return a + b;
  if (OP == kSub) return a - b;
  if (OP == kMul) return a * b;
  return a / b;
}

template <BinOp OP>
void bin_row(int32_t len, const float* a, int32_t a_s, const float* b, int32_t b_s, float* y) {
  if (a_s == 1 && b_s == 1) {
    for (int32_t i = 0; i < len; ++i) y[i] = bin_one<OP>(a[i], b[i]);
  } else if (a_s == 1 && b_s == 0) {
    const float bv = b[0];
    for (int32_t i = 0; i < len; ++i) y[i] = bin_one<OP>(a[i], bv);
  } else if (a_s == 0 && b_s == 1) {
    const float av = a[0];
    for (int32_t i = 0; i < len; ++i) y[i] = bin_one<OP>(av, b[i]);
  } else {
    for (int32_t i = 0; i < len; ++i) y[i] = bin_one<OP>(a[i * a_s], b[i * b_s]);
  }
}

template <BinOp OP>
void binary_t(const BroadcastParams& p, const float* a, const float* b, float* y) {
  const int32_t r = p.rank;
  if (r == 0) {
    y[0] = bin_one<OP>(a[0], b[0]);
    return;
  }
  const int32_t len = p.dims[r - 1];
  int32_t rows = 1;
  for (int32_t d = 0; d + 1 < r; ++d) rows *= p.dims[d];
  int32_t idx[6] = {0, 0, 0, 0, 0, 0};
  int32_t ao = 0, bo = 0;
  for (int32_t row = 0; row < rows; ++row) {
    bin_row<OP>(len, a + ao, p.a_str[r - 1], b + bo, p.b_str[r - 1], y + row * len);
    // Advance the outer index (odometer), keeping the operands' offsets.
    for (int32_t d = r - 2; d >= 0; --d) {
      ++idx[d];
      ao += p.a_str[d];
      bo += p.b_str[d];
      if (idx[d] < p.dims[d]) break;
      ao -= p.a_str[d] * p.dims[d];
      bo -= p.b_str[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void binary(BinOp op, const BroadcastParams& p, const float* a, const float* b, float* y) {
  switch (op) {
    case kAdd:
      binary_t<kAdd>(p, a, b, y);
      break;
    case kSub:
      binary_t<kSub>(p, a, b, y);
      break;
    case kMul:
      binary_t<kMul>(p, a, b, y);
      break;
    case kDiv:
      binary_t<kDiv>(p, a, b, y);
      break;
  }
}

void channel_affine(int32_t outer, int32_t channels, int32_t inner, const float* scale, const float* shift,
                    const float* x, float* y) {
  for (int32_t o = 0; o < outer; ++o)
    for (int32_t c = 0; c < channels; ++c) {
      const float s = scale[c], t = shift[c];
      const int32_t base = (o * channels + c) * inner;
      for (int32_t i = 0; i < inner; ++i) y[base + i] = x[base + i] * s + t;
    }
}

void softmax(int32_t outer, int32_t len, int32_t inner, const float* x, float* y) {
  for (int32_t o = 0; o < outer; ++o)
    for (int32_t j = 0; j < inner; ++j) {
      const float* xp = x + o * len * inner + j;
      float* yp = y + o * len * inner + j;
      float m = xp[0];
      for (int32_t i = 1; i < len; ++i) m = xp[i * inner] > m ? xp[i * inner] : m;
      float s = 0.0f;
      for (int32_t i = 0; i < len; ++i) {
        const float e = expf_approx(xp[i * inner] - m);
        yp[i * inner] = e;
        s += e;
      }
      const float inv = 1.0f / s;
      for (int32_t i = 0; i < len; ++i) yp[i * inner] *= inv;
    }
}

void reduce(ReduceOp op, int32_t outer, int32_t len, int32_t inner, const float* x, float* y) {
  for (int32_t o = 0; o < outer; ++o) {
    float* yr = y + o * inner;
    const float* xo = x + o * len * inner;
    for (int32_t j = 0; j < inner; ++j) yr[j] = xo[j];
    for (int32_t i = 1; i < len; ++i) {
      const float* xr = xo + i * inner;
      if (op == kReduceMax) {
        for (int32_t j = 0; j < inner; ++j) yr[j] = xr[j] > yr[j] ? xr[j] : yr[j];
      } else {
        for (int32_t j = 0; j < inner; ++j) yr[j] += xr[j];
      }
    }
    if (op == kReduceMean) {
      const float inv = 1.0f / static_cast<float>(len);
      for (int32_t j = 0; j < inner; ++j) yr[j] *= inv;
    }
  }
}

void permute(const PermuteParams& p, const float* x, float* y) {
  const int32_t r = p.rank;
  int32_t total = 1;
  for (int32_t d = 0; d < r; ++d) total *= p.dims[d];
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  const int32_t len = p.dims[r - 1], s = p.x_str[r - 1];
  int32_t idx[6] = {0, 0, 0, 0, 0, 0};
  int32_t xo = 0;
  for (int32_t row = 0; row * len < total; ++row) {
    float* yr = y + row * len;
    for (int32_t i = 0; i < len; ++i) yr[i] = x[xo + i * s];
    for (int32_t d = r - 2; d >= 0; --d) {
      ++idx[d];
      xo += p.x_str[d];
      if (idx[d] < p.dims[d]) break;
      xo -= p.x_str[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

void copy_rows(int32_t rows, int32_t len, const float* src, int32_t src_stride, float* dst, int32_t dst_stride) {
  for (int32_t r = 0; r < rows; ++r) __builtin_memcpy(dst + r * dst_stride, src + r * src_stride, len * sizeof(float));
}

void conv_transpose2d(const ConvTranspose2dParams& p, const float* x, const float* w, const float* b, float* y) {
  const int32_t cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
  const int32_t plane_in = p.h * p.w, plane_out = p.oh * p.ow;
  for (int32_t n = 0; n < p.n; ++n)
    for (int32_t oc = 0; oc < p.c_out; ++oc) {
      float* __restrict yp = y + (n * p.c_out + oc) * plane_out;
      const float bias = b ? b[oc] : 0.0f;
      for (int32_t i = 0; i < plane_out; ++i) yp[i] = bias;
      const int32_t g = oc / cout_g, ocg = oc % cout_g;
      for (int32_t icg = 0; icg < cin_g; ++icg) {
        const int32_t ic = g * cin_g + icg;
        const float* xp = x + (n * p.c_in + ic) * plane_in;
        const float* wk = w + (ic * cout_g + ocg) * p.kh * p.kw;
        for (int32_t ky = 0; ky < p.kh; ++ky) {
          int32_t iy_lo, iy_hi;  // input rows whose output row lies in [0, oh)
          scatter_range(p.h, p.oh, p.sh, ky * p.dh - p.pt, &iy_lo, &iy_hi);
          for (int32_t iy = iy_lo; iy < iy_hi; ++iy) {
            float* yr = yp + (iy * p.sh - p.pt + ky * p.dh) * p.ow;
            const float* xr = xp + iy * p.w;
            for (int32_t kx = 0; kx < p.kw; ++kx) {
              const float wv = wk[ky * p.kw + kx];
              const int32_t off = kx * p.dw - p.pl;
              int32_t lo, hi;
              scatter_range(p.w, p.ow, p.sw, off, &lo, &hi);
              if (p.sw == 1) {
                if (hi > lo) axpy(yr + off + lo, xr + lo, wv, hi - lo);
              } else {
                for (int32_t ix = lo; ix < hi; ++ix) yr[ix * p.sw + off] += xr[ix] * wv;
              }
            }
          }
        }
      }
    }
}

void resize2d(const Resize2dParams& p, const int32_t* y0, const int32_t* y1, const float* wy, const int32_t* x0,
              const int32_t* x1, const float* wx, const float* x, float* y) {
  for (int32_t c = 0; c < p.planes; ++c) {
    const float* xp = x + c * p.h * p.w;
    float* yp = y + c * p.oh * p.ow;
    for (int32_t oy = 0; oy < p.oh; ++oy) {
      const float* r0 = xp + y0[oy] * p.w;
      float* yr = yp + oy * p.ow;
      if (!p.linear) {
        for (int32_t ox = 0; ox < p.ow; ++ox) yr[ox] = r0[x0[ox]];
        continue;
      }
      const float* r1 = xp + y1[oy] * p.w;
      const float b = wy[oy], a = 1.0f - b;
      for (int32_t ox = 0; ox < p.ow; ++ox) {
        const float d = wx[ox], e = 1.0f - d;
        const float top = r0[x0[ox]] * e + r0[x1[ox]] * d, bottom = r1[x0[ox]] * e + r1[x1[ox]] * d;
        yr[ox] = top * a + bottom * b;
      }
    }
  }
}

namespace {

template <class I>
int gather_t(int32_t outer, int32_t len, int32_t inner, const I* idx, int32_t n, const float* x, float* y) {
  for (int32_t j = 0; j < n; ++j)
    if (idx[j] < -static_cast<I>(len) || idx[j] >= static_cast<I>(len)) return KILN_MICRO_ERR_INDEX;
  for (int32_t o = 0; o < outer; ++o)
    for (int32_t j = 0; j < n; ++j) {
      const int32_t k = static_cast<int32_t>(idx[j] < 0 ? idx[j] + len : idx[j]);
      __builtin_memcpy(y + (o * n + j) * inner, x + (o * len + k) * inner, inner * sizeof(float));
    }
  return KILN_MICRO_OK;
}

// 1 / sqrt(v) for v > 0 without libm: the bit-level first guess, then three Newton steps (to
// within 2 ulps).
inline float rsqrt_approx(float v) {
  int32_t i;
  __builtin_memcpy(&i, &v, sizeof i);
  i = 0x5f3759df - (i >> 1);
  float r;
  __builtin_memcpy(&r, &i, sizeof r);
  for (int k = 0; k < 3; ++k) r = r * (1.5f - 0.5f * v * r * r);
  return r;
}

// erf as the CPU backend's odd rational x P(x^2) / Q(x^2) on [-4, 4] (vec_math-inl.h), +-1
// beyond; NaN passes.
inline float erf_one(float v) {
  static const float kP[] = {-1.60960333262415e-02f, -2.95459980854025e-03f, -7.34990630326855e-04f,
                             -5.69250639462346e-05f, -2.10102402082508e-06f, 2.77068142495902e-08f,
                             -2.72614225801306e-10f};
  static const float kQ[] = {-1.42647390514189e-02f, -7.37332916720468e-03f, -1.68282697438203e-03f,
                             -2.13374055278905e-04f, -1.45660718464996e-05f};
  if (v != v) return v;
  if (v >= 4.0f) return 1.0f;
  if (v <= -4.0f) return -1.0f;
  const float x2 = v * v;
  float p = kP[6], q = kQ[4];
  for (int i = 5; i >= 0; --i) p = p * x2 + kP[i];
  for (int i = 3; i >= 0; --i) q = q * x2 + kQ[i];
  return v * p / q;
}

}  // namespace

int gather(int32_t outer, int32_t len, int32_t inner, const int64_t* idx, int32_t n, const float* x, float* y) {
  return gather_t(outer, len, inner, idx, n, x, y);
}
int gather(int32_t outer, int32_t len, int32_t inner, const int32_t* idx, int32_t n, const float* x, float* y) {
  return gather_t(outer, len, inner, idx, n, x, y);
}

void cast(int32_t n, const int64_t* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}
void cast(int32_t n, const int32_t* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

void layer_norm(int32_t rows, int32_t len, float eps, const float* gamma, const float* beta, const float* x, float* y) {
  const float inv_len = 1.0f / static_cast<float>(len);
  for (int32_t r = 0; r < rows; ++r) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    float sum = 0.0f;
    for (int32_t i = 0; i < len; ++i) sum += xr[i];
    const float mean = sum * inv_len;
    float sq = 0.0f;
    for (int32_t i = 0; i < len; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
    const float rs = rsqrt_approx(sq * inv_len + eps);
    if (beta) {
      for (int32_t i = 0; i < len; ++i) yr[i] = (xr[i] - mean) * rs * gamma[i] + beta[i];
    } else {
      for (int32_t i = 0; i < len; ++i) yr[i] = (xr[i] - mean) * rs * gamma[i];
    }
  }
}

void erf(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = erf_one(x[i]);
}

void lstm(const LstmParams& p, const float* x, const float* wt, const float* b, const float* pc, const float* h0,
          const float* c0, float* y, float* yh, float* yc, float* scratch) {
  const int32_t H = p.hidden, I = p.input, K = I + H, G = 4 * H, nd = p.num_dir;
  float* row = scratch;                  // [batch, K]: x_t, then h
  float* gates = scratch + p.batch * K;  // [batch, 4 * hidden]
  // The direction's state of batch row bb, and where x and y of step t, row bb are.
  auto state = [&](int32_t bb) { return p.layout ? (bb * nd + p.dir) * H : (p.dir * p.batch + bb) * H; };
  auto x_at = [&](int32_t t, int32_t bb) { return p.layout ? (bb * p.seq + t) * I : (t * p.batch + bb) * I; };
  auto y_at = [&](int32_t t, int32_t bb) {
    return p.layout ? ((bb * p.seq + t) * nd + p.dir) * H : ((t * nd + p.dir) * p.batch + bb) * H;
  };
  for (int32_t bb = 0; bb < p.batch; ++bb)
    for (int32_t j = 0; j < H; ++j) {
      yh[state(bb) + j] = h0 ? h0[state(bb) + j] : 0.0f;
      yc[state(bb) + j] = c0 ? c0[state(bb) + j] : 0.0f;
    }
  const LinearParams lp = {p.batch, K, G, kActNone, 0.0f, 0.0f, 0};
  for (int32_t s = 0; s < p.seq; ++s) {
    const int32_t t = p.reverse ? p.seq - 1 - s : s;
    for (int32_t bb = 0; bb < p.batch; ++bb) {
      __builtin_memcpy(row + bb * K, x + x_at(t, bb), I * sizeof(float));
      __builtin_memcpy(row + bb * K + I, yh + state(bb), H * sizeof(float));
    }
    linear(lp, row, wt, b, gates);
    for (int32_t bb = 0; bb < p.batch; ++bb) {
      const float* g = gates + bb * G;
      float* h = yh + state(bb);
      float* c = yc + state(bb);
      for (int32_t j = 0; j < H; ++j) {
        const float pi = pc ? pc[j] * c[j] : 0.0f, pf = pc ? pc[2 * H + j] * c[j] : 0.0f;
        const float i_g = sigmoid_one(g[j] + pi), f_g = sigmoid_one(g[2 * H + j] + pf);
        c[j] = f_g * c[j] + i_g * tanh_one(g[3 * H + j]);
        const float o_g = sigmoid_one(g[H + j] + (pc ? pc[H + j] * c[j] : 0.0f));
        h[j] = o_g * tanh_one(c[j]);
      }
      if (y) __builtin_memcpy(y + y_at(t, bb), h, H * sizeof(float));
    }
  }
}

}  // namespace kiln_micro
