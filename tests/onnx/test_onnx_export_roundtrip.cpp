// SPDX-License-Identifier: MIT OR Apache-2.0
// Import -> export -> import: real-architecture ONNX models of test_onnx_models.cpp, run by
// kiln::onnx::Model on the capture device, exported again with a dynamic batch, and run once
// more at both of the fixture's batch sizes. The models whose importer computes shapes from
// tensor values on the device (bert, lstm, unet) cannot be captured yet.
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/onnx_export.h>

#include "onnx/onnx_fixtures.h"
#include "unit/onnxruntime_run.h"

using namespace kiln;
namespace fx = kiln_onnx_fixtures;

namespace {
const std::string kDir = std::string(KILN_GOLDEN_DIR) + "/../fixtures/onnx/";
}

class OnnxRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxRoundTrip, ImportExportImport) {
  const std::string name = GetParam();
  onnx::Model model(kDir + name + "/model.onnx", capture_device(), {.optimize = false});
  auto sets = fx::load_sets(kDir + name);
  const fx::TestSet& example = sets[0].inputs[0].size(0) > 1 ? sets[0] : sets[1];  // a batch above 1
  CapturedGraph g = capture([&](const std::vector<Tensor>& x) { return model.run(x); }, example.inputs);
  const std::string bytes = onnx::export_bytes(g, {.dynamic = {{"input", {0}}}});
  onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
  for (const fx::TestSet& set : sets) {
    auto outs = back.run(set.inputs);
    ASSERT_EQ(outs.size(), set.outputs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const double err = fx::max_abs_err(outs[i], set.outputs[i]);
      EXPECT_LE(err, 1e-5) << name << " output " << i;
      std::cout << name << " batch " << set.inputs[0].size(0) << " max deviation from the fixture " << err << "\n";
    }
    if (!test::have_onnxruntime()) continue;
    // The exported model in ONNX Runtime (the fixture's outputs are ONNX Runtime's on the original).
    const double err =
        fx::max_abs_err(test::run_onnxruntime(bytes, set.inputs[0], set.outputs[0].shape()), set.outputs[0]);
    EXPECT_LE(err, 1e-5) << name << " in ONNX Runtime";
    std::cout << name << " batch " << set.inputs[0].size(0) << " ONNX Runtime max deviation " << err << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(RealArchitectures, OnnxRoundTrip, ::testing::Values("resnet", "mobilenet"),
                         [](const auto& info) { return info.param; });
