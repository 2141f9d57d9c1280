// SPDX-License-Identifier: MIT OR Apache-2.0
// The devices the device-generic suites run on (the conformance cases, the elementwise
// properties): KILN_TEST_DEVICES=cpu,cpu-plain,null,subset names them (any names of
// Device::list(), or remote:ws://host:port); the default is every device of this machine, the fused and the plain CPU,
// null (shapes and dtypes only), subset (the fallback's test device) and every other device that
// Device::list() names (vulkan where there is one). Adding a backend to the suites is
// registering its name.
#pragma once
#include <kiln/device.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::test {

struct TestDevice {
  std::string name;    ///< as Device::from_string takes it
  bool values = true;  ///< false where values cannot be read (null): shapes and dtypes only
  /// Whether the device may flush subnormal f32 values to zero in arithmetic (WebGPU: WGSL
  /// allows it, and SwiftShader does).
  bool may_flush_subnormals = false;
  /// The device, opened on first use: listing a GPU for the suites' names opens nothing, so a
  /// test process that runs no case on it never starts its driver.
  Device device() const { return Device::from_string(name); }
  /// The name as a GoogleTest parameter name ("cpu-plain" -> "cpu_plain",
  /// "remote:ws://127.0.0.1:7410" -> "remote_ws___127_0_0_1_7410").
  std::string tag() const {
    std::string t = name;
    for (char& c : t)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) c = '_';
    return t;
  }
};

/// The devices of KILN_TEST_DEVICES (comma-separated), else the default list; a device equal
/// to an earlier one (cpu and cpu-plain under KILN_FUSION=0) is listed once.
inline std::vector<TestDevice> test_devices() {
  std::vector<std::string> names;
  const char* env = std::getenv("KILN_TEST_DEVICES");
  const std::string list = env && *env ? env : "cpu,cpu-plain,null,subset";
  for (size_t start = 0; start <= list.size();) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) names.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  std::vector<TestDevice> out;
  std::vector<Device> opened;
  for (const std::string& n : names) {
    const Device d = Device::from_string(n);
    bool dup = false;
    for (const Device& o : opened) dup |= o == d;
    opened.push_back(d);
    if (!dup) out.push_back({n, !d.is_null(), n.rfind("webgpu", 0) == 0});
  }
  if (!(env && *env))  // and every other device that runs ops (a GPU: "vulkan", ...), unopened
    for (const std::string& n : Device::list())
      if (n != "cpu" && n != "cpu-fusion" && n != "cpu-plain" && n != "null" && n != "subset" && n != "capture")
        out.push_back({n, true, n.rfind("webgpu", 0) == 0});
  return out;
}

/// The devices of test_devices() that hold values.
inline std::vector<TestDevice> value_devices() {
  std::vector<TestDevice> out;
  for (TestDevice& d : test_devices())
    if (d.values) out.push_back(std::move(d));
  return out;
}

}  // namespace kiln::test
