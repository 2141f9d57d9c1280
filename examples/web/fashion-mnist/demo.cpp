// SPDX-License-Identifier: MIT OR Apache-2.0
// The Fashion-MNIST page's WebAssembly module: the C functions index.html (and the browser test,
// test.html) call. Buffers are the module's memory (_malloc); every function returns 0 on
// success and -1 on a kiln::Error, whose text demo_error() then gives. The functions that may
// wait for the WebGPU device return Promises (demo_api.js lists them in kilnAsyncExports).
// Nothing leaves the page: weights come from the user's file or fetch, and the tuned weights
// go back to the page as safetensors bytes for a download.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "common/demo_c_api.h"
#include "demo_core.h"

namespace {

using kiln::web_demo::guarded;

kiln::web_demo::Demo& demo() {
  static kiln::web_demo::Demo d;
  return d;
}
std::string g_saved;

std::vector<float> pixels_of(const float* p, int n) { return {p, p + n * kiln::web_demo::kPixels}; }

}  // namespace

extern "C" {

/// The text of the last error ("" after a success).
EMSCRIPTEN_KEEPALIVE const char* demo_error() { return kiln::web_demo::last_error().c_str(); }

/// Loads the weights of a safetensors file of `size` bytes at `bytes`.
EMSCRIPTEN_KEEPALIVE int demo_load(const char* bytes, int size, const char* name) {
  return guarded([&] { demo().load(bytes, static_cast<size_t>(size), name); });
}

/// Moves the network to WebGPU (webgpu != 0) or back to the CPU; fails when the page has no
/// WebGPU device (demo_error() says why).
EMSCRIPTEN_KEEPALIVE int demo_set_device(int webgpu) {
  return guarded([&] { demo().set_device(webgpu ? kiln::Device::webgpu() : kiln::Device::cpu()); });
}

/// Sets the deterministic test weights (Demo::test_weights).
EMSCRIPTEN_KEEPALIVE int demo_test_weights() {
  return guarded([] { demo().test_weights(); });
}

/// probs [n, 10] of n images [n, 784] in [0, 1].
EMSCRIPTEN_KEEPALIVE int demo_predict(const float* pixels, int n, float* probs) {
  return guarded([&] {
    const auto p = demo().predict(pixels_of(pixels, n), n).contiguous().to_vector<float>();
    std::copy(p.begin(), p.end(), probs);
  });
}

/// `steps` fine-tuning steps over n labelled images; losses[steps] receives the loss before each.
EMSCRIPTEN_KEEPALIVE int demo_fine_tune(const float* pixels, const int* labels, int n, int steps, double lr,
                                        float* losses) {
  return guarded([&] {
    const std::vector<int64_t> y(labels, labels + n);
    const auto l = demo().fine_tune(pixels_of(pixels, n), y, n, steps, lr);
    std::copy(l.begin(), l.end(), losses);
  });
}

/// Saves the weights as safetensors in memory; demo_saved() and demo_saved_size() give the bytes.
EMSCRIPTEN_KEEPALIVE int demo_save() {
  return guarded([] {
    const std::string path = "/tmp/kiln-demo.safetensors";
    kiln::store::save(demo().net, path);
    std::ifstream f(path, std::ios::binary);
    g_saved.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
  });
}
EMSCRIPTEN_KEEPALIVE const char* demo_saved() { return g_saved.data(); }
EMSCRIPTEN_KEEPALIVE int demo_saved_size() { return static_cast<int>(g_saved.size()); }

}  // extern "C"
