// SPDX-License-Identifier: MIT OR Apache-2.0
// The Learner: training, files written, checkpoints, resume (bit for bit), early stopping,
// eval/no-grad validation, renderer events.
#include <gtest/gtest.h>
#include <kiln/store.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"
#include "train/toy.h"

using namespace kiln;
using namespace kiln::train;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kiln_train_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Counts events and keeps the last messages.
class Recorder : public Renderer {
 public:
  int64_t train_events = 0, valid_events = 0, epoch_ends = 0;
  double last_progress = -1;
  bool monotone = true;
  std::string end;
  void on_event(const MetricEvent& e) override {
    (e.split == Split::Train ? train_events : valid_events)++;
    if (e.progress < last_progress) monotone = false;
    last_progress = e.progress;
  }
  void on_epoch_end(const EpochEnd&) override { ++epoch_ends; }
  void on_end(const std::string& m) override { end = m; }
};

struct ToySetup {
  Device d = Device::cpu().autodiff();
  test::ToyMlp net;
  optim::Adam opt;
  explicit ToySetup(uint64_t seed) : net((manual_seed(seed), d)), opt(net.parameters(), {.lr = 1e-2}) {}
};

}  // namespace

TEST(Learner, TrainsAndWritesRunFiles) {
  std::string dir = temp_dir("files");
  ToySetup s(1);
  test::ToySource tr(256, 32, 1), va(96, 32, 2);
  auto rec = std::make_shared<Recorder>();
  Learner l = LearnerBuilder()
                  .model(s.net)
                  .optimizer(s.opt)
                  .metric(metrics::accuracy())
                  .metric(metrics::f1(3))
                  .device(s.d)
                  .train_data(tr)
                  .valid_data(va)
                  .epochs(4)
                  .name("toy")
                  .runs_dir(dir)
                  .checkpoints(2, {"valid_loss", Mode::Min})
                  .renderer(rec)
                  .build();
  Summary sum = l.fit();
  ASSERT_EQ(sum.epochs.size(), 4u);
  EXPECT_FALSE(sum.stopped);
  EXPECT_LT(sum.epochs.back().train.at("loss"), sum.epochs.front().train.at("loss"));
  EXPECT_GT(sum.epochs.back().valid.at("accuracy"), 0.8);
  EXPECT_EQ(sum.steps, 4 * 8);
  // Best epoch is the argmin of valid loss.
  int64_t best = 0;
  for (size_t i = 1; i < sum.epochs.size(); ++i)
    if (sum.epochs[i].valid.at("loss") < sum.epochs[best].valid.at("loss")) best = static_cast<int64_t>(i);
  EXPECT_EQ(sum.best_epoch, best);
  EXPECT_DOUBLE_EQ(sum.best_value, sum.epochs[best].valid.at("loss"));
  // Events.
  EXPECT_EQ(rec->train_events, 32);
  EXPECT_EQ(rec->valid_events, 4 * 3);
  EXPECT_EQ(rec->epoch_ends, 4);
  EXPECT_TRUE(rec->monotone);
  EXPECT_DOUBLE_EQ(rec->last_progress, 1.0);
  EXPECT_NE(rec->end.find("Finished 4 epochs"), std::string::npos) << rec->end;
  // Files: CSV, PNG chart, checkpoints (the last two epochs, last and best).
  std::string csv = read_text(sum.dir + "/metrics.csv");
  EXPECT_EQ(csv.rfind("split,epoch,iteration,epoch_progress,loss,accuracy,f1_macro,lr,batch_items_per_second,"
                      "epoch_items_per_second,seconds\n",
                      0),
            0u)
      << csv.substr(0, 200);
  {
    // Epoch rows carry the epoch's rate: items of the epoch over its wall time (positive).
    size_t row = csv.find("\ntrain,0,");
    ASSERT_NE(row, std::string::npos);
    std::string line = csv.substr(row + 1, csv.find('\n', row + 1) - row - 1);
    std::vector<std::string> cols;
    for (size_t a = 0, b; a <= line.size(); a = b + 1) {
      b = line.find(',', a);
      if (b == std::string::npos) b = line.size();
      cols.push_back(line.substr(a, b - a));
    }
    ASSERT_EQ(cols.size(), 11u) << line;
    EXPECT_GT(std::stod(cols[9]), 0.0) << line;
  }
  EXPECT_NE(csv.find("\nvalid,3,3,4.000000,"), std::string::npos);
  std::string png = read_text(sum.dir + "/metrics.png");
  ASSERT_GT(png.size(), 100u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  std::string ck = sum.dir + "/checkpoints/";
  EXPECT_FALSE(fs::exists(ck + "epoch-1.ckpt"));
  EXPECT_FALSE(fs::exists(ck + "epoch-2.ckpt"));
  EXPECT_TRUE(fs::exists(ck + "epoch-3.ckpt"));
  EXPECT_TRUE(fs::exists(ck + "epoch-4.ckpt"));
  EXPECT_EQ(sum.last_checkpoint, ck + "last.ckpt");
  EXPECT_EQ(sum.best_checkpoint, ck + "best.ckpt");
  // The best checkpoint holds the best epoch's weights; the last one the final weights.
  ToySetup other(77);
  store::Checkpoint c;
  c.model = &other.net;
  store::load_checkpoint(sum.last_checkpoint, c);
  EXPECT_EQ(c.epoch, 4);
  EXPECT_TRUE(other.net.fc1.weight.equal(s.net.fc1.weight));
  store::load_checkpoint(sum.best_checkpoint, c);
  EXPECT_EQ(c.epoch, best + 1);
  fs::remove_all(dir);
}

TEST(Learner, ResumeGivesTheSameLossesBitForBit) {
  std::string dir = temp_dir("resume");
  auto run = [&](ToySetup& s, const std::string& name, int64_t max_steps, bool resume) {
    optim::lr_scheduler::StepLR sched(s.opt, 5, 0.7);
    test::ToySource tr(200, 16, 3), va(64, 32, 4);
    LearnerBuilder b;
    b.model(s.net)
        .optimizer(s.opt)
        .scheduler(sched, SchedulerStep::Step)
        .metric(metrics::accuracy())
        .device(s.d)
        .train_data(tr)
        .valid_data(va)
        .epochs(3)
        .name(name)
        .runs_dir(dir)
        .max_steps(max_steps)
        .renderer(std::make_shared<Recorder>());
    if (resume) b.resume();
    return b.build().fit();
  };
  ToySetup a(5);
  Summary full = run(a, "full", 0, false);
  ASSERT_EQ(full.step_losses.size(), 39u);

  ToySetup b1(5);
  Summary part = run(b1, "part", 20, false);  // stops mid-epoch 2 (13 steps per epoch)
  EXPECT_TRUE(part.stopped);
  EXPECT_NE(part.message.find("Stopped at epoch 2/3, step 7/13"), std::string::npos) << part.message;
  ToySetup b2(99);  // other initial weights and RNG position: all restored from the checkpoint
  Summary rest = run(b2, "part", 0, true);
  EXPECT_FALSE(rest.stopped);
  std::vector<double> joined = part.step_losses;
  joined.insert(joined.end(), rest.step_losses.begin(), rest.step_losses.end());
  ASSERT_EQ(joined.size(), full.step_losses.size());
  for (size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], full.step_losses[i]) << "step " << i;
  EXPECT_TRUE(b2.net.fc2.weight.equal(a.net.fc2.weight));
  // The history before the stop comes back with the checkpoint.
  ASSERT_EQ(rest.epochs.size(), 3u);
  EXPECT_EQ(rest.epochs[0].train.at("loss"), full.epochs[0].train.at("loss"));
  EXPECT_EQ(rest.epochs[2].valid.at("loss"), full.epochs[2].valid.at("loss"));
  fs::remove_all(dir);
}

TEST(Learner, EarlyStoppingWithPatience) {
  std::string dir = temp_dir("early");
  ToySetup s(2);
  test::ToySource tr(128, 32, 5), va(64, 32, 6);
  // Valid loss falls every epoch, so with mode Max it never improves after epoch 1.
  Summary sum = LearnerBuilder()
                    .model(s.net)
                    .optimizer(s.opt)
                    .device(s.d)
                    .train_data(tr)
                    .valid_data(va)
                    .epochs(10)
                    .runs_dir(dir)
                    .early_stopping({"valid_loss", Mode::Max}, 2)
                    .renderer(std::make_shared<Recorder>())
                    .build()
                    .fit();
  EXPECT_TRUE(sum.early_stopped);
  EXPECT_EQ(sum.epochs.size(), 3u);
  EXPECT_NE(sum.message.find("Early stopping after epoch 3"), std::string::npos) << sum.message;
  fs::remove_all(dir);
}

TEST(Learner, ValidationRunsInEvalModeWithoutGradients) {
  std::string dir = temp_dir("eval");
  ToySetup s(3);
  test::ToySource tr(64, 32, 7), va(64, 32, 8);
  std::vector<std::pair<bool, bool>> calls;  // (grad enabled, training)
  Summary sum = LearnerBuilder()
                    .model(s.net,
                           [&](const Tensor& x) {
                             calls.emplace_back(grad_enabled(), s.net.is_training());
                             return s.net.forward(x);
                           })
                    .optimizer(s.opt)
                    .device(s.d)
                    .train_data(tr)
                    .valid_data(va)
                    .epochs(2)
                    .runs_dir(dir)
                    .checkpoints(0)
                    .renderer(std::make_shared<Recorder>())
                    .build()
                    .fit();
  ASSERT_EQ(calls.size(), 8u);  // per epoch: 2 train, 2 valid
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(calls[e * 4 + 0], std::make_pair(true, true));
    EXPECT_EQ(calls[e * 4 + 1], std::make_pair(true, true));
    EXPECT_EQ(calls[e * 4 + 2], std::make_pair(false, false));
    EXPECT_EQ(calls[e * 4 + 3], std::make_pair(false, false));
  }
  EXPECT_TRUE(s.net.is_training());
  EXPECT_TRUE(sum.last_checkpoint.empty());
  EXPECT_FALSE(fs::exists(sum.dir + "/checkpoints/last.ckpt"));
  fs::remove_all(dir);
}

TEST(Learner, PlainRendererWritesNoEscapeCodes) {
  std::string dir = temp_dir("plain");
  ToySetup s(4);
  test::ToySource tr(64, 16, 9), va(32, 16, 10);
  std::string log = dir + "/log.txt";
  std::FILE* f = std::fopen(log.c_str(), "w");
  ASSERT_NE(f, nullptr);
  LearnerBuilder()
      .model(s.net)
      .optimizer(s.opt)
      .metric(metrics::accuracy())
      .device(s.d)
      .train_data(tr)
      .valid_data(va)
      .epochs(2)
      .runs_dir(dir)
      .renderer(std::shared_ptr<Renderer>(plain_renderer(f, 0)))
      .build()
      .fit();
  std::fclose(f);
  std::string text = read_text(log);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("epoch 1 train: loss "), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 2 valid: loss "), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 1/2 train 2/4"), std::string::npos) << text;
  EXPECT_NE(text.find("ETA"), std::string::npos);
  EXPECT_NE(text.find("Finished 2 epochs"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Learner, MissingPiecesThrow) {
  ToySetup s(1);
  test::ToySource tr(8, 4, 1);
  EXPECT_ERROR(LearnerBuilder().model(s.net).train_data(tr).build(), "an optimizer is required");
  EXPECT_ERROR(LearnerBuilder().model(s.net).optimizer(s.opt).build(), "training data");
  EXPECT_ERROR(LearnerBuilder().model(s.net).optimizer(s.opt).train_data(tr).epochs(0).build(), "epochs must be");
  EXPECT_ERROR(LearnerBuilder().model(s.net).optimizer(s.opt).train_data(tr).name("../x").build(), "plain folder");
}

TEST(Learner, ChartPngHasTheRequestedSize) {
  std::string dir = temp_dir("chart");
  Series a{"train", {0, 1, 2, 3}, {1.0, 0.6, 0.4, 0.35}}, b{"valid", {1, 2, 3}, {0.7, 0.5, 0.45}};
  write_chart_png(dir + "/c.png", {{"loss", {a, b}}, {"accuracy", {a}}, {"lr", {b}}}, 400, 250);
  std::string png = read_text(dir + "/c.png");
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](size_t o) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(png[o])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(png[o + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(png[o + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(png[o + 3]));
  };
  EXPECT_EQ(be32(16), 800u);  // two panels across
  EXPECT_EQ(be32(20), 500u);  // two rows
  EXPECT_ERROR(write_chart_png(dir + "/x.png", {}, 10, 10), "panel size");
  EXPECT_ERROR(chart_from_csv(dir + "/missing.csv", dir + "/y.png"), "cannot read");
  fs::remove_all(dir);
}
