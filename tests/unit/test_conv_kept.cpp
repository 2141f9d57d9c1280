// SPDX-License-Identifier: MIT OR Apache-2.0
// Kept blocked outputs (Note [Kept blocked outputs] in conv_onednn.cpp): a convolution keeps
// oneDNN's blocked form of its output for the next convolution or max pool that reads the same
// bytes. Results are bitwise those with the kept forms off, and any write between the two ops
// (in place, into a reused buffer, through a view or copy_) is seen.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/conv_impl.h"
#include "backends/cpu/onednn.h"
#include "restore_onednn.h"
#include "simd_levels.h"

using namespace kiln;
using Act = nn::FusedConvOptions::Act;
namespace F = nn::functional;

namespace {

/// Puts back whether convolutions keep blocked forms. These tests are about oneDNN's kept forms:
/// the direct kernel, which would take their small convolutions, is off while one runs.
struct RestoreKeep {
  RestoreKeep() { cpu::conv::set_direct(false); }
  ~RestoreKeep() {
    cpu::conv::set_keep_blocked(true);
    cpu::conv::set_direct(true);
  }
};

/// oneDNN's forward convolutions pick 16-channel blocks (AVX-512), so outputs are kept.
bool blocks_of_16() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  return cpu::onednn::enabled() && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

/// a and b bit for bit (NaN where a has NaN).
void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << what << " " << i;
    } else {
      ASSERT_EQ(x[i], y[i]) << what << " " << i;
    }
  }
}

/// A ResNet-style stack: stem conv + batch norm + relu, max pool, a block whose second conv adds
/// the pool's output, a strided block with a 1x1 strided shortcut, and a plain conv, relu and
/// conv (no epilogue).
struct Net {
  nn::Conv2d stem, c1, c2, c3, c4, down, p1, p2;
  nn::BatchNorm2d b0, b1, b2, b3, b4, bd;
  explicit Net(const Device& dev)
      : stem({.in_channels = 3, .out_channels = 16, .kernel_size = 3, .padding = 1, .bias = false}, dev),
        c1({.in_channels = 16, .out_channels = 16, .kernel_size = 3, .padding = 1, .bias = false}, dev),
        c2({.in_channels = 16, .out_channels = 16, .kernel_size = 3, .padding = 1, .bias = false}, dev),
        c3({.in_channels = 16, .out_channels = 32, .kernel_size = 3, .stride = 2, .padding = 1, .bias = false}, dev),
        c4({.in_channels = 32, .out_channels = 32, .kernel_size = 3, .padding = 1, .bias = false}, dev),
        down({.in_channels = 16, .out_channels = 32, .kernel_size = 1, .stride = 2, .bias = false}, dev),
        p1({.in_channels = 32, .out_channels = 32, .kernel_size = 3, .padding = 1}, dev),
        p2({.in_channels = 32, .out_channels = 16, .kernel_size = 3, .padding = 1}, dev),
        b0({.num_features = 16}, dev),
        b1({.num_features = 16}, dev),
        b2({.num_features = 16}, dev),
        b3({.num_features = 32}, dev),
        b4({.num_features = 32}, dev),
        bd({.num_features = 32}, dev) {
    NoGradGuard g;
    for (nn::BatchNorm2d* bn : {&b0, &b1, &b2, &b3, &b4, &bd}) {
      const int64_t c = bn->config.num_features;
      bn->running_mean.copy_(randn({c}, {.device = dev}) * 0.1);
      bn->running_var.copy_(rand({c}, {.device = dev}) + 0.5);
      bn->weight.copy_(randn({c}, {.device = dev}));
      bn->bias.copy_(randn({c}, {.device = dev}));
      bn->eval();
    }
  }
  /// fused_pool: the stem's max pool as conv_bn's option (one op) rather than max_pool2d.
  Tensor forward(const Tensor& x, bool fused_pool) const {
    const nn::FusedConvOptions r{.act = Act::Relu};
    const F::MaxPoolOptions po{.stride = Dims{2, 2}, .padding = Dims{1, 1}};
    Tensor p = fused_pool ? nn::conv_bn(stem, b0, x, {.act = Act::Relu, .pool_kernel_size = 3, .pool = po})
                          : F::max_pool2d(nn::conv_bn(stem, b0, x, r), {3, 3}, po);
    Tensor h = nn::conv_bn(c1, b1, p, r);
    Tensor l1 = nn::conv_bn(c2, b2, h, {.residual = p, .act = Act::Relu});
    Tensor a = nn::conv_bn(c3, b3, l1, r);
    Tensor bb = nn::conv_bn(c4, b4, a);
    Tensor l2 = nn::conv_bn(down, bd, l1, {.residual = bb, .act = Act::Relu});
    return p2(relu(p1(l2)));
  }
};

/// f run with the kept forms on and off, compared bitwise; returns how many inputs were read
/// from kept forms in the run with them on.
int64_t compare_keep(const std::function<Tensor()>& f, const std::string& what) {
  const RestoreKeep restore;
  cpu::conv::set_keep_blocked(false);
  Tensor want = f();
  cpu::conv::set_keep_blocked(true);
  const int64_t before = cpu::conv::kept_reads();
  Tensor got = f();
  got.to_vector<float>();  // runs what the fusion decorator queued
  const int64_t reads = cpu::conv::kept_reads() - before;
  expect_same(want, got, what);
  return reads;
}

/// f on 1 thread and then on 2 (the caller holds a RestoreKeep), compared bitwise; the run on 2 splits `splits`
/// convolutions over one image (Note [One-image split]) where oneDNN blocks by 16 channels. Returns it.
Tensor expect_split_bitwise(const std::function<Tensor()>& f, int64_t splits, const std::string& what) {
  set_num_threads(1);
  Tensor want = f();
  set_num_threads(2);
  const int64_t before = cpu::conv::one_image_splits();
  Tensor got = f();
  got.to_vector<float>();  // runs what the fusion decorator queued
  expect_same(want, got, what);
  if (blocks_of_16()) EXPECT_EQ(cpu::conv::one_image_splits() - before, splits) << what;
  return got;
}

}  // namespace

TEST(ConvKept, StacksMatchTheUnkeptPathBitwise) {
  const test::RestoreOnednnAndThreads restore;
  NoGradGuard no_grad;
  for (bool fused : {true, false}) {
    const Device dev = fused ? Device::cpu() : Device::cpu().without_fusion();
    manual_seed(11);
    Net net(dev);
    for (int64_t batch : {1, 3})
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        // 16 x 16: planes of whole 16-position tiles; 14 x 14: planes of 196, 49 and 16.
        const int64_t side = batch == 1 ? 16 : 14;
        Tensor x = randn({batch, 3, side, side}, {.device = dev});
        {
          NoGradGuard g;
          x.narrow(2, 3, 1).narrow(3, 4, 1).fill_(NAN);  // NaN reaches some outputs, and the pool
        }
        for (bool fused_pool : {false, true}) {
          const std::string what = std::string(fused ? "fused" : "plain") + " b=" + std::to_string(batch) +
                                   " t=" + std::to_string(threads) + (fused_pool ? " conv_bn's pool" : "");
          const int64_t reads = compare_keep([&] { return net.forward(x, fused_pool); }, what);
          // Every conv after the stem, the pool (unless fused) and both residuals read kept
          // forms; a batch split over the threads reads one per chunk of images.
          if (blocks_of_16()) EXPECT_GE(reads, fused_pool ? 8 : 9) << what;
        }
      }
  }
}

TEST(ConvKept, OneImageSplitsOverChannelsBitwise) {
  // One image on 2 threads: convolutions of 262k-16M multiply-adds with 32+ output channels run
  // as one primitive per share of the channels (Note [One-image split]). Their bits are
  // those of one thread: with a residual that has a kept form and one that has not, with a
  // batch norm, relu and NaN.
  const test::RestoreOnednnAndThreads restore;
  const RestoreKeep keep;
  NoGradGuard no_grad;
  manual_seed(3);
  nn::Conv2d a({.in_channels = 16, .out_channels = 64, .kernel_size = 3, .padding = 1});
  nn::Conv2d b({.in_channels = 64, .out_channels = 32, .kernel_size = 3, .padding = 1, .bias = false});
  nn::BatchNorm2d bn({.num_features = 32});
  bn.running_var.copy_(rand({32}) + 0.5);
  bn.weight.copy_(randn({32}));
  bn.bias.copy_(randn({32}));
  bn.eval();
  Tensor x = randn({1, 16, 12, 12}), r = randn({1, 32, 12, 12});
  x.narrow(2, 5, 1).narrow(3, 7, 1).fill_(NAN);
  auto f = [&] {
    Tensor h = relu(a(x));
    Tensor u = nn::conv_bn(b, bn, h, {.residual = r, .act = Act::Relu});  // r: plain only
    Tensor v = nn::conv_bn(b, bn, h, {.residual = u, .act = Act::Relu});  // u: kept
    return cat({u, v}, 1);
  };
  Tensor got = expect_split_bitwise(f, 3, "channels");
  EXPECT_TRUE(got.narrow(2, 5, 1).isnan().any().item<bool>());
  // A batch of one image is what splits; two images split by images instead.
  Tensor x2 = cat({x, x}, 0);
  const int64_t before2 = cpu::conv::one_image_splits();
  Tensor two = relu(a(x2));
  expect_same(relu(a(x)), two.narrow(0, 1, 1), "second image");
  EXPECT_EQ(cpu::conv::one_image_splits() - before2, blocks_of_16() ? 1 : 0);
}

TEST(ConvKept, OneImageSplitsOverRowsBitwise) {
  // One 16-channel block: the shares take output rows, unevenly here (Note [One-image split]):
  // a stem's conv, batch norm, relu and fused max pool, a conv reading the pool's kept form with
  // that as its residual too, and a strided conv. Their bits are those of one thread.
  const test::RestoreOnednnAndThreads restore;
  const RestoreKeep keep;
  NoGradGuard no_grad;
  manual_seed(4);
  nn::Conv2d stem({.in_channels = 3, .out_channels = 16, .kernel_size = 3, .padding = 1, .bias = false});
  nn::Conv2d c({.in_channels = 16, .out_channels = 16, .kernel_size = 3, .padding = 1, .bias = false});
  nn::Conv2d s2({.in_channels = 16, .out_channels = 16, .kernel_size = 3, .stride = 2, .padding = 1});
  nn::BatchNorm2d b0({.num_features = 16}), b1({.num_features = 16});
  for (nn::BatchNorm2d* bn : {&b0, &b1}) {
    bn->running_var.copy_(rand({16}) + 0.5);
    bn->weight.copy_(randn({16}));
    bn->bias.copy_(randn({16}));
    bn->eval();
  }
  Tensor x = randn({1, 3, 64, 62});
  x.narrow(2, 31, 1).narrow(3, 9, 1).fill_(NAN);  // on the rows where the shares meet
  const F::MaxPoolOptions po{.stride = Dims{2, 2}, .padding = Dims{1, 1}};
  auto f = [&] {
    Tensor p = nn::conv_bn(stem, b0, x, {.act = Act::Relu, .pool_kernel_size = 3, .pool = po});
    Tensor h = nn::conv_bn(c, b1, p, {.residual = p, .act = Act::Relu});
    return cat({p.flatten(), h.flatten(), s2(h).flatten()}, 0);
  };
  EXPECT_TRUE(expect_split_bitwise(f, 3, "rows").isnan().any().item<bool>());
}

TEST(ConvKept, WritesBetweenTheOpsAreSeen) {
  const test::RestoreOnednnAndThreads restore;
  set_num_threads(1);
  NoGradGuard no_grad;
  for (bool fused : {true, false}) {
    const Device dev = fused ? Device::cpu() : Device::cpu().without_fusion();
    manual_seed(5);
    nn::Conv2d a({.in_channels = 16, .out_channels = 16, .kernel_size = 3, .padding = 1}, dev);
    nn::Conv2d b({.in_channels = 16, .out_channels = 32, .kernel_size = 3, .padding = 1}, dev);
    const Tensor x = randn({2, 16, 8, 8}, {.device = dev});
    const Tensor other = randn({2, 16, 8, 8}, {.device = dev});
    auto pool = [](const Tensor& t) { return F::max_pool2d(t, {3, 3}, {.stride = Dims{2, 2}, .padding = Dims{1, 1}}); };
    const std::vector<std::pair<std::string, std::function<Tensor()>>> cases = {
        {"read as is", [&] { return b(a(x)); }},
        {"add_ in place",
         [&] {
           Tensor y = a(x);
           y.add_(1.0);
           return b(y);
         }},
        {"written through a view",
         [&] {
           Tensor y = a(x);
           y.narrow(1, 2, 3).mul_(-2.0);
           return b(y);
         }},
        {"copy_ into it",
         [&] {
           Tensor y = a(x);
           y.copy_(other);
           return b(y);
         }},
        {"a reused buffer", [&] { return b(a(x) + 1.0); }},  // the sum writes into the conv's buffer
        {"a reshaped view",
         [&] {
           return b(a(x).reshape({2, 16, 64}).reshape({2, 16, 8, 8}));
         }},
        {"a transposed view", [&] { return b(a(x).transpose(2, 3)); }},
        {"one image of the batch", [&] { return b(a(x).narrow(0, 1, 1)); }},
        {"pooled after a write",
         [&] {
           Tensor y = a(x);
           y.mul_(3.0);
           return pool(y);
         }},
        {"pooled with ceil mode",
         [&] {
           return F::max_pool2d(a(x), {3, 3}, {.stride = Dims{2, 2}, .padding = Dims{1, 1}, .ceil_mode = true});
         }},
        {"pooled with dilation",
         [&] {
           return F::max_pool2d(a(x), {3, 3}, {.stride = Dims{2, 2}, .padding = Dims{1, 1}, .dilation = Dims{2, 2}});
         }},
        {"pooled, then a conv", [&] { return b(pool(a(x))); }},
    };
    for (const auto& [name, f] : cases) compare_keep(f, name + (fused ? " fused" : " plain"));
    // The pool's indices are those of the plain pool.
    Tensor y = a(x);
    auto [v, i] = F::max_pool2d_with_indices(y, {3, 3}, {.stride = Dims{2, 2}, .padding = Dims{1, 1}});
    expect_same(pool(y), v, "with indices");
  }
}

// The blocked-to-plain copy (unblock16_f32) and the epilogue that writes both layouts
// (post_blocked16_f32 with a plain output) against index arithmetic, at every SIMD level: planes
// of whole 16-position tiles and of partial ones, block ranges that start past 0.
TEST(ConvKept, UnblockMatchesIndexArithmetic) {
  auto cases = [] {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    for (int64_t plane : {1, 5, 16, 17, 49, 64, 196})
      for (int64_t cblocks : {1, 3}) {
        const int64_t N = 2, blocks = N * cblocks, C = cblocks * 16, n = blocks * plane * 16;
        std::vector<float> y(static_cast<size_t>(n)), r(y.size()), s(static_cast<size_t>(C)), t(s.size());
        for (auto* v : {&y, &r, &s, &t})
          for (float& e : *v) e = u(rng);
        y[3] = NAN;
        const int64_t b0 = 1, b1 = blocks;  // block 0 is left alone
        // unblock16_f32: plain[(b * 16 + j) * plane + i] = y[(b * plane + i) * 16 + j].
        std::vector<float> plain(y.size(), -7.f);
        cpu::conv::unblock16_f32(y.data(), b0, b1, plane, plain.data());
        for (int64_t b = 0; b < blocks; ++b)
          for (int64_t j = 0; j < 16; ++j)
            for (int64_t i = 0; i < plane; ++i) {
              const float got = plain[static_cast<size_t>((b * 16 + j) * plane + i)];
              const float want = b < b0 ? -7.f : y[static_cast<size_t>((b * plane + i) * 16 + j)];
              if (std::isnan(want))
                ASSERT_TRUE(std::isnan(got));
              else
                ASSERT_EQ(got, want) << "plane " << plane << " block " << b << " channel " << j << " at " << i;
            }
        // The epilogue with a plain output: the blocked result is the one without it, and the
        // plain one its copy.
        std::vector<float> want_y = y, got_y = y, got_plain(y.size(), -7.f), want_plain(y.size(), -7.f);
        cpu::conv::post_blocked16_f32(want_y.data(), r.data(), b0, b1, plane, cblocks, s.data(), t.data(), 0.f, 6.f);
        cpu::conv::post_blocked16_f32(got_y.data(), r.data(), b0, b1, plane, cblocks, s.data(), t.data(), 0.f, 6.f,
                                      got_plain.data());
        cpu::conv::unblock16_f32(want_y.data(), b0, b1, plane, want_plain.data());
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_TRUE(std::memcmp(&want_y[i], &got_y[i], 4) == 0) << "plane " << plane << " at " << i;
          ASSERT_TRUE(std::memcmp(&want_plain[i], &got_plain[i], 4) == 0) << "plane " << plane << " at " << i;
        }
      }
  };
  test::at_every_simd_level(cases);
}

// The epilogue over many planes in one call (post_planes_f32: per-channel scale and shift,
// residual, clamp) against the scalar steps, each rounded, at every SIMD level: planes shorter
// than a vector, with a partial last vector, and of whole vectors; NaN passes the clamp.
TEST(ConvKept, EpilogueOverPlanesMatchesScalarSteps) {
  test::at_every_simd_level([] {
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-3.f, 3.f);
    for (int64_t plane : {1, 3, 16, 17, 49})
      for (int mask = 0; mask < 8; ++mask) {
        const bool with_s = mask & 1, with_t = mask & 2, with_r = mask & 4;
        const int64_t C = 5, planes = 2 * C, n = planes * plane;
        std::vector<float> y(static_cast<size_t>(n)), r(y.size()), s(static_cast<size_t>(C)), t(s.size());
        for (auto* v : {&y, &r, &s, &t})
          for (float& e : *v) e = u(rng);
        y[1] = NAN;
        std::vector<float> got = y;
        const int64_t p0 = 1, p1 = planes - 1;  // planes outside [p0, p1) are left alone
        cpu::conv::post_planes_f32(got.data(), with_r ? r.data() : nullptr, p0, p1, C, plane,
                                   with_s ? s.data() : nullptr, with_t ? t.data() : nullptr, -1.f, 2.f);
        for (int64_t p = 0; p < planes; ++p)
          for (int64_t i = 0; i < plane; ++i) {
            const size_t k = static_cast<size_t>(p * plane + i);
            volatile float v = y[k];  // each step rounded to float
            if (p >= p0 && p < p1) {
              if (with_s) v = v * s[static_cast<size_t>(p % C)];
              if (with_t) v = v + t[static_cast<size_t>(p % C)];
              if (with_r) v = v + r[k];
              v = v < -1.f ? -1.f : (v > 2.f ? 2.f : v);
            }
            const float want = v;
            ASSERT_TRUE(std::memcmp(&want, &got[k], 4) == 0 || (std::isnan(want) && std::isnan(got[k])))
                << "plane " << plane << " mask " << mask << " at " << k << ": " << got[k] << " vs " << want;
          }
      }
  });
}
