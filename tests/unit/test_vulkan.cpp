// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan backend (src/backends/vulkan) beyond the conformance suite, which runs on "vulkan"
// through KILN_TEST_DEVICES like on every device: native ops without fallback, batching of
// dispatches, errors that leave the device usable. On a machine without Vulkan the tests check
// that the device is absent and says why. Reference: the same ops on the CPU.
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/custom_op.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "backends/vulkan/context.h"
#include "kernel/cache.h"
#include "kernel/library.h"
#include "require_vulkan.h"
#include "test_fork.h"

using namespace kiln;

namespace {

bool have_vulkan() {
  const std::vector<std::string> names = Device::list();
  return std::find(names.begin(), names.end(), "vulkan") != names.end();
}

double max_diff(const Tensor& a, const Tensor& b) {
  auto va = a.to(Device::cpu()).to_vector<double>(), vb = b.to(Device::cpu()).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

/// At the end of a run that used Vulkan (the conformance suite on vulkan, for one), prints how
/// many op kinds and ops fell back to the CPU there: the backend's to-do list, measured.
class FallbackReport : public ::testing::Environment {
 public:
  void TearDown() override {
    std::set<std::string> kinds;
    int64_t ops = 0;
    for (const auto& [what, n] : fallback_counts()) {
      if (what.rfind("vulkan", 0) != 0) continue;
      kinds.insert(what.substr(what.find(": ") + 2));
      ops += n;
    }
    if (!kinds.empty())
      std::printf("vulkan fallbacks: %zu op kinds, %lld ops\n", kinds.size(), static_cast<long long>(ops));
  }
};
[[maybe_unused]] ::testing::Environment* const g_report = ::testing::AddGlobalTestEnvironment(new FallbackReport);

}  // namespace

TEST(Vulkan, ListedExactlyWhenADeviceExists) {
  std::string why;
  const int n = vulkan::Context::count(&why);
  EXPECT_EQ(have_vulkan(), n > 0) << why;
  if (n == 0) {
    EXPECT_THROW(Device::vulkan(), Error);
    return;
  }
  const Device d = Device::vulkan();
  EXPECT_EQ(d, Device::from_string("vulkan"));
  EXPECT_EQ(d, Device::from_string("vulkan:0"));
  EXPECT_EQ(d.type(), DeviceType::Vulkan);
  try {
    Device::vulkan(n + 3);
    ADD_FAILURE() << "no error for a device index past the last";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no Vulkan device " + std::to_string(n + 3)), std::string::npos) << e.what();
  }
}

TEST(Vulkan, NativeOpsRunWithoutFallback) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  Tensor a = randn({5, 7}), b = randn({7}), c = randn({5, 1});
  const Tensor av = a.to(vk), bv = b.to(vk), cv = c.to(vk);
  reset_fallback_counts();
  // Broadcast operands, a transposed view (strided input and a strided copy), unary ops.
  Tensor yv = ((av + bv) * cv - av.abs().sqrt()).relu() / (av.square() + 1.0f);
  Tensor tv = av.transpose(0, 1).contiguous() * 2.0f;
  Tensor iv = (arange(0, 12, 1, i32).to(vk) * 3 - 5);
  EXPECT_TRUE(fallback_counts().empty()) << "an elementwise op fell back to the CPU";
  Tensor y = ((a + b) * c - a.abs().sqrt()).relu() / (a.square() + 1.0f);
  EXPECT_EQ(yv.device(), vk);
  EXPECT_LE(max_diff(yv, y), 1e-5);
  EXPECT_EQ(max_diff(tv, a.transpose(0, 1) * 2.0f), 0.0);
  EXPECT_EQ(iv.to(Device::cpu()).to_vector<int32_t>(), (arange(0, 12, 1, i32) * 3 - 5).to_vector<int32_t>());
}

// f32 corners that once fell back: scans, sorts, softmax and index ops of 0-d tensors, and
// layer and group norms of flipped and permuted views (x gathered element by element).
TEST(Vulkan, ZeroDimScansAndNormsOfAnyLayoutRunNatively) {
  REQUIRE_VULKAN();
  namespace F = nn::functional;
  const Device vk = Device::vulkan();
  const Tensor s = scalar_tensor(1.5, f32), i0 = scalar_tensor(0, i64), i1 = zeros({1}, {.dtype = i64});
  const Tensor x = randn({3, 4, 5}), w = randn({4, 5}), g = randn({2, 4, 3, 3}), gw = randn({4});
  auto ops = [&](const Device& d) {
    const Tensor sd = s.to(d), a = i0.to(d), b = i1.to(d), xd = x.to(d), gd = g.to(d);
    return std::vector<Tensor>{cumsum(sd, 0),
                               argsort(sd),
                               softmax(sd, 0),
                               log_softmax(sd, -1),
                               gather(sd, 0, a),
                               index_select(sd, 0, b),
                               scatter(sd, 0, a, sd * 2.0f),
                               index_add(sd, 0, b, sd),
                               F::layer_norm(flip(xd, {0}), {4, 5}, w.to(d)),
                               F::layer_norm(flip(xd, {2}).transpose(1, 2), {5, 4}, w.to(d).t().contiguous()),
                               F::group_norm(flip(gd, {0}).transpose(2, 3), 2, gw.to(d))};
  };
  const std::vector<Tensor> cpu = ops(Device::cpu());
  sync(vk);
  reset_fallback_counts();
  const std::vector<Tensor> got = ops(vk);
  sync(vk);
  std::string fell;
  for (const auto& [what, n] : fallback_counts()) fell += " " + what;
  EXPECT_TRUE(fell.empty()) << "fell back:" << fell;
  for (size_t q = 0; q < cpu.size(); ++q) EXPECT_LE(max_diff(got[q], cpu[q]), 1e-5) << "result " << q;
}

TEST(Vulkan, OtherOpsFallBackAndStayOnTheDevice) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  const Tensor a = randint(0, 100, {4, 6}, {.dtype = u64});
  reset_fallback_counts();
  Tensor s = (a.to(vk) * a.to(vk)).sum({0});  // u64 arithmetic has no kernel (docs/gpu.md)
  EXPECT_EQ(s.device(), vk);
  EXPECT_FALSE(fallback_counts().empty());
  EXPECT_TRUE(equal(s.to(Device::cpu()), (a * a).sum({0})));
}

TEST(Vulkan, DispatchesAreBatchedUntilASyncPoint) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan().without_fusion();  // one kernel per op
  vulkan::Context& ctx = vulkan::Context::get(0);
  Tensor x = ones({1000}).to(vk);
  sync(vk);
  const vulkan::Stats s0 = ctx.stats();
  for (int i = 0; i < 100; ++i) x = x + 1.0f;
  const vulkan::Stats s1 = ctx.stats();
  EXPECT_EQ(s1.dispatches - s0.dispatches, 100);
  EXPECT_EQ(s1.submits, s0.submits) << "nothing is submitted before a sync point";
  EXPECT_EQ(x.to(Device::cpu()).to_vector<float>()[999], 101.0f);
  EXPECT_EQ(ctx.stats().submits - s0.submits, 1) << "one submit for the whole batch";
}

TEST(Vulkan, AFullBatchIsSubmittedAndTheNextRecordsWhileItRuns) {
  // Double buffering: a full batch (256 dispatches) goes to the device without a wait; the
  // next one is recorded meanwhile; a frame is waited for only when it is needed again, or at
  // a sync. Buffers released while a batch uses them come back after it.
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan().without_fusion();
  vulkan::Context& ctx = vulkan::Context::get(0);
  Tensor x = ones({1000}).to(vk);
  sync(vk);
  const int64_t used = memory_stats(vk).in_use;
  const vulkan::Stats s0 = ctx.stats();
  for (int i = 0; i < 300; ++i) x = x + 1.0f;  // the first batch fills and is submitted
  const vulkan::Stats s1 = ctx.stats();
  EXPECT_EQ(s1.submits - s0.submits, 1);
  EXPECT_EQ(s1.waits - s0.waits, 0) << "submitting a full batch does not wait";
  for (int i = 0; i < 300; ++i) x = x + 1.0f;  // the second fills: the first is waited for
  const vulkan::Stats s2 = ctx.stats();
  EXPECT_EQ(s2.submits - s0.submits, 2);
  EXPECT_EQ(s2.waits - s0.waits, 1);
  EXPECT_EQ(x.to(Device::cpu()).to_vector<float>()[999], 601.0f);
  EXPECT_EQ(ctx.stats().waits - s0.waits, 3) << "the read waits for the two batches not yet waited for";
  // Every intermediate came back (a few bytes of scalar constants may stay); 600 more results
  // reuse those buffers: the device holds no more memory than after the first 600.
  const MemoryStats m = memory_stats(vk);
  EXPECT_LE(m.in_use, used + 64);
  for (int i = 0; i < 600; ++i) x = x + 1.0f;
  EXPECT_EQ(x.to(Device::cpu()).to_vector<float>()[999], 1201.0f);
  const MemoryStats m2 = memory_stats(vk);
  EXPECT_EQ(m2.in_use + m2.cached, m.in_use + m.cached);
}

TEST(Vulkan, OutOfMemoryIsAnErrorAndTheDeviceStaysUsable) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  try {
    Tensor huge = empty({int64_t{1} << 40}, {.dtype = f32, .device = vk});  // 4 TiB
    ADD_FAILURE() << "a 4 TiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vulkan"), std::string::npos) << e.what();
  }
  Tensor y = (ones({8}).to(vk) * 2.0f).to(Device::cpu());
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(8, 2.0f));
}

TEST(Vulkan, KernelDebugMakesAnOutOfRangeAccessAnErrorAtTheSync) {
  // KILN_KERNEL_DEBUG=1 (here set_debug): every access of a kernel is checked; the first out of
  // range is a kiln::Error at the next sync naming the kernel, buffer, index and size, instead
  // of touching memory, and the device stays usable.
  REQUIRE_VULKAN();
  vulkan::Context& ctx = vulkan::Context::get(0);
  const bool was = ctx.debug();
  ctx.set_debug(true);
  const CustomOp shift({.name = "shift_left", .kernel = [](const std::vector<Tensor>&) {
                          return kernel::trace("read_one_past", [](kernel::Builder& b) {
                            auto x = b.input<float>("x");
                            auto y = b.output<float>("y");
                            const kernel::Val n = b.scalar<int32_t>("n");
                            b.group_size(64);
                            const kernel::Val i = kernel::global_id();
                            kernel::if_(i < n, [&] { y[i] = x[i + 1]; });  // the last thread reads x[n]
                          });
                        }});
  const Device vk = Device::vulkan();
  const Tensor x = arange(0, 10, 1, f32).to(vk);
  std::string msg;
  try {
    (void)shift(x).to(Device::cpu());
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("[kernel 'read_one_past'] out-of-range access: buffer 'x' index 10 (size 10)"), std::string::npos)
      << msg;
  // The library's kernels, fused or not, pass their checks; the device goes on.
  EXPECT_EQ((x * 2.0f + 1.0f).sum().item<float>(), 100.0f);
  EXPECT_EQ((x.to(vk.without_fusion()) * 2.0f).to(Device::cpu()).sum().item<float>(), 90.0f);
  ctx.set_debug(was);
}

TEST(Vulkan, StagedMemoryMovesValuesThroughCopiesInOrder) {
  // KILN_VULKAN_MEMORY=staged (the ctest vulkan_staged_memory; a discrete GPU's default): the
  // host reaches tensors only through copies, recorded in order with the dispatches. Otherwise
  // (lavapipe's unified memory) the same calls go through the mapping and copy nothing.
  REQUIRE_VULKAN();
  vulkan::Context& ctx = vulkan::Context::get(0);
  const char* mem = std::getenv("KILN_VULKAN_MEMORY");
  if (mem && std::string(mem) == "staged") EXPECT_TRUE(ctx.staged());
  if (mem && std::string(mem) == "host") EXPECT_FALSE(ctx.staged());
  const Device vk = Device::vulkan().without_fusion();
  const int64_t copies = ctx.stats().copies;
  const Tensor big = randn({3 << 20});  // 12 MB: past the 4 MB ring, a buffer of its own
  Tensor a = big.to(vk), b = ones({1000}).to(vk);
  Tensor c = b * 2.0f;  // queued: reads b before the write below
  b.fill_(5.0f);        // a host-side write after it (a Fill kernel or a copy)
  b.copy_(ones({1000}) * 7.0f);
  EXPECT_TRUE(a.to(Device::cpu()).equal(big));
  EXPECT_EQ(c.to(Device::cpu()).to_vector<float>(), std::vector<float>(1000, 2.0f));
  EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), std::vector<float>(1000, 7.0f));
  EXPECT_EQ(ctx.stats().copies > copies, ctx.staged());
}

TEST(Vulkan, ThePipelineCacheIsSavedForTheNextProcess) {
  // The driver's pipeline cache goes to disk (at exit, when pipelines were built), whole or not
  // at all, with the header Vulkan defines: its length, version one, the device's vendor.
  REQUIRE_VULKAN();
  vulkan::Context& ctx = vulkan::Context::get(0);
  (void)(ones({4}).to(Device::vulkan().without_fusion()) * 3.0f).to(Device::cpu());
  ASSERT_TRUE(ctx.save_pipeline_cache());
  const std::string path = ctx.pipeline_cache_path();
  std::ifstream in(path, std::ios::binary);
  uint32_t header[4] = {};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  ASSERT_TRUE(in.good()) << path;
  EXPECT_GE(header[0], 32u);  // header length
  EXPECT_EQ(header[1], 1u);   // VK_PIPELINE_CACHE_HEADER_VERSION_ONE
  EXPECT_NE(ctx.identity().find("vendor " + std::to_string(header[2])), std::string::npos) << ctx.identity();
}

TEST(Vulkan, MemoryStatsCountBuffers) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  const int64_t before = memory_stats(vk).in_use;
  {
    Tensor t = zeros({256, 256}).to(vk);
    EXPECT_EQ(memory_stats(vk).in_use - before, 256 * 256 * 4);
  }
  EXPECT_EQ(memory_stats(vk).in_use, before);
}

TEST(Vulkan, AForkedChildIsRefusedTheParentsDeviceAndExits) {
  // The driver's threads do not survive a fork: the child's use of the device is an error that
  // names the fork, and its exit does not wait for them (it used to hang in the exit handler).
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  const Tensor x = randn({64});
  const Tensor y = x.to(vk) * 2.0f;  // queued, not yet run
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int refused = 0;
    for (const auto& use : std::vector<std::function<void()>>{[&] { (void)(y + 1.0f).to(Device::cpu()); },
                                                              [&] { (void)y.to(Device::cpu()); },
                                                              [&] { (void)zeros({4}).to(Device::vulkan()); }}) {
      try {
        use();
      } catch (const Error& e) {
        const bool named = std::string(e.what()).find("forked") != std::string::npos;
        if (!named) std::fprintf(stderr, "child: %s\n", e.what());
        refused += named;
      }
    }
    std::exit(refused == 3 ? 0 : 1);  // the exit handlers run
  }
  const int status = test::wait_child(pid, 60);
  if (status == -1) FAIL() << "the forked child did not exit within 60 s";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(y.to(Device::cpu()).equal(x * 2.0f));  // the parent's device is untouched
}

TEST(Vulkan, ComparisonsWhereCastsAndReductionsRunNatively) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  Tensor a = randn({6, 5, 7}), b = randn({5, 1});
  a.index_put_({0, 0, 0}, std::nan(""));
  const Tensor av = a.to(vk), bv = b.to(vk);
  reset_fallback_counts();
  // Bool outputs are bytes: a strided bool view checks that neighbouring bytes survive.
  Tensor mv = av > bv;
  Tensor wv = where(mv, av, bv * 2.0f);
  Tensor cv = (av.narrow(0, 1, 5) * 10.0f).to(i32).to(i64).to(f32);  // NaN -> int is undefined
  Tensor sv = av.sum({1}), meanv = av.mean({0, 2}, true), mxv = av.amax({2}), amv = av.argmax(1);
  Tensor allv = av.narrow(0, 1, 5).sum();
  Tensor lv = mv.logical_and(av < 0.5f).to(f32).sum({2});
  EXPECT_TRUE(fallback_counts().empty()) << fallback_counts().front().first;
  EXPECT_EQ(max_diff(mv.to(f32), (a > b).to(f32)), 0.0);
  EXPECT_EQ(max_diff(wv, where(a > b, a, b * 2.0f)), 0.0);
  EXPECT_EQ(max_diff(cv, (a.narrow(0, 1, 5) * 10.0f).to(i32).to(i64).to(f32)), 0.0);
  EXPECT_LE(max_diff(sv, a.sum({1})), 1e-5);
  EXPECT_LE(max_diff(meanv, a.mean({0, 2}, true)), 1e-5);
  EXPECT_TRUE(std::isnan(mxv.to(Device::cpu()).to_vector<float>()[0])) << "max propagates NaN";
  EXPECT_EQ(max_diff(mxv.narrow(0, 1, 5), a.amax({2}).narrow(0, 1, 5)), 0.0);
  EXPECT_EQ(amv.to(Device::cpu()).to_vector<int64_t>(), a.argmax(1).to_vector<int64_t>());
  EXPECT_LE(max_diff(allv, a.narrow(0, 1, 5).sum()), 1e-4);
  EXPECT_EQ(max_diff(lv, (a > b).logical_and(a < 0.5f).to(f32).sum({2})), 0.0);
}

// Index ops run natively; duplicate indices resolve as on the CPU (sums in index order, the
// last copy wins), f64 sums too; an index out of range is the CPU's error, before any write,
// and the device stays usable.
TEST(Vulkan, IndexOpsRunNativelyAndCheckTheirIndices) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  Tensor x = randn({6, 5}), src = randn({4, 5});
  Tensor idx = tensor<int64_t>({3, 0, 3, 5}, {4});
  Tensor gidx = tensor<int64_t>({1, 4, 4, 0, 2, 2, 3, 1, 0, 0}, {2, 5});
  const Tensor xv = x.to(vk), sv = src.to(vk), iv = idx.to(vk), gv = gidx.to(vk);
  reset_fallback_counts();
  Tensor sel = index_select(xv, 0, iv), gat = gather(xv, 0, gv);
  Tensor add = index_add(xv, 0, iv, sv, 0.5), sca = scatter_add(xv.to(f64), 0, gv, sv.narrow(0, 0, 2).to(f64));
  EXPECT_TRUE(fallback_counts().empty()) << fallback_counts().front().first;
  EXPECT_EQ(max_diff(sel, index_select(x, 0, idx)), 0.0);
  EXPECT_EQ(max_diff(gat, gather(x, 0, gidx)), 0.0);
  EXPECT_EQ(max_diff(add, index_add(x, 0, idx, src, 0.5)), 0.0);
  EXPECT_EQ(max_diff(sca, scatter_add(x.to(f64), 0, gidx, src.narrow(0, 0, 2).to(f64))), 0.0);
  Tensor bad = tensor<int64_t>({1, 6}, {2}).to(vk);
  EXPECT_THROW(index_select(xv, 0, bad).to(Device::cpu()), Error);
  EXPECT_EQ(max_diff(index_select(xv, 1, iv.narrow(0, 0, 2)), index_select(x, 1, idx.narrow(0, 0, 2))), 0.0);
}

// Random numbers on the device are the CPU's for the same seed (the same Philox words and
// conversions), bit for bit, at the edges of the range too.
TEST(Vulkan, RandUniformDrawsTheCpusNumbers) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  for (auto [lo, hi] : {std::pair<double, double>{0, 1}, {-3.5, 0.25}, {1e-3, 1e-3 + 1e-9}}) {
    manual_seed(1234);
    Tensor c = uniform({1001}, lo, hi, {.dtype = f32, .device = Device::cpu()});
    manual_seed(1234);
    reset_fallback_counts();
    Tensor v = uniform({1001}, lo, hi, {.dtype = f32, .device = vk});
    EXPECT_TRUE(fallback_counts().empty()) << fallback_counts().front().first;
    EXPECT_EQ(v.to(Device::cpu()).to_vector<float>(), c.to_vector<float>()) << lo << " " << hi;
  }
}

// bernoulli draws the CPU's numbers bit for bit (f32 and f16 p, transposed), randn and normal
// the CPU's within a few ulps; a p outside [0, 1] is the CPU's error and the device stays usable.
TEST(Vulkan, BernoulliAndNormalDrawTheCpusNumbers) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  const Tensor p = rand({37, 29}, {.device = Device::cpu()});
  for (const Tensor& q : {p, p.t(), p.to(f16)}) {
    manual_seed(99);
    const Tensor c = bernoulli(q);
    manual_seed(99);
    reset_fallback_counts();
    const Tensor v = bernoulli(q.to(vk));
    EXPECT_TRUE(fallback_counts().empty());
    EXPECT_TRUE(equal(v.to(Device::cpu()), c)) << dtype_name(q.dtype());
  }
  for (auto [mean, sd] : {std::pair<double, double>{0, 1}, {-3, 0.25}}) {
    manual_seed(5);
    const Tensor c = normal({1001}, mean, sd);
    manual_seed(5);
    reset_fallback_counts();
    const Tensor v = normal({1001}, mean, sd, {.device = vk});
    EXPECT_TRUE(fallback_counts().empty());
    EXPECT_LE(max_diff(v, c), 4e-6 * (std::abs(mean) + 5 * sd)) << mean << " " << sd;
  }
  Tensor bad = full({4}, 1.5, {.device = vk});
  EXPECT_THROW(bernoulli(bad).to(Device::cpu()), Error);
  EXPECT_EQ((ones({3}, {.device = vk}) * 2.0f).sum().item<float>(), 6.0f);
}

// max_unpool runs natively (a strided input too), a later duplicate index wins as on the CPU,
// and an index outside the output plane is the CPU's error, raised before any write.
TEST(Vulkan, MaxUnpoolRunsNativelyAndChecksItsIndices) {
  REQUIRE_VULKAN();
  namespace F = nn::functional;
  const Device vk = Device::vulkan();
  const Tensor x = randn({2, 3, 8, 6});
  const auto [v, i] = F::max_pool2d_with_indices(x, 2);
  const Tensor want = F::max_unpool2d(v, i, 2);
  reset_fallback_counts();
  EXPECT_TRUE(equal(F::max_unpool2d(v.to(vk), i.to(vk), 2).to(Device::cpu()), want));
  EXPECT_TRUE(equal(
      F::max_unpool2d(v.transpose(2, 3).to(vk), i.transpose(2, 3).to(vk), 2, {.output_size = {6, 8}}).to(Device::cpu()),
      F::max_unpool2d(v.transpose(2, 3), i.transpose(2, 3), 2, {.output_size = {6, 8}})));
  const Tensor dup = zeros({1, 1, 2, 2}, {.dtype = i64});  // every value to position 0
  const Tensor vals = arange(0, 4, 1, f32).reshape({1, 1, 2, 2});
  EXPECT_TRUE(equal(F::max_unpool2d(vals.to(vk), dup.to(vk), 2).to(Device::cpu()), F::max_unpool2d(vals, dup, 2)));
  EXPECT_TRUE(fallback_counts().empty());
  const Tensor bad = full({1, 1, 2, 2}, 99, {.dtype = i64});
  EXPECT_THROW(F::max_unpool2d(vals.to(vk), bad.to(vk), 2), Error);
  EXPECT_EQ((ones({3}, {.device = vk}) * 2.0f).sum().item<float>(), 6.0f);
}

// Integer floor_divide, div(trunc), remainder and fmod of i32, i64 and u32 run natively as the
// CPU's (negative operands, INT_MIN by -1, a broadcast divisor); a zero divisor is the CPU's
// error, raised before anything is written, and the device stays usable.
TEST(Vulkan, IntegerDivisionIsTheCpus) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  std::vector<int64_t> av, bv;
  for (int64_t p : std::vector<int64_t>{-7, -6, -1, 0, 1, 5, 7, 13, -2147483648LL, 2147483647})
    for (int64_t q : {-7, -3, -2, -1, 1, 2, 3, 7}) av.push_back(p), bv.push_back(q);
  const int64_t n = static_cast<int64_t>(av.size());
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Op> ops[] = {
      {"floor_divide", [](const Tensor& p, const Tensor& q) { return floor_divide(p, q); }},
      {"trunc", [](const Tensor& p, const Tensor& q) { return div(p, q, "trunc"); }},
      {"remainder", [](const Tensor& p, const Tensor& q) { return p.remainder(q); }},
      {"fmod", [](const Tensor& p, const Tensor& q) { return p.fmod(q); }},
      {"sign", [](const Tensor& p, const Tensor&) { return sign(p); }}};
  for (DType dt : {i32, i64, u32}) {
    Tensor a = tensor<int64_t>(av, {n}).to(dt), b = tensor<int64_t>(bv, {n}).to(dt);
    if (dt == u32) a = a.abs().to(u32), b = b.to(i64).abs().to(u32);
    for (const auto& [name, op] : ops) {
      reset_fallback_counts();
      const Tensor got = op(a.to(vk), b.to(vk)).to(Device::cpu());
      EXPECT_TRUE(fallback_counts().empty()) << name << " " << dtype_name(dt);
      EXPECT_TRUE(equal(got, op(a, b))) << name << " " << dtype_name(dt);
    }
    // a broadcast divisor row
    const Tensor m = a.reshape({10, 8}), row = b.reshape({10, 8}).select(0, 0);
    EXPECT_TRUE(equal(floor_divide(m.to(vk), row.to(vk)).to(Device::cpu()), floor_divide(m, row)));
  }
  const Tensor zero_div = tensor<int32_t>({3, 0, 1}, {3});
  EXPECT_THROW(floor_divide(ones({3}, {.dtype = i32, .device = vk}), zero_div.to(vk)), Error);
  EXPECT_EQ((ones({3}, {.device = vk}) * 2.0f).sum().item<float>(), 6.0f);
}

// Arithmetic, comparisons, bitwise ops and division of i8, i16 and u8 run natively and wrap
// as the CPU's (computed in 32 bits, the low bits kept); fills of every integer dtype too.
TEST(Vulkan, SmallIntegerOpsWrapAsTheCpus) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  std::vector<int64_t> av, bv;
  for (int64_t p : std::vector<int64_t>{-128, -100, -7, -1, 0, 1, 3, 100, 127, 255})
    for (int64_t q : std::vector<int64_t>{-128, -3, -1, 1, 2, 7, 127, 200}) av.push_back(p), bv.push_back(q);
  const int64_t n = static_cast<int64_t>(av.size());
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  const Op ops[] = {[](const Tensor& p, const Tensor& q) { return p + q; },
                    [](const Tensor& p, const Tensor& q) { return p - q; },
                    [](const Tensor& p, const Tensor& q) { return p * q; },
                    [](const Tensor& p, const Tensor& q) { return maximum(p, q); },
                    [](const Tensor& p, const Tensor& q) { return floor_divide(p, q); },
                    [](const Tensor& p, const Tensor& q) { return p.remainder(q); },
                    [](const Tensor& p, const Tensor& q) { return (p < q).to(p.dtype()); },
                    [](const Tensor& p, const Tensor&) { return -p; },
                    [](const Tensor& p, const Tensor&) { return sign(p); },
                    [](const Tensor& p, const Tensor& q) { return where(p > q, p, q); }};
  for (DType dt : {i8, i16, u8}) {
    const Tensor a = tensor<int64_t>(av, {n}).to(dt), b = tensor<int64_t>(bv, {n}).to(dt);
    for (size_t k = 0; k < std::size(ops); ++k) {
      reset_fallback_counts();
      const Tensor got = ops[k](a.to(vk), b.to(vk)).to(Device::cpu());
      EXPECT_TRUE(fallback_counts().empty()) << "op " << k << " " << dtype_name(dt);
      EXPECT_TRUE(equal(got, ops[k](a, b))) << "op " << k << " " << dtype_name(dt);
    }
  }
  for (DType dt : {i8, i16, u8, u32}) {
    reset_fallback_counts();
    EXPECT_TRUE(equal(full({5}, 300, {.dtype = dt, .device = vk}).to(Device::cpu()), full({5}, 300, {.dtype = dt})));
    EXPECT_TRUE(fallback_counts().empty()) << dtype_name(dt);
  }
}

// The matmul's tile variants give the same bits (run on the C++ target from one captured op),
// the autotuner measures them on first use of a shape class and keeps its choice on disk per
// device and driver, and KILN_AUTOTUNE=0 measures and writes nothing.
TEST(Vulkan, AutotunedMatmulVariantsAgreeAndTheChoiceIsKept) {
  REQUIRE_VULKAN();
  const Tensor a = randn({2, 40, 70}), b = randn({2, 70, 30});
  const CapturedGraph g =
      capture([](const std::vector<Tensor>& v) { return std::vector<Tensor>{matmul(v[0], v[1])}; }, {a, b});
  ASSERT_EQ(g.nodes.size(), 1u);
  const ir::Op& op = *g.nodes[0].op;
  const std::optional<kernel::lib::Launch> l = kernel::lib::launch_of(op, true);
  ASSERT_TRUE(l && l->variants.size() == 1);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<int32_t> meta = l->meta;
  auto run = [&](const std::function<kernel::Kernel(const kernel::Limits&)>& trace, std::array<uint32_t, 3> groups) {
    std::vector<float> out(2 * 40 * 30, -1.0f);
    kernel::compile_cpu(trace(kernel::Limits{}), 0)({groups[0], groups[1], groups[2]}, {out, av, bv, meta});
    return out;
  };
  const std::vector<float> t16 = run(l->trace, l->groups), t8 = run(l->variants[0].trace, l->variants[0].groups);
  EXPECT_EQ(t16, t8);
  EXPECT_LE(max_diff(tensor<float>(t16, {2, 40, 30}), matmul(a, b)), 1e-4);

  const Device vk = Device::vulkan();
  const std::string file =
      kernel::cache_dir() + "/autotune/" + kernel::cache::hash128(vulkan::Context::get(0).identity()) + ".txt";
  auto kept = [&](const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(key + " ", 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(equal(matmul(a.to(vk), b.to(vk)).to(Device::cpu()), tensor<float>(t16, {2, 40, 30})));
  EXPECT_TRUE(kept("matmul_f32:64x32x128:batched")) << file;
  // a shape class never seen, with autotuning off: the default tile, nothing measured or kept
  setenv("KILN_AUTOTUNE", "0", 1);
  const Tensor c = randn({3, 5}), d = randn({5, 1000});
  const Tensor r = matmul(c.to(vk), d.to(vk)).to(Device::cpu());
  unsetenv("KILN_AUTOTUNE");
  EXPECT_LE(max_diff(r, matmul(c, d)), 1e-5);
  EXPECT_FALSE(kept("matmul_f32:4x1024x8"));
}

// exp of f64 runs natively within 2 ulps of std::exp, from the underflow to the overflow edge.
TEST(Vulkan, ExpOfF64IsWithinTwoUlps) {
  REQUIRE_VULKAN();
  std::vector<double> xs;
  for (double x = -740; x < 709.7; x += 0.731) xs.push_back(x);
  for (double x : {0.0, -0.0, 1e-300, -1e-300, 1e-10, 0.5, -0.5, 709.78, -745.5, 800.0, -800.0}) xs.push_back(x);
  Tensor x = tensor<double>(xs, {static_cast<int64_t>(xs.size())});
  reset_fallback_counts();
  const std::vector<double> got = x.to(Device::vulkan()).exp().to(Device::cpu()).to_vector<double>();
  EXPECT_TRUE(fallback_counts().empty());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(xs[i]);
    if (want < 1e-300 || std::isinf(want)) {  // the subnormal range may be flushed by a device
      EXPECT_TRUE(got[i] == want || (want < 1e-300 && got[i] < 1e-300)) << xs[i];
      continue;
    }
    EXPECT_LE(std::fabs(got[i] - want), 2 * (std::nextafter(want, INFINITY) - want)) << xs[i];
  }
}

// log of f64 runs natively within 2 ulps of std::log over the whole range and its edges.
TEST(Vulkan, LogOfF64IsWithinTwoUlps) {
  REQUIRE_VULKAN();
  std::vector<double> xs;
  for (double x = 1e-300; x < 1e300; x *= 3.7) xs.push_back(x);
  for (double x = 0.5; x < 2.0; x += 0.0137) xs.push_back(x);
  for (double x : {0.0, -0.0, -1.0, 1.0, 2.0, 0.7071067811865476, 1.4142135623730951, 1.7976931348623157e308,
                   2.2250738585072014e-308, static_cast<double>(INFINITY), static_cast<double>(NAN)})
    xs.push_back(x);
  Tensor x = tensor<double>(xs, {static_cast<int64_t>(xs.size())});
  reset_fallback_counts();
  const std::vector<double> got = x.to(Device::vulkan()).log().to(Device::cpu()).to_vector<double>();
  EXPECT_TRUE(fallback_counts().empty());
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::log(xs[i]);
    if (!std::isfinite(want)) {
      EXPECT_TRUE(got[i] == want || (std::isnan(want) && std::isnan(got[i]))) << xs[i] << " " << got[i];
      continue;
    }
    EXPECT_LE(std::fabs(got[i] - want), 2 * std::fabs(std::nextafter(want, INFINITY) - want) + 1e-300) << xs[i];
  }
}

namespace {

/// f32 values over the whole range for the trig tests: every binade's few mantissas, the
/// floats nearest to k pi/2 (where the reduction cancels most), and the edges.
std::vector<float> trig_inputs() {
  std::vector<float> xs;
  for (int e = -149; e <= 127; ++e)
    for (float m : {1.0f, 1.3f, 1.61803f, 1.99999f}) {
      const float v = std::ldexp(m, e);
      if (std::isfinite(v)) xs.insert(xs.end(), {v, -v});
    }
  for (int64_t k = 1; k < 4000000; k = k * 5 / 4 + 1) xs.push_back(static_cast<float>(k * 1.5707963267948966));
  for (float x = -10.0f; x < 10.0f; x += 0.0137f) xs.push_back(x);
  for (float x = 0.99f; x < 1.0f; x += 0.0001f) xs.insert(xs.end(), {x, -x});  // asin, acos near +-1
  for (float x : {1.0f, -1.0f, 0.99999994f, -0.99999994f, 1.0000001f, -1.0000001f}) xs.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, 3.4028235e38f, -3.4028235e38f, 1e-45f, inf, -inf, std::nanf("")}) xs.push_back(x);
  return xs;
}

}  // namespace

// sin, cos, tan, asin, acos and atan of f32 run natively within 1 ulp of the correctly rounded value (std::sin of
// the exact value in double, rounded) over the whole f32 range, near multiples of pi/2 too.
TEST(Vulkan, TrigOfF32IsWithinOneUlp) {
  REQUIRE_VULKAN();
  const std::vector<float> xs = trig_inputs();
  Tensor x = tensor<float>(xs, {static_cast<int64_t>(xs.size())}).to(Device::vulkan());
  struct Fn {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
  };
  for (const Fn& f : {Fn{"sin", [](const Tensor& t) { return t.sin(); }, [](double v) { return std::sin(v); }},
                      Fn{"cos", [](const Tensor& t) { return t.cos(); }, [](double v) { return std::cos(v); }},
                      Fn{"tan", [](const Tensor& t) { return t.tan(); }, [](double v) { return std::tan(v); }},
                      Fn{"asin", [](const Tensor& t) { return t.asin(); }, [](double v) { return std::asin(v); }},
                      Fn{"acos", [](const Tensor& t) { return t.acos(); }, [](double v) { return std::acos(v); }},
                      Fn{"atan", [](const Tensor& t) { return t.atan(); }, [](double v) { return std::atan(v); }}}) {
    reset_fallback_counts();
    const std::vector<float> got = f.op(x).to(Device::cpu()).to_vector<float>();
    EXPECT_TRUE(fallback_counts().empty()) << f.name;
    int worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = static_cast<float>(f.ref(xs[i]));
      if (!std::isfinite(want) || !std::isfinite(got[i])) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got[i]) : got[i] == want) << f.name << "(" << xs[i] << ")";
        continue;
      }
      const float ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
      const double err = std::fabs(static_cast<double>(got[i]) - want) / ulp;
      worst = std::max(worst, static_cast<int>(err));
      EXPECT_LE(err, 1.0) << f.name << "(" << xs[i] << ") = " << got[i] << ", want " << want;
      if (want == 0) EXPECT_EQ(std::signbit(want), std::signbit(got[i])) << f.name << "(" << xs[i] << ")";
    }
    EXPECT_LE(worst, 1) << f.name;
  }
}

// atan2 of f32 runs natively within 1 ulp, with IEEE's special cases (signed zeros, infinities).
TEST(Vulkan, Atan2OfF32IsWithinOneUlp) {
  REQUIRE_VULKAN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> vals = {0.0f,  -0.0f, 1e-45f, -1e-45f, 1e-30f, 0.3f, -0.3f, 1.0f,
                             -1.0f, 2.5f,  -7.0f,  1e30f,   -3e38f, inf,  -inf,  std::nanf("")};
  std::vector<float> ys, xs;
  for (float p : vals)
    for (float q : vals) ys.push_back(p), xs.push_back(q);
  const int64_t n = static_cast<int64_t>(ys.size());
  Tensor y = tensor<float>(ys, {n}), x = tensor<float>(xs, {n});
  reset_fallback_counts();
  const std::vector<float> got =
      atan2(y.to(Device::vulkan()), x.to(Device::vulkan())).to(Device::cpu()).to_vector<float>();
  EXPECT_TRUE(fallback_counts().empty());
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = static_cast<float>(std::atan2(static_cast<double>(ys[i]), static_cast<double>(xs[i])));
    if (std::isnan(want) || want == 0) {
      EXPECT_TRUE(std::isnan(want) ? std::isnan(got[i]) : got[i] == 0 && std::signbit(got[i]) == std::signbit(want))
          << "atan2(" << ys[i] << ", " << xs[i] << ") = " << got[i];
      continue;
    }
    const float ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
    EXPECT_LE(std::fabs(static_cast<double>(got[i]) - want), ulp) << "atan2(" << ys[i] << ", " << xs[i] << ")";
  }
}

// erfinv of f32 runs natively and gives the CPU's values bit for bit, near +-1 too; +-1 give
// +-inf and values beyond them NaN.
TEST(Vulkan, ErfinvOfF32IsTheCpus) {
  REQUIRE_VULKAN();
  std::vector<float> xs;
  for (float x = -1.0f; x <= 1.0f; x += 0.00731f) xs.push_back(x);
  for (int e = 1; e <= 24; ++e) xs.insert(xs.end(), {1.0f - std::ldexp(1.0f, -e), -1.0f + std::ldexp(1.0f, -e)});
  for (float x : {0.0f, -0.0f, 1e-30f, 1e-45f, 1.0f, -1.0f, 1.5f, -3.0f, std::nanf("")}) xs.push_back(x);
  const Tensor x = tensor<float>(xs, {static_cast<int64_t>(xs.size())});
  reset_fallback_counts();
  const Tensor got = x.to(Device::vulkan()).erfinv().to(Device::cpu());
  EXPECT_TRUE(fallback_counts().empty());
  EXPECT_TRUE(equal(got.isnan(), x.erfinv().isnan()));
  EXPECT_TRUE(equal(nan_to_num(got, 0.0, 1e30, -1e30), nan_to_num(x.erfinv(), 0.0, 1e30, -1e30)));
}

// fmod, remainder and floor_divide of f32 run natively and give the CPU's values bit for bit,
// over zeros of both signs, subnormals, quotients up to 2^277, infinities and NaN.
TEST(Vulkan, FmodRemainderFloorDivideOfF32AreTheCpus) {
  REQUIRE_VULKAN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> vals = {
      0.0f,  -0.0f, 1e-45f, -3e-42f,   1.1754944e-38f, 1e-30f, 0.1f,          -0.1f,  0.75f, 1.0f, -1.0f,        2.5f,
      -3.5f, 7.0f,  -7.0f,  1234.567f, 1e10f,          1e30f,  3.4028235e38f, -1e38f, inf,   -inf, std::nanf("")};
  std::vector<float> a, b;
  for (float p : vals)
    for (float q : vals) a.push_back(p), b.push_back(q);
  const int64_t n = static_cast<int64_t>(a.size());
  Tensor ca = tensor<float>(a, {n}), cb = tensor<float>(b, {n});
  Tensor va = ca.to(Device::vulkan()), vb = cb.to(Device::vulkan());
  auto bits = [](const Tensor& t) {
    std::vector<float> v = t.to(Device::cpu()).to_vector<float>();
    std::vector<uint32_t> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = std::isnan(v[i]) ? 0x7fc00000u : std::bit_cast<uint32_t>(v[i]);
    return r;
  };
  using Op = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Op> ops[] = {
      {"fmod", [](const Tensor& p, const Tensor& q) { return p.fmod(q); }},
      {"remainder", [](const Tensor& p, const Tensor& q) { return p.remainder(q); }},
      {"floor_divide", [](const Tensor& p, const Tensor& q) { return floor_divide(p, q); }}};
  for (const auto& [name, op] : ops) {
    reset_fallback_counts();
    const std::vector<uint32_t> got = bits(op(va, vb)), want = bits(op(ca, cb));
    EXPECT_TRUE(fallback_counts().empty()) << name;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << name << "(" << a[i] << ", " << b[i] << ")";
  }
}

// layer_norm, rms_norm, group_norm and instance_norm run natively for f32, f64, f16 and bf16,
// over a transposed input too, and match the CPU (statistics in f64 on both).
TEST(Vulkan, NormsRunNatively) {
  REQUIRE_VULKAN();
  namespace F = nn::functional;
  const Device vk = Device::vulkan();
  manual_seed(7);
  const Tensor x4 = randn({2, 6, 3, 5}) * 3.0f + 1.0f, w = randn({6}), bias = randn({6});
  const Tensor row_w = randn({5}), row_b = randn({5});
  using Fn =
      std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rw, const Tensor& rb)>;
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"layer_norm", [](auto& x, auto&, auto&, auto& rw, auto& rb) { return F::layer_norm(x, {5}, rw, rb); }},
      {"layer_norm_2d",
       [](auto& x, auto&, auto&, auto&, auto&) {
         return F::layer_norm(x, {3, 5});
       }},
      {"layer_norm_transposed",
       [](auto& x, auto&, auto&, auto&, auto&) { return F::layer_norm(x.transpose(1, 3), {6}); }},
      {"rms_norm", [](auto& x, auto&, auto&, auto& rw, auto&) { return F::rms_norm(x, {5}, rw); }},
      {"group_norm", [](auto& x, auto& w, auto& b, auto&, auto&) { return F::group_norm(x, 3, w, b); }},
      {"group_norm_plain", [](auto& x, auto&, auto&, auto&, auto&) { return F::group_norm(x, 2); }},
      {"instance_norm", [](auto& x, auto&, auto&, auto&, auto&) { return F::group_norm(x, 6); }},
  };
  for (DType dt : {f32, f64, f16, bf16}) {
    const Tensor x = x4.to(dt);
    // f16 and bf16 take f32 parameters or their own dtype; f64 its own
    const Tensor cw = w.to(dt), cb = bias.to(dt), crw = row_w.to(dt), crb = row_b.to(dt);
    for (const auto& [name, fn] : cases) {
      const Tensor want = fn(x, cw, cb, crw, crb).to(f64);
      reset_fallback_counts();
      const Tensor got = fn(x.to(vk), cw.to(vk), cb.to(vk), crw.to(vk), crb.to(vk)).to(Device::cpu()).to(f64);
      EXPECT_TRUE(fallback_counts().empty()) << name << " " << dtype_name(dt);
      const double tol = dt == f32 ? 2e-6 : dt == f64 ? 1e-12 : dt == f16 ? 8e-3 : 6e-2;  // f16, bf16: an ulp
      EXPECT_LE(max_diff(got, want), tol) << name << " " << dtype_name(dt);
    }
  }
}

// sort runs natively for lines up to 2048 elements and gives the CPU's stable order, bit for bit:
// ties keep their input order, NaN is the largest value (first when descending), over rows and
// columns of f32, i64 and bool; a longer line falls back and is still right.
TEST(Vulkan, SortIsTheCpusStableSort) {
  REQUIRE_VULKAN();
  const Device vk = Device::vulkan();
  manual_seed(11);
  Tensor f = floor(randn({7, 300}) * 3.0f);  // many ties
  std::vector<float> fv = f.to_vector<float>();
  for (size_t i = 0; i < fv.size(); i += 37) fv[i] = std::nanf("");
  for (size_t i = 5; i < fv.size(); i += 41) fv[i] = -0.0f;
  f = tensor<float>(fv, {7, 300});
  const std::vector<Tensor> xs = {f, f.to(i64), f > 0.0f, f.to(f16)};
  for (const Tensor& x : xs)
    for (int64_t dim : {0, 1})
      for (bool desc : {false, true}) {
        const auto [cv, ci] = sort(x, dim, desc);
        reset_fallback_counts();
        const auto [gv, gi] = sort(x.to(vk), dim, desc);
        EXPECT_TRUE(fallback_counts().empty()) << dtype_name(x.dtype()) << " " << dim << " " << desc;
        EXPECT_EQ(gi.to(Device::cpu()).to_vector<int64_t>(), ci.to_vector<int64_t>())
            << dtype_name(x.dtype()) << " " << dim << " " << desc;
        EXPECT_TRUE(equal(gv.to(Device::cpu()).isnan(), cv.isnan()));
        EXPECT_TRUE(equal(nan_to_num(gv.to(Device::cpu()).to(f64)), nan_to_num(cv.to(f64))));
      }
  Tensor long_line = randn({3000});
  const auto [lv, li] = sort(long_line.to(vk));
  EXPECT_EQ(li.to(Device::cpu()).to_vector<int64_t>(), sort(long_line).second.to_vector<int64_t>());
}

// conv_transpose and the gradients of a convolution (input: ConvTranspose, weight:
// ConvWeightGrad) run natively with groups, stride, padding and dilation, in 1 to 3 spatial
// dims, and match the CPU.
TEST(Vulkan, ConvGradientsAndTransposeRunNatively) {
  REQUIRE_VULKAN();
  namespace F = nn::functional;
  manual_seed(5);
  struct Case {
    Shape x, w;
    F::ConvOptions o;
  };
  const std::vector<Case> cases = {
      {{2, 4, 9, 8}, {6, 2, 3, 3}, {.stride = 2, .padding = 1, .dilation = 1, .groups = 2}},
      {{1, 3, 7, 7}, {4, 3, 2, 3}, {.stride = {1, 2}, .padding = {1, 0}, .dilation = 2}},
      {{2, 2, 11}, {3, 2, 4}, {.stride = 3, .padding = 2}},
      {{1, 2, 4, 5, 4}, {2, 1, 2, 2, 2}, {.stride = 1, .padding = 1, .dilation = 1, .groups = 2}},
  };
  for (const Case& c : cases) {
    const Tensor x = randn(c.x), w = randn(c.w), b = randn({c.w[0]});
    auto run = [&](const Device& dev) {
      const Device ad = dev.autodiff();
      Tensor xs = x.to(ad).require_grad(), ws = w.to(ad).require_grad(), bs = b.to(ad).require_grad();
      const size_t nsp = c.x.size() - 2;
      Tensor y = nsp == 1   ? F::conv1d(xs, ws, bs, c.o)
                 : nsp == 2 ? F::conv2d(xs, ws, bs, c.o)
                            : F::conv3d(xs, ws, bs, c.o);
      const Gradients g = (y * y).sum().backward();
      return std::vector<Tensor>{y, xs.grad(g), ws.grad(g), bs.grad(g)};
    };
    const std::vector<Tensor> want = run(Device::cpu());
    reset_fallback_counts();
    const std::vector<Tensor> got = run(Device::vulkan());
    EXPECT_TRUE(fallback_counts().empty())
        << c.x.size() << "-d " << (fallback_counts().empty() ? "" : fallback_counts().front().first);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(max_diff(got[i], want[i]), 1e-4 * (1 + want[i].abs().max().item<double>()))
          << c.x.size() << "-d output " << i;
  }
  // conv_transpose2d itself, with a bias, output padding and groups
  const Tensor x = randn({2, 4, 5, 6}), w = randn({4, 3, 3, 2}), b = randn({6});
  const F::ConvTransposeOptions o{.stride = 2, .padding = 1, .output_padding = 1, .groups = 2, .dilation = 1};
  reset_fallback_counts();
  const Tensor got = F::conv_transpose2d(x.to(Device::vulkan()), w.to(Device::vulkan()), b.to(Device::vulkan()), o);
  EXPECT_TRUE(fallback_counts().empty());
  EXPECT_LE(max_diff(got, F::conv_transpose2d(x, w, b, o)), 1e-4);
}
