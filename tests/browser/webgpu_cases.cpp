// SPDX-License-Identifier: MIT OR Apache-2.0
// Writes launches for WebGPU as JSON: each kernel's WGSL, its groups, buffers and scalars, and
// the buffers it must write, which the page tests/browser/webgpu_suite.html reproduces in
// headless Chromium (tests/browser/webgpu_suite.py):
// - the kernel suite (tests/unit/kernel_suite_cases.h), against the C++ target;
// - the kernel library's elementwise kernels (src/kernel/library) on f32 tensor ops, strided
//   and broadcast views and special values included, against Kiln's CPU backend.
// Kernels WGSL cannot express (i64, f64, bf16) are listed with the renderer's reason.
//   kiln_webgpu_cases OUT.json
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/op.h"
#include "kernel/library.h"
#include "kiln/capture.h"
#include "kiln/error.h"
#include "kiln/half.h"
#include "kiln/kiln.h"
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

/// A buffer's elements as JSON numbers: integers as they are, floats as their bit patterns
/// (JSON has no NaN or infinity).
json values(const suite::CaseBuffer& b) {
  json a = json::array();
  const uint8_t* p = b.bytes.data();
  for (int64_t i = 0; i < b.count(); ++i) {
    switch (b.type) {
      case Type::I32: {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        a.push_back(v);
        break;
      }
      case Type::F32:
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
  if (s.type == Type::F32) {
    const float f = static_cast<float>(s.f);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return {{"type", "f32"}, {"value", bits}};
  }
  return {{"type", std::string(type_name(s.type))}, {"value", s.i}};
}

/// Bytes of t's elements in order (t on the CPU).
std::vector<uint8_t> bytes_of(const kiln::Tensor& t) {
  std::vector<uint8_t> b(static_cast<size_t>(t.numel()) * t.element_size());
  t.contiguous().copy_to_host(b.data(), t.dtype());
  return b;
}

/// One tensor op, captured to its ir::Op, as the library's launch of it (lib::launch_of, as the
/// Vulkan backend launches it; WGSL has no f64); the expected output is the CPU backend's.
json library_case(const std::string& name, const kiln::CaptureFunction& fn, const std::vector<kiln::Tensor>& in,
                  double rtol, double atol = 0) {
  json j = {{"name", "library/" + name}};
  const kiln::CapturedGraph g = kiln::capture(fn, in);
  KILN_CHECK(g.nodes.size() == 1, "webgpu_cases", name << ": captured " << g.str());
  const kiln::ir::Op& op = *g.nodes[0].op;
  const std::optional<lib::Launch> launch = lib::launch_of(op, false);
  if (!launch) {
    j["unsupported"] = "the kernel library has no kernel for " + std::string(kiln::ir::op_name(op.kind));
    return j;
  }
  try {
    j["wgsl"] = render(launch->trace(webgpu_limits()), Target::Wgsl);
  } catch (const kiln::Error& e) {
    j["unsupported"] = e.what();
    return j;
  }
  j["groups"] = {launch->groups[0], launch->groups[1], launch->groups[2]};
  j["needs"] = json::array();
  j["rtol"] = rtol;
  j["atol"] = atol;
  // A tensor's buffer as the kernel reads it: f32 and i32 as they are; 1- and 2-byte elements
  // packed in u32 words, which is their byte order padded to whole words.
  auto buf = [](kiln::DType d, std::vector<uint8_t> bytes, bool written) {
    const std::optional<lib::Store> s = lib::storage_of(d, false);
    KILN_CHECK(s, "webgpu_cases", "no storage for " << kiln::dtype_name(d).data());
    const Type t = *s == lib::Store::F32 ? Type::F32 : *s == lib::Store::I32 ? Type::I32 : Type::U32;
    bytes.resize((bytes.size() + 3) / 4 * 4, 0);
    return suite::CaseBuffer{t, std::move(bytes), written};
  };
  const kiln::Tensor want = fn(in).at(0);
  std::vector<suite::CaseBuffer> bufs{buf(want.dtype(), std::vector<uint8_t>(bytes_of(want).size()), true)};
  for (size_t q = 0; q < op.inputs.size(); ++q) {
    const kiln::CapturedValue& v = g.values[static_cast<size_t>(g.nodes[0].inputs[q])];
    const auto it = std::find(g.inputs.begin(), g.inputs.end(), g.nodes[0].inputs[q]);
    std::vector<uint8_t> bytes =
        it != g.inputs.end() ? bytes_of(in[static_cast<size_t>(it - g.inputs.begin())]) : v.bytes;
    bufs.push_back(buf(op.inputs[q].dtype, std::move(bytes), false));
  }
  const std::vector<int32_t>& meta = launch->meta;
  bufs.push_back(buf(kiln::i32,
                     std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(meta.data()),
                                          reinterpret_cast<const uint8_t*>(meta.data() + meta.size())),
                     false));
  j["buffers"] = json::array();
  for (size_t i = 0; i < bufs.size(); ++i) {
    json jb = {{"type", std::string(type_name(bufs[i].type))}, {"written", bufs[i].written}, {"data", values(bufs[i])}};
    if (i == 0) jb["expected"] = values(buf(want.dtype(), bytes_of(want), true));
    j["buffers"].push_back(jb);
  }
  j["scalars"] = json::array();
  for (const Arg& s : launch->push) j["scalars"].push_back(scalar(s));
  return j;
}

/// A chain of elementwise tensor ops, captured, as one fused kernel of the library
/// (lib::fused_launch, as the Vulkan device's fusion runs it): operands of the output's shape or
/// single values; the last op's value stored. The expected output is the CPU backend's.
json fused_case(const std::string& name, const kiln::CaptureFunction& fn, const std::vector<kiln::Tensor>& in,
                double rtol) {
  json j = {{"name", "library/fused_" + name}};
  const kiln::CapturedGraph g = kiln::capture(fn, in);
  const kiln::Tensor want = fn(in).at(0);
  std::vector<lib::FusedLoad> loads;
  std::vector<int64_t> load_values;
  std::vector<lib::FusedStep> steps;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    lib::FusedStep st{g.nodes[n].op.get(), {}, n + 1 == g.nodes.size()};
    for (size_t q = 0; q < g.nodes[n].inputs.size(); ++q) {
      const int64_t v = g.nodes[n].inputs[q];
      int src = -1;
      for (size_t m = 0; m < n; ++m)
        if (g.nodes[m].outputs.at(0) == v) src = static_cast<int>(m);
      if (src < 0) {
        auto it = std::find(load_values.begin(), load_values.end(), v);
        if (it == load_values.end()) {
          lib::FusedLoad L;
          L.desc = st.op->inputs[q];
          L.kind = L.desc.numel() == 1 ? lib::FusedLoad::Scalar : lib::FusedLoad::Identity;
          loads.push_back(L);
          load_values.push_back(v);
          it = load_values.end() - 1;
        }
        src = -1 - static_cast<int>(it - load_values.begin());
      }
      st.src.push_back(src);
    }
    steps.push_back(st);
  }
  const std::optional<lib::Launch> launch = lib::fused_launch(loads, steps, want.numel(), false);
  KILN_CHECK(launch, "webgpu_cases", name << ": no fused kernel for " << g.str());
  j["wgsl"] = render(launch->trace(webgpu_limits()), Target::Wgsl);
  j["groups"] = {launch->groups[0], launch->groups[1], launch->groups[2]};
  j["needs"] = json::array();
  j["rtol"] = rtol;
  j["atol"] = 0;
  std::vector<suite::CaseBuffer> bufs{{Type::F32, std::vector<uint8_t>(bytes_of(want).size()), true}};
  for (size_t q = 0; q < loads.size(); ++q) {
    const auto it = std::find(g.inputs.begin(), g.inputs.end(), load_values[q]);
    bufs.push_back({Type::F32,
                    it != g.inputs.end() ? bytes_of(in[static_cast<size_t>(it - g.inputs.begin())])
                                         : g.values[static_cast<size_t>(load_values[q])].bytes,
                    false});
  }
  const std::vector<int32_t>& meta = launch->meta;
  bufs.push_back({Type::I32,
                  std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(meta.data()),
                                       reinterpret_cast<const uint8_t*>(meta.data() + meta.size())),
                  false});
  j["buffers"] = json::array();
  for (size_t i = 0; i < bufs.size(); ++i) {
    json jb = {{"type", std::string(type_name(bufs[i].type))}, {"written", bufs[i].written}, {"data", values(bufs[i])}};
    if (i == 0) jb["expected"] = values(suite::CaseBuffer{Type::F32, bytes_of(want), true});
    j["buffers"].push_back(jb);
  }
  j["scalars"] = json::array();
  for (const Arg& a : launch->push) j["scalars"].push_back(scalar(a));
  return j;
}

/// The library cases: f32 values with NaN, infinities, signed zeros and ordinary numbers.
std::vector<json> library_cases() {
  using namespace kiln;
  using V = std::vector<Tensor>;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xv{nan, inf, -inf, -0.0f, 0.0f, 1.0f, -1.0f, 0.5f, -2.5f, 3.75f, 1e-30f, -7.0f};
  manual_seed(3);
  Tensor r = randn({18}) * 3.0f;
  for (float v : r.to_vector<float>()) xv.push_back(v);
  const Tensor x = tensor(xv, {5, 6}), y = randn({5, 6}), row = randn({6}), pos = rand({5, 6}) * 10.0f + 0.01f;
  std::vector<json> out;
  auto unary = [&](const std::string& n, const std::function<Tensor(const Tensor&)>& f, double rtol = 0) {
    out.push_back(library_case(
        n, [f](const V& a) { return V{f(a[0])}; }, {x}, rtol));
  };
  auto binary = [&](const std::string& n, const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
    out.push_back(library_case(
        n, [f](const V& a) { return V{f(a[0], a[1])}; }, {x, y}, 0));
    // broadcast a row, read the first operand transposed
    out.push_back(library_case(
        n + "/broadcast_transposed", [f](const V& a) { return V{f(a[0].t(), a[1])}; }, {x.reshape({6, 5}), row}, 0));
  };
  unary("neg", [](const Tensor& t) { return neg(t); });
  unary("abs", [](const Tensor& t) { return abs(t); });
  unary("relu", [](const Tensor& t) { return relu(t); });
  unary("square", [](const Tensor& t) { return square(t); });
  unary("floor", [](const Tensor& t) { return floor(t); });
  unary("ceil", [](const Tensor& t) { return ceil(t); });
  unary("trunc", [](const Tensor& t) { return trunc(t); });
  unary("sign", [](const Tensor& t) { return sign(t); });
  unary(
      "hardswish", [](const Tensor& t) { return nn::functional::hardswish(t); }, 1e-6);
  unary("clamp", [](const Tensor& t) { return clamp(t, -1.0, 2.0); });
  unary(
      "exp", [](const Tensor& t) { return exp(t); }, 4e-7);
  unary(
      "tanh", [](const Tensor& t) { return tanh(t); }, 4e-7);
  unary(
      "sigmoid", [](const Tensor& t) { return sigmoid(t); }, 4e-7);
  out.push_back(library_case(
      "log", [](const V& a) { return V{log(a[0])}; }, {pos}, 4e-7));
  binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b); });
  binary("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  binary("div", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
  binary("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); });
  // bool outputs and inputs (packed four to a word, written with atomics), casts, where
  binary("lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); });
  binary("eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); });
  binary("ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); });
  unary("isnan", [](const Tensor& t) { return isnan(t); });
  out.push_back(library_case(
      "to_i32", [](const V& a) { return V{a[0].to(i32)}; }, {clamp(x, -100.0, 100.0).nan_to_num(0.0)}, 0));
  out.push_back(library_case(
      "to_u8", [](const V& a) { return V{a[0].to(u8)}; }, {clamp(x, 0.0, 200.0).nan_to_num(0.0)}, 0));
  out.push_back(library_case(
      "where", [](const V& a) { return V{where(a[0], a[1], a[2])}; }, {gt(y, 0.0), x, y}, 0));
  out.push_back(library_case(
      "i32_add", [](const V& a) { return V{add(a[0], a[1])}; },
      {randint(-1000, 1000, {5, 6}, {.dtype = i32}), randint(-1000, 1000, {6}, {.dtype = i32})}, 0));
  // reductions (one group per output, a shared-memory tree), softmax rows, tiled matmul
  // (sums in another order than the CPU's: within 1e-5 relative and 1e-5 absolute)
  auto reduce = [&](const std::string& n, const std::function<Tensor(const Tensor&)>& f, const Tensor& t, double rtol) {
    out.push_back(library_case(
        n, [f](const V& a) { return V{f(a[0])}; }, {t}, rtol, rtol));
  };
  const Tensor big = randn({37, 300}), ints = randint(-50, 50, {37, 300}, {.dtype = i32});
  reduce(
      "sum_rows", [](const Tensor& t) { return t.sum(Dims{1}); }, big, 1e-5);
  reduce(
      "sum_cols_transposed", [](const Tensor& t) { return t.t().sum(Dims{1}); }, big, 1e-5);
  reduce(
      "mean_all", [](const Tensor& t) { return t.mean(); }, big, 1e-5);
  reduce(
      "amax_rows_nan", [](const Tensor& t) { return t.amax(Dims{1}); }, x, 0);
  reduce(
      "argmax_rows", [](const Tensor& t) { return t.argmax(1); }, big, 0);
  reduce(
      "sum_i32", [](const Tensor& t) { return t.sum(Dims{0}, false, i32); }, ints, 0);
  reduce(
      "any_rows", [](const Tensor& t) { return t.any(Dims{1}); }, gt(big, 2.0), 0);
  reduce(
      "softmax", [](const Tensor& t) { return softmax(t, 1); }, big, 1e-5);
  reduce(
      "log_softmax", [](const Tensor& t) { return log_softmax(t, 1); }, big, 1e-5);
  out.push_back(library_case(
      "matmul", [](const V& a) { return V{matmul(a[0], a[1])}; }, {randn({45, 70}), randn({70, 37})}, 1e-5, 1e-5));
  out.push_back(library_case(
      "matmul_batched_transposed", [](const V& a) { return V{matmul(a[0], a[1].mT())}; },
      {randn({3, 9, 20}), randn({3, 11, 20})}, 1e-5, 1e-5));
  out.push_back(fused_case(
      "chain", [](const V& a) { return V{((a[0] * a[1] + 0.5f).exp() - a[0]).sigmoid() * 3.0f - a[1].tanh()}; },
      {randn({1000}), randn({1000})}, 4e-7));
  return out;
}

}  // namespace

int run(int argc, char** argv) {
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
  for (json& j : library_cases()) out.push_back(std::move(j));
  std::ofstream f(argv[1]);
  f << out.dump() << "\n";
  return f ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_webgpu_cases: %s\n", e.what());
    return 1;
  }
}
