// SPDX-License-Identifier: MIT OR Apache-2.0
// The micro target's test program, for a board under QEMU and for a hosted (sanitizer) build:
// runs a generated model (KILN_MICRO_HEADER, entry point KILN_MICRO_RUN) on the inputs of
// ref.h (written by kiln_micro_ref from Kiln's run-time ONNX path) and compares every output
// within |got - want| <= 1e-5 * max(1, |want|) (max_err: the largest |got - want| / max(1, |want|)); first checks that
// bad buffers (null pointers, wrong sizes) return the error codes. Prints one "KILN_MICRO" line of measurements (time
// in instructions under `qemu -icount shift=0`, stack high-water mark) and exits 0 on success.
#include KILN_MICRO_HEADER

#include "board.h"
#include "ref.h"

// The RAM target: the arena within 1.2x of the liveness plan's lower bound.
static_assert(KILN_MICRO_ARENA * 5 <= KILN_MICRO_BOUND * 6, "the arena exceeds 1.2x the liveness lower bound");

namespace {

float g_out[REF_OUTPUT_TOTAL > 0 ? REF_OUTPUT_TOTAL : 1];
int g_failures = 0;

void expect(bool ok, const char* what) {
  if (ok) return;
  ++g_failures;
  board_puts("FAIL: ");
  board_puts(what);
  board_puts("\n");
}

float absf(float v) { return v < 0 ? -v : v; }

}  // namespace

int main() {
  float* outs[REF_NUM_OUTPUTS];
  size_t at = 0;
  for (int i = 0; i < REF_NUM_OUTPUTS; ++i) {
    outs[i] = g_out + at;
    at += ref_output_sizes[i];
  }
  // Bad buffers: error codes, nothing else.
  ref_input_ptr null_inputs[REF_NUM_INPUTS] = {};
  float* null_outputs[REF_NUM_OUTPUTS] = {};
  size_t in_sizes[REF_NUM_INPUTS], out_sizes[REF_NUM_OUTPUTS];
  for (int i = 0; i < REF_NUM_INPUTS; ++i) in_sizes[i] = ref_input_sizes[i];
  for (int i = 0; i < REF_NUM_OUTPUTS; ++i) out_sizes[i] = ref_output_sizes[i];
  expect(KILN_MICRO_RUN(nullptr, in_sizes, outs, out_sizes) == KILN_MICRO_ERR_NULL, "null inputs");
  expect(KILN_MICRO_RUN(ref_inputs, nullptr, outs, out_sizes) == KILN_MICRO_ERR_NULL, "null input sizes");
  expect(KILN_MICRO_RUN(ref_inputs, in_sizes, nullptr, out_sizes) == KILN_MICRO_ERR_NULL, "null outputs");
  expect(KILN_MICRO_RUN(ref_inputs, in_sizes, outs, nullptr) == KILN_MICRO_ERR_NULL, "null output sizes");
  expect(KILN_MICRO_RUN(null_inputs, in_sizes, outs, out_sizes) == KILN_MICRO_ERR_NULL, "a null input buffer");
  expect(KILN_MICRO_RUN(ref_inputs, in_sizes, null_outputs, out_sizes) == KILN_MICRO_ERR_NULL, "a null output buffer");
  in_sizes[0] += 1;
  expect(KILN_MICRO_RUN(ref_inputs, in_sizes, outs, out_sizes) == KILN_MICRO_ERR_SIZE, "an input too long");
  in_sizes[0] -= 2;
  expect(KILN_MICRO_RUN(ref_inputs, in_sizes, outs, out_sizes) == KILN_MICRO_ERR_SIZE, "an input too short");
  in_sizes[0] += 1;
  out_sizes[REF_NUM_OUTPUTS - 1] -= 1;
  expect(KILN_MICRO_RUN(ref_inputs, in_sizes, outs, out_sizes) == KILN_MICRO_ERR_SIZE, "an output too short");
  out_sizes[REF_NUM_OUTPUTS - 1] += 1;

#ifdef REF_INDEX_INPUT
  {  // An index outside its table: an error code, and no output written.
    static int64_t bad[REF_INDEX_COUNT];
    const int64_t* good = static_cast<const int64_t*>(ref_inputs[REF_INDEX_INPUT]);
    ref_input_ptr ins[REF_NUM_INPUTS];
    for (int i = 0; i < REF_NUM_INPUTS; ++i) ins[i] = ref_inputs[i];
    for (size_t j = 0; j < REF_INDEX_COUNT; ++j) bad[j] = good[j];
    ins[REF_INDEX_INPUT] = bad;
    for (size_t j = 0; j < at; ++j) g_out[j] = 12345.0f;
    const int64_t out_of_range[2] = {int64_t{1} << 40, -(int64_t{1} << 40)};
    for (int k = 0; k < 2; ++k) {
      bad[REF_INDEX_COUNT - 1] = out_of_range[k];
      expect(KILN_MICRO_RUN(ins, in_sizes, outs, out_sizes) == KILN_MICRO_ERR_INDEX, "an index out of range");
    }
    bool untouched = true;
    for (size_t j = 0; j < at; ++j) untouched = untouched && g_out[j] == 12345.0f;
    expect(untouched, "no output written after an index out of range");
  }
#endif

  const uint64_t t0 = board_ticks();
  const int rc = KILN_MICRO_RUN(ref_inputs, in_sizes, outs, out_sizes);
  const uint64_t t1 = board_ticks();
  expect(rc == KILN_MICRO_OK, "the run returns KILN_MICRO_OK");
  float max_err = 0;
  for (int i = 0; i < REF_NUM_OUTPUTS; ++i)
    for (size_t j = 0; j < ref_output_sizes[i]; ++j) {
      const float want = ref_outputs[i][j], got = outs[i][j];
      const float err = absf(got - want) / (absf(want) > 1 ? absf(want) : 1.0f);
      if (!(err <= 1e-5f)) {
        if (g_failures < 8) {
          board_puts("FAIL: output ");
          board_put_int(i);
          board_puts("[");
          board_put_int(static_cast<long long>(j));
          board_puts("] = ");
          board_put_float(got, 7);
          board_puts(", Kiln: ");
          board_put_float(want, 7);
          board_puts("\n");
        }
        ++g_failures;
      }
      if (err > max_err || err != err) max_err = err;
    }
  board_puts("KILN_MICRO model=" KILN_MICRO_NAME " instructions=");
  board_put_int(static_cast<long long>(board_instructions(t1 - t0)));
  board_puts(" arena_bytes=");
  board_put_int(KILN_MICRO_ARENA);
  board_puts(" stack_bytes=");
  board_put_int(static_cast<long long>(board_stack_used()));
  board_puts(" max_err=");
  board_put_float(max_err * 1e6f, 3);
  board_puts("e-6 ");
  board_puts(g_failures ? "FAILED\n" : "ok\n");
  return g_failures ? 1 : 0;
}
