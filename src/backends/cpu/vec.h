// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Vectorised (Highway, runtime-dispatched) paths for contiguous f32 rows. Each returns false
// when it has no fast path for the op, and the caller falls back to scalar code.
#include <cstdint>
#include <string>

#include "fusion/program.h"
#include "ir/op.h"

namespace kiln::cpu::vec {

/// out = op(in) for n contiguous floats; stream: write out with non-temporal stores
/// (stream_stores, machine.h). False: no vector form.
bool unary_f32(const ir::Op& op, const float* in, float* out, int64_t n, bool stream = false);
/// out = exp(in) for n contiguous floats (in may equal out); false without SIMD.
bool exp_f32(const float* in, float* out, int64_t n);
/// a, b: row pointers; sa, sb: 1 (contiguous) or 0 (broadcast scalar).
bool binary_f32(ir::OpKind kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n,
                bool stream = false);
/// binary_f32 over `rows` rows of n: row r reads a + r * ra and b + r * rb and writes
/// out + r * ro (one dispatch for all the rows: a per-channel operand over small planes).
bool binary_rows_f32(ir::OpKind kind, const float* a, int64_t sa, int64_t ra, const float* b, int64_t sb, int64_t rb,
                     float* out, int64_t ro, int64_t rows, int64_t n, bool stream = false);

/// Sum of n contiguous floats (a fixed lane/accumulator layout: deterministic for a target).
float sum_f32(const float* q, int64_t n);
/// Max (or min) of n >= 1 contiguous floats; NaN if any element is NaN.
float extreme_f32(const float* q, int64_t n, bool is_max);

/// Softmax (or log-softmax) of one contiguous row of n >= 1 floats, x -> y (may alias).
void softmax_f32(const float* x, float* y, int64_t n, bool log);

/// Elementwise programs (the fused kernels of the fusion decorator): straight-line code over
/// registers of kProgramChunk floats, run chunk by chunk so that every value stays in L1 and
/// memory is read and written once. Bool values are held as 0.0f / 1.0f.
constexpr int64_t kProgramChunk = 256;
using PInstr = fusion::PInstr;  ///< the fused-program instruction (fusion/program.h)
/// Whether op can be an Op instruction: f32/bool operands and an op with a vector form whose
/// results are bitwise those of the CPU kernel. Fills the instruction's kind and r.
bool program_supports(const ir::Op& op, PInstr* ins = nullptr);
/// Runs the count instructions of prog over elements [0, n): element i of a Load/Store pointer
/// is at offset i; a Splat pointer holds one value. stream: Store writes with non-temporal
/// stores (the Store pointers are 64-byte aligned and n is a multiple of kProgramChunk).
void run_program(const PInstr* prog, size_t count, int nregs, void* const* ptrs, int64_t n, bool stream);
/// The Highway target run_program runs (an HWY_* bit; 0 without Highway).
int64_t program_target();

/// A program compiled to machine code (program_jit.cpp): run_program's work and bits for one
/// program, with every value kept in vector registers across its instructions (no pass over a
/// chunk per instruction). stream != 0: as run_program's stream.
using ProgramFn = void (*)(void* const* ptrs, int64_t n, int stream);
/// When programs are compiled: kOff never; kAsync (the default) in a background thread, the
/// interpreter running the program until its kernel is loaded; kSync at once, the caller
/// waiting. KILN_FUSION_JIT=0 / sync / 1 sets it at start-up.
enum class JitMode : int { kOff, kAsync, kSync };
JitMode jit_mode();
void set_jit_mode(JitMode mode);
/// The compiled kernel of the count instructions of prog; nullptr while it is compiling, when
/// compiling is off or impossible here (no compiler or no Kiln source tree), or when it
/// failed. The first call for a program starts its compile; kernels are cached in memory and
/// on disk (KILN_CACHE_DIR/programs, else ~/.cache/kiln/programs) under a hash of their source,
/// the flags, the headers they include and the compiler.
ProgramFn compiled_program(const PInstr* prog, size_t count);
/// Waits until no compile is queued or running.
void wait_for_compiles();
/// Why programs cannot be compiled here ("" when they can).
std::string jit_unavailable_reason();
/// The folder of the disk cache.
std::string jit_cache_dir();
/// Compiles with cxx into cache_dir from now on ("": the defaults) and forgets every kernel
/// (for tests: a missing compiler, a fresh or damaged cache).
void set_jit_compiler(const std::string& cxx, const std::string& cache_dir);
struct JitStats {
  int64_t compiled = 0;   ///< kernels compiled by this process
  int64_t from_disk = 0;  ///< kernels loaded from the disk cache
  int64_t failed = 0;     ///< compiles or loads that failed (the interpreter runs those)
  double compile_s = 0;   ///< seconds spent compiling (wall time of the compiler runs)
  double last_compile_s = 0;
  double preamble_s = 0;  ///< seconds spent precompiling the header the kernels include
};
JitStats jit_stats();

}  // namespace kiln::cpu::vec
