// SPDX-License-Identifier: MIT OR Apache-2.0
// Softmax and LogSoftmax along one dim, numerically stable: exp(x - max) / sum. A line along
// the innermost dim is one fused pass per row (max, exp and sum, scale) while it sits in cache;
// other dims process a tile of neighbouring lines together, vectorised across columns.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/reduce_util.h"
#include "backends/cpu/vec.h"
#include "core/machine.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

constexpr int kTile = 64;
constexpr int kWideTile = 1024;

/// max that sticks at NaN.
template <class A>
inline A nanmax(A a, A x) {
  return (x > a || x != x) ? x : a;
}

/// y[k] = exp(y[k]) for contiguous f32 (SIMD when available).
void exp_inplace(float* y, int64_t n) {
  if (!vec::exp_f32(y, y, n))
    for (int64_t k = 0; k < n; ++k) y[k] = std::exp(y[k]);
}

/// A tile of tw neighbouring f32 lines along a non-innermost dim, walked row by row (rows of
/// the tile are contiguous): max, exp and sum, scale.
void softmax_cols_f32(const float* x, int64_t xstride, float* y, int64_t ystride, int64_t L, int tw, bool log) {
  float mx[kWideTile], s[kWideTile];
  for (int c = 0; c < tw; ++c) {
    mx[c] = -std::numeric_limits<float>::infinity();
    s[c] = 0;
  }
  // A NaN max sticks and makes every output of its line NaN.
  for (int64_t l = 0; l < L; ++l) red::vec_extreme_row<float, true>(mx, x + l * xstride, tw);
  for (int64_t l = 0; l < L; ++l) {
    const float* row = x + l * xstride;
    float* out = y + l * ystride;
    for (int c = 0; c < tw; ++c) out[c] = row[c] - mx[c];
    exp_inplace(out, tw);
    for (int c = 0; c < tw; ++c) s[c] += out[c];
  }
  for (int c = 0; c < tw; ++c) s[c] = log ? std::log(s[c]) : 1.0f / s[c];
  for (int64_t l = 0; l < L; ++l) {
    const float* row = x + l * xstride;
    float* out = y + l * ystride;
    if (log)
      for (int c = 0; c < tw; ++c) out[c] = (row[c] - mx[c]) - s[c];
    else
      for (int c = 0; c < tw; ++c) out[c] *= s[c];
  }
}

template <class T>
void softmax_kernel(const ir::Op& op, void* const* in, void* const* out, bool log) {
  using A = acc_t<T>;
  const ir::TensorDesc& x = op.inputs[0];
  red::LinePlan lp(x, ir::ScanAttrs::decode(op).dim);
  const T* base = reinterpret_cast<const T*>(base_ptr(in[0], x));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  const int64_t L = lp.len, inner = lp.inner.numel, nouter = lp.outer.numel;
  if (L == 0 || inner == 0 || nouter == 0) return;
  if (inner == 1) {
    parallel_for(nouter, std::max<int64_t>(1, kGrain / L), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* p = base + lp.outer.offset(o);
        T* q = y + o * L;
        if constexpr (std::is_same_v<T, float>) {
          if (lp.stride == 1) {
            vec::softmax_f32(p, q, L, log);  // one fused SIMD pass set per row
            continue;
          }
        }
        A mx = -std::numeric_limits<A>::infinity();
        for (int64_t l = 0; l < L; ++l) mx = nanmax(mx, static_cast<A>(p[l * lp.stride]));
        A s = 0;
        for (int64_t l = 0; l < L; ++l) s += std::exp(static_cast<A>(p[l * lp.stride]) - mx);
        if (log) {
          const A ls = std::log(s);
          for (int64_t l = 0; l < L; ++l) q[l] = static_cast<T>((static_cast<A>(p[l * lp.stride]) - mx) - ls);
        } else {
          const A inv = A(1) / s;
          for (int64_t l = 0; l < L; ++l) q[l] = static_cast<T>(std::exp(static_cast<A>(p[l * lp.stride]) - mx) * inv);
        }
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (lp.inner.shape.size() == 1 && lp.inner.inner_stride() == 1) {
      // The tile's L lines (read three times, written twice) stay within this core's part of
      // the last-level cache; rows of at least 1 KiB keep the reads streaming (narrower tiles
      // measured 2x slower on [1024, 4096] with a large L3).
      int64_t wide = kWideTile;
      while (wide > 256 && L * wide * 8 > tuning().softmax_cache_bytes) wide /= 2;
      const int64_t nt = (inner + wide - 1) / wide;
      parallel_for(nouter * nt, std::max<int64_t>(1, kGrain / (L * wide)), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / nt, c0 = (t % nt) * wide;
          int tw = static_cast<int>(std::min<int64_t>(wide, inner - c0));
          softmax_cols_f32(base + lp.outer.offset(o) + c0, lp.stride, y + o * L * inner + c0, inner, L, tw, log);
        }
      });
      return;
    }
  }
  const int64_t ntiles = (inner + kTile - 1) / kTile;
  parallel_for(nouter * ntiles, std::max<int64_t>(1, kGrain / (L * kTile)), [&](int64_t b, int64_t e) {
    A mx[kTile], s[kTile];
    int64_t coff[kTile];
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / ntiles, c0 = (t % ntiles) * kTile;
      int tw = static_cast<int>(std::min<int64_t>(kTile, inner - c0));
      const T* p = base + lp.outer.offset(o);
      for (int c = 0; c < tw; ++c) {
        coff[c] = lp.inner.offset(c0 + c);
        mx[c] = -std::numeric_limits<A>::infinity();
        s[c] = 0;
      }
      for (int64_t l = 0; l < L; ++l)
        for (int c = 0; c < tw; ++c) mx[c] = nanmax(mx[c], static_cast<A>(p[l * lp.stride + coff[c]]));
      for (int64_t l = 0; l < L; ++l)
        for (int c = 0; c < tw; ++c) s[c] += std::exp(static_cast<A>(p[l * lp.stride + coff[c]]) - mx[c]);
      for (int c = 0; c < tw; ++c) s[c] = log ? std::log(s[c]) : A(1) / s[c];
      for (int64_t l = 0; l < L; ++l) {
        T* q = y + (o * L + l) * inner + c0;
        for (int c = 0; c < tw; ++c) {
          A v = static_cast<A>(p[l * lp.stride + coff[c]]);
          q[c] = static_cast<T>(log ? (v - mx[c]) - s[c] : std::exp(v - mx[c]) * s[c]);
        }
      }
    }
  });
}

}  // namespace

void k_Softmax(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_FLOAT(op.inputs[0].dtype, "Softmax", T, softmax_kernel<T>(op, in, out, false));
}
void k_LogSoftmax(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_FLOAT(op.inputs[0].dtype, "LogSoftmax", T, softmax_kernel<T>(op, in, out, true));
}

}  // namespace kiln::cpu
