// SPDX-License-Identifier: MIT OR Apache-2.0
// Row kernels of kiln::vision's host fast paths (image_simd.h): Highway, compiled for several
// x86 targets and chosen at run time; the same loops in plain C++ without Highway. Full vectors
// run over the row and the last one overlaps the previous (dst never aliases an input), so rows
// shorter than one vector take the scalar loop.
#include "vision/image_simd.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

// Highway's foreach_target.h includes this file again for each target: the scalar helpers once.
#ifndef KILN_VISION_IMAGE_SIMD_SCALAR
#define KILN_VISION_IMAGE_SIMD_SCALAR
namespace kiln::vision::detail {
namespace {

template <class T>
void minmax_scalar(T* dst, const T* const* src, int k, int64_t from, int64_t n, bool max) {
  for (int64_t x = from; x < n; ++x) {
    T a = src[0][x];
    for (int i = 1; i < k; ++i) a = max ? std::max(a, src[i][x]) : std::min(a, src[i][x]);
    dst[x] = a;
  }
}

/// A compare-exchange network leaving the median of n (odd, <= 49) values in element n / 2:
/// Batcher's odd-even merge sort for any n, less the exchanges the median does not depend on.
/// Exchange c puts the smaller of elements a[c] and b[c] in a[c].
struct Network {
  int n = 0;
  uint8_t a[1024] = {}, b[1024] = {};
};

constexpr Network median_network(int n) {
  Network all;
  for (int p = 1; p < n; p <<= 1)
    for (int k = p; k >= 1; k >>= 1)
      for (int j = k % p; j + k < n; j += 2 * k)
        for (int i = 0; i < std::min(k, n - j - k); ++i)
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) {
            all.a[all.n] = static_cast<uint8_t>(i + j);
            all.b[all.n] = static_cast<uint8_t>(i + j + k);
            ++all.n;
          }
  bool need[64] = {}, keep[1024] = {};
  need[n / 2] = true;
  for (int c = all.n - 1; c >= 0; --c)
    if (need[all.a[c]] || need[all.b[c]]) keep[c] = need[all.a[c]] = need[all.b[c]] = true;
  Network out;
  for (int c = 0; c < all.n; ++c)
    if (keep[c]) {
      out.a[out.n] = all.a[c];
      out.b[out.n] = all.b[c];
      ++out.n;
    }
  return out;
}

template <int K>
inline constexpr Network kMedianNet = median_network(K);

template <int K, class T>
void median_scalar(T* dst, const T* const* src, int64_t from, int64_t n) {
  constexpr const Network& net = kMedianNet<K>;
  T v[K];
  for (int64_t x = from; x < n; ++x) {
    for (int i = 0; i < K; ++i) v[i] = src[i][x];
    for (int c = 0; c < net.n; ++c) {
      const T lo = std::min(v[net.a[c]], v[net.b[c]]);
      v[net.b[c]] = std::max(v[net.a[c]], v[net.b[c]]);
      v[net.a[c]] = lo;
    }
    dst[x] = v[K / 2];
  }
}

/// median_rows for window sizes 1, 9, 25 and 49 (kernels 1, 3, 5, 7), with `body` the SIMD
/// form of one size (or the scalar loop).
template <class T, class F>
void median_by_size(T* dst, const T* const* src, int k, int64_t n, F&& body) {
  switch (k) {
    case 9:
      return body(std::integral_constant<int, 9>{});
    case 25:
      return body(std::integral_constant<int, 25>{});
    case 49:
      return body(std::integral_constant<int, 49>{});
    default:
      for (int64_t x = 0; x < n; ++x) dst[x] = src[0][x];  // k == 1
  }
}

uint8_t gray_u8_scalar(int r, int g, int b) {
  return static_cast<uint8_t>((r * 4899 + g * 9617 + b * 1868 + 8192) >> 14);
}

uint8_t round_u8(float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f)); }

/// The colour weight of L1 distance d: u8 reads lut[d]; f32 reads lut at d * scale with linear
/// interpolation, the index clamped to bins (OpenCV's expLUT).
inline float bilateral_colour(int d, const float* lut, float, int) { return lut[d]; }
inline float bilateral_colour(float d, const float* lut, float scale, int bins) {
  float alpha = d * scale;
  const int idx = alpha >= 0 ? std::min(static_cast<int>(std::min(alpha, 1e9f)), bins) : 0;
  alpha -= static_cast<float>(idx);
  return lut[idx] + alpha * (lut[idx + 1] - lut[idx]);
}

template <int C, class T>
void bilateral_scalar(T* const* dst, const T* const* src, const T* const* centre, const float* sw, int k,
                      const float* lut, float scale, int bins, int64_t from, int64_t n) {
  using Dist = std::conditional_t<std::is_same_v<T, uint8_t>, int, float>;
  for (int64_t x = from; x < n; ++x) {
    float sum[C] = {}, wsum = 0;
    for (int i = 0; i < k; ++i) {
      Dist d = 0;
      for (int ch = 0; ch < C; ++ch)
        d += std::abs(static_cast<Dist>(src[i * C + ch][x]) - static_cast<Dist>(centre[ch][x]));
      const float wt = sw[i] * bilateral_colour(d, lut, scale, bins);
      wsum += wt;
      for (int ch = 0; ch < C; ++ch) sum[ch] = std::fma(static_cast<float>(src[i * C + ch][x]), wt, sum[ch]);
    }
    for (int ch = 0; ch < C; ++ch) {
      if constexpr (std::is_same_v<T, uint8_t>)
        dst[ch][x] = round_u8(sum[ch] / wsum);
      else
        dst[ch][x] = sum[ch] / wsum;
    }
  }
}

template <class T>
void bilateral_any(T* const* dst, const T* const* src, const T* const* centre, int c, const float* sw, int k,
                   const float* lut, float scale, int bins, int64_t from, int64_t n) {
  if (c == 1)
    bilateral_scalar<1>(dst, src, centre, sw, k, lut, scale, bins, from, n);
  else
    bilateral_scalar<3>(dst, src, centre, sw, k, lut, scale, bins, from, n);
}

}  // namespace
}  // namespace kiln::vision::detail
#endif

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "vision/image_simd.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target before highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::vision::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kMax, class D, class V = hn::Vec<D>>
HWY_INLINE V MinMax(V a, V b) {
  if constexpr (kMax)
    return hn::Max(a, b);
  else
    return hn::Min(a, b);
}

/// Four vectors at a time (independent chains), then one at a time, the last one overlapping.
template <bool kMax, class T>
void MinMaxRowsT(T* dst, const T* const* src, int k, int64_t n) {
  const hn::ScalableTag<T> d;
  using D = decltype(d);
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  if (n < N) return minmax_scalar(dst, src, k, 0, n, kMax);
  int64_t x = 0;
  for (; x + 4 * N <= n; x += 4 * N) {
    const T* p = src[0] + x;
    auto a0 = hn::LoadU(d, p), a1 = hn::LoadU(d, p + N), a2 = hn::LoadU(d, p + 2 * N), a3 = hn::LoadU(d, p + 3 * N);
    for (int i = 1; i < k; ++i) {
      p = src[i] + x;
      a0 = MinMax<kMax, D>(a0, hn::LoadU(d, p));
      a1 = MinMax<kMax, D>(a1, hn::LoadU(d, p + N));
      a2 = MinMax<kMax, D>(a2, hn::LoadU(d, p + 2 * N));
      a3 = MinMax<kMax, D>(a3, hn::LoadU(d, p + 3 * N));
    }
    hn::StoreU(a0, d, dst + x);
    hn::StoreU(a1, d, dst + x + N);
    hn::StoreU(a2, d, dst + x + 2 * N);
    hn::StoreU(a3, d, dst + x + 3 * N);
  }
  for (; x < n; x += N) {
    x = std::min(x, n - N);
    auto a = hn::LoadU(d, src[0] + x);
    for (int i = 1; i < k; ++i) a = MinMax<kMax, D>(a, hn::LoadU(d, src[i] + x));
    hn::StoreU(a, d, dst + x);
  }
}

template <class T>
void MinMaxRows(T* dst, const T* const* src, int k, int64_t n, bool max) {
  if (max)
    MinMaxRowsT<true>(dst, src, k, n);
  else
    MinMaxRowsT<false>(dst, src, k, n);
}

void MinMaxRowsU8(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max) {
  MinMaxRows(dst, src, k, n, max);
}
void MinMaxRowsF32(float* dst, const float* const* src, int k, int64_t n, bool max) { MinMaxRows(dst, src, k, n, max); }

void DotRows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  int64_t x = 0;
  if (n >= N) {
    const auto b = hn::Set(d, bias);
    for (; x + 4 * N <= n; x += 4 * N) {  // four independent FMA chains
      auto a0 = b, a1 = b, a2 = b, a3 = b;
      for (int i = 0; i < k; ++i) {
        const auto wi = hn::Set(d, w[i]);
        const float* p = src[i] + x;
        a0 = hn::MulAdd(wi, hn::LoadU(d, p), a0);
        a1 = hn::MulAdd(wi, hn::LoadU(d, p + N), a1);
        a2 = hn::MulAdd(wi, hn::LoadU(d, p + 2 * N), a2);
        a3 = hn::MulAdd(wi, hn::LoadU(d, p + 3 * N), a3);
      }
      hn::StoreU(a0, d, dst + x);
      hn::StoreU(a1, d, dst + x + N);
      hn::StoreU(a2, d, dst + x + 2 * N);
      hn::StoreU(a3, d, dst + x + 3 * N);
    }
    for (; x < n; x += N) {
      x = std::min(x, n - N);
      auto a = b;
      for (int i = 0; i < k; ++i) a = hn::MulAdd(hn::Set(d, w[i]), hn::LoadU(d, src[i] + x), a);
      hn::StoreU(a, d, dst + x);
    }
    return;
  }
  for (; x < n; ++x) {
    float a = bias;
    for (int i = 0; i < k; ++i) a = std::fma(w[i], src[i][x], a);
    dst[x] = a;
  }
}

void DotRowsU8(float* dst, const uint8_t* const* src, const float* w, int k, float bias, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  auto load = [&](const uint8_t* p) { return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(du, p))); };
  int64_t x = 0;
  if (n >= N) {
    const auto b = hn::Set(d, bias);
    for (; x + 2 * N <= n; x += 2 * N) {  // two independent FMA chains
      auto a0 = b, a1 = b;
      for (int i = 0; i < k; ++i) {
        const auto wi = hn::Set(d, w[i]);
        a0 = hn::MulAdd(wi, load(src[i] + x), a0);
        a1 = hn::MulAdd(wi, load(src[i] + x + N), a1);
      }
      hn::StoreU(a0, d, dst + x);
      hn::StoreU(a1, d, dst + x + N);
    }
    for (; x < n; x += N) {
      x = std::min(x, n - N);
      auto a = b;
      for (int i = 0; i < k; ++i) a = hn::MulAdd(hn::Set(d, w[i]), load(src[i] + x), a);
      hn::StoreU(a, d, dst + x);
    }
    return;
  }
  for (; x < n; ++x) {
    float a = bias;
    for (int i = 0; i < k; ++i) a = std::fma(w[i], static_cast<float>(src[i][x]), a);
    dst[x] = a;
  }
}

void F32ToU8(uint8_t* dst, const float* src, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint8_t, decltype(df)> du;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  const auto lo = hn::Zero(df), hi = hn::Set(df, 255.0f);
  int64_t x = 0;
  for (; x + N <= n; x += N) {
    const auto v = hn::Min(hn::Max(hn::LoadU(df, src + x), lo), hi);
    hn::StoreU(hn::DemoteTo(du, hn::NearestInt(v)), du, dst + x);
  }
  for (; x < n; ++x) dst[x] = round_u8(src[x]);
}

void GrayU8(uint8_t* dst, const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n) {
  const hn::ScalableTag<int32_t> di;
  const hn::Rebind<uint8_t, decltype(di)> du;
  const auto N = static_cast<int64_t>(hn::Lanes(di));
  const auto wr = hn::Set(di, 4899), wg = hn::Set(di, 9617), wb = hn::Set(di, 1868), half = hn::Set(di, 8192);
  int64_t x = 0;
  for (; x + N <= n; x += N) {
    auto a = hn::Add(hn::Mul(hn::PromoteTo(di, hn::LoadU(du, r + x)), wr), half);
    a = hn::Add(hn::Mul(hn::PromoteTo(di, hn::LoadU(du, g + x)), wg), a);
    a = hn::Add(hn::Mul(hn::PromoteTo(di, hn::LoadU(du, b + x)), wb), a);
    hn::StoreU(hn::DemoteTo(du, hn::ShiftRight<14>(a)), du, dst + x);
  }
  for (; x < n; ++x) dst[x] = gray_u8_scalar(r[x], g[x], b[x]);
}

template <class V>
HWY_INLINE void CompareExchange(V& a, V& b) {
  const V lo = hn::Min(a, b);
  b = hn::Max(a, b);
  a = lo;
}

/// Compare-exchanges [From, From + sizeof...(I)) of the network, unrolled by a fold.
template <int K, size_t From, class V, size_t... I>
HWY_INLINE void ApplyNetworkPart(V* v, std::index_sequence<I...>) {
  (CompareExchange(v[kMedianNet<K>.a[From + I]], v[kMedianNet<K>.b[From + I]]), ...);
}

/// The whole network from pair From on, in folds of at most 128 pairs (clang limits a fold's
/// nesting to 256; the 7x7 network has 319 pairs).
template <int K, size_t From = 0, class V>
HWY_INLINE void ApplyNetwork(V* v) {
  constexpr size_t n = kMedianNet<K>.n;
  if constexpr (From < n) {
    constexpr size_t part = n - From < 128 ? n - From : 128;
    ApplyNetworkPart<K, From>(v, std::make_index_sequence<part>{});
    ApplyNetwork<K, From + part>(v);
  }
}

/// The network unrolled at compile time: the K vectors stay in registers where they fit.
template <int K, class T>
void MedianRowsK(T* dst, const T* const* src, int64_t n) {
#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
  median_scalar<K>(dst, src, 0, n);
#else
  const hn::ScalableTag<T> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  if (n < N) {  // a row shorter than a vector: through a padded copy (the scalar network is slow)
    HWY_ALIGN T buf[K * HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T out[HWY_MAX_BYTES / sizeof(T)];
    const T* rows[K];
    for (int i = 0; i < K; ++i) {
      std::copy(src[i], src[i] + n, buf + i * N);
      rows[i] = buf + i * N;
    }
    MedianRowsK<K>(out, rows, N);
    std::copy(out, out + n, dst);
    return;
  }
  for (int64_t x = 0; x < n; x += N) {
    x = std::min(x, n - N);
    hn::Vec<decltype(d)> v[K];
    for (int i = 0; i < K; ++i) v[i] = hn::LoadU(d, src[i] + x);
    ApplyNetwork<K>(v);
    hn::StoreU(v[K / 2], d, dst + x);
  }
#endif
}

template <class T>
void MedianRows(T* dst, const T* const* src, int k, int64_t n) {
  median_by_size(dst, src, k, n, [&](auto kc) { MedianRowsK<decltype(kc)::value>(dst, src, n); });
}

void MedianRowsU8(uint8_t* dst, const uint8_t* const* src, int k, int64_t n) { MedianRows(dst, src, k, n); }
void MedianRowsF32(float* dst, const float* const* src, int k, int64_t n) { MedianRows(dst, src, k, n); }

void MinMaxF32(const float* v, int64_t n, float& lo, float& hi) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  int64_t x = 0;
  lo = hi = v[0];
  if (n >= N) {
    auto a = hn::LoadU(d, v), b = a;
    for (x = N; x + N <= n; x += N) {
      const auto u = hn::LoadU(d, v + x);
      a = hn::Min(a, u), b = hn::Max(b, u);
    }
    lo = hn::GetLane(hn::MinOfLanes(d, a)), hi = hn::GetLane(hn::MaxOfLanes(d, b));
  }
  for (; x < n; ++x) lo = std::min(lo, v[x]), hi = std::max(hi, v[x]);
}

/// One vector of lanes x.. of the bilateral filter (see bilateral_row in image_simd.h).
template <int C, class T>
HWY_INLINE void BilateralVec(T* const* dst, const T* const* src, const T* const* centre, const float* sw, int k,
                             const float* lut, float scale, int bins, int64_t x) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<T, decltype(d)> dt;
  auto load = [&](const T* p) {
    if constexpr (std::is_same_v<T, uint8_t>)
      return hn::PromoteTo(di, hn::LoadU(dt, p));
    else
      return hn::LoadU(d, p);
  };
  using VD = decltype(load(centre[0]));
  VD c[C];
  for (int ch = 0; ch < C; ++ch) c[ch] = load(centre[ch] + x);
  hn::Vec<decltype(d)> sum[C], wsum = hn::Zero(d);
  for (int ch = 0; ch < C; ++ch) sum[ch] = hn::Zero(d);
  const auto vscale = hn::Set(d, scale);
  const auto vbins = hn::Set(di, bins);
  for (int i = 0; i < k; ++i) {
    VD s[C];
    for (int ch = 0; ch < C; ++ch) s[ch] = load(src[i * C + ch] + x);
    VD dist = hn::Abs(hn::Sub(s[0], c[0]));
    for (int ch = 1; ch < C; ++ch) dist = hn::Add(dist, hn::Abs(hn::Sub(s[ch], c[ch])));
    hn::Vec<decltype(d)> colour;
    if constexpr (std::is_same_v<T, uint8_t>) {
      colour = hn::GatherIndex(d, lut, dist);
    } else {
      auto alpha = hn::Mul(dist, vscale);
      const auto idx = hn::Min(hn::Max(hn::ConvertTo(di, alpha), hn::Zero(di)), vbins);
      alpha = hn::Sub(alpha, hn::ConvertTo(d, idx));
      const auto lo = hn::GatherIndex(d, lut, idx), hi = hn::GatherIndex(d, lut + 1, idx);
      colour = hn::MulAdd(alpha, hn::Sub(hi, lo), lo);
    }
    const auto wt = hn::Mul(hn::Set(d, sw[i]), colour);
    wsum = hn::Add(wsum, wt);
    for (int ch = 0; ch < C; ++ch) {
      if constexpr (std::is_same_v<T, uint8_t>)
        sum[ch] = hn::MulAdd(hn::ConvertTo(d, s[ch]), wt, sum[ch]);
      else
        sum[ch] = hn::MulAdd(s[ch], wt, sum[ch]);
    }
  }
  for (int ch = 0; ch < C; ++ch) {
    const auto r = hn::Div(sum[ch], wsum);
    if constexpr (std::is_same_v<T, uint8_t>) {
      const auto v = hn::Min(hn::Max(r, hn::Zero(d)), hn::Set(d, 255.0f));
      hn::StoreU(hn::DemoteTo(dt, hn::NearestInt(v)), dt, dst[ch] + x);
    } else {
      hn::StoreU(r, d, dst[ch] + x);
    }
  }
}

template <int C, class T>
void BilateralRowsT(T* const* dst, const T* const* src, const T* const* centre, const float* sw, int k,
                    const float* lut, float scale, int bins, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  if (n < N) return bilateral_scalar<C>(dst, src, centre, sw, k, lut, scale, bins, 0, n);
  int64_t x = 0;
  for (; x + N <= n; x += N) BilateralVec<C>(dst, src, centre, sw, k, lut, scale, bins, x);
  if (x < n) BilateralVec<C>(dst, src, centre, sw, k, lut, scale, bins, n - N);
}

template <class T>
void BilateralRows(T* const* dst, const T* const* src, const T* const* centre, int c, const float* sw, int k,
                   const float* lut, float scale, int bins, int64_t n) {
  if (c == 1)
    BilateralRowsT<1>(dst, src, centre, sw, k, lut, scale, bins, n);
  else
    BilateralRowsT<3>(dst, src, centre, sw, k, lut, scale, bins, n);
}
void BilateralRowU8(uint8_t* const* dst, const uint8_t* const* src, const uint8_t* const* centre, int c,
                    const float* sw, int k, const float* lut, int64_t n) {
  BilateralRows(dst, src, centre, c, sw, k, lut, 0.0f, 0, n);
}
void BilateralRowF32(float* const* dst, const float* const* src, const float* const* centre, int c, const float* sw,
                     int k, const float* lut, float scale, int bins, int64_t n) {
  BilateralRows(dst, src, centre, c, sw, k, lut, scale, bins, n);
}

}  // namespace kiln::vision::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::vision::detail {
HWY_EXPORT(MinMaxRowsU8);
HWY_EXPORT(MinMaxRowsF32);
HWY_EXPORT(DotRows);
HWY_EXPORT(DotRowsU8);
HWY_EXPORT(F32ToU8);
HWY_EXPORT(GrayU8);
HWY_EXPORT(MedianRowsU8);
HWY_EXPORT(MedianRowsF32);
HWY_EXPORT(MinMaxF32);
HWY_EXPORT(BilateralRowU8);
HWY_EXPORT(BilateralRowF32);

void minmax_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max) {
  HWY_DYNAMIC_DISPATCH(MinMaxRowsU8)(dst, src, k, n, max);
}
void minmax_rows(float* dst, const float* const* src, int k, int64_t n, bool max) {
  HWY_DYNAMIC_DISPATCH(MinMaxRowsF32)(dst, src, k, n, max);
}
void dot_rows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DotRows)(dst, src, w, k, bias, n);
}
void dot_rows(float* dst, const uint8_t* const* src, const float* w, int k, float bias, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DotRowsU8)(dst, src, w, k, bias, n);
}
void f32_to_u8(uint8_t* dst, const float* src, int64_t n) { HWY_DYNAMIC_DISPATCH(F32ToU8)(dst, src, n); }
void gray_u8(uint8_t* dst, const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GrayU8)(dst, r, g, b, n);
}
void median_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MedianRowsU8)(dst, src, k, n);
}
void median_rows(float* dst, const float* const* src, int k, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MedianRowsF32)(dst, src, k, n);
}
void minmax_f32(const float* v, int64_t n, float& lo, float& hi) { HWY_DYNAMIC_DISPATCH(MinMaxF32)(v, n, lo, hi); }
void bilateral_row(uint8_t* const* dst, const uint8_t* const* src, const uint8_t* const* centre, int c, const float* sw,
                   int k, const float* lut, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BilateralRowU8)(dst, src, centre, c, sw, k, lut, n);
}
void bilateral_row(float* const* dst, const float* const* src, const float* const* centre, int c, const float* sw,
                   int k, const float* lut, float scale, int bins, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BilateralRowF32)(dst, src, centre, c, sw, k, lut, scale, bins, n);
}
}  // namespace kiln::vision::detail
#endif

#else  // !KILN_WITH_HWY

namespace kiln::vision::detail {
void minmax_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n, bool max) {
  minmax_scalar(dst, src, k, 0, n, max);
}
void minmax_rows(float* dst, const float* const* src, int k, int64_t n, bool max) {
  minmax_scalar(dst, src, k, 0, n, max);
}
void dot_rows(float* dst, const float* const* src, const float* w, int k, float bias, int64_t n) {
  for (int64_t x = 0; x < n; ++x) {
    float a = bias;
    for (int i = 0; i < k; ++i) a += w[i] * src[i][x];
    dst[x] = a;
  }
}
void dot_rows(float* dst, const uint8_t* const* src, const float* w, int k, float bias, int64_t n) {
  for (int64_t x = 0; x < n; ++x) {
    float a = bias;
    for (int i = 0; i < k; ++i) a += w[i] * static_cast<float>(src[i][x]);
    dst[x] = a;
  }
}
void f32_to_u8(uint8_t* dst, const float* src, int64_t n) {
  for (int64_t x = 0; x < n; ++x) dst[x] = round_u8(src[x]);
}
void gray_u8(uint8_t* dst, const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n) {
  for (int64_t x = 0; x < n; ++x) dst[x] = gray_u8_scalar(r[x], g[x], b[x]);
}
void median_rows(uint8_t* dst, const uint8_t* const* src, int k, int64_t n) {
  median_by_size(dst, src, k, n, [&](auto kc) { median_scalar<decltype(kc)::value>(dst, src, 0, n); });
}
void median_rows(float* dst, const float* const* src, int k, int64_t n) {
  median_by_size(dst, src, k, n, [&](auto kc) { median_scalar<decltype(kc)::value>(dst, src, 0, n); });
}
void minmax_f32(const float* v, int64_t n, float& lo, float& hi) {
  lo = hi = v[0];
  for (int64_t x = 1; x < n; ++x) lo = std::min(lo, v[x]), hi = std::max(hi, v[x]);
}
void bilateral_row(uint8_t* const* dst, const uint8_t* const* src, const uint8_t* const* centre, int c, const float* sw,
                   int k, const float* lut, int64_t n) {
  bilateral_any(dst, src, centre, c, sw, k, lut, 0.0f, 0, 0, n);
}
void bilateral_row(float* const* dst, const float* const* src, const float* const* centre, int c, const float* sw,
                   int k, const float* lut, float scale, int bins, int64_t n) {
  bilateral_any(dst, src, centre, c, sw, k, lut, scale, bins, 0, n);
}
}  // namespace kiln::vision::detail

#endif
