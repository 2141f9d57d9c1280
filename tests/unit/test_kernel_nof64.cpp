// SPDX-License-Identifier: MIT OR Apache-2.0
// The library's F32-only math (src/kernel/library/math_nof64.cpp: what WGSL, without f64, runs
// in place of the f64 forms) within its stated bounds of the f64 reference, over every binade of
// both signs, values near the domains' edges and IEEE special values, traced and run on the C++
// target (the WebGPU conformance run checks the same kernels in the page).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ir/op.h"
#include "kernel/library.h"
#include "kernel_suite.h"

using namespace kiln::kernel;
using kiln::ir::OpKind;

namespace {

struct Fn {
  const char* name;
  OpKind kind;  ///< the unary function, or Atan2 / Hypot (binary)
  double (*ref)(double, double);
  double ulps;  ///< the stated bound (docs/web.md, "The WebGPU device")
};

const Fn kFns[] = {
    {"sin", OpKind::Sin, [](double x, double) { return std::sin(x); }, 4},
    {"cos", OpKind::Cos, [](double x, double) { return std::cos(x); }, 4},
    {"tan", OpKind::Tan, [](double x, double) { return std::tan(x); }, 4},
    {"exp2", OpKind::Exp2, [](double x, double) { return std::exp2(x); }, 2},
    {"expm1", OpKind::Expm1, [](double x, double) { return std::expm1(x); }, 4},
    {"log2", OpKind::Log2, [](double x, double) { return std::log2(x); }, 3},
    {"log10", OpKind::Log10, [](double x, double) { return std::log10(x); }, 3},
    {"log1p", OpKind::Log1p, [](double x, double) { return std::log1p(x); }, 3},
    {"sinh", OpKind::Sinh, [](double x, double) { return std::sinh(x); }, 4},
    {"cosh", OpKind::Cosh, [](double x, double) { return std::cosh(x); }, 2},
    {"asinh", OpKind::Asinh, [](double x, double) { return std::asinh(x); }, 4},
    {"acosh", OpKind::Acosh, [](double x, double) { return std::acosh(x); }, 4},
    {"atanh", OpKind::Atanh, [](double x, double) { return std::atanh(x); }, 4},
    {"atan", OpKind::Atan, [](double x, double) { return std::atan(x); }, 3},
    {"asin", OpKind::Asin, [](double x, double) { return std::asin(x); }, 3},
    {"acos", OpKind::Acos, [](double x, double) { return std::acos(x); }, 2},
    {"erf", OpKind::Erf, [](double x, double) { return std::erf(x); }, 8},
    {"atan2", OpKind::Atan2, [](double y, double x) { return std::atan2(y, x); }, 3},
    {"hypot", OpKind::Hypot, [](double x, double y) { return std::hypot(x, y); }, 3},
};
constexpr int kN = sizeof(kFns) / sizeof(kFns[0]);

/// Every function of kFns at x[i] (and y[i] for the binary ones) into out[kN * i + f].
Kernel nof64_kernel() {
  return trace("nof64_math", [](Builder& b) {
    b.group_size(64);
    auto x = b.input<float>("x");
    auto y = b.input<float>("y");
    auto out = b.output<float>("out");
    Val n = b.scalar<int32_t>("n");
    Val i = group_id() * 64 + thread_id();
    if_(i < n, [&] {
      const Val v = x[i], w = y[i];
      for (int f = 0; f < kN; ++f) {
        const OpKind k = kFns[f].kind;
        out[i * kN + f] = k == OpKind::Atan2   ? lib::atan2_nof64(v, w)
                          : k == OpKind::Hypot ? lib::hypot_nof64(v, w)
                                               : lib::unary_nof64(k, v);
      }
    });
  });
}

}  // namespace

TEST(KernelNoF64, MathMeetsItsBounds) {
  std::vector<float> xs = {0.0f,       -0.0f,   1.0f,     -1.0f,       0.5f,         -0.5f,      2.0f,
                           1e-40f,     -1e-40f, 88.0f,    89.0f,       -89.0f,       127.9f,     128.0f,
                           -149.0f,    -150.5f, 4096.5f,  0.99999994f, -0.99999994f, 1.0000001f, 1.5707964f,
                           3.1415927f, 1e22f,   INFINITY, -INFINITY,   NAN};
  std::mt19937 g(11);
  for (int e = -149; e <= 127; ++e)  // every binade, both signs
    for (int k = 0; k < 6; ++k) {
      const float m = std::uniform_real_distribution<float>(1.0f, 2.0f)(g);
      xs.push_back(std::ldexp(m, e));
      xs.push_back(-std::ldexp(m, e));
    }
  for (int k = 0; k < 400; ++k) xs.push_back(std::uniform_real_distribution<float>(-1.0f, 1.0f)(g));  // asin, atanh
  for (int k = 0; k < 200; ++k) xs.push_back(std::uniform_real_distribution<float>(-20.0f, 20.0f)(g));
  std::vector<float> ys(xs.size());  // the binary functions' second operand: xs shuffled
  std::copy(xs.begin(), xs.end(), ys.begin());
  std::shuffle(ys.begin(), ys.end(), g);
  const int n = static_cast<int>(xs.size());
  std::vector<float> out(static_cast<size_t>(kN) * xs.size());
  compile_cpu(nof64_kernel(), 0)({static_cast<uint32_t>((n + 63) / 64)}, {xs, ys, out, n});
  for (int f = 0; f < kN; ++f) {
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      const float got = out[static_cast<size_t>(kN) * i + f];
      const double ref = kFns[f].ref(xs[i], ys[i]);
      const float want = static_cast<float>(ref);
      if (!std::isfinite(want) || std::fabs(ref) < 1.2e-38) {  // special values, overflow, subnormal results
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got)
                                     : got == want || std::fabs(got - ref) <= 0x1p-140 || (want == 0 && got == 0))
            << kFns[f].name << "(" << xs[i] << ", " << ys[i] << ") = " << got << ", want " << ref;
        if (want == 0 && got == 0)
          EXPECT_EQ(std::signbit(got), std::signbit(want)) << kFns[f].name << "(" << xs[i] << ")";
        continue;
      }
      const double ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
      const double err = std::fabs(got - ref) / ulp;
      worst = std::max(worst, err);
      EXPECT_LE(err, kFns[f].ulps) << kFns[f].name << "(" << xs[i] << ", " << ys[i] << ") = " << got << ", want "
                                   << ref;
    }
    std::printf("f32-only %s: worst %.2f ulps (bound %.0f)\n", kFns[f].name, worst, kFns[f].ulps);
  }
}
