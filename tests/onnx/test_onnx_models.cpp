// SPDX-License-Identifier: MIT OR Apache-2.0
// Real architectures exported from PyTorch (scripts/onnx_export_models.py): ResNet-style CNN,
// MobileNetV2-style net, BERT-style encoder (dynamic batch and sequence length), LSTM and a UNet
// with transposed convs and resizes, run through kiln::onnx::Model and compared with ONNX
// Runtime's outputs (max abs error <= 1e-4), for two batch sizes / sequence lengths each (each
// twice, so that the second run of a shape takes the shape-derived values from the cache).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "onnx/onnx_fixtures.h"
#include "test_paths.h"

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
      // On the model's device (the default, fused CPU), whichever device the plan runs on.
      EXPECT_EQ(outs[i].device(), Device::cpu()) << name << " output " << i;
      EXPECT_EQ(outs[i].shape(), sets[k].outputs[i].shape()) << name << " set " << k << " output " << i;
      EXPECT_LE(fx::max_abs_err(outs[i], sets[k].outputs[i]), 1e-4) << name << " set " << k << " output " << i;
    }
  }
}

std::vector<std::vector<double>> values(const std::vector<Tensor>& outs) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : outs) v.push_back(t.to_vector<double>());
  return v;
}

/// The outputs of a first run of each test set of a model.
std::vector<std::vector<std::vector<double>>> first_runs(const onnx::Model& model,
                                                         const std::vector<fx::TestSet>& sets) {
  std::vector<std::vector<std::vector<double>>> first;
  for (const auto& set : sets) first.push_back(values(model.run(set.inputs)));
  return first;
}

// A Conv, MatMul or Gemm step keeps the op it issued and runs it again while its inputs keep
// their layouts (Note [Prepared steps] in src/onnx/prepared.h): runs of one shape in a row and
// runs that alternate shapes (each rebuilds its ops) give the first run's outputs exactly.
TEST_P(OnnxModels, RepeatedRunsGiveTheFirstRunsOutputs) {
  const std::string name = GetParam();
  onnx::Model model(kDir + name + "/model.onnx", Device::cpu());
  auto sets = fx::load_sets(kDir + name);
  const auto first = first_runs(model, sets);
  for (size_t r = 0; r < 3 * sets.size(); ++r) {
    const size_t k = r / 3;  // three in a row of each shape
    EXPECT_EQ(values(model.run(sets[k].inputs)), first[k]) << name << " set " << k << " run " << r;
  }
  for (size_t r = 0; r < 2 * sets.size(); ++r) {
    const size_t k = r % sets.size();  // alternating
    EXPECT_EQ(values(model.run(sets[k].inputs)), first[k]) << name << " set " << k << " run " << r;
  }
}

// So do runs from two threads at once (a step whose op another run holds builds its own).
TEST_P(OnnxModels, ConcurrentRunsGiveTheFirstRunsOutputs) {
  const std::string name = GetParam();
  onnx::Model model(kDir + name + "/model.onnx", Device::cpu());
  auto sets = fx::load_sets(kDir + name);
  const auto first = first_runs(model, sets);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (size_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 8; ++r) {
        const size_t k = (t + static_cast<size_t>(r / 4)) % sets.size();
        if (values(model.run(sets[k].inputs)) != first[k]) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0) << name;
}

TEST(OnnxModelDevices, PlainAndFusedCpuGiveTheSameOutputsOnTheirOwnDevice) {
  // The plan runs on the plain CPU either way; inputs and outputs share memory across the
  // device change (no copy), and outputs stay usable with tensors of the caller's device.
  const std::string name = fx::model_names().front();
  auto sets = fx::load_sets(kDir + name);
  const Device plain = Device::cpu().without_fusion(), fused = plain.fusion();
  onnx::Model mp(kDir + name + "/model.onnx", plain), mf(kDir + name + "/model.onnx", fused);
  EXPECT_EQ(mp.device(), plain);
  EXPECT_EQ(mf.device(), fused);
  std::vector<Tensor> in_f;
  for (const Tensor& x : sets[0].inputs) in_f.push_back(x.to(fused));
  auto op = mp.run(sets[0].inputs), of = mf.run(in_f);
  ASSERT_EQ(op.size(), of.size());
  for (size_t i = 0; i < op.size(); ++i) {
    EXPECT_EQ(of[i].device(), fused);
    EXPECT_EQ(op[i].to_vector<float>(), of[i].to_vector<float>()) << "output " << i;
    Tensor y = of[i] * 2.0 + ones_like(of[i]);  // mixes with a tensor made on the caller's device
    EXPECT_EQ(y.device(), fused);
  }
}

INSTANTIATE_TEST_SUITE_P(RealArchitectures, OnnxModels, ::testing::ValuesIn(fx::model_names()),
                         [](const auto& info) { return info.param; });
// Nested If/Loop/Scan built with onnx.helper (scripts/onnx_export_control_flow.py).
INSTANTIATE_TEST_SUITE_P(ControlFlow, OnnxModels, ::testing::Values(std::string("control_flow")),
                         [](const auto& info) { return info.param; });
}  // namespace
