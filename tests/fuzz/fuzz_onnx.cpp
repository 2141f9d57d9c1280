// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target for the ONNX loader: arbitrary bytes -> kiln::onnx::Model on the null device
// (parsing, validation, initializer decoding). Anything but a clean load or a kiln::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto m = kiln::onnx::Model::from_bytes(std::string_view(reinterpret_cast<const char*>(data), size),
                                           kiln::Device::null(), {.allow_unsupported = true});
    (void)m.inputs();
    (void)m.unsupported();
  } catch (const kiln::Error&) {
  }
  try {
    (void)kiln::onnx::tensor_from_proto(std::string_view(reinterpret_cast<const char*>(data), size),
                                        kiln::Device::null());
  } catch (const kiln::Error&) {
  }
  return 0;
}
