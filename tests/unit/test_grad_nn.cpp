// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the nn primitives (src/ops/nn_grad*.cpp): MatMul, the convolutions, the
// pools and LayerNorm, checked against f64 finite differences over the frontends' options,
// second order where PyTorch has it, and the nn composites built on them (batch/instance norm,
// attention, interpolate, grid_sample).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "grad_coverage.h"
#include "gradcheck.h"
#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::ad_device;
using kiln::test::gradcheck;
using kiln::test::gradgradcheck;
using kiln::test::rand_input;
using TV = std::vector<Tensor>;

KILN_GRAD_COVERED(nn, "MatMul", "Conv", "ConvTranspose", "ConvWeightGrad", "MaxPool", "AvgPool", "AdaptiveAvgPool",
                  "AdaptiveMaxPool", "MaxUnpool", "LayerNorm");

namespace {
Tensor in(const Shape& s, uint64_t seed, double lo = -1, double hi = 1) { return rand_input(s, lo, hi, seed); }
}  // namespace

// ---- MatMul -------------------------------------------------------------------------------------

TEST(GradNN, MatMul) {
  auto mm = [](const TV& v) { return matmul(v[0], v[1]); };
  EXPECT_EQ(gradcheck(mm, {in({3, 4}, 1), in({4, 2}, 2)}), "");
  EXPECT_EQ(gradcheck(mm, {in({4}, 1), in({4, 2}, 2)}), "");     // vector x matrix
  EXPECT_EQ(gradcheck(mm, {in({3, 4}, 1), in({4}, 2)}), "");     // matrix x vector
  EXPECT_EQ(gradcheck(mm, {in({4}, 1), in({4}, 2)}), "");        // dot
  EXPECT_EQ(gradcheck(mm, {in({2, 3, 4}, 1), in({4}, 2)}), "");  // batched x vector
  // Broadcast batch dims: [2, 1, 3, 4] x [3, 4, 2] -> [2, 3, 3, 2]; and a 2-d operand against a batch.
  EXPECT_EQ(gradcheck(mm, {in({2, 1, 3, 4}, 1), in({3, 4, 2}, 2)}), "");
  EXPECT_EQ(gradcheck(mm, {in({3, 4}, 1), in({2, 4, 2}, 2)}), "");
  // Non-contiguous operands: transposed, sliced, expanded.
  EXPECT_EQ(gradcheck([](const TV& v) { return matmul(v[0].mT(), v[1].slice(2, 0, 6, 2)); },
                      {in({2, 4, 3}, 1), in({2, 4, 6}, 2)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return matmul(v[0].expand({3, 2, 4}), v[1]);
                },
                {in({2, 4}, 1), in({3, 4, 5}, 2)}),
            "");
}

TEST(GradNN, MatMulWithBias) {
  // linear / addmm with an [out] bias run one MatMul with the bias as its third input.
  auto lin = [](const TV& v) { return linear(v[0], v[1], v[2]); };
  EXPECT_EQ(gradcheck(lin, {in({3, 4}, 1), in({2, 4}, 2), in({2}, 3)}), "");
  EXPECT_EQ(gradcheck(lin, {in({4}, 1), in({2, 4}, 2), in({2}, 3)}), "");
  EXPECT_EQ(gradcheck(lin, {in({2, 3, 4}, 1), in({5, 4}, 2), in({5}, 3)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return linear(v[0].mT(), v[1], v[2].slice(0, 0, 6, 2)); },
                      {in({4, 3}, 1), in({3, 4}, 2), in({6}, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return addmm(v[0], v[1], v[2]); }, {in({2}, 1), in({3, 4}, 2), in({4, 2}, 3)}),
            "");
  EXPECT_EQ(gradgradcheck(lin, {in({3, 4}, 1), in({2, 4}, 2), in({2}, 3)}), "");
}

TEST(GradNN, MatMulSecondOrder) {
  auto mm = [](const TV& v) { return matmul(v[0], v[1]); };
  EXPECT_EQ(gradgradcheck(mm, {in({3, 4}, 1), in({4, 2}, 2)}), "");
  EXPECT_EQ(gradgradcheck(mm, {in({2, 1, 3, 4}, 1), in({3, 4, 2}, 2)}), "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return matmul(v[0], v[0].mT()); }, {in({3, 4}, 1)}), "");
}

// ---- Convolutions -------------------------------------------------------------------------------

TEST(GradNN, Conv1d) {
  auto f = [](F::ConvOptions o, bool bias) {
    return [o, bias](const TV& v) { return F::conv1d(v[0], v[1], bias ? v[2] : Tensor(), o); };
  };
  EXPECT_EQ(gradcheck(f({}, true), {in({2, 3, 7}, 1), in({4, 3, 3}, 2), in({4}, 3)}), "");
  EXPECT_EQ(gradcheck(f({.stride = 2, .padding = 1, .dilation = 2, .groups = 2}, true),
                      {in({2, 4, 9}, 1), in({6, 2, 3}, 2), in({6}, 3)}),
            "");
  EXPECT_EQ(gradcheck(f({.stride = 3, .padding = 2}, false), {in({1, 2, 10}, 1), in({3, 2, 4}, 2)}), "");
  // padding="same" with an even kernel (asymmetric padding through pad()) and an unbatched input.
  EXPECT_EQ(gradcheck(f({.padding = "same"}, false), {in({2, 6}, 1), in({3, 2, 4}, 2)}), "");
}

TEST(GradNN, Conv2d) {
  auto f = [](F::ConvOptions o, bool bias) {
    return [o, bias](const TV& v) { return F::conv2d(v[0], v[1], bias ? v[2] : Tensor(), o); };
  };
  EXPECT_EQ(gradcheck(f({}, true), {in({2, 2, 5, 4}, 1), in({3, 2, 3, 2}, 2), in({3}, 3)}), "");
  EXPECT_EQ(gradcheck(f({.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2}, true),
                      {in({2, 4, 6, 7}, 1), in({4, 2, 3, 2}, 2), in({4}, 3)}),
            "");
  // Stride leaving input rows unused (output_padding of the input gradient), depthwise.
  EXPECT_EQ(gradcheck(f({.stride = 3, .padding = 1, .groups = 3}, false), {in({1, 3, 8, 7}, 1), in({3, 1, 2, 2}, 2)}),
            "");
  // Non-contiguous input and weight.
  EXPECT_EQ(gradcheck([](const TV& v) { return F::conv2d(v[0].transpose(2, 3), v[1].slice(0, 0, 4, 2)); },
                      {in({2, 2, 5, 6}, 1), in({4, 2, 2, 3}, 2)}),
            "");
}

TEST(GradNN, Conv3d) {
  EXPECT_EQ(
      gradcheck(
          [](const TV& v) {
            return F::conv3d(v[0], v[1], v[2], {.stride = {1, 2, 1}, .padding = {1, 0, 1}, .dilation = {1, 1, 2}});
          },
          {in({1, 2, 4, 5, 5}, 1), in({2, 2, 2, 3, 2}, 2), in({2}, 3)}),
      "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::conv3d(v[0], v[1], {}, {.groups = 2}); },
                      {in({2, 2, 3, 3, 3}, 1), in({2, 1, 2, 2, 2}, 2)}),
            "");
}

TEST(GradNN, ConvTranspose) {
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::conv_transpose1d(v[0], v[1], v[2], {.stride = 2, .padding = 1, .output_padding = 1});
                },
                {in({2, 3, 5}, 1), in({3, 2, 3}, 2), in({2}, 3)}),
            "");
  // output_padding >= stride (allowed as it is below the dilation): elements no input reaches.
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::conv_transpose1d(v[0], v[1], {}, {.stride = 1, .output_padding = 2, .dilation = 3});
                },
                {in({1, 2, 4}, 1), in({2, 3, 2}, 2)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::conv_transpose2d(
                      v[0], v[1], v[2],
                      {.stride = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}, .groups = 2, .dilation = {1, 2}});
                },
                {in({2, 4, 3, 3}, 1), in({4, 1, 3, 2}, 2), in({2}, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::conv_transpose2d(v[0].transpose(1, 2), v[1], {}, {.stride = 2}); },
                      {in({3, 2, 4}, 1), in({3, 2, 2, 2}, 2)}),  // unbatched, non-contiguous
            "");
  EXPECT_EQ(
      gradcheck(
          [](const TV& v) {
            return F::conv_transpose3d(v[0], v[1], v[2], {.stride = 2, .padding = 1, .output_padding = {1, 0, 1}});
          },
          {in({1, 2, 2, 3, 2}, 1), in({2, 2, 3, 2, 3}, 2), in({2}, 3)}),
      "");
}

TEST(GradNN, ConvGradients) {
  // torch.nn.grad: conv2d_input is a ConvTranspose, conv2d_weight the ConvWeightGrad primitive.
  const nn::grad::ConvGradOptions o{.stride = 2, .padding = 1, .dilation = {1, 2}, .groups = 2};
  EXPECT_EQ(gradcheck(
                [o](const TV& v) {
                  return nn::grad::conv2d_weight(v[0], {4, 1, 3, 2}, v[1], o);
                },
                {in({2, 2, 7, 6}, 1), in({2, 4, 4, 3}, 2)}),
            "");
  EXPECT_EQ(gradcheck(
                [o](const TV& v) {
                  return nn::grad::conv2d_input({2, 2, 7, 6}, v[0], v[1], o);
                },
                {in({4, 1, 3, 2}, 1), in({2, 4, 4, 3}, 2)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return nn::grad::conv1d_weight(v[0], {3, 2, 3}, v[1], {.stride = 2});
                },
                {in({2, 2, 8}, 1), in({2, 3, 3}, 2)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return nn::grad::conv3d_weight(v[0], {2, 1, 2, 2, 2}, v[1]);
                },
                {in({1, 1, 3, 3, 3}, 1), in({1, 2, 2, 2, 2}, 2)}),
            "");
}

TEST(GradNN, ConvSecondOrder) {
  // Double backward through conv2d runs the rules of ConvTranspose and ConvWeightGrad.
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::conv2d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); },
                          {in({2, 2, 5, 4}, 1), in({3, 2, 3, 2}, 2), in({3}, 3)}),
            "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::conv2d(v[0], v[1], {}, {.dilation = 2, .groups = 2}); },
                          {in({1, 4, 5, 5}, 1), in({2, 2, 2, 2}, 2)}),
            "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::conv1d(v[0], v[1], {}, {.stride = 3, .padding = 1}); },
                          {in({2, 2, 8}, 1), in({2, 2, 3}, 2)}),
            "");
  EXPECT_EQ(gradgradcheck(
                [](const TV& v) {
                  return F::conv_transpose2d(v[0], v[1], {}, {.stride = 2, .padding = 1, .output_padding = 1});
                },
                {in({1, 2, 3, 3}, 1), in({2, 2, 3, 3}, 2)}),
            "");
  // Third order: the gradient of conv2d_weight's own double backward.
  EXPECT_EQ(gradgradcheck(
                [](const TV& v) {
                  return nn::grad::conv2d_weight(v[0], {2, 2, 2, 2}, v[1]);
                },
                {in({1, 2, 4, 4}, 1), in({1, 2, 3, 3}, 2)}),
            "");
}

// ---- Pools --------------------------------------------------------------------------------------

TEST(GradNN, MaxPool) {
  EXPECT_EQ(
      gradcheck([](const TV& v) { return F::max_pool1d(v[0], 3, {.stride = 2, .padding = 1}); }, {in({2, 3, 9}, 1)}),
      "");
  EXPECT_EQ(
      gradcheck([](const TV& v) { return F::max_pool1d(v[0], 2, {.stride = 1, .dilation = 2, .ceil_mode = true}); },
                {in({3, 8}, 2)}),
      "");
  // Overlapping windows (stride < kernel) add up at a shared argmax.
  EXPECT_EQ(
      gradcheck([](const TV& v) { return F::max_pool2d(v[0], 3, {.stride = 1, .padding = 1}); }, {in({2, 2, 4, 5}, 3)}),
      "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::max_pool2d(v[0], {2, 3}, {.stride = {2, 2}, .ceil_mode = true});
                },
                {in({1, 3, 5, 7}, 4)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::max_pool2d(v[0].transpose(2, 3), 2, {.dilation = {2, 1}});
                },
                {in({2, 2, 5, 6}, 5)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::max_pool3d(v[0], 2, {.stride = {1, 2, 2}, .padding = 1});
                },
                {in({1, 2, 3, 4, 4}, 6)}),
            "");
  // With indices returned: the values are differentiable, the indices are not.
  EXPECT_EQ(gradcheck([](const TV& v) { return F::max_pool2d_with_indices(v[0], 2, {.stride = 1}).first; },
                      {in({2, 4, 4}, 7)}),
            "");
}

TEST(GradNN, MaxPoolIndicesWhenTracked) {
  // max_pool without return_indices still records the indices when the input is tracked.
  Tensor x = in({1, 1, 4, 4}, 8).require_grad();
  Tensor y = F::max_pool2d(x, 2);
  Gradients g = y.sum().backward();
  EXPECT_EQ(x.grad(g).sum().item<double>(), 4.0);
  // Under NoGradGuard nothing is recorded.
  NoGradGuard ng;
  EXPECT_FALSE(F::max_pool2d(x, 2).requires_grad());
}

TEST(GradNN, AvgPool) {
  using O = F::AvgPoolOptions;
  auto f1 = [](int64_t k, O o) { return [k, o](const TV& v) { return F::avg_pool1d(v[0], k, o); }; };
  EXPECT_EQ(gradcheck(f1(3, {.stride = 2, .padding = 1}), {in({2, 3, 8}, 1)}), "");
  EXPECT_EQ(gradcheck(f1(3, {.stride = 2, .padding = 1, .count_include_pad = false}), {in({2, 3, 8}, 1)}), "");
  EXPECT_EQ(gradcheck(f1(3, {.stride = 2, .padding = 1, .ceil_mode = true}), {in({2, 2, 8}, 1)}), "");
  EXPECT_EQ(gradcheck(f1(2, {.stride = 1, .padding = 1}), {in({3, 1}, 1)}), "");  // window hanging off both sides
  auto f2 = [](Dims k, O o) { return [k, o](const TV& v) { return F::avg_pool2d(v[0], k, o); }; };
  EXPECT_EQ(gradcheck(f2({3, 2}, {.stride = {2, 1}, .padding = {1, 1}}), {in({2, 2, 5, 5}, 2)}), "");
  EXPECT_EQ(gradcheck(f2({3, 3}, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}),
                      {in({1, 3, 6, 7}, 3)}),
            "");
  EXPECT_EQ(gradcheck(f2({2, 2}, {.stride = 1, .padding = 1, .ceil_mode = true, .divisor_override = 3}),
                      {in({2, 2, 3, 4}, 4)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::avg_pool2d(v[0].transpose(1, 2), 2); }, {in({3, 4, 6}, 5)}), "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::avg_pool3d(
                      v[0], {2, 3, 2},
                      {.stride = {1, 2, 2}, .padding = {1, 1, 0}, .ceil_mode = true, .count_include_pad = false});
                },
                {in({1, 2, 3, 5, 4}, 6)}),
            "");
  EXPECT_EQ(
      gradcheck([](const TV& v) { return F::avg_pool3d(v[0], 2, {.divisor_override = 5}); }, {in({2, 4, 4, 3}, 7)}),
      "");
}

TEST(GradNN, AdaptivePools) {
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_avg_pool1d(v[0], 3); }, {in({2, 3, 7}, 1)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_avg_pool2d(v[0], {3, 4}); }, {in({2, 2, 5, 7}, 2)}), "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::adaptive_avg_pool2d(v[0].transpose(2, 3), {std::nullopt, 2});
                },
                {in({1, 2, 5, 3}, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_avg_pool3d(v[0], {2, 3, 1}); }, {in({2, 3, 5, 4}, 4)}), "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::adaptive_avg_pool2d(v[0], {7, 6});
                },
                {in({1, 1, 4, 5}, 5)}),
            "");  // upsampling: windows overlap
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_max_pool1d(v[0], 4); }, {in({2, 2, 9}, 6)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_max_pool2d(v[0], {3, 2}); }, {in({1, 2, 5, 7}, 7)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::adaptive_max_pool3d_with_indices(v[0], 2).first; },
                      {in({1, 2, 3, 5, 3}, 8)}),
            "");
}

TEST(GradNN, MaxUnpool) {
  // Indices from a max pool of a fixed tensor; gradient with respect to the values.
  Tensor src = in({2, 2, 6, 4}, 1).detach();
  Tensor idx = F::max_pool2d_with_indices(src, 2).second;
  EXPECT_EQ(gradcheck([idx](const TV& v) { return F::max_unpool2d(v[0], idx, 2); }, {in({2, 2, 3, 2}, 2)}), "");
  EXPECT_EQ(gradcheck(
                [idx](const TV& v) {
                  return F::max_unpool2d(v[0], idx, 2, {.output_size = {7, 5}});
                },
                {in({2, 2, 3, 2}, 3)}),
            "");
  Tensor src1 = in({3, 9}, 4).detach();
  Tensor idx1 = F::max_pool1d_with_indices(src1, 3).second;
  EXPECT_EQ(gradcheck([idx1](const TV& v) { return F::max_unpool1d(v[0], idx1, 3); }, {in({3, 3}, 5)}), "");
  Tensor src3 = in({1, 1, 4, 4, 2}, 6).detach();
  Tensor idx3 = F::max_pool3d_with_indices(src3, 2).second;
  EXPECT_EQ(gradcheck([idx3](const TV& v) { return F::max_unpool3d(v[0], idx3, 2); }, {in({1, 1, 2, 2, 1}, 7)}), "");
  // Pool then unpool: the gradient passes through both index maps.
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  auto [y, i] = F::max_pool2d_with_indices(v[0], 2);
                  return F::max_unpool2d(y * y, i, 2);
                },
                {in({1, 2, 4, 4}, 8)}),
            "");
}

TEST(GradNN, PoolSecondOrder) {
  // Pools are piecewise linear: square the result so the second derivative is not zero.
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::avg_pool2d(v[0], 3, {.stride = 2, .padding = 1}).square(); },
                          {in({1, 2, 5, 5}, 1)}),
            "");
  EXPECT_EQ(gradgradcheck(
                [](const TV& v) {
                  return F::avg_pool2d(v[0], 2, {.stride = 1, .ceil_mode = true, .count_include_pad = false}).square();
                },
                {in({2, 1, 3, 4}, 2)}),
            "");
  EXPECT_EQ(
      gradgradcheck([](const TV& v) { return F::max_pool2d(v[0], 2, {.stride = 1}).square(); }, {in({1, 2, 4, 4}, 3)}),
      "");
  EXPECT_EQ(
      gradgradcheck([](const TV& v) { return (F::max_pool2d(v[0], 3, {.stride = 2, .padding = 1}) * v[1]).exp(); },
                    {in({1, 1, 5, 5}, 4), in({1, 1, 3, 3}, 5)}),
      "");
  EXPECT_EQ(gradgradcheck(
                [](const TV& v) {
                  return F::adaptive_avg_pool2d(v[0], {2, 3}).square();
                },
                {in({1, 2, 5, 4}, 6)}),
            "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::adaptive_max_pool1d(v[0], 3).square(); }, {in({2, 7}, 7)}), "");
}

// ---- Normalisation --------------------------------------------------------------------------------

TEST(GradNN, LayerNorm) {
  EXPECT_EQ(gradcheck([](const TV& v) { return F::layer_norm(v[0], {4}); }, {in({3, 4}, 1)}), "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::layer_norm(v[0], {3, 4}, v[1], v[2]);
                },
                {in({2, 3, 4}, 1), in({3, 4}, 2), in({3, 4}, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::layer_norm(v[0], {5}, v[1]); }, {in({2, 2, 5}, 1), in({5}, 2)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::layer_norm(v[0], {5}, {}, v[1], 0.1); }, {in({3, 5}, 1), in({5}, 2)}),
            "");
  // Non-contiguous input and broadcast (expanded) weight.
  EXPECT_EQ(gradcheck([](const TV& v) { return F::layer_norm(v[0].transpose(0, 1), {3}, v[1].expand({3})); },
                      {in({3, 4}, 1), in({1}, 2)}),
            "");
}

TEST(GradNN, NativeLayerNormStatistics) {
  // The mean and rstd outputs are differentiable as well.
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  auto r = F::native_layer_norm(v[0], {4}, v[1], v[2]);
                  return r.output * 0.5 + r.mean.square() + r.rstd * 0.3;
                },
                {in({3, 4}, 1), in({4}, 2), in({4}, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::native_layer_norm(v[0], {2, 3}).rstd; }, {in({2, 2, 3}, 4)}), "");
}

TEST(GradNN, RmsNorm) {
  EXPECT_EQ(gradcheck([](const TV& v) { return F::rms_norm(v[0], {4}); }, {in({3, 4}, 1)}), "");
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  return F::rms_norm(v[0], {2, 3}, v[1], 1e-3);
                },
                {in({2, 2, 3}, 1), in({2, 3}, 2)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::rms_norm(v[0].mT(), {3}, v[1]); }, {in({2, 3, 4}, 1), in({3}, 2)}),
            "");
}

TEST(GradNN, GroupAndInstanceNorm) {
  EXPECT_EQ(gradcheck([](const TV& v) { return F::group_norm(v[0], 2); }, {in({2, 4, 3}, 1)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::group_norm(v[0], 3, v[1], v[2]); },
                      {in({2, 6, 2, 2}, 1), in({6}, 2), in({6}, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::group_norm(v[0], 1, v[1]); }, {in({3, 2, 4}, 1), in({2}, 2)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::group_norm(v[0], 2, {}, v[1]); }, {in({2, 4}, 1), in({4}, 2)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::instance_norm(v[0]); }, {in({2, 3, 5}, 1)}), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::instance_norm(v[0], {.weight = v[1], .bias = v[2]}); },
                      {in({2, 3, 2, 3}, 1), in({3}, 2), in({3}, 3)}),
            "");
}

TEST(GradNN, BatchNormTraining) {
  EXPECT_EQ(gradcheck([](const TV& v) { return F::batch_norm(v[0], {}, {}, {.training = true}); }, {in({4, 3}, 1)}),
            "");
  EXPECT_EQ(
      gradcheck(
          [](const TV& v) { return F::batch_norm(v[0], {}, {}, {.weight = v[1], .bias = v[2], .training = true}); },
          {in({2, 3, 2, 2}, 1), in({3}, 2), in({3}, 3)}),
      "");
  // Evaluation mode with running statistics: an affine map.
  EXPECT_EQ(gradcheck(
                [](const TV& v) {
                  Tensor rm = zeros({3}, {.dtype = f64, .device = ad_device()});
                  Tensor rv = ones({3}, {.dtype = f64, .device = ad_device()});
                  return F::batch_norm(v[0], rm, rv, {.weight = v[1]});
                },
                {in({2, 3, 2}, 1), in({3}, 2)}),
            "");
}

TEST(GradNN, NormSecondOrder) {
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::layer_norm(v[0], {4}, v[1], v[2]); },
                          {in({3, 4}, 1), in({4}, 2), in({4}, 3)}),
            "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::layer_norm(v[0], {2, 3}); }, {in({2, 2, 3}, 4)}), "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::rms_norm(v[0], {4}, v[1]); }, {in({3, 4}, 1), in({4}, 2)}), "");
  EXPECT_EQ(gradgradcheck([](const TV& v) { return F::group_norm(v[0], 2, v[1], v[2]); },
                          {in({2, 4, 3}, 1), in({4}, 2), in({4}, 3)}),
            "");
}

// ---- Composites -----------------------------------------------------------------------------------

TEST(GradNN, ScaledDotProductAttention) {
  auto sdpa = [](F::SdpaOptions o) {
    return [o](const TV& v) { return F::scaled_dot_product_attention(v[0], v[1], v[2], o); };
  };
  TV qkv{in({2, 3, 4}, 1), in({2, 5, 4}, 2), in({2, 5, 3}, 3)};
  EXPECT_EQ(gradcheck(sdpa({}), qkv), "");
  EXPECT_EQ(gradcheck(sdpa({.is_causal = true}), {in({2, 4, 3}, 1), in({2, 4, 3}, 2), in({2, 4, 2}, 3)}), "");
  Tensor bmask =
      tensor<bool>({true, false, true, true, false, true, true, true, false, true, true, true, true, true, false},
                   {3, 5}, ad_device());
  EXPECT_EQ(gradcheck(sdpa({.attn_mask = bmask}), qkv), "");
  Tensor fmask = in({3, 5}, 9).detach();
  EXPECT_EQ(gradcheck(sdpa({.attn_mask = fmask, .scale = 0.7}), qkv), "");
  // A float mask that requires grad gets a gradient too.
  EXPECT_EQ(
      gradcheck([](const TV& v) { return F::scaled_dot_product_attention(v[0], v[1], v[2], {.attn_mask = v[3]}); },
                {in({1, 2, 3}, 1), in({1, 4, 3}, 2), in({1, 4, 2}, 3), in({2, 4}, 4)}),
      "");
}

TEST(GradNN, Interpolate) {
  auto up = [](F::InterpolateOptions o) { return [o](const TV& v) { return F::interpolate(v[0], o); }; };
  EXPECT_EQ(gradcheck(up({.size = {5}, .mode = "linear"}), {in({1, 2, 3}, 1)}), "");
  EXPECT_EQ(gradcheck(up({.size = {4, 5}, .mode = "bilinear", .align_corners = true}), {in({1, 2, 3, 3}, 2)}), "");
  EXPECT_EQ(gradcheck(up({.scale_factor = 1.5, .mode = "bilinear"}), {in({1, 1, 3, 4}, 3)}), "");
  EXPECT_EQ(gradcheck(up({.size = {5, 3}, .mode = "bicubic"}), {in({1, 1, 3, 4}, 4)}), "");
  EXPECT_EQ(gradcheck(up({.size = {3, 4, 2}, .mode = "trilinear"}), {in({1, 1, 2, 3, 3}, 5)}), "");
  EXPECT_EQ(gradcheck(up({.scale_factor = 2.0}), {in({1, 2, 3, 2}, 6)}), "");
  EXPECT_EQ(gradcheck(up({.size = {5}, .mode = "nearest-exact"}), {in({2, 1, 3}, 7)}), "");
  EXPECT_EQ(gradcheck(up({.size = {2, 3}, .mode = "area"}), {in({1, 2, 5, 7}, 8)}), "");
}

TEST(GradNN, GridSample) {
  // Grid points away from pixel centres and edges (bilinear is piecewise linear in the grid).
  auto gs = [](F::GridSampleOptions o) { return [o](const TV& v) { return F::grid_sample(v[0], v[1], o); }; };
  TV xg{in({1, 2, 3, 4}, 1), in({1, 2, 3, 2}, 2, -0.9, 0.9)};
  EXPECT_EQ(gradcheck(gs({}), xg), "");
  EXPECT_EQ(gradcheck(gs({.padding_mode = "border", .align_corners = true}), xg), "");
  EXPECT_EQ(gradcheck(gs({.padding_mode = "reflection"}), {in({1, 1, 3, 3}, 3), in({1, 2, 2, 2}, 4, -1.2, 1.2)}), "");
  EXPECT_EQ(gradcheck(gs({.mode = "bicubic"}), xg), "");
  EXPECT_EQ(gradcheck([](const TV& v) { return F::grid_sample(v[0], v[1], {.mode = "nearest"}); },
                      {in({1, 2, 3, 4}, 5), in({1, 2, 2, 2}, 6, -0.9, 0.9)}),
            "");
  EXPECT_EQ(gradcheck(gs({}), {in({1, 1, 2, 3, 3}, 7), in({1, 2, 2, 1, 3}, 8, -0.9, 0.9)}), "");  // 5-d trilinear
  EXPECT_EQ(gradcheck([](const TV& v) { return F::affine_grid(v[0], {1, 1, 3, 4}); }, {in({1, 2, 3}, 9)}), "");
}

// ---- Reduced precision ------------------------------------------------------------------------------

TEST(GradNN, ReducedPrecision) {
  // The rules run in the input dtype (f16/bf16 LayerNorm in f32, as its forward); gradients come
  // back in each input's dtype and agree with f64 to the dtype's precision.
  struct Case {
    const char* name;
    std::function<Tensor(const TV&)> f;
    TV inputs;
  };
  std::vector<Case> cases{
      {"layer_norm",
       [](const TV& v) { return F::layer_norm(v[0], {8}, v[1], v[2]); },
       {in({3, 8}, 1), in({8}, 2), in({8}, 3)}},
      {"rms_norm", [](const TV& v) { return F::rms_norm(v[0], {8}, v[1]); }, {in({3, 8}, 1), in({8}, 2)}},
      {"group_norm",
       [](const TV& v) { return F::group_norm(v[0], 2, v[1], v[2]); },
       {in({2, 4, 3}, 1), in({4}, 2), in({4}, 3)}},
      {"conv2d",
       [](const TV& v) { return F::conv2d(v[0], v[1], v[2], {.stride = 2, .padding = 1}); },
       {in({2, 2, 5, 4}, 1), in({3, 2, 3, 2}, 2), in({3}, 3)}},
      {"conv_transpose1d",
       [](const TV& v) { return F::conv_transpose1d(v[0], v[1], {}, {.stride = 2}); },
       {in({1, 2, 4}, 1), in({2, 3, 3}, 2)}},
      {"avg_pool2d",
       [](const TV& v) { return F::avg_pool2d(v[0], 3, {.stride = 2, .padding = 1}); },
       {in({1, 2, 5, 5}, 1)}},
      {"max_pool2d", [](const TV& v) { return F::max_pool2d(v[0], 2); }, {in({1, 2, 4, 4}, 1)}},
      {"adaptive_avg_pool2d", [](const TV& v) { return F::adaptive_avg_pool2d(v[0], 3); }, {in({1, 2, 5, 4}, 1)}},
  };
  auto grads = [](const Case& c, DType dt) {
    TV xs;
    for (const Tensor& t : c.inputs) xs.push_back(t.detach().to(dt).require_grad());
    Tensor y = c.f(xs);
    EXPECT_EQ(y.dtype(), dt) << c.name;
    Tensor w = (1.0 + 0.1 * arange(y.numel(), f64, ad_device())).reshape(y.shape());
    Gradients g = (y.to(f64) * w).sum().backward();
    TV r;
    for (const Tensor& x : xs) {
      Tensor gx = x.grad(g);
      EXPECT_TRUE(gx.defined()) << c.name;
      if (!gx.defined()) continue;
      EXPECT_EQ(gx.dtype(), dt) << c.name;
      r.push_back(gx.detach().to(f64));
    }
    return r;
  };
  for (const Case& c : cases) {
    TV ref = grads(c, f64);
    for (DType dt : {f32, f16, bf16}) {
      TV got = grads(c, dt);
      const double tol = dt == f32 ? 1e-4 : dt == f16 ? 2e-2 : 1e-1;
      for (size_t i = 0; i < got.size() && i < ref.size(); ++i)
        EXPECT_TRUE(allclose(got[i], ref[i], tol, tol)) << c.name << " " << dtype_name(dt).data() << " input " << i;
    }
  }
}

TEST(GradNN, EmptyBatch) {
  // A batch of zero gives zero-size gradients (no crash, no error).
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> fs{
      {"conv2d",
       [](const Tensor& x) {
         return F::conv2d(x, ones({3, 2, 2, 2}, {.dtype = f64, .device = ad_device()}));
       }},
      {"conv_transpose2d",
       [](const Tensor& x) {
         return F::conv_transpose2d(x, ones({2, 3, 2, 2}, {.dtype = f64, .device = ad_device()}));
       }},
      {"max_pool2d", [](const Tensor& x) { return F::max_pool2d(x, 2); }},
      {"avg_pool2d", [](const Tensor& x) { return F::avg_pool2d(x, 2, {.padding = 1}); }},
      {"adaptive_avg_pool2d", [](const Tensor& x) { return F::adaptive_avg_pool2d(x, 3); }},
      {"adaptive_max_pool2d", [](const Tensor& x) { return F::adaptive_max_pool2d(x, 3); }},
      {"layer_norm", [](const Tensor& x) { return F::layer_norm(x, {4}); }},
      {"group_norm", [](const Tensor& x) { return F::group_norm(x, 2); }},
  };
  for (auto& [name, f] : fs) {
    Tensor x = zeros({0, 2, 4, 4}, {.dtype = f64, .device = ad_device()}).require_grad();
    Tensor gx = x.grad(f(x).sum().backward());
    EXPECT_TRUE(!gx.defined() || gx.shape() == x.shape()) << name;
  }
}

TEST(GradNN, RunningStatsStayOutOfTheGraph) {
  // The in-place running-statistics updates of batch_norm / instance_norm record nothing: the
  // buffers do not join the graph (which would keep every step's graph alive), as PyTorch.
  Tensor x = in({4, 3, 2}, 1).require_grad();
  Tensor w = in({3}, 2).require_grad();
  Tensor rm = zeros({3}, {.dtype = f64, .device = ad_device()});
  Tensor rv = ones({3}, {.dtype = f64, .device = ad_device()});
  Tensor y = F::batch_norm(x, rm, rv, {.weight = w, .training = true});
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rv.requires_grad());
  Tensor z = F::instance_norm(x, {.running_mean = rm, .running_var = rv});
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rv.requires_grad());
  Gradients g = (y + z).sum().backward();
  EXPECT_TRUE(x.grad(g).defined());
  EXPECT_TRUE(w.grad(g).defined());
  EXPECT_NE(rm.to_vector<double>(), std::vector<double>(3, 0.0));
}
