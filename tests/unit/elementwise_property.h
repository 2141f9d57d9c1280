// SPDX-License-Identifier: MIT OR Apache-2.0
// The harness of the elementwise property tests (test_unary_property.cpp,
// test_binary_property.cpp): inputs of every length that reaches the vector loops and their
// remainders at every SIMD width, in several layouts and dtypes, and a comparison of float
// results with a scalar reference computed in f64, within a stated bound in ulps.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::test::prop {

/// Lengths 0 to 300 (every vector loop and remainder at SSE4, AVX2 and AVX-512 widths, and one
/// 256-element program chunk with a partial second one), then a few large odd ones.
inline std::vector<int64_t> lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 300; ++i) n.push_back(i);
  for (int64_t i : {1021, 4099}) n.push_back(i);
  return n;
}

/// The lengths that reach each vector loop's entry, body and remainder at every width (the
/// conformance-style subset, for the slower variants).
inline std::vector<int64_t> edge_lengths() { return {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 257}; }

enum class Layout { kContiguous, kStrided, kFlipped };
inline const char* layout_name(Layout l) {
  return l == Layout::kContiguous ? "contiguous" : l == Layout::kStrided ? "strided" : "flipped";
}

/// n floats: normal(0, scale) values with a special value (0, -0, +-inf, NaN, huge, denormal,
/// and values just outside the vector approximations' ranges) at every 7th position.
inline std::vector<float> float_values(int64_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.f, scale);
  const float special[] = {0.f,   -0.f,   INFINITY, -INFINITY, NAN,  1e30f, -1e30f, 50000.f, -50000.f,
                           100.f, -100.f, 1e-40f,   0.5f,      -1.f, 1.f,   -0.5f,  89.f,    -104.f,
                           2.f,   3.f,    -2.f,     1e20f,     9.5f, -9.5f, 0.99f,  -0.99f};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = (i % 7 == 3) ? special[(i / 7) % std::size(special)] : nd(g);
  return v;
}

/// n integers uniform in [lo, hi] (with lo <= 0, so the float ops meet out-of-domain lanes).
template <class T>
std::vector<T> int_values(int64_t n, uint32_t seed, int64_t lo = -20, int64_t hi = 40) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int64_t> ud(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(ud(g));
  return v;
}

/// A 1-d tensor on dev holding values in the given layout: contiguous, every second element of
/// a buffer twice as long (the others garbage), or a flipped view (negative stride).
template <class T>
Tensor make_input(const std::vector<T>& values, Layout layout, const Device& dev) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (layout == Layout::kContiguous) return tensor(values, {n}, dev);
  if (layout == Layout::kStrided) {
    std::vector<T> buf(values.size() * 2, static_cast<T>(77));
    for (size_t i = 0; i < values.size(); ++i) buf[2 * i] = values[i];
    return tensor(buf, {2 * n}, dev).slice(0, 0, std::nullopt, 2);
  }
  std::vector<T> rev(values.rbegin(), values.rend());
  return tensor(rev, {n}, dev).flip({0});
}

/// The spacing of f32 values at |r| (the denormal spacing below the smallest normal).
inline double ulp32(double r) {
  const double a = std::fabs(r);
  if (!(a < static_cast<double>(std::numeric_limits<float>::max()))) return std::ldexp(1.0, 104);
  if (a < static_cast<double>(std::numeric_limits<float>::min())) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

/// Why got is not within ulps ulps (plus atol) of the f64 reference ref, or "" when it is.
/// NaN must be NaN, and an infinite reference (after rounding to f32) the same infinity. Results
/// in the denormal range may be off by 2^-140 (a few hundred denormal steps) in addition.
inline std::string mismatch(float got, double ref, double ulps, double atol) {
  atol += std::ldexp(1.0, -140);
  const float ref32 = static_cast<float>(ref);
  if (std::isnan(ref) || std::isnan(got)) {
    if (std::isnan(ref) && std::isnan(got)) return "";
  } else if (std::isinf(ref32) || std::isinf(got)) {
    if (got == ref32) return "";
    // A finite result next to f32's overflow threshold may round either way within the bound.
    if (!std::isinf(ref) && std::fabs(std::fabs(ref) - std::numeric_limits<float>::max()) <= ulps * ulp32(ref))
      return "";
  } else {
    const double err = std::fabs(static_cast<double>(got) - ref);
    if (err <= ulps * ulp32(ref) + atol) return "";
    std::ostringstream s;
    s.precision(9);
    s << "got " << got << ", f64 reference " << ref << " (" << err / ulp32(ref) << " ulp, bound " << ulps << ")";
    return s.str();
  }
  std::ostringstream s;
  s.precision(9);
  s << "got " << got << ", f64 reference " << ref;
  return s.str();
}

/// The CPU devices every property runs on: one kernel per op, and fused (with every op queued,
/// so that even one element runs as an elementwise program).
/// The number of failed assertions so far in the running test.
inline int failure_count() {
  const ::testing::TestResult* r = ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) n += r->GetTestPartResult(i).failed();
  return n;
}

inline Device plain_cpu() { return Device::cpu().without_fusion(); }
inline Device fused_cpu() { return Device::cpu().without_fusion().fusion(); }

}  // namespace kiln::test::prop
