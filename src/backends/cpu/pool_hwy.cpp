// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway kernels of max pooling's fast path (Note [Max pool fast path] in pool.cpp), compiled
// for several x86 targets and chosen at run time: the interior columns of one f32 output row
// with indices, and whole values-only f32 rows in batches. Each vector covers N output columns:
// LoadInterleaved2 splits a row into its even (tap 0) and odd (tap 1) columns, a second one from
// one column further gives tap 2; taps are visited in the scalar order with the scalar rule
// (`v > max || isnan`), so values and indices are bitwise those of the portable loop.
#include <algorithm>
#include <cmath>

#include "backends/cpu/pool_vec.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/pool_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target before highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::vec::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
/// Columns [o, o + N) of the row: see max_pool_interior_f32.
template <int KH, int KW, class D>
HWY_INLINE void MaxCols(D d, const float* const* rows, const int32_t* rb, int64_t o, float* y, int64_t* yi) {
  const hn::RebindToSigned<D> di;
  using VF = hn::Vec<D>;
  using VI = hn::Vec<decltype(di)>;
  const VI lane2 = hn::ShiftLeft<1>(hn::Iota(di, 0));  // 0, 2, 4, ...
  VF a;
  VI k;
  auto sel = [&](VF v, VI pos) {
    const auto m = hn::Or(hn::Gt(v, a), hn::IsNaN(v));
    a = hn::IfThenElse(m, v, a);
    k = hn::IfThenElse(hn::RebindMask(di, m), pos, k);
  };
  for (int j = 0; j < KH; ++j) {
    const float* r = rows[j] + 2 * o;
    VF t0, t1;
    hn::LoadInterleaved2(d, r, t0, t1);
    const VI p0 = hn::Add(hn::Set(di, rb[j] + static_cast<int32_t>(2 * o)), lane2);
    if (j == 0) {
      a = t0;
      k = p0;
    } else {
      sel(t0, p0);
    }
    sel(t1, hn::Add(p0, hn::Set(di, 1)));
    if constexpr (KW == 3) {
      VF u1, t2;
      hn::LoadInterleaved2(d, r + 1, u1, t2);  // reads r[2o + 1 .. 2(o + N)]: inside the row
      sel(t2, hn::Add(p0, hn::Set(di, 2)));
    }
  }
  hn::StoreU(a, d, y + o);
  const hn::Half<decltype(di)> dh;
  const hn::Rebind<int64_t, decltype(dh)> d64;
  hn::StoreU(hn::PromoteTo(d64, hn::LowerHalf(dh, k)), d64, yi + o);
  hn::StoreU(hn::PromoteTo(d64, hn::UpperHalf(dh, k)), d64, yi + o + static_cast<int64_t>(hn::Lanes(dh)));
}

/// All n >= Lanes(d) columns, the last vector shifted back to end at n (recomputed columns get
/// identical results).
template <int KH, int KW, class D>
HWY_INLINE void MaxRow(D d, const float* const* rows, const int32_t* rb, int64_t n, float* y, int64_t* yi) {
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  int64_t o = 0;
  for (; o + N <= n; o += N) MaxCols<KH, KW>(d, rows, rb, o, y, yi);
  if (o < n) MaxCols<KH, KW>(d, rows, rb, n - N, y, yi);
}

/// Output columns [o, o + Lanes(d)) of a whole values-only row from the padded column maxima
/// buf (see max_pool_rows_values_f32): taps in order, the later of equal NaN-or-greater winning.
template <int KW, class D>
HWY_INLINE void MaxTapsS2(D d, const float* buf, int64_t o, float* y) {
  using VF = hn::Vec<D>;
  auto mx = [](VF a, VF v) { return hn::IfThenElse(hn::Or(hn::Gt(v, a), hn::IsNaN(v)), v, a); };
  VF t0, t1;
  hn::LoadInterleaved2(d, buf + 2 * o, t0, t1);
  VF a = mx(t0, t1);
  if constexpr (KW == 3) {
    VF u1, t2;
    hn::LoadInterleaved2(d, buf + 2 * o + 1, u1, t2);
    a = mx(a, t2);
  }
  hn::StoreU(a, d, y + o);
}

template <int KW, class D>
HWY_INLINE void MaxTapsS2Row(D d, const float* buf, int64_t n, float* y) {
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  int64_t o = 0;
  for (; o + N <= n; o += N) MaxTapsS2<KW>(d, buf, o, y);
  if (o < n) MaxTapsS2<KW>(d, buf, n - N, y);
}

template <int KW>
void MaxRowsS2Values(const float* const* rows, const int32_t* nrows, int64_t count, int64_t W, int64_t PW, int64_t OW,
                     float* buf, float* y) {
  const hn::ScalableTag<float> d;
  using VF = hn::Vec<decltype(d)>;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  auto mx = [](VF a, VF v) { return hn::IfThenElse(hn::Or(hn::Gt(v, a), hn::IsNaN(v)), v, a); };
  auto mxs = [](float a, float v) { return ((v > a) | (v != v)) ? v : a; };
  const int64_t stride = max_pool_rows_stride(W, PW, OW);
  // All the rows' column maxima first: the taps then read them after the stores have landed
  // (a load straddling two recent stores would wait for them).
  for (int64_t r = 0; r < count; ++r) {
    const float* const* rr = rows;
    rows += nrows[r];
    float* b = buf + r * stride;
    for (int64_t c = 0; c < PW; ++c) b[c] = -HUGE_VALF;
    float* col = b + PW;
    int64_t c = 0;
    for (; c + N <= W; c += N) {
      VF v = hn::LoadU(d, rr[0] + c);
      for (int32_t j = 1; j < nrows[r]; ++j) v = mx(v, hn::LoadU(d, rr[j] + c));
      hn::StoreU(v, d, col + c);
    }
    for (; c < W; ++c) {
      float v = rr[0][c];
      for (int32_t j = 1; j < nrows[r]; ++j) v = mxs(v, rr[j][c]);
      col[c] = v;
    }
    for (int64_t q = PW + W; q < 2 * OW + 2; ++q) b[q] = -HUGE_VALF;  // the taps read up to 2 * OW + 1
  }
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  for (int64_t r = 0; r < count; ++r) {
    const float* b = buf + r * stride;
    float* yr = y + r * OW;
    if (OW >= N) {
      MaxTapsS2Row<KW>(d, b, OW, yr);
    } else if (hn::Lanes(d8) == 8 && OW >= 8) {
      MaxTapsS2Row<KW>(d8, b, OW, yr);
    } else if (hn::Lanes(d4) == 4 && OW >= 4) {
      MaxTapsS2Row<KW>(d4, b, OW, yr);
    } else {
      for (int64_t o = 0; o < OW; ++o) {
        float a = mxs(b[2 * o], b[2 * o + 1]);
        if constexpr (KW == 3) a = mxs(a, b[2 * o + 2]);
        yr[o] = a;
      }
    }
  }
}
#endif

/// See max_pool_blocked16_f32.
void MaxPoolBlocked16F32(const float* x, int64_t planes, int64_t H, int64_t W, const int64_t* k, const int64_t* s,
                         const int64_t* p, int64_t OH, int64_t OW, float* y, int64_t oy0, int64_t oy1) {
  const hn::CappedTag<float, 16> d;
  using VF = hn::Vec<decltype(d)>;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  auto mx = [](VF a, VF v) { return hn::IfThenElse(hn::Or(hn::Gt(v, a), hn::IsNaN(v)), v, a); };
  const int64_t row = W * 16;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * H * row;
    float* yp = y + pl * OH * OW * 16;
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      const int64_t iy = oy * s[0] - p[0];
      const int64_t ya = std::max<int64_t>(0, -iy), yb = std::min<int64_t>(k[0], H - iy);
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t ix = ox * s[1] - p[1];
        const int64_t xa = std::max<int64_t>(0, -ix), xb = std::min<int64_t>(k[1], W - ix);
        float* out = yp + (oy * OW + ox) * 16;
        for (int64_t q = 0; q < 16; q += N) {
          VF a = hn::Set(d, -HUGE_VALF);
          for (int64_t kx = xa; kx < xb; ++kx) {
            // This column's maximum over the window rows, then the columns: max_pool_values' order.
            const float* c = xp + (iy + ya) * row + (ix + kx) * 16 + q;
            VF v = hn::LoadU(d, c);
            for (int64_t ky = ya + 1; ky < yb; ++ky) v = mx(v, hn::LoadU(d, c + (ky - ya) * row));
            a = kx == xa ? v : mx(a, v);
          }
          hn::StoreU(a, d, out + q);
        }
      }
    }
  }
}

bool MaxPoolRowsValuesF32(const float* const* rows, const int32_t* nrows, int64_t count, int kw, int64_t W, int64_t PW,
                          int64_t OW, float* buf, float* y) {
#if HWY_TARGET == HWY_SCALAR
  return false;
#else
  if (kw != 2 && kw != 3) return false;
  for (int64_t r = 0; r < count; ++r)
    if (nrows[r] < 1) return false;
  if (kw == 2)
    MaxRowsS2Values<2>(rows, nrows, count, W, PW, OW, buf, y);
  else
    MaxRowsS2Values<3>(rows, nrows, count, W, PW, OW, buf, y);
  return true;
#endif
}

template <int KH, int KW>
bool MaxRowKH(const float* const* rows, const int32_t* rb, int64_t n, float* y, int64_t* yi) {
#if HWY_TARGET == HWY_SCALAR
  return false;
#else
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 4> d4;
  if (n >= static_cast<int64_t>(hn::Lanes(d))) {
    MaxRow<KH, KW>(d, rows, rb, n, y, yi);
    return true;
  }
  if (hn::Lanes(d4) == 4 && n >= 4) {
    MaxRow<KH, KW>(d4, rows, rb, n, y, yi);
    return true;
  }
  return false;
#endif
}

bool MaxPoolInteriorF32(const float* const* rows, const int32_t* rb, int kh, int kw, int64_t n, float* y, int64_t* yi) {
  switch (kh * 4 + kw) {
    case 1 * 4 + 2:
      return MaxRowKH<1, 2>(rows, rb, n, y, yi);
    case 1 * 4 + 3:
      return MaxRowKH<1, 3>(rows, rb, n, y, yi);
    case 2 * 4 + 2:
      return MaxRowKH<2, 2>(rows, rb, n, y, yi);
    case 2 * 4 + 3:
      return MaxRowKH<2, 3>(rows, rb, n, y, yi);
    case 3 * 4 + 2:
      return MaxRowKH<3, 2>(rows, rb, n, y, yi);
    case 3 * 4 + 3:
      return MaxRowKH<3, 3>(rows, rb, n, y, yi);
    default:
      return false;
  }
}

}  // namespace kiln::cpu::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::vec {
HWY_EXPORT(MaxPoolInteriorF32);
bool max_pool_interior_f32(const float* const* rows, const int32_t* rb, int kh, int kw, int64_t n, float* y,
                           int64_t* yi) {
  return HWY_DYNAMIC_DISPATCH(MaxPoolInteriorF32)(rows, rb, kh, kw, n, y, yi);
}
HWY_EXPORT(MaxPoolBlocked16F32);
void max_pool_blocked16_f32(const float* x, int64_t planes, int64_t H, int64_t W, const int64_t* k, const int64_t* s,
                            const int64_t* p, int64_t OH, int64_t OW, float* y, int64_t oy0, int64_t oy1) {
  HWY_DYNAMIC_DISPATCH(MaxPoolBlocked16F32)(x, planes, H, W, k, s, p, OH, OW, y, oy0, oy1 < 0 ? OH : oy1);
}
HWY_EXPORT(MaxPoolRowsValuesF32);
bool max_pool_rows_values_f32(const float* const* rows, const int32_t* nrows, int64_t count, int kw, int64_t W,
                              int64_t PW, int64_t OW, float* buf, float* y) {
  return HWY_DYNAMIC_DISPATCH(MaxPoolRowsValuesF32)(rows, nrows, count, kw, W, PW, OW, buf, y);
}
}  // namespace kiln::cpu::vec
#endif

#else  // !KILN_WITH_HWY

namespace kiln::cpu::vec {
bool max_pool_interior_f32(const float* const*, const int32_t*, int, int, int64_t, float*, int64_t*) { return false; }
void max_pool_blocked16_f32(const float* x, int64_t planes, int64_t H, int64_t W, const int64_t* k, const int64_t* s,
                            const int64_t* p, int64_t OH, int64_t OW, float* y, int64_t oy0, int64_t oy1) {
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oy = oy0; oy < (oy1 < 0 ? OH : oy1); ++oy)
      for (int64_t ox = 0; ox < OW; ++ox)
        for (int64_t q = 0; q < 16; ++q) {
          const int64_t iy = oy * s[0] - p[0], ix = ox * s[1] - p[1];
          float a = -HUGE_VALF;
          for (int64_t kx = std::max<int64_t>(0, -ix); kx < std::min<int64_t>(k[1], W - ix); ++kx) {
            float v = -HUGE_VALF;
            for (int64_t ky = std::max<int64_t>(0, -iy); ky < std::min<int64_t>(k[0], H - iy); ++ky) {
              const float u = x[((pl * H + iy + ky) * W + ix + kx) * 16 + q];
              v = (u > v) | (u != u) ? u : v;
            }
            a = (v > a) | (v != v) ? v : a;
          }
          y[((pl * OH + oy) * OW + ox) * 16 + q] = a;
        }
}
bool max_pool_rows_values_f32(const float* const*, const int32_t*, int64_t, int, int64_t, int64_t, int64_t, float*,
                              float*) {
  return false;
}
}  // namespace kiln::cpu::vec

#endif
