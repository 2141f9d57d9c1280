// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The machine the CPU backend runs on (cache sizes, cores, SIMD width), read once, and the block
// and tile sizes of the CPU kernels derived from it (in core: the kernel language's C++ target
// sizes its work by it too). Every size was first chosen on a reference
// machine (an Intel Xeon with 48 KiB L1d and 2 MiB L2 per core, AVX-512); a derived size scales
// that choice by the ratio of this machine's cache (or SIMD width) to the reference's, so the
// reference machine gets exactly the old constants. KILN_TUNE=0 uses the reference description
// (the old constants) on any machine.
//
// None of these sizes changes a result: they size work and cache tiles, never the order in which
// a reduction adds its elements (Note [Reduction order] in reduce.cpp uses fixed leaves).
#include <cstdint>
#include <string>

namespace kiln::cpu {

/// What the kernels need to know of the host CPU.
struct MachineInfo {
  std::string model;                 // /proc/cpuinfo "model name" (or the cpuid brand string)
  int64_t l1d = 48 << 10;            // bytes of L1 data cache per core
  int64_t l2 = 2 << 20;              // bytes of L2 per core
  int64_t l3 = int64_t{480} << 20;   // bytes of L3 in all (shared)
  int cores = 2;                     // logical CPUs online
  int simd_bytes = 64;               // widest f32 vector: 16 (SSE), 32 (AVX2), 64 (AVX-512)
  const char* source = "reference";  // "sysfs", "cpuid" or "reference"
};

/// The reference machine the defaults were chosen on.
const MachineInfo& reference_machine();
/// This machine, read once (sysfs, then cpuid for what sysfs lacks); the reference when
/// KILN_TUNE=0.
const MachineInfo& machine();
/// Reads the description afresh (for tests): sysfs_root replaces /sys/devices/system/cpu.
MachineInfo detect_machine(const std::string& sysfs_root = "/sys/devices/system/cpu");

/// Sizes derived from machine(); see each field for its reference value.
struct Tuning {
  int64_t reduce_tile = 4096;                        // columns per task of an outer-layout reduction (L2)
  int reduce_parallel_depth = 4;                     // 2^depth subtrees of one long reduction (cores)
  int64_t softmax_cache_bytes = int64_t{120} << 20;  // a column softmax tile of lines (L3 / CPUs / 2)
  int64_t fusion_tile = 4096;                        // elements per tile of a fused program (L1d)
  int64_t fusion_epilogue_block = 65536;             // elements per row block of a product's epilogue (L2)
  int64_t gemm_small_b_bytes = 32 << 10;             // B of the small-GEMM path fits in this (2/3 of L1d)
  double gemm_thread_work = 64.0 * 64 * 64;          // multiply-adds per extra thread (SIMD width)
  double onednn_one_thread_work = 96.0 * 96 * 96;    // oneDNN sgemm below this runs on one thread
  int64_t stream_store_bytes = int64_t{240} << 20;   // elementwise outputs this large bypass the cache (L3 / 2)
};

/// The tuning of machine(), computed once.
const Tuning& tuning();
/// Whether an elementwise kernel writes an output of `bytes` with non-temporal stores: one that
/// large leaves the last-level cache before it is read again, and a plain store reads each
/// line of the destination first (a third of the memory traffic of y = f(x)).
bool stream_stores(int64_t bytes);
/// Outputs from `bytes` on are streamed; -1: tuning().stream_store_bytes again (for tests).
void set_stream_store_bytes(int64_t bytes);
/// The tuning of a given machine description (for tests and the report).
Tuning derive_tuning(const MachineInfo& m);
/// One line describing machine() and its tuning (KILN_TUNE_DEBUG=1 prints it at first use).
std::string describe_machine();

}  // namespace kiln::cpu
