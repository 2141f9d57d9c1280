// SPDX-License-Identifier: MIT OR Apache-2.0
// The whole conformance suite on Device::cpu().fusion(): every golden case of every op runs on
// the fusion device and must match PyTorch within the same tolerances as on the plain CPU
// (Conformance/OpFusion.Matches/<op>). Inputs are written, the op is queued, and reading the
// outputs for the comparison flushes it (composite ops queue and fuse their internal chains).
#include <gtest/gtest.h>

#include "conformance/golden.h"
#include "fusion/fusion.h"

namespace kiln::conformance {
namespace {

void run_fused(const std::string& op) {
  const Device dev = Device::cpu().fusion();
  auto it = registry().find(op);
  ASSERT_NE(it, registry().end());
  std::vector<Case> cases;
  ASSERT_NO_THROW(cases = load_cases(op));
  int failed = 0;
  for (const Case& c : cases) {
    std::string err;
    try {
      Args args = build_args(c, dev);
      Outs got = it->second(args, c.attrs, dev);
      err = compare(c, args, got, true);
    } catch (const std::exception& e) {
      err = std::string("threw: ") + e.what() + "\n";
    }
    if (err.empty()) continue;
    if (++failed <= 8) ADD_FAILURE() << op << " case " << c.name << " on " << dev.str() << ":\n" << err;
  }
  EXPECT_EQ(failed, 0) << op << ": " << failed << " of " << cases.size() << " cases fail with fusion";
}

std::string param_name(const testing::TestParamInfo<std::string>& info) { return info.param; }

class OpFusion : public testing::TestWithParam<std::string> {};
TEST_P(OpFusion, Matches) { run_fused(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Conformance, OpFusion, testing::ValuesIn(golden_ops()), param_name);

}  // namespace
}  // namespace kiln::conformance
