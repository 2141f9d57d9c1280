// SPDX-License-Identifier: MIT OR Apache-2.0
// Data-parallel training against one process: gradients are the (weighted) mean of every rank's,
// computed here from every rank's data; a CNN trained on Fashion-MNIST for 20 steps of global
// batch 64 gives the losses and weights of one process on the same batches; the Learner does
// the same with data_parallel on, writes files on rank 0 only, and its checkpoints resume on any
// number of processes. Run on 1, 2 and 3 ranks (tests/dist/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "kiln/data/loader.h"
#include "kiln/data/sources.h"
#include "kiln/dist.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "kiln/train.h"

using namespace kiln;
namespace F = kiln::nn::functional;
namespace fs = std::filesystem;

namespace {

dist::ProcessGroup& pg() { return dist::default_group(); }
int R() { return pg().rank(); }
int W() { return pg().size(); }
const Device kDev = Device::cpu().autodiff();

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  explicit Mlp(const Device& d)
      : fc1({.in_features = 5, .out_features = 4}, d), fc2({.in_features = 4, .out_features = 3}, d) {}
  Tensor forward(const Tensor& x) { return fc2(tanh(fc1(x))); }
  KILN_VISIT(Mlp, fc1, fc2)
};

/// The MNIST CNN of the equivalence tests (no dropout or batch norm: their randomness and batch
/// statistics differ between one process and several by design).
struct Cnn : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::Linear fc1, fc2;
  explicit Cnn(const Device& d)
      : conv1({.in_channels = 1, .out_channels = 8, .kernel_size = 3, .padding = 1}, d),
        conv2({.in_channels = 8, .out_channels = 16, .kernel_size = 3, .padding = 1}, d),
        fc1({.in_features = 16 * 7 * 7, .out_features = 32}, d),
        fc2({.in_features = 32, .out_features = 10}, d) {}
  Tensor forward(const Tensor& x) {
    Tensor h = F::max_pool2d(relu(conv1(x)), 2);
    h = F::max_pool2d(relu(conv2(h)), 2);
    return fc2(relu(fc1(h.flatten(1))));
  }
  KILN_VISIT(Cnn, conv1, conv2, fc1, fc2)
};

/// 1280 Fashion-MNIST training images (20 batches of 64), loaded once.
data::DatasetPtr<data::ImageItem> images() {
  static data::DatasetPtr<data::ImageItem> ds = [] {
    data::DatasetPtr<data::ImageItem> all = data::fashion_mnist(true);
    return data::slice(all, 0, 1280);
  }();
  return ds;
}

/// Renders nothing (the ranks' output would interleave).
struct Silent : train::Renderer {
  void on_event(const train::MetricEvent&) override {}
};

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double diff = (got.detach().to(f64) - want.detach().to(f64)).abs().max().item<double>();
  EXPECT_LE(diff, tol) << what;
}

/// Every rank holds the same bits.
void expect_same_on_every_rank(const Tensor& t, const std::string& what) {
  Tensor all = pg().all_gather(t.detach());
  for (int r = 0; r < W(); ++r) EXPECT_TRUE(all.select(0, r).equal(t.detach())) << what << " differs on rank " << r;
}

/// A folder for this test's runs, the same on every rank, emptied by rank 0.
std::string shared_dir(const std::string& name) {
  fs::path p = fs::current_path() / ("ddp_np" + std::to_string(W())) / name;
  if (R() == 0) {
    fs::remove_all(p);
    fs::create_directories(p);
  }
  pg().barrier();
  return p.string();
}

}  // namespace

TEST(DDP, ParametersStartFromRankZero) {
  manual_seed(10 + static_cast<uint64_t>(R()));  // other initial weights on every rank
  Mlp net(kDev);
  manual_seed(10);
  Mlp rank0(kDev);
  dist::DistributedDataParallel ddp(net, pg());
  for (size_t i = 0; i < net.parameters().size(); ++i) {
    EXPECT_TRUE(net.parameters()[i].equal(rank0.parameters()[i])) << "parameter " << i;
    EXPECT_TRUE(net.parameters()[i].requires_grad());
  }
}

TEST(DDP, BucketsHoldEveryParameterOnceInReverseOrder) {
  Cnn net(kDev);
  dist::DistributedDataParallel ddp(net, pg(), {.bucket_bytes = 2048});
  auto buckets = ddp.buckets();
  EXPECT_GT(buckets.size(), 3u);
  std::vector<size_t> order;
  for (auto& b : buckets) order.insert(order.end(), b.begin(), b.end());
  const size_t n = net.parameters().size();
  ASSERT_EQ(order.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(order[i], n - 1 - i);
}

TEST(DDP, GradientsAreTheWeightedMeanOverRanks) {
  manual_seed(3);
  Mlp net(kDev);
  dist::DistributedDataParallel ddp(net, pg(), {.bucket_bytes = 1});  // a bucket per parameter
  auto loss_of = [](Mlp& m, int r) {
    manual_seed(100 + static_cast<uint64_t>(r));
    Tensor x = randn({6, 5}).to(kDev);
    return m.forward(x).square().mean() * static_cast<double>(r + 1);
  };
  for (bool weighted : {false, true}) {
    auto weight = [&](int r) { return weighted ? static_cast<double>(2 * r + 1) : 1.0; };
    Gradients g = ddp.backward(loss_of(net, R()), weight(R()));
    EXPECT_EQ(ddp.last_stats().buckets, 4u);
    // Every rank's gradients, computed here on a copy of the model.
    Mlp ref = nn::deep_copy(net);
    std::vector<Tensor> want;
    double total = 0;
    for (int r = 0; r < W(); ++r) {
      Gradients gr = loss_of(ref, r).backward();
      std::vector<Tensor> ps = ref.parameters();
      for (size_t i = 0; i < ps.size(); ++i) {
        Tensor wi = gr.get(ps[i]).detach() * weight(r);
        if (r == 0)
          want.push_back(wi);
        else
          want[i] = want[i] + wi;
      }
      total += weight(r);
    }
    std::vector<Tensor> ps = net.parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor gi = g.get(ps[i]);
      expect_close(gi, want[i] / total, 1e-6, "parameter " + std::to_string(i) + (weighted ? " (weighted)" : ""));
      EXPECT_EQ(gi.device(), ps[i].device());
      expect_same_on_every_rank(gi, "gradient " + std::to_string(i));
    }
  }
}

TEST(DDP, ParametersWithoutGradientsOnSomeRanks) {
  struct Branches : nn::Module {
    nn::Linear a, b, c;
    explicit Branches(const Device& d)
        : a({.in_features = 3, .out_features = 2}, d),
          b({.in_features = 3, .out_features = 2}, d),
          c({.in_features = 3, .out_features = 2}, d) {}
    KILN_VISIT(Branches, a, b, c)
  };
  manual_seed(4);
  Branches net(kDev);
  dist::DistributedDataParallel ddp(net, pg(), {.bucket_bytes = 1 << 20});  // one bucket
  EXPECT_EQ(ddp.buckets().size(), 1u);
  auto loss_of = [](Branches& m, int r) {
    manual_seed(200 + static_cast<uint64_t>(r));
    Tensor x = randn({4, 3}).to(kDev);
    return r == 0 ? m.a(x).sum() : (m.a(x) + m.b(x).square()).sum();  // c: never used
  };
  Gradients g = ddp.backward(loss_of(net, R()));
  Branches ref = nn::deep_copy(net);
  Tensor want_a, want_b;
  for (int r = 0; r < W(); ++r) {
    Gradients gr = loss_of(ref, r).backward();
    Tensor ga = gr.get(ref.a.weight).detach(), gb = gr.get(ref.b.weight);
    want_a = r == 0 ? ga : want_a + ga;
    if (gb.defined()) want_b = want_b.defined() ? want_b + gb.detach() : gb.detach();
  }
  expect_close(g.get(net.a.weight), want_a / static_cast<double>(W()), 1e-6, "a (used everywhere)");
  if (W() > 1)  // a zero gradient on rank 0 in the mean
    expect_close(g.get(net.b.weight), want_b / static_cast<double>(W()), 1e-6, "b (not used on rank 0)");
  else
    EXPECT_FALSE(g.get(net.b.weight).defined());
  EXPECT_FALSE(g.get(net.c.weight).defined()) << "c gets no gradient on any rank";
}

TEST(DDP, AllReducesStartDuringBackward) {
  Cnn net(kDev);
  dist::DistributedDataParallel ddp(net, pg(), {.bucket_bytes = 4096});
  Tensor x = images()->get(0).image.to(f32).unsqueeze(0).to(kDev);
  Gradients g = ddp.backward(net.forward(x).square().mean());
  const dist::DDPStats& st = ddp.last_stats();
  EXPECT_EQ(st.buckets, ddp.buckets().size());
  // Every bucket but the one holding the first layer is complete before backward ends.
  EXPECT_GE(st.launched_during_backward + 1, st.buckets);
  EXPECT_TRUE(g.get(net.conv1.weight).defined());
}

TEST(DDP, MatchesOneProcessOnTheGlobalBatch) {
  // 20 steps of global batch 64: one process on the whole batch, and this job with each rank on
  // its shard of the same batch (DataLoaderOptions::num_shards).
  auto train = [](bool ddp_on, std::vector<double>& losses) {
    manual_seed(ddp_on ? 42 + static_cast<uint64_t>(R()) : 42);  // DDP: rank 0's init (seed 42) wins
    Cnn net(kDev);
    data::DataLoader<data::ImageItem> loader(images(), {.batch_size = 64,
                                                        .seed = 7,
                                                        .num_shards = ddp_on ? static_cast<size_t>(W()) : 1,
                                                        .shard_index = ddp_on ? static_cast<size_t>(R()) : 0});
    optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
    std::optional<dist::DistributedDataParallel> ddp;
    if (ddp_on) ddp.emplace(net, pg(), dist::DDPOptions{.bucket_bytes = 16384});
    loader.start_epoch(0);
    while (auto b = loader.next()) {
      Tensor x = b->input.to(kDev), y = b->target.to(kDev);
      const int64_t n = x.size(0);
      Tensor loss = F::cross_entropy(net.forward(x), y);
      opt.step(ddp ? ddp->backward(loss, static_cast<double>(n)) : loss.backward());
      double lv = loss.item<double>();
      if (ddp) {  // the global batch's loss
        Tensor t = tensor(std::vector<double>{lv * static_cast<double>(n), static_cast<double>(n)}, {2});
        pg().all_reduce(t);
        lv = t.to_vector<double>()[0] / t.to_vector<double>()[1];
      }
      losses.push_back(lv);
    }
    return net;
  };
  std::vector<double> one, many;
  Cnn a = train(false, one);
  Cnn b = train(true, many);
  ASSERT_EQ(one.size(), 20u);
  ASSERT_EQ(many.size(), 20u);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(many[i], one[i], 1e-5) << "step " << i;
  if (std::getenv("KILN_TEST_VERBOSE") && R() == 0)
    for (size_t i = 0; i < one.size(); ++i)
      std::printf("step %zu: %.9f %.9f diff %.3g\n", i, one[i], many[i], many[i] - one[i]);
  EXPECT_LT(one.back(), one.front());  // it learns
  std::vector<Tensor> pa = a.parameters(), pb = b.parameters();
  if (std::getenv("KILN_TEST_VERBOSE") && R() == 0)
    for (size_t i = 0; i < pa.size(); ++i)
      std::printf("param %zu: max |w| %.4g, max diff %.3g\n", i, pa[i].abs().max().item<double>(),
                  (pa[i] - pb[i]).abs().max().item<double>());
  for (size_t i = 0; i < pa.size(); ++i) {
    expect_close(pb[i], pa[i], 1e-5, "weights " + std::to_string(i));
    expect_same_on_every_rank(pb[i], "weights " + std::to_string(i));
  }
}

// ---- the Learner ------------------------------------------------------------------------------

namespace {

struct LearnRun {
  train::Summary summary;
  std::vector<Tensor> weights;
};

/// The Learner on the CNN: 2 epochs of 10 steps (global batch 64) with validation.
LearnRun learn(bool dp, const std::string& runs_dir, const std::string& name, int64_t max_steps,
               const std::string& resume = "", int64_t accumulate = 1, int64_t items = 640) {
  manual_seed(dp ? 42 + static_cast<uint64_t>(R()) : 42);
  Cnn net(kDev);
  optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  data::DataLoader<data::ImageItem> tr(data::slice(images(), 0, items), {.batch_size = 64, .seed = 7});
  data::DataLoader<data::ImageItem> va(data::slice(images(), 0, 256), {.batch_size = 128, .shuffle = false});
  train::LearnerBuilder b;
  b.model(net)
      .optimizer(opt)
      .metric(train::metrics::accuracy())
      .device(kDev)
      .train_data(tr)
      .valid_data(va)
      .epochs(2)
      .name(name)
      .runs_dir(runs_dir)
      .checkpoints(1)
      .max_steps(max_steps)
      .handle_sigint(false)
      .renderer(std::make_shared<Silent>())
      .data_parallel(dp)
      .accumulate(accumulate);
  b.config().ddp_bucket_bytes = 16384;
  if (!resume.empty()) b.resume(resume);
  LearnRun r{b.build().fit(), {}};
  for (const Tensor& p : net.parameters()) r.weights.push_back(p.detach().clone());
  return r;
}

void expect_same_losses(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << what << ", step " << i;
}

}  // namespace

TEST(DDPLearner, MatchesOneProcessAndWritesOnRankZeroOnly) {
  std::string dir = shared_dir("learner");
  std::string own = dir + "/rank" + std::to_string(R());  // each rank's runs folder
  LearnRun one = learn(false, own + "/single", "cnn", 0);
  LearnRun many = learn(true, own + "/dp", "cnn", 0);
  ASSERT_EQ(one.summary.step_losses.size(), 20u);
  expect_same_losses(many.summary.step_losses, one.summary.step_losses, "data parallel");
  for (size_t i = 0; i < one.weights.size(); ++i) {
    expect_close(many.weights[i], one.weights[i], 1e-5, "weights " + std::to_string(i));
    expect_same_on_every_rank(many.weights[i], "weights " + std::to_string(i));
  }
  // Validation (whole set on every rank) and the global training loss agree with one process.
  ASSERT_EQ(many.summary.epochs.size(), 2u);
  EXPECT_NEAR(many.summary.epochs[1].valid.at("loss"), one.summary.epochs[1].valid.at("loss"), 1e-5);
  EXPECT_NEAR(many.summary.epochs[1].valid.at("accuracy"), one.summary.epochs[1].valid.at("accuracy"), 1e-9);
  EXPECT_NEAR(many.summary.epochs[1].train.at("loss"), one.summary.epochs[1].train.at("loss"), 1e-5);
  // Only rank 0 writes the run folder.
  const bool wrote = fs::exists(own + "/dp/cnn/metrics.csv") && fs::exists(own + "/dp/cnn/checkpoints/last.ckpt");
  EXPECT_EQ(wrote, R() == 0);
  if (R() != 0) EXPECT_FALSE(fs::exists(own + "/dp")) << "rank " << R() << " created its run folder";
}

TEST(DDPLearner, GradientAccumulationMatchesOneProcess) {
  // 600 items: 9 global batches of 64 and one of 24, in windows of 2, so the last window mixes
  // sizes (and the ranks' shares of it differ on 3 processes): every rank steps alike, as one
  // process does with the same windows.
  std::string own = shared_dir("accumulate") + "/rank" + std::to_string(R());
  LearnRun one = learn(false, own + "/single", "cnn", 0, "", 2, 600);
  LearnRun many = learn(true, own + "/dp", "cnn", 0, "", 2, 600);
  expect_same_losses(many.summary.step_losses, one.summary.step_losses, "accumulate, data parallel");
  for (size_t i = 0; i < one.weights.size(); ++i) {
    expect_close(many.weights[i], one.weights[i], 1e-5, "weights " + std::to_string(i));
    expect_same_on_every_rank(many.weights[i], "weights " + std::to_string(i));
  }
}

TEST(DDPLearner, CheckpointsResumeOnAnyNumberOfProcesses) {
  std::string dir = shared_dir("resume");
  std::string own = dir + "/rank" + std::to_string(R());
  LearnRun full = learn(false, own, "full", 0);  // 20 steps in one process
  ASSERT_EQ(full.summary.step_losses.size(), 20u);

  // This job's ranks stop after 15 steps (mid-epoch 2); one process resumes from their checkpoint.
  LearnRun part = learn(true, dir, "dp", 15);
  EXPECT_TRUE(part.summary.stopped);
  pg().barrier();  // rank 0 has written dp/checkpoints/last.ckpt
  LearnRun rest = learn(false, own, "single-rest", 0, dir + "/dp/checkpoints/last.ckpt");
  std::vector<double> joined = part.summary.step_losses;
  joined.insert(joined.end(), rest.summary.step_losses.begin(), rest.summary.step_losses.end());
  expect_same_losses(joined, full.summary.step_losses, "data parallel, then one process");
  for (size_t i = 0; i < full.weights.size(); ++i) expect_close(rest.weights[i], full.weights[i], 1e-5, "weights");

  // The reverse: one process stops after 15 steps; this job resumes from its checkpoint.
  LearnRun single = learn(false, own, "single", 15);
  pg().barrier();
  LearnRun dp_rest = learn(true, dir, "dp-rest", 0, dir + "/rank0/single/checkpoints/last.ckpt");
  joined = single.summary.step_losses;
  joined.insert(joined.end(), dp_rest.summary.step_losses.begin(), dp_rest.summary.step_losses.end());
  expect_same_losses(joined, full.summary.step_losses, "one process, then data parallel");
  for (size_t i = 0; i < full.weights.size(); ++i) {
    expect_close(dp_rest.weights[i], full.weights[i], 1e-5, "weights");
    expect_same_on_every_rank(dp_rest.weights[i], "weights");
  }
}

TEST(DDPLearner, BuffersFollowRankZero) {
  // Batch norm's running statistics: each rank updates them from its shard; the Learner broadcasts
  // rank 0's before every step, before validation and at the end, so the replicas end equal.
  struct BnNet : nn::Module {
    nn::Linear fc;
    nn::BatchNorm1d bn;
    nn::Linear out;
    explicit BnNet(const Device& d)
        : fc({.in_features = 28 * 28, .out_features = 16}, d),
          bn({.num_features = 16}, d),
          out({.in_features = 16, .out_features = 10}, d) {}
    Tensor forward(const Tensor& x) { return out(relu(bn(fc(x.flatten(1))))); }
    KILN_VISIT(BnNet, fc, bn, out)
  };
  std::string dir = shared_dir("buffers");
  manual_seed(5);
  BnNet net(kDev);
  optim::SGD opt(net.parameters(), {.lr = 0.05});
  data::DataLoader<data::ImageItem> tr(images(), {.batch_size = 64, .seed = 3});
  train::LearnerBuilder b;
  b.model(net).optimizer(opt).device(kDev).train_data(tr).epochs(1).runs_dir(dir).name("bn").max_steps(5);
  b.handle_sigint(false).renderer(std::make_shared<Silent>()).data_parallel();
  b.build().fit();
  expect_same_on_every_rank(net.bn.running_mean, "running_mean");
  expect_same_on_every_rank(net.bn.running_var, "running_var");
  for (const Tensor& p : net.parameters()) expect_same_on_every_rank(p, "parameter");
}

TEST(DDPLearner, SourcesThatCannotShardAreRefused) {
  struct Fixed : data::BatchSource {
    size_t num_batches() const override { return 1; }
    size_t num_items() const override { return 4; }
    void start_epoch(uint64_t) override {}
    std::optional<data::Batch> next() override { return std::nullopt; }
  } src;
  if (W() == 1) GTEST_SKIP() << "one process shards nothing";
  std::string dir = shared_dir("refused");
  Mlp net(kDev);
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  train::LearnerBuilder b;
  b.model(net).optimizer(opt).device(kDev).train_data(src).runs_dir(dir).renderer(std::make_shared<Silent>());
  b.handle_sigint(false).data_parallel();
  try {
    b.build().fit();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be sharded"), std::string::npos) << e.what();
  }
}
