// SPDX-License-Identifier: MIT OR Apache-2.0
// Kiln's CUDA launcher (src/kernel/cuda.cpp) against the mock driver of mock_libcuda.cpp (run
// by the kernel_cuda_mock test with the mock first on LD_LIBRARY_PATH): the CUBIN NVRTC makes
// is what the driver loads, the launch gets the group size, grid and parameters in the
// kernel's order and types, every buffer goes to the device and only the writable ones come
// back, device memory is freed on every way out, and driver errors become kiln::Error naming
// the kernel and the call. No GPU runs the kernel itself (scripts/gpu-check.sh does that).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/kernel.h"

using namespace kiln::kernel;

namespace {

struct State {
  int launches;
  unsigned grid[3], block[3];
  int params, buffer_params;
  unsigned char scalars[16][8];
  int scalar_count, live, to_device, to_host;
  bool elf;
  char function[128];
};

struct Mock {
  State* (*state)() = nullptr;
  void (*reset)(int) = nullptr;
  void (*fail)(const char*, int) = nullptr;
  explicit operator bool() const { return state && reset && fail; }
};

/// The mock's controls, when the driver the launcher opened is the mock.
Mock mock() {
  Mock m;
  std::string why;
  if (!cuda_available(0, &why)) return m;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return m;
  m.state = reinterpret_cast<State* (*)()>(dlsym(lib, "kiln_mock_state"));
  m.reset = reinterpret_cast<void (*)(int)>(dlsym(lib, "kiln_mock_reset"));
  m.fail = reinterpret_cast<void (*)(const char*, int)>(dlsym(lib, "kiln_mock_fail"));
  return m;
}

Kernel three_buffers() {
  return trace("mock_axpy", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.inout<float>("y");
    auto c = b.output<int64_t>("c");
    Val a = b.scalar<float>("a"), n = b.scalar<int32_t>("n"), big = b.scalar<int64_t>("big");
    b.group_size(32, 2);
    Val i = global_id();
    if_(i < n, [&] {
      y[i] = a * x[i] + y[i];
      c[i] = big;
    });
  });
}

}  // namespace

TEST(CudaMock, LaunchPassesGridParametersAndCopiesWritableBuffersBack) {
  Mock m = mock();
  if (!m) GTEST_SKIP() << "the CUDA driver is not the mock (run through ctest -R kernel_cuda_mock)";
  CudaKernel k = compile_cuda(three_buffers());
  EXPECT_TRUE(m.state()->elf) << "the driver is given NVRTC's CUBIN";
  EXPECT_STREQ(m.state()->function, "kk_mock_axpy");
  EXPECT_EQ(k.device(), "Kiln mock GPU, sm_80");
  std::vector<float> x(100, 1.f), y(100, 2.f);
  std::vector<int64_t> c(100, 7);
  m.reset(6);
  k({4, 3, 2}, {x, y, c, 0.5f, int32_t{100}, int64_t{1} << 40});
  const State& s = *m.state();
  EXPECT_EQ(s.launches, 1);
  EXPECT_EQ(std::vector<unsigned>(s.grid, s.grid + 3), (std::vector<unsigned>{4, 3, 2}));
  EXPECT_EQ(std::vector<unsigned>(s.block, s.block + 3), (std::vector<unsigned>{32, 2, 1}));
  EXPECT_EQ(s.buffer_params, 3);
  ASSERT_EQ(s.scalar_count, 3);
  float a = 0;
  int32_t n = 0;
  int64_t big = 0;
  std::memcpy(&a, s.scalars[0], 4);
  std::memcpy(&n, s.scalars[1], 4);
  std::memcpy(&big, s.scalars[2], 8);
  EXPECT_EQ(a, 0.5f);
  EXPECT_EQ(n, 100);
  EXPECT_EQ(big, int64_t{1} << 40);
  EXPECT_EQ(s.to_device, 3);
  EXPECT_EQ(s.to_host, 2) << "the read-only buffer is not copied back";
  EXPECT_EQ(s.live, 0) << "device memory is freed";
  // The mock wrote byte k + 1 into parameter k's memory: y (1) and c (2) came back, x did not.
  unsigned char yb[4], cb[8];
  std::memcpy(yb, &y[99], 4);
  std::memcpy(cb, &c[0], 8);
  EXPECT_EQ(x[0], 1.f);
  EXPECT_EQ(yb[0], 2);
  EXPECT_EQ(cb[7], 3);
}

TEST(CudaMock, BadLaunchesNeverReachTheDriver) {
  Mock m = mock();
  if (!m) GTEST_SKIP() << "the CUDA driver is not the mock (run through ctest -R kernel_cuda_mock)";
  CudaKernel k = compile_cuda(three_buffers());
  std::vector<float> x(10), y(10);
  std::vector<int64_t> c(10);
  m.reset(6);
  EXPECT_THROW(k({1, 70000}, {x, y, c, 0.5f, int32_t{10}, int64_t{1}}), kiln::Error);  // y over 65535
  EXPECT_THROW(k({1}, {x, y, c, 0.5, int32_t{10}, int64_t{1}}), kiln::Error);          // f64 for an f32
  EXPECT_THROW(k({1}, {x, y, 0.5f, int32_t{10}, int64_t{1}}), kiln::Error);            // a buffer missing
  k({0}, {x, y, c, 0.5f, int32_t{10}, int64_t{1}});                                    // an empty grid
  EXPECT_EQ(m.state()->launches, 0);
  EXPECT_EQ(m.state()->to_device, 0);
}

TEST(CudaMock, DriverErrorsNameTheKernelAndCallAndFreeMemory) {
  Mock m = mock();
  if (!m) GTEST_SKIP() << "the CUDA driver is not the mock (run through ctest -R kernel_cuda_mock)";
  CudaKernel k = compile_cuda(three_buffers());
  std::vector<float> x(10), y(10);
  std::vector<int64_t> c(10);
  for (const char* call : {"cuLaunchKernel", "cuCtxSynchronize", "cuMemAlloc"}) {
    m.reset(6);
    m.fail(call, 700);
    try {
      k({1}, {x, y, c, 0.5f, int32_t{10}, int64_t{1}});
      ADD_FAILURE() << call << ": no error";
    } catch (const kiln::Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("[kernel 'mock_axpy']"), std::string::npos) << w;
      EXPECT_NE(w.find(call), std::string::npos) << w;
      EXPECT_NE(w.find("illegal memory access"), std::string::npos) << w;
    }
    EXPECT_EQ(m.state()->live, 0) << call << ": device memory is freed";
    EXPECT_EQ(m.state()->to_host, 0) << call;
  }
  // A module the driver refuses: the compile says so (a new kernel, so it is loaded again).
  m.fail("cuModuleLoadData", 200);
  Kernel other = trace("mock_other", [](Builder& b) {
    auto y = b.output<float>("y");
    b.group_size(32);
    y[global_id()] = 1.0f;
  });
  EXPECT_THROW((void)compile_cuda(other), kiln::Error);
}

TEST(CudaMock, KernelsTracedForOtherLimitsAreRefused) {
  Mock m = mock();
  if (!m) GTEST_SKIP() << "the CUDA driver is not the mock (run through ctest -R kernel_cuda_mock)";
  EXPECT_EQ(cuda_limits().subgroup_size, 32u);
  EXPECT_EQ(cuda_limits().shared_bytes, 48u * 1024);
  Limits l;
  l.subgroups = true;
  l.subgroup_size = 16;
  Kernel k = trace(
      "mock_sub16",
      [](Builder& b) {
        auto y = b.output<float>("y");
        b.group_size(32);
        y[global_id()] = subgroup_add(Val(1.0f));
      },
      l);
  try {
    (void)compile_cuda(k);
    ADD_FAILURE() << "a 16-lane kernel was compiled for 32-lane subgroups";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mock_sub16"), std::string::npos) << e.what();
  }
}
