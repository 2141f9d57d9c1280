// SPDX-License-Identifier: MIT OR Apache-2.0
// The direct convolution kernel (Note [Direct convolution] in conv_direct.cpp): every tile shape,
// padding edge, stride and epilogue against a plain loop summing in double, on 1 and 2 threads;
// the shapes it declines; and conv2d through it against oneDNN and the portable path, weights
// written between calls included.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/conv_impl.h"
#include "restore_onednn.h"

using namespace kiln;
using cpu::conv::Geom;
using cpu::conv::PostOp;
namespace F = nn::functional;

namespace {

struct Case {
  int64_t N, C, O, H, W, KH, KW, SH, SW, PH, PW;
};

Geom geom_of(const Case& c) {
  Geom g;
  g.nsp = 2;
  g.N = c.N, g.C = c.C, g.O = c.O;
  g.in[1] = c.H, g.in[2] = c.W, g.k[1] = c.KH, g.k[2] = c.KW;
  g.stride[1] = c.SH, g.stride[2] = c.SW, g.pad[1] = c.PH, g.pad[2] = c.PW;
  g.out[1] = (c.H + 2 * c.PH - c.KH) / c.SH + 1;
  g.out[2] = (c.W + 2 * c.PW - c.KW) / c.SW + 1;
  return g;
}

std::string name_of(const Case& c) {
  return "N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " O" + std::to_string(c.O) + " " +
         std::to_string(c.H) + "x" + std::to_string(c.W) + " k" + std::to_string(c.KH) + "x" + std::to_string(c.KW) +
         " s" + std::to_string(c.SH) + "," + std::to_string(c.SW) + " p" + std::to_string(c.PH) + "," +
         std::to_string(c.PW);
}

/// post(conv(x, w) + b) by plain loops, the sum in double, then the epilogue's steps in float.
std::vector<float> reference(const Geom& g, const std::vector<float>& x, const std::vector<float>& w, const float* b,
                             const PostOp& post) {
  const int64_t OH = g.out[1], OW = g.out[2], plane = OH * OW;
  std::vector<float> y(static_cast<size_t>(g.N * g.O * plane));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t kh = 0; kh < g.k[1]; ++kh)
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t ih = oh * g.stride[1] - g.pad[1] + kh, iw = ow * g.stride[2] - g.pad[2] + kw;
                if (ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
                acc += double(x[static_cast<size_t>(((n * g.C + c) * g.in[1] + ih) * g.in[2] + iw)]) *
                       w[static_cast<size_t>(((o * g.C + c) * g.k[1] + kh) * g.k[2] + kw)];
              }
          const size_t at = static_cast<size_t>((n * g.O + o) * plane + oh * OW + ow);
          float v = static_cast<float>(acc + (b ? b[o] : 0.0));
          if (post.scale) v = v * post.scale[o];
          if (post.shift) v = v + post.shift[o];
          if (post.residual) v = v + post.residual[at];
          if (post.kind == PostOp::Relu) v = v < 0 ? 0 : v;
          if (post.kind == PostOp::Clip) v = v < post.lo ? post.lo : (v > post.hi ? post.hi : v);
          y[at] = v;
        }
  return y;
}

std::vector<float> random_vec(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = u(rng);
  return v;
}

/// Runs case c through direct_forward with an epilogue drawn from rng and compares with the
/// reference; false when the kernel declines it.
bool check_case(const Case& c, std::mt19937& rng) {
  const Geom g = geom_of(c);
  if (!cpu::conv::direct_applies(g)) return false;
  const int64_t plane = g.out_size();
  const auto x = random_vec(rng, g.N * g.C * g.in_size()), w = random_vec(rng, g.O * g.C * g.k_size());
  const auto b = random_vec(rng, g.O), s = random_vec(rng, g.O), t = random_vec(rng, g.O);
  const auto r = random_vec(rng, g.N * g.O * plane);
  const unsigned pick = rng();
  PostOp post;
  post.kind = static_cast<int>(pick % 3);
  post.lo = -0.5f, post.hi = 0.75f;
  if (pick & 4) post.scale = s.data();
  if (pick & 8) post.shift = t.data();
  if (pick & 16) post.residual = r.data();
  const float* bias = (pick & 32) ? b.data() : nullptr;
  const auto want = reference(g, x, w, bias, post);
  std::vector<float> got(want.size(), NAN);
  EXPECT_TRUE(cpu::conv::direct_forward(g, x.data(), w.data(), bias, got.data(), post, 0));
  const double tol = 1e-5 * double(g.C * g.k_size()) + 1e-5;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= tol)) {
      ADD_FAILURE() << name_of(c) << " post " << pick % 64 << " at " << i << ": " << got[i] << " want " << want[i];
      break;
    }
  return true;
}

}  // namespace

TEST(ConvDirect, EveryTileAndEdgeMatchesPlainLoops) {
  if (!cpu::conv::direct_available()) GTEST_SKIP() << "no 16-lane f32 kernel on this CPU";
  const test::RestoreOnednnAndThreads restore;
  std::mt19937 rng(7);
  int ran = 0;
  // Widths cover the whole-row tiles (widths 1-8) and their remainder rows, the row tiles of 8
  // and 16 and the last tile moved back over its neighbour; kernels and strides each kernel.
  const int64_t widths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 15, 16, 17, 28, 31, 33};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t W : widths)
      for (int64_t KW : {1, 3})
        for (int64_t SW : {1, 2})
          for (int64_t PW : {0, 1}) {
            const int64_t KH = (rng() % 2) ? KW : 1 + 2 * static_cast<int64_t>(rng() % 3);
            const int64_t SH = 1 + static_cast<int64_t>(rng() % 2), PH = static_cast<int64_t>(rng() % KH);
            const int64_t H = std::max<int64_t>(KH - 2 * PH, 1) + 4 + static_cast<int64_t>(rng() % 16);
            const int64_t C = 1 + static_cast<int64_t>(rng() % 20), O = 16 * (1 + static_cast<int64_t>(rng() % 3));
            const int64_t N = 1 + static_cast<int64_t>(rng() % 2);
            if (W + 2 * PW < KW) continue;
            ran += check_case({N, C, O, H, W, KH, KW, SH, SW, PH, PW}, rng);
          }
  }
  EXPECT_GE(ran, 120);  // most cases are ones the kernel takes
  // ResNet's shapes (batch 1), each taken.
  const Case resnet[] = {{1, 3, 16, 32, 32, 3, 3, 1, 1, 1, 1},  {1, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1},
                         {1, 16, 32, 16, 16, 3, 3, 2, 2, 1, 1}, {1, 32, 32, 8, 8, 3, 3, 1, 1, 1, 1},
                         {1, 16, 32, 16, 16, 1, 1, 2, 2, 0, 0}, {1, 64, 64, 4, 4, 3, 3, 1, 1, 1, 1}};
  for (const Case& c : resnet) EXPECT_TRUE(check_case(c, rng)) << name_of(c);
}

TEST(ConvDirect, DeclinesWhatItDoesNotCover) {
  const Case ok{1, 8, 32, 8, 8, 3, 3, 1, 1, 1, 1};
  if (!cpu::conv::direct_available()) GTEST_SKIP() << "no 16-lane f32 kernel on this CPU";
  EXPECT_TRUE(cpu::conv::direct_applies(geom_of(ok)));
  auto declines = [&](auto edit, const char* what) {
    Geom g = geom_of(ok);
    edit(g);
    EXPECT_FALSE(cpu::conv::direct_applies(g)) << what;
  };
  declines([](Geom& g) { g.groups = 2; }, "groups");
  declines([](Geom& g) { g.dil[2] = 2; }, "dilation");
  declines([](Geom& g) { g.O = 24; }, "channels not a multiple of 16");
  declines([](Geom& g) { g.k[2] = 5; }, "kernel width 5");
  declines([](Geom& g) { g.stride[2] = 3; }, "width stride 3");
  declines([](Geom& g) { g.pad[2] = 2, g.out[2] = 10; }, "two padding columns");
  declines([](Geom& g) { g.nsp = 3; }, "3-d");
  declines([](Geom& g) { g.in[1] = g.in[2] = g.out[1] = g.out[2] = 3; }, "fewer than 16 output positions");
  declines([](Geom& g) { g.k[1] = g.k[2] = 1, g.pad[1] = g.pad[2] = 0; }, "1x1 stride 1: a matrix product");
  declines([](Geom& g) { g.in[1] = g.in[2] = 512, g.out[1] = g.out[2] = 512, g.C = 64; }, "large image");
  cpu::conv::set_direct(false);
  EXPECT_FALSE(cpu::conv::direct_applies(geom_of(ok))) << "turned off";
  cpu::conv::set_direct(true);
}

TEST(ConvDirect, Conv2dMatchesOnednnAndPortablePathAndSeesWeightWrites) {
  if (!cpu::conv::direct_available()) GTEST_SKIP() << "no 16-lane f32 kernel on this CPU";
  const test::RestoreOnednnAndThreads restore;
  manual_seed(3);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t batch : {1, 3}) {
      Tensor x = randn({batch, 16, 16, 16}), w = randn({32, 16, 3, 3}), b = randn({32});
      F::ConvOptions o;
      o.stride = {2, 2};
      o.padding = {1, 1};
      auto run = [&](bool direct, bool onednn) {
        cpu::conv::set_direct(direct);
        cpu::onednn::set_enabled(onednn);
        Tensor y = relu(F::conv2d(x, w, b, o));
        y.to_vector<float>();
        cpu::conv::set_direct(true);
        cpu::onednn::set_enabled(true);
        return y;
      };
      for (int pass = 0; pass < 3; ++pass) {  // the packed weights are kept from the second call
        Tensor got = run(true, true);
        EXPECT_TRUE(got.allclose(run(false, true), 1e-4, 1e-4)) << "vs oneDNN, pass " << pass;
        EXPECT_TRUE(got.allclose(run(false, false), 1e-4, 1e-4)) << "vs the portable path, pass " << pass;
      }
      w.mul_(-0.5);  // a write between calls: the kept packing must not be reused
      Tensor got = run(true, true);
      EXPECT_TRUE(got.allclose(run(false, false), 1e-4, 1e-4)) << "after writing the weights";
    }
  }
}

TEST(ConvDirect, FusedMaxPoolIsThePlainPoolBitwise) {
  // conv_bn with its max pool as one op (the direct kernel's blocked output pooled by 16-channel
  // blocks) against conv_bn then max_pool2d (the plain output pooled), bit for bit: with NaN, odd
  // sizes, both pool shapes ResNet-style stems use, on 1 and 2 threads and 1 and 3 images.
  if (!cpu::conv::direct_available()) GTEST_SKIP() << "no 16-lane f32 kernel on this CPU";
  const test::RestoreOnednnAndThreads restore;
  NoGradGuard no_grad;
  manual_seed(5);
  using Act = nn::FusedConvOptions::Act;
  for (int64_t O : {16, 32})
    for (int64_t H : {32, 15}) {
      nn::Conv2d conv({.in_channels = 3, .out_channels = O, .kernel_size = 3, .padding = 1, .bias = false});
      nn::BatchNorm2d bn({.num_features = O});
      bn.running_var.copy_(rand({O}) + 0.5);
      bn.weight.copy_(randn({O}));
      bn.bias.copy_(randn({O}));
      bn.eval();
      for (int64_t batch : {1, 3})
        for (int threads : {1, 2})
          for (int64_t k : {2, 3}) {
            set_num_threads(threads);
            Tensor x = randn({batch, 3, H, H + 1});
            x.narrow(2, 4, 1).narrow(3, 6, 1).fill_(NAN);
            const F::MaxPoolOptions po{.stride = Dims{2, 2}, .padding = Dims{k / 2, k / 2}};
            Tensor fused = nn::conv_bn(conv, bn, x, {.act = Act::Relu, .pool_kernel_size = k, .pool = po});
            Tensor plain = F::max_pool2d(nn::conv_bn(conv, bn, x, {.act = Act::Relu}), {k, k}, po);
            ASSERT_EQ(fused.shape(), plain.shape());
            const auto a = fused.to_vector<float>(), b = plain.to_vector<float>();
            size_t nans = 0;
            for (size_t i = 0; i < a.size(); ++i) {
              if (std::isnan(b[i])) {
                EXPECT_TRUE(std::isnan(a[i])) << i;
                ++nans;
              } else {
                ASSERT_EQ(a[i], b[i]) << "O" << O << " H" << H << " k" << k << " t" << threads << " at " << i;
              }
            }
            EXPECT_GT(nans, 0u);  // the NaN reached the pooled output
          }
    }
}
