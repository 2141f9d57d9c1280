// SPDX-License-Identifier: MIT OR Apache-2.0
// A full Sum or Mean of any length ends a fused chain (Group::long_tail, cpu::full): each tile
// adds its leaves' partials while the chain's values are in the cache, and the partials are
// combined in the reduction kernel's order, so the result has the plain CPU's bits at any thread
// count and the chain's result never goes through memory.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fusion/fusion.h"
#include "fusion_jit_mode.h"
#include "test_util.h"

using namespace kiln;

namespace {

Tensor chain(const Tensor& x) { return x * 0.5 * ((x * 0.70710678).erf() + 1.0) + x.sin() * 0.1; }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST(FusionReduce, FullReductionsOfAnyLengthEndTheChainWithTheKernelsBits) {
  const Device plain = Device::cpu().without_fusion(), fused = plain.fusion();
  const test::JitMode interp(cpu::vec::JitMode::kOff);
  for (const Shape& shape : {Shape{65537}, Shape{100003}, Shape{3, 40001}, Shape{2, 3, 70001}, Shape{(1 << 20) + 17}}) {
    SCOPED_TRACE(to_string(shape));
    manual_seed(static_cast<uint64_t>(shape_numel(shape)));
    Tensor x = randn(shape, {.device = plain});
    const float want_sum = chain(x).sum().item<float>();
    const float want_mean = chain(x).mean().item<float>();
    const std::vector<float> want_keep = chain(x).sum({}, /*keepdim=*/true).to_vector<float>();
    for (int threads : {1, 2}) {
      test::with_threads(threads, [&]() -> int {
        fusion::reset_stats();
        Tensor xf = x.to(fused);
        EXPECT_TRUE(same_bits(chain(xf).sum().item<float>(), want_sum)) << threads;
        EXPECT_TRUE(same_bits(chain(xf).mean().item<float>(), want_mean)) << threads;
        const std::vector<float> keep = chain(xf).sum({}, true).to_vector<float>();
        EXPECT_EQ(keep.size(), want_keep.size());
        if (!keep.empty()) EXPECT_TRUE(same_bits(keep[0], want_keep[0]));
        EXPECT_EQ(fusion::stats().long_reductions, 3) << "the reductions did not end the fused chains";
        return 0;
      });
    }
  }
}

TEST(FusionReduce, OtherLongRowOpsStillRunAlone) {
  // A softmax over a row longer than a tile cannot end the group (it needs the whole row).
  const Device fused = Device::cpu().without_fusion().fusion();
  Tensor x = randn({70000}, {.device = fused});
  fusion::reset_stats();
  Tensor y = softmax(x * 2.0, 0);
  const std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(fusion::stats().long_reductions, 0);
  const std::vector<float> want = softmax(x.to(Device::cpu().without_fusion()) * 2.0, 0).to_vector<float>();
  EXPECT_EQ(got, want);
}
