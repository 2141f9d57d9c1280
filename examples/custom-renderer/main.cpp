// SPDX-License-Identifier: MIT OR Apache-2.0
// A renderer of your own: the Learner sends it metric events; this one draws a one-line bar of
// dots per epoch and prints each epoch's validation accuracy.
//
//   custom-renderer [--quick] [--runs-dir DIR]
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/train.h>

#include <cstdio>
#include <string>

using namespace kiln;

/// Prints "epoch 1 |.........| valid accuracy 0.81".
class DotsRenderer : public train::Renderer {
 public:
  void on_start(const train::RunInfo& info) override {
    std::printf("training %s for %lld epochs\n", info.name.c_str(), static_cast<long long>(info.epochs));
  }
  void on_event(const train::MetricEvent& e) override {
    if (e.split != train::Split::Train) return;
    if (e.iteration == 1) std::printf("epoch %lld |", static_cast<long long>(e.epoch + 1));
    if (e.iteration % std::max<int64_t>(1, e.iterations / 20) == 0) std::printf(".");
    std::fflush(stdout);
  }
  void on_epoch_end(const train::EpochEnd& e) override {
    std::printf("| loss %.3f", e.train.front().second);
    for (auto& [name, value] : e.valid)
      if (name == "accuracy") std::printf("  valid accuracy %.3f", value);
    std::printf("%s\n", e.best ? "  (best)" : "");
  }
  void on_end(const std::string& message) override { std::printf("%s\n", message.c_str()); }
};

/// A small MLP: 784 -> 128 -> 10.
struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  explicit Mlp(const Device& d)
      : fc1({.in_features = 784, .out_features = 128}, d), fc2({.in_features = 128, .out_features = 10}, d) {}
  Tensor forward(const Tensor& x) { return fc2(relu(fc1(x.flatten(1)))); }
  KILN_VISIT(Mlp, fc1, fc2)
};

int main(int argc, char** argv) {
  bool quick = false;
  std::string runs_dir = "runs";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--runs-dir" && i + 1 < argc)
      runs_dir = argv[++i];
  }
  try {
    manual_seed(0);
    auto [train, valid] = data::split<data::ImageItem>(data::fashion_mnist(true), 0.1, 7);
    if (quick) {
      train = data::slice(train, 0, 2048);
      valid = data::slice(valid, 0, 512);
    }
    data::DataLoader<data::ImageItem> train_loader(train, {.batch_size = 64});
    data::DataLoader<data::ImageItem> valid_loader(valid, {.batch_size = 256, .shuffle = false});
    const Device device = Device::cpu().autodiff();
    Mlp net(device);
    optim::Adam opt(net.parameters(), {.lr = 1e-3});
    train::LearnerBuilder()
        .model(net)
        .optimizer(opt)
        .metric(train::metrics::accuracy())
        .device(device)
        .train_data(train_loader)
        .valid_data(valid_loader)
        .epochs(quick ? 2 : 5)
        .name("custom-renderer")
        .runs_dir(runs_dir)
        .renderer(std::make_shared<DotsRenderer>())
        .build()
        .fit();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
