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

void sigmoid(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + expf_approx(-x[i]));
}

void tanh(int32_t n, const float* x, float* y) {
  for (int32_t i = 0; i < n; ++i) {
    // tanh(v) = sign(v) * (1 - 2 / (exp(2|v|) + 1)); small |v| by its odd series, where the
    // difference would cancel.
    const float v = x[i], a = v < 0.0f ? -v : v;
    const float big = 1.0f - 2.0f / (expf_approx(2.0f * a) + 1.0f);
    const float a2 = a * a;
    const float small = a * (1.0f + a2 * (-0.333333333f + a2 * (0.133333333f + a2 * -0.0539682540f)));
    const float t = a < 0.125f ? small : big;
    y[i] = v < 0.0f ? -t : t;
  }
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

}  // namespace kiln_micro
