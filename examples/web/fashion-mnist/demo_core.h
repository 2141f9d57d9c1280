// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// What the Fashion-MNIST page does, in plain Kiln: the main job's CNN (examples/fashion-mnist),
// weights from a safetensors file, class probabilities, and fine-tuning of the classifier's
// last layers with AdamW. The page's WebAssembly module (demo.cpp) and the native reference
// (reference.cpp) share it, so the browser test compares the two on the same code.
#include <kiln/autodiff.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/optimizer.h>
#include <kiln/store.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../fashion-mnist/net.h"

namespace kiln::web_demo {

constexpr int64_t kPixels = 28 * 28, kClasses = 10;
inline const char* const kClassNames[kClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

/// The demo's state: the network (in eval mode: batch norm uses its running statistics and
/// dropout is off, also while fine-tuning) on its device, and the fine-tuning optimizer, made on
/// first use.
struct Demo {
  /// The device with autodiff (fine-tuning records the forward pass): the CPU at first.
  Device dev = Device::cpu().autodiff();
  examples::Net net{dev};
  std::unique_ptr<optim::AdamW> opt;
  Demo() { net.eval(); }
  const Device& device() const { return dev; }
  /// Moves the network to `base` (Device::cpu() or Device::webgpu()); the optimizer starts anew.
  void set_device(const Device& base) {
    dev = base.autodiff();
    net.to(dev);
    opt.reset();
  }

  /// Loads weights from the bytes of a safetensors file (what `make run` saves); throws
  /// kiln::Error naming what is wrong, leaving the current weights as they were.
  void load(const void* bytes, size_t size, const std::string& name) {
    store::load(net, store::parse_safetensors(bytes, size, name));  // strict: all or nothing
    opt.reset();
  }

  /// Deterministic weights from integer arithmetic (the same bits on every machine), for tests
  /// and for a page opened without a trained model: each parameter's values cycle through
  /// [-1, 1] in steps of 1/1000, scaled by 1/sqrt(fan-in); batch norm keeps unit statistics.
  void test_weights() {
    NoGradGuard guard;
    uint32_t k = 0;
    for (auto& [name, p] : net.named_parameters()) {
      const int64_t fan_in = p.dim() > 1 ? p.numel() / p.size(0) : p.numel();
      const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
      std::vector<float> v(static_cast<size_t>(p.numel()));
      for (size_t i = 0; i < v.size(); ++i) {
        const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + (++k) * 40503u;
        v[i] = static_cast<float>(static_cast<int32_t>(h % 2001u) - 1000) / 1000.0f * scale;
      }
      p.copy_(tensor(v, p.shape(), device()));
    }
    opt.reset();
  }

  /// Class probabilities [n, 10] of n images of 784 pixels in [0, 1].
  Tensor predict(const std::vector<float>& pixels, int64_t n) {
    NoGradGuard guard;
    return softmax(net.forward(tensor(pixels, {n, 1, 28, 28}, device())), 1);
  }

  /// `steps` AdamW steps (lr, weight decay 0.01) on the two linear layers only, over n labelled
  /// images as one batch; returns the cross-entropy loss before each step.
  std::vector<float> fine_tune(const std::vector<float>& pixels, const std::vector<int64_t>& labels, int64_t n,
                               int steps, double lr) {
    std::vector<Tensor> head;
    for (auto& [name, p] : net.named_parameters()) {
      const bool last = name.rfind("fc1.", 0) == 0 || name.rfind("fc2.", 0) == 0;
      p.require_grad(last);
      if (last) head.push_back(p);
    }
    if (!opt) opt = std::make_unique<optim::AdamW>(head, optim::AdamWConfig{.lr = lr});
    opt->set_lr(lr);
    const Tensor x = tensor(pixels, {n, 1, 28, 28}, device()), y = tensor(labels, {n}, device());
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) {
      const Tensor loss = nn::functional::cross_entropy(net.forward(x), y);
      losses.push_back(loss.item<float>());
      opt->step(loss.backward());
    }
    return losses;
  }
};

}  // namespace kiln::web_demo
