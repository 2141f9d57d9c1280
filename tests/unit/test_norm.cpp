// SPDX-License-Identifier: MIT OR Apache-2.0
// Normalisation ops: error paths, thread-count independence, numerical stability and the long
// row (chunked) paths that the small golden cases do not reach.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::test::expect_error;
using kiln::test::with_threads;

/// Reference layer norm over rows of length n, computed in double from the same values.
std::vector<double> ref_layer_norm(const std::vector<float>& x, int64_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; ++i) m += x[r * n + i];
    m /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) v += (x[r * n + i] - m) * (x[r * n + i] - m);
    v /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = (x[r * n + i] - m) / std::sqrt(v + eps);
  }
  return y;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  auto va = a.contiguous().to(f64).to_vector<double>(), vb = b.contiguous().to(f64).to_vector<double>();
  if (va.size() != vb.size()) return false;
  for (size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i])))) return false;
  return true;
}

TEST(Norm, LayerNormErrors) {
  Tensor x = randn({4, 6});
  expect_error([&] { F::layer_norm(x, {5}); }, "layer_norm", "expected input with shape [*, 5]");
  expect_error([&] { F::layer_norm(x, {2, 4, 6}); }, "layer_norm", "normalized_shape");
  expect_error([&] { F::layer_norm(x, {}); }, "layer_norm", "at least 1-dimensional");
  expect_error([&] { F::layer_norm(x, {6}, randn({5})); }, "layer_norm", "weight");
  expect_error([&] { F::layer_norm(x, {6}, {}, randn({2, 3})); }, "layer_norm", "bias");
  expect_error([&] { F::rms_norm(x, {6}, randn({6, 1})); }, "rms_norm", "weight");
  expect_error([&] { F::native_layer_norm(x, {3}); }, "native_layer_norm", "[4, 6]");
}

TEST(Norm, GroupInstanceBatchErrors) {
  expect_error([&] { F::group_norm(randn({2, 6, 4}), 4); }, "group_norm", "divisible by num_groups");
  expect_error([&] { F::group_norm(randn({6}), 2); }, "group_norm", "at least 2 dimensions");
  expect_error([&] { F::group_norm(randn({2, 6, 4}), 3, randn({5})); }, "group_norm", "weight");
  expect_error([&] { F::group_norm(randn({1, 2}), 2); }, "group_norm", "more than 1 value per channel");
  expect_error([&] { F::instance_norm(randn({2, 3, 1})); }, "instance_norm", "more than 1 spatial element");
  expect_error(
      [&] {
        F::instance_norm(randn({2, 3, 4}), {.use_input_stats = false});
      },
      "instance_norm", "running_mean");
  Tensor rm = zeros({3}), rv = ones({3});
  expect_error(
      [&] {
        F::batch_norm(randn({1, 3}), rm, rv, {.training = true});
      },
      "batch_norm", "Expected more than 1 value per channel when training, got input size [1, 3]");
  expect_error(
      [&] {
        F::batch_norm(randn({1, 3, 1, 1}), rm, rv, {.training = true});
      },
      "batch_norm", "more than 1 value per channel");
  expect_error([&] { F::batch_norm(randn({4, 3}), zeros({4}), rv, {.training = true}); }, "batch_norm", "running_mean");
  expect_error([&] { F::batch_norm(randn({4, 3}), rm, rv, {.weight = ones({2})}); }, "batch_norm", "weight");
  expect_error([&] { F::batch_norm(randn({4, 3}), Tensor(), Tensor()); }, "batch_norm", "evaluation mode");
  expect_error([&] { F::batch_norm(randn({4, 3}), rm, Tensor(), {.training = true}); }, "batch_norm", "together");
  expect_error([&] { F::batch_norm(randn({4}), Tensor(), Tensor(), {.training = true}); }, "batch_norm", "[N, C, *]");
  expect_error(
      [&] {
        F::batch_norm(randn({4, 3}), rm, rv, {.training = true, .eps = 0});
      },
      "batch_norm", "eps must be positive");
  expect_error([&] { F::local_response_norm(randn({2, 3}), 2); }, "local_response_norm", "3D or higher");
  expect_error([&] { F::normalize(randn({3}), 2.0, 1); }, "normalize", "");
}

TEST(Norm, BatchNormTrainingUpdatesRunningStatsInPlace) {
  Tensor x = randn({8, 3, 5}), rm = zeros({3}), rv = ones({3});
  Tensor rm_alias = rm;  // shares storage: the update is visible through every handle
  F::batch_norm(x, rm, rv, {.training = true, .momentum = 0.5});
  auto m = x.mean({0, 2}).to_vector<float>(), v = x.var({0, 2}, 1.0).to_vector<float>();
  auto got_m = rm_alias.to_vector<float>(), got_v = rv.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(got_m[c], 0.5f * m[c], 1e-6f);
    EXPECT_NEAR(got_v[c], 0.5f + 0.5f * v[c], 1e-5f);
  }
  // Eval uses the running stats: x normalised with (rm, rv).
  Tensor y = F::batch_norm(x, rm, rv);
  Tensor want = (x - rm.reshape({1, 3, 1})) / (rv.reshape({1, 3, 1}) + 1e-5).sqrt();
  EXPECT_TRUE(y.allclose(want, 1e-5, 1e-5));
}

// BatchNorm2d in eval keeps its per-channel scale and shift between calls; every change of
// what they come from shows in the next call: each output is bitwise functional::batch_norm's
// with the module's values at that moment (plain, fused and autodiff devices; f32 and f64).
TEST(Norm, BatchNormEvalCoefficientsFollowEveryChange) {
  for (const Device& d : {Device::cpu().without_fusion(), Device::cpu(), Device::cpu().autodiff()})
    for (DType dt : {f32, f64}) {
      manual_seed(5);
      nn::BatchNorm2d bn({.num_features = 4, .dtype = dt}, d);
      (void)bn(randn({3, 4, 5, 5}, {.dtype = dt, .device = d}) * 2 + 1);  // running statistics
      bn.eval();
      Tensor x = randn({2, 4, 3, 3}, {.dtype = dt, .device = d});
      auto want = [&] {
        return F::batch_norm(x, bn.running_mean, bn.running_var,
                             {.weight = bn.weight, .bias = bn.bias, .eps = bn.config.eps});
      };
      const std::string what = d.str() + " " + std::string(dtype_name(dt));
      NoGradGuard no_grad;
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what;
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": a second call";
      bn.running_var.mul_(2.0);  // in place
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": running_var written in place";
      Tensor rm_view = bn.running_mean.narrow(0, 1, 2);
      rm_view.add_(0.5);  // through a view
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": running_mean written through a view";
      bn.weight.copy_(randn({4}, {.dtype = dt, .device = d}));
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": weight copied into";
      bn.bias = nn::Param(randn({4}, {.dtype = dt, .device = d}));  // a new tensor
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": bias replaced";
      bn.config.eps = 0.25;
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": eps changed";
      bn.train();
      (void)bn(randn({3, 4, 5, 5}, {.dtype = dt, .device = d}));  // updates the running statistics
      bn.eval();
      EXPECT_TRUE(bitwise_equal(bn(x), want())) << what << ": after a training step";
    }
  // Eval with trainable weight and bias on an autodiff device: their gradients come through
  // (the coefficients are recomputed in the graph, as functional::batch_norm does).
  const Device ad = Device::cpu().autodiff();
  nn::BatchNorm2d bn({.num_features = 3}, ad);
  (void)bn(randn({4, 3, 5, 5}, {.device = ad}));
  bn.eval();
  Tensor x = randn({2, 3, 4, 4}, {.device = ad});
  auto g = (bn(x) * x).sum().backward();
  Tensor w2 = bn.weight.detach().clone().require_grad(), b2 = bn.bias.detach().clone().require_grad();
  auto g2 = (F::batch_norm(x, bn.running_mean, bn.running_var, {.weight = w2, .bias = b2}) * x).sum().backward();
  EXPECT_TRUE(bitwise_equal(g.get(bn.weight), g2.get(w2)));
  EXPECT_TRUE(bitwise_equal(g.get(bn.bias), g2.get(b2)));
}

TEST(Norm, ThreadCountIndependence) {
  // Many rows (one task per block of rows), few long rows (chunk-parallel schedule) and a case
  // where 1 and 2 threads pick different schedules: every result is bitwise identical.
  for (Shape s : {Shape{64, 3000}, Shape{2, 50000}, Shape{6, 20000}}) {
    Tensor x = randn(s) * 3 + 1, w = randn({s[1]}), b = randn({s[1]});
    auto run = [&] { return F::native_layer_norm(x, {s[1]}, w, b); };
    auto r1 = with_threads(1, run), r2 = with_threads(2, run);
    EXPECT_TRUE(bitwise_equal(r1.output, r2.output)) << to_string(s);
    EXPECT_TRUE(bitwise_equal(r1.mean, r2.mean)) << to_string(s);
    EXPECT_TRUE(bitwise_equal(r1.rstd, r2.rstd)) << to_string(s);
    auto rms = [&] { return F::rms_norm(x, {s[1]}, w); };
    EXPECT_TRUE(bitwise_equal(with_threads(1, rms), with_threads(2, rms))) << to_string(s);
  }
  Tensor x = randn({4, 32, 40, 40}).to(bf16), w = randn({32}), b = randn({32});
  auto g = [&] { return F::group_norm(x, 8, w, b); };
  EXPECT_TRUE(bitwise_equal(with_threads(1, g), with_threads(2, g)));
  Tensor xt = randn({40, 40, 4, 16}).permute({2, 3, 0, 1});  // non-contiguous [4, 16, 40, 40]
  Tensor iw = randn({16});
  auto in = [&] { return F::instance_norm(xt, {.weight = iw, .bias = ones({16})}); };
  EXPECT_TRUE(bitwise_equal(with_threads(1, in), with_threads(2, in)));
  auto gn = [&] { return F::group_norm(xt, 4); };
  EXPECT_TRUE(bitwise_equal(with_threads(1, gn), with_threads(2, gn)));
}

TEST(Norm, LargeMeanOffsetIsStable) {
  // 1e4 + unit noise: the deviations cancel exactly in the kernel (mean kept in two parts).
  Tensor x = randn({16, 1000}) + 1e4f;
  auto xv = x.to_vector<float>();
  auto want = ref_layer_norm(xv, 1000, 1e-5);
  auto got = F::layer_norm(x, {1000}).to_vector<float>();
  EXPECT_LT(max_abs_diff(got, want), 2e-5);
  // Small spread on a large offset: variance 1e-4 next to a mean of 1e3.
  Tensor z = randn({4, 5000}) * 0.01f + 1e3f;
  auto zv = z.to_vector<float>();
  auto zwant = ref_layer_norm(zv, 5000, 1e-8);
  EXPECT_LT(max_abs_diff(F::layer_norm(z, {5000}, {}, {}, 1e-8).to_vector<float>(), zwant), 1e-3);
  // group_norm goes through the same kernel.
  Tensor g = randn({2, 4, 10, 10}) + 1e4f;
  Tensor gy = F::group_norm(g, 2);
  Tensor gref = F::group_norm(g.to(f64), 2);
  EXPECT_LT((gy.to(f64) - gref).abs().max().item<double>(), 2e-5);
}

TEST(Norm, LongAndStridedRowsMatchReference) {
  // Rows longer than a chunk (4096), contiguous and transposed, f32 and f16.
  Tensor x = randn({3, 10000}) * 2 + 5;
  auto want = ref_layer_norm(x.to_vector<float>(), 10000, 1e-5);
  EXPECT_LT(max_abs_diff(F::layer_norm(x, {10000}).to_vector<float>(), want), 1e-5);
  Tensor xt = x.t().contiguous().t();  // same values, column-major storage
  EXPECT_LT(max_abs_diff(F::layer_norm(xt, {10000}).to_vector<float>(), want), 1e-5);
  Tensor x3 = x.reshape({3, 100, 100}).transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_LT(max_abs_diff(F::layer_norm(x3, {100, 100}).reshape({3, 10000}).to_vector<float>(), want), 1e-5);
  Tensor h = F::layer_norm(x.to(f16), {10000}).to(f32);
  auto hv = h.to_vector<float>();
  auto hwant = ref_layer_norm(x.to(f16).to(f32).to_vector<float>(), 10000, 1e-5);
  EXPECT_LT(max_abs_diff(hv, hwant), 4e-3);
  // The mean and rstd outputs.
  auto r = F::native_layer_norm(x, {10000});
  EXPECT_EQ(r.mean.shape(), (Shape{3, 1}));
  EXPECT_EQ(r.mean.dtype(), f32);
  EXPECT_TRUE(r.mean.allclose(x.mean({1}, true), 1e-5, 1e-5));
  EXPECT_TRUE(r.rstd.allclose((x.var({1}, 0.0, true) + 1e-5).rsqrt(), 1e-5, 1e-5));
}

TEST(Norm, RmsNormDefaultsAndEdges) {
  Tensor x = tensor({1e-4f, 2e-4f, 3e-4f, 4e-4f}, {1, 4});
  // eps defaults to FLT_EPSILON for f32 (matters for tiny values).
  double ms = (1e-8 + 4e-8 + 9e-8 + 16e-8) / 4;
  float want0 = static_cast<float>(1e-4 / std::sqrt(ms + 1.1920928955078125e-07));
  EXPECT_NEAR(F::rms_norm(x, {4}).to_vector<float>()[0], want0, 1e-6);
  // Empty batches and an integer input (computed as f32).
  EXPECT_EQ(F::layer_norm(zeros({0, 5}), {5}).shape(), (Shape{0, 5}));
  EXPECT_EQ(F::group_norm(zeros({0, 4, 3}), 2).shape(), (Shape{0, 4, 3}));
  EXPECT_EQ(F::layer_norm(arange(6).reshape({2, 3}), {3}).dtype(), f32);
  // normalize of an all-zero row stays zero (eps guards the division).
  Tensor z = F::normalize(zeros({2, 3}));
  EXPECT_EQ(z.abs().sum().item<float>(), 0.f);
}

TEST(Norm, LocalResponseNormLargeWindowMatchesSmallWindowPath) {
  // size > 16 uses running sums; compare with the direct definition.
  Tensor x = randn({2, 40, 3});
  const int64_t size = 21;
  Tensor y = F::local_response_norm(x, size, 0.3, 0.75, 2.0);
  Tensor sq = x * x, want = zeros_like(x);
  for (int64_t c = 0; c < 40; ++c) {
    int64_t lo = std::max<int64_t>(0, c - size / 2), hi = std::min<int64_t>(40, c + (size - 1) / 2 + 1);
    Tensor s = sq.narrow(1, lo, hi - lo).sum({1}, true) / static_cast<double>(size);
    want.narrow(1, c, 1).copy_(x.narrow(1, c, 1) / (s * 0.3 + 2.0).pow(0.75));
  }
  EXPECT_TRUE(y.allclose(want, 1e-5, 1e-6));
}

}  // namespace
