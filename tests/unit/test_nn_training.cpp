// SPDX-License-Identifier: MIT OR Apache-2.0
// End to end: an MLP and a small CNN built from nn layers train on synthetic data with
// autodiff and an optimizer until the loss falls below a threshold.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

/// Two Gaussian blobs per class in `dim` dimensions; labels in [0, classes).
std::pair<Tensor, Tensor> blobs(int64_t n, int64_t dim, int64_t classes, const Device& d) {
  manual_seed(3);
  Tensor y = randint(0, classes, {n}, {.dtype = i64, .device = d});
  Tensor centres = randn({classes, dim}, {.device = d}) * 3;
  Tensor x = index_select(centres, 0, y) + randn({n, dim}, {.device = d});
  return {x, y};
}

struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  Mlp(const Device& d) : fc1({.in = 8, .out = 32}, d), fc2({.in = 32, .out = 3}, d) {}
  Tensor forward(const Tensor& x) const { return fc2(relu(fc1(x))); }
  KILN_VISIT(Mlp, fc1, fc2)
};

struct Cnn : nn::Module {
  nn::Conv2d conv;
  nn::Linear fc;
  Cnn(const Device& d)
      : conv({.in_channels = 1, .out_channels = 4, .kernel_size = 3, .padding = 1}, d),
        fc({.in = 4 * 4 * 4, .out = 2}, d) {}
  Tensor forward(const Tensor& x) const { return fc(F::max_pool2d(relu(conv(x)), 2).flatten(1)); }
  KILN_VISIT(Cnn, conv, fc)
};

}  // namespace

TEST(NNTraining, MlpReachesLowLoss) {
  Device d = Device::cpu().autodiff();
  manual_seed(1);
  Mlp model(d);
  auto [x, y] = blobs(256, 8, 3, d);
  optim::Adam opt(model.parameters(), {.lr = 1e-2});
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    Tensor loss = F::cross_entropy(model.forward(x), y);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    opt.step(loss.backward());
  }
  EXPECT_LT(last, 0.05) << "first loss " << first;
  EXPECT_LT(last, first / 10);
}

TEST(NNTraining, CnnReachesLowLoss) {
  Device d = Device::cpu().autodiff();
  manual_seed(2);
  Cnn model(d);
  // Class 1: a bright vertical bar; class 0: a bright horizontal bar; plus noise.
  const int64_t n = 64;
  Tensor y = randint(0, 2, {n}, {.dtype = i64, .device = d});
  Tensor vertical = zeros({8, 8}, {.device = d}), horizontal = zeros({8, 8}, {.device = d});
  vertical.index_put_({Slice{}, 3}, 1.0);
  horizontal.index_put_({3, Slice{}}, 1.0);
  Tensor yf = y.to(f32).reshape({n, 1, 1, 1});
  Tensor x = yf * vertical + (1 - yf) * horizontal + 0.3 * randn({n, 1, 8, 8}, {.device = d});
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  double last = 0;
  for (int step = 0; step < 150; ++step) {
    Tensor loss = F::cross_entropy(model.forward(x), y);
    last = loss.item<double>();
    opt.step(loss.backward());
  }
  EXPECT_LT(last, 0.05);
}
