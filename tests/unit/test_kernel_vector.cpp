// SPDX-License-Identifier: MIT OR Apache-2.0
// The C++ target's vector mode (threads run as lanes of vector values) against its scalar
// rendering (one thread after another, as compile_cpu's debug build renders every kernel): the
// same kernel over the same inputs must give the same values. The kernels here use every form
// the vector mode renders: masks from varying ifs (nested, with else), locals blended under a
// mask, uniform loops inside a varying if, integer division where masked-off lanes divide by
// zero, casts between every 32-bit type and bool, u32 comparisons, NaN-aware min/max, the math
// functions, contiguous, strided and reversed loads, f16/bf16 storage, atomics, a uniform
// index written by a varying value, 2-D groups, shared memory and barriers, loops whose
// bounds or conditions differ between threads, and f64/i64 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/machine.h"
#include "kiln/device.h"
#include "kiln/half.h"
#include "kiln/kernel.h"

using namespace kiln::kernel;

namespace {

constexpr int kOut = 26;  // values per thread in `mixed`'s out

/// Threads in groups of 8 x 2; thread i of n writes kOut values of its own.
Kernel mixed() {
  return trace("vector_mixed", [](Builder& b) {
    auto x = b.input<float>("x");
    auto u = b.input<uint32_t>("u");
    auto h = b.input<kiln::Half>("h");
    auto z = b.input<kiln::BFloat16>("z");
    auto out = b.output<float>("out");
    auto ho = b.output<kiln::Half>("ho");
    auto flags = b.output<uint32_t>("flags");
    auto hist = b.inout<int32_t>("hist");
    auto last = b.output<float>("last");
    Val n = b.scalar<int32_t>("n"), d = b.scalar<int32_t>("d");
    b.group_size(8, 2);
    Val tx = thread_id(0), ty = thread_id(1);
    Val row = group_id(0) * 2 + ty;
    Val i = row * 8 + tx;
    if_(i < n, [&] {
      Val xi = x[i];
      Val ui = u[i];
      Val hi = h[i];
      Val zi = z[i];
      Val o = i * kOut;
      Var acc(0.0f);
      Var cnt(0);
      if_(xi > 0.0f, [&] {
        acc = exp(xi);
        cnt = 1;
      }).else_([&] {
        acc = sin(xi) * 2.0f;
        if_(xi < -1.0f, [&] { cnt = -1; });
      });
      if_(ui % 3u == 0u, [&] { for_(Val(0), d, [&](Val j) { acc = fma(Val(acc), Val(0.5f), cast(j, Type::F32)); }); });
      out[o] = acc;
      out[o + 1] = cast(Val(cnt), Type::F32);
      Val iv = cast(ui, Type::I32) - 50;
      Var q(-7);
      if_(iv != 0, [&] { q = Val(1000) / iv + Val(1000) % iv; });
      out[o + 2] = cast(Val(q), Type::F32);
      out[o + 3] = cast(abs(iv), Type::F32);
      out[o + 4] = cast(min(iv, Val(7)) + max(iv, Val(-3)), Type::F32);
      out[o + 5] = cast((ui >> 2u) + (ui << 3u) + (ui ^ 0x55u), Type::F32);
      out[o + 6] = select(ui < 100u, cast(ui, Type::F32), -cast(ui, Type::F32));
      out[o + 7] = min(xi, hi) + max(hi, xi);
      out[o + 8] = bitcast(bitcast(xi, Type::U32) ^ 0x80000000u, Type::F32);
      out[o + 9] = cast(cast(min(max(xi, -1e6f), 1e6f) * 10.0f, Type::I32), Type::F32);
      out[o + 10] = cast(cast(xi, Type::Bool), Type::F32) + cast(cast(iv, Type::Bool), Type::F32);
      out[o + 11] = sqrt(abs(xi)) + rsqrt(abs(hi) + 1.0f);
      out[o + 12] = floor(xi) + ceil(hi);
      out[o + 13] = tanh(xi) + erf(hi);
      out[o + 14] = sigmoid(xi) + log(abs(xi) + 1e-3f);
      out[o + 15] = pow(abs(xi), zi) + cos(hi);
      out[o + 16] = select(xi > hi && ui > 10u, xi, hi);
      Val strided = x[(i * 3) % n];
      Val reversed = x[n - 1 - i];
      out[o + 17] = strided + reversed;
      out[o + 18] = select(cast(cast(ui, Type::F32), Type::U32) == ui, Val(1.0f), Val(0.0f));
      out[o + 19] = cast(ui / 7u + ui % 7u, Type::F32);
      out[o + 20] = cast(-iv, Type::F32) + cast(ui ^ 0xffffffffu, Type::F32);
      out[o + 21] = select(!(xi == xi), Val(42.0f), xi / (hi + 3.0f));
      out[o + 22] = zi * 2.0f - hi;
      out[o + 23] = cast(cast(xi > 0.0f, Type::I32) + cast(hi < xi, Type::I32), Type::F32);
      Val prev = atomic_add(hist[ui % 8u], Val(1));
      out[o + 24] = cast(prev >= 0, Type::F32);
      out[o + 25] = cast(tx * 100 + ty, Type::F32);
      ho[i] = hi * 2.0f + xi;
      flags[i] = cast(xi > 0.5f || ui % 5u == 1u, Type::U32);
      if_(tx >= 3, [&] { last[row] = xi + cast(tx, Type::F32); });
    });
  });
}

/// A group of 32: shared memory, barriers, a uniform loop around a phase (a local kept per
/// chunk of lanes across phases, a uniform local updated in every phase).
Kernel shared_phases() {
  return trace("vector_phases", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    auto sh = b.shared<float>("sh", 32);
    Val rounds = b.scalar<int32_t>("rounds");
    b.group_size(32);
    Val t = thread_id();
    Val g = global_id();
    Var v(x[g]);
    Var step(1);
    for_(Val(0), rounds, [&](Val) {
      sh[t] = v;
      barrier();
      Val other = sh[(t + step) % 32];
      if_(t % 2 == 0, [&] { v = Val(v) + other; }).else_([&] { v = max(Val(v), other); });
      step = Val(step) * 2 % 31;
      barrier();
    });
    y[g] = Val(v) + cast(step, Type::F32);
  });
}

/// Loops whose bounds or conditions differ between threads: a grid-stride loop, a loop whose
/// count depends on the thread with an if inside, and a while loop (Collatz steps).
Kernel varying_loops() {
  return trace("vector_loops", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    auto steps = b.output<int32_t>("steps");
    Val n = b.scalar<int32_t>("n");
    b.group_size(16);
    Val t = thread_id(), g = group_id();
    Var acc(0.0f);
    for_(g * 16 + t, n, num_groups() * 16, [&](Val j) { acc = Val(acc) + x[j] * 0.5f; });
    Var c(0);
    for_(Val(0), t % 5, [&](Val j) { if_(j % 2 == 0, [&] { c = Val(c) + j; }).else_([&] { c = Val(c) - 1; }); });
    Var v(cast(t + g * 16 + 1, Type::U32));
    Var k(0);
    while_([&] { return Val(v) != 1u && Val(k) < 200; },
           [&] {
             if_(Val(v) % 2u == 0u, [&] { v = Val(v) / 2u; }).else_([&] { v = Val(v) * 3u + 1u; });
             k = Val(k) + 1;
           });
    y[g * 16 + t] = Val(acc) + cast(Val(c), Type::F32);
    steps[g * 16 + t] = k;
  });
}

constexpr int kWide = 8;  // values per thread in `wide_values`' outputs

/// f64 and i64 values as vectors: arithmetic, shifts, NaN-aware min/max, abs of -0, sqrt,
/// rsqrt, floor, ceil, fma, compares and selects (64-bit values under 32-bit masks), masked
/// division where masked-off lanes divide by zero, casts between i64, f64, f32, i32 and bool, a
/// contiguous load through an i64 index, Vars blended under a mask and a varying loop with an
/// i64 induction variable.
Kernel wide_values() {
  return trace("vector_wide", [](Builder& b) {
    auto x = b.input<double>("x");
    auto l = b.input<int64_t>("l");
    auto out = b.output<double>("out");
    auto lo = b.output<int64_t>("lo");
    Val n = b.scalar<int32_t>("n");
    b.group_size(16);
    Val i = global_id();
    Val wi = cast(i, Type::I64);
    auto d = [](double v) { return Val::constant(v, Type::F64); };
    auto w = [](long long v) { return Val(v); };
    if_(i < n, [&] {
      Val xi = x[wi], li = l[i], o = wi * kWide;
      Var acc(d(0.0));
      Var cnt(w(0));
      if_(xi > 0.0, [&] {
        acc = sqrt(xi) * 3.0;
        cnt = li * 2;
      }).else_([&] { acc = floor(xi) + 1.0; });
      out[o] = acc;
      lo[o] = cnt;
      Var q(w(-7));
      if_(li != 0, [&] { q = w(1000000000000LL) / li + w(1000) % li; });
      lo[o + 1] = q;
      lo[o + 2] = abs(li) + min(li, w(5)) + max(li, w(-5));
      lo[o + 3] = cast(select(xi == xi, min(max(xi, -1e6), 1e6), d(0.0)) * 10.0, Type::I64);  // NaN: 0
      lo[o + 4] = (li ^ w(0x5555)) + (li << w(3)) - (li >> w(2));
      lo[o + 5] = cast(cast(li, Type::Bool), Type::I64) + cast(cast(xi, Type::Bool), Type::I64) * 2 +
                  cast(li < w(3) && xi >= 0.0, Type::I64) * 4;
      Var s(w(0));
      for_(w(0), li % 7, [&](Val j) { s = Val(s) + j; });
      lo[o + 6] = s;
      lo[o + 7] = cast(cast(li, Type::I32), Type::I64) + cast(cast(li, Type::F64) * 0.5, Type::I64);
      out[o + 1] = min(xi, cast(li, Type::F64)) + max(cast(li, Type::F64), xi);
      out[o + 2] = sqrt(abs(xi)) + rsqrt(abs(xi) + 1.0) / 3.0;
      out[o + 3] = fma(xi, cast(li, Type::F64), d(0.25));
      out[o + 4] = select(li < w(0), xi, -xi);
      out[o + 5] = cast(cast(xi, Type::F32), Type::F64) + floor(xi) + ceil(-xi);
      out[o + 6] = abs(xi);
      out[o + 7] = select(xi < 0.5 || li > w(2), xi - cast(li, Type::F64), xi * xi);
    });
  });
}

bool same(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

std::vector<float> inputs(int n) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = d(g);
  const float special[] = {0.f,      -0.f,      1.f,    -1.f,   0.5f,  std::numeric_limits<float>::quiet_NaN(),
                           INFINITY, -INFINITY, 1e-40f, -3e38f, 3e38f, 100.f};
  for (size_t j = 0; j < std::size(special) && j < v.size(); ++j) v[j * 5 % v.size()] = special[j];
  return v;
}

}  // namespace

TEST(KernelVector, RendersThreadsAsLanes) {
  const std::string src = render(mixed(), Target::Cpp);
  EXPECT_NE(src.find("kk_t0 += KK_W"), std::string::npos);
  EXPECT_NE(src.find("kk_wldm<kk_wf>"), std::string::npos)
      << "a contiguous load (under the bounds mask) is one vector load when every lane is active";
  // The debug build keeps one thread after another (and is the reference below).
  EXPECT_EQ(compile_cpu(mixed(), 1).debug(), true);
}

TEST(KernelVector, MixedKernelMatchesScalarRendering) {
  const Kernel k = mixed();
  for (int n : {1, 13, 16, 61}) {
    std::vector<float> x = inputs(n), zf = inputs(n);
    std::vector<uint32_t> u(static_cast<size_t>(n));
    std::vector<kiln::Half> h(static_cast<size_t>(n));
    std::vector<kiln::BFloat16> z(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      u[static_cast<size_t>(j)] = static_cast<uint32_t>(j * 37 % 120 + (j % 4 == 1 ? 3000000000u : 0u));
      h[static_cast<size_t>(j)] = kiln::Half(zf[static_cast<size_t>(j)] * 0.5f);
      z[static_cast<size_t>(j)] = kiln::BFloat16(std::fabs(zf[static_cast<size_t>(j)]) * 0.25f);
    }
    const int rows = (n + 7) / 8, groups = (rows + 1) / 2;
    std::vector<std::vector<float>> outs, lasts;
    std::vector<std::vector<kiln::Half>> hos;
    std::vector<std::vector<int32_t>> hists;
    std::vector<std::vector<uint32_t>> flag_values;
    for (int debug : {0, 1}) {
      std::vector<float> out(static_cast<size_t>(n) * kOut, -1.f), last(static_cast<size_t>(groups) * 2, -1.f);
      std::vector<kiln::Half> ho(static_cast<size_t>(n));
      std::vector<uint32_t> flags(static_cast<size_t>(n), 9u);
      std::vector<int32_t> hist(8, 0);
      compile_cpu(k, debug)({groups}, {x, u, h, z, out, ho, flags, hist, last, n, 3});
      outs.push_back(out);
      lasts.push_back(last);
      hos.push_back(ho);
      hists.push_back(hist);
      flag_values.push_back(flags);
    }
    for (size_t j = 0; j < outs[0].size(); ++j)
      ASSERT_TRUE(same(outs[0][j], outs[1][j]))
          << "n=" << n << " thread " << j / kOut << " value " << j % kOut << ": " << outs[0][j] << " vs " << outs[1][j];
    for (size_t j = 0; j < lasts[0].size(); ++j) EXPECT_TRUE(same(lasts[0][j], lasts[1][j])) << "last " << j;
    for (size_t j = 0; j < hos[0].size(); ++j)
      EXPECT_TRUE(same(static_cast<float>(hos[0][j]), static_cast<float>(hos[1][j]))) << "ho " << j;
    EXPECT_EQ(hists[0], hists[1]);
    EXPECT_EQ(flag_values[0], flag_values[1]);
    // Spot checks against plain C++ (not only the other rendering).
    EXPECT_EQ(outs[0][25], 0.f);
    if (n > 9) EXPECT_EQ(outs[0][9 * kOut + 25], 101.f) << "thread (1, 1)";
    int total = 0;
    for (int c : hists[0]) total += c;
    EXPECT_EQ(total, n);
  }
}

TEST(KernelVector, SharedMemoryPhasesMatchScalarRendering) {
  const Kernel k = shared_phases();
  EXPECT_NE(render(k, Target::Cpp).find("kk_t0 += KK_W"), std::string::npos);
  const int groups = 3;
  std::vector<float> x = inputs(groups * 32);
  for (float& v : x)
    if (!std::isfinite(v) || std::fabs(v) > 1e30f) v = 1.5f;
  std::vector<float> y0(x.size()), y1(x.size());
  compile_cpu(k, 0)({groups}, {x, y0, 5});
  compile_cpu(k, 1)({groups}, {x, y1, 5});
  for (size_t j = 0; j < x.size(); ++j) ASSERT_TRUE(same(y0[j], y1[j])) << j << ": " << y0[j] << " vs " << y1[j];
  // Plain C++: the same rounds over one group.
  for (int g = 0; g < groups; ++g) {
    std::vector<float> v(x.begin() + g * 32, x.begin() + (g + 1) * 32);
    int step = 1;
    for (int r = 0; r < 5; ++r) {
      std::vector<float> sh = v;
      for (int t = 0; t < 32; ++t) v[t] = t % 2 == 0 ? v[t] + sh[(t + step) % 32] : std::max(v[t], sh[(t + step) % 32]);
      step = step * 2 % 31;
    }
    for (int t = 0; t < 32; ++t) ASSERT_EQ(y0[g * 32 + t], v[t] + static_cast<float>(step)) << g << "," << t;
  }
}

TEST(KernelVector, VaryingLoopsMatchScalarRendering) {
  const Kernel k = varying_loops();
  EXPECT_NE(render(k, Target::Cpp).find("kk_t0 += KK_W"), std::string::npos);
  const int groups = 3, n = 300;
  std::vector<float> x = inputs(n);
  for (float& v : x)
    if (!std::isfinite(v) || std::fabs(v) > 1e30f) v = -0.25f;
  std::vector<float> y[2];
  std::vector<int32_t> s[2];
  for (int debug : {0, 1}) {
    y[debug].assign(groups * 16, -1.f);
    s[debug].assign(groups * 16, -1);
    compile_cpu(k, debug)({groups}, {x, y[debug], s[debug], n});
  }
  for (int i = 0; i < groups * 16; ++i) {
    ASSERT_TRUE(same(y[0][i], y[1][i])) << i << ": " << y[0][i] << " vs " << y[1][i];
    ASSERT_EQ(s[0][i], s[1][i]) << i;
  }
  EXPECT_EQ(s[0][26], 111);  // 27 takes 111 Collatz steps to reach 1
  EXPECT_EQ(s[0][0], 0);
}

TEST(KernelVector, WideValuesMatchScalarRendering) {
  const Kernel k = wide_values();
  const std::string src = render(k, Target::Cpp);
  EXPECT_NE(src.find("kk_t0 += KK_W"), std::string::npos) << "f64 and i64 values run as lanes too";
  EXPECT_NE(src.find("kk_wldm<kk_wd>"), std::string::npos) << "a contiguous f64 load is one vector load";
  for (int n : {5, 16, 45}) {
    std::vector<double> x(static_cast<size_t>(n));
    std::vector<int64_t> l(static_cast<size_t>(n));
    const std::vector<float> xf = inputs(n);
    for (int j = 0; j < n; ++j) {
      x[static_cast<size_t>(j)] = j % 9 == 4 ? -0.0 : static_cast<double>(xf[static_cast<size_t>(j)]) * 1.000001;
      l[static_cast<size_t>(j)] = (j * 37 % 23 - 11) * (j % 5 == 2 ? 3000000000LL : 1);
    }
    const int groups = (n + 15) / 16;
    std::vector<double> out[2];
    std::vector<int64_t> lo[2];
    for (int debug : {0, 1}) {
      out[debug].assign(static_cast<size_t>(n) * kWide, -1.0);
      lo[debug].assign(static_cast<size_t>(n) * kWide, -1);
      compile_cpu(k, debug)({groups}, {x, l, out[debug], lo[debug], n});
    }
    for (size_t j = 0; j < out[0].size(); ++j) {
      uint64_t a, b;
      std::memcpy(&a, &out[0][j], 8);
      std::memcpy(&b, &out[1][j], 8);
      ASSERT_TRUE(a == b || (std::isnan(out[0][j]) && std::isnan(out[1][j])))
          << "n=" << n << " thread " << j / kWide << " f64 value " << j % kWide << ": " << out[0][j] << " vs "
          << out[1][j];
      ASSERT_EQ(lo[0][j], lo[1][j]) << "n=" << n << " thread " << j / kWide << " i64 value " << j % kWide;
    }
    // Spot checks against plain C++.
    for (int j = 0; j < n; ++j) {
      const int64_t lj = l[static_cast<size_t>(j)];
      int64_t s = 0;
      for (int64_t t = 0; t < lj % 7; ++t) s += t;
      EXPECT_EQ(lo[0][static_cast<size_t>(j) * kWide + 6], s) << j;
      EXPECT_EQ(lo[0][static_cast<size_t>(j) * kWide + 1], lj != 0 ? 1000000000000LL / lj + 1000 % lj : -7) << j;
      EXPECT_FALSE(std::signbit(out[0][static_cast<size_t>(j) * kWide + 6])) << "abs(-0) is +0, thread " << j;
    }
  }
}

namespace {

/// y = 1.5 x + i (f32), d = 3 x (f64), q = 7 i (i32): three output-only buffers written a whole
/// vector at a time; `guarded`: under the bounds check i < n (a lane mask), else every thread.
Kernel stream_outputs(int group, bool guarded) {
  return trace("vector_stream", [=](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    auto d = b.output<double>("d");
    auto q = b.output<int32_t>("q");
    Val n = b.scalar<int32_t>("n");
    b.group_size(group);
    Val i = global_id();
    auto body = [&] {
      Val xi = x[i];
      y[i] = xi * 1.5f + cast(i, Type::F32);
      d[i] = cast(xi, Type::F64) * 3.0;
      q[i] = i * 7;
    };
    if (guarded)
      if_(i < n, body);
    else
      body();
  });
}

}  // namespace

// Outputs past the stream threshold are stored past the caches (kk_wsts) where a vector starts
// on its own boundary: the values must be those of plain stores, at every length around the
// vector width, with outputs that start on and off a boundary, on 1 and 2 threads.
TEST(KernelVector, StreamedOutputsGiveTheSameBits) {
  for (const int group : {8, 16, 64})
    for (const bool guarded : {true, false}) {
      const Kernel k = stream_outputs(group, guarded);
      const std::string src = render(k, Target::Cpp);
      EXPECT_NE(src.find(guarded ? "kk_wstm(b1, " : "kk_wsts(&b1["), std::string::npos) << src;
      EXPECT_NE(src.find("kk_stream_fence(a);"), std::string::npos);
      const CpuKernel c = compile_cpu(k);
      for (const int n : {1, 7, 8, 15, 16, 17, 33, 64, 100, 1000}) {
        if (!guarded && n % group != 0) continue;
        std::vector<float> x = inputs(n);
        for (const int off : {0, 1, 3}) {  // the outputs start `off` elements past a 64-byte line
          std::vector<std::vector<float>> ys;
          std::vector<std::vector<double>> ds;
          std::vector<std::vector<int32_t>> qs;
          for (const int64_t threshold : {int64_t{-1}, int64_t{0}})
            for (const int threads : {1, 2}) {
              kiln::set_num_threads(threads);
              kiln::cpu::set_stream_store_bytes(threshold);
              std::vector<float> yb(static_cast<size_t>(n) + 32, -1.f);
              std::vector<double> db(static_cast<size_t>(n) + 16, -1.0);
              std::vector<int32_t> qb(static_cast<size_t>(n) + 32, -1);
              auto line = [&](auto& v) {  // the first element on a 64-byte line, then `off` more
                auto p = reinterpret_cast<std::uintptr_t>(v.data());
                return v.data() + (64 - p % 64) % 64 / sizeof(v[0]) + off;
              };
              c({(n + group - 1) / group}, {x, Arg(line(yb), n), Arg(line(db), n), Arg(line(qb), n), n});
              ys.emplace_back(line(yb), line(yb) + n);
              ds.emplace_back(line(db), line(db) + n);
              qs.emplace_back(line(qb), line(qb) + n);
            }
          kiln::cpu::set_stream_store_bytes(-1);
          kiln::set_num_threads(1);
          for (int j = 0; j < n; ++j) {  // against plain C++
            const auto u = static_cast<size_t>(j);
            const double dw = static_cast<double>(x[u]) * 3.0;
            ASSERT_TRUE(same(ys[0][u], x[u] * 1.5f + static_cast<float>(j))) << "n=" << n << " element " << j;
            ASSERT_TRUE(ds[0][u] == dw || (std::isnan(ds[0][u]) && std::isnan(dw))) << "element " << j;
            ASSERT_EQ(qs[0][u], j * 7);
          }
          for (size_t r = 1; r < ys.size(); ++r) {  // streamed or not, 1 or 2 threads: the same bits
            const size_t f = static_cast<size_t>(n) * sizeof(float), dbytes = static_cast<size_t>(n) * sizeof(double);
            EXPECT_EQ(std::memcmp(ys[r].data(), ys[0].data(), f), 0) << "group " << group << " n=" << n << " run " << r;
            EXPECT_EQ(std::memcmp(ds[r].data(), ds[0].data(), dbytes), 0) << "offset " << off << " run " << r;
            EXPECT_EQ(qs[r], qs[0]);
          }
        }
      }
    }
}
