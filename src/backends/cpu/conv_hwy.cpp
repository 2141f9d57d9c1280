// SPDX-License-Identifier: MIT OR Apache-2.0
// Highway kernels of the convolution paths, compiled for several x86 targets and chosen at run
// time: the bias, residual and activation applied to a thread's share of a convolution's output
// (Note [Convolution activations] in conv_onednn.cpp), with the scalar loop's compares, so NaN
// passes.
#include <cmath>

#include "backends/cpu/conv_impl.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/conv_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// Order matters (foreach_target before highway), so clang-format must not sort these.
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::conv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ClampAddF32(float* y, const float* r, int64_t n, float lo, float hi) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const auto vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
  auto f = [&](hn::Vec<decltype(d)> t) {
    return hn::IfThenElse(hn::Lt(t, vlo), vlo, hn::IfThenElse(hn::Gt(t, vhi), vhi, t));
  };
  int64_t i = 0;
  if (r) {
    for (; i + N <= n; i += N) hn::StoreU(f(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, r + i))), d, y + i);
  } else {
    for (; i + N <= n; i += N) hn::StoreU(f(hn::LoadU(d, y + i)), d, y + i);
  }
  for (; i < n; ++i) {
    const float t = r ? y[i] + r[i] : y[i];
    y[i] = t < lo ? lo : (t > hi ? hi : t);
  }
}

void BiasClampF32(float* y, int64_t n, float v, float lo, float hi) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<int64_t>(hn::Lanes(d));
  const auto vlo = hn::Set(d, lo), vhi = hn::Set(d, hi), vb = hn::Set(d, v);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto t = hn::Add(hn::LoadU(d, y + i), vb);
    hn::StoreU(hn::IfThenElse(hn::Lt(t, vlo), vlo, hn::IfThenElse(hn::Gt(t, vhi), vhi, t)), d, y + i);
  }
  for (; i < n; ++i) {
    const float t = y[i] + v;
    y[i] = t < lo ? lo : (t > hi ? hi : t);
  }
}

}  // namespace kiln::cpu::conv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::conv {
HWY_EXPORT(BiasClampF32);
void bias_clamp_f32(float* y, int64_t n, float v, float lo, float hi) {
  HWY_DYNAMIC_DISPATCH(BiasClampF32)(y, n, v, lo, hi);
}
HWY_EXPORT(ClampAddF32);
void clamp_add_f32(float* y, const float* r, int64_t n, float lo, float hi) {
  HWY_DYNAMIC_DISPATCH(ClampAddF32)(y, r, n, lo, hi);
}
}  // namespace kiln::cpu::conv
#endif

#else  // !KILN_WITH_HWY

namespace kiln::cpu::conv {
void bias_clamp_f32(float* y, int64_t n, float v, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = y[i] + v;
    y[i] = t < lo ? lo : (t > hi ? hi : t);
  }
}
void clamp_add_f32(float* y, const float* r, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = r ? y[i] + r[i] : y[i];
    y[i] = t < lo ? lo : (t > hi ? hi : t);  // NaN passes through (both compares false)
  }
}
}  // namespace kiln::cpu::conv

#endif
