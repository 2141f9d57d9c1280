// SPDX-License-Identifier: MIT OR Apache-2.0
// A tiny in-memory BatchSource and model for the Learner tests.
#pragma once
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/train.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace kiln::test {

/// n points in 4-d, 3 classes given by a fixed linear rule; the order of each epoch is a
/// permutation seeded by (seed, epoch).
class ToySource : public data::BatchSource {
 public:
  ToySource(int64_t n, int64_t batch, uint64_t seed) : n_(n), bs_(batch), seed_(seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> nd;
    std::vector<float> x(static_cast<size_t>(n * 4));
    std::vector<int64_t> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float* r = &x[i * 4];
      for (int j = 0; j < 4; ++j) r[j] = nd(g);
      float s0 = r[0] + r[1], s1 = r[2] - r[0], s2 = r[3] - r[1];
      y[i] = s0 > s1 && s0 > s2 ? 0 : s1 > s2 ? 1 : 2;
    }
    x_ = kiln::tensor(x, {n, 4});
    y_ = kiln::tensor(y, {n});
  }
  size_t num_batches() const override { return static_cast<size_t>((n_ + bs_ - 1) / bs_); }
  size_t num_items() const override { return static_cast<size_t>(n_); }
  void start_epoch(uint64_t epoch) override {
    order_.resize(static_cast<size_t>(n_));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    std::mt19937_64 g(seed_ * 1000003 + epoch);
    std::shuffle(order_.begin(), order_.end(), g);
    pos_ = 0;
  }
  std::optional<data::Batch> next() override {
    if (pos_ >= order_.size()) return std::nullopt;
    size_t end = std::min(order_.size(), pos_ + static_cast<size_t>(bs_));
    std::vector<int64_t> idx(order_.begin() + static_cast<long>(pos_), order_.begin() + static_cast<long>(end));
    pos_ = end;
    Tensor i = kiln::tensor(idx, {static_cast<int64_t>(idx.size())});
    return data::Batch{x_.index_select(0, i), y_.index_select(0, i)};
  }

 private:
  int64_t n_, bs_;
  uint64_t seed_;
  Tensor x_, y_;
  std::vector<int64_t> order_;
  size_t pos_ = 0;
};

/// 4 -> 16 -> 3 with dropout (so the RNG matters for resume).
struct ToyMlp : nn::Module {
  nn::Linear fc1, fc2;
  nn::Dropout drop;
  explicit ToyMlp(const Device& d)
      : fc1({.in_features = 4, .out_features = 16}, d),
        fc2({.in_features = 16, .out_features = 3}, d),
        drop({.p = 0.2}, d) {}
  Tensor forward(const Tensor& x) { return fc2(drop(relu(fc1(x)))); }
  KILN_VISIT(ToyMlp, fc1, fc2, drop)
};

}  // namespace kiln::test
