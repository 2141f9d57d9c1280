// SPDX-License-Identifier: MIT OR Apache-2.0
// The ResNet page's WebAssembly module: the C functions index.html (and the browser test,
// test.html) call. Buffers are the module's memory (_malloc); every function returns 0 on
// success and -1 on a kiln::Error, whose text demo_error() then gives.
#include "common/demo_c_api.h"
#include "resnet/demo_core.h"

namespace {

kiln::web_demo::ResNetDemo& demo() {
  static kiln::web_demo::ResNetDemo d;
  return d;
}

}  // namespace

extern "C" {

/// The text of the last error ("" after a success).
EMSCRIPTEN_KEEPALIVE const char* demo_error() { return kiln::web_demo::last_error().c_str(); }

/// Loads the weights of a safetensors file of `size` bytes at `bytes`.
EMSCRIPTEN_KEEPALIVE int demo_load(const char* bytes, int size, const char* name) {
  return kiln::web_demo::guarded([&] { demo().load(bytes, static_cast<size_t>(size), name); });
}

/// probs [n, 10] of n images [n, 784] in [0, 1].
EMSCRIPTEN_KEEPALIVE int demo_set_device(int webgpu) {
  return kiln::web_demo::guarded([&] { demo().set_device(webgpu ? kiln::Device::webgpu() : kiln::Device::cpu()); });
}

EMSCRIPTEN_KEEPALIVE int demo_predict(const float* pixels, int n, float* probs) {
  return kiln::web_demo::guarded([&] {
    const std::vector<float> x(pixels, pixels + n * 784);
    const auto p = demo().predict(x, n).contiguous().to_vector<float>();
    std::copy(p.begin(), p.end(), probs);
  });
}

}  // extern "C"
