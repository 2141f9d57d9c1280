// Configs as JSON (include/kiln/nn/config.h): round trips of every layer config, models built
// from loaded configs, error cases and a user-defined config.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/nn/config.h>
#include <kiln/nn/loss_rnnt.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

// to_json -> from_json -> to_json is the identity on the text, and the text differs from the
// default config's (so every non-default value was written and read back).
template <class C>
C round_trip(const C& c, bool differs_from_default = true) {
  std::string j = nn::to_json(c);
  C back = nn::from_json<C>(j);
  EXPECT_EQ(nn::to_json(back), j);
  if (differs_from_default) EXPECT_NE(j, nn::to_json(C{})) << j;
  return back;
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln_cfg_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST(NnConfig, LinearJsonText) {
  nn::LinearConfig c{.in_features = 784, .out_features = 10, .bias = false, .dtype = f64};
  EXPECT_EQ(nn::config_type_name<nn::LinearConfig>(), "Linear");
  EXPECT_EQ(nn::to_json(c),
            "{\n  \"type\": \"Linear\",\n  \"config\": {\n    \"in_features\": 784,\n    \"out_features\": 10,\n    "
            "\"bias\": false,\n"
            "    \"dtype\": \"f64\"\n  }\n}");
  auto back = round_trip(c);
  EXPECT_EQ(back.in_features, 784);
  EXPECT_EQ(back.out_features, 10);
  EXPECT_FALSE(back.bias);
  EXPECT_EQ(back.dtype, f64);
}

TEST(NnConfig, RoundTripBasicLayers) {
  round_trip(nn::BilinearConfig{.in1_features = 2, .in2_features = 3, .out_features = 4, .bias = false, .dtype = f64});
  auto e =
      round_trip(nn::EmbeddingConfig{.num_embeddings = 10, .embedding_dim = 4, .padding_idx = -1, .max_norm = 2.0});
  EXPECT_EQ(e.padding_idx, std::optional<int64_t>(-1));
  EXPECT_EQ(e.max_norm, std::optional<double>(2.0));
  auto e2 = nn::from_json<nn::EmbeddingConfig>(R"({"type": "Embedding", "config": {"padding_idx": null}})");
  EXPECT_FALSE(e2.padding_idx.has_value());

  auto conv = round_trip(nn::ConvConfig{.in_channels = 3,
                                        .out_channels = 8,
                                        .kernel_size = {3, 5},
                                        .stride = 2,
                                        .padding = "same",
                                        .dilation = {1, 2},
                                        .groups = 1,
                                        .bias = false,
                                        .padding_mode = "reflect"});
  EXPECT_EQ(conv.kernel_size.values(), (Dims{3, 5}));
  EXPECT_EQ(conv.stride.values(), (Dims{2}));
  EXPECT_EQ(conv.padding.text(), "same");
  EXPECT_EQ(conv.padding_mode, "reflect");
  auto conv2 = round_trip(nn::ConvConfig{.in_channels = 3, .out_channels = 8, .kernel_size = 3, .padding = {1, 2}});
  EXPECT_EQ(conv2.padding.text(), "");
  EXPECT_EQ(conv2.padding.values().values(), (Dims{1, 2}));
  round_trip(nn::ConvTransposeConfig{.in_channels = 4,
                                     .out_channels = 2,
                                     .kernel_size = 3,
                                     .stride = 2,
                                     .padding = 1,
                                     .output_padding = 1,
                                     .groups = 2,
                                     .dilation = {1, 1}});
  round_trip(nn::MaxPoolConfig{.kernel_size = 3, .stride = 2, .padding = 1, .dilation = 2, .ceil_mode = true});
  auto avg = round_trip(nn::AvgPoolConfig{.kernel_size = {2, 3}, .count_include_pad = false, .divisor_override = 5});
  EXPECT_EQ(avg.divisor_override, std::optional<int64_t>(5));
  auto ad = round_trip(nn::AdaptivePoolConfig{.output_size = {std::nullopt, 7}});
  ASSERT_EQ(ad.output_size.values().size(), 2u);
  EXPECT_FALSE(ad.output_size.values()[0].has_value());
  EXPECT_EQ(ad.output_size.values()[1], std::optional<int64_t>(7));
  round_trip(nn::DropoutConfig{.p = 0.125});
  round_trip(nn::FlattenConfig{.start_dim = 0, .end_dim = 2});
  auto un = round_trip(nn::UnflattenConfig{.dim = 1, .sizes = {16, -1, 7}});
  EXPECT_EQ(un.sizes, (Shape{16, -1, 7}));
  round_trip(nn::PixelShuffleConfig{.upscale_factor = 3});
  round_trip(nn::PixelUnshuffleConfig{.downscale_factor = 2});
  auto up = round_trip(nn::UpsampleConfig{.scale_factor = {2.0, 1.5}, .mode = "bilinear", .align_corners = true});
  EXPECT_EQ(nn::config_type_name<nn::UpsampleConfig>(), "Upsample");
  EXPECT_EQ(up.scale_factor.values(), (std::vector<double>{2.0, 1.5}));
  EXPECT_EQ(up.align_corners, std::optional<bool>(true));
  EXPECT_FALSE(up.recompute_scale_factor.has_value());
  round_trip(nn::UpsampleConfig{.size = {4, 6}, .mode = "nearest-exact"});
}

TEST(NnConfig, RoundTripActivationsNormsRecurrentTransformer) {
  round_trip(nn::LeakyReLUConfig{.negative_slope = 0.2});
  round_trip(nn::PReLUConfig{.num_parameters = 3, .init = 0.1, .dtype = f64});
  round_trip(nn::GELUConfig{.approximate = "tanh"});
  round_trip(nn::SoftmaxConfig{.dim = 1});
  round_trip(nn::SoftplusConfig{.beta = 2.0, .threshold = 10.0});
  round_trip(nn::ELUConfig{.alpha = 0.5});
  round_trip(nn::SwiGLUConfig{.in = 8, .hidden = 16, .out = 4, .bias = true});
  auto bn = round_trip(nn::BatchNormConfig{.num_features = 4, .eps = 1e-3, .momentum = std::nullopt, .affine = false});
  EXPECT_FALSE(bn.momentum.has_value());
  auto ln = round_trip(nn::LayerNormConfig{.normalized_shape = {4, 5}, .eps = 1e-6, .bias = false});
  EXPECT_EQ(ln.normalized_shape, (Shape{4, 5}));
  EXPECT_EQ(ln.eps, 1e-6);
  round_trip(nn::GroupNormConfig{.num_groups = 2, .num_channels = 6, .affine = false});
  round_trip(nn::InstanceNormConfig{.num_features = 3, .momentum = 0.2, .affine = true, .track_running_stats = true});
  auto rms = round_trip(nn::RMSNormConfig{.normalized_shape = {8}, .eps = 1e-6});
  EXPECT_EQ(rms.eps, std::optional<double>(1e-6));
  round_trip(nn::RecurrentConfig{.input_size = 3,
                                 .hidden_size = 5,
                                 .num_layers = 2,
                                 .nonlinearity = "relu",
                                 .batch_first = true,
                                 .dropout = 0.25,
                                 .bidirectional = true,
                                 .proj_size = 2});
  round_trip(nn::MultiHeadAttentionConfig{
      .embed_dim = 16, .num_heads = 4, .add_bias_kv = true, .kdim = 8, .vdim = 12, .batch_first = true});
  nn::TransformerStackConfig stack{
      .layer = {.d_model = 16, .nhead = 2, .dim_feedforward = 32, .activation = "gelu", .norm_first = true},
      .num_layers = 3,
      .final_norm = true};
  auto s = round_trip(stack);
  EXPECT_EQ(s.layer.d_model, 16);
  EXPECT_EQ(s.layer.activation, "gelu");
  EXPECT_TRUE(s.layer.norm_first);
  EXPECT_EQ(s.layer.layer_norm_eps, 1e-5);
  EXPECT_EQ(s.num_layers, 3);
  round_trip(nn::PositionalEncodingConfig{.d_model = 8, .max_len = 64, .dropout = 0.1, .batch_first = false});
  round_trip(nn::RotaryEncodingConfig{.head_dim = 8, .theta = 500000.0, .interleaved = true});
}

TEST(NnConfig, RoundTripLossConfigs) {
  round_trip(nn::MSELossConfig{.reduction = "sum"});
  round_trip(nn::SmoothL1LossConfig{.reduction = "none", .beta = 0.5});
  round_trip(nn::HuberLossConfig{.delta = 2.0});
  round_trip(nn::KLDivLossConfig{.reduction = "batchmean", .log_target = true});
  round_trip(nn::MarginLossConfig{.margin = 0.5});
  round_trip(nn::HingeEmbeddingLossConfig{.margin = 2.0});
  round_trip(nn::PoissonNLLLossConfig{.log_input = false, .full = true});
  round_trip(nn::TripletMarginLossConfig{.margin = 0.3, .p = 1.0, .swap = true});
  round_trip(nn::CTCLossConfig{.blank = 3, .zero_infinity = true});
  EXPECT_EQ(nn::config_type_name<nn::CTCLossConfig>(), "CTCLoss");
  auto rnnt = round_trip(nn::RNNTLossConfig{.blank = 0, .clamp = 0.5, .reduction = "sum", .fused_log_softmax = false});
  EXPECT_EQ(rnnt.clamp, 0.5);
  EXPECT_EQ(nn::config_type_name<nn::RNNTLossConfig>(), "RNNTLoss");
}

TEST(NnConfig, NonFiniteFloats) {
  auto c = round_trip(nn::SoftplusConfig{.beta = 1.0, .threshold = std::numeric_limits<double>::infinity()});
  EXPECT_TRUE(std::isinf(c.threshold));
  EXPECT_NE(nn::to_json(c).find("\"inf\""), std::string::npos);
}

TEST(NnConfig, MissingKeysKeepDefaults) {
  auto c = nn::from_json<nn::TransformerLayerConfig>(R"({"type": "TransformerLayer", "config": {"d_model": 32}})");
  EXPECT_EQ(c.d_model, 32);
  EXPECT_EQ(c.nhead, 1);
  EXPECT_EQ(c.dim_feedforward, 2048);
  EXPECT_EQ(c.dropout, 0.1);
  EXPECT_EQ(c.activation, "relu");
  auto d = nn::from_json<nn::LinearConfig>(R"({"type": "Linear"})");
  EXPECT_EQ(nn::to_json(d), nn::to_json(nn::LinearConfig{}));
  // A nested config keeps the defaults of its missing fields too.
  auto s = nn::from_json<nn::TransformerStackConfig>(
      R"({"type": "TransformerStack", "config": {"layer": {"nhead": 4}, "num_layers": 2}})");
  EXPECT_EQ(s.layer.nhead, 4);
  EXPECT_EQ(s.layer.dim_feedforward, 2048);
  EXPECT_EQ(s.num_layers, 2);
  // Integers are accepted for float fields.
  EXPECT_EQ(nn::from_json<nn::DropoutConfig>(R"({"type": "Dropout", "config": {"p": 0}})").p, 0.0);
}

TEST(NnConfig, Errors) {
  using kiln::test::expect_error;
  auto L = [](const std::string& s) { return nn::from_json<nn::LinearConfig>(s); };
  expect_error([&] { L("{\"type\": \"Linear\", "); }, "nn.config", "invalid JSON");
  expect_error([&] { L("[1, 2]"); }, "nn.config", "expected a JSON object");
  expect_error([&] { L(R"({"type": "Linear", "config": {"in_features": 3, "outt": 4, "bais": true}})"); }, "nn.config",
               "unknown keys 'outt', 'bais'");
  expect_error([&] { L(R"({"type": "Linear", "config": {"in_features": "3"}})"); }, "nn.config",
               "Linear field 'in_features': expected an integer, got string");
  expect_error([&] { L(R"({"type": "Linear", "config": {"in_features": 3.5}})"); }, "nn.config", "field 'in_features'");
  expect_error([&] { L(R"({"type": "Linear", "config": {"bias": 1}})"); }, "nn.config",
               "field 'bias': expected a boolean");
  expect_error([&] { L(R"({"type": "Linear", "config": {"dtype": "float99"}})"); }, "nn.config",
               "unknown dtype \"float99\"");
  expect_error([&] { L(R"({"type": "Conv", "config": {}})"); }, "nn.config",
               "expected a config of type 'Linear', the JSON holds 'Conv'");
  expect_error([&] { L(R"({"config": {}})"); }, "nn.config", "missing \"type\"");
  expect_error([&] { L(R"({"type": "Linear", "extra": 1})"); }, "nn.config", "unknown top-level key 'extra'");
  expect_error([&] { L(R"({"type": "Linear", "config": {"in_features": 18446744073709551615}})"); }, "nn.config",
               "out of range");
  expect_error(
      [&] {
        nn::from_json<nn::TransformerStackConfig>(
            R"({"type": "TransformerStack", "config": {"layer": {"d_modle": 4}}})");
      },
      "nn.config", "unknown key 'd_modle' in 'layer'");
  expect_error(
      [&] { nn::from_json<nn::TransformerStackConfig>(R"({"type": "TransformerStack", "config": {"layer": 4}})"); },
      "nn.config", "field 'layer': expected an object");
  expect_error([&] { nn::from_json<nn::ConvConfig>(R"({"type": "Conv", "config": {"kernel_size": [3, "a"]}})"); },
               "nn.config", "field 'kernel_size'");
  expect_error(
      [&] { nn::from_json<nn::AdaptivePoolConfig>(R"({"type": "AdaptivePool", "config": {"output_size": "x"}})"); },
      "nn.config", "field 'output_size'");
  // Hostile nesting is refused before parsing.
  std::string deep =
      R"({"type": "Linear", "config": {"in_features": )" + std::string(100000, '[') + std::string(100000, ']') + "}}";
  expect_error([&] { L(deep); }, "nn.config", "nested deeper");
  expect_error([&] { nn::load_config<nn::LinearConfig>(tmp_path("does_not_exist.json")); }, "nn.config", "cannot open");
}

TEST(NnConfig, SaveLoadFile) {
  std::string path = tmp_path("linear.json");
  nn::LinearConfig c{.in_features = 12, .out_features = 7};
  nn::save_config(c, path);
  auto back = nn::load_config<nn::LinearConfig>(path);
  EXPECT_EQ(back.in_features, 12);
  EXPECT_EQ(back.out_features, 7);
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, nn::to_json(c) + "\n");
  std::remove(path.c_str());
}

TEST(NnConfig, ModelsFromLoadedConfigs) {
  // A transformer encoder and a conv built from loaded configs match those built from the
  // originals: same parameter names and shapes, same output shapes.
  nn::TransformerStackConfig sc{
      .layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .batch_first = true},
      .num_layers = 2,
      .final_norm = true};
  nn::TransformerEncoder a(sc), b(nn::from_json<nn::TransformerStackConfig>(nn::to_json(sc)));
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_EQ(pa[i].second.shape(), pb[i].second.shape()) << pa[i].first;
  }
  Tensor x = randn({2, 5, 8});
  EXPECT_EQ(b(x).shape(), (Shape{2, 5, 8}));

  nn::ConvConfig cc{.in_channels = 3, .out_channels = 4, .kernel_size = {3, 1}, .stride = {2, 1}, .padding = {1, 0}};
  nn::Conv2d c1(cc), c2(nn::from_json<nn::ConvConfig>(nn::to_json(cc)));
  EXPECT_EQ(c1.weight.shape(), c2.weight.shape());
  Tensor img = randn({1, 3, 9, 6});
  EXPECT_EQ(c1(img).shape(), c2(img).shape());
  EXPECT_EQ(c2(img).shape(), (Shape{1, 4, 5, 6}));
}

// ---- a user's own config ------------------------------------------------------------------------

namespace user {
enum class Act { Relu, Gelu, Tanh };
KILN_CONFIG_ENUM(Act, {Act::Relu, "relu"}, {Act::Gelu, "gelu"}, {Act::Tanh, "tanh"})

struct MlpConfig {
  int64_t in = 4;
  std::vector<int64_t> hidden = {8, 8};
  int64_t out = 2;
  Act act = Act::Relu;
  std::optional<double> dropout{};
  float scale = 1.0f;
  int32_t seed = 0;
  std::vector<nn::LinearConfig> extra_heads{};
  KILN_CONFIG(MlpConfig, in, hidden, out, act, dropout, scale, seed, extra_heads)
};

/// A model whose config is the user's MlpConfig.
struct Mlp : nn::Module {
  MlpConfig config;
  std::vector<nn::Linear> layers;
  explicit Mlp(const MlpConfig& c) : config(c) {
    int64_t d = c.in;
    for (int64_t h : c.hidden) {
      layers.emplace_back(nn::LinearConfig{.in_features = d, .out_features = h});
      d = h;
    }
    layers.emplace_back(nn::LinearConfig{.in_features = d, .out_features = c.out});
  }
  KILN_VISIT(Mlp, layers)
};
}  // namespace user

TEST(NnConfig, UserConfig) {
  user::MlpConfig c{
      .in = 6,
      .hidden = {16, 32, 8},
      .out = 3,
      .act = user::Act::Gelu,
      .dropout = 0.5,
      .scale = 0.1f,
      .seed = -7,
      .extra_heads = {{.in_features = 8, .out_features = 2}, {.in_features = 8, .out_features = 5, .bias = false}}};
  EXPECT_EQ(nn::config_type_name<user::MlpConfig>(), "Mlp");
  std::string j = nn::to_json(c);
  EXPECT_NE(j.find("\"act\": \"gelu\""), std::string::npos) << j;
  auto back = round_trip(c);
  EXPECT_EQ(back.hidden, (std::vector<int64_t>{16, 32, 8}));
  EXPECT_EQ(back.act, user::Act::Gelu);
  EXPECT_EQ(back.dropout, std::optional<double>(0.5));
  EXPECT_EQ(back.scale, 0.1f);
  EXPECT_EQ(back.seed, -7);
  ASSERT_EQ(back.extra_heads.size(), 2u);
  EXPECT_EQ(back.extra_heads[1].out_features, 5);
  EXPECT_FALSE(back.extra_heads[1].bias);

  user::Mlp m(back), m0(c);
  EXPECT_EQ(m.num_params(), m0.num_params());
  EXPECT_EQ(m.named_parameters()[4].first, "layers.2.weight");

  using kiln::test::expect_error;
  expect_error([] { nn::from_json<user::MlpConfig>(R"({"type": "Mlp", "config": {"act": "swish"}})"); }, "nn.config",
               "unknown value \"swish\" (expected one of 'relu', 'gelu', 'tanh')");
  expect_error([] { nn::from_json<user::MlpConfig>(R"({"type": "Mlp", "config": {"seed": 3000000000}})"); },
               "nn.config", "out of range");
  expect_error(
      [] {
        nn::from_json<user::MlpConfig>(
            R"({"type": "Mlp", "config": {"extra_heads": [{"in_features": 1}, {"inn": 2}]}})");
      },
      "nn.config", "unknown key 'inn' in 'extra_heads.1'");
}
