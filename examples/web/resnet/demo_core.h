// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// What the ResNet page does, in plain Kiln: the module kiln-onnx generated from model.onnx
// (FashionResNet, fashion_resnet.h), weights from a safetensors file, class probabilities. The
// page's WebAssembly module (demo.cpp) and the native reference (reference.cpp) share it.
#include <kiln/kiln.h>
#include <kiln/store.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fashion_resnet.h"  // generated at build time (kiln_add_onnx_model)

namespace kiln::web_demo {

/// The generated network, in eval mode (as generated), on its device (the CPU at first).
struct ResNetDemo {
  Device dev = Device::cpu();
  FashionResNet net{dev};

  /// Moves the network to `d` (Device::cpu() or Device::webgpu()).
  void set_device(const Device& d) {
    dev = d;
    net.to(dev);
  }

  /// Loads weights from the bytes of a safetensors file (the one kiln-onnx wrote beside the
  /// generated code); throws kiln::Error naming what is wrong, leaving the weights as they were.
  void load(const void* bytes, size_t size, const std::string& name) {
    store::load(net, store::parse_safetensors(bytes, size, name));  // strict: all or nothing
  }

  /// Class probabilities [n, 10] of n images of 784 pixels in [0, 1].
  Tensor predict(const std::vector<float>& pixels, int64_t n) {
    NoGradGuard guard;
    return softmax(net.forward(tensor(pixels, {n, 1, 28, 28}, dev)), 1);
  }
};

}  // namespace kiln::web_demo
