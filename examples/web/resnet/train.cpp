// SPDX-License-Identifier: MIT OR Apache-2.0
// Trains the ResNet page's model (examples/web/resnet) on Fashion-MNIST and exports it to ONNX:
// a small ResNet (a 3x3 stem, three stages of two basic blocks, 16 -> 32 -> 64 channels,
// global average pooling, one linear layer) that takes [N, 1, 28, 28] images in [0, 1] and
// gives logits [N, 10]. The page runs the exported file through the code kiln-onnx generates
// from it; this program only makes the file (scripts/gen_web_resnet.sh runs it).
//
//   kiln_web_resnet_train OUT.onnx [--epochs N] [--quick]
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/onnx_export.h>
#include <kiln/optim/lr_scheduler.h>
#include <kiln/optim/optimizer.h>
#include <kiln/train.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride, const Device& d) {
  return nn::Conv2d(
      {.in_channels = in, .out_channels = out, .kernel_size = 3, .stride = stride, .padding = 1, .bias = false}, d);
}

/// Two 3x3 convolutions with batch norm and a shortcut (a strided 1x1 convolution with batch
/// norm when the shape changes), as in torchvision's BasicBlock.
struct Block : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  std::unique_ptr<nn::Conv2d> down;  // the projection, when the shape changes
  std::unique_ptr<nn::BatchNorm2d> down_bn;
  Block(int64_t in, int64_t out, int64_t stride, const Device& d)
      : conv1(conv3x3(in, out, stride, d)),
        conv2(conv3x3(out, out, 1, d)),
        bn1({.num_features = out}, d),
        bn2({.num_features = out}, d) {
    if (stride == 1 && in == out) return;
    down = std::make_unique<nn::Conv2d>(
        nn::ConvConfig{.in_channels = in, .out_channels = out, .kernel_size = 1, .stride = stride, .bias = false}, d);
    down_bn = std::make_unique<nn::BatchNorm2d>(nn::BatchNormConfig{.num_features = out}, d);
  }
  Tensor forward(const Tensor& x) {
    const Tensor h = bn2(conv2(relu(bn1(conv1(x)))));
    return relu(h + (down ? (*down_bn)((*down)(x)) : x));
  }
  std::string type_name() const override { return "Block"; }
  void visit(nn::Visitor& v) override {
    v.field("conv1", conv1);
    v.field("bn1", bn1);
    v.field("conv2", conv2);
    v.field("bn2", bn2);
    if (down) {
      v.field("down", *down);
      v.field("down_bn", *down_bn);
    }
  }
};

struct ResNet : nn::Module {
  nn::Conv2d stem;
  nn::BatchNorm2d stem_bn;
  Block b1, b2, b3, b4, b5, b6;
  nn::Linear fc;
  explicit ResNet(const Device& d)
      : stem(conv3x3(1, 16, 1, d)),
        stem_bn({.num_features = 16}, d),
        b1(16, 16, 1, d),
        b2(16, 16, 1, d),
        b3(16, 32, 2, d),
        b4(32, 32, 1, d),
        b5(32, 64, 2, d),
        b6(64, 64, 1, d),
        fc({.in_features = 64, .out_features = 10}, d) {}
  /// x [N, 1, 28, 28] in [0, 1] -> logits [N, 10].
  Tensor forward(const Tensor& x) {
    Tensor h = relu(stem_bn(stem((x - 0.2860f) * (1.0f / 0.3530f))));  // the training set's mean, std
    h = b6.forward(b5.forward(b4.forward(b3.forward(b2.forward(b1.forward(h))))));
    return fc(h.mean({2, 3}));
  }
  KILN_VISIT(ResNet, stem, stem_bn, b1, b2, b3, b4, b5, b6, fc)
};

/// Accuracy of net over the test images (eval mode; training mode again after).
double test_accuracy(ResNet& net, const data::DatasetPtr<data::ImageItem>& test, const Device& device) {
  net.eval();
  NoGradGuard no_grad;
  data::DataLoader<data::ImageItem> loader(test, {.batch_size = 500, .shuffle = false, .workers = 1});
  train::ConfusionMatrix cm(10);
  loader.start_epoch(0);
  while (auto batch = loader.next()) cm.add(net.forward(batch->input.to(device)), batch->target);
  net.train();
  return cm.accuracy();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.onnx [--epochs N] [--quick]\n", argv[0]);
    return 1;
  }
  const std::string out = argv[1];
  int epochs = 3;
  bool quick = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--epochs" && i + 1 < argc)
      epochs = std::stoi(argv[++i]);
    else if (a == "--quick")
      quick = true;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    manual_seed(0);
    data::DatasetPtr<data::ImageItem> train_set = data::fashion_mnist(true);
    data::DatasetPtr<data::ImageItem> test = data::fashion_mnist(false);
    if (quick) {
      train_set = data::slice<data::ImageItem>(train_set, 0, 1024);
      test = data::slice<data::ImageItem>(test, 0, 500);
      epochs = 1;
    }
    data::DataLoader<data::ImageItem> loader(train_set, {.batch_size = 128, .seed = 1, .workers = 1});
    const Device device = Device::cpu().autodiff();
    ResNet net(device);
    optim::AdamW opt(net.parameters(), {.lr = 2e-3, .weight_decay = 5e-4});
    const int64_t steps = epochs * static_cast<int64_t>(loader.num_batches());
    optim::lr_scheduler::OneCycleLR sched(opt, {.max_lr = 4e-3, .total_steps = steps, .pct_start = 0.25});
    std::printf("ResNet: %lld parameters, %zu training images, %d epochs\n", static_cast<long long>(net.num_params()),
                train_set->size(), epochs);
    for (int e = 0; e < epochs; ++e) {
      loader.start_epoch(static_cast<uint64_t>(e));
      double sum = 0;
      int64_t n = 0;
      while (auto batch = loader.next()) {
        const Tensor loss = F::cross_entropy(net.forward(batch->input.to(device)), batch->target.to(device));
        sum += loss.item<float>();
        ++n;
        opt.step(loss.backward());
        sched.step();
      }
      std::printf("epoch %d: mean loss %.4f, test accuracy %.2f%%\n", e + 1, sum / static_cast<double>(n),
                  100 * test_accuracy(net, test, device));
      std::fflush(stdout);
    }
    net.eval();
    onnx::export_model(net, [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{net.forward(x[0])}; },
                       {zeros({2, 1, 28, 28})}, out, {.dynamic = {{"input", {0}}}});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %s (%.0f s)\n", out.c_str(), secs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
