// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target for the PyTorch reader (zip reader, restricted unpickler, legacy format,
// tensor views): any input must either load or raise kiln::Error. Loaded tensors are read back
// so out-of-bounds views would be caught by AddressSanitizer.
#include <kiln/store.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::store::TensorMap m = kiln::store::parse_torch(data, size, "fuzz.pt");
    for (const auto& [name, t] : m.tensors) {
      if (t.numel() <= 4096) (void)t.to_vector<double>();
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
