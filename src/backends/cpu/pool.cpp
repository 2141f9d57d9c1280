// SPDX-License-Identifier: MIT OR Apache-2.0
// Pooling kernels (ops.def documents the attributes): max/avg pooling with windows, adaptive
// avg/max pooling and max unpooling, for 1 to 3 spatial dims (viewed as [D, H, W] with leading
// size-1 dims).
//
// Note [Pooling by output rows]
// Work is split into output rows (plane, od, oh), each computed independently, so results do
// not depend on the thread count. For a row, every kernel tap (i, j, t) is one contiguous,
// vectorisable pass over the output width: the input rows the window touches are first copied
// into a small buffer, padded with the identity (-inf or lowest for max, 0 for sums), converted
// to the accumulation type (f16/bf16 -> f32), and split into `stride` phases so that tap t
// reads phase (t*dil) % stride at offset (t*dil) / stride, i.e. unit-stride loads. Rows with
// stride 1, no padding and a contiguous f32/f64/int layout are read in place. Taps are visited
// in PyTorch's row-major window order with its update rule (`v > max || isnan(v)`), so values
// and indices match PyTorch, NaN included (the last NaN of a window wins).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/conv_impl.h"
#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/pool_vec.h"
#include "backends/cpu/vec.h"
#include "ir/attrs.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

/// Geometry of a pool op, normalised to three spatial dims [D, H, W].
struct Geo {
  int64_t N = 0, C = 0, planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  int64_t xs_n = 0, xs_c = 0, xs[3] = {0, 0, 0};  // input strides in elements

  Geo(const ir::TensorDesc& x, const ir::TensorDesc& y, int64_t nsp) {
    const int64_t lead = 3 - nsp;
    N = x.shape[0];
    C = x.shape[1];
    planes = N * C;
    xs_n = x.strides[0];
    xs_c = x.strides[1];
    for (int64_t d = 0; d < nsp; ++d) {
      in[lead + d] = x.shape[static_cast<size_t>(2 + d)];
      out[lead + d] = y.shape[static_cast<size_t>(2 + d)];
      xs[lead + d] = x.strides[static_cast<size_t>(2 + d)];
    }
  }
  /// Takes the window: kernel, stride, padding (and dilation, when the op has one).
  void window(const ir::PoolAttrs& at) {
    const int64_t nsp = at.nsp, lead = 3 - nsp;
    for (int64_t d = 0; d < nsp; ++d) {
      k[lead + d] = at.kernel[d];
      s[lead + d] = at.stride[d];
      p[lead + d] = at.padding[d];
      if (!at.dilation.empty()) dl[lead + d] = at.dilation[d];
    }
  }
  int64_t plane_offset(int64_t pl) const { return (pl / C) * xs_n + (pl % C) * xs_c; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

template <class A>
constexpr A lowest_value() {
  if constexpr (std::numeric_limits<A>::has_infinity)
    return -std::numeric_limits<A>::infinity();
  else
    return std::numeric_limits<A>::lowest();
}

/// dst[r * Lm + m] = padded[m * S + r] for r < S, m < Lm, where padded[q] = row[(q - pad) * sw]
/// inside the row and `fill` outside: the row padded and split into S stride phases.
template <class T, class A>
void build_phases(const T* __restrict row, int64_t sw, int64_t W, int64_t pad, int64_t S, int64_t Lm, A fill,
                  A* __restrict dst) {
  if (S == 2 && sw == 1) {
    // Both phases in one pass (vectorises as a de-interleave); the edges are bounds-checked.
    A* __restrict d0 = dst;
    A* __restrict d1 = dst + Lm;
    auto at = [&](int64_t q) { return q >= 0 && q < W ? static_cast<A>(row[q]) : fill; };
    const int64_t mlo = std::min(Lm, (pad + 1) / 2);  // first m with 2m - pad >= 0
    const int64_t mhi = W + pad >= 2 ? std::clamp((W + pad - 2) / 2 + 1, mlo, Lm) : mlo;
    for (int64_t m = 0; m < mlo; ++m) {
      d0[m] = at(2 * m - pad);
      d1[m] = at(2 * m + 1 - pad);
    }
    const T* __restrict p = row + 2 * mlo - pad;
    const int64_t n = mhi - mlo;
    A* __restrict e0 = d0 + mlo;
    A* __restrict e1 = d1 + mlo;
    for (int64_t m = 0; m < n; ++m) {
      e0[m] = static_cast<A>(p[2 * m]);
      e1[m] = static_cast<A>(p[2 * m + 1]);
    }
    for (int64_t m = mhi; m < Lm; ++m) {
      d0[m] = at(2 * m - pad);
      d1[m] = at(2 * m + 1 - pad);
    }
    return;
  }
  for (int64_t r = 0; r < S; ++r) {
    A* d = dst + r * Lm;
    // valid m: 0 <= m*S + r - pad < W
    int64_t lo = pad - r > 0 ? (pad - r + S - 1) / S : 0;
    int64_t hi = W - 1 + pad - r >= 0 ? (W - 1 + pad - r) / S + 1 : 0;  // exclusive
    lo = std::min(lo, Lm);
    hi = std::clamp(hi, lo, Lm);
    for (int64_t m = 0; m < lo; ++m) d[m] = fill;
    const T* src = row + (lo * S + r - pad) * sw;
    const int64_t step = S * sw;
    if (step == 1) {
      for (int64_t m = lo; m < hi; ++m) d[m] = static_cast<A>(src[m - lo]);
    } else {
      for (int64_t m = lo; m < hi; ++m) d[m] = static_cast<A>(src[(m - lo) * step]);
    }
    for (int64_t m = hi; m < Lm; ++m) d[m] = fill;
  }
}

/// First in-range position of a window starting at `start` with dilation `dl` (PyTorch's
/// index for windows whose values are all -inf).
inline int64_t first_valid(int64_t start, int64_t dl) {
  while (start < 0) start += dl;
  return start;
}

/// max that sticks at NaN (PyTorch's rule: a NaN wins).
template <class A>
inline A nanmax(A a, A v) {
  if constexpr (std::is_floating_point_v<A>)
    return ((v > a) | (v != v)) ? v : a;
  else
    return v > a ? v : a;
}

/// Calls f(id, ih) for each input row of the window whose first tap is at depth d0, height h0
/// (dilated taps), skipping rows outside the input (padding), in tap order.
template <class F>
void for_window_rows(const Geo& g, int64_t d0, int64_t h0, const F& f) {
  for (int64_t i = 0; i < g.k[0]; ++i) {
    const int64_t id = d0 + i * g.dl[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t j = 0; j < g.k[1]; ++j) {
      const int64_t ih = h0 + j * g.dl[1];
      if (ih >= 0 && ih < g.in[1]) f(id, ih);
    }
  }
}

/// Combines the input rows of one output row's window into row[0..W) (max or sum, converted
/// to A): the vertical half of Note [Pooling by output rows] for ops whose result does not
/// depend on the visiting order beyond rounding (max values, averages). Returns false when
/// the window holds no valid row.
template <bool IsMax, class T, class A>
bool combine_rows(const T* xp, const Geo& g, int64_t d0, int64_t h0, A* __restrict row) {
  const int64_t W = g.in[2];
  bool first = true;
  for_window_rows(g, d0, h0, [&](int64_t id, int64_t ih) {
    const T* __restrict src = xp + id * g.xs[0] + ih * g.xs[1];
    const int64_t sw = g.xs[2];
    if (first) {
      if (sw == 1)
        for (int64_t w = 0; w < W; ++w) row[w] = static_cast<A>(src[w]);
      else
        for (int64_t w = 0; w < W; ++w) row[w] = static_cast<A>(src[w * sw]);
      first = false;
    } else if (sw == 1) {
      if constexpr (IsMax)
        for (int64_t w = 0; w < W; ++w) row[w] = nanmax(row[w], static_cast<A>(src[w]));
      else
        for (int64_t w = 0; w < W; ++w) row[w] += static_cast<A>(src[w]);
    } else {
      if constexpr (IsMax)
        for (int64_t w = 0; w < W; ++w) row[w] = nanmax(row[w], static_cast<A>(src[w * sw]));
      else
        for (int64_t w = 0; w < W; ++w) row[w] += static_cast<A>(src[w * sw]);
    }
  });
  return !first;
}

// ---- MaxPool ------------------------------------------------------------------------------

/// Max pooling without indices: the window's rows are reduced first (contiguous passes over the
/// full width), then the horizontal taps run over the stride phases of that one row.
template <class T>
void max_pool_values(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  using A = acc_t<T>;
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], op.inputs[0]));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  const int64_t W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t S = g.s[2], PW = g.p[2], KW = g.k[2], DW = g.dl[2];
  const int64_t Lm = OW + ((KW - 1) * DW) / S;
  const A lo = lowest_value<A>();
  const int64_t units = g.planes * OD * OH;
  const int64_t work = std::max<int64_t>(1, g.k[0] * g.k[1] * W + KW * OW);
  parallel_for(units, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    std::vector<A> rowbuf(static_cast<size_t>(W)), ph(static_cast<size_t>(S * Lm)), acc(static_cast<size_t>(OW));
    A* __restrict row = rowbuf.data();
    A* __restrict a = acc.data();
    for (int64_t u = b; u < e; ++u) {
      const int64_t pl = u / (OD * OH), r = u % (OD * OH), od = r / OH, oh = r % OH;
      T* __restrict yo = y + u * OW;
      if (!combine_rows<true>(x + g.plane_offset(pl), g, od * g.s[0] - g.p[0], oh * g.s[1] - g.p[1], row)) {
        for (int64_t o = 0; o < OW; ++o) yo[o] = static_cast<T>(lo);
        continue;
      }
      build_phases(row, 1, W, PW, S, Lm, lo, ph.data());
      for (int64_t t = 0; t < KW; ++t) {
        const int64_t off = t * DW;
        const A* __restrict src = ph.data() + (off % S) * Lm + off / S;
        if (t == 0)
          for (int64_t o = 0; o < OW; ++o) a[o] = src[o];
        else
          for (int64_t o = 0; o < OW; ++o) a[o] = nanmax(a[o], src[o]);
      }
      for (int64_t o = 0; o < OW; ++o) yo[o] = static_cast<T>(a[o]);
    }
  });
}

template <class T, bool Idx>
void max_pool_impl(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  using A = acc_t<T>;
  using tap_t = std::conditional_t<sizeof(A) == 8, int64_t, int32_t>;
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], op.inputs[0]));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  int64_t* yi = Idx ? reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1])) : nullptr;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t S = g.s[2], PW = g.p[2], KW = g.k[2], DW = g.dl[2];
  const int64_t Lm = OW + ((KW - 1) * DW) / S;
  const bool direct = std::is_same_v<T, A> && S == 1 && PW == 0 && g.xs[2] == 1 && OW - 1 + (KW - 1) * DW < W;
  const A lo = lowest_value<A>();
  const int64_t units = g.planes * OD * OH;
  const int64_t taps = g.k[0] * g.k[1] * KW;
  parallel_for(units, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, OW * taps)), [&](int64_t b, int64_t e) {
    std::vector<A> acc(static_cast<size_t>(OW)), ph(direct ? 0 : static_cast<size_t>(S * Lm));
    std::vector<tap_t> tap(Idx ? static_cast<size_t>(OW) : 0);
    for (int64_t u = b; u < e; ++u) {
      const int64_t pl = u / (OD * OH), r = u % (OD * OH), od = r / OH, oh = r % OH;
      const T* xp = x + g.plane_offset(pl);
      const int64_t d0 = od * g.s[0] - g.p[0], h0 = oh * g.s[1] - g.p[1];
      A* a = acc.data();
      tap_t* tp = tap.data();
      std::fill(acc.begin(), acc.end(), lo);
      if constexpr (Idx) std::fill(tap.begin(), tap.end(), tap_t(-1));
      for (int64_t i = 0; i < g.k[0]; ++i) {
        const int64_t id = d0 + i * g.dl[0];
        if (id < 0 || id >= D) continue;
        for (int64_t j = 0; j < g.k[1]; ++j) {
          const int64_t ih = h0 + j * g.dl[1];
          if (ih < 0 || ih >= H) continue;
          const T* row = xp + id * g.xs[0] + ih * g.xs[1];
          if (!direct) build_phases(row, g.xs[2], W, PW, S, Lm, lo, ph.data());
          for (int64_t t = 0; t < KW; ++t) {
            const int64_t off = t * DW;
            const A* src;
            if constexpr (std::is_same_v<T, A>) {
              src = direct ? row + off : ph.data() + (off % S) * Lm + off / S;
            } else {
              src = ph.data() + (off % S) * Lm + off / S;
            }
            const tap_t tid = static_cast<tap_t>((i * g.k[1] + j) * KW + t);
            A* __restrict a = acc.data();
            tap_t* __restrict tp = tap.data();
            for (int64_t o = 0; o < OW; ++o) {
              const A v = src[o];
              bool upd;
              if constexpr (std::is_floating_point_v<A>)
                upd = (v > a[o]) | (v != v);
              else
                upd = v > a[o];
              a[o] = upd ? v : a[o];
              if constexpr (Idx) tp[o] = upd ? tid : tp[o];
            }
          }
        }
      }
      T* yo = y + u * OW;
      for (int64_t o = 0; o < OW; ++o) yo[o] = static_cast<T>(a[o]);
      if constexpr (Idx) {
        int64_t* io = yi + u * OW;
        const int64_t dv = first_valid(d0, g.dl[0]), hv = first_valid(h0, g.dl[1]);
        for (int64_t o = 0; o < OW; ++o) {
          int64_t t = tp[o];
          if (t < 0) {
            io[o] = (dv * H + hv) * W + first_valid(o * S - PW, DW);
          } else {
            const int64_t tt = t % KW, jj = (t / KW) % g.k[1], ii = t / (KW * g.k[1]);
            io[o] = ((d0 + ii * g.dl[0]) * H + h0 + jj * g.dl[1]) * W + o * S - PW + tt * DW;
          }
        }
      }
    }
  });
}

// Note [Max pool fast path]
// The common CNN case -- unit-stride rows, width stride 2, width kernel 2 or 3, no width
// dilation, f32/f64 -- skips the phase buffers. An output row whose window rows all lie inside
// the input (one depth tap, height kernel <= 3; any height stride/dilation) is computed column
// by column from the rows in place: with indices by max_fused_row (every tap of a column in
// max_pool_impl's order, row by row, with its rule `v > max || isnan(v)`, the running max starting
// at the first tap, which is what the generic path's -inf start gives bitwise). The interior
// columns (all taps inside the row) of f32 rows run in Highway kernels (pool_hwy.cpp:
// de-interleaving loads, the same visiting order and rule); padded/ceil_mode edge columns run
// scalar with bounds checks. Other rows (height padding, 3-d windows) update a running max and
// i32 index per valid input row (max_row_pass), starting at -inf and the window's first valid
// position like max_pool_impl. Indices are built as i32 (planes below 2^31 elements) and widened
// on store. Values only, every row reduces its window rows per column first, then the taps, in
// max_pool_values' order (so NaN payloads and signed zeros win as there): f32 rows in batches of
// 8 consecutive output rows, whole, in SIMD (max_pool_rows_values_f32: every row's column maxima
// into a buffer padded with -inf, then the taps from it, so no load waits on a fresh store),
// f64 rows by combine_rows and max_row_pass.

/// Whether the fast path applies (Note [Max pool fast path]).
template <class T>
bool max_pool_fast_ok(const Geo& g) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return false;
  } else {
    return g.xs[2] == 1 && g.s[2] == 2 && g.dl[2] == 1 && (g.k[2] == 2 || g.k[2] == 3) &&
           g.in[0] * g.in[1] * g.in[2] < (int64_t{1} << 31);
  }
}

/// Updates m/ix over output columns [0, OW) with the KW taps of one input row `row` (width W,
/// padding PW) whose flattened row start is `rb` (Note [Max pool fast path]).
template <int KW, bool Idx, class A>
void max_row_pass(const A* __restrict row, int64_t W, int64_t PW, int64_t OW, int32_t rb, A* __restrict m,
                  int32_t* __restrict ix) {
  auto upd = [](A v, A cur) { return (v > cur) | (v != v); };
  auto edge = [&](int64_t o) {
    for (int t = 0; t < KW; ++t) {
      const int64_t c = 2 * o - PW + t;
      if (c < 0 || c >= W) continue;
      const A v = row[c];
      if (upd(v, m[o])) {
        m[o] = v;
        if constexpr (Idx) ix[o] = rb + static_cast<int32_t>(c);
      }
    }
  };
  // Columns with all taps inside the row: 2o - PW >= 0 and 2o - PW + KW - 1 <= W - 1.
  const int64_t olo = std::min<int64_t>(OW, (PW + 1) / 2);
  const int64_t ohi = W - KW + PW >= 0 ? std::clamp<int64_t>((W - KW + PW) / 2 + 1, olo, OW) : olo;
  for (int64_t o = 0; o < olo; ++o) edge(o);
  const A* __restrict r = row + 2 * olo - PW;
  A* __restrict mm = m + olo;
  int32_t* __restrict ii = ix + olo;
  const int32_t c0 = rb + static_cast<int32_t>(2 * olo - PW);
  const int64_t n = ohi - olo;
  for (int64_t o = 0; o < n; ++o) {
    A a = mm[o];
    int32_t k = Idx ? ii[o] : 0;
    const int32_t c = c0 + 2 * static_cast<int32_t>(o);
    const A v0 = r[2 * o];
    bool u = upd(v0, a);
    a = u ? v0 : a;
    if constexpr (Idx) k = u ? c : k;
    const A v1 = r[2 * o + 1];
    u = upd(v1, a);
    a = u ? v1 : a;
    if constexpr (Idx) k = u ? c + 1 : k;
    if constexpr (KW == 3) {
      const A v2 = r[2 * o + 2];
      u = upd(v2, a);
      a = u ? v2 : a;
      if constexpr (Idx) k = u ? c + 2 : k;
    }
    mm[o] = a;
    if constexpr (Idx) ii[o] = k;
  }
  for (int64_t o = ohi; o < OW; ++o) edge(o);
}

/// Values and indices of one output row whose window rows `rows[0..KH)` (flattened starts `rb`)
/// all lie inside the input: every output column is computed in one pass over its KH*KW taps,
/// row by row as max_pool_impl, and stored, so the interior is one vectorisable loop with no
/// per-row buffers (Note [Max pool fast path]).
template <int KH, int KW, class A>
void max_fused_row(const A* const* rows, const int32_t* rb, int64_t W, int64_t PW, int64_t OW, A* __restrict y,
                   int64_t* __restrict yi) {
  auto upd = [](A v, A cur) { return (v > cur) | (v != v); };
  auto edge = [&](int64_t o) {
    A a = lowest_value<A>();
    int32_t k = rb[0] + static_cast<int32_t>(std::max<int64_t>(2 * o - PW, 0));
    for (int j = 0; j < KH; ++j)
      for (int t = 0; t < KW; ++t) {
        const int64_t c = 2 * o - PW + t;
        if (c < 0 || c >= W) continue;
        const A v = rows[j][c];
        if (upd(v, a)) {
          a = v;
          k = rb[j] + static_cast<int32_t>(c);
        }
      }
    y[o] = a;
    yi[o] = k;
  };
  const int64_t olo = std::min<int64_t>(OW, (PW + 1) / 2);
  const int64_t ohi = W - KW + PW >= 0 ? std::clamp<int64_t>((W - KW + PW) / 2 + 1, olo, OW) : olo;
  for (int64_t o = 0; o < olo; ++o) edge(o);
  const int64_t n = ohi - olo, c0 = 2 * olo - PW;
  const A* __restrict r0 = rows[0] + c0;
  const A* __restrict r1 = rows[KH > 1 ? 1 : 0] + c0;
  const A* __restrict r2 = rows[KH > 2 ? 2 : 0] + c0;
  // The third tap read through its own pointer: a separate stride-2 stream the vectoriser
  // accepts (an overlapping r[2o + 2] in the same group defeats it).
  const A* __restrict r0c = r0 + 2;
  const A* __restrict r1c = r1 + 2;
  const A* __restrict r2c = r2 + 2;
  A* __restrict yo = y + olo;
  int64_t* __restrict io = yi + olo;
  int32_t b[3] = {rb[0] + static_cast<int32_t>(c0), 0, 0};
  if constexpr (KH > 1) b[1] = rb[1] + static_cast<int32_t>(c0);
  if constexpr (KH > 2) b[2] = rb[2] + static_cast<int32_t>(c0);
  const int32_t b0 = b[0], b1 = b[1], b2 = b[2];
  bool done = false;
  if constexpr (std::is_same_v<A, float>) {
    const float* vr[3] = {r0, r1, r2};
    done = vec::max_pool_interior_f32(vr, b, KH, KW, n, yo, io);
  }
  for (int64_t o = 0; o < (done ? 0 : n); ++o) {
    const int32_t o2 = 2 * static_cast<int32_t>(o);
    A a = r0[2 * o];
    int32_t k = b0 + o2;
    auto step = [&](A v, int32_t pos) {
      const bool u = upd(v, a);
      a = u ? v : a;
      k = u ? pos : k;
    };
    step(r0[2 * o + 1], b0 + o2 + 1);
    if constexpr (KW == 3) step(r0c[2 * o], b0 + o2 + 2);
    if constexpr (KH > 1) {
      step(r1[2 * o], b1 + o2);
      step(r1[2 * o + 1], b1 + o2 + 1);
      if constexpr (KW == 3) step(r1c[2 * o], b1 + o2 + 2);
    }
    if constexpr (KH > 2) {
      step(r2[2 * o], b2 + o2);
      step(r2[2 * o + 1], b2 + o2 + 1);
      if constexpr (KW == 3) step(r2c[2 * o], b2 + o2 + 2);
    }
    yo[o] = a;
    io[o] = k;
  }
  for (int64_t o = ohi; o < OW; ++o) edge(o);
}

/// Max pooling (values, and indices when Idx) on the fast path (Note [Max pool fast path]).
template <class T, bool Idx, int KW>
void max_pool_fast(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], op.inputs[0]));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  int64_t* yi = Idx ? reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1])) : nullptr;
  const int64_t H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], PW = g.p[2];
  const T lo = lowest_value<T>();
  const int64_t units = g.planes * OD * OH;
  const int64_t taps = g.k[0] * g.k[1] * KW;
  // Output rows whose window rows all lie inside the input run fused (one depth tap only).
  using Fused = void (*)(const T* const*, const int32_t*, int64_t, int64_t, int64_t, T*, int64_t*);
  Fused fused = nullptr;
  if constexpr (Idx) {
    if (g.k[0] == 1 && g.p[0] == 0) {
      if (g.k[1] == 1) fused = &max_fused_row<1, KW, T>;
      if (g.k[1] == 2) fused = &max_fused_row<2, KW, T>;
      if (g.k[1] == 3) fused = &max_fused_row<3, KW, T>;
    }
  }
  bool batched = false;  // the SIMD kernel of whole values-only f32 rows runs (a probe of no rows)
  if constexpr (!Idx && std::is_same_v<T, float>)
    batched = vec::max_pool_rows_values_f32(nullptr, nullptr, 0, KW, W, PW, OW, nullptr, nullptr);
  parallel_for(units, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, OW * taps)), [&](int64_t b, int64_t e) {
    std::vector<int32_t> tap(Idx ? static_cast<size_t>(OW) : 0);
    std::vector<T> rowbuf(Idx ? 0 : static_cast<size_t>(W));
    // Values-only f32 rows run in batches of consecutive output rows (max_pool_rows_values_f32).
    constexpr int64_t kBatch = 8;
    std::vector<const T*> wrows(batched ? static_cast<size_t>(kBatch * g.k[0] * g.k[1]) : 0);
    std::vector<int32_t> wn(batched ? kBatch : 0);
    std::vector<float> vbuf(batched ? static_cast<size_t>(kBatch * vec::max_pool_rows_stride(W, PW, OW)) : 0);
    int64_t nb = 0, nrow = 0, first = 0;
    auto flush = [&] {
      if constexpr (std::is_same_v<T, float>)
        if (nb) vec::max_pool_rows_values_f32(wrows.data(), wn.data(), nb, KW, W, PW, OW, vbuf.data(), y + first * OW);
      nb = nrow = 0;
    };
    int32_t* ix = tap.data();
    // (plane, od, oh) of unit b, then stepped along (no divisions per row).
    int64_t pl = b / (OD * OH), od = (b % (OD * OH)) / OH, oh = b % OH;
    const T* xp = x + g.plane_offset(pl);
    for (int64_t u = b; u < e; ++u) {
      if (u != b && ++oh == OH) {
        oh = 0;
        if (++od == OD) {
          od = 0;
          xp = x + g.plane_offset(++pl);
        }
      }
      const int64_t d0 = od * g.s[0] - g.p[0], h0 = oh * g.s[1] - g.p[1];
      T* __restrict m = y + u * OW;  // the running max lives in the output row
      if (fused && h0 >= 0 && h0 + (g.k[1] - 1) * g.dl[1] < H) {
        const T* rows[3];
        int32_t rb[3];
        for (int64_t j = 0; j < g.k[1]; ++j) {
          rows[j] = xp + d0 * g.xs[0] + (h0 + j * g.dl[1]) * g.xs[1];
          rb[j] = static_cast<int32_t>((d0 * H + h0 + j * g.dl[1]) * W);
        }
        fused(rows, rb, W, PW, OW, m, yi + u * OW);
        continue;
      }
      if (batched) {
        int32_t nr = 0;
        for_window_rows(g, d0, h0, [&](int64_t id, int64_t ih) {
          wrows[static_cast<size_t>(nrow + nr++)] = xp + id * g.xs[0] + ih * g.xs[1];
        });
        if (nr > 0) {
          if (nb == 0) first = u;
          wn[static_cast<size_t>(nb++)] = nr;
          nrow += nr;
          if (nb == kBatch) flush();
          continue;
        }
        flush();  // the rows before this one (whose window holds no input row)
      }
      std::fill(m, m + OW, lo);
      if constexpr (!Idx) {
        // Values only: rows first, then the taps, in max_pool_values' order (same NaN and
        // signed-zero winners).
        if (combine_rows<true>(xp, g, d0, h0, rowbuf.data()))
          max_row_pass<KW, false>(rowbuf.data(), W, PW, OW, 0, m, ix);
        continue;
      }
      if constexpr (Idx) {
        const int64_t first = (first_valid(d0, g.dl[0]) * H + first_valid(h0, g.dl[1])) * W;
        for (int64_t o = 0; o < OW; ++o) ix[o] = static_cast<int32_t>(first + std::max<int64_t>(2 * o - PW, 0));
      }
      for_window_rows(g, d0, h0, [&](int64_t id, int64_t ih) {
        max_row_pass<KW, Idx>(xp + id * g.xs[0] + ih * g.xs[1], W, PW, OW, static_cast<int32_t>((id * H + ih) * W), m,
                              ix);
      });
      if constexpr (Idx) {
        int64_t* __restrict io = yi + u * OW;
        for (int64_t o = 0; o < OW; ++o) io[o] = ix[o];
      }
    }
    flush();
  });
}

/// Runs the fast path when it applies; false otherwise.
template <class T, bool Idx>
bool try_max_pool_fast(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  if (!max_pool_fast_ok<T>(g)) return false;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (g.k[2] == 2)
      max_pool_fast<T, Idx, 2>(op, in, out, g);
    else
      max_pool_fast<T, Idx, 3>(op, in, out, g);
  }
  return true;
}

// ---- AvgPool ------------------------------------------------------------------------------

template <class T>
void avg_pool_impl(const ir::Op& op, void* const* in, void* const* out, const Geo& g, bool count_include_pad,
                   int64_t divisor) {
  using A = std::conditional_t<std::is_integral_v<T>, int64_t, acc_t<T>>;
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], op.inputs[0]));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t S = g.s[2], PW = g.p[2], KW = g.k[2];
  const int64_t Lm = OW + (KW - 1) / S;
  const int64_t units = g.planes * OD * OH;
  // Width part of the divisor per output column: (window size clipped to W + pad, valid count).
  std::vector<int64_t> wpool(static_cast<size_t>(OW)), wcnt(static_cast<size_t>(OW));
  for (int64_t o = 0; o < OW; ++o) {
    int64_t ws = o * S - PW, we = std::min(ws + KW, W + PW);
    wpool[static_cast<size_t>(o)] = we - ws;
    wcnt[static_cast<size_t>(o)] = std::min(we, W) - std::max<int64_t>(ws, 0);
  }
  const int64_t work = std::max<int64_t>(1, g.k[0] * g.k[1] * W + KW * OW);
  parallel_for(units, std::max<int64_t>(1, kGrain / work), [&](int64_t b, int64_t e) {
    std::vector<A> rowbuf(static_cast<size_t>(W)), ph(static_cast<size_t>(S * Lm)), acc(static_cast<size_t>(OW));
    A* __restrict row = rowbuf.data();
    A* __restrict a = acc.data();
    for (int64_t u = b; u < e; ++u) {
      const int64_t pl = u / (OD * OH), r = u % (OD * OH), od = r / OH, oh = r % OH;
      const int64_t d0 = od * g.s[0] - g.p[0], h0 = oh * g.s[1] - g.p[1];
      // Rows first (contiguous sums over the full width), then the horizontal taps.
      if (combine_rows<false>(x + g.plane_offset(pl), g, d0, h0, row)) {
        build_phases(row, 1, W, PW, S, Lm, A(0), ph.data());
        for (int64_t t = 0; t < KW; ++t) {
          const A* __restrict src = ph.data() + (t % S) * Lm + t / S;
          if (t == 0)
            for (int64_t o = 0; o < OW; ++o) a[o] = src[o];
          else
            for (int64_t o = 0; o < OW; ++o) a[o] += src[o];
        }
      } else {
        std::fill(acc.begin(), acc.end(), A(0));
      }
      const int64_t de = std::min(d0 + g.k[0], D + g.p[0]), he = std::min(h0 + g.k[1], H + g.p[1]);
      const int64_t dhpool = (de - d0) * (he - h0);
      const int64_t dhcnt = (std::min(de, D) - std::max<int64_t>(d0, 0)) * (std::min(he, H) - std::max<int64_t>(h0, 0));
      T* __restrict yo = y + u * OW;
      for (int64_t o = 0; o < OW; ++o) {
        const int64_t dv = divisor             ? divisor
                           : count_include_pad ? dhpool * wpool[static_cast<size_t>(o)]
                                               : dhcnt * wcnt[static_cast<size_t>(o)];
        yo[o] = static_cast<T>(a[o] / static_cast<A>(dv));
      }
    }
  });
}

// ---- adaptive pools -----------------------------------------------------------------------

inline int64_t ad_start(int64_t a, int64_t b, int64_t c) { return (a / b) * c + ((a % b) * c) / b; }
inline int64_t ad_end(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

/// Global average of f32 planes that are contiguous (output 1 x 1 x 1): one vectorised sum per
/// plane, planes split over the threads (the result of a plane never depends on the split).
bool global_avg_f32(const float* x, float* y, const Geo& g) {
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], n = D * H * W;
  if (g.out[0] * g.out[1] * g.out[2] != 1 || n == 0 || g.xs[2] != 1 || (H > 1 && g.xs[1] != W) ||
      (D > 1 && g.xs[0] != H * W))
    return false;
  parallel_for(g.planes, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) y[pl] = vec::sum_f32(x + g.plane_offset(pl), n) / static_cast<float>(n);
  });
  return true;
}

template <class T>
void adaptive_avg_impl(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  using A = acc_t<T>;
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], op.inputs[0]));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  if constexpr (std::is_same_v<T, float>)
    if (global_avg_f32(x, y, g)) return;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t units = g.planes * OD * OH;
  const int64_t per_unit =
      std::max<int64_t>(1, (D / std::max<int64_t>(OD, 1) + 1) * (H / std::max<int64_t>(OH, 1) + 1) * W);
  parallel_for(units, std::max<int64_t>(1, kGrain / per_unit), [&](int64_t b, int64_t e) {
    std::vector<A> col(static_cast<size_t>(W));
    A* cs = col.data();
    for (int64_t u = b; u < e; ++u) {
      const int64_t pl = u / (OD * OH), r = u % (OD * OH), od = r / OH, oh = r % OH;
      const T* xp = x + g.plane_offset(pl);
      const int64_t ds = ad_start(od, OD, D), de = ad_end(od, OD, D);
      const int64_t hs = ad_start(oh, OH, H), he = ad_end(oh, OH, H);
      std::fill(col.begin(), col.end(), A(0));
      for (int64_t id = ds; id < de; ++id)
        for (int64_t ih = hs; ih < he; ++ih) {
          const T* row = xp + id * g.xs[0] + ih * g.xs[1];
          if (g.xs[2] == 1) {
            for (int64_t w = 0; w < W; ++w) cs[w] += static_cast<A>(row[w]);
          } else {
            for (int64_t w = 0; w < W; ++w) cs[w] += static_cast<A>(row[w * g.xs[2]]);
          }
        }
      const A dh = static_cast<A>((de - ds) * (he - hs));
      T* yo = y + u * OW;
      for (int64_t o = 0; o < OW; ++o) {
        const int64_t ws = ad_start(o, OW, W), we = ad_end(o, OW, W);
        A s = 0;
        for (int64_t w = ws; w < we; ++w) s += cs[w];
        yo[o] = static_cast<T>(s / (dh * static_cast<A>(we - ws)));
      }
    }
  });
}

template <class T, bool Idx>
void adaptive_max_impl(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  using A = acc_t<T>;
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], op.inputs[0]));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  int64_t* yi = Idx ? reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1])) : nullptr;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t units = g.planes * OD * OH;
  const int64_t per_unit =
      std::max<int64_t>(1, (D / std::max<int64_t>(OD, 1) + 1) * (H / std::max<int64_t>(OH, 1) + 1) * W);
  parallel_for(units, std::max<int64_t>(1, kGrain / per_unit), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t pl = u / (OD * OH), r = u % (OD * OH), od = r / OH, oh = r % OH;
      const T* xp = x + g.plane_offset(pl);
      const int64_t ds = ad_start(od, OD, D), de = ad_end(od, OD, D);
      const int64_t hs = ad_start(oh, OH, H), he = ad_end(oh, OH, H);
      for (int64_t o = 0; o < OW; ++o) {
        const int64_t ws = ad_start(o, OW, W), we = ad_end(o, OW, W);
        A m = lowest_value<A>();
        int64_t mi = (ds * H + hs) * W + ws;
        for (int64_t id = ds; id < de; ++id)
          for (int64_t ih = hs; ih < he; ++ih) {
            const T* row = xp + id * g.xs[0] + ih * g.xs[1];
            for (int64_t w = ws; w < we; ++w) {
              const A v = static_cast<A>(row[w * g.xs[2]]);
              bool upd;
              if constexpr (std::is_floating_point_v<A>)
                upd = v > m || v != v;
              else
                upd = v > m;
              if (upd) {
                m = v;
                mi = (id * H + ih) * W + w;
              }
            }
          }
        y[u * OW + o] = static_cast<T>(m);
        if constexpr (Idx) yi[u * OW + o] = mi;
      }
    }
  });
}

// ---- MaxUnpool ----------------------------------------------------------------------------

template <class T>
void max_unpool_impl(const ir::Op& op, void* const* in, void* const* out, int64_t nsp) {
  const ir::TensorDesc& xd = op.inputs[0];
  const ir::TensorDesc& id = op.inputs[1];
  const T* x = reinterpret_cast<const T*>(base_ptr(in[0], xd));
  const int64_t* ix = reinterpret_cast<const int64_t*>(base_ptr(in[1], id));
  T* y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  const int64_t N = xd.shape[0], C = xd.shape[1], planes = N * C;
  const int64_t outsz = shape_numel(op.outputs[0].shape) / std::max<int64_t>(planes, 1);
  // Spatial dims of the input as [D, H, W] with strides for x and for the indices.
  int64_t sz[3] = {1, 1, 1}, xs[3] = {0, 0, 0}, is[3] = {0, 0, 0};
  for (int64_t d = 0; d < nsp; ++d) {
    size_t k = static_cast<size_t>(2 + d);
    sz[3 - nsp + d] = xd.shape[k];
    xs[3 - nsp + d] = xd.strides[k];
    is[3 - nsp + d] = id.strides[k];
  }
  const int64_t inplane = sz[0] * sz[1] * sz[2];
  std::atomic<bool> bad{false};
  auto index_at = [&](int64_t pl, int64_t a, int64_t h, int64_t w) {
    return ix[(pl / C) * id.strides[0] + (pl % C) * id.strides[1] + a * is[0] + h * is[1] + w * is[2]];
  };
  // Planes whose values and indices are both dense run as one flat loop.
  auto dense = [&](const int64_t* st) {
    return (sz[2] == 1 || st[2] == 1) && (sz[1] == 1 || st[1] == sz[2]) && (sz[0] == 1 || st[0] == sz[1] * sz[2]);
  };
  const bool flat = dense(xs) && dense(is);
  const auto usz = static_cast<uint64_t>(outsz);
  // Per (n, c) plane: zero the plane (cache-resident), then write each value at its index.
  parallel_for(planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inplane + outsz)), [&](int64_t b, int64_t e) {
    bool any_bad = false;
    for (int64_t pl = b; pl < e; ++pl) {
      const T* __restrict xp = x + (pl / C) * xd.strides[0] + (pl % C) * xd.strides[1];
      const int64_t* __restrict ip = ix + (pl / C) * id.strides[0] + (pl % C) * id.strides[1];
      T* __restrict yp = y + pl * outsz;
      std::fill(yp, yp + outsz, T(0));
      if (flat) {
        for (int64_t q = 0; q < inplane; ++q) {
          const int64_t v = ip[q];
          if (static_cast<uint64_t>(v) >= usz) {
            any_bad = true;
            continue;
          }
          yp[v] = xp[q];
        }
        continue;
      }
      for (int64_t a = 0; a < sz[0]; ++a)
        for (int64_t h = 0; h < sz[1]; ++h) {
          const T* xr = xp + a * xs[0] + h * xs[1];
          const int64_t* ir = ip + a * is[0] + h * is[1];
          for (int64_t w = 0; w < sz[2]; ++w) {
            const int64_t v = ir[w * is[2]];
            if (static_cast<uint64_t>(v) >= usz) {
              any_bad = true;
              continue;
            }
            yp[v] = xr[w * xs[2]];
          }
        }
    }
    if (any_bad) bad.store(true, std::memory_order_relaxed);
  });
  if (bad.load()) {
    // Report the first invalid index in element order (found again serially, off the hot path).
    int64_t first = 0;
    bool found = false;
    for (int64_t pl = 0; pl < planes && !found; ++pl)
      for (int64_t a = 0; a < sz[0] && !found; ++a)
        for (int64_t h = 0; h < sz[1] && !found; ++h)
          for (int64_t w = 0; w < sz[2] && !found; ++w) {
            const int64_t v = index_at(pl, a, h, w);
            if (v < 0 || v >= outsz) {
              first = v;
              found = true;
            }
          }
    std::ostringstream os;
    const Shape& os_shape = op.outputs[0].shape;
    for (size_t d = 2; d < os_shape.size(); ++d) os << (d > 2 ? "x" : "") << os_shape[d];
    const std::string api = "max_unpool" + std::to_string(nsp) + "d";
    KILN_CHECK(false, api.c_str(),
               "Found an invalid max index: " << first << " (output volumes are of size " << os.str() << ")");
  }
}

/// A 2-d f32 max pool (values only) read from the blocked form a convolution kept of its input
/// (Note [Kept blocked outputs] in conv_onednn.cpp); false, doing nothing, when there is none.
bool max_pool_kept(const ir::Op& op, void* const* in, void* const* out, const Geo& g) {
  const ir::TensorDesc &x = op.inputs[0], &y = op.outputs[0];
  if (!x.stamp || x.dtype != DType::F32 || !x.is_contiguous() || !y.is_contiguous() || g.dl[1] != 1 || g.dl[2] != 1)
    return false;
  conv::PoolAfter pool;
  for (int i = 0; i < 2; ++i) {
    pool.k[i] = g.k[1 + i];
    pool.s[i] = g.s[1 + i];
    pool.p[i] = g.p[1 + i];
    pool.out[i] = g.out[1 + i];
  }
  const int64_t dims[4] = {g.N, g.C, g.in[1], g.in[2]};
  return conv::onednn_maxpool_kept(reinterpret_cast<const float*>(base_ptr(in[0], x)), x.stamp, dims, pool,
                                   reinterpret_cast<float*>(base_ptr(out[0], y)), y.stamp);
}

}  // namespace

void k_MaxPool(const ir::Op& op, void* const* in, void* const* out) {
  const ir::PoolAttrs at = ir::PoolAttrs::decode(op);
  const int64_t nsp = at.nsp;
  Geo g(op.inputs[0], op.outputs[0], nsp);
  g.window(at);
  const bool idx = at.with_indices;
  if (op.outputs[0].numel() == 0) return;
  if (!idx && nsp == 2 && max_pool_kept(op, in, out, g)) return;
  KILN_SWITCH_NUMERIC(op.inputs[0].dtype, "max_pool", T, {
    if (idx) {
      if (!try_max_pool_fast<T, true>(op, in, out, g)) max_pool_impl<T, true>(op, in, out, g);
    } else {
      if (!try_max_pool_fast<T, false>(op, in, out, g)) max_pool_values<T>(op, in, out, g);
    }
  });
}

void k_AvgPool(const ir::Op& op, void* const* in, void* const* out) {
  const ir::PoolAttrs at = ir::PoolAttrs::decode(op);
  Geo g(op.inputs[0], op.outputs[0], at.nsp);
  g.window(at);
  const bool cip = at.count_include_pad;
  const int64_t divisor = at.divisor;
  if (op.outputs[0].numel() == 0) return;
  KILN_SWITCH_NUMERIC(op.inputs[0].dtype, "avg_pool", T, avg_pool_impl<T>(op, in, out, g, cip, divisor));
}

void k_AdaptiveAvgPool(const ir::Op& op, void* const* in, void* const* out) {
  Geo g(op.inputs[0], op.outputs[0], ir::PoolAttrs::decode(op).nsp);
  if (op.outputs[0].numel() == 0) return;
  KILN_SWITCH_FLOAT(op.inputs[0].dtype, "adaptive_avg_pool", T, adaptive_avg_impl<T>(op, in, out, g));
}

void k_AdaptiveMaxPool(const ir::Op& op, void* const* in, void* const* out) {
  const ir::PoolAttrs at = ir::PoolAttrs::decode(op);
  Geo g(op.inputs[0], op.outputs[0], at.nsp);
  const bool idx = at.with_indices;
  if (op.outputs[0].numel() == 0) return;
  KILN_SWITCH_NUMERIC(op.inputs[0].dtype, "adaptive_max_pool", T, {
    if (idx)
      adaptive_max_impl<T, true>(op, in, out, g);
    else
      adaptive_max_impl<T, false>(op, in, out, g);
  });
}

void k_MaxUnpool(const ir::Op& op, void* const* in, void* const* out) {
  if (op.outputs[0].numel() == 0) return;
  KILN_SWITCH_NUMERIC(op.inputs[0].dtype, "max_unpool", T,
                      max_unpool_impl<T>(op, in, out, ir::PoolAttrs::decode(op).nsp));
}

}  // namespace kiln::cpu
