// SPDX-License-Identifier: MIT OR Apache-2.0
// The main job: a small CNN learns Fashion-MNIST on the CPU with the Learner and its dashboard,
// is saved, evaluated on the 10k test images, and shows a few predictions.
//
//   fashion-mnist [--quick] [--epochs N] [--name NAME] [--runs-dir DIR] [--resume] [--plain] [--ddp]
//
// --ddp trains data-parallel on the processes of an MPI job (`make run-ddp`: mpirun -np 2), with
// batch norm synchronised over the ranks; rank 0 writes the run folder and prints, the other ranks
// print nothing (docs/distributed.md).
//
// ^C (or `q` in the dashboard) stops after the current step and writes a checkpoint; run again
// with --resume to continue. Exit status: 0 done, 130 stopped, 1 error.
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/lr_scheduler.h>
#include <kiln/store.h>
#include <kiln/train.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "net.h"

using namespace kiln;
using examples::Net;
namespace F = kiln::nn::functional;

int main(int argc, char** argv) {
  bool quick = false, resume = false, plain = false, ddp = false;
  int64_t epochs = -1;
  std::string name, runs_dir = "runs";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--quick")
      quick = true;
    else if (a == "--resume")
      resume = true;
    else if (a == "--plain")
      plain = true;
    else if (a == "--ddp")
      ddp = true;
    else if (a == "--epochs")
      epochs = std::atoll(value().c_str());
    else if (a == "--name")
      name = value();
    else if (a == "--runs-dir")
      runs_dir = value();
    else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--epochs N] [--name NAME] [--runs-dir DIR] [--resume] [--plain] [--ddp]\n",
                   argv[0]);
      return a == "--help" || a == "-h" ? 0 : 1;
    }
  }
  if (epochs < 0) epochs = quick ? 1 : 5;
  if (name.empty()) name = quick ? "fashion-mnist-quick" : "fashion-mnist";
  auto t_start = std::chrono::steady_clock::now();
  // Under --ddp every rank runs this program; only rank 0 prints and saves.
  const bool main_rank = train::process_rank() == 0;
  try {
    manual_seed(0);
    // 55k images to train on, 5k held out for validation; the 10k test images only at the end.
    auto train_all = data::fashion_mnist(true);
    data::DatasetPtr<data::ImageItem> test = data::fashion_mnist(false);
    auto [train, valid] = data::split<data::ImageItem>(train_all, 5000.0 / 60000.0, 42);
    if (quick) {
      train = data::slice(train, 0, 2048);
      valid = data::slice(valid, 0, 512);
      test = data::slice<data::ImageItem>(test, 0, 1000);
    }
    data::DataLoader<data::ImageItem> train_loader(train, {.batch_size = 128, .seed = 1, .workers = 1});
    data::DataLoader<data::ImageItem> valid_loader(valid, {.batch_size = 500, .shuffle = false, .workers = 1});

    const Device device = Device::cpu().autodiff();
    Net net(device);
    optim::AdamW opt(net.parameters(), {.lr = 2e-3, .weight_decay = 5e-4});
    const int64_t steps = epochs * static_cast<int64_t>(train_loader.num_batches());
    optim::lr_scheduler::OneCycleLR sched(opt, {.max_lr = 4e-3, .total_steps = steps, .pct_start = 0.25});

    std::shared_ptr<train::Renderer> renderer =
        plain ? std::shared_ptr<train::Renderer>(train::plain_renderer(stdout)) : train::default_renderer();
    if (main_rank) {
      std::printf("Fashion-MNIST: %zu training, %zu validation, %zu test images; %lld parameters; %lld epochs\n",
                  train->size(), valid->size(), test->size(), static_cast<long long>(net.num_params()),
                  static_cast<long long>(epochs));
      std::fflush(stdout);
    }
    train::LearnerBuilder b;
    b.model(net)
        .optimizer(opt)
        .scheduler(sched, train::SchedulerStep::Step)
        .metric(train::metrics::accuracy())
        .metric(train::metrics::f1(10))
        .device(device)
        .train_data(train_loader)
        .valid_data(valid_loader)
        .epochs(epochs)
        .name(name)
        .runs_dir(runs_dir)
        .checkpoints(2, {"valid_accuracy", train::Mode::Max})
        .renderer(renderer)
        .data_parallel(ddp)     // batch 128 is the global batch: 64 per rank on 2
        .sync_batch_norm(ddp);  // batch norm over all 128 images, as one process
    if (resume) b.resume();
    train::Summary summary = b.build().fit();
    if (summary.stopped) return 130;  // the renderer has printed where the checkpoint is
    if (!main_rank) return 0;         // the model is the same on every rank: rank 0 tests and saves it

    std::string model_path = summary.dir + "/model.safetensors";
    store::save(net, model_path);
    std::printf("model saved to %s; metrics in %s/metrics.csv and metrics.png\n", model_path.c_str(),
                summary.dir.c_str());

    // Test set: accuracy, per-class recall and a few predictions.
    net.eval();
    NoGradGuard no_grad;
    data::DataLoader<data::ImageItem> test_loader(test, {.batch_size = 500, .shuffle = false, .workers = 1});
    train::ConfusionMatrix cm(10);
    test_loader.start_epoch(0);
    Tensor first_probs, first_targets;
    while (auto batch = test_loader.next()) {
      Tensor logits = net.forward(batch->input.to(device));
      cm.add(logits, batch->target);
      if (!first_probs.defined()) {
        first_probs = logits.softmax(1).slice(0, 0, 8);
        first_targets = batch->target.slice(0, 0, 8);
      }
    }
    const auto& classes = data::fashion_mnist_classes();
    std::printf("\nsome test images:\n");
    auto probs = first_probs.to_vector<float>();
    auto targets = first_targets.to_vector<int64_t>();
    for (size_t i = 0; i < targets.size(); ++i) {
      size_t p = 0;
      for (size_t j = 1; j < 10; ++j)
        if (probs[i * 10 + j] > probs[i * 10 + p]) p = j;
      std::printf("  #%zu  %-12s predicted %-12s (%.1f%%)%s\n", i, classes[static_cast<size_t>(targets[i])].c_str(),
                  classes[p].c_str(), 100.0 * probs[i * 10 + p],
                  p == static_cast<size_t>(targets[i]) ? "" : "  <- wrong");
    }
    std::printf("\nper-class recall on the test set:\n");
    for (int64_t c = 0; c < 10; ++c)
      std::printf("  %-12s %.1f%%\n", classes[static_cast<size_t>(c)].c_str(), 100 * cm.recall(c));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::printf("\ntest accuracy: %.2f%% (%lld/%lld images), macro F1 %.4f; total time %.0f s\n", 100 * cm.accuracy(),
                static_cast<long long>(std::llround(cm.accuracy() * static_cast<double>(cm.total()))),
                static_cast<long long>(cm.total()), cm.macro_f1(), secs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
