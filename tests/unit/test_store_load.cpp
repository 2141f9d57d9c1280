// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::store::load / save: the report, strict mode, remapping and filters, dtype and device
// handling, and PyTorch state dicts (tests/fixtures/store, written by
// scripts/gen_store_models.py) loading into the equivalent Kiln modules with no adapter.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/store.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "test_paths.h"
#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(KILN_GOLDEN_DIR) + "/../fixtures/store/";

struct Net : nn::Module {
  nn::Linear fc1, fc2;
  nn::BatchNorm1d bn;
  explicit Net(const Device& d = Device::cpu())
      : fc1({.in = 3, .out = 4}, d), fc2({.in = 4, .out = 2}, d), bn({.num_features = 2}, d) {}
  Tensor forward(const Tensor& x) const { return bn(fc2(relu(fc1(x)))); }
  KILN_VISIT(Net, fc1, fc2, bn)
};

std::vector<float> values(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

/// A state dict of Net with recognisable values (i-th tensor filled with i + 1 + 0.01 k).
store::TensorMap net_weights(const std::string& prefix = "") {
  Net ref;
  store::TensorMap tm;
  int i = 0;
  for (auto& [name, t] : ref.state()) {
    ++i;
    Tensor v =
        t.dtype() == i64 ? full(t.shape(), 7, {.dtype = i64}) : (arange(t.numel(), f32) * 0.01 + i).reshape(t.shape());
    tm.tensors.emplace_back(prefix + name, v);
  }
  return tm;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

double max_diff(const Tensor& a, const Tensor& b) {
  auto x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) m = std::max(m, static_cast<double>(std::abs(x[i] - y[i])));
  return m;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_test_store_load_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(StoreLoad, FullStateDictLoadsStrictly) {
  Net net;
  auto tm = net_weights();
  auto rep = store::load(net, tm);
  EXPECT_TRUE(rep.ok()) << rep.str();
  EXPECT_EQ(rep.applied.size(), 9u);  // 2 x (weight, bias), bn weight, bias, 3 buffers
  EXPECT_TRUE(rep.missing.empty() && rep.unexpected.empty() && rep.mismatched.empty() && rep.skipped.empty());
  for (auto& [name, t] : net.state()) EXPECT_EQ(values(t), values(*tm.find(name))) << name;
  EXPECT_EQ(net.bn.num_batches_tracked.item<int64_t>(), 7);
  EXPECT_EQ(net.bn.num_batches_tracked.dtype(), i64);
}

TEST(StoreLoad, ReportListsEveryKindOfProblem) {
  Net net;
  auto before = values(net.fc2.weight);
  store::TensorMap tm;
  tm.tensors.emplace_back("fc1.weight", full({4, 3}, 0.5f));
  tm.tensors.emplace_back("fc1.bias", full({5}, 0.5f));  // wrong shape
  tm.tensors.emplace_back("head.weight", full({2, 4}, 1.f));
  tm.tensors.emplace_back("aux.scale", full({1}, 1.f));
  auto rep = store::load(net, tm, {.strict = false, .exclude = {"^aux\\."}});
  EXPECT_FALSE(rep.ok());
  EXPECT_EQ(rep.applied, std::vector<std::string>{"fc1.weight"});
  ASSERT_EQ(rep.mismatched.size(), 1u);
  EXPECT_EQ(rep.mismatched[0].key, "fc1.bias");
  EXPECT_EQ(rep.mismatched[0].expected, "[4] f32");
  EXPECT_EQ(rep.mismatched[0].found, "[5] f32");
  EXPECT_EQ(rep.unexpected, std::vector<std::string>{"head.weight"});
  EXPECT_EQ(rep.skipped, std::vector<std::string>{"aux.scale"});
  EXPECT_EQ(rep.missing.size(), 7u);
  EXPECT_TRUE(contains(rep.missing, "fc2.weight"));
  EXPECT_TRUE(contains(rep.missing, "bn.running_var"));
  // Non-strict: what matches is loaded, the rest is left alone.
  EXPECT_EQ(values(net.fc1.weight), std::vector<float>(12, 0.5f));
  EXPECT_EQ(values(net.fc2.weight), before);

  std::string s = rep.str();
  for (const char* part : {"applied 1", "missing 7", "unexpected 1", "mismatched 1", "skipped 1", "fc2.weight",
                           "head.weight", "fc1.bias: model [4] f32, file [5] f32", "aux.scale"})
    EXPECT_NE(s.find(part), std::string::npos) << part << " in\n" << s;
}

TEST(StoreLoad, StrictThrowsWithTheReportAndChangesNothing) {
  Net net;
  std::vector<std::vector<float>> before;
  for (auto& [n, t] : net.state()) before.push_back(values(t));
  auto tm = net_weights();
  tm.tensors.erase(tm.tensors.begin() + 3);  // fc2.bias missing
  tm.tensors.emplace_back("extra.w", full({2}, 1.f));
  std::string msg = test::error_of([&] { store::load(net, tm); });
  EXPECT_NE(msg.find("[store::load]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fc2.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("extra.w"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing 1"), std::string::npos) << msg;
  size_t i = 0;
  for (auto& [n, t] : net.state()) EXPECT_EQ(values(t), before[i++]) << n << " was modified";
}

TEST(StoreLoad, RemapRewritesKeysInOrder) {
  Net net;
  auto tm = net_weights("module.");
  // Rename the BatchNorm the way an older checkpoint might have called it.
  for (auto& [k, t] : tm.tensors)
    if (k.rfind("module.bn.", 0) == 0) k = "module.norm." + k.substr(10);
  EXPECT_FALSE(store::load(net, tm, {.strict = false}).ok());
  auto rep = store::load(net, tm, {.remap = {{"^module\\.", ""}, {"^norm\\.", "bn."}}});
  EXPECT_TRUE(rep.ok()) << rep.str();
  EXPECT_EQ(rep.applied.size(), 9u);
  EXPECT_EQ(values(net.bn.running_mean), values(*tm.find("module.norm.running_mean")));
}

TEST(StoreLoad, IncludeAndExcludeFilterBothSides) {
  auto tm = net_weights();
  {
    Net net;
    auto fc2 = values(net.fc2.weight);
    // A backbone without its head: strict, the head keeps its initial values.
    auto rep = store::load(net, tm, {.exclude = {"^fc2\\."}});
    EXPECT_TRUE(rep.ok()) << rep.str();
    EXPECT_EQ(rep.applied.size(), 7u);
    EXPECT_EQ(rep.skipped, (std::vector<std::string>{"fc2.weight", "fc2.bias"}));
    EXPECT_EQ(values(net.fc2.weight), fc2);
    EXPECT_EQ(values(net.fc1.weight), values(*tm.find("fc1.weight")));
  }
  {
    Net net;
    auto rep = store::load(net, tm, {.include = {"^fc1\\.", "running"}});
    EXPECT_TRUE(rep.ok()) << rep.str();
    EXPECT_EQ(rep.applied, (std::vector<std::string>{"fc1.weight", "fc1.bias", "bn.running_mean", "bn.running_var"}));
    EXPECT_EQ(rep.skipped.size(), 5u);
  }
}

TEST(StoreLoad, BadRegexesAndCollidingKeysThrow) {
  Net net;
  auto tm = net_weights();
  EXPECT_ERROR(store::load(net, tm, {.remap = {{"(", ""}}}), "invalid remap regex");
  EXPECT_ERROR(store::load(net, tm, {.exclude = {"[a-"}}), "invalid exclude regex");
  EXPECT_ERROR(store::load(net, tm, {.remap = {{"\\.bias$", ".weight"}}}), "both become 'fc1.weight'");
}

TEST(StoreLoad, ConvertsDtypeOrReportsIt) {
  auto tm = net_weights();
  for (auto& [k, t] : tm.tensors)
    if (t.dtype() == f32) t = (t * 1.001).to(f16);
  {
    Net net;
    auto rep = store::load(net, tm);  // f16 file into an f32 model
    EXPECT_TRUE(rep.ok()) << rep.str();
    EXPECT_EQ(net.fc1.weight.dtype(), f32);
    EXPECT_EQ(values(net.fc1.weight), values(tm.find("fc1.weight")->to(f32)));
    EXPECT_NE(values(net.fc1.weight), values(net_weights().find("fc1.weight")->to(f32)));  // really f16-rounded
  }
  {
    Net net;
    auto rep = store::load(net, tm, {.strict = false, .convert_dtype = false});
    EXPECT_EQ(rep.mismatched.size(), 8u);
    EXPECT_EQ(rep.applied, std::vector<std::string>{"bn.num_batches_tracked"});
    EXPECT_EQ(rep.mismatched[0].expected, "[4, 3] f32");
    EXPECT_EQ(rep.mismatched[0].found, "[4, 3] f16");
  }
}

TEST(StoreLoad, AutodiffModelKeepsTrackingGradients) {
  Device ad = Device::cpu().autodiff();
  Net net(ad);
  ASSERT_TRUE(net.fc1.weight.requires_grad());
  auto tm = net_weights();
  auto rep = store::load(net, tm);
  EXPECT_TRUE(rep.ok()) << rep.str();
  for (auto& [n, p] : net.named_parameters()) {
    EXPECT_TRUE(p.requires_grad()) << n;
    EXPECT_TRUE(p.is_leaf()) << n;
    EXPECT_EQ(p.device(), ad) << n;
  }
  EXPECT_FALSE(net.bn.running_mean.requires_grad());
  EXPECT_EQ(values(net.fc2.weight), values(*tm.find("fc2.weight")));
  // The loaded parameters still get gradients.
  Tensor x = ones({5, 3}, {.device = ad});
  Gradients g = net.forward(x).square().sum().backward();
  EXPECT_TRUE(net.fc1.weight.grad(g).defined());
}

TEST(StoreLoad, NullDeviceModelChecksShapes) {
  Net net(Device::null());
  auto tm = net_weights();
  auto rep = store::load(net, tm);
  EXPECT_TRUE(rep.ok()) << rep.str();
  EXPECT_EQ(net.fc1.weight.device(), Device::null());
  tm.tensors[0].second = zeros({3, 3});
  EXPECT_ERROR(store::load(net, tm), "fc1.weight: model [4, 3] f32, file [3, 3] f32");
}

TEST(StoreLoad, SaveThenLoadThroughAFile) {
  fs::path dir = temp_dir("roundtrip");
  std::string path = (dir / "net.safetensors").string();
  Net a, b;
  store::load(a, net_weights());
  store::save(a, path, {{"note", "hello, world"}});
  auto tm = store::read(path);
  EXPECT_EQ(tm.metadata.at("note"), "hello, world");
  EXPECT_EQ(tm.tensors.size(), 9u);
  auto rep = store::load(b, path);
  EXPECT_TRUE(rep.ok()) << rep.str();
  for (auto& [n, t] : b.state()) EXPECT_EQ(values(t), values(*tm.find(n))) << n;
  EXPECT_ERROR(store::load(b, (dir / "missing.safetensors").string()), "missing.safetensors");
  fs::remove_all(dir);
}

// ---- PyTorch state dicts --------------------------------------------------------------------

namespace {

/// torchvision's BasicBlock with a downsample path (scripts/gen_store_models.py).
struct BasicBlock : nn::Module {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample;
  BasicBlock(int64_t cin = 4, int64_t cout = 8, int64_t stride = 2)
      : conv1({.in_channels = cin,
               .out_channels = cout,
               .kernel_size = 3,
               .stride = stride,
               .padding = 1,
               .bias = false}),
        bn1({.num_features = cout}),
        conv2({.in_channels = cout, .out_channels = cout, .kernel_size = 3, .padding = 1, .bias = false}),
        bn2({.num_features = cout}),
        downsample(
            nn::Conv2d({.in_channels = cin, .out_channels = cout, .kernel_size = 1, .stride = stride, .bias = false}),
            nn::BatchNorm2d({.num_features = cout})) {}
  Tensor forward(const Tensor& x) const {
    Tensor y = relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return relu(y + downsample(x));
  }
  KILN_VISIT(BasicBlock, conv1, bn1, conv2, bn2, downsample)
};

nn::TransformerEncoderLayer transformer_layer() {
  return nn::TransformerEncoderLayer(
      {.d_model = 16, .nhead = 4, .dim_feedforward = 32, .dropout = 0.0, .batch_first = true});
}

}  // namespace

class PyTorchStateDict : public ::testing::TestWithParam<std::string> {};

TEST_P(PyTorchStateDict, ResNetBlockLoadsWithNoAdapter) {
  BasicBlock block;
  auto rep = store::load(block, kFixtures + "resnet_block" + GetParam());
  EXPECT_TRUE(rep.ok()) << rep.str();
  EXPECT_EQ(rep.applied.size(), 18u);
  EXPECT_TRUE(rep.skipped.empty());
  EXPECT_GT(block.bn1.num_batches_tracked.item<int64_t>(), 0);
  block.eval();
  auto io = store::read(kFixtures + "resnet_block_io.safetensors");
  Tensor y = block.forward(*io.find("input"));
  EXPECT_EQ(y.shape(), io.find("output")->shape());
  EXPECT_LT(max_diff(y, *io.find("output")), 1e-5);
}

TEST_P(PyTorchStateDict, TransformerEncoderLayerLoadsWithNoAdapter) {
  auto layer = transformer_layer();
  auto rep = store::load(layer, kFixtures + "transformer_layer" + GetParam());
  EXPECT_TRUE(rep.ok()) << rep.str();
  EXPECT_EQ(rep.applied.size(), 12u);
  layer.eval();
  auto io = store::read(kFixtures + "transformer_layer_io.safetensors");
  Tensor y = layer.forward(*io.find("input"));
  EXPECT_EQ(y.shape(), io.find("output")->shape());
  EXPECT_LT(max_diff(y, *io.find("output")), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Formats, PyTorchStateDict, ::testing::Values(".safetensors", ".pt"),
                         [](const auto& info) { return info.param == ".pt" ? std::string("pt") : "safetensors"; });
