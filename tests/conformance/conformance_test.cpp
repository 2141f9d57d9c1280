// SPDX-License-Identifier: MIT OR Apache-2.0
// One test per op and device of test::test_devices() (KILN_TEST_DEVICES):
// Conformance/Op.Matches/<op>_on_<device> compares values with PyTorch's, or on a device
// without data (null) checks output shapes and dtypes. The number of cases run per device is
// printed at the end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "conformance/golden.h"
#include "test_devices.h"

namespace kiln::conformance {
namespace {

constexpr int kMaxReported = 12;  // failing cases printed in full per op

/// Cases run and failed per device name, printed when the suite ends.
struct Tally {
  std::mutex mu;
  std::map<std::string, std::pair<int, int>> by_device;
};
Tally& tally() {
  static Tally t;
  return t;
}
class PrintTally : public testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [dev, n] : tally().by_device)
      std::printf("conformance on %s: %d cases run, %d failed\n", dev.c_str(), n.first, n.second);
  }
};
const bool kTallyRegistered = (testing::AddGlobalTestEnvironment(new PrintTally), true);

void run_op(const std::string& op, const Device& dev, bool values, const std::string& dev_name) {
  auto it = registry().find(op);
  ASSERT_NE(it, registry().end()) << "no registry entry for golden op '" << op << "'";
  std::vector<Case> cases;
  ASSERT_NO_THROW(cases = load_cases(op));
  ASSERT_FALSE(cases.empty()) << op << ": golden file holds no case";
  int failed = 0, run = 0;
  for (const Case& c : cases) {
    if (!values && !c.null_check) continue;
    ++run;
    std::string err;
    Args args;
    try {
      args = build_args(c, dev);
      Outs got = it->second(args, c.attrs, dev);
      err = compare(c, args, got, values);
    } catch (const std::exception& e) {
      err = std::string("threw: ") + e.what() + "\n";
    }
    if (err.empty()) continue;
    if (++failed <= kMaxReported)
      ADD_FAILURE() << op << " case " << c.name << (c.attrs_text.empty() ? "" : " {" + c.attrs_text + "}") << " on "
                    << dev.str() << ":\n"
                    << err;
  }
  {
    std::lock_guard<std::mutex> lock(tally().mu);
    auto& n = tally().by_device[dev_name];
    n.first += run;
    n.second += failed;
  }
  EXPECT_EQ(failed, 0) << op << ": " << failed << " of " << run << " cases fail on " << dev.str()
                       << (failed > kMaxReported ? " (first ones shown)" : "");
}

struct Param {
  std::string op;
  test::TestDevice dev;
};
std::vector<Param> params() {
  std::vector<Param> ps;
  for (const test::TestDevice& d : test::test_devices())
    for (const std::string& op : golden_ops()) ps.push_back({op, d});
  return ps;
}
std::string param_name(const testing::TestParamInfo<Param>& info) {
  return info.param.op + "_on_" + info.param.dev.tag();
}

class Op : public testing::TestWithParam<Param> {};

TEST_P(Op, Matches) { run_op(GetParam().op, GetParam().dev.device(), GetParam().dev.values, GetParam().dev.name); }

INSTANTIATE_TEST_SUITE_P(Conformance, Op, testing::ValuesIn(params()), param_name);

TEST(Conformance, GoldenDataPresent) {
  EXPECT_GE(golden_ops().size(), 150u) << "golden data missing in " << golden_dir()
                                       << "; run python3 scripts/gen_golden.py";
}

TEST(Conformance, EveryRegisteredOpHasGoldenData) {
  auto ops = golden_ops();
  std::set<std::string> have(ops.begin(), ops.end());
  for (const auto& [name, fn] : registry())
    EXPECT_TRUE(have.count(name)) << "registry op '" << name << "' has no golden file";
}

// The harness itself: a wrong value, dtype, shape or NaN position is reported; views are rebuilt.
TEST(Conformance, HarnessDetectsMismatches) {
  const Device cpu = Device::cpu();
  auto cases = load_cases("add");
  ASSERT_FALSE(cases.empty());
  const OpFn& add_fn = registry().at("add");
  const Case& c = cases[0];
  Args args = build_args(c, cpu);
  Outs good = add_fn(args, c.attrs, cpu);
  EXPECT_EQ(compare(c, args, good, true), "");
  EXPECT_NE(compare(c, args, {kiln::add(good[0], 1e-2)}, true), "");
  EXPECT_EQ(compare(c, args, {kiln::add(good[0], 1e-2)}, false), "");  // shapes only
  EXPECT_NE(compare(c, args, {good[0].to(f64)}, false).find("expected f32"), std::string::npos);
  EXPECT_NE(compare(c, args, {good[0].reshape({-1})}, false), "");
  EXPECT_NE(compare(c, args, {good[0], good[0]}, false), "");
  bool saw_nan = false, saw_view = false;
  for (const Case& k : cases) {
    Args a = build_args(k, cpu);
    for (const Arg& x : a) saw_view |= x.is_tensor() && !x.t.is_contiguous();
    Outs o = add_fn(a, k.attrs, cpu);
    if (o[0].is_floating_point() && kiln::isnan(o[0]).any().item<bool>()) {
      saw_nan = true;
      EXPECT_NE(compare(k, a, {kiln::nan_to_num(o[0])}, true), "") << k.name;
    }
  }
  EXPECT_TRUE(saw_nan);
  EXPECT_TRUE(saw_view);
}

TEST(Conformance, AttrsParse) {
  Attrs a("dims=0,-1;keepdim=1;alpha=2.5;n=3;x=inf;mode=reflect;e=");
  EXPECT_EQ(a.ints("dims"), (std::vector<int64_t>{0, -1}));
  EXPECT_TRUE(a.b("keepdim"));
  EXPECT_TRUE(a.scalar("alpha").is_floating());
  EXPECT_TRUE(a.scalar("n").is_integral());
  EXPECT_TRUE(std::isinf(a.f("x")));
  EXPECT_EQ(a.str("mode"), "reflect");
  EXPECT_TRUE(a.ints("e").empty());
  EXPECT_FALSE(a.has("missing"));
}

}  // namespace
}  // namespace kiln::conformance
