// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Fashion-MNIST CNN of the main job, shared with bench/dist (its data-parallel epochs).
#include <kiln/kiln.h>
#include <kiln/nn.h>

namespace kiln::examples {

namespace F = kiln::nn::functional;

// conv(32)-BN-ReLU-pool, conv(64)-BN-ReLU-pool, fc(128)-dropout-fc(10): about 420k parameters.
struct Net : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  nn::Linear fc1, fc2;
  nn::Dropout drop;
  explicit Net(const Device& d)
      : conv1({.in_channels = 1, .out_channels = 32, .kernel_size = 3, .padding = 1, .bias = false}, d),
        conv2({.in_channels = 32, .out_channels = 64, .kernel_size = 3, .padding = 1, .bias = false}, d),
        bn1({.num_features = 32}, d),
        bn2({.num_features = 64}, d),
        fc1({.in_features = 64 * 7 * 7, .out_features = 128}, d),
        fc2({.in_features = 128, .out_features = 10}, d),
        drop({.p = 0.25}, d) {}
  /// x [N, 1, 28, 28] in [0, 1] -> logits [N, 10].
  Tensor forward(const Tensor& x) {
    Tensor h = (x - 0.2860f) * (1.0f / 0.3530f);  // the training set's mean and std
    h = F::max_pool2d(relu(bn1(conv1(h))), 2);
    h = F::max_pool2d(relu(bn2(conv2(h))), 2);
    return fc2(drop(relu(fc1(h.flatten(1)))));
  }
  KILN_VISIT(Net, conv1, bn1, conv2, bn2, fc1, fc2, drop)
};

}  // namespace kiln::examples
