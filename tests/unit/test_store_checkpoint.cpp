// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::store checkpoints: resuming gives the uninterrupted trajectory bit for bit, every part
// round-trips, and a checkpoint that does not fit is refused before anything is modified.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
#include <kiln/store.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;
namespace o = kiln::optim;
namespace s = kiln::optim::lr_scheduler;

namespace {

Device ad() { return Device::cpu().autodiff(); }

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  nn::Dropout drop;
  explicit Mlp(int64_t hidden = 16)
      : fc1({.in_features = 4, .out_features = hidden}, ad()),
        fc2({.in_features = hidden, .out_features = 1}, ad()),
        drop({.p = 0.3}, ad()) {}
  Tensor forward(const Tensor& x) const { return fc2(drop(relu(fc1(x)))); }
  KILN_VISIT(Mlp, fc1, fc2, drop)
};

/// A fixed regression problem (made before any run, so it does not move the RNG of a run).
struct Data {
  Tensor x, y;
  Data() {
    manual_seed(7);
    x = randn({32, 4}).to(ad());
    y = (x.sum(Dims{-1}, true).sin() + 0.1).to(ad());
  }
};

/// Model, optimizer and scheduler of one run; init_seed picks the initial weights.
struct TrainRun {
  Mlp model;
  o::Adam opt;
  s::CosineAnnealingLR sched;
  explicit TrainRun(uint64_t init_seed)
      : model((manual_seed(init_seed), 16)), opt(model.parameters(), {.lr = 0.02}), sched(opt, 12, 0.001) {}
  float step(const Data& d) {
    Tensor loss = (model.forward(d.x) - d.y).square().mean();
    Gradients g = loss.backward();
    opt.step(g);
    sched.step();
    return loss.item<float>();
  }
  store::Checkpoint ckpt() { return {.model = &model, .optimizer = &opt, .scheduler = &sched}; }
};

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_test_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::vector<float> values(const Tensor& t) { return t.detach().to(Device::cpu()).to(f32).to_vector<float>(); }

/// Everything a checkpoint restores, as plain values, to check that nothing changed.
struct Snapshot {
  std::vector<std::vector<float>> tensors;
  std::vector<std::pair<std::string, double>> scalars;
  s::SchedulerState sched;
  uint64_t rng_offset;
  explicit Snapshot(TrainRun& r) {
    for (auto& [n, t] : r.model.state()) tensors.push_back(values(t));
    auto sd = r.opt.state_dict();
    for (auto& [n, t] : sd.tensors) tensors.push_back(values(t));
    scalars = sd.scalars;
    sched = r.sched.state_dict();
    rng_offset = rng_state().offset;
  }
  bool operator==(const Snapshot& o) const {
    return tensors == o.tensors && scalars == o.scalars && sched == o.sched && rng_offset == o.rng_offset;
  }
};

}  // namespace

TEST(Checkpoint, ResumeGivesTheSameLossesBitForBit) {
  constexpr int N = 6;
  Data data;
  fs::path dir = temp_dir("resume");
  std::string path = (dir / "last.ckpt").string();

  // Uninterrupted: 2N steps.
  std::vector<float> full;
  {
    TrainRun a(1);
    manual_seed(2024);
    for (int k = 0; k < 2 * N; ++k) full.push_back(a.step(data));
  }
  // Interrupted after N steps, saved, resumed into fresh objects with other initial weights.
  std::vector<float> resumed;
  {
    TrainRun b(1);
    manual_seed(2024);
    for (int k = 0; k < N; ++k) resumed.push_back(b.step(data));
    auto c = b.ckpt();
    c.epoch = 1;
    c.step = N;
    c.extra["best_loss"] = std::to_string(resumed.back());
    store::save_checkpoint(path, c);
  }
  {
    TrainRun fresh(99);
    manual_seed(5);  // a different RNG position: the checkpoint must restore it
    EXPECT_NE(values(fresh.model.fc1.weight), std::vector<float>{});
    auto c = fresh.ckpt();
    store::load_checkpoint(path, c);
    EXPECT_EQ(c.epoch, 1);
    EXPECT_EQ(c.step, N);
    EXPECT_EQ(c.extra.at("best_loss"), std::to_string(resumed.back()));
    EXPECT_EQ(fresh.sched.last_epoch(), N);
    EXPECT_TRUE(fresh.model.fc1.weight.requires_grad());
    for (int k = 0; k < N; ++k) resumed.push_back(fresh.step(data));
  }
  ASSERT_EQ(resumed.size(), full.size());
  for (size_t k = 0; k < full.size(); ++k) EXPECT_EQ(resumed[k], full[k]) << "step " << k;
  EXPECT_LT(full.back(), full.front());
  fs::remove_all(dir);
}

TEST(Checkpoint, InMemoryCheckpointRoundTrips) {
  Data data;
  TrainRun a(3);
  for (int k = 0; k < 3; ++k) a.step(data);
  store::TensorMap tm = store::checkpoint_to_tensors(a.ckpt());
  EXPECT_EQ(tm.metadata.at("kiln.checkpoint"), "1");
  ASSERT_NE(tm.find("model.fc1.weight"), nullptr);
  ASSERT_NE(tm.find("optimizer.state.0.exp_avg"), nullptr);
  // Copies: training on does not change the checkpoint.
  auto saved = values(*tm.find("model.fc1.weight"));
  Snapshot at_save(a);
  a.step(data);
  EXPECT_EQ(values(*tm.find("model.fc1.weight")), saved);
  auto c = a.ckpt();
  store::checkpoint_from_tensors(tm, c);
  EXPECT_TRUE(Snapshot(a) == at_save);
}

TEST(Checkpoint, ReduceLROnPlateauRoundTrip) {
  fs::path dir = temp_dir("plateau");
  std::string path = (dir / "p.ckpt").string();
  Tensor w = zeros({2}, {.dtype = f64});
  o::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  s::ReduceLROnPlateau plateau(opt, {.factor = 0.5, .patience = 1, .cooldown = 2});
  std::vector<double> metrics = {1.0, 0.9, 0.95, 0.97, 0.99, 0.8, 0.85, 0.86, 0.9, 0.95};
  for (size_t k = 0; k < 5; ++k) plateau.step(metrics[k]);
  store::save_checkpoint(path, {.optimizer = &opt, .plateau = &plateau, .rng = false});

  Tensor w2 = zeros({2}, {.dtype = f64});
  o::SGD opt2({w2}, {.lr = 0.1, .momentum = 0.9});
  s::ReduceLROnPlateau plateau2(opt2, {.factor = 0.5, .patience = 1, .cooldown = 2});
  store::Checkpoint c{.optimizer = &opt2, .plateau = &plateau2, .rng = false};
  store::load_checkpoint(path, c);
  EXPECT_EQ(opt2.lr(), opt.lr());
  EXPECT_LT(opt2.lr(), 0.1);
  EXPECT_EQ(plateau2.best(), plateau.best());
  EXPECT_EQ(plateau2.num_bad_epochs(), plateau.num_bad_epochs());
  EXPECT_EQ(plateau2.cooldown_counter(), plateau.cooldown_counter());
  EXPECT_EQ(plateau2.last_epoch(), 5);
  for (size_t k = 5; k < metrics.size(); ++k) {
    plateau.step(metrics[k]);
    plateau2.step(metrics[k]);
    EXPECT_EQ(opt2.lr(), opt.lr()) << k;
  }
  // A fresh plateau's best is +inf: that survives the JSON too.
  s::ReduceLROnPlateau fresh(opt);
  store::save_checkpoint(path, {.plateau = &fresh, .rng = false});
  store::Checkpoint c2{.plateau = &plateau2, .rng = false};
  store::load_checkpoint(path, c2);
  EXPECT_EQ(plateau2.best(), std::numeric_limits<double>::infinity());
  fs::remove_all(dir);
}

TEST(Checkpoint, AnotherModelIsRefusedAndNothingChanges) {
  Data data;
  fs::path dir = temp_dir("refuse");
  std::string path = (dir / "other.ckpt").string();
  {
    TrainRun other(1);
    other.model = Mlp(8);  // another hidden size
    o::Adam opt(other.model.parameters(), {.lr = 0.02});
    s::CosineAnnealingLR sched(opt, 12);
    store::save_checkpoint(path, {.model = &other.model, .optimizer = &opt, .scheduler = &sched});
  }
  TrainRun r(2);
  for (int k = 0; k < 2; ++k) r.step(data);
  Snapshot before(r);
  auto c = r.ckpt();
  c.epoch = 42;
  std::string msg = test::error_of([&] { store::load_checkpoint(path, c); });
  EXPECT_NE(msg.find("other.ckpt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fc1.weight: model [16, 4] f32, file [8, 4] f32"), std::string::npos) << msg;
  EXPECT_TRUE(Snapshot(r) == before);
  EXPECT_EQ(c.epoch, 42);

  // Only the optimizer does not fit: the model is not touched either.
  store::save_checkpoint(path, r.ckpt());
  TrainRun wrong_opt(5);
  o::SGD sgd(wrong_opt.model.parameters(), {.lr = 0.1});
  Snapshot before2(wrong_opt);
  store::Checkpoint c2{.model = &wrong_opt.model, .optimizer = &sgd};
  EXPECT_ERROR(store::load_checkpoint(path, c2), "the checkpoint's optimizer is Adam, this one is SGD");
  EXPECT_TRUE(Snapshot(wrong_opt) == before2);
  fs::remove_all(dir);
}

TEST(Checkpoint, MissingPartsAndForeignFilesAreErrors) {
  fs::path dir = temp_dir("parts");
  std::string path = (dir / "m.ckpt").string();
  TrainRun r(1);
  store::save_checkpoint(path, {.model = &r.model, .rng = false});
  Snapshot before(r);
  auto c = r.ckpt();  // asks for optimizer, scheduler and rng
  EXPECT_ERROR(store::load_checkpoint(path, c), "no optimizer state");
  c.optimizer = nullptr;
  EXPECT_ERROR(store::load_checkpoint(path, c), "no kiln.scheduler state");
  c.scheduler = nullptr;
  EXPECT_ERROR(store::load_checkpoint(path, c), "no random generator state");
  EXPECT_TRUE(Snapshot(r) == before);
  c.rng = false;
  store::load_checkpoint(path, c);  // the model alone is fine

  // Plain weights are not a checkpoint.
  std::string weights = (dir / "w.safetensors").string();
  store::save(r.model, weights);
  EXPECT_ERROR(store::load_checkpoint(weights, c), "not a Kiln checkpoint");

  // Malformed metadata.
  store::TensorMap tm = store::checkpoint_to_tensors({.model = &r.model, .optimizer = &r.opt});
  auto bad = tm;
  bad.metadata["kiln.optimizer"] = "{not json";
  store::Checkpoint c3{.model = &r.model, .optimizer = &r.opt};
  EXPECT_ERROR(store::checkpoint_from_tensors(bad, c3, "bad.ckpt"), "bad.ckpt: the metadata entry kiln.optimizer");
  bad = tm;
  bad.metadata["kiln.step"] = "12abc";
  EXPECT_ERROR(store::checkpoint_from_tensors(bad, c3), "kiln.step is not a number");
  bad = tm;
  bad.metadata["kiln.optimizer"] = R"({"name": "Adam", "groups": 1, "params": 3, "scalars": {}})";
  EXPECT_ERROR(store::checkpoint_from_tensors(bad, c3), "kiln.optimizer.params is not an array");
  bad = tm;
  bad.tensors.emplace_back("optimizer.state.99.exp_avg", zeros({1}));
  EXPECT_ERROR(store::checkpoint_from_tensors(bad, c3), "unexpected optimizer tensor 'optimizer.state.99.exp_avg'");
  bad = tm;
  bad.tensors.emplace_back("stray", zeros({1}));
  EXPECT_ERROR(store::checkpoint_from_tensors(bad, c3), "unexpected tensor 'stray'");
  bad = tm;
  bad.metadata["kiln.checkpoint"] = "2";
  EXPECT_ERROR(store::checkpoint_from_tensors(bad, c3), "unsupported checkpoint version '2'");
  EXPECT_TRUE(Snapshot(r) == before);
  fs::remove_all(dir);
}
