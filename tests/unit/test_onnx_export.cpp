// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX export: captured models written as ONNX, read back by Kiln's importer and (when the
// Python packages onnx and onnxruntime are installed) checked by onnx.checker and run by ONNX
// Runtime at two batch sizes with a dynamic batch axis.
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/onnx.h>
#include <kiln/onnx_export.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../test_util.h"
#include "onnxruntime_run.h"

using namespace kiln;

namespace {

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  Mlp() : fc1({.in_features = 6, .out_features = 16}), fc2({.in_features = 16, .out_features = 4}) {}
  Tensor forward(const Tensor& x) const { return softmax(fc2(gelu(fc1(x))), -1); }
  KILN_VISIT(Mlp, fc1, fc2)
};

struct Cnn : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::MaxPool2d pool;
  nn::Linear fc;
  Cnn()
      : conv1({.in_channels = 1, .out_channels = 4, .kernel_size = 3, .padding = 1}),
        conv2({.in_channels = 4, .out_channels = 8, .kernel_size = 3}),
        pool({.kernel_size = 2}),
        fc({.in_features = 8 * 2 * 2, .out_features = 10}) {}
  Tensor forward(const Tensor& x) const {
    Tensor h = pool(relu(conv1(x)));
    h = relu(conv2(h));
    return log_softmax(fc(h.flatten(1)), -1);
  }
  KILN_VISIT(Cnn, conv1, conv2, pool, fc)
};

// The Fashion-MNIST example's model (examples/fashion-mnist): conv-BN-ReLU-pool twice, then
// fc-dropout-fc.
struct FashionNet : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  nn::Linear fc1, fc2;
  nn::Dropout drop;
  FashionNet()
      : conv1({.in_channels = 1, .out_channels = 8, .kernel_size = 3, .padding = 1, .bias = false}),
        conv2({.in_channels = 8, .out_channels = 16, .kernel_size = 3, .padding = 1, .bias = false}),
        bn1({.num_features = 8}),
        bn2({.num_features = 16}),
        fc1({.in_features = 16 * 7 * 7, .out_features = 32}),
        fc2({.in_features = 32, .out_features = 10}),
        drop({.p = 0.25}) {}
  Tensor forward(const Tensor& x) const {
    Tensor h = (x - 0.2860f) * (1.0f / 0.3530f);
    h = nn::functional::max_pool2d(relu(bn1(conv1(h))), 2);
    h = nn::functional::max_pool2d(relu(bn2(conv2(h))), 2);
    return fc2(drop(relu(fc1(h.flatten(1)))));
  }
  KILN_VISIT(FashionNet, conv1, bn1, conv2, bn2, fc1, fc2, drop)
};

float max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return (a.to(Device::cpu()) - b.to(Device::cpu())).abs().max().item<float>();
}

template <class M>
std::string export_module(M& m, const Tensor& example, const onnx::ExportOptions& o = {.dynamic = {{"input", {0}}}}) {
  CapturedGraph g =
      capture(m, [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{m.forward(x[0])}; }, {example});
  return onnx::export_bytes(g, o);
}

/// Elementwise ops, views (transpose, narrow, unsqueeze, reshape), cat, reductions, where,
/// casts, index_select and softmax on x [B, 4, 6].
std::vector<Tensor> ops_fn(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];  // [B, 4, 6]
  const Device d = x.device();
  Tensor a = exp(x * 0.5) - log(abs(x) + 1.0) + tanh(x) * sigmoid(x) / (sqrt(abs(x)) + 2.0);
  Tensor b = pow(abs(a) + 0.1, 1.5) + neg(relu(x)) + silu(x) + maximum(x, a) + minimum(x, a);
  Tensor t = b.transpose(1, 2).contiguous() * 2.0;            // a transpose view
  Tensor s = x.narrow(2, 1, 3) + x.narrow(2, 3, 3);           // slices
  Tensor c = cat({s, t.transpose(1, 2).narrow(2, 0, 2)}, 2);  // [B, 4, 5]
  Tensor w = where(c > 0.0, c, c * 0.1);
  Tensor r = w.sum(Dims{2}) + w.mean(Dims{2}) + w.amax(Dims{2});  // [B, 4]
  Tensor k = tensor({1.f, -2.f, 3.f, 0.5f}).to(d);
  Tensor g = index_select(w, 2, tensor<int64_t>({0, 4, 2}).to(d));
  Tensor y = softmax(r * k, -1).unsqueeze(2) + g.sum(Dims{2}, true) + x.to(f64).to(f32).sum(Dims{2}, true);
  return std::vector<Tensor>{y.reshape({-1, 4}), (x > 0.0).to(f32).mean(Dims{1, 2})};
}

}  // namespace

TEST(OnnxExport, MlpRoundTripsThroughKilnsImporter) {
  manual_seed(1);
  Mlp m;
  const std::string bytes = export_module(m, randn({3, 6}));
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (int64_t b : {2, 7}) {
    Tensor x = randn({b, 6});
    const float d = max_diff(back.run({x})[0], m.forward(x));
    EXPECT_LE(d, 1e-5f) << "batch " << b;
    std::cout << "mlp batch " << b << " max deviation " << d << "\n";
  }
}

TEST(OnnxExport, CnnRoundTripsThroughKilnsImporter) {
  manual_seed(2);
  Cnn m;
  m.eval();
  const std::string bytes = export_module(m, randn({2, 1, 8, 8}));
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (int64_t b : {2, 5}) {
    Tensor x = randn({b, 1, 8, 8});
    const float d = max_diff(back.run({x})[0], m.forward(x));
    EXPECT_LE(d, 1e-5f) << "batch " << b;
    std::cout << "cnn batch " << b << " max deviation " << d << "\n";
  }
}

TEST(OnnxExport, FashionMnistModelWithBatchNorm) {
  manual_seed(6);
  FashionNet m;
  // Non-trivial running statistics, as after training.
  m.bn1.running_mean = rand({8});
  m.bn1.running_var = rand({8}) + 0.5;
  m.eval();
  const std::string bytes = export_module(m, rand({2, 1, 28, 28}));
  EXPECT_NE(bytes.find("bn1.running_mean"), std::string::npos);
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (int64_t b : {2, 3}) {
    Tensor x = rand({b, 1, 28, 28});
    const float d = max_diff(back.run({x})[0], m.forward(x));
    EXPECT_LE(d, 1e-5f) << "batch " << b;
    std::cout << "fashion-mnist batch " << b << " max deviation " << d << "\n";
  }
  if (!test::have_onnxruntime()) return;
  for (int64_t b : {1, 4}) {
    Tensor x = rand({b, 1, 28, 28});
    const float d = max_diff(test::run_onnxruntime(bytes, x, {b, 10}), m.forward(x));
    EXPECT_LE(d, 1e-5f) << "onnxruntime batch " << b;
    std::cout << "fashion-mnist onnxruntime batch " << b << " max deviation " << d << "\n";
  }
}

TEST(OnnxExport, TransformerEncoderLayer) {
  manual_seed(7);
  nn::TransformerEncoderLayer layer(
      {.d_model = 16, .nhead = 4, .dim_feedforward = 32, .activation = "gelu", .batch_first = true});
  layer.eval();
  CapturedGraph g =
      capture(layer, [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{layer.forward(x[0])}; },
              {randn({2, 5, 16})});
  const std::string bytes = onnx::export_bytes(g, {.dynamic = {{"input", {0}}}});
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (int64_t b : {2, 3}) {
    Tensor x = randn({b, 5, 16});
    const float d = max_diff(back.run({x})[0], layer.forward(x));
    EXPECT_LE(d, 1e-5f) << "batch " << b << "\n" << g.str();
    std::cout << "transformer encoder layer batch " << b << " max deviation " << d << "\n";
  }
  if (!test::have_onnxruntime()) return;
  for (int64_t b : {1, 4}) {
    Tensor x = randn({b, 5, 16});
    const float d = max_diff(test::run_onnxruntime(bytes, x, {b, 5, 16}), layer.forward(x));
    EXPECT_LE(d, 1e-5f) << "onnxruntime batch " << b;
    std::cout << "transformer encoder layer onnxruntime batch " << b << " max deviation " << d << "\n";
  }
}

TEST(OnnxExport, LstmWithADynamicBatch) {
  manual_seed(8);
  nn::LSTM lstm({.input_size = 3, .hidden_size = 5, .num_layers = 2, .batch_first = true});
  auto fn = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{lstm.forward(x[0]).output}; };
  CapturedGraph g = capture(lstm, fn, {randn({2, 4, 3})});
  // The LSTM steps through time-major rows ([T*B, 4H], the batch inside) from zero states made
  // with the example's batch, which the export takes one row of and broadcasts.
  const std::string bytes = onnx::export_bytes(g, {.dynamic = {{"input", {0}}}});
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (int64_t b : {2, 5}) {
    Tensor x = randn({b, 4, 3});
    const float d = max_diff(back.run({x})[0], lstm.forward(x).output);
    EXPECT_LE(d, 1e-5f) << "batch " << b << "\n" << g.str();
    std::cout << "lstm batch " << b << " max deviation " << d << "\n";
  }
  if (!test::have_onnxruntime()) return;
  for (int64_t b : {1, 3}) {
    Tensor x = randn({b, 4, 3});
    const float d = max_diff(test::run_onnxruntime(bytes, x, {b, 4, 5}), lstm.forward(x).output);
    EXPECT_LE(d, 1e-5f) << "onnxruntime batch " << b;
    std::cout << "lstm onnxruntime batch " << b << " max deviation " << d << "\n";
  }
}

TEST(OnnxExport, ConstantOfTheExampleBatchSize) {
  // A constant the same along the batch broadcasts; one that varies fixes the batch.
  auto same = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0] * full({2, 3}, 0.5, {.device = x[0].device()})};
  };
  onnx::Model back = onnx::Model::from_bytes(
      onnx::export_bytes(capture(same, {ones({2, 3})}), {.dynamic = {{"input", {0}}}}), Device::cpu());
  Tensor x = randn({4, 3});
  EXPECT_LE(max_diff(back.run({x})[0], x * 0.5), 0.f);
  auto varies = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0] + tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}).to(x[0].device())};
  };
  CapturedGraph g = capture(varies, {ones({2, 3})});
  test::expect_error(
      [&] {
        onnx::export_bytes(g, {.dynamic = {{"input", {0}}}});
      },
      "onnx export", "fixes a dynamic axis: input 1 of shape [2, 3] has the example's size on dim 0");
  onnx::export_bytes(g);  // fine with a fixed batch
}

TEST(OnnxExport, ExportModelRunsTheModuleInEvalMode) {
  manual_seed(9);
  FashionNet m;  // in training mode: dropout would be a random op
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_export_eval.onnx").string();
  onnx::export_model(m, [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{m.forward(x[0])}; },
                     {rand({2, 1, 28, 28})}, path, {.dynamic = {{"input", {0}}}});
  EXPECT_TRUE(m.is_training());
  onnx::Model back(path, Device::cpu());
  std::filesystem::remove(path);
  m.eval();
  Tensor x = rand({3, 1, 28, 28});
  EXPECT_LE(max_diff(back.run({x})[0], m.forward(x)), 1e-5f);
}

TEST(OnnxExport, FoldConstantsFoldsParameterViews) {
  manual_seed(10);
  Mlp m;
  const std::string plain = export_module(m, randn({3, 6}));
  const std::string folded = export_module(m, randn({3, 6}), {.dynamic = {{"input", {0}}}, .fold_constants = true});
  EXPECT_NE(plain.find("Transpose"), std::string::npos);
  EXPECT_EQ(folded.find("Transpose"), std::string::npos);
  EXPECT_NE(folded.find("fc1.weight_"), std::string::npos);
  onnx::Model back = onnx::Model::from_bytes(folded, Device::cpu());
  Tensor x = randn({4, 6});
  EXPECT_LE(max_diff(back.run({x})[0], m.forward(x)), 1e-5f);
}

TEST(OnnxExport, EmbeddingBagOfTokensWithADynamicBatch) {
  manual_seed(11);
  struct Bag : nn::Module {
    nn::Embedding emb{{.num_embeddings = 10, .embedding_dim = 4}};
    nn::Linear fc{{.in_features = 4, .out_features = 2}};
    Tensor forward(const Tensor& tokens) const { return fc(emb(tokens).mean(Dims{1})); }
    KILN_VISIT(Bag, emb, fc)
  } m;
  auto tokens = [](int64_t b) { return randint(0, 10, {b, 5}); };
  const std::string bytes = export_module(m, tokens(3));
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (int64_t b : {2, 6}) {
    Tensor t = tokens(b);
    const float d = max_diff(back.run({t})[0], m.forward(t));
    EXPECT_LE(d, 1e-6f) << "batch " << b;
  }
}

TEST(OnnxExport, ParametersAreNamedInitializers) {
  Mlp m;
  const std::string bytes = export_module(m, randn({2, 6}));
  for (const char* n : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
    EXPECT_NE(bytes.find(n), std::string::npos) << n;
}

TEST(OnnxExport, ElementwiseViewsAndReductions) {
  manual_seed(3);
  Tensor ex = randn({3, 4, 6});
  CapturedGraph g = capture(ops_fn, {ex});
  onnx::Model back = onnx::Model::from_bytes(onnx::export_bytes(g, {.dynamic = {{"input", {0}}}}), Device::cpu());
  for (int64_t b : {3, 5}) {
    Tensor x = randn({b, 4, 6});
    std::vector<Tensor> want = ops_fn({x}), got = back.run({x});
    ASSERT_EQ(got.size(), 2u);
    const float d0 = max_diff(got[0], want[0]), d1 = max_diff(got[1], want[1]);
    EXPECT_LE(d0, 1e-5f) << g.str();
    EXPECT_LE(d1, 1e-5f);
    std::cout << "ops batch " << b << " max deviations " << d0 << " " << d1 << "\n";
  }
}

TEST(OnnxExport, OpsetsFrom17To21) {
  manual_seed(12);
  Tensor ex = randn({3, 4, 6});
  CapturedGraph g = capture(ops_fn, {ex});
  for (int64_t opset : {18, 21}) {
    onnx::Model back = onnx::Model::from_bytes(onnx::export_bytes(g, {.opset = opset}), Device::cpu());
    EXPECT_LE(max_diff(back.run({ex})[1], ops_fn({ex})[1]), 1e-6f) << "opset " << opset;
  }
  test::expect_error([&] { onnx::export_bytes(g, {.opset = 16}); }, "onnx export", "17 to 21");
}

TEST(OnnxExport, GatherAndFill) {
  manual_seed(5);
  auto fn = [](const std::vector<Tensor>& in) {
    const Device d = in[0].device();
    Tensor idx = tensor<int64_t>({2, 0, 1, 1, 0, 2}, {2, 3}).to(d);
    Tensor z = full({2, 3}, 0.25, {.device = d}) + arange(0, 3, 1, f32, d);
    return std::vector<Tensor>{gather(in[0], 1, idx) * z};
  };
  Tensor x = randn({2, 3});
  onnx::Model back = onnx::Model::from_bytes(onnx::export_bytes(capture(fn, {x})), Device::cpu());
  EXPECT_LE(max_diff(back.run({x})[0], fn({x})[0]), 1e-6f);
}

TEST(OnnxExport, UnsupportedOpIsNamed) {
  CapturedGraph g =
      capture([](const std::vector<Tensor>& x) { return std::vector<Tensor>{cumprod(x[0], 0)}; }, {ones({3})});
  test::expect_error([&] { onnx::export_bytes(g); }, "onnx export",
                     "node 0 (CumProd): the Kiln op CumProd has no ONNX form");
}

TEST(OnnxExport, UnwrittenOutputIsNamed) {
  CapturedGraph g = capture([](const std::vector<Tensor>& x) { return std::vector<Tensor>{argsort(x[0]) * 2}; },
                            {tensor({3.f, 1.f, 2.f})});
  test::expect_error([&] { onnx::export_bytes(g); }, "onnx export", "an output of Sort that the export does not write");
}

TEST(OnnxExport, ReshapeThatFixesADynamicAxisIsAnError) {
  CapturedGraph g = capture(
      [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{relu(x[0]).reshape({3, 4})};
      },
      {ones({2, 6})});
  test::expect_error(
      [&] {
        onnx::export_bytes(g, {.dynamic = {{"input", {0}}}});
      },
      "onnx export", "fixes a dynamic axis");
  onnx::export_bytes(g);  // fine with a fixed batch
  CapturedGraph s = capture(
      [](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0].narrow(0, 0, 1) * 2.0}; }, {ones({2, 6})});
  test::expect_error(
      [&] {
        onnx::export_bytes(s, {.dynamic = {{"input", {0}}}});
      },
      "onnx export", "fixes a dynamic axis");
}

TEST(OnnxExport, OnnxRuntimeRunsMlpAndCnnWithADynamicBatch) {
  if (!test::have_onnxruntime())
    GTEST_SKIP() << "python3 packages onnx and onnxruntime are not installed "
                    "(pip install onnx onnxruntime; scripts/install-deps.sh does)";
  manual_seed(4);
  Mlp mlp;
  const std::string mb = export_module(mlp, randn({3, 6}));
  Cnn cnn;
  cnn.eval();
  const std::string cb = export_module(cnn, randn({2, 1, 8, 8}));
  const std::string ob = onnx::export_bytes(capture(ops_fn, {randn({3, 4, 6})}), {.dynamic = {{"input", {0}}}});
  const std::string ob21 =
      onnx::export_bytes(capture(ops_fn, {randn({3, 4, 6})}), {.dynamic = {{"input", {0}}}, .opset = 21});
  for (int64_t b : {1, 6}) {
    Tensor x = randn({b, 6});
    const float dm = max_diff(test::run_onnxruntime(mb, x, {b, 4}), mlp.forward(x));
    Tensor xi = randn({b, 1, 8, 8});
    const float dc = max_diff(test::run_onnxruntime(cb, xi, {b, 10}), cnn.forward(xi));
    Tensor xo = randn({b + 1, 4, 6});
    const float dop = max_diff(test::run_onnxruntime(ob, xo, {b + 1, 4}), ops_fn({xo})[0]);
    EXPECT_LE(dop, 1e-5f) << "ops batch " << b + 1;
    EXPECT_LE(max_diff(test::run_onnxruntime(ob21, xo, {b + 1, 4}), ops_fn({xo})[0]), 1e-5f) << "opset 21";
    EXPECT_LE(dm, 1e-5f) << "mlp batch " << b;
    EXPECT_LE(dc, 1e-5f) << "cnn batch " << b;
    std::cout << "onnxruntime batch " << b << " max deviation mlp " << dm << " cnn " << dc << " ops " << dop << "\n";
  }
}
