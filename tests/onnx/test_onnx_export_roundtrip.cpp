// SPDX-License-Identifier: MIT OR Apache-2.0
// Import -> export -> import: the five real-architecture ONNX models of test_onnx_models.cpp
// (resnet, mobilenet, bert, lstm, unet), run by kiln::onnx::Model on the capture device,
// exported again and run by Kiln's importer and by ONNX Runtime against the fixture's outputs
// (ONNX Runtime's on the original). The shape arithmetic of bert and lstm (Shape, Gather,
// Concat feeding Reshape, ConstantOfShape) is folded while capturing. A model is exported once
// per input shape of its test sets, with a dynamic batch where the example batch is above 1;
// that export is also run by ONNX Runtime at two more batch sizes against the original model in
// ONNX Runtime. The LSTM's dynamic batch lies inside its time-major rows [T*B, 4H], and its zero
// initial state, made with the example's batch, is broadcast (docs/export.md).
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/onnx_export.h>

#include <fstream>
#include <iterator>
#include <map>

#include "onnx/onnx_fixtures.h"
#include "test_paths.h"
#include "unit/onnxruntime_run.h"

using namespace kiln;
namespace fx = kiln_onnx_fixtures;

namespace {
const std::string kDir = std::string(KILN_GOLDEN_DIR) + "/../fixtures/onnx/";

/// The input shapes of a set without their batch dims.
std::string signature(const fx::TestSet& s) {
  std::string k;
  for (const Tensor& x : s.inputs) {
    Shape sh = x.shape();
    if (!sh.empty()) sh[0] = 0;
    k += to_string(sh);
  }
  return k;
}

/// The inputs repeated along dim 0 to batch b.
std::vector<Tensor> rebatch(const std::vector<Tensor>& xs, int64_t b) {
  std::vector<Tensor> out;
  for (const Tensor& x : xs) {
    std::vector<Tensor> parts;
    for (int64_t n = 0; n < b; n += x.size(0)) parts.push_back(x);
    out.push_back(cat(parts, 0).narrow(0, 0, b).contiguous());
  }
  return out;
}

double worst(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  EXPECT_EQ(got.size(), want.size());
  double m = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    m = std::max(m, fx::max_abs_err(got[i].to(f32), want[i].to(f32)));
  return m;
}
}  // namespace

class OnnxRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxRoundTrip, ImportExportImport) {
  const std::string name = GetParam(), path = kDir + name + "/model.onnx";
  onnx::Model model(path, capture_device(), {.optimize = false});
  const std::vector<std::string> names = model.input_names();
  auto sets = fx::load_sets(kDir + name);
  // The example of each input signature: its set with the largest batch.
  std::map<std::string, size_t> example;
  for (size_t k = 0; k < sets.size(); ++k) {
    auto [it, fresh] = example.try_emplace(signature(sets[k]), k);
    if (sets[k].inputs[0].size(0) > sets[it->second].inputs[0].size(0)) it->second = k;
  }
  for (const auto& [sig, k] : example) {
    const fx::TestSet& ex = sets[k];
    const int64_t batch = ex.inputs[0].size(0);
    onnx::ExportOptions o{.input_names = names};
    if (batch > 1)
      for (const std::string& n : names) o.dynamic[n] = {0};
    CapturedGraph g =
        capture([&](const std::vector<Tensor>& x) { return model.run(x); }, ex.inputs, {.input_names = names});
    const std::string bytes = onnx::export_bytes(g, o);
    onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
    for (const fx::TestSet& set : sets) {
      if (signature(set) != sig || (batch == 1 && set.inputs[0].size(0) != 1)) continue;
      const int64_t b = set.inputs[0].size(0);
      const double err = worst(back.run(set.inputs), set.outputs);
      EXPECT_LE(err, 1e-5) << name << " batch " << b;
      std::cout << name << " " << sig << " batch " << b << " Kiln max deviation from the fixture " << err << "\n";
      if (!test::have_onnxruntime()) continue;
      const double ort = worst(test::run_onnxruntime(bytes, set.inputs), set.outputs);
      EXPECT_LE(ort, 1e-5) << name << " batch " << b << " in ONNX Runtime";
      std::cout << name << " " << sig << " batch " << b << " ONNX Runtime max deviation from the fixture " << ort
                << "\n";
    }
    if (batch == 1 || !test::have_onnxruntime()) continue;
    // Batch sizes the fixture lacks: the original model in ONNX Runtime is the reference.
    std::ifstream f(path, std::ios::binary);
    const std::string original((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (int64_t b : {int64_t{2}, batch + 3}) {
      const std::vector<Tensor> xs = rebatch(ex.inputs, b);
      const double err = worst(test::run_onnxruntime(bytes, xs), test::run_onnxruntime(original, xs));
      EXPECT_LE(err, 1e-5) << name << " batch " << b << " against the original in ONNX Runtime";
      std::cout << name << " " << sig << " batch " << b << " ONNX Runtime max deviation from the original " << err
                << "\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealArchitectures, OnnxRoundTrip, ::testing::ValuesIn(fx::model_names()),
                         [](const auto& info) { return info.param; });
