// SPDX-License-Identifier: MIT OR Apache-2.0
// The ONNX test suite's small models (libonnx-testdata's pytorch-converted and simple sets, and
// node tests of the ops the architecture models need)
// through the micro target, all in one program: each generated model (its own <name>_run) runs
// on its test case's inputs and is compared with Kiln's run-time ONNX path on them (ref headers
// written by kiln_micro_ref --ns), within 1e-5 * max(1, |want|); a null input array must return
// KILN_MICRO_ERR_NULL. suite_models.inc (written by tests/micro/CMakeLists.txt) includes the
// models and checks each in KILN_SUITE_CHECKS. Exits 0 when every model passes.
#include "board.h"
#include "suite_models.inc"

namespace {

constexpr size_t kMaxOutput = 1 << 14;
float g_out[kMaxOutput];

float absf(float v) { return v < 0 ? -v : v; }

// Runs one model on its reference inputs (In: const float*, or const void* for a model with
// integer inputs); returns the number of failed checks.
template <class In>
int check(const char* name, int (*run)(const In*, const size_t*, float* const*, const size_t*), int num_outputs,
          const In* inputs, const size_t* input_sizes, const float* const* outputs, const size_t* output_sizes,
          size_t output_total) {
  if (output_total > kMaxOutput || num_outputs > 8) {
    board_puts(name);
    board_puts(": outputs larger than the test's buffer FAILED\n");
    return 1;
  }
  float* outs[8];
  size_t at = 0;
  for (int i = 0; i < num_outputs; ++i) {
    outs[i] = g_out + at;
    at += output_sizes[i];
  }
  int failures = run(nullptr, input_sizes, outs, output_sizes) == KILN_MICRO_ERR_NULL ? 0 : 1;
  const uint64_t t0 = board_ticks();
  failures += run(inputs, input_sizes, outs, output_sizes) == KILN_MICRO_OK ? 0 : 1;
  const uint64_t t1 = board_ticks();
  float max_err = 0;
  for (int i = 0; i < num_outputs; ++i)
    for (size_t j = 0; j < output_sizes[i]; ++j) {
      const float want = outputs[i][j], err = absf(outs[i][j] - want) / (absf(want) > 1 ? absf(want) : 1.0f);
      if (!(err <= 1e-5f)) ++failures;
      if (err > max_err || err != err) max_err = err;
    }
  board_puts(name);
  board_puts(": instructions=");
  board_put_int(static_cast<long long>(board_instructions(t1 - t0)));
  board_puts(" max_err=");
  board_put_float(max_err * 1e6f, 3);
  board_puts(failures ? "e-6 FAILED\n" : "e-6 ok\n");
  return failures;
}

}  // namespace

int main() {
  int failed = 0, n = 0;
  KILN_SUITE_CHECKS
  board_puts("KILN_MICRO_SUITE models=");
  board_put_int(n);
  board_puts(" failed=");
  board_put_int(failed);
  board_puts("\n");
  return failed ? 1 : 0;
}
