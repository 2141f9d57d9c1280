// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel suite's launches (kernel_suite_cases.h) on the devices with a kernel launcher
// (Vulkan: lavapipe in CI; CUDA where a GPU is), each written buffer against the C++ target's:
// integers bit for bit, floats within the case's tolerance. WebGPU runs the same launches in headless Chromium
// (tests/browser/).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/backend.h"
#include "kernel/launch.h"
#include "kernel_suite_cases.h"

using namespace kiln;
using namespace kiln::kernel;

namespace {

DType dtype_of_type(Type t) {
  switch (t) {
    case Type::Bool:
      return bool_;
    case Type::I32:
      return i32;
    case Type::U32:
      return u32;
    case Type::I64:
      return i64;
    case Type::F16:
      return f16;
    case Type::BF16:
      return bf16;
    case Type::F32:
      return f32;
    case Type::F64:
      return f64;
  }
  return f32;
}

/// "" when got matches want: integers bit for bit, floats equal (NaN to NaN) or within
/// atol + rtol * |want|.
std::string compare(const suite::CaseBuffer& got, const suite::CaseBuffer& want, double rtol, double atol) {
  if (got.bytes.size() != want.bytes.size()) return "size differs";
  if (!is_float(want.type)) {
    for (int64_t i = 0; i < want.count(); ++i) {
      const size_t w = suite::type_bytes(want.type);
      if (std::memcmp(got.bytes.data() + i * w, want.bytes.data() + i * w, w) != 0)
        return "element " + std::to_string(i) + " differs";
    }
    return "";
  }
  const Tensor g = from_blob_copy(got.bytes.data(), {got.count()}, dtype_of_type(got.type), Device::cpu()).to(f64);
  const Tensor e = from_blob_copy(want.bytes.data(), {want.count()}, dtype_of_type(want.type), Device::cpu()).to(f64);
  const std::vector<double> gv = g.to_vector<double>(), ev = e.to_vector<double>();
  for (size_t i = 0; i < ev.size(); ++i)
    if (gv[i] != ev[i] && !(std::isnan(gv[i]) && std::isnan(ev[i])) &&
        !(std::abs(gv[i] - ev[i]) <= atol + rtol * std::abs(ev[i]))) {
      std::ostringstream os;
      os << "element " << i << ": got " << gv[i] << ", the C++ target " << ev[i];
      return os.str();
    }
  return "";
}

}  // namespace

TEST(KernelSuiteDevices, VulkanMatchesTheCppTarget) {
  const std::vector<std::string> names = Device::list();
  if (std::find(names.begin(), names.end(), "vulkan") == names.end())
    GTEST_SKIP() << "no Vulkan device here (scripts/install-deps.sh installs lavapipe)";
  const kernel::detail::DeviceLauncher* launch = kernel::detail::launcher(DeviceType::Vulkan);
  ASSERT_NE(launch, nullptr);
  Backend* own = Device::vulkan().backend();
  while (own->inner()) own = own->inner();
  const Device dev(own, 0);
  int ran = 0;
  for (const suite::Case& c : suite::cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<suite::CaseBuffer> want = suite::run_cpp(c);
    std::vector<Tensor> ts;
    std::vector<kernel::detail::DeviceBuffer> bufs;
    for (const suite::CaseBuffer& b : c.buffers) {
      ts.push_back(from_blob_copy(b.bytes.data(), {b.count()}, dtype_of_type(b.type), dev));
      bufs.push_back({ts.back().impl().storage.get(), 0});
    }
    (*launch)(c.make(Limits{}), 0, bufs, c.scalars, c.groups);
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      if (!c.buffers[i].written) continue;
      suite::CaseBuffer got = c.buffers[i];
      ts[i].to(Device::cpu()).copy_to_host(got.bytes.data(), ts[i].dtype());
      EXPECT_EQ(compare(got, want[i], c.rtol, c.atol), "") << "buffer " << i;
    }
    ++ran;
  }
  EXPECT_EQ(ran, static_cast<int>(suite::cases().size()));
}

TEST(KernelSuiteDevices, CudaMatchesTheCppTarget) {
  std::string why;
  if (!cuda_available(0, &why)) GTEST_SKIP() << why;
  const Limits limits = cuda_limits(0);
  int ran = 0;
  for (const suite::Case& c : suite::cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<suite::CaseBuffer> want = suite::run_cpp(c);
    std::vector<suite::CaseBuffer> got;
    try {
      got = suite::run_with(c, limits,
                            [](const Kernel& k, Dim3 g, const std::vector<Arg>& a) { compile_cuda(k).launch(g, a); });
    } catch (const kiln::Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    for (size_t i = 0; i < c.buffers.size(); ++i)
      if (c.buffers[i].written) EXPECT_EQ(compare(got[i], want[i], c.rtol, c.atol), "") << "buffer " << i;
    ++ran;
  }
  EXPECT_EQ(ran, static_cast<int>(suite::cases().size()));
}

TEST(KernelSuiteDevices, CudaWithoutADeviceSaysWhy) {
  // Here (no GPU): every entry point names what is missing. With a GPU: a kernel runs, and
  // bad launches are refused before the GPU sees them.
  Kernel k = trace("add_one", [](Builder& b) {
    auto x = b.inout<float>("x");
    Val n = b.scalar<int32_t>("n");
    b.group_size(64);
    Val i = global_id();
    if_(i < n, [&] { x[i] = x[i] + 1.0f; });
  });
  std::string why;
  if (!cuda_available(0, &why)) {
    EXPECT_NE(why.find("CUDA device 0"), std::string::npos) << why;
    try {
      (void)compile_cuda(k);
      ADD_FAILURE() << "compile_cuda without a device did not throw";
    } catch (const kiln::Error& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
    EXPECT_THROW((void)cuda_limits(0), kiln::Error);
    return;
  }
  CudaKernel ck = compile_cuda(k);
  std::vector<float> x(100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  ck(Dim3(2), {x, int32_t{100}});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], static_cast<float>(i) + 1.0f);
  EXPECT_THROW(ck(Dim3(1, 70000), {x, int32_t{100}}), kiln::Error);  // y over 65535
  EXPECT_THROW(ck(Dim3(2), {x, 100.0f}), kiln::Error);               // the scalar's type
  EXPECT_EQ(compile_cuda(k).origin(), "memory");
}
