// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::onnx::Model on devices other than the CPU: the run-time path goes through the op IR
// only, so the real-architecture fixtures (tests/fixtures/onnx) load and run anywhere. On the
// null device they give the shapes and dtypes of ONNX Runtime's outputs without computing
// values; on the subset device (elementwise ops only, everything else falls back to the CPU,
// a Conv with a fused epilogue as its op sequence) and on Vulkan they give the CPU's outputs.
#include <gtest/gtest.h>

#include <algorithm>

#include "onnx/onnx_builder.h"
#include "onnx/onnx_fixtures.h"
#include "test_paths.h"

using namespace kiln;
namespace fx = kiln_onnx_fixtures;

namespace {

const std::string kDir = std::string(KILN_GOLDEN_DIR) + "/../fixtures/onnx/";

std::vector<float> floats(const Tensor& t) { return t.contiguous().to_vector<float>(); }

std::vector<Tensor> to_device(const std::vector<Tensor>& xs, const Device& d) {
  std::vector<Tensor> r;
  for (const Tensor& x : xs) r.push_back(x.to(d));
  return r;
}

class OnnxDevices : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxDevices, NullDeviceInfersOutputShapesAndDtypes) {
  const std::string name = GetParam();
  const Device null = Device::null();
  onnx::Model model(kDir + name + "/model.onnx", null);
  EXPECT_EQ(model.device(), null);
  auto sets = fx::load_sets(kDir + name);
  ASSERT_FALSE(sets.empty()) << name;
  for (size_t k = 0; k < sets.size(); ++k)
    for (int round = 0; round < 2; ++round) {  // the second round: shape-derived values cached
      auto outs = model.run(to_device(sets[k].inputs, null));
      ASSERT_EQ(outs.size(), sets[k].outputs.size()) << name;
      for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_EQ(outs[i].device(), null) << name << " output " << i;
        EXPECT_EQ(outs[i].shape(), sets[k].outputs[i].shape()) << name << " set " << k << " output " << i;
        EXPECT_EQ(outs[i].dtype(), sets[k].outputs[i].dtype()) << name << " set " << k << " output " << i;
      }
    }
}

TEST_P(OnnxDevices, SubsetDeviceGivesTheCpuOutputs) {
  const std::string name = GetParam();
  const Device sub = Device::from_string("subset");
  onnx::Model on_cpu(kDir + name + "/model.onnx", Device::cpu()), on_sub(kDir + name + "/model.onnx", sub);
  auto sets = fx::load_sets(kDir + name);
  ASSERT_FALSE(sets.empty()) << name;
  reset_fallback_counts();
  for (size_t r = 0; r < 2 * sets.size(); ++r) {  // each set twice: the second runs the kept ops
    const auto& set = sets[r / 2];
    auto want = on_cpu.run(set.inputs);
    auto got = on_sub.run(to_device(set.inputs, sub));
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device(), sub) << name << " output " << i;
      const Tensor g = got[i].to(Device::cpu());
      EXPECT_EQ(g.dtype(), want[i].dtype()) << name << " output " << i;
      EXPECT_LE(fx::max_abs_err(g, want[i]), 1e-4) << name << " output " << i;
    }
  }
  // Whatever the subset device lacks ran on the CPU, counted.
  EXPECT_FALSE(fallback_counts().empty()) << name;
}

// On Vulkan (lavapipe in CI: scripts/install-deps.sh) every fixture model runs through the
// device's kernels and the fallback and matches the CPU within 1e-4.
TEST_P(OnnxDevices, VulkanGivesTheCpuOutputs) {
  const std::vector<std::string> devices = Device::list();
  if (std::find(devices.begin(), devices.end(), "vulkan") == devices.end()) GTEST_SKIP() << "no Vulkan device here";
  const std::string name = GetParam();
  const Device vk = Device::vulkan();
  onnx::Model on_cpu(kDir + name + "/model.onnx", Device::cpu()), on_vk(kDir + name + "/model.onnx", vk);
  auto sets = fx::load_sets(kDir + name);
  ASSERT_FALSE(sets.empty()) << name;
  for (size_t r = 0; r < 2 * sets.size(); ++r) {  // each set twice: the second runs the kept ops
    const auto& set = sets[r / 2];
    auto want = on_cpu.run(set.inputs);
    auto got = on_vk.run(to_device(set.inputs, vk));
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device(), vk) << name << " output " << i;
      const Tensor g = got[i].to(Device::cpu());
      EXPECT_EQ(g.dtype(), want[i].dtype()) << name << " output " << i;
      EXPECT_LE(fx::max_abs_err(g, want[i]), 1e-4) << name << " output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxDevices, ::testing::ValuesIn(fx::model_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The fused forms of the run-time plan (Conv + Relu, Conv + residual Add, Conv pairs, Conv +
// MaxPool, MatMul + bias, Gemm) reach a device without them as their op sequences: the subset
// device's outputs equal the CPU's, and its fallback counts name the Conv epilogue's composite.
TEST(OnnxDevicesFused, FusedStepsRunAsOpSequencesOnTheSubsetDevice) {
  using namespace kiln::onnx::test;
  manual_seed(21);
  auto weight = [](Msg& g, const std::string& name, std::vector<int64_t> s) {
    g.msg(5, tensor_f32(name, s, floats(randn(Shape(s.begin(), s.end())) * 0.3)));
  };
  auto conv = [](std::vector<std::string> in, const std::string& out, int64_t pad) {
    Msg n = node("Conv", std::move(in), {out}, out);
    n.msg(5, attr_ints("pads", {pad, pad, pad, pad}));
    return n;
  };
  Msg g;
  Msg pool = node("MaxPool", {"r0"}, {"p"}, "pool");
  pool.msg(5, attr_ints("kernel_shape", {3, 3}))
      .msg(5, attr_ints("strides", {2, 2}))
      .msg(5, attr_ints("pads", {1, 1, 1, 1}));
  Msg gemm = node("Gemm", {"f", "wg", "bg"}, {"z"}, "gemm");
  gemm.msg(5, attr_i("transB", 1));
  g.msg(1, conv({"x", "w0", "b0"}, "c0", 1))  // Conv + Relu + MaxPool
      .msg(1, node("Relu", {"c0"}, {"r0"}, "relu0"))
      .msg(1, pool)
      .msg(1, conv({"p", "w1", "b1"}, "c1", 1))  // Conv + Relu + Conv + residual Add + Relu
      .msg(1, node("Relu", {"c1"}, {"r1"}, "relu1"))
      .msg(1, conv({"r1", "w2"}, "c2", 1))
      .msg(1, node("Add", {"c2", "p"}, {"s"}, "add"))
      .msg(1, node("Relu", {"s"}, {"y"}, "relu2"))
      .msg(1, node("Flatten", {"y"}, {"f"}, "flat"))
      .msg(1, gemm)
      .msg(1, node("MatMul", {"z", "wm"}, {"m"}, "mm"))  // MatMul + bias Add
      .msg(1, node("Add", {"m", "bm"}, {"out"}, "bias"));
  weight(g, "w0", {16, 3, 3, 3});
  weight(g, "b0", {16});
  weight(g, "w1", {16, 16, 3, 3});
  weight(g, "b1", {16});
  weight(g, "w2", {16, 16, 3, 3});
  weight(g, "wg", {10, 16 * 5 * 5});
  weight(g, "bg", {10});
  weight(g, "wm", {10, 7});
  weight(g, "bm", {7});
  g.msg(11, value_info("x", {-1, 3, 10, 10})).msg(12, value_info("out", {-1, 7}));
  const std::string bytes = model(g);
  auto on_cpu = onnx::Model::from_bytes(bytes, Device::cpu());
  const auto lines = on_cpu.plan();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "Conv c0 + Relu + MaxPool pool"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "Conv c1 + Relu + Conv c2 + residual Add + Relu"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "MatMul mm + bias Add"), lines.end());
  const Device sub = Device::from_string("subset");
  auto on_sub = onnx::Model::from_bytes(bytes, sub);
  auto on_null = onnx::Model::from_bytes(bytes, Device::null());
  for (int64_t n : {1, 3, 3, 1}) {  // a second run of a shape runs the ops its steps kept
    manual_seed(n);
    Tensor x = randn({n, 3, 10, 10});
    reset_fallback_counts();
    const Tensor want = on_cpu.run({x})[0], got = on_sub.run({x.to(sub)})[0];
    EXPECT_EQ(got.device(), sub);
    EXPECT_LE(fx::max_abs_err(got.to(Device::cpu()), want), 1e-5) << "n=" << n;
    bool composite = false;
    for (const auto& [what, count] : fallback_counts()) composite = composite || what == "subset: Conv (composite)";
    EXPECT_TRUE(composite) << "n=" << n;
    const Tensor shape_only = on_null.run({x.to(Device::null())})[0];
    EXPECT_EQ(shape_only.shape(), want.shape());
    EXPECT_EQ(shape_only.dtype(), want.dtype());
  }
}

}  // namespace
