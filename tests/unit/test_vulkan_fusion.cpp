// SPDX-License-Identifier: MIT OR Apache-2.0
// Fusion on the Vulkan device (src/backends/vulkan/fusion.cpp): the planner's groups run as
// one kernel each, with the bits of the same ops run one kernel per op (`.without_fusion()`).
// The conformance suite runs on the fused device too ("vulkan-fusion" in KILN_TEST_DEVICES).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <string>
#include <vector>

#include "backends/vulkan/context.h"
#include "fusion/fusion.h"

using namespace kiln;

namespace {

#define REQUIRE_VULKAN()                                                                     \
  do {                                                                                       \
    std::string why;                                                                         \
    if (vulkan::Context::count(&why) == 0) GTEST_SKIP() << "no Vulkan device here: " << why; \
  } while (0)

/// Dispatches recorded on Vulkan device 0 so far.
int64_t dispatches() { return vulkan::Context::get(0).stats().dispatches; }

}  // namespace

TEST(VulkanFusion, ChainsRunAsOneKernelWithTheBitsOfOneKernelPerOp) {
  REQUIRE_VULKAN();
  const Device fused = Device::vulkan().fusion(), plain = fused.without_fusion();
  ASSERT_TRUE(fused.has_fusion());
  // Broadcast and strided operands, a scalar, a bool step, f16 rounding between steps.
  const Tensor x = randn({64, 130}), y = randn({130}), z = randn({64, 1}), t = randn({130, 64});
  auto chain = [&](const Device& d, int64_t* n) {
    const Tensor a = x.to(d), b = y.to(d), c = z.to(d), tt = t.to(d).transpose(0, 1);
    sync(d);
    const int64_t before = dispatches();
    Tensor r = ((a * b + c).exp() - tt).sigmoid() * 0.5f + (a > c).to(f32);
    Tensor h = (r.to(f16) * 3.0f).to(f32) - r;
    Tensor out = where(a < 0.0f, h, r.tanh());
    sync(d);
    *n = dispatches() - before;
    return out.to(Device::cpu());
  };
  int64_t nf = 0, np = 0;
  fusion::reset_stats();
  const Tensor rf = chain(fused, &nf), rp = chain(plain, &np);
  EXPECT_TRUE(rf.equal(rp)) << (rf - rp).abs().max().item<float>();
  EXPECT_GT(fusion::stats().fused_ops, 10);
  EXPECT_LT(nf * 3, np) << nf << " fused dispatches, " << np << " unfused";
}
