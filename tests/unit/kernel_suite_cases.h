// SPDX-License-Identifier: MIT OR Apache-2.0
// Launches of the kernel suite (kernel_suite.h) with fixed inputs, run on every target the
// machine has: the C++ target gives the expected buffers (it is itself checked against plain
// C++ references, test_kernel_cpu.cpp), Vulkan (test_kernel_suite_devices.cpp) and WebGPU in
// headless Chromium (tests/browser/) must reproduce them.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_suite.h"

namespace kiln::kernel::suite {

/// Bytes of one element of a buffer of type t (as the C++ target lays it out).
constexpr size_t type_bytes(Type t) {
  return t == Type::Bool ? 1 : t == Type::F16 || t == Type::BF16 ? 2 : t == Type::I64 || t == Type::F64 ? 8 : 4;
}

/// One buffer of a launch: its element type, its bytes before the launch, and whether the
/// kernel writes it (the buffers a target must reproduce).
struct CaseBuffer {
  Type type = Type::F32;
  std::vector<uint8_t> bytes;
  bool written = false;
  int64_t count() const { return static_cast<int64_t>(bytes.size() / type_bytes(type)); }
};

/// One launch of a suite kernel: its buffers, then its scalars (every suite kernel declares its
/// buffers first), and the tolerance of float buffers against the C++ target.
struct Case {
  std::string name;
  std::function<Kernel(const Limits&)> make;
  Dim3 groups;
  std::vector<CaseBuffer> buffers;
  std::vector<Arg> scalars;
  double rtol = 1e-5, atol = 1e-6;
  bool i64 = false, bf16 = false, f16 = false;  ///< types WGSL (or an adapter) may lack
};

namespace cases_detail {
template <class T>
CaseBuffer buffer(const std::vector<T>& v, bool written) {
  CaseBuffer b{type_of<T>(), std::vector<uint8_t>(v.size() * sizeof(T)), written};
  if (!v.empty()) std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}
inline std::vector<float> floats(size_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}
inline uint32_t ceil_div(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }
}  // namespace cases_detail

/// Every suite kernel with inputs that reach its loops' remainders and its groups' edges.
inline std::vector<Case> cases() {
  using namespace cases_detail;
  std::vector<Case> c;
  {  // a column broadcast along j and a matrix read transposed
    const int rows = 37, cols = 53;
    c.push_back({"broadcast_mul",
                 broadcast,
                 {ceil_div(cols, 16), ceil_div(rows, 4)},
                 {buffer(floats(rows, 1), false), buffer(floats(rows * cols, 2), false),
                  buffer(std::vector<float>(rows * cols), true)},
                 {rows, cols, 1, 0, 1, rows}});
  }
  c.push_back({"block_sum",
               block_sum,
               {40},
               {buffer(floats(100003, 3), false), buffer(std::vector<float>(40, -1.f), true)},
               {100003},
               1e-5,
               1e-4});
  {
    const int m = 45, n = 37, k = 70;
    c.push_back(
        {"matmul_tiled",
         matmul,
         {ceil_div(n, 16), ceil_div(m, 16)},
         {buffer(floats(m * k, 4), false), buffer(floats(k * n, 5), false), buffer(std::vector<float>(m * n), true)},
         {m, n, k},
         1e-5,
         1e-5});
  }
  c.push_back({"block_scan",
               block_scan,
               {ceil_div(1000, 256)},
               {buffer(floats(1000, 6), false), buffer(std::vector<float>(1000), true)},
               {1000},
               1e-5,
               1e-5});
  {
    std::mt19937 g(7);
    std::vector<uint32_t> values(50000);
    for (uint32_t& v : values) v = g() % 1000;
    c.push_back({"histogram",
                 histogram,
                 {13},
                 {buffer(values, false), buffer(std::vector<uint32_t>(64, 0), true)},
                 {static_cast<int32_t>(values.size())}});
  }
  {  // the same bits on every target: no tolerance (inputs whose results are finite)
    const int n = 1000;
    c.push_back({"math_builtins",
                 math_builtins,
                 {ceil_div(n, 64)},
                 {buffer(floats(n, 11, -30.f, 30.f), false), buffer(std::vector<float>(7 * n), true)},
                 {n},
                 0,
                 0});
  }
  {
    const int n = 1000;
    std::vector<float> x = floats(n, 13, 1.f, 20.f), y = floats(n, 14, -25.f, 25.f);  // finite results
    for (int i = 0; i < n; i += 3) x[i] = -std::floor(x[i]);                          // negative bases, integer powers
    for (int i = 0; i < n; i += 3) y[i] = std::floor(y[i]);
    c.push_back({"math_pow",
                 math_pow,
                 {ceil_div(n, 64)},
                 {buffer(x, false), buffer(y, false), buffer(std::vector<float>(n), true)},
                 {n},
                 0,
                 0});
  }
  {  // f16/bf16 arithmetic: the same bits on every target (f32 buffers, so WGSL runs it too)
    std::vector<float> x = floats(600, 16, -60.f, 60.f);
    const float special[] = {0.f, -0.f, 1e-7f, -6e-8f, 3e-5f, 65504.f, 65519.f, -65500.f, 255.5f, 0.33325195f};
    for (size_t j = 0; j < std::size(special); ++j) x[j * 7] = special[j];
    c.push_back({"half_math",
                 half_math,
                 {ceil_div(600, 64)},
                 {buffer(x, false), buffer(std::vector<float>(6 * 600), true)},
                 {600},
                 0,
                 0});
  }
  c.push_back({"softmax_rows",
               softmax,
               {9},
               {buffer(floats(9 * 301, 8, -20.f, 20.f), false), buffer(std::vector<float>(9 * 301), true)},
               {301}});
  {
    const int n = 777;
    std::vector<float> xf = floats(n, 9), yf = floats(n, 10), zf = floats(n, 11);
    std::vector<Half> x(xf.begin(), xf.end()), y(yf.begin(), yf.end());
    std::vector<BFloat16> z(zf.begin(), zf.end());
    Case h{"half_axpy", half_axpy, {ceil_div(n, 64)}, {buffer(x, false), buffer(z, false), buffer(y, true)}, {1.5f, n}};
    h.bf16 = h.f16 = true;
    c.push_back(h);
  }
  c.push_back({"vec4_mix", vec4, {1}, {buffer(floats(200, 12), false), buffer(std::vector<float>(200), true)}, {50}});
  {
    std::vector<uint32_t> x(100);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint32_t>(i + 1);
    c.push_back({"collatz",
                 collatz,
                 {ceil_div(100, 32)},
                 {buffer(x, false), buffer(std::vector<int32_t>(100, -1), true)},
                 {100}});
  }
  {
    std::vector<int32_t> x = {0, 1, -1, 7, -8, 123456, -99999, 2147483647, -2147483647};
    Case m{"int_mix",
           int_mix,
           {1},
           {buffer(x, false), buffer(std::vector<int64_t>(x.size()), true)},
           {static_cast<int32_t>(x.size())}};
    m.i64 = true;
    c.push_back(m);
  }
  c.push_back({"functions",
               functions,
               {ceil_div(300, 64)},
               {buffer(floats(300, 17), false), buffer(std::vector<float>(300), true)},
               {300, 0.75f}});
  for (int32_t mode : {0, 1})
    c.push_back({"uniform_flow_mode" + std::to_string(mode),
                 uniform_flow,
                 {5},
                 {buffer(floats(5 * 64, 15), false), buffer(std::vector<float>(5), true)},
                 {mode}});
  return c;
}

/// The case's buffers after running it on the C++ target (compiled for `limits`).
/// The case's buffers after `launch` ran its kernel (traced for `limits`) over copies of them.
inline std::vector<CaseBuffer> run_with(
    const Case& c, const Limits& limits,
    const std::function<void(const Kernel&, Dim3, const std::vector<Arg>&)>& launch) {
  std::vector<CaseBuffer> bufs = c.buffers;
  std::vector<Arg> args;
  for (CaseBuffer& b : bufs) {
    Arg a(static_cast<float*>(nullptr), 0);
    a.type = b.type;
    a.ptr = b.bytes.data();
    a.count = b.count();
    args.push_back(a);
  }
  args.insert(args.end(), c.scalars.begin(), c.scalars.end());
  launch(c.make(limits), c.groups, args);
  return bufs;
}

/// The case's buffers after the C++ target ran it.
inline std::vector<CaseBuffer> run_cpp(const Case& c, const Limits& limits = {}) {
  return run_with(c, limits,
                  [](const Kernel& k, Dim3 g, const std::vector<Arg>& a) { compile_cpu(k, 0).launch(g, a); });
}

}  // namespace kiln::kernel::suite
