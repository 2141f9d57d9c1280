// SPDX-License-Identifier: MIT OR Apache-2.0
// A Wasserstein GAN with gradient penalty (WGAN-GP, Gulrajani et al. 2017) learns to draw
// Fashion-MNIST clothes. The critic's loss includes lambda * (||grad_x critic(x)|| - 1)^2, a
// gradient of a gradient: Kiln differentiates the input gradient taken with create_graph.
//
//   wgan [--quick] [--epochs N] [--out DIR]
//
// Writes DIR/samples_epoch_<k>.png (an 8x8 grid from a fixed batch of latent vectors) after
// every epoch. --quick first checks the gradient penalty against finite differences (its value,
// and its derivative with respect to a critic weight), then trains one epoch on 1 024 images
// (16 critic steps) and checks that the generator's loss moved; exit status 0 when both hold.
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "wgan.h"

using namespace kiln;
using examples::Critic;
using examples::Generator;
using examples::gradient_penalty;

namespace {

constexpr int64_t kLatent = 64;
constexpr double kLambda = 10.0;  // weight of the gradient penalty
constexpr int kCriticSteps = 5;   // critic updates per generator update

// The penalty from an input gradient taken by central differences, one batched forward per sample.
double penalty_by_finite_differences(const Critic& c, const Tensor& x) {
  NoGradGuard ng;
  const int64_t n = x.size(0);
  const double h = 1e-5;
  double sum = 0;
  Tensor eye = kiln::eye(784, std::nullopt, {.dtype = f64}).reshape({784, 1, 28, 28}) * h;
  for (int64_t i = 0; i < n; ++i) {
    Tensor xi = x.narrow(0, i, 1).detach().to(Device::cpu());
    Tensor g = (c(xi + eye) - c(xi - eye)) / (2 * h);
    const double norm = g.norm().item<double>();
    sum += (norm - 1) * (norm - 1);
  }
  return sum / static_cast<double>(n);
}

// Gradient-penalty checks in f64: the value against finite differences of the critic, and the
// derivative of the penalty with respect to one critic weight (a second-order gradient)
// against finite differences of the penalty.
bool check_gradient_penalty() {
  manual_seed(1);
  const Device d = Device::cpu().autodiff();
  Critic c(d, f64);
  Tensor real = rand({3, 1, 28, 28}, {.dtype = f64}) * 2 - 1, fake = randn({3, 1, 28, 28}, {.dtype = f64}) * 0.5;
  Tensor eps = tensor<double>({0.2, 0.5, 0.9}, {3});
  auto gp = [&] { return gradient_penalty(c, real.to(d), fake.to(d), eps.to(d)); };
  Tensor p = gp();
  const double p_ad = p.item<double>();
  Tensor e = eps.reshape({3, 1, 1, 1});
  const double p_fd = penalty_by_finite_differences(c, e * real + (1 - e) * fake);
  const double err_value = std::abs(p_ad - p_fd) / std::max(1.0, std::abs(p_fd));
  // d penalty / d fc1.weight[7, 300] by autodiff through the input gradient, then by differences.
  Tensor gw = c.fc1.weight.grad(p.backward());
  const double dw_ad = gw.select(0, 7).select(0, 300).item<double>();
  const Tensor w0 = c.fc1.weight.detach().clone();
  std::vector<double> one_hot(512 * 784, 0.0);
  one_hot[7 * 784 + 300] = 1.0;
  const Tensor bump = tensor<double>(one_hot, {512, 784});
  const double h = 1e-6;
  c.fc1.weight = (w0 + bump.to(d) * h).detach().require_grad();
  const double up = gp().item<double>();
  c.fc1.weight = (w0 - bump.to(d) * h).detach().require_grad();
  const double down = gp().item<double>();
  const double dw_fd = (up - down) / (2 * h);
  const double err_grad = std::abs(dw_ad - dw_fd) / std::max(1e-3, std::abs(dw_fd));
  std::printf("gradient penalty: autodiff %.9f, finite differences %.9f (rel. error %.1e)\n", p_ad, p_fd, err_value);
  std::printf("d penalty / d w: autodiff %.9f, finite differences %.9f (rel. error %.1e)\n", dw_ad, dw_fd, err_grad);
  return err_value < 1e-6 && err_grad < 1e-4 && std::abs(dw_fd) > 1e-8;
}

// 64 images [64, 1, 28, 28] in [-1, 1] -> one [1, 224, 224] grid, scaled to 0..255.
Tensor grid(const Tensor& images) {
  Tensor g = images.detach().to(Device::cpu()).reshape({8, 8, 28, 28}).permute({0, 2, 1, 3}).reshape({1, 224, 224});
  return (g + 1.0) * 127.5;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int64_t epochs = -1;
  std::string out = "runs/wgan";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if ((a == "--epochs" || a == "--out") && i + 1 < argc) {
      (a == "--epochs" ? (void)(epochs = std::atoll(argv[++i])) : (void)(out = argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--epochs N] [--out DIR]\n", argv[0]);
      return a == "--help" || a == "-h" ? 0 : 1;
    }
  }
  if (epochs < 0) epochs = quick ? 1 : 10;
  try {
    if (quick && !check_gradient_penalty()) {
      std::printf("gradient penalty check FAILED\n");
      return 1;
    }
    manual_seed(0);
    const Device d = Device::cpu().autodiff();
    data::DatasetPtr<data::ImageItem> images = data::fashion_mnist(true);
    if (quick) images = data::slice(images, 0, 1024);
    data::DataLoader<data::ImageItem> loader(images, {.batch_size = 64, .shuffle = true, .drop_last = true});
    Generator gen(kLatent, d);
    Critic critic(d);
    optim::Adam opt_g(gen.parameters(), {.lr = 1e-4, .betas = {0.5, 0.9}});
    optim::Adam opt_c(critic.parameters(), {.lr = 1e-4, .betas = {0.5, 0.9}});
    const Tensor z_fixed = randn({64, kLatent});
    std::filesystem::create_directories(out);
    std::vector<double> g_losses;
    int64_t step = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
      loader.start_epoch(static_cast<uint64_t>(epoch));
      double w_sum = 0, gp_sum = 0;
      int64_t n_critic = 0;
      while (auto batch = loader.next()) {
        Tensor real = (batch->input * 2.0 - 1.0).to(d);
        const int64_t n = real.size(0);
        // Critic: maximise critic(real) - critic(fake), keep its input gradient near norm 1.
        Tensor fake = gen(randn({n, kLatent}).to(d)).detach();
        Tensor w_dist = critic(real).mean() - critic(fake).mean();
        Tensor gp = gradient_penalty(critic, real, fake);
        opt_c.step((gp * kLambda - w_dist).backward());
        w_sum += w_dist.item<double>();
        gp_sum += gp.item<double>();
        ++n_critic;
        // Generator: every kCriticSteps critic updates, maximise critic(fake).
        if (++step % kCriticSteps == 0) {
          Tensor g_loss = -critic(gen(randn({n, kLatent}).to(d))).mean();
          opt_g.step(g_loss.backward());
          g_losses.push_back(g_loss.item<double>());
        }
      }
      {
        NoGradGuard ng;
        const std::string path = out + "/samples_epoch_" + std::to_string(epoch) + ".png";
        data::write_png(path, grid(gen(z_fixed.to(d))));
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("epoch %lld: critic steps %lld, W estimate %.4f, penalty %.4f, generator loss %.4f, %.0f s -> %s\n",
                    static_cast<long long>(epoch), static_cast<long long>(n_critic),
                    w_sum / std::max<int64_t>(1, n_critic), gp_sum / std::max<int64_t>(1, n_critic),
                    g_losses.empty() ? 0.0 : g_losses.back(), secs, path.c_str());
      }
    }
    if (quick) {
      const double moved = g_losses.empty() ? 0.0 : std::abs(g_losses.back() - g_losses.front());
      std::printf("generator loss: %.4f -> %.4f over %zu updates\n", g_losses.empty() ? 0.0 : g_losses.front(),
                  g_losses.empty() ? 0.0 : g_losses.back(), g_losses.size());
      if (g_losses.size() < 2 || !(moved > 1e-3)) {
        std::printf("generator loss did not move\n");
        return 1;
      }
      std::printf("wgan quick: ok\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
