// Layer options matching PyTorch's (values are checked against PyTorch in the conformance cases
// nn_lstm, nn_mha and nn_embedding_renorm): parameter names and shapes, and the errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {
std::vector<std::string> names_and_shapes(nn::Module& m) {
  std::vector<std::string> r;
  for (auto& [n, t] : m.named_parameters()) r.push_back(n + to_string(t.shape()));
  return r;
}
}  // namespace

TEST(NnLayerOptions, LstmProjSizeParametersAndShapes) {
  // torch.nn.LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=True).named_parameters()
  nn::LSTM m({.input_size = 3, .hidden_size = 5, .num_layers = 2, .bidirectional = true, .proj_size = 2});
  auto got = names_and_shapes(m);
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(got[0], "weight_ih_l0" + to_string(Shape{20, 3}));
  EXPECT_EQ(got[1], "weight_hh_l0" + to_string(Shape{20, 2}));
  EXPECT_EQ(got[4], "weight_hr_l0" + to_string(Shape{2, 5}));
  EXPECT_EQ(got[9], "weight_hr_l0_reverse" + to_string(Shape{2, 5}));
  EXPECT_EQ(got[10], "weight_ih_l1" + to_string(Shape{20, 4}));
  auto r = m(randn({6, 2, 3}));
  EXPECT_EQ(r.output.shape(), (Shape{6, 2, 4}));
  EXPECT_EQ(r.h_n.shape(), (Shape{4, 2, 2}));
  EXPECT_EQ(r.c_n.shape(), (Shape{4, 2, 5}));
  // h0 has proj_size features, c0 hidden_size.
  expect_error([&] { m(randn({6, 2, 3}), zeros({4, 2, 5}), zeros({4, 2, 5})); }, "LSTM", "h0");
  EXPECT_NO_THROW(m(randn({6, 2, 3}), zeros({4, 2, 2}), zeros({4, 2, 5})));
  expect_error([] { nn::LSTM({.input_size = 3, .hidden_size = 4, .proj_size = 4}); }, "LSTM",
               "proj_size < hidden_size");
  expect_error([] { nn::GRU({.input_size = 3, .hidden_size = 4, .proj_size = 2}); }, "GRU", "only supported for LSTM");
}

TEST(NnLayerOptions, MultiHeadAttentionBiasKvAndZeroAttn) {
  // torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True).named_parameters()
  nn::MultiHeadAttention m({.embed_dim = 8, .num_heads = 2, .add_bias_kv = true, .add_zero_attn = true});
  auto got = names_and_shapes(m);
  std::vector<std::string> want = {"in_proj_weight" + to_string(Shape{24, 8}), "in_proj_bias" + to_string(Shape{24}),
                                   "bias_k" + to_string(Shape{1, 1, 8}),       "bias_v" + to_string(Shape{1, 1, 8}),
                                   "out_proj.weight" + to_string(Shape{8, 8}), "out_proj.bias" + to_string(Shape{8})};
  EXPECT_EQ(got, want);
  // Xavier-normal init of [1, 1, 8]: std = sqrt(2 / (8 + 8)) -- not zero.
  EXPECT_GT(norm(m.bias_k).item<float>(), 0.0f);
  Tensor q = randn({4, 2, 8}), kv = randn({5, 2, 8});
  auto r = m(q, kv, kv, {.need_weights = true});
  EXPECT_EQ(r.output.shape(), (Shape{4, 2, 8}));
  EXPECT_EQ(r.weights.shape(), (Shape{2, 4, 7}));  // 5 keys + bias_k + the zero key
  nn::KVCache cache;
  expect_error([&] { m(q, kv, kv, {.cache = &cache}); }, "MultiHeadAttention", "KVCache");
}

TEST(NnLayerOptions, EmbeddingMaxNormRenormalisesRowsInPlace) {
  nn::Embedding m({.num_embeddings = 4, .embedding_dim = 2, .max_norm = 1.0});
  m.weight = tensor<float>({3, 4, 0.3f, 0.4f, 6, 8, 0, 2}, {4, 2});
  Tensor y = m(tensor<int64_t>({0, 0, 1, 3}, {4}));
  // Rows 0 and 3 (norms 5 and 2) are scaled to norm 1 (up to the 1e-7 of PyTorch's formula);
  // row 1 (norm 0.5) and the unused row 2 are left alone.
  auto w = m.weight.to_vector<float>();
  EXPECT_NEAR(w[0], 0.6f, 1e-6);
  EXPECT_NEAR(w[1], 0.8f, 1e-6);
  EXPECT_FLOAT_EQ(w[2], 0.3f);
  EXPECT_FLOAT_EQ(w[4], 6.0f);
  EXPECT_NEAR(w[7], 1.0f, 1e-6);
  auto yv = y.to_vector<float>();
  EXPECT_NEAR(yv[2], 0.6f, 1e-6);
  EXPECT_NEAR(yv[7], 1.0f, 1e-6);
  EXPECT_NE(m.extra_repr().find("max_norm=1"), std::string::npos);
}

TEST(NnLayerOptions, ConvTransposeOnlyZerosPadding) {
  expect_error(
      [] {
        nn::ConvTranspose2d(
            {.in_channels = 2, .out_channels = 2, .kernel_size = 3, .padding = 1, .padding_mode = "reflect"});
      },
      "ConvTranspose2d", "only supports padding_mode \"zeros\"");
  EXPECT_NO_THROW(
      nn::ConvTranspose1d({.in_channels = 2, .out_channels = 2, .kernel_size = 3, .padding_mode = "zeros"}));
}
