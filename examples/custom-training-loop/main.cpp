// SPDX-License-Identifier: MIT OR Apache-2.0
// Fashion-MNIST without the Learner: the loop written out (forward, loss, backward, step).
//
//   custom-training-loop [--quick]
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/lr_scheduler.h>

#include <cstdio>
#include <cstring>

using namespace kiln;
namespace F = kiln::nn::functional;

struct Net : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  nn::Linear fc1, fc2;
  explicit Net(const Device& d)
      : conv1({.in_channels = 1, .out_channels = 32, .kernel_size = 3, .padding = 1}, d),
        conv2({.in_channels = 32, .out_channels = 64, .kernel_size = 3, .padding = 1}, d),
        bn1({.num_features = 32}, d),
        bn2({.num_features = 64}, d),
        fc1({.in_features = 64 * 7 * 7, .out_features = 128}, d),
        fc2({.in_features = 128, .out_features = 10}, d) {}
  Tensor forward(const Tensor& x) {
    Tensor h = F::max_pool2d(relu(bn1(conv1(x))), 2);
    h = F::max_pool2d(relu(bn2(conv2(h))), 2);
    return fc2(relu(fc1(h.flatten(1))));
  }
  KILN_VISIT(Net, conv1, bn1, conv2, bn2, fc1, fc2)
};

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  try {
    manual_seed(0);
    data::DatasetPtr<data::ImageItem> train = data::fashion_mnist(true), test = data::fashion_mnist(false);
    if (quick) {
      train = data::slice(data::shuffle(train, 1), 0, 2048);
      test = data::slice(test, 0, 1000);
    }
    data::DataLoader<data::ImageItem> loader(train, {.batch_size = 128, .seed = 1});
    const int epochs = quick ? 1 : 3;

    const Device device = Device::cpu().autodiff();
    Net net(device);
    optim::AdamW opt(net.parameters(), {.lr = 2e-3});
    optim::lr_scheduler::CosineAnnealingLR sched(opt, epochs * static_cast<int64_t>(loader.num_batches()));

    for (int epoch = 0; epoch < epochs; ++epoch) {
      net.train();
      loader.start_epoch(epoch);
      double loss_sum = 0;
      int64_t seen = 0, correct = 0;
      while (auto batch = loader.next()) {
        Tensor x = batch->input.to(device), y = batch->target.to(device);
        Tensor logits = net.forward(x);
        Tensor loss = F::cross_entropy(logits, y);
        opt.step(loss.backward());  // gradients are returned, not stored on the parameters
        sched.step();
        loss_sum += loss.item<double>() * static_cast<double>(x.size(0));
        correct += logits.detach().argmax(1).eq(y).sum().item<int64_t>();
        seen += x.size(0);
      }
      std::printf("epoch %d: loss %.4f  accuracy %.4f\n", epoch + 1, loss_sum / static_cast<double>(seen),
                  static_cast<double>(correct) / static_cast<double>(seen));
    }

    net.eval();
    NoGradGuard no_grad;
    data::DataLoader<data::ImageItem> test_loader(test, {.batch_size = 500, .shuffle = false});
    test_loader.start_epoch(0);
    int64_t seen = 0, correct = 0;
    while (auto batch = test_loader.next()) {
      Tensor pred = net.forward(batch->input.to(device)).argmax(1);
      correct += pred.eq(batch->target.to(device)).sum().item<int64_t>();
      seen += batch->input.size(0);
    }
    std::printf("test accuracy: %.2f%% (%lld images)\n",
                100.0 * static_cast<double>(correct) / static_cast<double>(seen), static_cast<long long>(seen));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
