// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel suite: kernels written in the kernel language that every target renders (and the
// C++ target runs against plain C++ references, tests/unit/test_kernel_cpu.cpp).
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kernel.h"

namespace kiln::kernel::suite {

/// y[i, j] = v + sigmoid(v) / 2 with v = x[i*xs0 + j*xs1] * w[i*ws0 + j*ws1]: broadcasting
/// through strides (a stride of 0 repeats a row or a column).
inline Kernel broadcast(const Limits& l = {}) {
  return trace(
      "broadcast_mul",
      [](Builder& b) {
        auto x = b.input<float>("x");
        auto w = b.input<float>("w");
        auto y = b.output<float>("y");
        Val rows = b.scalar<int32_t>("rows"), cols = b.scalar<int32_t>("cols");
        Val xs0 = b.scalar<int32_t>("xs0"), xs1 = b.scalar<int32_t>("xs1");
        Val ws0 = b.scalar<int32_t>("ws0"), ws1 = b.scalar<int32_t>("ws1");
        b.group_size(16, 4);
        Val j = global_id(0), i = global_id(1);
        if_(i < rows && j < cols, [&] {
          Val v = x[i * xs0 + j * xs1] * w[i * ws0 + j * ws1];
          y[i * cols + j] = v + sigmoid(v) * 0.5f;
        });
      },
      l);
}

/// partial[g] = the sum of x over a grid-stride loop of group g: shared memory, barriers and
/// (where the target has them) subgroup sums.
inline Kernel block_sum(const Limits& l = {}) {
  return trace(
      "block_sum",
      [](Builder& b) {
        const int gs = static_cast<int>(b.param("group", 128));
        const int sg = b.limits().subgroups ? static_cast<int>(b.limits().subgroup_size) : 1;
        auto x = b.input<float>("x");
        auto out = b.output<float>("partial");
        Val n = b.scalar<int32_t>("n");
        auto sums = b.shared<float>("sums", static_cast<uint32_t>(gs / sg));
        b.group_size(static_cast<uint32_t>(gs));
        Val t = thread_id();
        Var acc(0.0f);
        for_(global_id(), n, num_groups() * gs, [&](Val i) { acc += x[i]; });
        Val v = subgroup_add(acc);
        if (sg > 1)
          if_(lane_id() == 0, [&] { sums[t / sg] = v; });
        else
          sums[t] = v;
        barrier();
        for (int s = gs / sg / 2; s > 0; s /= 2) {
          if_(t < s, [&] { sums[t] = sums[t] + sums[t + s]; });
          barrier();
        }
        if_(t == 0, [&] { out[group_id()] = sums[0]; });
      },
      l);
}

/// c = a (m x k) * b (k x n), tiles of T x T in shared memory, products added by fma.
inline Kernel matmul(const Limits& l = {}) {
  return trace(
      "matmul_tiled",
      [](Builder& b) {
        const int T = static_cast<int>(b.param("tile", 16));
        auto A = b.input<float>("a");
        auto B = b.input<float>("b");
        auto C = b.output<float>("c");
        Val M = b.scalar<int32_t>("m"), N = b.scalar<int32_t>("n"), K = b.scalar<int32_t>("k");
        auto ta = b.shared<float>("ta", static_cast<uint32_t>(T * T));
        auto tb = b.shared<float>("tb", static_cast<uint32_t>(T * T));
        b.group_size(static_cast<uint32_t>(T), static_cast<uint32_t>(T));
        Val tx = thread_id(0), ty = thread_id(1);
        Val row = group_id(1) * T + ty, col = group_id(0) * T + tx;
        Var acc(0.0f);
        for_(0, (K + (T - 1)) / T, [&](Val tile) {
          Val ka = tile * T + tx, kb = tile * T + ty;
          if_(row < M && ka < K, [&] { ta[ty * T + tx] = A[row * K + ka]; }).else_([&] { ta[ty * T + tx] = 0.0f; });
          if_(kb < K && col < N, [&] { tb[ty * T + tx] = B[kb * N + col]; }).else_([&] { tb[ty * T + tx] = 0.0f; });
          barrier();
          for_(0, T, [&](Val kk) { acc = fma(ta[ty * T + kk], tb[kk * T + tx], Val(acc)); });
          barrier();
        });
        if_(row < M && col < N, [&] { C[row * N + col] = acc; });
      },
      l);
}

/// y = the inclusive prefix sum of x within each block of `group` elements (Hillis-Steele).
inline Kernel block_scan(const Limits& l = {}) {
  return trace(
      "block_scan",
      [](Builder& b) {
        const int gs = static_cast<int>(b.param("group", 256));
        auto x = b.input<float>("x");
        auto y = b.output<float>("y");
        Val n = b.scalar<int32_t>("n");
        auto buf = b.shared<float>("buf", static_cast<uint32_t>(gs));
        b.group_size(static_cast<uint32_t>(gs));
        Val t = thread_id(), i = global_id();
        if_(i < n, [&] { buf[t] = x[i]; }).else_([&] { buf[t] = 0.0f; });
        barrier();
        for (int off = 1; off < gs; off *= 2) {
          Var add(0.0f);
          if_(t >= off, [&] { add = buf[t - off]; });
          barrier();
          buf[t] = buf[t] + add;
          barrier();
        }
        if_(i < n, [&] { y[i] = buf[t]; });
      },
      l);
}

/// hist[v % bins] counts the values: a histogram in shared memory with atomics, then merged.
inline Kernel histogram(const Limits& l = {}) {
  return trace(
      "histogram",
      [](Builder& b) {
        const int bins = static_cast<int>(b.param("bins", 64));
        const int gs = 128;
        auto x = b.input<uint32_t>("values");
        auto hist = b.inout<uint32_t>("hist");
        Val n = b.scalar<int32_t>("n");
        auto local = b.shared<uint32_t>("local", static_cast<uint32_t>(bins));
        b.group_size(gs);
        Val t = thread_id();
        for_(t, bins, gs, [&](Val j) { local[j] = 0u; });
        barrier();
        for_(global_id(), n, num_groups() * gs, [&](Val i) { atomic_add(local[x[i] % bins], 1u); });
        barrier();
        for_(t, bins, gs, [&](Val j) { atomic_add(hist[j], local[j]); });
      },
      l);
}

/// y[r, :] = softmax(x[r, :]): one group per row, max and sum through shared memory.
inline Kernel softmax(const Limits& l = {}) {
  return trace(
      "softmax_rows",
      [](Builder& b) {
        const int gs = static_cast<int>(b.param("group", 128));
        auto x = b.input<float>("x");
        auto y = b.output<float>("y");
        Val cols = b.scalar<int32_t>("cols");
        auto red = b.shared<float>("red", static_cast<uint32_t>(gs));
        b.group_size(static_cast<uint32_t>(gs));
        Val t = thread_id(), base = group_id() * cols;
        auto reduce = [&](bool is_max) {
          for (int s = gs / 2; s > 0; s /= 2) {
            if_(t < s, [&] { red[t] = is_max ? max(red[t], red[t + s]) : red[t] + red[t + s]; });
            barrier();
          }
        };
        Var m(-INFINITY);
        for_(t, cols, gs, [&](Val j) { m = max(m, x[base + j]); });
        red[t] = m;
        barrier();
        reduce(true);
        Val mx = red[0];
        barrier();
        Var s(0.0f);
        for_(t, cols, gs, [&](Val j) { s += exp(x[base + j] - mx); });
        red[t] = s;
        barrier();
        reduce(false);
        Val inv = 1.0f / red[0];
        for_(t, cols, gs, [&](Val j) { y[base + j] = exp(x[base + j] - mx) * inv; });
      },
      l);
}

/// y = a * x + y + z with x, y in f16 and z in bf16 (storage), computed in f32.
inline Kernel half_axpy(const Limits& l = {}) {
  return trace(
      "half_axpy",
      [](Builder& b) {
        auto x = b.input<Half>("x");
        auto z = b.input<BFloat16>("z");
        auto y = b.inout<Half>("y");
        Val a = b.scalar<float>("a"), n = b.scalar<int32_t>("n");
        b.group_size(64);
        Val i = global_id();
        if_(i < n, [&] { y[i] = a * x[i] + y[i] + z[i]; });
      },
      l);
}

/// Vector loads and stores of 4 lanes: y[4i..4i+3] from x[4i..4i+3].
inline Kernel vec4(const Limits& l = {}) {
  return trace(
      "vec4_mix",
      [](Builder& b) {
        auto x = b.input<float>("x");
        auto y = b.output<float>("y");
        Val n4 = b.scalar<int32_t>("n4");
        b.group_size(64);
        Val i = global_id();
        if_(i < n4, [&] {
          auto v = x.load4(i * 4);
          auto w = x.load2(i * 4 + 2);
          y.store4(i * 4, {v[0] * 2.0f, v[1] + 1.0f, v[2] * v[3], w[0] - w[1]});
        });
      },
      l);
}

/// steps[i] = the number of Collatz steps from x[i] to 1: while_, u32 arithmetic, select.
inline Kernel collatz(const Limits& l = {}) {
  return trace(
      "collatz",
      [](Builder& b) {
        auto x = b.input<uint32_t>("x");
        auto steps = b.output<int32_t>("steps");
        Val n = b.scalar<int32_t>("n");
        b.group_size(32);
        Val i = global_id();
        if_(i < n, [&] {
          Var v{Val(x[i])};
          Var c(0);
          while_([&] { return Val(v) > 1u; },
                 [&] {
                   v = select((v & 1u) == 0u, v >> 1u, v * 3u + 1u);
                   c += 1;
                 });
          steps[i] = c;
        });
      },
      l);
}

/// Integer math across types: i64 accumulation, casts, min/max, shifts and bit operations.
inline Kernel int_mix(const Limits& l = {}) {
  return trace(
      "int_mix",
      [](Builder& b) {
        auto x = b.input<int32_t>("x");
        auto y = b.output<int64_t>("y");
        Val n = b.scalar<int32_t>("n");
        b.group_size(64);
        Val i = global_id();
        if_(i < n, [&] {
          Val v = x[i];
          Val w = cast(max(v, -v) ^ (v << 3), Type::I64) * int64_t{1000003};
          Val f = cast(floor(cast(v, Type::F32) * 0.5f), Type::I64);
          y[i] = w + min(f, int64_t{7}) + cast(cast(v, Type::U32) >> 28u, Type::I64);
        });
      },
      l);
}

/// out[g] = max or sum (by the scalar `mode`) of the group's elements: barriers inside a while_
/// loop and inside both branches of an if_ on a uniform condition.
inline Kernel uniform_flow(const Limits& l = {}) {
  return trace(
      "uniform_flow",
      [](Builder& b) {
        const int gs = 64;
        auto x = b.input<float>("x");
        auto out = b.output<float>("out");
        Val mode = b.scalar<int32_t>("mode");
        auto sh = b.shared<float>("sh", gs);
        b.group_size(gs);
        Val t = thread_id();
        Val mine = x[global_id()];
        sh[t] = mine;
        barrier();
        Var s(gs / 2);
        while_([&] { return Val(s) > 0; },
               [&] {
                 if_(mode == 0, [&] {
                   if_(t < s, [&] {
                     Val a = sh[t];
                     sh[t] = max(a, sh[t + s]);
                   });
                   barrier();
                 }).else_([&] {
                   if_(t < s, [&] {
                     Val a = sh[t];
                     sh[t] = a + sh[t + s];
                   });
                   barrier();
                 });
                 s = Val(s) >> 1;
               });
        // A value from before the loop, used after it (kept per thread across the phases).
        if_(t == 0, [&] { out[group_id()] = sh[0] + mine * 0.0f; });
      },
      l);
}

/// The language's built-in math of f32: out[7 i + 0..6] = exp, log |x|, tanh, sigmoid, erf, sin
/// and cos of x[i]. They are traced as the CPU's polynomial forms, so every target gives the same bits.
inline Kernel math_builtins(const Limits& l = {}) {
  return trace(
      "math_builtins",
      [](Builder& b) {
        b.group_size(64);
        auto x = b.input<float>("x");
        auto out = b.output<float>("out");
        Val n = b.scalar<int32_t>("n");
        Val i = group_id() * 64 + thread_id();
        if_(i < n, [&] {
          Val v = x[i];
          out[i * 7] = exp(v);
          out[i * 7 + 1] = log(abs(v));
          out[i * 7 + 2] = tanh(v);
          out[i * 7 + 3] = sigmoid(v);
          out[i * 7 + 4] = erf(v);
          out[i * 7 + 5] = sin(v);
          out[i * 7 + 6] = cos(v);
        });
      },
      l);
}

/// The language's pow of f32: out[i] = pow(x[i], y[i]) (a double-f32 log2, no f64).
inline Kernel math_pow(const Limits& l = {}) {
  return trace(
      "math_pow",
      [](Builder& b) {
        b.group_size(64);
        auto x = b.input<float>("x");
        auto y = b.input<float>("y");
        auto out = b.output<float>("out");
        Val n = b.scalar<int32_t>("n");
        Val i = group_id() * 64 + thread_id();
        if_(i < n, [&] { out[i] = pow(Val(x[i]), Val(y[i])); });
      },
      l);
}

/// f16 and bf16 arithmetic: every operation on an f16 (bf16) value rounds to f16 (bf16), as
/// native half arithmetic does; y[6 i + 0..5] are f32 copies of six such results.
inline Kernel half_math(const Limits& l = {}) {
  return trace(
      "half_math",
      [](Builder& b) {
        auto x = b.input<float>("x");
        auto y = b.output<float>("y");
        Val n = b.scalar<int32_t>("n");
        b.group_size(64);
        Val i = global_id();
        if_(i < n, [&] {
          Val xf = x[i];
          Val h = cast(xf, Type::F16), hb = cast(xf, Type::BF16);
          Val o = i * 6;
          y[o] = cast(h * h + h / 3.0f, Type::F32);
          y[o + 1] = cast(exp(h * 0.25f) - sqrt(abs(h)), Type::F32);
          Var acc(Type::F16);
          for_(Val(0), Val(4), [&](Val j) { acc = Val(acc) * h + cast(j, Type::F16); });
          y[o + 2] = cast(Val(acc), Type::F32);
          y[o + 3] = cast(hb * hb + hb, Type::F32);
          y[o + 4] = cast(max(h, 0.5f) + select(h > 0.0f, h, -h) + fma(h, h, h), Type::F32);
          y[o + 5] = cast(h * 1000.0f, Type::F32) + cast(cast(hb, Type::F16), Type::F32);
        });
      },
      l);
}

/// y = the kernel functions below of x (three parameters of two types, a local, a nested
/// call), a divergent call and a uniform one (literal arguments).
inline const Function& square_plus() {
  static const Function f("suite_square_plus", {Type::F32, Type::F32},
                          [](const std::vector<Val>& a) { return a[0] * a[0] + a[1]; });
  return f;
}
inline const Function& mix_fn() {
  static const Function f("suite_mix", {Type::F32, Type::I32, Type::F32}, [](const std::vector<Val>& a) {
    Var acc(a[0]);
    acc = square_plus()(Val(acc), a[2]);
    acc = select(a[1] > 2, Val(acc) * 0.5f, Val(acc) - 1.0f);
    return Val(acc) + cast(a[1], Type::F32);
  });
  return f;
}
/// The reference of mix_fn.
inline float mix_reference(float x, int32_t k, float c) {
  float acc = x * x;
  acc = acc + c;
  acc = k > 2 ? acc * 0.5f : acc - 1.0f;
  return acc + static_cast<float>(k);
}
inline Kernel functions(const Limits& l = {}) {
  return trace(
      "functions",
      [](Builder& b) {
        auto x = b.input<float>("x");
        auto y = b.output<float>("y");
        Val n = b.scalar<int32_t>("n"), c = b.scalar<float>("c");
        b.group_size(64);
        Val i = global_id();
        if_(i < n, [&] {
          Val xi = x[i];
          y[i] = mix_fn()(xi, i % 5, c) + mix_fn()(c, 3, 1.0f);
        });
      },
      l);
}

struct Entry {
  std::string name;
  std::function<Kernel(const Limits&)> make;
  bool i64 = false;   ///< uses 64-bit integers (no WGSL)
  bool bf16 = false;  ///< uses bf16 storage (no WGSL)
};

inline std::vector<Entry> all() {
  return {{"broadcast_mul", broadcast},
          {"block_sum", block_sum},
          {"matmul_tiled", matmul},
          {"block_scan", block_scan},
          {"histogram", histogram},
          {"softmax_rows", softmax},
          {"half_axpy", half_axpy, false, true},
          {"vec4_mix", vec4},
          {"collatz", collatz},
          {"int_mix", int_mix, true},
          {"uniform_flow", uniform_flow},
          {"math_builtins", math_builtins},
          {"math_pow", math_pow},
          {"half_math", half_math},
          {"functions", functions}};
}

}  // namespace kiln::kernel::suite
