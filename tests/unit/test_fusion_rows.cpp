// SPDX-License-Identifier: MIT OR Apache-2.0
// Row pipelines (src/fusion/rows.cpp): a row op and the groups reading its result row by row run
// per block of rows. Reference: the same ops on the plain CPU (bitwise: the same kernels run on
// the same elements in the same order), and the count of pipelines that ran.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "bitwise_same.h"
#include "fusion/fusion.h"
#include "fusion_small_limit.h"

using namespace kiln;
using kiln::test::same;

namespace {

Device plain() { return test::plain_cpu(); }
Device fused() { return plain().fusion(); }

struct Case {
  const char* name;
  std::function<std::vector<Tensor>(const Tensor&)> f;
  int64_t pipelines;  ///< row pipelines expected per call (fused, every op queued)
};

std::vector<Case> cases() {
  return {
      {"x - amax", [](const Tensor& x) { return std::vector<Tensor>{x - x.amax({-1}, true)}; }, 1},
      {"x / sum (no keepdim)", [](const Tensor& x) { return std::vector<Tensor>{x / x.sum({-1}).unsqueeze(-1)}; }, 1},
      {"softmax by hand",
       [](const Tensor& x) {
         Tensor e = (x - x.amax({-1}, true)).exp();
         return std::vector<Tensor>{e / e.sum({-1}, true)};
       },
       1},
      {"layer norm by hand",
       [](const Tensor& x) {
         Tensor d = x - x.mean({-1}, true);
         Tensor v = (d * d).mean({-1}, true);
         return std::vector<Tensor>{d * (v + 1e-5).rsqrt() * 0.5 + 0.25};
       },
       1},
      {"softmax then a mask, softmax kept",
       [](const Tensor& x) {
         Tensor p = x.softmax(-1);
         return std::vector<Tensor>{p * (x > 0) + 0.1, p};
       },
       1},
      {"two rows dims",
       [](const Tensor& x) {
         Tensor y = x.reshape({x.size(0) / 4, 4, x.size(1)});
         return std::vector<Tensor>{y - y.mean({-2, -1}, true), y.var({-2, -1}, 1, true)};
       },
       1},
      {"in place into the row op's input",
       [](const Tensor& x) {
         Tensor y = x.clone();
         Tensor m = y.amax({-1}, true);
         y.sub_(m);
         return std::vector<Tensor>{y, m};
       },
       1},
      {"a sum over the rows after the chain (a bias gradient)",
       [](const Tensor& x) {
         Tensor y = (x - x.amax({-1}, true)) * 2.0;
         return std::vector<Tensor>{y.sum({0}), y.mean({0}, true), y};
       },
       1},
      {"mean kept alive, read after",
       [](const Tensor& x) {
         Tensor m = x.mean({-1}, true);
         Tensor c = (x - m).abs();
         return std::vector<Tensor>{c, m * 2.0};
       },
       1},
  };
}

}  // namespace

TEST(FusionRows, RowOpsAndTheGroupsReadingThemRunPerBlockOfRows) {
  const test::SmallLimit all(0);
  const int saved = num_threads();
  for (int threads : {1, 2})
    for (Shape shape : {Shape{64, 96}, Shape{1000, 300}, Shape{8, 5000}, Shape{4, 3}})
      for (const Case& c : cases()) {
        set_num_threads(threads);
        manual_seed(7);
        Tensor x = randn(shape, {.device = plain()});
        x.narrow(0, 0, 1).fill_(std::nan(""));  // NaNs stay in their row
        const auto a = c.f(x);
        fusion::reset_stats();
        const auto b = c.f(x.to(fused()));
        for (const Tensor& t : b) t.to_vector<float>();  // flush
        const std::string what = std::string(c.name) + " " + to_string(shape) + " t=" + std::to_string(threads);
        EXPECT_EQ(fusion::stats().row_pipelines, c.pipelines) << what;
        for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same(b[i], a[i])) << what << " output " << i;
      }
  set_num_threads(saved);
}

TEST(FusionRows, ReadsAcrossRowsOrWritesIntoEarlierStagesAreNotPipelined) {
  const test::SmallLimit all(0);
  manual_seed(8);
  Tensor x = randn({2048, 128}, {.device = plain()});  // blocks of 512 rows: four
  std::vector<Case> refused = {
      // The column means broadcast over rows: every block would read all of them.
      {"row op over the leading dim", [](const Tensor& x) { return std::vector<Tensor>{x - x.mean({0}, true)}; }, 0},
      // The row means read transposed (row i reads mean of row j).
      {"per-row values read across rows",
       [](const Tensor& x) {
         Tensor m = x.mean({-1}, true);
         return std::vector<Tensor>{x -
                                    m.reshape({1, x.size(0)}).expand({x.size(0), x.size(0)}).narrow(1, 0, x.size(1))};
       },
       0},
      // In place into a buffer the first stage reads across rows (its first row, broadcast):
      // later blocks would read it overwritten.
      {"in place into a broadcast operand",
       [](const Tensor& x) {
         Tensor b = x.clone();
         Tensor s = (x * b.narrow(0, 0, 1)).sum({-1}, true);
         b.add_(x - s);
         return std::vector<Tensor>{b, s};
       },
       0},
  };
  refused.push_back(
      // Per-row values read from the first elements of a full-size buffer that a later stage
      // overwrites: block 0's write covers the values later blocks read.
      {"per-row view into a larger buffer, overwritten later",
       [](const Tensor& x) {
         Tensor X = x.clone();
         (void)X.sum().item<float>();  // in memory before the pipeline's ops are queued
         Tensor pr = X.reshape({-1}).narrow(0, 0, x.size(0)).reshape({x.size(0), 1});
         Tensor y = x - x.amax({-1}, true) + pr;
         Tensor t = y.sum({-1}, true);  // a row op: the pipeline would go on past it
         X.mul_(2.0);
         return std::vector<Tensor>{y, t, X};
       },
       1});
  refused.push_back(
      // One row of 256K elements: a single block would leave the second thread idle.
      {"a sum over everything",
       [](const Tensor& x) {
         return std::vector<Tensor>{x / x.sum({0, 1}, true)};
       },
       0});
  const int saved = num_threads();
  set_num_threads(2);
  for (const Case& c : refused) {
    const auto a = c.f(x);
    fusion::reset_stats();
    const auto b = c.f(x.to(fused()));
    for (const Tensor& t : b) t.to_vector<float>();
    EXPECT_EQ(fusion::stats().row_pipelines, c.pipelines) << c.name;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same(b[i], a[i])) << c.name << " output " << i;
  }
  set_num_threads(saved);
}

TEST(FusionRows, HandWrittenNormsTrainTheSameThroughAutodiff) {
  // The backward passes of a softmax and a layer norm written out op by op are row reductions
  // feeding chains too: gradients fused and unfused, bitwise.
  const test::SmallLimit all(0);
  auto f = [](const Device& d) {
    manual_seed(9);
    Device ad = d.autodiff();
    Tensor x = randn({300, 257}, {.device = ad}).require_grad();
    Tensor g = randn({257}, {.device = ad}).require_grad();
    Tensor dlt = x - x.mean({-1}, true);
    Tensor ln = dlt * ((dlt * dlt).mean({-1}, true) + 1e-5).rsqrt() * g;
    Tensor e = (ln - ln.amax({-1}, true)).exp();
    Tensor p = e / e.sum({-1}, true);
    auto grads = (p * p).sum().backward();
    return std::vector<Tensor>{p.detach(), grads.get(x), grads.get(g)};
  };
  const auto a = f(plain());
  fusion::reset_stats();
  const auto b = f(fused());
  for (const Tensor& t : b) t.to_vector<float>();  // flush
  EXPECT_GE(fusion::stats().row_pipelines, 2) << "the forward and the backward pass";
  EXPECT_GE(fusion::stats().pipeline_column_sums, 1) << "the weight's gradient, a sum over the rows";
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same(b[i], a[i])) << "output " << i;
}
