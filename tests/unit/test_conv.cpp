// SPDX-License-Identifier: MIT OR Apache-2.0
// Convolutions: errors, naive-loop references, adjoint identities of the gradients, the oneDNN
// and portable paths against each other, and thread-count independence.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn/functional/conv.h>

#include <cmath>
#include <vector>

#include "backends/cpu/onednn.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::with_threads;
namespace F = kiln::nn::functional;
namespace G = kiln::nn::grad;

namespace {

/// Runs f with the oneDNN path on or off, restoring the setting.
template <class Fn>
auto with_onednn(bool on, Fn&& f) {
  struct Restore {
    bool saved = cpu::onednn::enabled();
    ~Restore() { cpu::onednn::set_enabled(saved); }
  } restore;
  cpu::onednn::set_enabled(on);
  return f();
}

Tensor rnd(const Shape& s, DType dt = f32, uint64_t seed = 1) {
  manual_seed(seed);
  return randn(s, {.dtype = dt});
}

/// Naive f64 conv2d: x [N, C, H, W], w [O, C/g, kh, kw].
std::vector<double> naive_conv2d(const Tensor& xt, const Tensor& wt, const Tensor& bt, int64_t sh, int64_t sw,
                                 int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups, Shape& out) {
  auto x = xt.to(f64).to_vector<double>(), w = wt.to(f64).to_vector<double>();
  std::vector<double> b = bt.defined() ? bt.to(f64).to_vector<double>() : std::vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t O = wt.size(0), Cg = wt.size(1), KH = wt.size(2), KW = wt.size(3), Og = O / groups;
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  out = {N, O, OH, OW};
  std::vector<double> y(static_cast<size_t>(N * O * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = b.empty() ? 0 : b[static_cast<size_t>(o)];
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj) {
                const int64_t ih = i * sh - ph + ki * dh, iw = j * sw - pw + kj * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x[static_cast<size_t>(((n * C + g * Cg + c) * H + ih) * W + iw)] *
                     w[static_cast<size_t>(((o * Cg + c) * KH + ki) * KW + kj)];
              }
          y[static_cast<size_t>(((n * O + o) * OH + i) * OW + j)] = s;
        }
  return y;
}

double max_rel_err(const Tensor& got, const std::vector<double>& want) {
  auto g = got.to(f64).to_vector<double>();
  EXPECT_EQ(g.size(), want.size());
  double scale = 1e-30, err = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < std::min(g.size(), want.size()); ++i) err = std::max(err, std::abs(g[i] - want[i]));
  return err / scale;
}

double dot64(const Tensor& a, const Tensor& b) { return (a.to(f64) * b.to(f64)).sum().item<double>(); }

}  // namespace

TEST(Conv, Errors) {
  Tensor x = rnd({2, 3, 8, 8}), w = rnd({4, 3, 3, 3});
  expect_error([&] { F::conv2d(x, rnd({4, 2, 3, 3})); }, "conv2d", "expected input[2, 3, 8, 8] to have 2 channels");
  expect_error(
      [&] {
        F::conv2d(x, rnd({4, 1, 3, 3}), {}, {.groups = 3});
      },
      "conv2d", "expected weight to be divisible by 3");
  expect_error([&] { F::conv2d(x, w, {}, {.groups = 0}); }, "conv2d", "groups");
  expect_error([&] { F::conv2d(rnd({1, 3, 2, 2}), w); }, "conv2d", "Kernel size can't be greater");
  expect_error([&] { F::conv2d(x, w, {}, {.dilation = 5}); }, "conv2d", "(11 x 11)");
  expect_error([&] { F::conv2d(x, w, rnd({5})); }, "conv2d", "bias");
  expect_error([&] { F::conv2d(x, w, {}, {.stride = 2, .padding = "same"}); }, "conv2d", "strided");
  expect_error([&] { F::conv2d(x, w, {}, {.padding = "full"}); }, "conv2d", "Invalid padding string");
  expect_error([&] { F::conv2d(x, w, {}, {.padding = -1}); }, "conv2d", "negative padding");
  expect_error([&] { F::conv2d(x, w, {}, {.stride = {1, 2, 3}}); }, "conv2d", "stride");
  expect_error([&] { F::conv2d(rnd({8, 8}), w); }, "conv2d", "3D (unbatched) or 4D (batched)");
  expect_error([&] { F::conv2d(x, rnd({4, 3, 3})); }, "conv2d", "weight");
  expect_error([&] { F::conv2d(x.to(f64), w); }, "conv2d", "should be the same");
  expect_error([&] { F::conv2d(x.to(i32), w.to(i32)); }, "conv2d", "floating-point");
  expect_error([&] { F::conv1d(rnd({1, 3, 8}), rnd({4, 3, 3}), {}, {.stride = 0}); }, "conv1d", "stride");
  expect_error([&] { F::conv3d(rnd({1, 3, 4, 4, 4}), rnd({4, 2, 3, 3, 3})); }, "conv3d", "channels");

  Tensor wt = rnd({3, 2, 3, 3});
  expect_error([&] { F::conv_transpose2d(x, wt, {}, {.output_padding = 1}); }, "conv_transpose2d",
               "output padding must be smaller than either stride or dilation");
  expect_error([&] { F::conv_transpose2d(x, rnd({4, 2, 3, 3})); }, "conv_transpose2d", "to have 4 channels");
  expect_error([&] { F::conv_transpose2d(x, wt, {}, {.groups = 2}); }, "conv_transpose2d", "divisible by 2");
  expect_error([&] { F::conv_transpose2d(x, wt, rnd({3})); }, "conv_transpose2d", "bias");
  expect_error(
      [&] {
        F::conv_transpose2d(rnd({1, 3, 1, 1}), wt, {}, {.padding = 2});
      },
      "conv_transpose2d", "Output size is too small");

  expect_error([&] { F::unfold(rnd({2, 3, 4}).unsqueeze(0).unsqueeze(0), 2); }, "unfold", "4-D");
  expect_error([&] { F::unfold(rnd({1, 1, 2, 2}), 3); }, "unfold", "sliding blocks");
  expect_error([&] { F::fold(rnd({1, 5, 9}), {4, 4}, 2); }, "fold", "divisible by the product of kernel_size");
  expect_error([&] { F::fold(rnd({1, 4, 8}), {4, 4}, 2); }, "fold", "number of sliding blocks");
  expect_error([&] { G::conv2d_weight(x, {4, 3, 3, 3}, rnd({2, 4, 5, 5})); }, "conv2d_weight", "does not match");
}

TEST(Conv, MatchesNaiveLoops) {
  struct C {
    Shape x, w;
    int64_t s0, s1, p0, p1, d0, d1, g;
  };
  const C cases[] = {{{2, 3, 9, 8}, {4, 3, 3, 3}, 1, 1, 0, 0, 1, 1, 1},
                     {{2, 4, 9, 10}, {6, 2, 3, 2}, 2, 1, 1, 2, 2, 1, 2},
                     {{1, 6, 7, 7}, {6, 1, 3, 3}, 2, 2, 1, 1, 1, 1, 6},
                     {{2, 8, 5, 6}, {4, 8, 1, 1}, 1, 1, 0, 0, 1, 1, 1},
                     {{3, 16, 12, 12}, {32, 16, 3, 3}, 1, 1, 1, 1, 1, 1, 1}};
  for (bool dnn : {true, false})
    for (const C& c : cases) {
      Tensor x = rnd(c.x, f32, 3), w = rnd(c.w, f32, 4), b = rnd({c.w[0]}, f32, 5);
      Shape os;
      auto want = naive_conv2d(x, w, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, c.g, os);
      Tensor y = with_onednn(dnn, [&] {
        return F::conv2d(x, w, b,
                         {.stride = {c.s0, c.s1}, .padding = {c.p0, c.p1}, .dilation = {c.d0, c.d1}, .groups = c.g});
      });
      ASSERT_EQ(y.shape(), os);
      EXPECT_LT(max_rel_err(y, want), 1e-5) << "onednn=" << dnn << " x " << to_string(c.x) << " w " << to_string(c.w);
      Tensor y64 =
          F::conv2d(x.to(f64), w.to(f64), b.to(f64),
                    {.stride = {c.s0, c.s1}, .padding = {c.p0, c.p1}, .dilation = {c.d0, c.d1}, .groups = c.g});
      EXPECT_LT(max_rel_err(y64, want), 1e-12);
    }
}

TEST(Conv, DepthwiseThreeByThreeMatchesNaiveLoops) {
  // MobileNet's depthwise convolutions on the oneDNN path: strides 1 and 2, padding 0 and 1,
  // planes narrower and wider than a vector, odd sizes, batches, a problem large enough to split
  // over the threads; bitwise the same at 1 and 2 threads, NaN where the portable path has it.
  struct C {
    Shape x;
    int64_t s, p;
  };
  const C cases[] = {{{1, 8, 16, 16}, 1, 1}, {{1, 72, 8, 8}, 2, 1}, {{2, 5, 7, 9}, 1, 0},   {{3, 4, 9, 6}, 2, 0},
                     {{1, 3, 1, 1}, 1, 1},   {{1, 2, 2, 3}, 2, 1},  {{1, 6, 33, 19}, 2, 1}, {{4, 64, 32, 32}, 1, 1}};
  for (const C& c : cases)
    for (bool bias : {true, false}) {
      const int64_t ch = c.x[1];
      Tensor x = rnd(c.x, f32, 41), w = rnd({ch, 1, 3, 3}, f32, 42), b = bias ? rnd({ch}, f32, 43) : Tensor{};
      Shape os;
      auto want = naive_conv2d(x, w, b, c.s, c.s, c.p, c.p, 1, 1, ch, os);
      F::ConvOptions o{.stride = c.s, .padding = c.p, .groups = ch};
      auto run = [&] { return with_onednn(true, [&] { return F::conv2d(x, w, b, o); }); };
      Tensor y1 = with_threads(1, run), y2 = with_threads(2, run);
      ASSERT_EQ(y1.shape(), os);
      EXPECT_LT(max_rel_err(y1, want), 1e-5) << to_string(c.x) << " s=" << c.s << " p=" << c.p << " bias=" << bias;
      EXPECT_TRUE(equal(y1, y2)) << to_string(c.x);
      // A transposed (non-contiguous) input and NaN / inf reach the same outputs as in the loops.
      Tensor xt = x.transpose(2, 3).contiguous().transpose(2, 3);
      {
        NoGradGuard g;
        xt.narrow(2, 0, 1).narrow(3, 0, 1).fill_(NAN);
      }
      Tensor yn = with_onednn(true, [&] { return F::conv2d(xt, w, b, o); });
      Tensor yp = with_onednn(false, [&] { return F::conv2d(xt, w, b, o); });
      EXPECT_TRUE(allclose(yn, yp, 1e-4, 1e-5, /*equal_nan=*/true)) << to_string(c.x);
    }
}

TEST(Conv, GradientsAreAdjoints) {
  // <conv(x, w), g> = <x, conv_input(g, w)> = <w, conv_weight(x, g)>, in f64.
  struct C {
    Shape x, w;
    int64_t s, p, d, g;
  };
  const C cases[] = {{{2, 4, 9, 8}, {6, 2, 3, 3}, 2, 1, 1, 2},
                     {{3, 3, 7, 7}, {5, 3, 2, 3}, 1, 0, 2, 1},
                     {{2, 4, 6, 6}, {4, 1, 3, 3}, 1, 1, 1, 4},
                     {{2, 8, 5, 5}, {3, 8, 1, 1}, 1, 0, 1, 1},
                     {{9, 2, 6, 5}, {3, 2, 3, 2}, 3, 2, 1, 1}};
  for (bool dnn : {true, false})
    for (DType dt : {f64, f32}) {
      for (const C& c : cases) {
        with_onednn(dnn, [&] {
          Tensor x = rnd(c.x, dt, 7), w = rnd(c.w, dt, 8);
          G::ConvGradOptions o{.stride = c.s, .padding = c.p, .dilation = c.d, .groups = c.g};
          Tensor y = F::conv2d(x, w, {}, {.stride = c.s, .padding = c.p, .dilation = c.d, .groups = c.g});
          Tensor g = rnd(y.shape(), dt, 9);
          Tensor gx = G::conv2d_input(x.shape(), w, g, o);
          Tensor gw = G::conv2d_weight(x, w.shape(), g, o);
          const double lhs = dot64(y, g), tol = dt == f64 ? 1e-10 : 1e-4;
          EXPECT_NEAR(dot64(x, gx), lhs, tol * (1 + std::abs(lhs))) << to_string(c.x) << " " << to_string(c.w);
          EXPECT_NEAR(dot64(w, gw), lhs, tol * (1 + std::abs(lhs))) << to_string(c.x) << " " << to_string(c.w);
          return 0;
        });
      }
    }
}

TEST(Conv, OneDnnAndPortableAgree) {
  // MNIST- and ResNet-like shapes plus 1-d/3-d, grouped and strided ones.
  struct C {
    Shape x, w;
    int64_t s, p, d, g;
  };
  const C cases[] = {{{4, 1, 28, 28}, {32, 1, 3, 3}, 1, 0, 1, 1},   {{2, 32, 26, 26}, {64, 32, 3, 3}, 1, 0, 1, 1},
                     {{1, 64, 20, 20}, {64, 64, 3, 3}, 1, 1, 1, 1}, {{2, 64, 14, 14}, {96, 64, 1, 1}, 1, 0, 1, 1},
                     {{2, 32, 15, 15}, {32, 8, 3, 3}, 2, 1, 2, 4},  {{2, 16, 9, 9}, {16, 1, 5, 5}, 1, 2, 1, 16}};
  for (const C& c : cases) {
    Tensor x = rnd(c.x, f32, 11), w = rnd(c.w, f32, 12), b = rnd({c.w[0]}, f32, 13);
    F::ConvOptions o{.stride = c.s, .padding = c.p, .dilation = c.d, .groups = c.g};
    G::ConvGradOptions go{.stride = c.s, .padding = c.p, .dilation = c.d, .groups = c.g};
    auto run = [&] {
      Tensor y = F::conv2d(x, w, b, o);
      Tensor g = rnd(y.shape(), f32, 14);
      return std::vector<Tensor>{y, G::conv2d_input(x.shape(), w, g, go), G::conv2d_weight(x, w.shape(), g, go)};
    };
    auto a = with_onednn(true, run), p = with_onednn(false, run);
    for (size_t i = 0; i < a.size(); ++i) {
      double scale = a[i].abs().amax().item<double>();
      EXPECT_TRUE(allclose(a[i], p[i], 1e-4, 1e-5 * scale))
          << "output " << i << " x " << to_string(c.x) << " w " << to_string(c.w);
    }
  }
  // 1-d and 3-d (the 3-d case is large enough to tile the column matrix).
  Tensor x1 = rnd({2, 8, 50}, f32, 1), w1 = rnd({12, 4, 5}, f32, 2);
  auto c1 = [&] { return F::conv1d(x1, w1, {}, {.stride = 2, .padding = 3, .dilation = 2, .groups = 2}); };
  EXPECT_TRUE(allclose(with_onednn(true, c1), with_onednn(false, c1), 1e-4, 1e-4));
  Tensor x3 = rnd({1, 4, 34, 34, 34}, f32, 3), w3 = rnd({4, 4, 3, 3, 3}, f32, 4);
  auto c3 = [&] { return F::conv3d(x3, w3, {}, {.padding = 1}); };
  EXPECT_TRUE(allclose(with_onednn(true, c3), with_onednn(false, c3), 1e-4, 1e-4));
  auto t3 = [&] { return F::conv_transpose3d(x3, w3, {}, {.stride = 2, .output_padding = 1}); };
  EXPECT_TRUE(allclose(with_onednn(true, t3), with_onednn(false, t3), 1e-4, 1e-4));
}

TEST(Conv, PortableThreadCountIndependent) {
  with_onednn(false, [&] {
    for (int64_t N : {1, 5}) {
      Tensor x = rnd({N, 16, 30, 30}, f32, 21), w = rnd({24, 8, 3, 3}, f32, 22), b = rnd({24}, f32, 23);
      auto run = [&] {
        Tensor y = F::conv2d(x, w, b, {.padding = 1, .groups = 2});
        Tensor gx = G::conv2d_input(x.shape(), w, y, {.padding = 1, .groups = 2});
        Tensor gw = G::conv2d_weight(x, w.shape(), y, {.padding = 1, .groups = 2});
        return std::vector<Tensor>{y, gx, gw};
      };
      auto a = with_threads(1, run), b2 = with_threads(2, run);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(equal(a[i], b2[i])) << "N=" << N << " output " << i;
    }
    return 0;
  });
}

TEST(Conv, OneDnnForwardThreadCountIndependent) {
  // Forward and backward-data reduce inside one thread in oneDNN, so they do not depend on the
  // thread count; backward-weights may split the batch reduction across threads (then only
  // close), which the portable path avoids.
  with_onednn(true, [&] {
    Tensor x = rnd({4, 32, 26, 26}, f32, 31), w = rnd({64, 32, 3, 3}, f32, 32);
    auto run = [&] {
      Tensor y = F::conv2d(x, w);
      return std::vector<Tensor>{y, G::conv2d_input(x.shape(), w, y), G::conv2d_weight(x, w.shape(), y)};
    };
    auto a = with_threads(1, run), b = with_threads(2, run);
    EXPECT_TRUE(equal(a[0], b[0]));
    EXPECT_TRUE(equal(a[1], b[1]));
    EXPECT_TRUE(allclose(a[2], b[2], 1e-4, 1e-3));
    return 0;
  });
}

TEST(Conv, PaddingSameAndUnbatched) {
  Tensor x = rnd({2, 3, 7, 8}), w = rnd({4, 3, 4, 3});
  Tensor y = F::conv2d(x, w, {}, {.padding = "same"});
  EXPECT_EQ(y.shape(), (Shape{2, 4, 7, 8}));
  // Even kernel: total padding 3 on H -> 1 left, 2 right (PyTorch), equal to explicit padding of
  // a right-padded input.
  Tensor ref = F::conv2d(pad(x, {0, 0, 0, 1}), w, {}, {.padding = {1, 1}});
  EXPECT_TRUE(allclose(y, ref, 1e-5, 1e-5));
  EXPECT_EQ(F::conv2d(x, w, {}, {.padding = "valid"}).shape(), (Shape{2, 4, 4, 6}));
  Tensor u = F::conv2d(x.select(0, 1), w, {}, {.padding = 1});
  EXPECT_EQ(u.shape(), (Shape{4, 6, 8}));
  EXPECT_TRUE(allclose(u, F::conv2d(x, w, {}, {.padding = 1}).select(0, 1), 1e-5, 1e-5));
  EXPECT_EQ(F::conv1d(rnd({3, 10}), rnd({2, 3, 3})).shape(), (Shape{2, 8}));
  EXPECT_EQ(F::conv_transpose1d(rnd({3, 10}), rnd({3, 2, 3}), {}, {.stride = 2}).shape(), (Shape{2, 21}));
  // Empty batch and zero input channels.
  EXPECT_EQ(F::conv2d(rnd({0, 3, 7, 8}), w).shape(), (Shape{0, 4, 4, 6}));
  Tensor z = F::conv2d(rnd({1, 0, 5, 5}), rnd({2, 0, 3, 3}), tensor({1.f, 2.f}));
  EXPECT_TRUE(equal(z, F::conv2d(zeros({1, 1, 5, 5}), zeros({2, 1, 3, 3}), tensor({1.f, 2.f}))));
}

TEST(Conv, HalfAndNonContiguous) {
  Tensor x = rnd({2, 4, 9, 9}), w = rnd({6, 4, 3, 3}), b = rnd({6});
  Tensor ref = F::conv2d(x, w, b, {.padding = 1});
  for (DType dt : {f16, bf16}) {
    Tensor y = F::conv2d(x.to(dt), w.to(dt), b.to(dt), {.padding = 1});
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(allclose(y.to(f32), ref, 3e-2, 0.15)) << dtype_name(dt);
  }
  Tensor xt = rnd({2, 4, 9, 9}).transpose(2, 3), wf = w.flip({2, 3});
  EXPECT_TRUE(allclose(F::conv2d(xt, wf, b, {.padding = 1}),
                       F::conv2d(xt.contiguous(), wf.contiguous(), b, {.padding = 1}), 1e-6, 1e-6));
}

TEST(Conv, FoldUnfold) {
  Tensor x = rnd({2, 3, 7, 6});
  Tensor cols = F::unfold(x, {3, 2}, 1, 1, {2, 1});
  EXPECT_EQ(cols.shape(), (Shape{2, 18, 4 * 7}));
  // fold(unfold(x)) = x times the number of blocks covering each pixel.
  Tensor back = F::fold(cols, {7, 6}, {3, 2}, 1, 1, {2, 1});
  Tensor cover = F::fold(F::unfold(ones_like(x), {3, 2}, 1, 1, {2, 1}), {7, 6}, {3, 2}, 1, 1, {2, 1});
  EXPECT_TRUE(allclose(back, x * cover, 1e-5, 1e-6));
  // unfold then matmul = conv2d.
  Tensor w = rnd({5, 3, 3, 2});
  Tensor y = matmul(w.reshape({5, 18}), cols).reshape({2, 5, 4, 7});
  EXPECT_TRUE(allclose(y, F::conv2d(x, w, {}, {.stride = {2, 1}, .padding = 1}), 1e-4, 1e-5));
}

// oneDNN reorders a convolution's weights into its blocked layout; an eager weight's reordered
// copy is kept from its second call with the same content stamp (TensorDesc::stamp). Every way
// of changing the weights must reach the next call: in-place writes (whole, through a view,
// copy_), writes queued by the fusion decorator between two convolutions, and a new weight tensor
// in the memory of a freed one. Each result is compared bitwise with the same call on a fresh
// copy of the weights (a new buffer, reordered anew).
TEST(Conv, KeptWeightsFollowEveryWrite) {
  with_onednn(true, [&] {
    struct Form {
      Shape x, w;
      bool transpose;
    };
    const Form forms[] = {{{1, 16, 12, 12}, {32, 16, 3, 3}, false},  // one image, serial
                          {{4, 32, 14, 14}, {64, 32, 3, 3}, false},  // split over the batch
                          {{2, 16, 7, 7}, {16, 24, 3, 3}, true}};    // ConvTranspose (backward-data)
    for (const Device& dev : {Device::cpu().without_fusion(), Device::cpu(), Device::cpu().autodiff()})
      for (const Form& f : forms)
        for (int threads : {1, 2}) {
          with_threads(threads, [&] {
            NoGradGuard no_grad;
            const std::string where = dev.str() + " x " + to_string(f.x) + " t=" + std::to_string(threads);
            manual_seed(5);
            Tensor x = randn(f.x, {.device = dev}), w = randn(f.w, {.device = dev});
            auto conv = [&](const Tensor& wt) {
              return f.transpose ? F::conv_transpose2d(x, wt, {}, {.stride = 2, .padding = 1})
                                 : F::conv2d(x, wt, {}, {.padding = 1});
            };
            // Twice per value: the first call reorders into the staging buffer, the second keeps
            // a copy, later calls would read it.
            auto check = [&](const char* step) {
              Tensor got = conv(w), again = conv(w), want = conv(w.clone());
              EXPECT_TRUE(equal(got, want)) << where << ": " << step;
              EXPECT_TRUE(equal(again, want)) << where << ": " << step << ", second call";
              return got;
            };
            Tensor y0 = check("first call");
            EXPECT_TRUE(equal(conv(w), y0)) << where << ": second call";
            w.mul_(-0.5f);
            Tensor y1 = check("after mul_");
            EXPECT_FALSE(equal(y1, y0)) << where;
            w.narrow(0, 1, 1).fill_(0.25f);  // one output channel, through a view
            check("after a write through a view");
            w.copy_(randn(f.w, {.device = dev}));
            check("after copy_");
            // Two convolutions with a write between them, all queued on the fused device.
            Tensor before = w.clone(), a = conv(w);
            w.add_(1.0f);
            Tensor b = conv(w);
            EXPECT_TRUE(equal(a, conv(before))) << where << ": queued, before the write";
            EXPECT_TRUE(equal(b, conv(w.clone()))) << where << ": queued, after the write";
            // New weights, often in the memory of the ones freed just before.
            for (uint64_t seed = 0; seed < 4; ++seed) {
              manual_seed(100 + seed);
              Tensor w2 = randn(f.w, {.device = dev}), c = w2.clone();
              Tensor got = conv(w2), again = conv(w2), want = conv(c);
              EXPECT_TRUE(equal(got, want)) << where << ": new weights " << seed;
              EXPECT_TRUE(equal(again, want)) << where << ": new weights " << seed << ", second call";
              EXPECT_TRUE(equal(conv(c), want)) << where << ": new weights " << seed << ", copy";
            }
            return 0;
          });
        }
    return 0;
  });
}
