// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel suite on the C++ target, each kernel against a plain C++ reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "kernel_suite_cases.h"

using namespace kiln::kernel;
namespace suite = kiln::kernel::suite;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

uint32_t ceil_div(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

TEST(KernelCpu, BroadcastStrides) {
  CpuKernel k = compile_cpu(suite::broadcast(), 0);
  const int rows = 37, cols = 53;
  // x is a column (rows x 1) broadcast along j, w a full matrix read transposed (cols x rows).
  std::vector<float> x = random_floats(rows, 1), w = random_floats(rows * cols, 2), y(rows * cols, 0.f);
  k({ceil_div(cols, 16), ceil_div(rows, 4)}, {x, w, y, rows, cols, 1, 0, 1, rows});
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float v = x[i] * w[j * rows + i];
      float want = v + 1.0f / (1.0f + std::exp(-v)) * 0.5f;
      ASSERT_NEAR(y[i * cols + j], want, 1e-6f * (1 + std::fabs(want))) << i << "," << j;
    }
}

TEST(KernelCpu, BlockSumWithSharedMemoryAndBarriers) {
  CpuKernel k = compile_cpu(suite::block_sum(), 0);
  const int n = 100003, groups = 40;
  std::vector<float> x = random_floats(n, 3), partial(groups, -1.f);
  k({groups}, {x, partial, n});
  // Each group sums a grid-stride slice; the total of the partial sums is the sum of x.
  double total = 0, want = 0;
  for (float v : partial) total += v;
  for (float v : x) want += v;
  EXPECT_NEAR(total, want, 1e-2);
  double g0 = 0;
  for (int i = 0; i < n; i += groups * 128)
    for (int t = 0; t < 128 && i + t < n; ++t) g0 += x[static_cast<size_t>(i + t)];
  EXPECT_NEAR(partial[0], g0, 1e-3);
}

TEST(KernelCpu, TiledMatmul) {
  CpuKernel k = compile_cpu(suite::matmul(), 0);
  const int m = 45, n = 37, kk = 70;
  std::vector<float> a = random_floats(m * kk, 4), b = random_floats(kk * n, 5), c(m * n, 0.f);
  k({ceil_div(n, 16), ceil_div(m, 16)}, {a, b, c, m, n, kk});
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int p = 0; p < kk; ++p) want += static_cast<double>(a[i * kk + p]) * b[p * n + j];
      ASSERT_NEAR(c[i * n + j], want, 1e-4) << i << "," << j;
    }
}

TEST(KernelCpu, BlockScan) {
  CpuKernel k = compile_cpu(suite::block_scan(), 0);
  const int n = 1000;
  std::vector<float> x = random_floats(n, 6), y(n, 0.f);
  k({ceil_div(n, 256)}, {x, y, n});
  for (int blk = 0; blk < n; blk += 256) {
    double run = 0;
    for (int i = blk; i < std::min(n, blk + 256); ++i) {
      run += x[i];
      ASSERT_NEAR(y[i], run, 1e-4) << i;
    }
  }
}

TEST(KernelCpu, HistogramWithAtomics) {
  CpuKernel k = compile_cpu(suite::histogram(), 0);
  const int n = 50000;
  std::mt19937 g(7);
  std::vector<uint32_t> x(n), hist(64, 0), want(64, 0);
  for (uint32_t& v : x) v = g() % 1000;
  for (uint32_t v : x) ++want[v % 64];
  k({13}, {x, hist, n});
  EXPECT_EQ(hist, want);
}

TEST(KernelCpu, SoftmaxRows) {
  CpuKernel k = compile_cpu(suite::softmax(), 0);
  const int rows = 9, cols = 301;
  std::vector<float> x = random_floats(rows * cols, 8, -20.f, 20.f), y(rows * cols, 0.f);
  k({rows}, {x, y, cols});
  for (int r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int j = 0; j < cols; ++j) m = std::max(m, x[r * cols + j]);
    double s = 0;
    for (int j = 0; j < cols; ++j) s += std::exp(static_cast<double>(x[r * cols + j]) - m);
    for (int j = 0; j < cols; ++j) {
      double want = std::exp(static_cast<double>(x[r * cols + j]) - m) / s;
      ASSERT_NEAR(y[r * cols + j], want, 1e-6 + 1e-5 * want) << r << "," << j;
    }
  }
}

TEST(KernelCpu, HalfStorage) {
  CpuKernel k = compile_cpu(suite::half_axpy(), 0);
  const int n = 777;
  std::vector<float> xf = random_floats(n, 9), yf = random_floats(n, 10), zf = random_floats(n, 11);
  std::vector<kiln::Half> x(n), y(n), want(n);
  std::vector<kiln::BFloat16> z(n);
  for (int i = 0; i < n; ++i) {
    x[i] = xf[i];
    y[i] = yf[i];
    z[i] = zf[i];
    want[i] = 1.5f * static_cast<float>(x[i]) + static_cast<float>(y[i]) + static_cast<float>(z[i]);
  }
  k({ceil_div(n, 64)}, {x, z, y, 1.5f, n});
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i].bits, want[i].bits) << i;
}

TEST(KernelCpu, HalfArithmeticRoundsEveryOperation) {
  CpuKernel k = compile_cpu(suite::half_math(), 0);
  const suite::Case c = [] {
    for (const suite::Case& e : suite::cases())
      if (e.name == "half_math") return e;
    return suite::Case{};
  }();
  ASSERT_EQ(c.name, "half_math");
  const int n = 600;
  std::vector<float> x(n), y(6 * n, -1.f);
  std::memcpy(x.data(), c.buffers[0].bytes.data(), n * sizeof(float));
  k({ceil_div(n, 64)}, {x, y, n});
  using H = kiln::Half;
  using B = kiln::BFloat16;
  auto h = [](float v) { return static_cast<float>(H(v)); };  // one f16 rounding
  auto b = [](float v) { return static_cast<float>(B(v)); };
  auto same = [](float a, float e) { return a == e || (std::isnan(a) && std::isnan(e)); };
  for (int i = 0; i < n; ++i) {
    const float v = h(x[i]), vb = b(x[i]);
    float acc = 0.f;
    for (int j = 0; j < 4; ++j) acc = h(h(acc * v) + static_cast<float>(j));
    const float want[6] = {h(h(v * v) + h(v / 3.f)),
                           h(h(std::exp(h(v * 0.25f))) - h(std::sqrt(std::fabs(v)))),
                           acc,
                           b(b(vb * vb) + vb),
                           h(h(std::max(v, 0.5f) + (v > 0.f ? v : -v)) + h(std::fma(v, v, v))),
                           h(v * 1000.f) + h(vb)};
    for (int r = 0; r < 6; ++r) {
      const float got = y[static_cast<size_t>(6 * i + r)];
      if (r == 1 && !same(got, want[r])) {
        // exp is the CPU's polynomial (2 ulps of f32), std::exp's f16 rounding may differ by one.
        EXPECT_LE(std::fabs(got - want[r]), std::fabs(want[r]) * 0x1p-10f + 0x1p-24f) << i << ": x=" << x[i];
        continue;
      }
      ASSERT_TRUE(same(got, want[r])) << i << "," << r << ": x=" << x[i] << " got " << got << " want " << want[r];
    }
  }
}

TEST(KernelCpu, VectorLoads) {
  CpuKernel k = compile_cpu(suite::vec4(), 0);
  const int n4 = 50;
  std::vector<float> x = random_floats(n4 * 4, 12), y(n4 * 4, 0.f);
  k({1}, {x, y, n4});
  for (int i = 0; i < n4; ++i) {
    const float* v = &x[i * 4];
    EXPECT_EQ(y[i * 4 + 0], v[0] * 2.0f);
    EXPECT_EQ(y[i * 4 + 1], v[1] + 1.0f);
    EXPECT_EQ(y[i * 4 + 2], v[2] * v[3]);
    EXPECT_EQ(y[i * 4 + 3], v[2] - v[3]);
  }
}

TEST(KernelCpu, WhileLoopAndUnsigned) {
  CpuKernel k = compile_cpu(suite::collatz(), 0);
  const int n = 100;
  std::vector<uint32_t> x(n);
  std::vector<int32_t> steps(n, -1);
  for (int i = 0; i < n; ++i) x[i] = static_cast<uint32_t>(i + 1);
  k({ceil_div(n, 32)}, {x, steps, n});
  for (int i = 0; i < n; ++i) {
    uint32_t v = x[i];
    int c = 0;
    while (v > 1) {
      v = v % 2 == 0 ? v / 2 : 3 * v + 1;
      ++c;
    }
    ASSERT_EQ(steps[i], c) << x[i];
  }
}

TEST(KernelCpu, IntegerMix) {
  CpuKernel k = compile_cpu(suite::int_mix(), 0);
  std::vector<int32_t> x = {0, 1, -1, 7, -8, 123456, -99999, 2147483647, -2147483647};
  const int n = static_cast<int>(x.size());
  std::vector<int64_t> y(x.size(), 0);
  k({1}, {x, y, n});
  for (int i = 0; i < n; ++i) {
    int32_t v = x[i];
    int32_t a = std::max(v, static_cast<int32_t>(0u - static_cast<uint32_t>(v)));
    int32_t sh = static_cast<int32_t>(static_cast<uint32_t>(v) << 3);
    int64_t w = static_cast<int64_t>(a ^ sh) * 1000003;
    int64_t f = static_cast<int64_t>(std::floor(static_cast<float>(v) * 0.5f));
    int64_t want = w + std::min<int64_t>(f, 7) + static_cast<int64_t>(static_cast<uint32_t>(v) >> 28);
    EXPECT_EQ(y[i], want) << v;
  }
}

TEST(KernelCpu, ManyGroupsOverThreads) {
  // Groups run over Kiln's threads: a large grid gives a reference's values (its sigmoid is the
  // CPU's form, within a few ulps of std::exp's).
  CpuKernel k = compile_cpu(suite::broadcast(), 0);
  const int rows = 300, cols = 700;
  std::vector<float> x = random_floats(rows * cols, 13), w = random_floats(cols, 14), y(rows * cols, 0.f);
  k({ceil_div(cols, 16), ceil_div(rows, 4)}, {x, w, y, rows, cols, cols, 1, 0, 1});
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float v = x[i * cols + j] * w[j];
      const float want = v + 1.0f / (1.0f + std::exp(-v)) * 0.5f;
      ASSERT_NEAR(y[i * cols + j], want, 1e-6f * (1 + std::fabs(want))) << i << "," << j;
    }
}

TEST(KernelCpu, BarriersInUniformWhileAndIfElse) {
  CpuKernel k = compile_cpu(suite::uniform_flow(), 0);
  const int groups = 5;
  std::vector<float> x = random_floats(groups * 64, 15), out(groups, 0.f);
  for (int32_t mode : {0, 1}) {
    k({groups}, {x, out, mode});
    for (int g = 0; g < groups; ++g) {
      float m = -INFINITY;
      double sum = 0;
      for (int t = 0; t < 64; ++t) m = std::max(m, x[g * 64 + t]), sum += x[g * 64 + t];
      if (mode == 0)
        EXPECT_EQ(out[g], m) << g;
      else
        EXPECT_NEAR(out[g], sum, 1e-4) << g;
    }
  }
}

// f64 values: arithmetic, sqrt, floor, min/max, select and casts, exact as C++ doubles; the
// transcendental functions are refused, and WGSL (no f64) refuses the kernel.
TEST(KernelCpu, DoubleArithmetic) {
  Kernel k = trace("f64_mix", [](Builder& b) {
    auto x = b.input<double>("x");
    auto y = b.inout<double>("y");
    auto f = b.output<float>("f");
    auto n64 = b.output<int64_t>("i");
    Val a = b.scalar<double>("a"), n = b.scalar<int32_t>("n");
    b.group_size(32);
    Val i = global_id();
    if_(i < n, [&] {
      Val xi = x[i];
      Val yi = y[i];
      Val r = a * xi + yi / 3.0 - sqrt(abs(xi)) + floor(xi * 0.1);
      y[i] = select(xi > 0.5, min(r, xi), max(r, -xi));
      f[i] = cast(xi, Type::F32);
      n64[i] = cast(xi * 1e6, Type::I64);
    });
  });
  const int32_t n = 100;
  std::vector<double> x(n), y(n), y0;
  for (int j = 0; j < n; ++j) {
    x[j] = std::sin(j * 0.7) * 3.0 + 1e-9 * j;
    y[j] = std::cos(j * 1.3) / 7.0;
  }
  y0 = y;
  std::vector<float> f(n);
  std::vector<int64_t> iv(n);
  const double a = 0.1;
  compile_cpu(k, 0)({ceil_div(n, 32)}, {x, y, f, iv, a, n});
  for (int j = 0; j < n; ++j) {
    const double r = a * x[j] + y0[j] / 3.0 - std::sqrt(std::fabs(x[j])) + std::floor(x[j] * 0.1);
    EXPECT_EQ(y[j], x[j] > 0.5 ? std::fmin(r, x[j]) : std::fmax(r, -x[j])) << j;
    EXPECT_EQ(f[j], static_cast<float>(x[j]));
    EXPECT_EQ(iv[j], static_cast<int64_t>(x[j] * 1e6));
  }
  EXPECT_NE(render(k, Target::Glsl).find("double"), std::string::npos);
  EXPECT_NE(render(k, Target::Cuda).find("fmin("), std::string::npos);
  EXPECT_THROW(render(k, Target::Wgsl), kiln::Error);
  EXPECT_THROW(trace("f64_exp",
                     [](Builder& b) {
                       auto x = b.inout<double>("x");
                       x[global_id()] = exp(Val(x[global_id()]));
                     }),
               kiln::Error);
}

// bitcast between f32, i32 and u32 moves the bits, as memcpy does; other types are refused.
TEST(KernelCpu, Bitcast) {
  Kernel k = trace("bits", [](Builder& b) {
    auto x = b.input<float>("x");
    auto u = b.output<uint32_t>("u");
    auto y = b.output<float>("y");
    b.group_size(8);
    Val i = global_id();
    Val bits = bitcast(Val(x[i]), Type::U32);
    u[i] = bits;
    y[i] = bitcast(bitcast(bits ^ 0x80000000u, Type::I32), Type::F32);
  });
  std::vector<float> x = {1.0f, -2.5f, 0.0f, -0.0f, 1e-40f, 3.4e38f, 7.0f, -1e-3f};
  std::vector<uint32_t> u(8);
  std::vector<float> y(8);
  compile_cpu(k, 0)({1}, {x, u, y});
  for (int j = 0; j < 8; ++j) {
    uint32_t want;
    std::memcpy(&want, &x[j], 4);
    EXPECT_EQ(u[j], want);
    EXPECT_EQ(y[j], -x[j]);
  }
  EXPECT_NE(render(k, Target::Glsl).find("floatBitsToUint("), std::string::npos);
  EXPECT_NE(render(k, Target::Wgsl).find("bitcast<u32>("), std::string::npos);
  EXPECT_THROW(trace("bad_bits", [](Builder& b) { b.output<int64_t>("o")[0] = bitcast(Val(1.0), Type::I64); }),
               kiln::Error);
}

// The language's built-in exp, log, tanh, sigmoid, erf, sin and cos of f32 meet the CPU's bounds
// (docs/tensors.md, Accuracy: exp 2 ulps, log, sigmoid, sin and cos 4, tanh and erf 8; results in
// the subnormal range within 2^-140, or 0 as on targets that flush them) of the f64 reference
// over their whole ranges and special values. KernelSuiteDevices (Vulkan) and the WebGPU page check that other targets
// give the same bits as this one (the suite's math_builtins, no tolerance).
TEST(KernelCpu, BuiltInMathMeetsTheCpusBounds) {
  std::vector<float> xs = {0.0f,   -0.0f,   1e-30f, -1e-30f, 1e-40f, 88.7f,  89.0f,    -87.3f,    -103.9f, -104.5f,
                           100.0f, -100.0f, 9.0f,   -9.0f,   7.9f,   1e-13f, INFINITY, -INFINITY, NAN};
  // Near multiples of pi/2, where the reduction cancels: x = 0x1.921fb6p0 (pi/2), 3.1415927,
  // 105414350 and 0x1.ffffffp127 among them.
  for (float v : {1.5707964f, 3.1415927f, 4.712389f, 6.2831855f, 105414350.0f, 1.0e22f, 3.4028235e38f, 0.78539819f})
    xs.insert(xs.end(), {v, -v, std::nextafter(v, 0.0f), std::nextafter(v, INFINITY)});
  std::mt19937 g(5);
  for (int e = -149; e <= 127; ++e)  // every binade, both signs
    for (int k = 0; k < 8; ++k) {
      const float m = std::uniform_real_distribution<float>(1.0f, 2.0f)(g);
      xs.push_back(std::ldexp(m, e));
      xs.push_back(-std::ldexp(m, e));
    }
  const int n = static_cast<int>(xs.size());
  std::vector<float> out(7 * xs.size());
  compile_cpu(suite::math_builtins(), 0)({ceil_div(n, 64)}, {xs, out, n});
  struct Fn {
    const char* name;
    double (*ref)(double);
    double ulps;
  };
  const Fn fns[] = {{"exp", [](double v) { return std::exp(v); }, 2},
                    {"log", [](double v) { return std::log(std::fabs(v)); }, 4},
                    {"tanh", [](double v) { return std::tanh(v); }, 8},
                    {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }, 4},
                    {"erf", [](double v) { return std::erf(v); }, 8},
                    {"sin", [](double v) { return std::sin(v); }, 4},
                    {"cos", [](double v) { return std::cos(v); }, 4}};
  for (size_t f = 0; f < 7; ++f) {
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      const float got = out[7 * i + f];
      const double ref = fns[f].ref(xs[i]);
      const float want = static_cast<float>(ref);
      if (!std::isfinite(want) || std::fabs(ref) < 1.2e-38) {  // special values, overflow, subnormal results
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want || got == 0.0f || std::fabs(got - ref) <= 0x1p-140)
            << fns[f].name << "(" << xs[i] << ") = " << got << ", want " << ref;
        continue;
      }
      const double ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
      const double err = std::fabs(got - ref) / ulp;
      worst = std::max(worst, err);
      EXPECT_LE(err, fns[f].ulps) << fns[f].name << "(" << xs[i] << ") = " << got << ", want " << ref;
    }
    std::printf("built-in %s of f32: worst %.2f ulps (bound %.0f)\n", fns[f].name, worst, fns[f].ulps);
  }
}

// The language's pow of f32 (a double-f32 log2, no f64) within the CPU's 4 ulps of std::pow in
// f64 over bases in every binade, exponents from tiny to large, negative bases with integer
// powers, results from subnormal to overflowing, and IEEE pow's special values exactly.
TEST(KernelCpu, BuiltInPowMeetsTheCpusBound) {
  std::vector<float> xs, ys;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f), ex(-40.0f, 40.0f);
  for (int e = -149; e <= 127; ++e)
    for (int k = 0; k < 40; ++k) {
      const float x = std::ldexp(mant(g), e);
      // y so that y log2 x spans [-160, 140], and small ones.
      const float y =
          k % 4 == 0
              ? ex(g) / 8
              : static_cast<float>(std::uniform_real_distribution<double>(-155, 135)(g) / std::log2(x == 1 ? 2.0 : x));
      xs.push_back(k % 5 == 0 ? -x : x);
      ys.push_back(k % 5 == 0 ? std::round(y) : y);
    }
  const float inf = INFINITY, nan = NAN;
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, inf, -inf, nan, 1e-45f})
    for (float y : {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, 3.0f, -3.0f, 0.5f, inf, -inf, nan, 1e10f}) {
      xs.push_back(x);
      ys.push_back(y);
    }
  const int n = static_cast<int>(xs.size());
  std::vector<float> out(xs.size());
  compile_cpu(suite::math_pow(), 0)({ceil_div(n, 64)}, {xs, ys, out, n});
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const double ref = std::pow(static_cast<double>(xs[i]), static_cast<double>(ys[i]));
    const float want = static_cast<float>(ref), got = out[i];
    if (!std::isfinite(want) || std::fabs(ref) < 1.2e-38) {
      EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want || std::fabs(got - ref) <= 0x1p-140)
          << "pow(" << xs[i] << ", " << ys[i] << ") = " << got << ", want " << ref;
      continue;
    }
    const double ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
    const double err = std::fabs(got - ref) / ulp;
    worst = std::max(worst, err);
    EXPECT_LE(err, 4) << "pow(" << xs[i] << ", " << ys[i] << ") = " << got << ", want " << ref;
  }
  std::printf("built-in pow of f32: worst %.2f ulps over %d pairs (bound 4)\n", worst, n);
}
