// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target: store::parse_safetensors must either parse the bytes or throw kiln::Error;
// any other exception, crash, leak or sanitizer report is a bug. Run with `make fuzz`.
#include <kiln/error.h>
#include <kiln/store.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::store::TensorMap m = kiln::store::parse_safetensors(data, size, "fuzz.safetensors");
    // Touch what was parsed so that lazily wrong tensors would show up.
    for (auto& [name, t] : m.tensors) {
      if (t.numel() > 0 && t.numel() < 4096) (void)t.contiguous().numel();
      (void)m.find(name);
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
