// SPDX-License-Identifier: MIT OR Apache-2.0
// The bad-input suite's harness: a case is {name, op, body, devices}; the body gets the device
// and must throw kiln::Error whose message starts with "[op]" (where PyTorch raises). Each
// case runs as its own GoogleTest test on each device it names: the fused CPU
// (Device::cpu()), the plain CPU (.without_fusion()) and the null device (shapes only; cases
// that need values skip it). KILN_TEST_DEVICES=cpu,cpu_plain,null limits the devices.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

/// CASE(name, "op", devices, statements...): a case whose body runs the statements with the
/// Env `e` in scope (kiln::test::bad::Case and Env must be visible where it is used).
#define CASE(name, op, where, ...)                      \
  Case {                                                \
#name, op, [](const Env& e) { __VA_ARGS__; }, where \
  }

namespace kiln::test::bad {

/// The devices a case runs on (a bit mask).
enum Where : unsigned { kFused = 1, kPlain = 2, kNull = 4, kCpus = kFused | kPlain, kAll = 7 };

/// What a case body gets: the device and tensor makers on it.
struct Env {
  Device dev;
  bool data = true;  ///< false on the null device: values cannot be read there
  /// Float tensor of `shape` (ones).
  Tensor f(const Shape& shape, DType dt = f32) const { return ones(shape, {.dtype = dt, .device = dev}); }
  /// Integer (i64 unless dt) tensor holding `v` with `shape`.
  Tensor i(std::vector<int64_t> v, const Shape& shape, DType dt = i64) const { return tensor(v, shape, dev).to(dt); }
  /// Bool tensor of `shape` (all true).
  Tensor b(const Shape& shape) const { return ones(shape, {.dtype = DType::Bool, .device = dev}); }
  /// Reads t's values where there are any (the sync point of queued work).
  void read(const Tensor& t) const {
    if (data) (void)t.contiguous().to(Device::cpu().without_fusion()).to(f64).to_vector<double>();
  }
};

struct Case {
  std::string name;  ///< unique, [A-Za-z0-9_]
  std::string op;    ///< the expected "[op]" prefix
  std::function<void(const Env&)> body;
  unsigned where = kAll;
};

/// One test: a case on one device.
struct Param {
  const Case* c;
  Where dev;
};

inline const char* device_tag(Where w) { return w == kFused ? "cpu" : w == kPlain ? "cpu_plain" : "null"; }

/// Every (case, device) pair the cases name.
inline std::vector<Param> expand(const std::vector<Case>& cases) {
  std::vector<Param> r;
  for (const Case& c : cases)
    for (Where w : {kFused, kPlain, kNull})
      if (c.where & w) r.push_back({&c, w});
  return r;
}

inline void PrintTo(const Param& p, std::ostream* os) { *os << p.c->name << " on " << device_tag(p.dev); }

inline std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return info.param.c->name + "_" + device_tag(info.param.dev);
}

/// Runs one case: its body must throw kiln::Error starting with "[op]", and nothing else.
inline void run(const Param& p) {
  const char* only = std::getenv("KILN_TEST_DEVICES");
  if (only != nullptr && *only != '\0') {
    std::string list = std::string(",") + only + ",";
    if (list.find(std::string(",") + device_tag(p.dev) + ",") == std::string::npos)
      GTEST_SKIP() << device_tag(p.dev) << " is not in KILN_TEST_DEVICES";
  }
  Env e{p.dev == kFused   ? Device::cpu()
        : p.dev == kPlain ? Device::cpu().without_fusion()
                          : Device::null(),
        p.dev != kNull};
  const std::string prefix = "[" + p.c->op + "]";
  try {
    p.c->body(e);
    if (e.data) kiln::sync(e.dev);
    ADD_FAILURE() << p.c->name << ": no kiln::Error (expected one starting with " << prefix << ")";
  } catch (const Error& err) {
    std::string w = err.what();
    EXPECT_EQ(w.rfind(prefix, 0), 0u) << p.c->name << ": the message does not start with " << prefix << ": " << w;
  } catch (const std::exception& err) {
    ADD_FAILURE() << p.c->name << ": threw a non-kiln exception: " << err.what();
  }
}

}  // namespace kiln::test::bad

/// Defines the parameterised suite `Suite` over the cases `cases_fn()` returns (a reference to
/// a static vector): one test per case and device, named "BadInput/Suite.Throws/<case>_<device>".
#define KILN_BAD_INPUT_SUITE(Suite, cases_fn)                                                           \
  class Suite : public ::testing::TestWithParam<::kiln::test::bad::Param> {};                           \
  TEST_P(Suite, Throws) { ::kiln::test::bad::run(GetParam()); }                                         \
  INSTANTIATE_TEST_SUITE_P(BadInput, Suite, ::testing::ValuesIn(::kiln::test::bad::expand(cases_fn())), \
                           ::kiln::test::bad::param_name)
