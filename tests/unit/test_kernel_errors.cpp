// SPDX-License-Identifier: MIT OR Apache-2.0
// Bad kernels are rejected when traced (or launched) with a kiln::Error naming the kernel and
// the place.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/kernel.h"

using namespace kiln::kernel;

namespace {

/// The message of the kiln::Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

}  // namespace

TEST(KernelErrors, BarrierInDivergentIf) {
  std::string m = error_of([] {
    trace("bad_barrier", [](Builder& b) {
      auto y = b.output<float>("y");
      b.group_size(64);
      if_(thread_id() < 32, [&] {
        y[thread_id()] = 1.0f;
        barrier();
      });
    });
  });
  EXPECT_HAS(m, "[kernel 'bad_barrier'] barrier() (test_kernel_errors.cpp:");
  EXPECT_HAS(m, "inside control flow that depends on the thread (the block at test_kernel_errors.cpp:");
}

TEST(KernelErrors, BarrierInLoopWithThreadBound) {
  std::string m = error_of([] { trace("bad_loop", [](Builder&) { for_(0, thread_id(), [&](Val) { barrier(); }); }); });
  EXPECT_HAS(m, "[kernel 'bad_loop'] barrier()");
  // Found through a local variable assigned under a thread-dependent branch.
  m = error_of([] {
    trace("bad_var", [](Builder&) {
      Var n(4);
      if_(thread_id() == 0, [&] { n = 8; });
      for_(0, n, [&](Val) { barrier(); });
    });
  });
  EXPECT_HAS(m, "[kernel 'bad_var'] barrier()");
  // A barrier under a uniform condition is fine.
  EXPECT_EQ(error_of([] {
              trace("good", [](Builder& b) {
                Val n = b.scalar<int32_t>("n");
                if_(n > 2, [&] { barrier(); });
                for_(0, n, [&](Val) { barrier(); });
              });
            }),
            "");
}

TEST(KernelErrors, SharedMemoryOverTheLimit) {
  Limits l;
  l.shared_bytes = 1024;
  std::string m = error_of([&] {
    trace(
        "big_shared", [](Builder& b) { b.shared<float>("tile", 512); }, l);
  });
  EXPECT_HAS(m, "[kernel 'big_shared'] shared arrays take 2048 bytes, over the limit of 1024 bytes per group");
}

TEST(KernelErrors, TypeMismatch) {
  std::string m = error_of([] {
    trace("mismatch", [](Builder& b) {
      auto x = b.input<float>("x");
      auto y = b.output<float>("y");
      Val i = global_id();
      y[i] = x[i] + i;
    });
  });
  EXPECT_HAS(m, "[kernel 'mismatch'] type mismatch in '+': f32 and i32 (convert one with cast())");
  m = error_of([] {
    trace("store_mismatch", [](Builder& b) {
      auto y = b.output<float>("y");
      y[global_id()] = global_id();
    });
  });
  EXPECT_HAS(m, "[kernel 'store_mismatch'] type mismatch: stores i32 into buffer 'y' of f32 (test_kernel_errors.cpp:");
  m = error_of([] { trace("bad_if", [](Builder&) { if_(thread_id(), [] {}); }); });
  EXPECT_HAS(m, "[kernel 'bad_if'] if_() needs a bool condition, not i32 (test_kernel_errors.cpp:");
  m = error_of([] { trace("float_mod", [](Builder&) { (void)(Val(1.5f) % Val(2.0f)); }); });
  EXPECT_HAS(m, "'%' does not take f32");
  // f16 and bf16 values: arithmetic rounds to the type; bits, mixes and stores into f32 memory are refused.
  m = error_of(
      [] { trace("half_bits", [](Builder&) { (void)(cast(Val(1.5f), Type::F16) & cast(Val(1.0f), Type::F16)); }); });
  EXPECT_HAS(m, "[kernel 'half_bits'] '&' does not take f16");
  m = error_of(
      [] { trace("half_mix", [](Builder&) { (void)(cast(Val(1.5f), Type::F16) + cast(Val(1.0f), Type::BF16)); }); });
  EXPECT_HAS(m, "type mismatch in '+': f16 and bf16");
  m = error_of([] {
    trace("half_store", [](Builder& b) {
      auto y = b.output<float>("y");
      y[global_id()] = cast(Val(2.0f), Type::F16);
    });
  });
  EXPECT_HAS(m, "type mismatch: stores f16 into buffer 'y' of f32");
}

TEST(KernelErrors, ReadWithoutBarrierAfterOtherThreadsWrote) {
  std::string m = error_of([] {
    trace("race", [](Builder& b) {
      auto y = b.output<float>("y");
      auto sh = b.shared<float>("sh", 64);
      b.group_size(64);
      Val t = thread_id();
      sh[t] = 1.0f;
      y[t] = sh[(t + 1) % 64];
    });
  });
  EXPECT_HAS(
      m, "[kernel 'race'] reads shared array 'sh', written by other threads of the group at test_kernel_errors.cpp:");
  EXPECT_HAS(m, "without a barrier() in between");
  // One thread writes, all read.
  m = error_of([] {
    trace("race_one", [](Builder& b) {
      auto y = b.output<float>("y");
      auto sh = b.shared<float>("sh", 1);
      if_(thread_id() == 0, [&] { sh[0] = 2.0f; });
      y[thread_id()] = sh[0];
    });
  });
  EXPECT_HAS(m, "[kernel 'race_one'] reads shared array 'sh'");
  // The same through a global buffer that threads write and read.
  m = error_of([] {
    trace("race_global", [](Builder& b) {
      auto z = b.inout<float>("z");
      Val i = global_id();
      z[i] = 1.0f;
      z[i] = z[i + 1];
    });
  });
  EXPECT_HAS(m, "[kernel 'race_global'] reads buffer 'z', written by other threads");
  // With a barrier in between, or reading back one's own element, it is fine.
  EXPECT_EQ(error_of([] {
              trace("no_race", [](Builder& b) {
                auto y = b.output<float>("y");
                auto sh = b.shared<float>("sh", 64);
                b.group_size(64);
                Val t = thread_id();
                sh[t] = 1.0f;
                y[t] = sh[t];
                barrier();
                y[t] = sh[(t + 1) % 64];
              });
            }),
            "");
}

TEST(KernelErrors, Access) {
  std::string m = error_of([] {
    trace("write_input", [](Builder& b) {
      auto x = b.input<float>("x");
      x[0] = 1.0f;
    });
  });
  EXPECT_HAS(m, "[kernel 'write_input'] writes buffer 'x', which is declared read-only (input)");
  m = error_of([] {
    trace("read_output", [](Builder& b) {
      auto y = b.output<float>("y");
      (void)Val(y[0]);
    });
  });
  EXPECT_HAS(m, "[kernel 'read_output'] reads buffer 'y', which is declared write-only (output)");
  m = error_of([] {
    trace("atomic_float", [](Builder& b) {
      auto y = b.inout<float>("y");
      atomic_add(y[0], 1.0f);
    });
  });
  EXPECT_HAS(m, "[kernel 'atomic_float'] atomics need an i32 or u32 element, not f32");
}

TEST(KernelErrors, ValuesOfAnotherTraceAndBadSteps) {
  Val kept;
  trace("first", [&](Builder&) { kept = thread_id() + 1; });
  std::string m = error_of([&] {
    trace("second", [&](Builder& b) {
      auto y = b.output<int32_t>("y");
      y[thread_id()] = kept;
    });
  });
  EXPECT_HAS(m, "[kernel 'second'] a value of another trace used in a store");
  m = error_of([] { trace("zero_step", [](Builder&) { for_(0, 8, 0, [](Val) {}); }); });
  EXPECT_HAS(m, "[kernel 'zero_step'] for_() needs a positive step, not 0 (test_kernel_errors.cpp:");
}

TEST(KernelErrors, GroupSizeAndOutsideTrace) {
  std::string m = error_of([] { trace("huge", [](Builder& b) { b.group_size(64, 32); }); });
  EXPECT_HAS(m, "[kernel 'huge'] group size 64x32x1 is empty or over the limit of 1024 threads");
  m = error_of([] { (void)Val(1.0f); });
  EXPECT_HAS(m, "outside kiln::kernel::trace()");
}

TEST(KernelErrors, TargetLimits) {
  Kernel k = trace("wide", [](Builder& b) {
    auto y = b.output<int64_t>("y");
    y[global_id()] = cast(global_id(), Type::I64);
  });
  EXPECT_HAS(error_of([&] { render(k, Target::Wgsl); }), "[kernel 'wide'] the wgsl target does not support i64");
  Limits sg;
  sg.subgroups = true;
  Kernel s = trace(
      "sub",
      [](Builder& b) {
        auto y = b.output<float>("y");
        y[global_id()] = subgroup_add(1.0f);
      },
      sg);
  EXPECT_HAS(error_of([&] { render(s, Target::Cpp); }), "[kernel 'sub'] the cpp target does not support subgroups");
}

TEST(KernelErrors, DebugBoundsChecks) {
  Kernel k = trace("oob", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    b.group_size(16);
    Val i = global_id();
    y[i] = x[i] * 2.0f;
  });
  std::vector<float> x(10, 1.f), y(16, 0.f);
  CpuKernel checked = compile_cpu(k, 1);
  EXPECT_TRUE(checked.debug());
  std::string m = error_of([&] { checked({1}, {x, y}); });
  EXPECT_HAS(m, "[kernel 'oob'] out-of-range access: buffer 'x' index 10 (size 10)");
  // The launch checks its arguments against the kernel's parameters.
  m = error_of([&] { checked({1}, {x}); });
  EXPECT_HAS(m, "[kernel 'oob'] takes 2 buffers and 0 scalars, got 1 arguments");
  std::vector<int32_t> yi(16);
  m = error_of([&] { checked({1}, {x, yi}); });
  EXPECT_HAS(m, "argument 1 (buffer 'y') must be a buffer of f32, got a buffer of i32");
  // In range, the checked kernel runs.
  std::vector<float> x16(16, 3.f);
  checked({1}, {x16, y});
  EXPECT_EQ(y[15], 6.f);
}

TEST(KernelErrors, DebugIntegerDivision) {
  Kernel k = trace("divide", [](Builder& b) {
    auto x = b.input<int32_t>("x");
    auto y = b.output<int32_t>("y");
    Val d = b.scalar<int32_t>("d");
    b.group_size(4);
    Val i = global_id();
    y[i] = x[i] / d + x[i] % d;
  });
  std::vector<int32_t> x = {7, 8, 9, 10}, y(4, 0);
  CpuKernel checked = compile_cpu(k, 1);
  checked({1}, {x, y, int32_t{3}});
  EXPECT_EQ(y, (std::vector<int32_t>{3, 4, 3, 4}));
  EXPECT_HAS(error_of([&] { checked({1}, {x, y, int32_t{0}}); }), "[kernel 'divide'] integer division by zero");
}
