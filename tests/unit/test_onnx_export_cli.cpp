// SPDX-License-Identifier: MIT OR Apache-2.0
// `kiln-onnx export`: each known model type (the models of examples/, a transformer encoder
// layer, an LSTM) saved as safetensors with its config, exported by the CLI with a dynamic batch
// and run by ONNX Runtime at two batch sizes against Kiln's forward in eval mode.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/onnx.h>
#include <kiln/store.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../../tools/kiln-onnx/models.h"
#include "onnxruntime_run.h"
#include "test_paths.h"

using namespace kiln;
namespace om = kiln::onnx_models;
namespace fs = std::filesystem;

namespace {

struct CliResult {
  int rc;
  std::string out;
};

/// Runs `kiln-onnx export ARGS`; its exit status and its stdout and stderr together.
CliResult kiln_onnx(const std::string& args) {
  const std::string cmd = std::string(KILN_ONNX_TOOL) + " " + args + " 2>&1";
  CliResult r{-1, ""};
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class ExportCli : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("kiln_export_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Builds the model of `json`, gives its batch norms running statistics, saves the config and
  /// the weights, exports with the CLI (extra arguments `args`) and compares ONNX Runtime's
  /// outputs with Kiln's at batch sizes b1 and b2. Returns the worst deviation.
  float check(const std::string& type, const std::string& json, const std::string& args = "", int64_t b1 = 1,
              int64_t b2 = 5, int64_t seq_len = 8) {
    manual_seed(21);
    om::Exportable m = om::make_model(json, 2, seq_len);
    for (auto& [name, t] : m.module->named_buffers()) {
      if (name.ends_with("running_mean")) t.copy_(randn(t.shape()) * 0.1);
      if (name.ends_with("running_var")) t.copy_(rand(t.shape()) + 0.5);
    }
    m.module->eval();
    const fs::path cfg = dir / (type + ".json"), w = dir / (type + ".safetensors"), out = dir / (type + ".onnx");
    std::ofstream(cfg) << json;
    store::save(*m.module, w.string());
    const CliResult r = kiln_onnx("export " + cfg.string() + " " + w.string() + " -o " + out.string() + " " + args);
    EXPECT_EQ(r.rc, 0) << r.out;
    std::cout << r.out;
    if (r.rc != 0 || !test::have_onnxruntime()) return 0;
    std::ifstream f(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    float worst = 0;
    for (int64_t b : {b1, b2}) {
      Shape s = m.input_shape;
      s[static_cast<size_t>(m.batch_axis)] = b;
      Tensor x = randn(s);
      const std::vector<Tensor> got = test::run_onnxruntime(bytes, {x});
      const Tensor want = m.forward(x);
      EXPECT_EQ(got.size(), 1u);
      if (got.empty()) continue;
      EXPECT_EQ(got[0].shape(), want.shape()) << type << " batch " << b;
      if (got[0].shape() != want.shape()) continue;
      const float d = (got[0] - want).abs().max().item<float>();
      EXPECT_LE(d, 1e-5f) << type << " batch " << b;
      std::cout << type << " ONNX Runtime batch " << b << " max deviation " << d << "\n";
      worst = std::max(worst, d);
    }
    return worst;
  }
};

}  // namespace

TEST_F(ExportCli, FashionMnistNetAsTheExampleSavesIt) {
  // The example's own sizes (the config's defaults), so its runs/<name>/model.safetensors loads.
  check("FashionMnistNet", nn::to_json(om::FashionMnistNetConfig{}));
}

TEST_F(ExportCli, CustomTrainingLoopNet) {
  check("TrainingLoopNet", nn::to_json(om::TrainingLoopNetConfig{.conv1 = 8, .conv2 = 16, .hidden = 32}));
}

TEST_F(ExportCli, ImageFolderCnn) { check("ImageFolderCnn", nn::to_json(om::ImageFolderCnnConfig{})); }

TEST_F(ExportCli, Mlps) {
  check("Mlp", nn::to_json(om::MlpConfig{}));  // examples/custom-renderer
  check("Mlp", nn::to_json(om::MlpConfig{.in = 10, .hidden = {32, 32}, .out = 1, .output_name = "out"}),
        "--fold-constants");  // examples/regression-csv
}

TEST_F(ExportCli, TransformerEncoderLayer) {
  check("TransformerLayer",
        nn::to_json(nn::TransformerLayerConfig{
            .d_model = 16, .nhead = 4, .dim_feedforward = 32, .activation = "gelu", .batch_first = true}),
        "--seq-len 6", 1, 4, 6);
}

TEST_F(ExportCli, Lstm) {
  check("LSTM", nn::to_json(om::LSTMConfig{.input_size = 3, .hidden_size = 5, .num_layers = 2}), "--seq-len 4", 1, 3,
        4);
}

TEST_F(ExportCli, RegressionMlpNamesMatchTheExample) {
  om::Exportable m =
      om::make_model(nn::to_json(om::MlpConfig{.in = 10, .hidden = {32, 32}, .out = 1, .output_name = "out"}), 2, 8);
  std::vector<std::string> names;
  for (auto& [name, t] : m.module->named_parameters()) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"}));
}

TEST_F(ExportCli, Errors) {
  const fs::path cfg = dir / "bad.json", w = dir / "w.safetensors", out = dir / "o.onnx";
  std::ofstream(cfg) << R"({"type": "Resnet50", "config": {}})";
  CliResult r = kiln_onnx("export " + cfg.string() + " " + w.string() + " -o " + out.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("unknown model type 'Resnet50'; known types: FashionMnistNet"), std::string::npos) << r.out;
  // Weights of another model: the loader's report.
  om::Exportable small = om::make_model(nn::to_json(om::MlpConfig{.in = 4, .hidden = {3}, .out = 2}), 2, 8);
  store::save(*small.module, w.string());
  std::ofstream(cfg) << nn::to_json(om::MlpConfig{.in = 5, .hidden = {3}, .out = 2});
  r = kiln_onnx("export " + cfg.string() + " " + w.string() + " -o " + out.string());
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("fc1.weight"), std::string::npos) << r.out;
  // Usage errors exit with 2.
  EXPECT_EQ(kiln_onnx("export " + cfg.string()).rc, 2);
  EXPECT_EQ(kiln_onnx("export " + cfg.string() + " " + w.string() + " -o " + out.string() + " --batch 0").rc, 2);
  // A dynamic batch needs an example batch above 1.
  std::ofstream(cfg) << nn::to_json(om::MlpConfig{.in = 4, .hidden = {3}, .out = 2});
  r = kiln_onnx("export " + cfg.string() + " " + w.string() + " -o " + out.string() + " --batch 1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("--static"), std::string::npos) << r.out;
  EXPECT_EQ(kiln_onnx("export " + cfg.string() + " " + w.string() + " -o " + out.string() + " --batch 1 --static").rc,
            0);
}
