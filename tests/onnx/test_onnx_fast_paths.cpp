// SPDX-License-Identifier: MIT OR Apache-2.0
// The run-time path's fast kernels (fused LSTM, vectorized Clip) against the general op-by-op
// implementations of the same ops: a second implementation as the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/matmul.h"
#include "kiln/nn/functional/attention.h"
#include "kiln/nn/functional/conv.h"
#include "kiln/nn/functional/norm.h"
#include "kiln/nn/functional/pool.h"
#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

using namespace kiln;
namespace O = kiln::onnx::ops;

namespace {
/// The values of t, in row-major order.
std::vector<float> floats(const Tensor& t) { return t.contiguous().to_vector<float>(); }
double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return (a - b).abs().max().item<double>();
}
}  // namespace

// A clip of 1e30 changes nothing but sends the LSTM down the general (op-by-op) path.
TEST(OnnxFastPaths, FusedLstmMatchesGeneralPath) {
  manual_seed(7);
  for (int64_t layout : {0, 1})
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      const int64_t T = 5, B = 3, I = 4, H = 6, D = std::string(dir) == "bidirectional" ? 2 : 1;
      Tensor x = layout ? randn({B, T, I}) : randn({T, B, I});
      Tensor W = randn({D, 4 * H, I}) * 0.5, R = randn({D, 4 * H, H}) * 0.5, bias = randn({D, 8 * H}) * 0.5;
      Tensor h0 = layout ? randn({B, D, H}) : randn({D, B, H}), c0 = layout ? randn({B, D, H}) : randn({D, B, H});
      O::Attrs fast = {{"hidden_size", H}, {"direction", dir}, {"layout", layout}};
      O::Attrs slow = fast;
      slow.push_back({"clip", 1e30f});
      std::vector<Tensor> in = {x, W, R, bias, Tensor{}, h0, c0};
      auto a = O::call("LSTM", 14, in, fast, 3), b = O::call("LSTM", 14, in, slow, 3);
      for (size_t k = 0; k < 3; ++k) EXPECT_LT(max_abs_diff(a[k], b[k]), 1e-5) << dir << " layout " << layout;
      // Without bias and initial states too.
      auto c = O::call("LSTM", 14, {x, W, R}, fast, 3), d = O::call("LSTM", 14, {x, W, R}, slow, 3);
      for (size_t k = 0; k < 3; ++k) EXPECT_LT(max_abs_diff(c[k], d[k]), 1e-5) << dir << " layout " << layout;
    }
}

TEST(OnnxFastPaths, ClipMatchesClampAndKeepsNan) {
  manual_seed(3);
  Tensor x = randn({2, 3, 50, 70}) * 5;
  Tensor y = O::call("Clip", 13, {x, scalar_tensor(0.0, f32), scalar_tensor(6.0, f32)})[0];
  EXPECT_EQ(max_abs_diff(y, clamp(x, Scalar(0.0), Scalar(6.0))), 0.0);
  Tensor lo_only = O::call("Clip", 13, {x, scalar_tensor(-1.5, f32)})[0];
  EXPECT_EQ(max_abs_diff(lo_only, clamp(x, Scalar(-1.5), std::nullopt)), 0.0);
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor z =
      O::call("Clip", 13,
              {tensor(std::vector<float>{nan, -3, 9}, Shape{3}), scalar_tensor(0.0, f32), scalar_tensor(6.0, f32)})[0];
  auto v = z.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 6.0f);
}

// The direct Resize kernel (contiguous f32, last two axes) against the per-axis path
// (index_select + weighted sums), which a non-contiguous input takes: identical results.
TEST(OnnxFastPaths, ResizeDirectMatchesPerAxisPath) {
  manual_seed(11);
  Tensor x = randn({2, 3, 5, 7});
  Tensor xs = x.transpose(2, 3).contiguous().transpose(2, 3);  // same values, not contiguous
  ASSERT_FALSE(xs.is_contiguous());
  struct Case {
    const char* mode;
    const char* ctm;
    std::vector<double> scales;
    std::vector<int64_t> sizes;
  };
  std::vector<Case> cases = {
      {"nearest", "asymmetric", {1, 1, 2, 2}, {}},        {"nearest", "half_pixel", {1, 1, 0.6, 1.5}, {}},
      {"linear", "half_pixel", {1, 1, 2, 2}, {}},         {"linear", "align_corners", {}, {2, 3, 9, 4}},
      {"linear", "pytorch_half_pixel", {1, 1, 1, 3}, {}}, {"linear", "asymmetric", {1, 1, 2.5, 1}, {}},
      {"cubic", "half_pixel", {1, 1, 1.7, 0.8}, {}},      {"cubic", "align_corners", {}, {2, 3, 3, 11}}};
  for (const auto& k : cases) {
    for (int64_t excl : {0, 1}) {
      O::Attrs at = {{"mode", k.mode}, {"coordinate_transformation_mode", k.ctm}, {"exclude_outside", excl}};
      std::vector<Tensor> in = {x, Tensor{}, Tensor{}, Tensor{}}, ins = {xs, Tensor{}, Tensor{}, Tensor{}};
      if (!k.scales.empty()) in[2] = ins[2] = tensor(std::vector<float>(k.scales.begin(), k.scales.end()), Shape{4});
      if (!k.sizes.empty()) in[3] = ins[3] = tensor(k.sizes, Shape{4});
      Tensor a = O::call("Resize", 13, in, at)[0], b = O::call("Resize", 13, ins, at)[0];
      EXPECT_TRUE(equal(a, b)) << k.mode << " " << k.ctm << " exclude_outside " << excl << " max diff "
                               << max_abs_diff(a, b);
    }
  }
}

// Conv -> Relu and Conv -> Clip(const bounds) fuse into the conv (a oneDNN post-op), and the two
// convs into one plan step that keeps the intermediate in oneDNN's blocked layout when it can
// (dense 16 -> 16 channels), else runs them one by one (depthwise second conv; asymmetric pads),
// when the model is loaded with optimisations; the unoptimised graph and plain Kiln ops agree.
TEST(OnnxFastPaths, ConvActivationFusionMatchesUnfused) {
  using namespace kiln::onnx::test;
  namespace F = kiln::nn::functional;
  struct Case {
    int64_t C, groups2;
    std::vector<int64_t> pads2;  // ONNX order: h_begin, w_begin, h_end, w_end
  };
  manual_seed(5);
  for (const Case& k : {Case{8, 8, {1, 1, 1, 1}}, Case{16, 1, {1, 1, 1, 1}}, Case{16, 1, {1, 1, 0, 0}}}) {
    const int64_t C = k.C;
    Tensor w1 = randn({C, 3, 3, 3}) * 0.3, b1 = randn({C}) * 0.1, w2 = randn({C, C / k.groups2, 3, 3}) * 0.3,
           b2 = randn({C});
    Msg g;
    Msg c1 = node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
    c1.msg(5, attr_ints("pads", {1, 1, 1, 1}));
    Msg c2 = node("Conv", {"r1", "w2", "b2"}, {"c2"}, "conv2");
    c2.msg(5, attr_ints("pads", k.pads2)).msg(5, attr_i("group", k.groups2));
    g.msg(1, c1)
        .msg(1, node("Relu", {"c1"}, {"r1"}, "relu"))
        .msg(1, c2)
        .msg(1, node("Clip", {"c2", "lo", "hi"}, {"y"}, "clip"));
    g.msg(5, tensor_f32("w1", {C, 3, 3, 3}, floats(w1)))
        .msg(5, tensor_f32("b1", {C}, floats(b1)))
        .msg(5, tensor_f32("w2", {C, C / k.groups2, 3, 3}, floats(w2)))
        .msg(5, tensor_f32("b2", {C}, floats(b2)))
        .msg(5, tensor_f32("lo", {}, {0.f}))
        .msg(5, tensor_f32("hi", {}, {0.5f}));
    g.msg(11, value_info("x", {-1, 3, 9, 9})).msg(12, value_info("y", {-1, C, -1, -1}));
    const std::string bytes = model(g);
    auto fused = onnx::Model::from_bytes(bytes, Device::cpu());
    auto plain = onnx::Model::from_bytes(bytes, Device::cpu(), {.optimize = false});
    // Batches of 2+ images on 2 threads take the batch split (each thread a share of the
    // images, 3 = uneven shares); the reference runs image by image (batch 1: no split).
    const int saved = num_threads();
    for (int threads : {1, 2})
      for (int64_t n : {1, 3, 4}) {
        set_num_threads(threads);
        Tensor x = randn({n, 3, 9, 9});
        Tensor a = fused.run({x})[0], b = plain.run({x})[0];
        std::vector<Tensor> refs;
        for (int64_t i = 0; i < n; ++i) {
          Tensor xi = x.narrow(0, i, 1);
          Tensor r1 = relu(F::conv2d(xi, w1, b1, {.padding = 1}));
          Tensor r1p = pad(r1, {k.pads2[1], k.pads2[3], k.pads2[0], k.pads2[2]}, "constant", 0.0);
          refs.push_back(clamp(F::conv2d(r1p, w2, b2, {.groups = k.groups2}), 0.0, 0.5));
        }
        Tensor ref = cat(refs, 0);
        EXPECT_LT(max_abs_diff(a, b), 1e-6) << C << " " << n << " t=" << threads;
        EXPECT_LT(max_abs_diff(a, ref), 1e-5) << C << " " << n << " t=" << threads;
      }
    set_num_threads(saved);
  }
}

// The direct 2-D MaxPool (f32 CPU, floor mode, no indices) against Kiln's max_pool2d, with NaNs
// in the input (they propagate): identical results.
TEST(OnnxFastPaths, MaxPoolDirectMatchesMaxPool2d) {
  manual_seed(13);
  Tensor x = randn({2, 3, 11, 9});
  Tensor mask = rand({2, 3, 11, 9}) < 0.02;
  x = where(mask, full_like(x, NAN), x);
  struct Case {
    int64_t kh, kw, sh, sw, ph, pw;
  };
  for (const Case& k : {Case{3, 3, 2, 2, 1, 1}, Case{2, 2, 2, 2, 0, 0}, Case{3, 2, 1, 1, 1, 0}, Case{5, 3, 2, 3, 2, 1},
                        Case{1, 1, 1, 1, 0, 0}}) {
    O::Attrs at = {{"kernel_shape", std::vector<int64_t>{k.kh, k.kw}},
                   {"strides", std::vector<int64_t>{k.sh, k.sw}},
                   {"pads", std::vector<int64_t>{k.ph, k.pw, k.ph, k.pw}}};
    Tensor a = O::call("MaxPool", 12, {x}, at)[0];
    Tensor b = kiln::nn::functional::max_pool2d(x, {k.kh, k.kw}, {.stride = {k.sh, k.sw}, .padding = {k.ph, k.pw}});
    ASSERT_EQ(a.shape(), b.shape());
    EXPECT_TRUE(equal(isnan(a), isnan(b))) << k.kh << "x" << k.kw;
    EXPECT_TRUE(equal(where(isnan(a), zeros_like(a), a), where(isnan(b), zeros_like(b), b))) << k.kh << "x" << k.kw;
  }
}

// MatMul followed by Add of a constant vector (either operand order) fuses into one sgemm onto
// preloaded bias rows; the unoptimised graph and plain Kiln ops agree.
TEST(OnnxFastPaths, MatMulBiasFusionMatchesUnfused) {
  using namespace kiln::onnx::test;
  manual_seed(17);
  Tensor w1 = randn({6, 5}), b1 = randn({5}), w2 = randn({5, 4}), b2 = randn({4});
  Msg g;
  g.msg(1, node("MatMul", {"x", "w1"}, {"m1"}, "mm1"))
      .msg(1, node("Add", {"m1", "b1"}, {"h"}, "add1"))
      .msg(1, node("MatMul", {"h", "w2"}, {"m2"}, "mm2"))
      .msg(1, node("Add", {"b2", "m2"}, {"y"}, "add2"));
  g.msg(5, tensor_f32("w1", {6, 5}, floats(w1)))
      .msg(5, tensor_f32("b1", {5}, floats(b1)))
      .msg(5, tensor_f32("w2", {5, 4}, floats(w2)))
      .msg(5, tensor_f32("b2", {4}, floats(b2)));
  g.msg(11, value_info("x", {-1, 3, 6})).msg(12, value_info("y", {-1, 3, 4}));
  const std::string bytes = model(g);
  auto fused = onnx::Model::from_bytes(bytes, Device::cpu());
  auto plain = onnx::Model::from_bytes(bytes, Device::cpu(), {.optimize = false});
  for (int64_t n : {1, 4}) {
    Tensor x = randn({n, 3, 6});
    Tensor a = fused.run({x})[0], b = plain.run({x})[0];
    Tensor ref = matmul(matmul(x, w1) + b1, w2) + b2;
    EXPECT_LT(max_abs_diff(a, b), 1e-5) << n;
    EXPECT_LT(max_abs_diff(a, ref), 1e-5) << n;
  }
}

// Conv -> Add(another value) [-> Relu] fuses into the conv (y = act(conv + bias + residual),
// applied per share of images while they are in the cache), also as the second conv of a pair
// and when the residual is computed after the conv (a downsampling branch); a residual that
// broadcasts takes the general path. Each graph against the unoptimised one (op by op), batches
// 1, 3 (uneven shares) and 4 on 1 and 2 threads, and the plan shows what fused.
TEST(OnnxFastPaths, ConvResidualFusionMatchesUnfused) {
  using namespace kiln::onnx::test;
  auto conv = [&](const std::vector<std::string>& in, const std::string& out, int64_t pad, int64_t stride,
                  int64_t groups) {
    Msg c = node("Conv", in, {out}, out);
    c.msg(5, attr_ints("pads", {pad, pad, pad, pad})).msg(5, attr_ints("strides", {stride, stride}));
    if (groups > 1) c.msg(5, attr_i("group", groups));
    return c;
  };
  auto weight = [&](Msg& g, const std::string& name, const std::vector<int64_t>& s) {
    Tensor w = randn(Shape(s.begin(), s.end())) * 0.3;
    g.msg(5, tensor_f32(name, s, floats(w)));
  };
  struct Case {
    const char* what;
    int64_t C;
    bool res_first, relu;
    std::vector<std::string> plan;  // the plan's lines that must appear
  };
  manual_seed(11);
  const Case cases[] = {
      {"downsampling block", 16, false, true, {"Conv c1 + Relu + Conv c2 + residual Add + Relu"}},
      {"downsampling block, residual first", 16, true, true, {"Conv c1 + Relu + Conv c2 + residual Add + Relu"}},
      {"depthwise second conv", 8, false, false, {"Conv c1 + Relu + Conv c2 + residual Add"}},
      {"pointwise conv", 8, true, true, {"Conv c2 + residual Add + Relu"}},
      {"broadcast residual", 8, false, true, {"Conv c2 + residual Add + Relu"}},
  };
  for (const Case& k : cases) {
    const std::string what = k.what;
    const int64_t C = k.C;
    Msg g;
    std::string res;
    if (what.rfind("downsampling", 0) == 0) {  // x [n, 4, 9, 9] -> [n, C, 5, 5], two ways
      g.msg(1, conv({"x", "w1", "b1"}, "c1", 1, 2, 1))
          .msg(1, node("Relu", {"c1"}, {"r1"}, "relu1"))
          .msg(1, conv({"r1", "w2"}, "c2", 1, 1, 1))
          .msg(1, conv({"x", "wd"}, "d", 0, 2, 1));
      weight(g, "w1", {C, 4, 3, 3});
      weight(g, "b1", {C});
      weight(g, "w2", {C, C, 3, 3});
      weight(g, "wd", {C, 4, 1, 1});
      res = "d";
    } else if (what == "depthwise second conv") {  // x [n, C, 9, 9]
      g.msg(1, conv({"x", "w1", "b1"}, "c1", 1, 1, 1))
          .msg(1, node("Relu", {"c1"}, {"r1"}, "relu1"))
          .msg(1, conv({"r1", "w2", "b2"}, "c2", 1, 1, C));
      weight(g, "w1", {C, C, 3, 3});
      weight(g, "b1", {C});
      weight(g, "w2", {C, 1, 3, 3});
      weight(g, "b2", {C});
      res = "x";
    } else {
      g.msg(1, conv({"x", "w2", "b2"}, "c2", what == "pointwise conv" ? 0 : 1, 1, 1));
      weight(g, "w2", {C, C, what == "pointwise conv" ? 1 : 3, what == "pointwise conv" ? 1 : 3});
      weight(g, "b2", {C});
      res = "x";
      if (what == "broadcast residual") {
        weight(g, "t", {C, 1, 1});
        res = "t";
      }
    }
    g.msg(1, node("Add", k.res_first ? std::vector<std::string>{res, "c2"} : std::vector<std::string>{"c2", res},
                  {k.relu ? "s" : "y"}, "add"));
    if (k.relu) g.msg(1, node("Relu", {"s"}, {"y"}, "relu2"));
    const int64_t Cin = what.rfind("downsampling", 0) == 0 ? 4 : C;
    g.msg(11, value_info("x", {-1, Cin, 9, 9})).msg(12, value_info("y", {-1, C, -1, -1}));
    const std::string bytes = model(g);
    auto fused = onnx::Model::from_bytes(bytes, Device::cpu());
    auto plain = onnx::Model::from_bytes(bytes, Device::cpu(), {.optimize = false});
    const auto lines = fused.plan();
    for (const auto& want : k.plan)
      EXPECT_NE(std::find(lines.begin(), lines.end(), want), lines.end()) << what << ": no plan step '" << want << "'";
    for (const auto& line : lines) EXPECT_EQ(line.rfind("Add", 0), std::string::npos) << what << ": " << line;
    const int saved = num_threads();
    for (int threads : {1, 2})
      for (int64_t n : {1, 3, 4}) {
        set_num_threads(threads);
        Tensor x = randn({n, Cin, 9, 9});
        Tensor a = fused.run({x})[0], b = plain.run({x})[0];
        EXPECT_LT(max_abs_diff(a, b), 1e-6) << what << " n=" << n << " t=" << threads;
        if (k.relu) EXPECT_GE(a.min().item<float>(), 0.f) << what;
      }
    set_num_threads(saved);
  }
}

// Conv [-> Relu] -> MaxPool fuses into one step: the pool reads the convolution's blocked output
// (16-channel blocks) per share of images, and only the pooled result is reordered to plain.
// Geometries the blocked pool does not take (8 channels, ceil_mode) run the two ops one by one
// inside the same step. Each graph against the unoptimised one, batches 1, 3 and 4 on 1 and 2
// threads, with NaN in some inputs (they must come out where the op-by-op pool puts them).
TEST(OnnxFastPaths, ConvMaxPoolFusionMatchesUnfused) {
  using namespace kiln::onnx::test;
  struct Case {
    int64_t C, H, W;
    bool relu;
    std::vector<int64_t> k, s, p;
    int64_t ceil = 0;
  };
  manual_seed(12);
  const Case cases[] = {
      {16, 12, 12, true, {3, 3}, {2, 2}, {1, 1}},    // a ResNet stem
      {32, 11, 9, false, {2, 2}, {2, 2}, {0, 0}},    // odd sizes, floor mode
      {16, 10, 10, true, {3, 3}, {1, 1}, {1, 1}},    // stride 1
      {16, 9, 13, true, {3, 2}, {2, 1}, {1, 0}},     // per-dim windows
      {8, 12, 12, true, {3, 3}, {2, 2}, {1, 1}},     // not a 16-channel block: one by one
      {16, 12, 12, true, {3, 3}, {2, 2}, {1, 1}, 1}  // ceil_mode: one by one
  };
  for (const Case& k : cases) {
    const std::string what = "C" + std::to_string(k.C) + " " + std::to_string(k.H) + "x" + std::to_string(k.W) + " k" +
                             std::to_string(k.k[0]) + std::to_string(k.k[1]) + " s" + std::to_string(k.s[0]) +
                             std::to_string(k.s[1]) + (k.ceil ? " ceil" : "");
    Msg g;
    Msg conv = node("Conv", {"x", "w", "b"}, {"c"}, "conv");
    conv.msg(5, attr_ints("pads", {1, 1, 1, 1}));
    g.msg(1, conv);
    if (k.relu) g.msg(1, node("Relu", {"c"}, {"r"}, "relu"));
    Msg pool = node("MaxPool", {k.relu ? "r" : "c"}, {"y"}, "pool");
    pool.msg(5, attr_ints("kernel_shape", k.k))
        .msg(5, attr_ints("strides", k.s))
        .msg(5, attr_ints("pads", {k.p[0], k.p[1], k.p[0], k.p[1]}));
    if (k.ceil) pool.msg(5, attr_i("ceil_mode", 1));
    g.msg(1, pool);
    g.msg(5, tensor_f32("w", {k.C, 3, 3, 3}, floats(randn({k.C, 3, 3, 3}) * 0.3)));
    g.msg(5, tensor_f32("b", {k.C}, floats(randn({k.C}) * 0.1)));
    g.msg(11, value_info("x", {-1, 3, k.H, k.W})).msg(12, value_info("y", {-1, k.C, -1, -1}));
    const std::string bytes = model(g);
    auto fused = onnx::Model::from_bytes(bytes, Device::cpu());
    auto plain = onnx::Model::from_bytes(bytes, Device::cpu(), {.optimize = false});
    const auto lines = fused.plan();
    ASSERT_EQ(lines.size(), 1u) << what;
    EXPECT_EQ(lines[0], std::string("Conv conv") + (k.relu ? " + Relu" : "") + " + MaxPool pool") << what;
    const int saved = num_threads();
    for (int threads : {1, 2})
      for (int64_t n : {1, 3, 4}) {
        set_num_threads(threads);
        Tensor x = randn({n, 3, k.H, k.W});
        if (n == 3) {  // NaN in two images: a NaN output pixel spreads over its windows
          auto v = floats(x);
          v[static_cast<size_t>(5 * k.W + 4)] = std::numeric_limits<float>::quiet_NaN();
          v[static_cast<size_t>((2 * 3 + 1) * k.H * k.W + k.W + 1)] = std::numeric_limits<float>::quiet_NaN();
          x = tensor(v, x.shape());
        }
        Tensor a = fused.run({x})[0], b = plain.run({x})[0];
        ASSERT_EQ(a.shape(), b.shape()) << what;
        const auto va = floats(a), vb = floats(b);
        int nans = 0;
        for (size_t i = 0; i < va.size(); ++i) {
          ASSERT_EQ(std::isnan(va[i]), std::isnan(vb[i])) << what << " n=" << n << " t=" << threads << " at " << i;
          nans += std::isnan(va[i]) ? 1 : 0;
          if (!std::isnan(va[i])) ASSERT_NEAR(va[i], vb[i], 1e-6) << what << " n=" << n << " t=" << threads;
        }
        if (n == 3) EXPECT_GT(nans, 0) << what;
      }
    set_num_threads(saved);
  }
}

// RMSNormalization (opset 23) against nn::functional::rms_norm over the last axis and against
// f64 arithmetic over the trailing axes from 1, with a scale broadcast from [5]; f16 computes in
// f32 (stash_type 1) and returns f16.
TEST(OnnxFastPaths, RmsNormalizationMatchesRmsNorm) {
  manual_seed(5);
  Tensor x = randn({2, 3, 4, 5}) * 3, scale = randn({5});
  Tensor last = O::call("RMSNormalization", 23, {x, scale}, {{"epsilon", 1e-4f}})[0];
  Tensor ref = nn::functional::rms_norm(x, Shape{5}, scale, 1e-4f);
  EXPECT_LT(max_abs_diff(last, ref), 1e-5);
  Tensor from1 = O::call("RMSNormalization", 23, {x, scale}, {{"axis", int64_t{1}}})[0];
  Tensor xd = x.to(f64);
  Tensor want = xd / sqrt(mean(square(xd), {1, 2, 3}, true) + 1e-5) * scale.to(f64);
  EXPECT_LT(max_abs_diff(from1.to(f64), want), 1e-5);
  Tensor h = O::call("RMSNormalization", 23, {x.to(f16), scale.to(f16)}, {{"axis", int64_t{-2}}})[0];
  EXPECT_EQ(h.dtype(), f16);
  Tensor want_h = xd / sqrt(mean(square(xd), {2, 3}, true) + 1e-5) * scale.to(f64);
  EXPECT_LT(max_abs_diff(h.to(f64), want_h), 0.05);
}

// Attention (opset 23) against nn::functional::scaled_dot_product_attention: 4-D and 3-D
// inputs, grouped-query heads, bool and additive masks, causal masking without and with a
// key/value cache (then aligned to the cache's end), the present outputs, the probabilities
// as the fourth output, and a row whose keys are all masked (zeros).
TEST(OnnxFastPaths, AttentionMatchesSdpa) {
  namespace NF = nn::functional;
  manual_seed(9);
  const int64_t B = 2, H = 4, L = 5, S = 7, E = 8;
  Tensor q = randn({B, H, L, E}), k = randn({B, H, S, E}), v = randn({B, H, S, E});
  auto att = [](const std::vector<Tensor>& in, const O::Attrs& a = {}) { return O::call("Attention", 23, in, a, 4); };
  EXPECT_LT(max_abs_diff(att({q, k, v})[0], NF::scaled_dot_product_attention(q, k, v)), 1e-5);
  Tensor bmask = rand({L, S}) > 0.3, fmask = randn({B, 1, L, S});
  EXPECT_LT(max_abs_diff(att({q, k, v, bmask})[0], NF::scaled_dot_product_attention(q, k, v, {.attn_mask = bmask})),
            1e-5);
  EXPECT_LT(max_abs_diff(att({q, k, v, fmask}, {{"scale", 0.3f}})[0],
                         NF::scaled_dot_product_attention(q, k, v, {.attn_mask = fmask, .scale = 0.3})),
            1e-5);
  Tensor qc = randn({B, H, S, E});
  EXPECT_LT(max_abs_diff(att({qc, k, v}, {{"is_causal", int64_t{1}}})[0],
                         NF::scaled_dot_product_attention(qc, k, v, {.is_causal = true})),
            1e-5);
  // 3-D inputs, 4 query heads over 2 key/value heads.
  Tensor q3 = randn({B, L, H * E}), k3 = randn({B, S, 2 * E}), v3 = randn({B, S, 2 * E});
  Tensor y3 = att({q3, k3, v3}, {{"q_num_heads", int64_t{H}}, {"kv_num_heads", int64_t{2}}})[0];
  auto heads = [](const Tensor& t, int64_t h) { return t.reshape({B, t.size(1), h, E}).permute({0, 2, 1, 3}); };
  Tensor want3 = NF::scaled_dot_product_attention(heads(q3, H), heads(k3, 2), heads(v3, 2), {.enable_gqa = true});
  EXPECT_LT(max_abs_diff(y3, want3.permute({0, 2, 1, 3}).reshape({B, L, H * E})), 1e-5);
  // A cache of 3 keys: causal masking lets query i see the cache and new keys up to i.
  Tensor pk = randn({B, H, 3, E}), pv = randn({B, H, 3, E}), kn = randn({B, H, L, E}), vn = randn({B, H, L, E});
  auto out = att({q, kn, vn, Tensor{}, pk, pv}, {{"is_causal", int64_t{1}}, {"qk_matmul_output_mode", int64_t{3}}});
  Tensor kall = cat({pk, kn}, 2), vall = cat({pv, vn}, 2);
  EXPECT_EQ(max_abs_diff(out[1], kall), 0.0);
  EXPECT_EQ(max_abs_diff(out[2], vall), 0.0);
  Tensor allowed = arange(L + 3).reshape({1, L + 3}) <= arange(L).reshape({L, 1}) + 3;
  EXPECT_LT(max_abs_diff(out[0], NF::scaled_dot_product_attention(q, kall, vall, {.attn_mask = allowed})), 1e-5);
  EXPECT_LT(max_abs_diff(out[3].sum({-1}), ones({B, H, L})), 1e-5);
  // A fully masked query row attends to nothing.
  Tensor none = ones({L, S}, {.dtype = bool_});
  none = where(arange(L).reshape({L, 1}) == 2, zeros_like(none), none);
  Tensor yz = att({q, k, v, none})[0];
  EXPECT_EQ(yz.select(2, 2).abs().max().item<double>(), 0.0);
  EXPECT_ERROR(att({q3, k3, v3}), "q_num_heads");
}

// NonMaxSuppression on boxes whose overlaps are worked out by hand: box 1 overlaps box 0 with
// IoU 81/119 (about 0.68), box 2 is apart, box 3 overlaps box 2 with IoU 1/3.
TEST(OnnxFastPaths, NonMaxSuppressionKeepsTheBestOfOverlappingBoxes) {
  // [y1, x1, y2, x2]; box 3 with its corners swapped.
  Tensor boxes = tensor(std::vector<float>{0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30, 30, 25, 20, 35}, {1, 4, 4});
  Tensor scores = tensor(std::vector<float>{0.9f, 0.95f, 0.5f, 0.6f, 0.1f, 0.2f, 0.3f, 0.4f}, {1, 2, 4});
  auto nms = [&](const Tensor& b, float iou, std::optional<float> min_score, int64_t max_out, int64_t center = 0) {
    std::vector<Tensor> in = {b, scores, tensor(std::vector<int64_t>{max_out}, {1}),
                              tensor(std::vector<float>{iou}, {1})};
    if (min_score) in.push_back(tensor(std::vector<float>{*min_score}, {1}));
    return O::call("NonMaxSuppression", 11, in, {{"center_point_box", center}})[0].to_vector<int64_t>();
  };
  // IoU threshold 0.5: box 0 is suppressed by box 1 in both classes; boxes 2 and 3 stay.
  EXPECT_EQ(nms(boxes, 0.5f, std::nullopt, 10),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 3, 0, 0, 2, 0, 1, 3, 0, 1, 2, 0, 1, 1}));
  // Threshold 0.7: nothing overlaps that much; the score threshold drops class 1's low scores.
  EXPECT_EQ(nms(boxes, 0.7f, 0.35f, 10), (std::vector<int64_t>{0, 0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 2, 0, 1, 3}));
  // At most 2 per class; IoU threshold 0.1 lets box 3 suppress box 2.
  EXPECT_EQ(nms(boxes, 0.1f, std::nullopt, 2), (std::vector<int64_t>{0, 0, 1, 0, 0, 3, 0, 1, 3, 0, 1, 1}));
  // The same boxes as [x_center, y_center, width, height].
  Tensor centered = tensor(std::vector<float>{5, 5, 10, 10, 6, 6, 10, 10, 25, 25, 10, 10, 30, 25, 10, 10}, {1, 4, 4});
  EXPECT_EQ(nms(centered, 0.5f, std::nullopt, 10, 1), nms(boxes, 0.5f, std::nullopt, 10));
  EXPECT_TRUE(nms(boxes, 0.5f, std::nullopt, 0).empty());
  EXPECT_ERROR(O::call("NonMaxSuppression", 11, {boxes.reshape({4, 4}), scores}), "boxes [batches, n, 4]");
}

// Unique, sorted and in order of first occurrence, over elements (NaNs grouped, as NumPy) and
// over slices along an axis; the expectations are worked out by hand.
TEST(OnnxFastPaths, UniqueGroupsElementsAndSlices) {
  using V = std::vector<int64_t>;
  auto run = [](const Tensor& x, const O::Attrs& a) { return O::call("Unique", 11, {x}, a, 4); };
  Tensor x = tensor(std::vector<float>{2, 1, 1, 3, 4, 3}, {6});
  auto s = run(x, {});
  EXPECT_EQ(s[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(s[1].to_vector<int64_t>(), (V{1, 0, 3, 4}));
  EXPECT_EQ(s[2].to_vector<int64_t>(), (V{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(s[3].to_vector<int64_t>(), (V{2, 1, 2, 1}));
  auto u = run(x, {{"sorted", int64_t{0}}});
  EXPECT_EQ(u[0].to_vector<float>(), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(u[1].to_vector<int64_t>(), (V{0, 1, 3, 4}));
  EXPECT_EQ(u[2].to_vector<int64_t>(), (V{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(u[3].to_vector<int64_t>(), (V{1, 2, 2, 1}));
  auto n = run(tensor(std::vector<float>{NAN, 1, NAN}, {3}), {});
  auto nv = n[0].to_vector<float>();
  ASSERT_EQ(nv.size(), 2u);
  EXPECT_EQ(nv[0], 1.0f);
  EXPECT_TRUE(std::isnan(nv[1]));
  EXPECT_EQ(n[3].to_vector<int64_t>(), (V{1, 2}));
  auto rows = run(tensor(std::vector<int64_t>{1, 0, 0, 1, 0, 0, 2, 3, 4}, {3, 3}), {{"axis", int64_t{0}}});
  EXPECT_EQ(rows[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(rows[0].to_vector<int64_t>(), (V{1, 0, 0, 2, 3, 4}));
  EXPECT_EQ(rows[2].to_vector<int64_t>(), (V{0, 0, 1}));
  EXPECT_EQ(rows[3].to_vector<int64_t>(), (V{2, 1}));
  EXPECT_EQ(run(zeros({0}), {})[0].numel(), 0);
}

// Integer and quantized products against loops over the integers (MatMulInteger,
// QLinearMatMul) and against conv2d of the zero-point-shifted values (ConvInteger,
// QLinearConv with a per-channel weight scale and a bias).
TEST(OnnxFastPaths, IntegerAndQuantizedProductsMatchLoops) {
  manual_seed(13);
  const int64_t M = 3, K = 5, N = 4;
  Tensor a = randint(0, 256, {M, K}).to(u8), b = randint(-128, 128, {K, N}).to(i8);
  Tensor azp = tensor(std::vector<uint8_t>{3, 200, 17}, {M}), bzp = scalar_tensor(-5.0, i8);
  auto av = a.to(i64).to_vector<int64_t>(), bv = b.to(i64).to_vector<int64_t>();
  std::vector<int64_t> want(static_cast<size_t>(M * N));
  const int64_t az[] = {3, 200, 17};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) want[i * N + j] += (av[i * K + k] - az[i]) * (bv[k * N + j] + 5);
  Tensor y = O::call("MatMulInteger", 10, {a, b, azp, bzp})[0];
  EXPECT_EQ(y.dtype(), i32);
  EXPECT_EQ(y.to(i64).to_vector<int64_t>(), want);
  // QLinearMatMul: scales 0.02 * 0.05 / 0.1, output zero point 128, saturated to uint8.
  Tensor q = O::call("QLinearMatMul", 10,
                     {a, scalar_tensor(0.02, f32), azp, b, scalar_tensor(0.05, f32), bzp, scalar_tensor(0.1, f32),
                      scalar_tensor(128.0, u8)})[0];
  EXPECT_EQ(q.dtype(), u8);
  const float m = 0.02f * 0.05f / 0.1f;
  auto qv = q.to(i64).to_vector<int64_t>();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(qv[i], std::clamp<int64_t>(std::llrint(static_cast<double>(want[i]) * m + 128), 0, 255)) << i;
  // Convolutions, 2 output channels, padding 1.
  Tensor x = randint(0, 256, {1, 2, 5, 5}).to(u8), w = randint(-128, 128, {2, 2, 3, 3}).to(i8);
  Tensor xzp = scalar_tensor(10.0, u8), wzp = tensor(std::vector<int8_t>{1, -2}, {2});
  Tensor ref =
      nn::functional::conv2d(x.to(f64) - 10.0, w.to(f64) - wzp.to(f64).reshape({2, 1, 1, 1}), Tensor{}, {.padding = 1});
  Tensor ci = O::call("ConvInteger", 10, {x, w, xzp, wzp}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})[0];
  EXPECT_EQ(ci.dtype(), i32);
  EXPECT_EQ(max_abs_diff(ci.to(f64), ref), 0.0);
  Tensor bias = tensor(std::vector<int32_t>{100, -100}, {2});
  Tensor wscale = tensor(std::vector<float>{0.01f, 0.03f}, {2});
  Tensor qc =
      O::call("QLinearConv", 10,
              {x, scalar_tensor(0.1, f32), xzp, w, wscale, wzp, scalar_tensor(0.5, f32), scalar_tensor(0.0, i8), bias},
              {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})[0];
  Tensor mult = (scalar_tensor(0.1, f32) * wscale / 0.5f).to(f64).reshape({1, 2, 1, 1});
  Tensor want_c = clamp(round((ref + bias.to(f64).reshape({1, 2, 1, 1})) * mult), -128.0, 127.0);
  EXPECT_EQ(qc.dtype(), i8);
  EXPECT_EQ(max_abs_diff(qc.to(f64), want_c), 0.0);
  EXPECT_ERROR(O::call("MatMulInteger", 10, {a.to(f32), b}), "uint8 or int8");
}

// ScatterND with reduction mul, max and min: duplicate index tuples combine with the data and
// with each other (worked out by hand), over rows of a [3, 2] tensor.
TEST(OnnxFastPaths, ScatterNdReductionsCombineDuplicates) {
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor idx = tensor(std::vector<int64_t>{2, 0, 2}, {3, 1});
  Tensor upd = tensor(std::vector<float>{2, 10, 3, -1, 0.5f, 7}, {3, 2});
  auto run = [&](const char* red) {
    return O::call("ScatterND", 18, {x, idx, upd}, {{"reduction", red}})[0].to_vector<float>();
  };
  EXPECT_EQ(run("mul"), (std::vector<float>{3, -2, 3, 4, 5, 420}));
  EXPECT_EQ(run("max"), (std::vector<float>{3, 2, 3, 4, 5, 10}));
  EXPECT_EQ(run("min"), (std::vector<float>{1, -1, 3, 4, 0.5f, 6}));
}

// DFT and STFT: a delta's spectrum is all ones and a constant's only its DC bin (by hand); the
// inverse undoes the forward transform (complex, and real from one-sided bins, odd and even
// lengths); the one-sided bins are the first of the full spectrum; an STFT frame is the DFT of
// the windowed frame.
TEST(OnnxFastPaths, DftAndStftInvertAndAgree) {
  manual_seed(17);
  auto dft = [](const Tensor& x, int64_t axis, bool inverse, bool onesided, int64_t len = 0) {
    std::vector<Tensor> in = {x, len ? tensor(std::vector<int64_t>{len}, Shape{}) : Tensor{},
                              tensor(std::vector<int64_t>{axis}, Shape{})};
    return O::call("DFT", 20, in, {{"inverse", int64_t{inverse}}, {"onesided", int64_t{onesided}}})[0];
  };
  Tensor delta = zeros({1, 8, 1});
  delta = where(arange(8).reshape({1, 8, 1}) == 0, ones_like(delta), delta);
  Tensor d = dft(delta, 1, false, false);
  EXPECT_LT(max_abs_diff(d.select(-1, 0), ones({1, 8})), 1e-6);
  EXPECT_LT(d.select(-1, 1).abs().max().item<double>(), 1e-6);
  Tensor k = dft(full({1, 6, 1}, 2.0), 1, false, false);
  EXPECT_NEAR(k.select(-1, 0).select(1, 0).item<double>(), 12.0, 1e-5);
  EXPECT_LT(k.narrow(1, 1, 5).abs().max().item<double>(), 1e-5);
  for (int64_t n : {7, 8}) {
    Tensor z = randn({2, n, 3, 2});
    EXPECT_LT(max_abs_diff(dft(dft(z, 1, false, false), 1, true, false), z), 1e-5) << n;
    Tensor r = randn({2, 3, n, 1});
    Tensor half = dft(r, 2, false, true);
    EXPECT_EQ(half.size(2), n / 2 + 1);
    EXPECT_LT(max_abs_diff(half, dft(r, 2, false, false).narrow(2, 0, n / 2 + 1)), 1e-5);
    EXPECT_LT(max_abs_diff(dft(half, 2, true, true, n), r), 1e-5) << n;
  }
  // STFT: frames of 6 every 4 samples, a Hann-like window.
  Tensor sig = randn({1, 22, 1}), win = tensor(std::vector<float>{0.1f, 0.5f, 1.0f, 1.0f, 0.5f, 0.1f}, {6});
  Tensor st = O::call("STFT", 17, {sig, tensor(std::vector<int64_t>{4}, Shape{}), win})[0];
  EXPECT_EQ(st.shape(), (Shape{1, 5, 4, 2}));
  Tensor frame2 = sig.narrow(1, 8, 6) * win.reshape({1, 6, 1});
  EXPECT_LT(max_abs_diff(st.select(1, 2), dft(frame2, 1, false, true)), 1e-5);
}

// RoiAlign on planes that are linear in y and x (10 y + x, and its negative in channel 1):
// bilinear samples of a linear function are exact, so the average over a cell is the function
// at the cell's centre (half_pixel shifts the region by half a pixel); max mode takes, per
// sample, the largest weighted corner, checked on one cell by hand.
TEST(OnnxFastPaths, RoiAlignAveragesLinearPlanesExactly) {
  const int64_t H = 12, W = 10;
  std::vector<float> v;
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) v.push_back((c ? -1.0f : 1.0f) * static_cast<float>(10 * y + x));
  Tensor X = tensor(v, {1, 2, H, W});
  Tensor rois = tensor(std::vector<float>{2, 3, 6, 9, 1.5f, 1.5f, 4.5f, 7.5f}, {2, 4});
  Tensor bi = tensor(std::vector<int64_t>{0, 0}, {2});
  Tensor y = O::call("RoiAlign", 16, {X, rois, bi},
                     {{"output_height", int64_t{3}}, {"output_width", int64_t{2}}, {"sampling_ratio", int64_t{2}}})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 2, 3, 2}));
  auto yv = y.to_vector<float>();
  const float box[2][4] = {{2, 3, 6, 9}, {1.5f, 1.5f, 4.5f, 7.5f}};
  for (int r = 0; r < 2; ++r)
    for (int ph = 0; ph < 3; ++ph)
      for (int pw = 0; pw < 2; ++pw) {
        const double bh = (box[r][3] - box[r][1]) / 3.0, bw = (box[r][2] - box[r][0]) / 2.0;
        const double yc = box[r][1] - 0.5 + (ph + 0.5) * bh, xc = box[r][0] - 0.5 + (pw + 0.5) * bw;
        EXPECT_NEAR(yv[((r * 2 + 0) * 3 + ph) * 2 + pw], 10 * yc + xc, 1e-4) << r << ph << pw;
        EXPECT_NEAR(yv[((r * 2 + 1) * 3 + ph) * 2 + pw], -(10 * yc + xc), 1e-4) << r << ph << pw;
      }
  // Max mode, one sample per cell at (y, x) = (2.5, 3.5): corners 23, 24, 33, 34 weighted 1/4 each.
  Tensor m = O::call(
      "RoiAlign", 16, {X.narrow(1, 0, 1), tensor(std::vector<float>{3, 2, 4, 3}, {1, 4}), bi.narrow(0, 0, 1)},
      {{"mode", "max"}, {"sampling_ratio", int64_t{1}}, {"coordinate_transformation_mode", "output_half_pixel"}})[0];
  EXPECT_NEAR(m.item<double>(), 34.0 / 4, 1e-5);
  EXPECT_ERROR(O::call("RoiAlign", 16, {X, rois.narrow(1, 0, 3), bi}), "rois [R, 4]");
}
