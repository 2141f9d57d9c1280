// SPDX-License-Identifier: MIT OR Apache-2.0
// Synchronised batch norm against one process on the global batch: every rank holds the whole
// batch (the same seed), normalises its own rows with SyncBatchNorm, and must get the rows, input
// gradients and running statistics that functional::batch_norm gives on all rows at once; the
// weight and bias gradients summed over the ranks are the one-process ones. The global batches are
// split unevenly (7 rows on 2 or 3 ranks; 2 rows on 3 ranks leaves one rank none). A data-parallel
// CNN with batch norm trains as one process. Run on 1, 2 and 3 ranks (tests/dist/CMakeLists.txt).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/dist.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

dist::ProcessGroup& pg() { return dist::default_group(); }
int R() { return pg().rank(); }
int W() { return pg().size(); }
const Device kDev = Device::cpu().autodiff();

/// This rank's rows [start, start + count) of a batch of n rows cut as evenly as possible.
std::pair<int64_t, int64_t> my_rows(int64_t n) {
  const int64_t w = W(), r = R(), base = n / w, extra = n % w;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

double max_diff(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0) return 0;
  return (a.detach().to(f64) - b.detach().to(f64)).abs().max().item<double>();
}

/// Sets a parameter's values without recording.
void assign(Tensor p, const Tensor& v) {
  NoGradGuard ng;
  p.copy_(v);
}

}  // namespace

TEST(SyncBatchNorm, AllReduceWithGradSumsValuesAndGradients) {
  Tensor x = full({3}, static_cast<double>(R() + 1), {.dtype = f64, .device = kDev}).require_grad();
  Tensor y = dist::all_reduce_with_grad(x, pg());
  const double ranks_sum = W() * (W() + 1) / 2.0;  // sum of r + 1
  EXPECT_EQ(max_diff(y, full({3}, ranks_sum, {.dtype = f64})), 0.0);
  // Rank r's loss weighs the sum by r + 1: the gradient of the total loss is the same sum.
  Gradients g = (y * static_cast<double>(R() + 1)).sum().backward();
  EXPECT_EQ(max_diff(g.get(x), full({3}, ranks_sum, {.dtype = f64})), 0.0);
}

TEST(SyncBatchNorm, MatchesOneProcessOnTheGlobalBatch) {
  struct Case {
    int64_t n;
    Shape tail;  // [C, *]
    DType dtype;
    double tol;
  };
  const std::vector<Case> cases = {{7, {3}, f32, 2e-5},        {7, {3, 5}, f64, 1e-12},      {7, {2, 4, 3}, f32, 2e-5},
                                   {2, {4, 3, 2}, f64, 1e-12}, {5, {2, 2, 3, 2}, f32, 2e-5}, {7, {3, 4, 5}, f32, 2e-5}};
  for (const Case& k : cases) {
    SCOPED_TRACE("batch " + std::to_string(k.n) + ", [C, *] = " + to_string(k.tail));
    const int64_t c = k.tail[0];
    Shape shape{k.n};
    for (int64_t s : k.tail) shape.push_back(s);
    manual_seed(17);
    const TensorOptions o{.dtype = k.dtype};
    Tensor x = randn(shape, o) * 2.0 + 0.5, up = randn(shape, o), w = randn({c}, o), b = randn({c}, o);
    // One process, every row.
    Tensor rm = zeros({c}, o), rv = ones({c}, o);
    Tensor xr = x.to(kDev).require_grad(), wr = w.to(kDev).require_grad(), br = b.to(kDev).require_grad();
    Tensor yr = F::batch_norm(xr, rm, rv, {.weight = wr, .bias = br, .training = true, .momentum = 0.1});
    Gradients gr = (yr * up).sum().backward();
    // This rank's rows, synchronised.
    dist::SyncBatchNorm bn({.num_features = c, .dtype = k.dtype}, kDev);
    assign(bn.weight, w);
    assign(bn.bias, b);
    auto [start, count] = my_rows(k.n);
    Tensor xs = x.narrow(0, start, count).to(kDev).require_grad();
    Tensor ys = bn(xs);
    Gradients gs = (ys * up.narrow(0, start, count)).sum().backward();
    EXPECT_LE(max_diff(ys, yr.narrow(0, start, count)), k.tol) << "output";
    EXPECT_EQ(ys.dtype(), k.dtype);
    EXPECT_LE(max_diff(gs.get(xs), gr.get(xr).narrow(0, start, count)), k.tol) << "input gradient";
    Tensor gw = pg().all_reduce(gs.get(bn.weight).detach().clone()),
           gb = pg().all_reduce(gs.get(bn.bias).detach().clone());
    EXPECT_LE(max_diff(gw, gr.get(wr)), k.tol * 10) << "weight gradient";
    EXPECT_LE(max_diff(gb, gr.get(br)), k.tol * 10) << "bias gradient";
    EXPECT_LE(max_diff(bn.running_mean, rm), k.tol) << "running mean";
    EXPECT_LE(max_diff(bn.running_var, rv), k.tol) << "running variance";
    EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
    // Evaluation: plain batch norm with the running statistics, no communication.
    bn.eval();
    Tensor ye = F::batch_norm(x.narrow(0, start, count), rm, rv, {.weight = w, .bias = b});
    EXPECT_LE(max_diff(bn(x.narrow(0, start, count).to(kDev)), ye), k.tol) << "eval";
  }
}

TEST(SyncBatchNorm, LowPrecisionInputsComputeInF32) {
  manual_seed(3);
  Tensor x = randn({6, 2, 3});
  dist::SyncBatchNorm bn({.num_features = 2}, kDev);
  auto [start, count] = my_rows(6);
  Tensor y = bn(x.narrow(0, start, count).to(bf16).to(kDev));
  EXPECT_EQ(y.dtype(), bf16);
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor want = F::batch_norm(x.to(bf16).to(f32), rm, rv, {.training = true}).narrow(0, start, count);
  EXPECT_LE(max_diff(y, want), 0.05);
}

TEST(SyncBatchNorm, OneValuePerChannelOverAllRanksIsAnErrorEverywhere) {
  dist::SyncBatchNorm bn({.num_features = 3}, kDev);
  auto [start, count] = my_rows(1);
  Tensor x = randn({1, 3, 1}).narrow(0, start, count);
  EXPECT_THROW(bn(x), Error);
  EXPECT_THROW(bn(randn({4})), Error);  // not [N, C, *]
}

namespace {
struct BnNet : nn::Module {
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
  nn::Linear fc;
  explicit BnNet(const Device& d)
      : conv({.in_channels = 1, .out_channels = 4, .kernel_size = 3}, d),
        bn({.num_features = 4}, d),
        fc({.in_features = 4 * 4 * 4, .out_features = 3}, d) {}
  Tensor forward(const Tensor& x) { return fc(relu(bn(conv(x))).flatten(1)); }
  KILN_VISIT(BnNet, conv, bn, fc)
};
}  // namespace

TEST(SyncBatchNorm, DataParallelTrainingMatchesOneProcess) {
  const int64_t n = 11;  // 6 + 5 on 2 ranks, 4 + 4 + 3 on 3
  manual_seed(21);
  BnNet one(kDev);
  manual_seed(21);
  BnNet net(kDev);
  dist::DistributedDataParallel ddp(net, pg(), {.sync_batch_norm = true});
  EXPECT_TRUE(net.bn.stats_reducer != nullptr);
  EXPECT_EQ(dist::convert_sync_batch_norm(one, &pg()), 1u);  // counts its batch norms
  one.bn.stats_reducer = nullptr;                            // plain again: one process
  optim::SGD opt_one(one.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto [start, count] = my_rows(n);
  for (int step = 0; step < 5; ++step) {
    manual_seed(100 + static_cast<uint64_t>(step));
    Tensor x = randn({n, 1, 6, 6}), y = randint(0, 3, {n});
    Tensor loss_one = F::cross_entropy(one.forward(x.to(kDev)), y.to(kDev));
    opt_one.step(loss_one.backward());
    Tensor loss = F::cross_entropy(net.forward(x.narrow(0, start, count).to(kDev)), y.narrow(0, start, count).to(kDev));
    opt.step(ddp.backward(loss, static_cast<double>(count)));
    Tensor global = pg().all_reduce(loss.detach().to(f64) * static_cast<double>(count)) / static_cast<double>(n);
    EXPECT_NEAR(global.item<double>(), loss_one.item<double>(), 1e-5) << "step " << step;
  }
  std::vector<std::pair<std::string, Tensor>> a = one.state(), b = net.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(max_diff(b[i].second, a[i].second), 1e-5) << a[i].first;
}
