// SPDX-License-Identifier: MIT OR Apache-2.0
// Real architectures exported from PyTorch (scripts/onnx_export_models.py): ResNet-style CNN,
// MobileNetV2-style net, BERT-style encoder (dynamic batch and sequence length), LSTM and a UNet
// with transposed convs and resizes, run through kiln::onnx::Model and compared with ONNX
// Runtime's outputs (max abs error <= 1e-4), for two batch sizes / sequence lengths each (each
// twice, so that the second run of a shape takes the shape-derived values from the cache).
#include <gtest/gtest.h>

#include <cmath>

#include "onnx/onnx_fixtures.h"

using namespace kiln;
namespace fx = kiln_onnx_fixtures;

namespace {
const std::string kDir = std::string(KILN_GOLDEN_DIR) + "/../fixtures/onnx/";

class OnnxModels : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxModels, MatchesOnnxRuntime) {
  const std::string name = GetParam();
  onnx::Model model(kDir + name + "/model.onnx", Device::cpu());
  auto sets = fx::load_sets(kDir + name);
  ASSERT_EQ(sets.size(), 2u) << name;
  // Twice through both sets: the second round runs with shape-derived values from the cache.
  for (size_t r = 0; r < 2 * sets.size(); ++r) {
    const size_t k = r % sets.size();
    auto outs = model.run(sets[k].inputs);
    ASSERT_EQ(outs.size(), sets[k].outputs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_EQ(outs[i].shape(), sets[k].outputs[i].shape()) << name << " set " << k << " output " << i;
      EXPECT_LE(fx::max_abs_err(outs[i], sets[k].outputs[i]), 1e-4) << name << " set " << k << " output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealArchitectures, OnnxModels, ::testing::ValuesIn(fx::model_names()),
                         [](const auto& info) { return info.param; });
// Nested If/Loop/Scan built with onnx.helper (scripts/onnx_export_control_flow.py).
INSTANTIATE_TEST_SUITE_P(ControlFlow, OnnxModels, ::testing::Values(std::string("control_flow")),
                         [](const auto& info) { return info.param; });
}  // namespace
