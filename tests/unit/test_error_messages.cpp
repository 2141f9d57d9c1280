// SPDX-License-Identifier: MIT OR Apache-2.0
// The text of the errors a new user meets first (shape, dtype and device mismatches, a config
// value out of range, autodiff misuse): each starts with [op], names the argument or field and
// the values involved, and, where there is one, says what to do. A message losing its argument
// name or its fix fails here.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <functional>
#include <string>
#include <vector>

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;

/// The what() of the kiln::Error that `f` throws ("" and a test failure when it throws none).
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

/// Expects the message of `f` to start with "[op]" and to contain every one of `parts`.
void expect_message(const std::function<void()>& f, const std::string& op, const std::vector<std::string>& parts) {
  const std::string msg = message_of(f);
  EXPECT_EQ(msg.rfind("[" + op + "]", 0), 0u) << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(ErrorMessages, ShapeMismatchInLinear) {
  expect_message(
      [] {
        F::linear(randn({2, 3}), randn({4, 5}));
      },
      "linear", {"input shape [2, 3]", "weight shape [4, 5]", "in_features 3 vs 5"});
  expect_message([] { F::linear(randn({2, 3}), randn({4, 3}), randn({5})); }, "linear", {"bias", "[5]", "[4, 3]", "4"});
  nn::Linear layer({.in_features = 3, .out_features = 4});
  expect_message([&] { layer(randn({2, 5})); }, "Linear", {"expects input [..., 3], got [2, 5]"});
}

TEST(ErrorMessages, ShapeMismatchInConv) {
  expect_message(
      [] {
        F::conv2d(randn({1, 3, 8, 8}), randn({8, 4, 3, 3}));
      },
      "conv2d", {"weight of size [8, 4, 3, 3]", "input[1, 3, 8, 8]", "4 channels", "got 3 channels"});
  expect_message([] { F::conv2d(randn({3, 8}), randn({8, 3, 3, 3})); }, "conv2d", {"input of size: [3, 8]"});
  nn::Conv2d conv({.in_channels = 3, .out_channels = 8, .kernel_size = 3});
  expect_message([&] { conv(randn({1, 4, 8, 8})); }, "Conv2d", {"expects input [N, 3, H, W]", "got [1, 4, 8, 8]"});
  nn::BatchNorm2d bn({.num_features = 4});
  expect_message([&] { bn(randn({2, 3, 4, 4})); }, "BatchNorm2d", {"C = 4", "got [2, 3, 4, 4]"});
}

TEST(ErrorMessages, ShapeMismatchInMatmul) {
  expect_message([] { matmul(randn({2, 3}), randn({4, 5})); }, "matmul", {"[2, 3] and [4, 5] cannot be multiplied"});
  expect_message([] { mm(randn({2, 3}), randn({4, 5})); }, "mm", {"mat1 and mat2", "2x3 and 4x5"});
  expect_message([] { bmm(randn({2, 2, 3}), randn({3, 4, 5})); }, "bmm", {"batch2", "[2, 2, 3] and [3, 4, 5]"});
  expect_message([] { (void)(randn({2, 3}) + randn({4})); }, "add", {"[2, 3] and [4] cannot be broadcast"});
  expect_message([] { randn({2, 3}).view({4}); }, "view", {"shape [4] is invalid for input of size 6"});
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4});
  expect_message([&] { lstm(randn({5, 2, 4})); }, "LSTM", {"expects input [T, N, 3]", "got [5, 2, 4]"});
}

TEST(ErrorMessages, DtypeMismatch) {
  expect_message(
      [] {
        matmul(randn({2, 3}), randn({3, 4}, {.dtype = f64}));
      },
      "matmul", {"f32", "f64", "other.to(f32)"});
  expect_message(
      [] {
        F::linear(randn({2, 3}), randn({4, 3}, {.dtype = f64}));
      },
      "linear", {"f32", "f64", "weight.to(f32)"});
  expect_message(
      [] {
        F::conv2d(randn({1, 3, 8, 8}), randn({8, 3, 3, 3}, {.dtype = f64}));
      },
      "conv2d", {"input type (f32) and weight type (f64)", "input.to(f64)"});
  expect_message(
      [] {
        Tensor a = zeros({3}, {.dtype = i64});
        a.add_(randn({3}));
      },
      "add_", {"f32", "i64", "self.to(f32)"});
  nn::Embedding emb({.num_embeddings = 5, .embedding_dim = 2});
  expect_message([&] { emb(randn({3})); }, "Embedding", {"expects integer indices, got f32"});
  expect_message(
      [] {
        F::cross_entropy(randn({4, 3}), randn({4}));
      },
      "cross_entropy", {"integer class indices as target", "f32 [4]", "input [4, 3]"});
  expect_message(
      [] {
        randn({4, 3}).index_select(0, randn({2}));
      },
      "index_select", {"index must be an integer tensor, got f32"});
  expect_message([] { where(randn({3}), randn({3}), randn({3})); }, "where", {"condition must be a bool tensor"});
}

TEST(ErrorMessages, ConfigFieldOutOfRange) {
  expect_message([] { nn::Dropout({.p = 1.5}); }, "Dropout", {"p must be in [0, 1], got 1.5"});
  expect_message([] { nn::Conv2d({.in_channels = 3, .out_channels = 8, .kernel_size = 0}); }, "Conv2d",
                 {"kernel_size must be positive"});
  expect_message([] { nn::Conv2d({.in_channels = 3, .out_channels = 8, .kernel_size = 3, .groups = 2}); }, "Conv2d",
                 {"in_channels (3)", "out_channels (8)", "groups (2)"});
  expect_message([] { nn::Linear({.in_features = -2, .out_features = 4}); }, "Linear", {"in_features", "-2"});
  expect_message([] { nn::LSTM({.input_size = 3, .hidden_size = 0}); }, "LSTM", {"hidden_size > 0", "hidden_size=0"});
  expect_message([] { nn::LSTM({.input_size = 3, .hidden_size = 4, .dropout = 2}); }, "LSTM", {"dropout", "got 2"});
  expect_message([] { nn::Embedding({.num_embeddings = -1, .embedding_dim = 2}); }, "Embedding",
                 {"num_embeddings", "-1"});
  expect_message([] { nn::MultiHeadAttention({.embed_dim = 10, .num_heads = 3}); }, "MultiHeadAttention",
                 {"embed_dim divisible by num_heads", "embed_dim=10", "num_heads=3"});
  expect_message([] { nn::TransformerEncoderLayer({.d_model = 10, .nhead = 3}); }, "TransformerEncoderLayer",
                 {"d_model divisible by nhead", "d_model=10", "nhead=3"});
  nn::Linear layer({.in_features = 3, .out_features = 4});
  expect_message([&] { optim::SGD(layer.parameters(), {.lr = -1}); }, "SGD", {"learning rate", "-1"});
  expect_message(
      [&] {
        optim::Adam(layer.parameters(), {.betas = {0.9, 1.5}});
      },
      "Adam", {"beta parameter at index 1: 1.5", "[0, 1)"});
  expect_message([] { nn::from_json<nn::DropoutConfig>(R"({"type": "Dropout", "config": {"pp": 0.5}})"); }, "nn.config",
                 {"'pp'"});
}

TEST(ErrorMessages, AutodiffAndReading) {
  const Device ad = Device::cpu().autodiff();
  expect_message([&] { (randn({3}, {.device = ad}).require_grad() * 2).backward(); }, "backward",
                 {"shape [3]", "t.sum().backward()"});
  expect_message([] { randn({1}).sum().backward(); }, "backward", {"records no graph", "Device::cpu().autodiff()"});
  expect_message([] { randn({3}).item<float>(); }, "item", {"one element", "[3]"});
}

// Tensors on different base devices: the message names both arguments, their devices and the fix.
TEST(ErrorMessages, DeviceMismatch) {
  Tensor w = randn({4, 3}, {.device = Device::null()});
  const std::string msg = message_of([&] { F::linear(randn({2, 3}), w); });
  EXPECT_EQ(msg.rfind("[linear]", 0), 0u) << msg;
  for (const char* part : {"`weight`", "`input`", "null", "cpu", "weight.to(input.device())"})
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  EXPECT_EQ(msg.find("fusion"), std::string::npos) << "names a decorator the user did not ask for: " << msg;
}

}  // namespace
