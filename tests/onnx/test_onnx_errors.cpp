// SPDX-License-Identifier: MIT OR Apache-2.0
// The ONNX loader on bad input (truncated and corrupt protobuf, missing initializers, dangling
// inputs, unknown domains, cycles, unsupported ops) and the run-time API on small models built
// in code (dynamic shapes, named inputs, declared shapes).
#include <gtest/gtest.h>

#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::onnx::test;

namespace {

std::string relu_model() {
  Msg g;
  g.msg(1, node("Relu", {"x"}, {"y"}, "relu0")).bytes(2, "g");
  g.msg(11, value_info("x", {-1, 3})).msg(12, value_info("y", {-1, 3}));
  return model(g);
}

// y = reshape(x, [shape(x)[0], -1]) + b: batch size read from data at run time.
std::string dynamic_model() {
  Msg g;
  Msg gather = node("Gather", {"s", "idx0"}, {"n"}, "take_batch");
  gather.msg(5, attr_i("axis", 0));
  g.msg(1, node("Shape", {"x"}, {"s"}, "shape"))
      .msg(1, gather)
      .msg(1, node("Unsqueeze", {"n", "zero"}, {"n1"}, "unsq"))
      .msg(1, node("Concat", {"n1", "minus1"}, {"target"}, "cat").msg(5, attr_i("axis", 0)))
      .msg(1, node("Reshape", {"x", "target"}, {"flat"}, "reshape"))
      .msg(1, node("Add", {"flat", "b"}, {"y"}, "add"));
  g.msg(5, tensor_i64("zero", {1}, {0})).msg(5, tensor_i64("idx0", {}, {0})).msg(5, tensor_i64("minus1", {1}, {-1}));
  g.msg(5, tensor_f32("b", {6}, {1, 2, 3, 4, 5, 6}));
  g.msg(11, value_info("x", {-1, 2, 3})).msg(12, value_info("y", {-1, 6}));
  return model(g);
}

}  // namespace

TEST(OnnxModel, RunsAndReportsShapes) {
  auto m = onnx::Model::from_bytes(relu_model(), Device::cpu());
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].dtype, f32);
  ASSERT_EQ(m.inputs()[0].shape.size(), 2u);
  EXPECT_FALSE(m.inputs()[0].shape[0].value.has_value());
  EXPECT_EQ(m.inputs()[0].shape[0].param, "N");
  EXPECT_EQ(m.inputs()[0].shape[1].value, 3);
  EXPECT_EQ(m.output_names(), std::vector<std::string>{"y"});
  EXPECT_EQ(m.opset(), 13);
  Tensor x = tensor<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  auto y = m.run({x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(equal(y[0], relu(x)));
  auto y2 = m.run(std::map<std::string, Tensor>{{"x", x}});
  EXPECT_TRUE(equal(y2[0], relu(x)));
  EXPECT_ERROR(m.run(std::vector<Tensor>{}), "takes 1 inputs");
  EXPECT_ERROR(m.run(std::map<std::string, Tensor>{{"z", x}}), "no input named 'z'");
}

TEST(OnnxModel, DynamicBatchFromShapeChain) {
  auto m = onnx::Model::from_bytes(dynamic_model(), Device::cpu());
  Tensor b = tensor<float>({1, 2, 3, 4, 5, 6}, {6});
  for (int64_t n : {1, 2, 5, 2, 1}) {  // repeated shapes reuse the cached shape chain
    Tensor x = arange(n * 6, f32).reshape({n, 2, 3});
    auto y = m.run({x});
    ASSERT_EQ(y[0].shape(), (Shape{n, 6}));
    EXPECT_TRUE(allclose(y[0], x.reshape({n, 6}) + b));
  }
}

TEST(OnnxErrors, TruncatedProtobufEveryPrefix) {
  std::string bytes = dynamic_model();
  int errors = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      onnx::Model::from_bytes(bytes.substr(0, n), Device::cpu());
    } catch (const Error& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find("[onnx]"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(errors, static_cast<int>(bytes.size()));  // no prefix is a complete model
  EXPECT_ERROR(onnx::Model::from_bytes(bytes.substr(0, bytes.size() - 3), Device::cpu()), "ModelProto (field 7)");
}

TEST(OnnxErrors, CorruptBytesThrowOrLoad) {
  std::string bytes = dynamic_model();
  uint32_t seed = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string b = bytes;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1664525u + 1013904223u;
      b[(seed >> 8) % b.size()] = static_cast<char>(seed >> 24);
    }
    try {
      auto m = onnx::Model::from_bytes(b, Device::cpu());
      if (m.inputs().size() == 1) m.run({ones({2, 2, 3})});
    } catch (const Error&) {
    }
  }
}

TEST(OnnxErrors, HostileSizesAndBadTensors) {
  // A length prefix far beyond the buffer.
  EXPECT_ERROR(onnx::Model::from_bytes(std::string("\x3a\xff\xff\xff\xff\x0f", 6), Device::cpu()), "runs past the end");
  // raw_data of the wrong size for its dims; a huge dim without data.
  Msg g;
  g.msg(1, node("Relu", {"w"}, {"y"}, "r")).msg(5, tensor_f32("w", {1000000000, 1000}, {1, 2}));
  g.msg(12, value_info("y", {2}));
  EXPECT_ERROR(onnx::Model::from_bytes(model(g), Device::cpu()), "tensor 'w'");
  Msg g2;
  g2.msg(1, node("Relu", {"w"}, {"y"}, "r")).msg(5, tensor_f32("w", {3}, {1, 2}));
  g2.msg(12, value_info("y", {2}));
  EXPECT_ERROR(onnx::Model::from_bytes(model(g2), Device::cpu()), "raw_data has 8 bytes, expected 12");
  EXPECT_ERROR(onnx::Model::from_bytes(Msg().varint(1, 8).str(), Device::cpu()), "has no graph");
}

TEST(OnnxErrors, MissingInitializerNamesTheNode) {
  Msg g;
  g.msg(1, node("Add", {"x", "weight"}, {"y"}, "add_bias")).msg(11, value_info("x", {2})).msg(12, value_info("y", {2}));
  std::string msg = test::error_of([&] { onnx::Model::from_bytes(model(g), Device::cpu()); });
  EXPECT_NE(msg.find("add_bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing initializer"), std::string::npos) << msg;
}

TEST(OnnxErrors, DanglingInputAndMissingOutput) {
  Msg g;
  g.msg(1, node("Relu", {"x"}, {"a"}, "first"))
      .msg(1, node("Relu", {"never_made"}, {"y"}, "second"))
      .msg(11, value_info("x", {2}))
      .msg(12, value_info("y", {2}));
  EXPECT_ERROR(onnx::Model::from_bytes(model(g), Device::cpu()), "node 'second' (Relu): input 'never_made'");
  Msg g2;
  g2.msg(1, node("Relu", {"x"}, {"a"}, "first")).msg(11, value_info("x", {2})).msg(12, value_info("nope", {2}));
  EXPECT_ERROR(onnx::Model::from_bytes(model(g2), Device::cpu()), "graph output 'nope'");
}

TEST(OnnxErrors, UnknownDomain) {
  Msg g;
  g.msg(1, node("Custom", {"x"}, {"y"}, "mystery", "com.example"))
      .msg(11, value_info("x", {2}))
      .msg(12, value_info("y", {2}));
  EXPECT_ERROR(onnx::Model::from_bytes(model(g), Device::cpu()),
               "node 'mystery' (Custom): unknown domain 'com.example'");
  // Imported but unsupported: reported as such.
  EXPECT_ERROR(onnx::Model::from_bytes(model(g, 13, "com.example"), Device::cpu()), "com.example.Custom");
}

TEST(OnnxErrors, CycleNamesTheNodes) {
  Msg g;
  g.msg(1, node("Add", {"x", "b"}, {"a"}, "loop_a"))
      .msg(1, node("Relu", {"a"}, {"b"}, "loop_b"))
      .msg(1, node("Relu", {"a"}, {"y"}, "out"))
      .msg(11, value_info("x", {2}))
      .msg(12, value_info("y", {2}));
  std::string msg = test::error_of([&] { onnx::Model::from_bytes(model(g), Device::cpu()); });
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("loop_a"), std::string::npos) << msg;
  EXPECT_NE(msg.find("loop_b"), std::string::npos) << msg;
}

TEST(OnnxErrors, UnsupportedOpsAreAllListed) {
  Msg g;
  g.msg(1, node("FancyOpOne", {"x"}, {"a"}, "n1"))
      .msg(1, node("Relu", {"a"}, {"b"}, "n2"))
      .msg(1, node("FancyOpTwo", {"b"}, {"y"}, "n3"))
      .msg(11, value_info("x", {2}))
      .msg(12, value_info("y", {2}));
  std::string bytes = model(g, 17);
  std::string msg = test::error_of([&] { onnx::Model::from_bytes(bytes, Device::cpu()); });
  EXPECT_NE(msg.find("2 unsupported op(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FancyOpOne (node 'n1', opset 17)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FancyOpTwo (node 'n3', opset 17)"), std::string::npos) << msg;
  auto m = onnx::Model::from_bytes(bytes, Device::cpu(), {.allow_unsupported = true});
  ASSERT_EQ(m.unsupported().size(), 2u);
  EXPECT_EQ(m.unsupported()[1].op_type, "FancyOpTwo");
  EXPECT_EQ(m.unsupported()[1].node_name, "n3");
  EXPECT_ERROR(m.run({ones({2})}), "is not supported");
}

TEST(OnnxErrors, LoadsOnTheNullDevice) {
  auto m = onnx::Model::from_bytes(dynamic_model(), Device::null());
  EXPECT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.device(), Device::null());
}

TEST(OnnxErrors, SupportedOpsListIsSorted) {
  auto ops = onnx::supported_ops();
  EXPECT_GT(ops.size(), 140u);
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), "Conv"));
  EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), "Loop"));
}
