// SPDX-License-Identifier: MIT OR Apache-2.0
// Training block of kiln_bench (paired with the same ids in torch_bench.py):
//   data/fashion_mnist_b64         one epoch of the 60k Fashion-MNIST training images through
//                                  data::DataLoader (batch 64, shuffled, built on the calling
//                                  thread), seconds per batch (bytes field: batches per epoch)
//   train/mlp_784_512_512_10_b64   one SGD step (lr 0.01, cross-entropy) of a 784-512-512-10 MLP
//   train/cnn_mnist_b64            one SGD step of PyTorch's MNIST example CNN: conv 1->32 3x3,
//                                  conv 32->64 3x3, max-pool 2, dropout 0.25, fc 9216->128,
//                                  dropout 0.5, fc 128->10 (cross-entropy on the logits)
//   infer/cnn_b1, infer/mlp_tiny_b1  batch-1 forward in eval mode without grad (tiny MLP:
//                                  784-64-10)
// Models live on Device::cpu().autodiff() with kiln::nn modules and kiln::optim::SGD. The data
// of the step benchmarks is one fixed random batch (the loader is measured on its own).
//
// `kiln_bench --memory <mlp|cnn> [steps]` (run.sh runs it in a fresh process, like
// `torch_bench.py --memory`): resident-set growth of the first three training steps (VmHWM
// after them, reset through /proc/self/clear_refs, minus VmRSS before), Kiln's allocator peak
// above its level before, and in-use bytes and VmRSS after step 10 and after the last step.
#if KILN_BENCH_DATA
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#endif
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/optimizer.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "bench_util.h"

namespace bench {
namespace {

using namespace kiln;
namespace F = kiln::nn::functional;

/// 784 -> hidden... -> 10 with ReLU between the layers.
struct Mlp : nn::Module {
  nn::Linear fc1, fc2, fc3;
  bool three;
  Mlp(int64_t h1, int64_t h2, const Device& d)
      : fc1({.in_features = 784, .out_features = h1}, d),
        fc2({.in_features = h1, .out_features = h2 > 0 ? h2 : 10}, d),
        fc3({.in_features = h2 > 0 ? h2 : 1, .out_features = 10}, d),
        three(h2 > 0) {}
  Tensor forward(const Tensor& x) {
    Tensor h = relu(fc1(x));
    return three ? fc3(relu(fc2(h))) : fc2(h);
  }
  KILN_VISIT(Mlp, fc1, fc2, fc3)
};

/// PyTorch's examples/mnist Net.
struct Cnn : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::Dropout drop1, drop2;
  nn::Linear fc1, fc2;
  explicit Cnn(const Device& d)
      : conv1({.in_channels = 1, .out_channels = 32, .kernel_size = 3}, d),
        conv2({.in_channels = 32, .out_channels = 64, .kernel_size = 3}, d),
        drop1({.p = 0.25}, d),
        drop2({.p = 0.5}, d),
        fc1({.in_features = 9216, .out_features = 128}, d),
        fc2({.in_features = 128, .out_features = 10}, d) {}
  Tensor forward(const Tensor& x) {
    Tensor h = relu(conv2(relu(conv1(x))));
    h = drop1(F::max_pool2d(h, 2)).flatten(1);
    return fc2(drop2(relu(fc1(h))));
  }
  KILN_VISIT(Cnn, conv1, conv2, drop1, drop2, fc1, fc2)
};

/// One model with its optimizer and a fixed batch of 64.
struct Trainer {
  Device dev = Device::cpu().autodiff();
  std::unique_ptr<Mlp> mlp;
  std::unique_ptr<Cnn> cnn;
  std::unique_ptr<optim::SGD> opt;
  Tensor x, y;
  explicit Trainer(const std::string& model, int64_t batch = 64) {
    manual_seed(0);
    if (model == "mlp") {
      mlp = std::make_unique<Mlp>(512, 512, dev);
      opt = std::make_unique<optim::SGD>(mlp->parameters(), optim::SGDConfig{.lr = 0.01});
      x = randn({batch, 784}, {.device = dev});
    } else {
      cnn = std::make_unique<Cnn>(dev);
      opt = std::make_unique<optim::SGD>(cnn->parameters(), optim::SGDConfig{.lr = 0.01});
      x = randn({batch, 1, 28, 28}, {.device = dev});
    }
    y = randint(0, 10, {batch}, {.dtype = i64, .device = dev});
  }
  /// Forward, cross-entropy, backward, SGD update; returns the loss.
  Tensor step() {
    Tensor logits = mlp ? mlp->forward(x) : cnn->forward(x);
    Tensor loss = F::cross_entropy(logits, y);
    opt->step(loss.backward());
    return loss;
  }
};

/// A field of /proc/self/status in bytes (VmRSS, VmHWM); 0 when unreadable.
double proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') return std::stod(line.substr(n + 1)) * 1024;
  return 0;
}

}  // namespace

void run_train_block(const Options& o) {
  // ---- data loading ----
#if KILN_BENCH_DATA
  if (selected("data/")) {
    try {
      data::DatasetPtr<data::ImageItem> ds = data::fashion_mnist(!o.smoke);
      if (o.smoke) ds = data::slice(ds, 0, 256);
      data::DataLoader<data::ImageItem> loader(ds, {.batch_size = 64, .seed = 1});
      const double batches = double(loader.num_batches());
      int epoch = 0;
      kiln_case("data/fashion_mnist_b64", batches, o, [&] {
        loader.start_epoch(epoch++);
        int64_t seen = 0;
        while (auto b = loader.next()) seen += b->input.size(0);
        if (seen != static_cast<int64_t>(ds->size())) throw Error("data: short epoch");
      });
    } catch (const std::exception& e) {
      emit_skip("data/fashion_mnist_b64", e);
    }
  }
#endif
  // ---- training steps: time per step; the first steps warm up (caches, oneDNN primitives) ----
  for (const char* model : {"mlp", "cnn"}) {
    const std::string id = model == std::string("mlp") ? "train/mlp_784_512_512_10_b64" : "train/cnn_mnist_b64";
    if (!selected(id)) continue;
    try {
      Trainer t(model, o.smoke ? 4 : 64);
      Tensor loss;
      kiln_case(id, 0, o, [&] { loss = t.step(); });
    } catch (const std::exception& e) {
      emit_skip(id, e);
    }
  }
  // ---- batch-1 inference, eval mode, no grad ----
  {
    const Device dev = Device::cpu().autodiff();
    manual_seed(0);
    NoGradGuard no_grad;
    Cnn cnn(dev);
    cnn.eval();
    Mlp tiny(64, 0, dev);
    tiny.eval();
    Tensor xc = randn({1, 1, 28, 28}, {.device = dev}), xm = randn({1, 784}, {.device = dev}), out;
    kiln_case(
        "infer/cnn_b1", 0, o, [&] { out = cnn.forward(xc); }, o.smoke ? 1 : 10);
    kiln_case(
        "infer/mlp_tiny_b1", 0, o, [&] { out = tiny.forward(xm); }, o.smoke ? 1 : 100);
  }
}

int run_memory_mode(const std::string& model, int steps, const Options& o) {
  if (model != "mlp" && model != "cnn") {
    std::fprintf(stderr, "kiln_bench --memory: model is mlp or cnn, not '%s'\n", model.c_str());
    return 2;
  }
  try {
    Trainer t(model, o.smoke ? 4 : 64);
    const Device cpu = Device::cpu();
    const std::string p = "mem/" + model + "/";
    const double rss0 = proc_status_bytes("VmRSS");
    {
      std::ofstream clear("/proc/self/clear_refs");
      clear << "5";  // resets VmHWM to the current RSS (Linux >= 4.0)
    }
    const int64_t in_use0 = memory_stats(cpu).in_use;
    reset_peak_memory(cpu);
    Tensor loss;
    for (int i = 0; i < 3; ++i) loss = t.step();
    sync(cpu);
    emit(p + "step_peak_rss", 1, proc_status_bytes("VmHWM") - rss0);
    emit(p + "step_peak_alloc", 1, double(memory_stats(cpu).peak - in_use0));
    steps = std::max(steps, 11);
    double rss10 = 0;
    int64_t in10 = 0;
    for (int i = 3; i < steps; ++i) {
      loss = t.step();
      if (i + 1 == 10) {
        sync(cpu);
        rss10 = proc_status_bytes("VmRSS");
        in10 = memory_stats(cpu).in_use;
      }
    }
    sync(cpu);
    emit(p + "in_use_step10", 1, double(in10));
    emit(p + "in_use_last", steps, double(memory_stats(cpu).in_use));
    emit(p + "rss_step10", 1, rss10);
    emit(p + "rss_last", steps, proc_status_bytes("VmRSS"));
    emit(p + "loss_last", steps, loss.item<double>() * 1e6);  // sanity: training did not diverge
  } catch (const std::exception& e) {
    emit_skip("mem/" + model + "/step_peak_rss", e);
    return 1;
  }
  return 0;
}

}  // namespace bench
