// SPDX-License-Identifier: MIT OR Apache-2.0
// The Learner's toolkit: gradient accumulation (the same weights as one step on the whole
// batch), steps of one's own (against a hand-written loop), the Evaluator (against a second
// implementation), checkpoint strategies, asynchronous checkpoint writes and writes that fail or
// are killed half-way (the previous checkpoint stays intact).
#include <gtest/gtest.h>
#include <kiln/store.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "test_util.h"
#include "train/toy.h"

using namespace kiln;
using namespace kiln::train;
namespace fs = std::filesystem;
namespace F = kiln::nn::functional;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kiln_toolkit_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

class Quiet : public Renderer {
 public:
  void on_event(const MetricEvent&) override {}
};

/// ToyMlp without dropout (accumulation compares runs that must draw no random numbers).
struct Toy {
  Device d = Device::cpu().autodiff();
  test::ToyMlp net;
  optim::Adam opt;
  explicit Toy(uint64_t seed) : net((manual_seed(seed), d)), opt(net.parameters(), {.lr = 1e-2}) {
    net.drop.config.p = 0;
  }
};

LearnerBuilder base(Toy& s, data::BatchSource& tr, const std::string& dir) {
  LearnerBuilder b;
  b.model(s.net).optimizer(s.opt).device(s.d).train_data(tr).runs_dir(dir).renderer(std::make_shared<Quiet>());
  b.handle_sigint(false);
  return b;
}

void expect_same_params(test::ToyMlp& a, test::ToyMlp& b, double tol) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].second.detach().to_vector<float>(), vb = pb[i].second.detach().to_vector<float>();
    for (size_t j = 0; j < va.size(); ++j) EXPECT_NEAR(va[j], vb[j], tol) << pa[i].first << " " << j;
  }
}

std::set<std::string> epoch_files(const std::string& ckdir) {
  std::set<std::string> r;
  for (auto& f : fs::directory_iterator(ckdir))
    if (f.path().filename().string().rfind("epoch-", 0) == 0) r.insert(f.path().filename().string());
  return r;
}

EpochRecord rec(int64_t e, double valid_loss) {
  EpochRecord r;
  r.epoch = e;
  r.valid["loss"] = valid_loss;
  r.train["loss"] = 1.0;
  return r;
}

}  // namespace

TEST(LearnerToolkit, AccumulateMatchesOneStepOnTheWholeBatch) {
  std::string dir = temp_dir("accum");
  // 40 items: micro-batches of 8 accumulated 3 at a time give windows of 24 and 16 items; batches
  // of 24 (the same order: the permutation does not depend on the batch size) give the same two.
  Toy a(1), b(1), c(1);
  test::ToySource ta(40, 8, 5), tb(40, 24, 5), tc(40, 8, 5);
  Summary sa = base(a, ta, dir).name("a").epochs(2).checkpoints(0).accumulate(3).build().fit();
  base(b, tb, dir).name("b").epochs(2).checkpoints(0).build().fit();
  base(c, tc, dir).name("c").epochs(2).checkpoints(0).build().fit();
  EXPECT_EQ(sa.step_losses.size(), 10u);  // losses are per batch
  expect_same_params(a.net, b.net, 2e-6);
  // Without accumulation the weights differ: the comparison above can fail.
  auto wc = c.net.fc1.weight.detach().to_vector<float>(), wb = b.net.fc1.weight.detach().to_vector<float>();
  float diff = 0;
  for (size_t i = 0; i < wc.size(); ++i) diff = std::max(diff, std::abs(wc[i] - wb[i]));
  EXPECT_GT(diff, 1e-3f);
  EXPECT_ERROR(base(a, ta, dir).accumulate(0).build(), "accumulate");
  fs::remove_all(dir);
}

TEST(LearnerToolkit, OwnTrainingAndValidationStepsMatchAHandWrittenLoop) {
  std::string dir = temp_dir("step");
  Toy a(2), b(2);
  test::ToySource tr(48, 16, 3), va(32, 16, 4);
  auto penalised = [](test::ToyMlp& net, const data::Batch& batch) {
    Tensor out = net.forward(batch.input);
    Tensor w = net.fc1.weight;
    return StepOutput{F::cross_entropy(out, batch.target) + (w * w).sum() * 1e-2, out, batch.target};
  };
  int valid_calls = 0;
  bool valid_grad = true;
  Summary sum = base(a, tr, dir)
                    .valid_data(va)
                    .epochs(2)
                    .checkpoints(0)
                    .train_step([&](const data::Batch& batch) { return penalised(a.net, batch); })
                    .valid_step([&](const data::Batch& batch) {
                      ++valid_calls;
                      valid_grad = grad_enabled() || a.net.is_training();
                      Tensor out = a.net.forward(batch.input);
                      return StepOutput{F::cross_entropy(out, batch.target), out, batch.target};
                    })
                    .metric(metrics::accuracy())
                    .build()
                    .fit();
  // The same by hand.
  std::vector<double> losses;
  for (uint64_t e = 0; e < 2; ++e) {
    tr.start_epoch(e);
    while (auto batch = tr.next()) {
      data::Batch bb{batch->input.to(b.d), batch->target.to(b.d)};
      StepOutput so = penalised(b.net, bb);
      b.opt.step(so.loss.backward());
      losses.push_back(so.loss.item<double>());
    }
  }
  expect_same_params(a.net, b.net, 1e-6);
  ASSERT_EQ(sum.step_losses.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(sum.step_losses[i], losses[i], 1e-6);
  EXPECT_EQ(valid_calls, 4);
  EXPECT_FALSE(valid_grad);
  EXPECT_TRUE(sum.epochs[1].valid.count("accuracy"));
  fs::remove_all(dir);
}

TEST(LearnerToolkit, EvaluatorMatchesASecondImplementation) {
  std::string dir = temp_dir("eval");
  Toy s(3);
  test::ToySource tr(64, 16, 5), te(50, 16, 6);
  auto acc = metrics::accuracy();
  Learner learner = base(s, tr, dir).epochs(2).checkpoints(0).metric(acc).build();
  learner.fit();
  Evaluator ev = learner.evaluator();
  EXPECT_EQ(ev.config().metrics[0].get(), acc.get());  // the Learner's metric objects
  MetricValues v = ev.evaluate(te);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].first, "loss");
  EXPECT_EQ(v[1].first, "accuracy");
  EXPECT_TRUE(s.net.is_training());  // mode restored
  // By hand: argmax against the labels, the cross entropy weighted by batch size.
  double loss_sum = 0;
  int64_t right = 0, n = 0;
  s.net.eval();
  te.start_epoch(0);
  while (auto b = te.next()) {
    NoGradGuard ng;
    Tensor out = s.net.forward(b->input.to(s.d));
    auto o = out.to_vector<float>();
    auto y = b->target.to_vector<int64_t>();
    for (size_t i = 0; i < y.size(); ++i) {
      size_t best = 0;
      for (size_t k = 1; k < 3; ++k)
        if (o[i * 3 + k] > o[i * 3 + best]) best = k;
      right += static_cast<int64_t>(best) == y[i];
    }
    loss_sum += F::cross_entropy(out, b->target.to(s.d)).item<double>() * static_cast<double>(y.size());
    n += static_cast<int64_t>(y.size());
  }
  s.net.train();
  EXPECT_NEAR(v[0].second, loss_sum / static_cast<double>(n), 1e-6);
  EXPECT_DOUBLE_EQ(v[1].second, static_cast<double>(right) / static_cast<double>(n));
  EvaluatorConfig bad;
  EXPECT_ERROR(Evaluator{bad}, "model");
  fs::remove_all(dir);
}

TEST(LearnerToolkit, CheckpointStrategies) {
  std::vector<EpochRecord> h{rec(0, 0.5), rec(1, 0.2), rec(2, 0.4), rec(3, 0.2), rec(4, 0.9)};
  auto last2 = keep_last(2);
  auto best1 = keep_best({"valid_loss", Mode::Min});
  auto best2max = keep_best({"valid_loss", Mode::Max}, 2);
  auto both = last2 | best1;
  std::vector<int> k_last, k_best, k_max, k_both;
  for (int64_t e = 0; e < 5; ++e) {
    if (last2->keep(e, h)) k_last.push_back(static_cast<int>(e));
    if (best1->keep(e, h)) k_best.push_back(static_cast<int>(e));
    if (best2max->keep(e, h)) k_max.push_back(static_cast<int>(e));
    if (both->keep(e, h)) k_both.push_back(static_cast<int>(e));
  }
  EXPECT_EQ(k_last, (std::vector<int>{3, 4}));
  EXPECT_EQ(k_best, (std::vector<int>{1}));  // a tie goes to the earlier epoch
  EXPECT_EQ(k_max, (std::vector<int>{0, 4}));
  EXPECT_EQ(k_both, (std::vector<int>{1, 3, 4}));
  EXPECT_ERROR(keep_last(0), "keep_last");

  // In a run: the newest epoch and the one with the highest training loss stay.
  std::string dir = temp_dir("strategy");
  Toy s(4);
  test::ToySource tr(32, 16, 7);
  Summary sum = base(s, tr, dir)
                    .epochs(5)
                    .checkpoints(1)
                    .checkpointing(keep_last(1) | keep_best({"train_loss", Mode::Max}))
                    .build()
                    .fit();
  int64_t worst = 0;
  for (const auto& r : sum.epochs)
    if (r.train.at("loss") > sum.epochs[worst].train.at("loss")) worst = r.epoch;
  std::set<std::string> want{"epoch-5.ckpt", "epoch-" + std::to_string(worst + 1) + ".ckpt"};
  EXPECT_EQ(epoch_files(sum.dir + "/checkpoints"), want);
  EXPECT_TRUE(fs::exists(sum.last_checkpoint));
  fs::remove_all(dir);
}

TEST(LearnerToolkit, AsynchronousCheckpointsLetTrainingGoOn) {
  std::string dir = temp_dir("async");
  for (bool async : {true, false}) {
    Toy s(5);
    test::ToySource tr(64, 16, 8);
    std::atomic<int64_t> steps{0};
    std::atomic<int> advanced{-1};  // at the first write: did training go on while it waited?
    std::atomic<bool> started{false};
    auto write = [&](const std::string& path, const store::TensorMap& t) {
      if (advanced.load() < 0) {
        started = true;
        int64_t c0 = steps.load();
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(async ? 5000 : 150);
        while (steps.load() < c0 + 3 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        advanced = steps.load() >= c0 + 3 ? 1 : 0;
      }
      store::save_safetensors(path, t.tensors, t.metadata);
    };
    LearnerBuilder lb = base(s, tr, dir);
    lb.name(async ? "async" : "sync").epochs(3).checkpoints(3).async_checkpoints(async);
    lb.train_step([&](const data::Batch& b) {
      // Epoch 1 waits until the writer thread has picked up epoch 0's checkpoint (bounded), so a
      // slow thread start cannot let training finish before the write begins.
      if (++steps > 4) {
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!started.load() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      Tensor out = s.net.forward(b.input);
      return StepOutput{F::cross_entropy(out, b.target), out, b.target};
    });
    lb.config().checkpoint_write = write;
    Summary sum = lb.build().fit();
    EXPECT_EQ(advanced.load(), async ? 1 : 0) << "async " << async;
    // All written when fit() returns, and the last one holds the final weights.
    Toy r(99);
    store::Checkpoint ck{.model = &r.net};
    store::load_checkpoint(sum.last_checkpoint, ck);
    EXPECT_EQ(ck.epoch, 3);
    expect_same_params(r.net, s.net, 0);
    EXPECT_EQ(epoch_files(sum.dir + "/checkpoints").size(), 3u);
  }
  fs::remove_all(dir);
}

TEST(LearnerToolkit, AFailedOrKilledWriteLeavesThePreviousCheckpoint) {
  std::string dir = temp_dir("crash");
  Toy s(6);
  test::ToySource tr(32, 16, 9);
  // Epoch 2's writes fail half-way through the file: fit() reports it, last.ckpt is epoch 1's.
  int writes = 0;
  auto write = [&](const std::string& path, const store::TensorMap& t) {
    if (++writes <= 2) return store::save_safetensors(path, t.tensors, t.metadata);  // last, epoch-1
    store::write_atomic(path, [&](int fd) {
      std::vector<char> half(4096, 'x');
      store::write_all(fd, half.data(), half.size(), path);
      throw Error("disk full (simulated)");
    });
  };
  LearnerBuilder b = base(s, tr, dir).epochs(2).checkpoints(2);
  b.config().checkpoint_write = write;
  Learner learner = b.build();
  EXPECT_ERROR(learner.fit(), "disk full");
  std::string last = dir + "/run/checkpoints/last.ckpt";
  Toy r(7);
  store::Checkpoint ck{.model = &r.net};
  store::load_checkpoint(last, ck);
  EXPECT_EQ(ck.epoch, 1);
  for (auto& f : fs::directory_iterator(dir + "/run/checkpoints"))
    EXPECT_EQ(f.path().extension(), ".ckpt") << "a temporary file was left: " << f.path();

  // A process killed while writing leaves the file as it was.
  const std::string before = [&] {
    std::ifstream in(last, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    store::write_atomic(last, [&](int fd) {
      store::write_all(fd, before.data(), before.size() / 2, last);
      ::raise(SIGKILL);
    });
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  std::ifstream in(last, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), before);
  store::load_checkpoint(last, ck);
  EXPECT_EQ(ck.epoch, 1);
  fs::remove_all(dir);
}
