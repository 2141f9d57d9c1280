// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target: one frame of the remote device's protocol as a server receives it, decoded and
// run in a session on the plain CPU (tests/fuzz/fuzz_remote.h). Run with `make fuzz`; the seeds in
// tests/fuzz/corpus/fuzz_remote/ also run in kiln_remote_tests (RemoteFuzzCorpus).
#include "fuzz_remote.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::run_remote_frame(data, size);
  return 0;
}
