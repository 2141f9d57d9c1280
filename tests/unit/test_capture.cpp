// SPDX-License-Identifier: MIT OR Apache-2.0
// Graph capture: the capture device records ops, inputs, parameters and constants, and refuses
// host reads of computed values.
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../test_util.h"

using namespace kiln;

namespace {

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  Mlp() : fc1({.in_features = 4, .out_features = 8}), fc2({.in_features = 8, .out_features = 3}) {}
  Tensor forward(const Tensor& x) const { return fc2(relu(fc1(x))); }
  KILN_VISIT(Mlp, fc1, fc2)
};

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST(Capture, DeviceIsListed) {
  EXPECT_EQ(Device::from_string("capture"), capture_device());
  EXPECT_EQ(capture_device().str(), "capture");
}

TEST(Capture, RecordsOpsAndValues) {
  CapturedGraph g = capture(
      [](const std::vector<Tensor>& x) {
        Tensor y = exp(x[0] * 0.5) + x[1];
        return std::vector<Tensor>{y.sum(Dims{-1})};
      },
      {ones({2, 3}), ones({2, 3})}, {.input_names = {"a", "b"}});
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"Mul", "Exp", "Add", "Sum"})) << g.str();
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.values[g.inputs[0]].name, "a");
  EXPECT_EQ(g.values[g.inputs[1]].shape, (Shape{2, 3}));
  // The Mul reads input a and the constant 0.5, with its bytes.
  const CapturedNode& mul = g.nodes[0];
  EXPECT_EQ(mul.inputs[0], g.inputs[0]);
  const CapturedValue& c = g.values[mul.inputs[1]];
  ASSERT_EQ(c.kind, CapturedValue::Kind::Constant);
  ASSERT_EQ(c.bytes.size(), 4u);
  float half = 0;
  std::memcpy(&half, c.bytes.data(), 4);
  EXPECT_EQ(half, 0.5f);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].value, g.nodes[3].outputs[0]);
  EXPECT_EQ(g.outputs[0].shape, (Shape{2}));
  EXPECT_EQ(g.output_names[0], "output");
}

TEST(Capture, ConstantsKeepTheirBytes) {
  CapturedGraph g = capture(
      [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{x[0] + tensor({1.f, 2.f, 3.f}).to(x[0].device())};
      },
      {zeros({2, 3})});
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  const CapturedValue& c = g.values[g.nodes[0].inputs[1]];
  ASSERT_EQ(c.kind, CapturedValue::Kind::Constant);
  std::vector<float> v(3);
  std::memcpy(v.data(), c.bytes.data(), 12);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
}

TEST(Capture, HostReadNamesTheOp) {
  test::expect_error(
      [] {
        capture(
            [](const std::vector<Tensor>& x) {
              Tensor s = x[0].sum();
              if (s.item<float>() > 0) return std::vector<Tensor>{x[0]};
              return std::vector<Tensor>{-x[0]};
            },
            {ones({3})});
      },
      "capture", "cannot depend on values read on the host: the value read was computed by Sum");
  // The device is usable again after the error.
  CapturedGraph g = capture([](const std::vector<Tensor>& x) { return std::vector<Tensor>{relu(x[0])}; }, {ones({3})});
  EXPECT_EQ(g.op_names(), std::vector<std::string>{"Relu"});
}

TEST(Capture, ModuleParametersByStateDictName) {
  Mlp m;
  const Tensor w_before = m.fc1.weight;
  Tensor x = randn({2, 4});
  CapturedGraph g =
      capture(m, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{m.forward(in[0])}; }, {x});
  std::vector<std::string> names;
  for (int64_t p : g.params) names.push_back(g.values[p].name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(g.values[g.params[0]].shape, (Shape{8, 4}));
  EXPECT_EQ(g.values[g.params[0]].bytes.size(), 32u * 4);
  EXPECT_TRUE(has(g.op_names(), "MatMul")) << g.str();
  EXPECT_TRUE(has(g.op_names(), "Relu"));
  // The module is back on its device with the same tensors.
  EXPECT_TRUE(m.fc1.weight.device() == w_before.device());
  EXPECT_EQ(&m.fc1.weight.impl(), &w_before.impl());
  EXPECT_EQ(m.forward(x).shape(), (Shape{2, 3}));
}

TEST(Capture, TensorFromOutsideIsAnError) {
  Tensor outside = relu(ones({3}).to(capture_device()));
  test::expect_error(
      [&] { capture([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] + outside}; }, {ones({3})}); },
      "Add", "computed outside the captured function (by Relu)");
}

TEST(Capture, OpsOnConstantsAreFoldedAndReadable) {
  // Shape arithmetic on constants (as an imported ONNX model's Shape -> Gather -> Concat ->
  // Reshape) is computed while capturing, so the function may read it back.
  CapturedGraph g = capture(
      [](const std::vector<Tensor>& x) {
        const Device d = x[0].device();
        Tensor dims = cat({tensor<int64_t>({3}).to(d), tensor<int64_t>({2}).to(d) * 2}, 0);
        const std::vector<int64_t> v = dims.to_vector<int64_t>();
        return std::vector<Tensor>{relu(x[0]).reshape({v[0], v[1]}) + tensor({1.f, 2.f, 3.f, 4.f}).to(d).exp()};
      },
      {ones({2, 6})});
  EXPECT_EQ(g.op_names(), (std::vector<std::string>{"Relu", "Add"})) << g.str();
  const CapturedValue& c = g.values[g.nodes[1].inputs[1]];
  ASSERT_EQ(c.kind, CapturedValue::Kind::Constant);
  std::vector<float> e(4);
  std::memcpy(e.data(), c.bytes.data(), 16);
  EXPECT_FLOAT_EQ(e[3], std::exp(4.f));
  // An op that reads an input is still recorded, and reading it is still an error.
  test::expect_error(
      [] {
        capture(
            [](const std::vector<Tensor>& x) {
              (void)(x[0] * 2).to_vector<float>();
              return std::vector<Tensor>{x[0]};
            },
            {ones({3})});
      },
      "capture", "computed by Mul");
}
