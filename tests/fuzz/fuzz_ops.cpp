// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target: shapes, strides, offsets and op arguments from the fuzz input, run on the
// null device and the CPU (tests/fuzz/fuzz_ops.h). Every op must work or throw kiln::Error;
// any other exception, crash, leak or sanitizer report is a bug. Run with `make fuzz`; the seeds
// in tests/fuzz/corpus/fuzz_ops/ also run in kiln_tests (StoreFuzzCorpus).
#include "fuzz_ops.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::run_ops(data, size);
  return 0;
}
