// SPDX-License-Identifier: MIT OR Apache-2.0
// Writes the kernel suite's launches (tests/unit/kernel_suite_cases.h) for WebGPU as JSON: each
// kernel's WGSL, its groups, buffers and scalars, and the buffers the C++ target wrote, which
// the page tests/browser/webgpu_suite.html must reproduce in headless Chromium
// (tests/browser/webgpu_suite.py). Kernels WGSL cannot express (i64, bf16) are listed with the
// renderer's reason.
//   kiln_webgpu_cases OUT.json
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/error.h"
#include "kiln/half.h"
#include "unit/kernel_suite_cases.h"

using namespace kiln::kernel;
using json = nlohmann::ordered_json;

namespace {

/// WebGPU's guaranteed limits (every adapter has at least these).
Limits webgpu_limits() {
  Limits l;
  l.shared_bytes = 16384;
  l.max_group_threads = 256;
  return l;
}

/// A buffer's elements as JSON numbers (f16 and bf16 as their 16-bit patterns).
json values(const suite::CaseBuffer& b) {
  json a = json::array();
  const uint8_t* p = b.bytes.data();
  for (int64_t i = 0; i < b.count(); ++i) {
    switch (b.type) {
      case Type::F32: {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        a.push_back(v);
        break;
      }
      case Type::I32: {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        a.push_back(v);
        break;
      }
      case Type::U32: {
        uint32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        a.push_back(v);
        break;
      }
      case Type::F16:
      case Type::BF16: {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        a.push_back(v);
        break;
      }
      default:
        a.push_back(nullptr);
    }
  }
  return a;
}

json scalar(const Arg& s) {
  if (s.type == Type::F32) return {{"type", "f32"}, {"value", s.f}};
  return {{"type", std::string(type_name(s.type))}, {"value", s.i}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln_webgpu_cases OUT.json\n");
    return 2;
  }
  json out = json::array();
  for (const suite::Case& c : suite::cases()) {
    json j = {{"name", c.name}};
    try {
      j["wgsl"] = render(c.make(webgpu_limits()), Target::Wgsl);
    } catch (const kiln::Error& e) {
      j["unsupported"] = e.what();
      out.push_back(j);
      continue;
    }
    j["groups"] = {c.groups.x, c.groups.y, c.groups.z};
    j["needs"] = c.f16 ? json::array({"shader-f16"}) : json::array();
    j["rtol"] = c.rtol;
    j["atol"] = c.atol;
    const std::vector<suite::CaseBuffer> want = suite::run_cpp(c, webgpu_limits());
    j["buffers"] = json::array();
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      const suite::CaseBuffer& b = c.buffers[i];
      json jb = {{"type", std::string(type_name(b.type))}, {"written", b.written}, {"data", values(b)}};
      if (b.written) jb["expected"] = values(want[i]);
      j["buffers"].push_back(jb);
    }
    j["scalars"] = json::array();
    for (const Arg& s : c.scalars) j["scalars"].push_back(scalar(s));
    out.push_back(j);
  }
  std::ofstream f(argv[1]);
  f << out.dump() << "\n";
  return f ? 0 : 1;
}
