// SPDX-License-Identifier: MIT OR Apache-2.0
// The direct convolution kernel (Note [Direct convolution] in conv_direct.cpp), compiled for
// the x86 targets with 16-lane f32 vectors and chosen at run time; other targets report that
// they have none.
#include <algorithm>
#include <utility>

#include "backends/cpu/conv_impl.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/conv_direct_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target before highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "backends/cpu/transpose16-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::conv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define KILN_DIRECT_CONV 1

using D16 = hn::FixedTag<float, 16>;

/// Where one tile reads and writes: the image (channels CS floats apart, of H rows of pitch W),
/// the first row and column of the tile's receptive field (either may be outside the image:
/// padding), the packed weights of its channel block, its first output channel and position,
/// and the band (output and epilogue).
struct TileArgs {
  const float* x;
  int64_t C, CS, H, W, KH, ih0, iw0;
  const float* wp;
  int64_t c0, pos;
  const DirectBand* r;
};

/// The epilogue of T (<= 16) positions of 16 channels (r[t]: position t's channels; t >= T:
/// ignored), first channel c0 at position pos: per channel (* scale) (+ shift) (+ residual),
/// clamped to [lo, hi] with the scalar compares (NaN passes). Stored blocked to b.yb when it is
/// set (no residual), else transposed to channel rows and stored plain to b.y.
template <int T>
HWY_INLINE void Finish(const DirectBand& b, hn::Vec<D16> (&r)[16], int64_t c0, int64_t pos) {
  const D16 d;
  using V = hn::Vec<D16>;
  const int64_t plane = b.OH * b.OW;
  const V vlo = hn::Set(d, b.lo), vhi = hn::Set(d, b.hi);
  auto clamp = [&](V v) { return hn::IfThenElse(hn::Lt(v, vlo), vlo, hn::IfThenElse(hn::Gt(v, vhi), vhi, v)); };
  if (b.yb) {
    const V vs = b.scale ? hn::LoadU(d, b.scale + c0) : hn::Set(d, 1.0f);
    const V vt = b.shift ? hn::LoadU(d, b.shift + c0) : hn::Zero(d);
    float* out = b.yb + ((c0 / 16) * plane + pos) * 16;
    for (int t = 0; t < T; ++t) {
      V v = r[t];
      if (b.scale) {
        v = hn::Mul(v, vs);
        asm("" : "+v"(v.raw));  // the product rounds before the sum (no fused multiply-add)
      }
      if (b.shift) v = hn::Add(v, vt);
      hn::StoreU(clamp(v), d, out + t * 16);
    }
    return;
  }
  __m512 m[16];
  for (int i = 0; i < 16; ++i) m[i] = i < T ? r[i].raw : _mm512_setzero_ps();
  Transpose16x16(m);
  const auto keep = hn::FirstN(d, T);
  for (int j = 0; j < 16; ++j) {
    const int64_t c = c0 + j, at = c * plane + pos;
    V v{m[j]};
    if (b.scale) {
      v = hn::Mul(v, hn::Set(d, b.scale[c]));
      asm("" : "+v"(v.raw));
    }
    if (b.shift) v = hn::Add(v, hn::Set(d, b.shift[c]));
    if (b.residual) v = hn::Add(v, T == 16 ? hn::LoadU(d, b.residual + at) : hn::MaskedLoad(keep, d, b.residual + at));
    v = clamp(v);
    if constexpr (T == 16)
      hn::StoreU(v, d, b.y + at);
    else
      hn::BlendedStore(v, keep, d, b.y + at);
  }
}

/// R output rows times T positions (width stride S, kernel width KW) of one channel block,
/// accumulated in registers: per input row and channel, each input value is loaded (broadcast)
/// once and multiplied into every output of the row it reaches (input-stationary), so a load
/// feeds up to KW multiply-adds. With R > 1 the tile spans whole rows (T is the output width),
/// so its R * T positions are contiguous in the plain output. kL / kR: the first / last column
/// of the receptive field is padding (skipped).
template <int KW, int S, int R, int T, bool kL, bool kR>
HWY_NOINLINE void Tile(const TileArgs& a) {
  const D16 d;
  using V = hn::Vec<D16>;
  constexpr int J = (T - 1) * S + KW;  // input columns a row of the tile reads
  const int64_t SH = a.r->SH;
  V acc[R * T];
  const V b = hn::LoadU(d, a.r->bias + a.c0);
  for (int t = 0; t < R * T; ++t) acc[t] = b;
  for (int64_t kh = 0; kh < a.KH; ++kh) {
    for (int64_t c = 0; c < a.C; ++c) {
      const float* wc = a.wp + (c * a.KH + kh) * KW * 16;
      V w[KW];
      for (int k = 0; k < KW; ++k) w[k] = hn::LoadU(d, wc + k * 16);
      auto row = [&](auto rc) {
        constexpr int r = decltype(rc)::value;
        const int64_t ih = a.ih0 + r * SH + kh;
        if (ih < 0 || ih >= a.H) return;
        const float* xr = a.x + c * a.CS + ih * a.W;
        auto column = [&](auto jc) {
          constexpr int j = decltype(jc)::value;
          if constexpr ((kL && j == 0) || (kR && j == J - 1)) return;
          const V v = hn::Set(d, xr[a.iw0 + j]);
          auto tap = [&](auto kc) {
            constexpr int k = decltype(kc)::value;
            if constexpr (j >= k && (j - k) % S == 0 && (j - k) / S < T)
              acc[r * T + (j - k) / S] = hn::MulAdd(v, w[k], acc[r * T + (j - k) / S]);
          };
          [&]<int... ks>(std::integer_sequence<int, ks...>) { (tap(std::integral_constant<int, ks>{}), ...); }
          (std::make_integer_sequence<int, KW>{});
        };
        [&]<int... js>(std::integer_sequence<int, js...>) { (column(std::integral_constant<int, js>{}), ...); }
        (std::make_integer_sequence<int, J>{});
      };
      [&]<int... rs>(std::integer_sequence<int, rs...>) { (row(std::integral_constant<int, rs>{}), ...); }
      (std::make_integer_sequence<int, R>{});
    }
  }
  V out[16];
  for (int t = 0; t < 16; ++t) out[t] = acc[t < R * T ? t : 0];
  Finish<R * T>(*a.r, out, a.c0, a.pos);
}

/// Runs Tile<KW, S, R, T, kL, kR> with kL / kR set where the tile's first / last column is padding.
template <int KW, int S, int R, int T>
HWY_INLINE void EdgeTile(const TileArgs& a) {
  constexpr int J = (T - 1) * S + KW;
  if constexpr (KW == 1) {  // no padding columns (direct_applies)
    Tile<KW, S, R, T, false, false>(a);
  } else {
    const bool l = (a.iw0 < 0), r = (a.iw0 + J > a.W);
    if (l)
      r ? Tile<KW, S, R, T, true, true>(a) : Tile<KW, S, R, T, true, false>(a);
    else
      r ? Tile<KW, S, R, T, false, true>(a) : Tile<KW, S, R, T, false, false>(a);
  }
}

/// Output rows [oh, oh1) of an image whose output is T (<= 8) wide, 16 / T rows per tile, the
/// rest one row per tile.
template <int KW, int S, int T>
void WholeRows(const DirectBand& r, TileArgs& a, int64_t oh, int64_t oh1) {
  constexpr int R = 16 / T;
  a.iw0 = -r.col0;
  for (; oh < oh1;) {
    a.ih0 = oh * r.SH - r.row0;
    a.pos = oh * T;
    if (oh + R <= oh1) {
      EdgeTile<KW, S, R, T>(a);
      oh += R;
    } else {
      EdgeTile<KW, S, 1, T>(a);
      ++oh;
    }
  }
}

/// Runs output rows [oh0, oh1) of channel block ob. An output 8 or fewer wide runs whole rows
/// per tile (2-16 of them, up to 16 positions); a wider one runs each row in tiles of 16
/// positions (8 below 16 wide), the last one moved back to end at the row's end (it recomputes
/// a few positions rather than run a tile too narrow to keep the FMA units busy).
template <int KW, int S>
void Rows(const DirectBand& r, int64_t ob, int64_t oh0, int64_t oh1) {
  TileArgs a{r.x, r.C, r.CS, r.H, r.W, r.KH, 0, 0, r.wp + ob * r.C * r.KH * KW * 16, ob * 16, 0, &r};
  if (r.OW <= 8) {
    auto whole = [&](auto tc) { WholeRows<KW, S, decltype(tc)::value>(r, a, oh0, oh1); };
    switch (r.OW) {
      case 1:
        return whole(std::integral_constant<int, 1>{});
      case 2:
        return whole(std::integral_constant<int, 2>{});
      case 3:
        return whole(std::integral_constant<int, 3>{});
      case 4:
        return whole(std::integral_constant<int, 4>{});
      case 5:
        return whole(std::integral_constant<int, 5>{});
      case 6:
        return whole(std::integral_constant<int, 6>{});
      case 7:
        return whole(std::integral_constant<int, 7>{});
      default:
        return whole(std::integral_constant<int, 8>{});
    }
  }
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    a.ih0 = oh * r.SH - r.row0;
    auto row = [&](auto tc) {
      constexpr int T = decltype(tc)::value;
      for (int64_t ow = 0; ow < r.OW; ow += T) {
        const int64_t ow0 = std::min<int64_t>(ow, r.OW - T);
        a.iw0 = ow0 * S - r.col0;
        a.pos = oh * r.OW + ow0;
        EdgeTile<KW, S, 1, T>(a);
      }
    };
    r.OW >= 16 ? row(std::integral_constant<int, 16>{}) : row(std::integral_constant<int, 8>{});
  }
}
#endif

bool DirectRowsF32(const DirectBand& r, int64_t ob, int64_t oh0, int64_t oh1) {
#ifdef KILN_DIRECT_CONV
  const bool k3 = r.KW == 3, s2 = r.SW == 2;
  if (k3 && s2) Rows<3, 2>(r, ob, oh0, oh1);
  if (k3 && !s2) Rows<3, 1>(r, ob, oh0, oh1);
  if (!k3 && s2) Rows<1, 2>(r, ob, oh0, oh1);
  if (!k3 && !s2) Rows<1, 1>(r, ob, oh0, oh1);
  return true;
#undef KILN_DIRECT_CONV
#else
  (void)r, (void)ob, (void)oh0, (void)oh1;
  return false;
#endif
}

}  // namespace kiln::cpu::conv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::conv {
HWY_EXPORT(DirectRowsF32);
bool direct_rows_f32(const DirectBand& band, int64_t ob, int64_t oh0, int64_t oh1) {
  return HWY_DYNAMIC_DISPATCH(DirectRowsF32)(band, ob, oh0, oh1);
}
}  // namespace kiln::cpu::conv
#endif

#else  // !KILN_WITH_HWY

namespace kiln::cpu::conv {
bool direct_rows_f32(const DirectBand&, int64_t, int64_t, int64_t) { return false; }
}  // namespace kiln::cpu::conv

#endif
