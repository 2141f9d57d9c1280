// SPDX-License-Identifier: MIT OR Apache-2.0
// Kernel functions (kiln::kernel::Function): values on the C++ target (vector and scalar mode)
// against plain C++, one call op per call, one definition per source on every target, and the
// errors of bad bodies and bad calls. The kernel suite's `functions` case runs them on Vulkan
// and WebGPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernel_suite.h"
#include "kiln/kernel.h"
#include "test_util.h"

using namespace kiln::kernel;
namespace suite = kiln::kernel::suite;

namespace {

using kiln::test::error_of;

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

/// suite::mix_fn over x in groups of `group` threads (64: vector mode; 12: scalar mode).
Kernel mix_kernel(uint32_t group) {
  return trace("mix_" + std::to_string(group), [group](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    Val n = b.scalar<int32_t>("n"), c = b.scalar<float>("c");
    b.group_size(group);
    Val i = global_id();
    if_(i < n, [&] {
      Val xi = x[i];
      y[i] = suite::mix_fn()(xi, i % 5, c) + suite::mix_fn()(c, 3, 1.0f);
    });
  });
}

}  // namespace

TEST(KernelFunctions, ValuesMatchPlainCppInVectorAndScalarMode) {
  const int n = 203;
  const float c = 0.75f;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = -3.0f + 0.03f * static_cast<float>(i);
  for (uint32_t group : {64u, 12u}) {
    CpuKernel k = compile_cpu(mix_kernel(group), 0);
    std::vector<float> y(n, -1.f);
    k({(n + group - 1) / group}, {x, y, n, c});
    for (int i = 0; i < n; ++i) {
      const float want = suite::mix_reference(x[i], i % 5, c) + suite::mix_reference(c, 3, 1.0f);
      ASSERT_NEAR(y[i], want, 1e-6f * (1 + std::fabs(want))) << "group " << group << ", element " << i;
    }
  }
}

TEST(KernelFunctions, OneCallOpPerCallAndEqualCallsMerge) {
  Kernel k = trace("twice", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    Val i = global_id();
    Val xi = x[i];
    y[i] = suite::square_plus()(xi, 2.0f) + suite::square_plus()(xi, 2.0f) + suite::square_plus()(xi, 3.0f);
  });
  const std::string d = dump(k);
  EXPECT_EQ(count(d, "call suite_square_plus"), 2u) << d;  // the two equal calls are one value
  EXPECT_EQ(count(d, ":f32 = *"), 0u) << d;                // the body is not in the kernel
}

TEST(KernelFunctions, EachTargetDefinesEachFunctionOnceCalleesFirst) {
  const Kernel k = mix_kernel(64);
  struct Want {
    Target t;
    std::string mix, square;
  };
  const Want wants[] = {
      {Target::Cpp, "static inline float kk_f_suite_mix(float p0, int p1, float p2) {",
       "static inline float kk_f_suite_square_plus(float p0, float p1) {"},
      {Target::Cuda, "__device__ __forceinline__ float kk_f_suite_mix(float p0, int p1, float p2) {",
       "__device__ __forceinline__ float kk_f_suite_square_plus(float p0, float p1) {"},
      {Target::Glsl, "float kk_f_suite_mix(float p0, int p1, float p2) {",
       "float kk_f_suite_square_plus(float p0, float p1) {"},
      {Target::Wgsl, "fn kk_f_suite_mix(p0: f32, p1: i32, p2: f32) -> f32 {",
       "fn kk_f_suite_square_plus(p0: f32, p1: f32) -> f32 {"},
  };
  for (const Want& w : wants) {
    const std::string text = render(k, w.t);
    SCOPED_TRACE(std::string(target_name(w.t)) + ":\n" + text);
    EXPECT_EQ(count(text, w.mix), 1u);
    EXPECT_EQ(count(text, w.square), 1u);
    EXPECT_LT(text.find(w.square), text.find(w.mix));
    EXPECT_GE(count(text, "kk_f_suite_mix("), 2u);  // its definition and a call
  }
  // The C++ target's vector mode calls the vector form, whose parameters are vectors.
  const std::string cpp = render(k, Target::Cpp);
  EXPECT_HAS(cpp, "static inline kk_wf kk_fv_suite_mix(kk_wf p0, kk_wi p1, kk_wf p2) {");
  EXPECT_HAS(cpp, "kk_fv_suite_square_plus(");
}

TEST(KernelFunctions, BadBodiesAreRejectedWithTheFunctionsName) {
  auto in_kernel = [](const Function& f) {
    return error_of([&] {
      trace("calls", [&](Builder& b) {
        auto y = b.output<float>("y");
        y[global_id()] = f(1.0f);
      });
    });
  };
  std::string m = error_of([] {
    trace("captures", [](Builder& b) {
      auto x = b.input<float>("x");
      auto y = b.output<float>("y");
      const Function f("test_captures_buffer", {Type::I32}, [&](const std::vector<Val>& a) { return Val(x[a[0]]); });
      y[global_id()] = f(global_id());
    });
  });
  EXPECT_HAS(m, "[function 'test_captures_buffer'] memory cannot be used in a function");

  const Function branches("test_branches", {Type::F32}, [](const std::vector<Val>& a) {
    Var r(a[0]);
    if_(a[0] > 0.0f, [&] { r = 1.0f; });
    return Val(r);
  });
  EXPECT_HAS(in_kernel(branches), "[function 'test_branches'] control flow (if_, for_, while_) cannot be used");
  const Function indexes("test_thread", {Type::F32},
                         [](const std::vector<Val>& a) { return a[0] + cast(thread_id(), Type::F32); });
  EXPECT_HAS(in_kernel(indexes), "[function 'test_thread'] a thread or group index cannot be used");
  const Function waits("test_barrier", {Type::F32}, [](const std::vector<Val>& a) {
    barrier();
    return a[0];
  });
  EXPECT_HAS(in_kernel(waits), "[function 'test_barrier'] barrier() cannot be used");
  const Function tests("test_bool", {Type::F32}, [](const std::vector<Val>& a) { return a[0] > 0.0f; });
  EXPECT_HAS(in_kernel(tests), "[function 'test_bool'] a function returns a number, not bool");
  static const Function* self = nullptr;
  const Function recurses("test_recurses", {Type::F32}, [](const std::vector<Val>& a) { return (*self)(a[0]); });
  self = &recurses;
  EXPECT_HAS(in_kernel(recurses), "[function 'test_recurses'] calls itself");
  // A value of the calling kernel is not the function's.
  m = error_of([] {
    trace("outer_value", [](Builder& b) {
      auto y = b.output<float>("y");
      Val outer = cast(global_id(), Type::F32);
      const Function f("test_outer_value", {Type::F32}, [&](const std::vector<Val>& a) { return a[0] + outer; });
      y[global_id()] = f(1.0f);
    });
  });
  EXPECT_HAS(m, "[function 'test_outer_value'] a value of another trace used in +");
  EXPECT_HAS(error_of([] {
               Function("test_six", std::vector<Type>(6, Type::F32), [](const std::vector<Val>& a) { return a[0]; });
             }),
             "[function 'test_six'] takes at most 5 parameters, not 6");
}

TEST(KernelFunctions, BadCallsAreRejected) {
  auto call = [](const std::function<Val()>& f) {
    return error_of([&] {
      trace("bad_call", [&](Builder& b) {
        auto y = b.output<float>("y");
        y[global_id()] = f();
      });
    });
  };
  EXPECT_HAS(call([] { return suite::square_plus().call({Val(1.0f)}); }),
             "[kernel 'bad_call'] a call of 'suite_square_plus' with 1 arguments (it takes 2)");
  EXPECT_HAS(call([] { return suite::square_plus()(global_id(), 1.0f); }),
             "type mismatch in a call of 'suite_square_plus': argument 0 is i32, the parameter f32");
  const Function a("test_twin", {Type::F32}, [](const std::vector<Val>& v) { return v[0] + 1.0f; });
  const Function b("test_twin", {Type::F32}, [](const std::vector<Val>& v) { return v[0] + 2.0f; });
  EXPECT_HAS(call([&] { return a(1.0f) + b(2.0f); }), "two different functions named 'test_twin'");
  EXPECT_HAS(error_of([] { (void)suite::square_plus()(1.0f, 2.0f); }), "outside kiln::kernel::trace()");
}

TEST(KernelFunctions, KernelsOnSeveralThreadsShareOneTrace) {
  const Function twice("test_threads_twice", {Type::F32}, [](const std::vector<Val>& a) { return a[0] * 2.0f; });
  std::vector<std::string> texts(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < texts.size(); ++t)
    threads.emplace_back([&, t] {
      const Kernel k = trace("threads", [&](Builder& b) {
        auto y = b.output<float>("y");
        y[global_id()] = twice(cast(global_id(), Type::F32));
      });
      texts[t] = render(k, Target::Glsl);
    });
  for (std::thread& th : threads) th.join();
  for (const std::string& t : texts) EXPECT_EQ(t, texts[0]);
  EXPECT_EQ(count(texts[0], "float kk_f_test_threads_twice(float p0) {"), 1u) << texts[0];
  EXPECT_EQ(twice.ir().get(), twice.ir().get());
}

TEST(KernelFunctions, NoParametersAndAHalfResult) {
  const Function pi("test_pi", {}, [](const std::vector<Val>&) { return Val(3.25f); });
  // f16 in and out: the value is rounded to f16 inside the function and stays an f16 value.
  const Function halve("test_halve_f16", {Type::F16},
                       [](const std::vector<Val>& a) { return a[0] * Val::constant(0.5, Type::F16); });
  for (uint32_t group : {64u, 12u}) {
    const Kernel k = trace("no_params_" + std::to_string(group), [&](Builder& b) {
      auto x = b.input<float>("x");
      auto y = b.output<float>("y");
      b.group_size(group);
      Val i = global_id();
      Val h = cast(Val(x[i]), Type::F16);
      y[i] = cast(halve(h), Type::F32) + pi();
    });
    for (Target t : {Target::Cpp, Target::Cuda, Target::Glsl, Target::Wgsl})
      EXPECT_NE(render(k, t).find("kk_f_test_pi()"), std::string::npos) << target_name(t);
    std::vector<float> x = {1.0f, 0.1f, -3.0f, 65504.0f}, y(group, 0.f);
    x.resize(group, 2.0f);
    compile_cpu(k, 0)({1}, {x, y});
    for (uint32_t i = 0; i < group; ++i) {
      const float h = static_cast<float>(kiln::Half(x[i]));
      EXPECT_EQ(y[i], static_cast<float>(kiln::Half(h * 0.5f)) + 3.25f) << "group " << group << ", " << i;
    }
  }
}

namespace {

/// y[i] = f(x[i]) over n values, 64 threads a group.
Kernel map_with(const std::function<Val(Val)>& f, const char* name) {
  return trace(name, [&](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    Val n = b.scalar<int32_t>("n");
    b.group_size(64);
    Val i = global_id();
    if_(i < n, [&] { y[i] = f(Val(x[i])); });
  });
}

}  // namespace

// A fast form is taken by the C++ target's vector form where the guard holds on every lane of a
// vector, and nowhere else: a fast body that (wrongly) differs from the body shows which ran.
TEST(KernelFunctions, FastFormRunsWhereTheGuardHoldsOnEveryLane) {
  static const Function marked(
      "test_marked_fast", {Type::F32}, [](const std::vector<Val>& a) { return a[0] * 2.0f; },
      [](const std::vector<Val>& a) { return a[0] >= 0.0f; },
      [](const std::vector<Val>& a) { return a[0] * 2.0f + 1000.0f; });
  const Kernel k = map_with([](Val v) { return marked(v); }, "fast_marked");
  const int n = 64;
  std::vector<float> x(n), y(n), ys(n);
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i == 37 ? -1.0f : static_cast<float>(i);  // one lane out
  compile_cpu(k)({1}, {x, y, n});
  compile_cpu(k, true)({1}, {x, ys, n});  // the scalar rendering: the body everywhere
  // Vectors of 8 or 16 lanes (KK_W): the one holding element 37 runs the body, 32-39 at least;
  // 40-47 are in it with 16 lanes, all of them or none.
  auto took_fast = [&](int i) { return y[static_cast<size_t>(i)] != x[static_cast<size_t>(i)] * 2.0f; };
  for (int i = 0; i < n; ++i) {
    const float xi = x[static_cast<size_t>(i)];
    EXPECT_EQ(y[static_cast<size_t>(i)], xi * 2.0f + (took_fast(i) ? 1000.0f : 0.0f)) << "element " << i;
    EXPECT_EQ(took_fast(i), i < 32 || i >= 48 || (i >= 40 && took_fast(40))) << "element " << i;
    EXPECT_EQ(ys[static_cast<size_t>(i)], xi * 2.0f);
  }
  const std::string glsl = render(k, Target::Glsl);
  EXPECT_EQ(glsl.find("test_marked_fast_fast"), std::string::npos) << "the GPU forms compute the body only";
}

TEST(KernelFunctions, BadFastFormsAreRejected) {
  static const Function not_bool(
      "test_fast_guard_not_bool", {Type::F32}, [](const std::vector<Val>& a) { return a[0]; },
      [](const std::vector<Val>& a) { return a[0]; }, [](const std::vector<Val>& a) { return a[0]; });
  EXPECT_NE(
      error_of([&] { (void)map_with([](Val v) { return not_bool(v); }, "bad_guard"); }).find("guard returns bool"),
      std::string::npos);
  static const Function other_type(
      "test_fast_other_type", {Type::F32}, [](const std::vector<Val>& a) { return a[0]; },
      [](const std::vector<Val>& a) { return a[0] > 0.0f; },
      [](const std::vector<Val>& a) { return cast(a[0], Type::I32); });
  EXPECT_NE(error_of([&] {
              (void)map_with([](Val v) { return other_type(v); }, "bad_fast");
            }).find("the fast form returns i32"),
            std::string::npos);
  EXPECT_THROW(Function(
                   "test_fast_missing", {Type::F32}, [](const std::vector<Val>& a) { return a[0]; }, nullptr,
                   [](const std::vector<Val>& a) { return a[0]; }),
               kiln::Error);
}

// The library's exp: the fast form (|x| < 87.5) and the body give the same bits, on inputs on
// both sides of the guard and at its edge, vectors all inside, all outside and mixed.
TEST(KernelFunctions, LibraryExpFastFormHasTheBodysBits) {
  const Kernel k = map_with([](Val v) { return exp(v); }, "exp_fast_bits");
  std::vector<float> x;
  for (float v = -110.0f; v <= 95.0f; v += 0.0137f) x.push_back(v);
  for (float v : {87.5f, -87.5f, std::nextafter(87.5f, 0.0f), std::nextafter(-87.5f, 0.0f), -87.33655f, -87.34f, 0.0f,
                  -0.0f, INFINITY, -INFINITY, NAN})
    x.push_back(v);
  const int n = static_cast<int>(x.size());
  std::vector<float> y(x.size()), ys(x.size());
  compile_cpu(k)({(n + 63) / 64}, {x, y, n});
  compile_cpu(k, true)({(n + 63) / 64}, {x, ys, n});
  int inside = 0;  // inputs the guard admits
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::memcmp(&y[i], &ys[i], sizeof(float)), 0) << "exp(" << x[i] << "): " << y[i] << " vs " << ys[i];
    inside += std::abs(x[i]) < 87.5f;
  }
  EXPECT_GT(inside, 10000);
}
