// SPDX-License-Identifier: MIT OR Apache-2.0
// The edit-compile-run benchmark's model file: a small training program as a user writes it.
// bench/run.sh touches this file, rebuilds only its target (`cmake --build <dir> --target
// kiln_bench_train_model`, ccache off so the compiler really runs), starts it and stops the clock
// when it prints "kiln_bench_train_model: step 1 done". Target: <= 5 s from the edit.
//
//   kiln_bench_train_model [--steps N]   (default: 1)
//
// An MLP (784-512-512-10, ReLU, dropout) learns Fashion-MNIST with SGD + momentum; every 100
// steps it prints the running loss and accuracy.
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/optimizer.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace kiln;
namespace F = kiln::nn::functional;

/// The model: three dense layers with ReLU and dropout between them.
struct Classifier : nn::Module {
  nn::Linear fc1, fc2, fc3;
  nn::Dropout drop;
  explicit Classifier(const Device& d)
      : fc1({.in_features = 784, .out_features = 512}, d),
        fc2({.in_features = 512, .out_features = 512}, d),
        fc3({.in_features = 512, .out_features = 10}, d),
        drop({.p = 0.1}, d) {}
  /// x [N, 1, 28, 28] in [0, 1] -> logits [N, 10].
  Tensor forward(const Tensor& x) {
    Tensor h = (x.flatten(1) - 0.2860f) * (1.0f / 0.3530f);
    h = drop(relu(fc1(h)));
    h = drop(relu(fc2(h)));
    return fc3(h);
  }
  KILN_VISIT(Classifier, fc1, fc2, fc3, drop)
};

/// Running averages of the loss and the accuracy.
struct Meter {
  double loss = 0;
  int64_t seen = 0, correct = 0;
  void add(const Tensor& logits, const Tensor& target, const Tensor& l) {
    const int64_t n = target.size(0);
    loss += l.item<double>() * double(n);
    correct += logits.detach().argmax(1).eq(target).sum().item<int64_t>();
    seen += n;
  }
  void print(int64_t step) {
    std::printf("step %lld: loss %.4f, accuracy %.3f\n", static_cast<long long>(step), loss / double(seen),
                double(correct) / double(seen));
    *this = Meter{};
  }
};

int main(int argc, char** argv) {
  int64_t steps = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--steps N]\n", argv[0]);
      return 2;
    }
  }
  try {
    manual_seed(0);
    const Device device = Device::cpu().autodiff();
    data::DataLoader<data::ImageItem> loader(data::fashion_mnist(true), {.batch_size = 64, .seed = 1});
    Classifier net(device);
    optim::SGD opt(net.parameters(), {.lr = 0.01, .momentum = 0.9});
    net.train();
    Meter meter;
    int64_t step = 0;
    for (int epoch = 0; step < steps; ++epoch) {
      loader.start_epoch(epoch);
      while (step < steps) {
        auto batch = loader.next();
        if (!batch) break;
        Tensor x = batch->input.to(device), y = batch->target.to(device);
        Tensor logits = net.forward(x);
        Tensor loss = F::cross_entropy(logits, y);
        opt.step(loss.backward());
        meter.add(logits, y, loss);
        if (++step == 1) {
          std::printf("kiln_bench_train_model: step 1 done\n");
          std::fflush(stdout);
        }
        if (step % 100 == 0) meter.print(step);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_train_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
