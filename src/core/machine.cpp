// SPDX-License-Identifier: MIT OR Apache-2.0
// The host CPU's description (machine.h): caches from sysfs (cpuid leaf 4 / 0x8000001D where
// sysfs has none), logical CPUs online, the widest f32 vector; and the sizes derived from it.
#include "core/machine.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kiln::cpu {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (f) std::getline(f, s);
  return s;
}

/// "48K", "2048K", "32M", "1024" -> bytes (0 when unreadable).
int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (v <= 0) return 0;
  const char u = end ? *end : '\0';
  return u == 'K' || u == 'k' ? v << 10 : u == 'M' || u == 'm' ? v << 20 : u == 'G' || u == 'g' ? v << 30 : v;
}

#if defined(__x86_64__) || defined(__i386__)
/// Caches from cpuid's deterministic cache leaf (4 on Intel, 0x8000001D on AMD).
void cpuid_caches(MachineInfo& m) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned leaf = 4;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x8000001D && __get_cpuid_count(0x8000001D, 0, &a, &b, &c, &d) &&
      (a & 31) != 0)
    leaf = 0x8000001D;
  for (unsigned i = 0; i < 8; ++i) {
    if (!__get_cpuid_count(leaf, i, &a, &b, &c, &d)) return;
    const unsigned type = a & 31, level = (a >> 5) & 7;
    if (type == 0) return;
    const int64_t size = int64_t{(b >> 22) + 1} * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * (int64_t{c} + 1);
    if (level == 1 && type == 1) m.l1d = size;
    if (level == 2 && type != 2) m.l2 = size;
    if (level == 3 && type != 2) m.l3 = size;
  }
}

std::string cpuid_brand() {
  unsigned r[12] = {};
  for (unsigned i = 0; i < 3; ++i)
    if (!__get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3])) return "";
  std::string s(reinterpret_cast<const char*>(r), sizeof(r));
  s = s.c_str();
  const size_t b = s.find_first_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b);
}

int simd_bytes() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 64;
  if (__builtin_cpu_supports("avx2")) return 32;
  return 16;
}
#else
void cpuid_caches(MachineInfo&) {}
std::string cpuid_brand() { return ""; }
int simd_bytes() { return 16; }
#endif

std::string cpuinfo_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t p = line.find(':');
      if (p != std::string::npos) return line.substr(line.find_first_not_of(' ', p + 1));
    }
  return "";
}

/// v * have / ref rounded down to a power of two, within [lo, hi].
int64_t scale_pow2(int64_t v, double have, double ref, int64_t lo, int64_t hi) {
  const double x = double(v) * have / ref;
  int64_t p = 1;
  while (double(p) * 2 <= x) p *= 2;
  return std::clamp(p, lo, hi);
}

bool tune_off() {
  const char* e = std::getenv("KILN_TUNE");
  return e && e[0] == '0';
}

}  // namespace

const MachineInfo& reference_machine() {
  static const MachineInfo ref{"Intel(R) Xeon(R) Processor (reference)"};
  return ref;
}

MachineInfo detect_machine(const std::string& sysfs_root) {
  MachineInfo m;
  m.l1d = m.l2 = m.l3 = 0;
  m.source = "sysfs";
  for (int i = 0; i < 16; ++i) {
    const std::string dir = sysfs_root + "/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    if (level.empty()) break;
    const int64_t size = parse_size(read_line(dir + "size"));
    if (level == "1" && type == "Data") m.l1d = size;
    if (level == "2" && type != "Instruction") m.l2 = size;
    if (level == "3" && type != "Instruction") m.l3 = size;
  }
  if (m.l1d <= 0 || m.l2 <= 0) {
    MachineInfo c;
    c.l1d = c.l2 = c.l3 = 0;
    cpuid_caches(c);
    if (m.l1d <= 0) m.l1d = c.l1d;
    if (m.l2 <= 0) m.l2 = c.l2;
    if (m.l3 <= 0) m.l3 = c.l3;
    m.source = "cpuid";
  }
  const MachineInfo& ref = reference_machine();
  if (m.l1d <= 0) m.l1d = ref.l1d;  // nothing readable: the reference's sizes
  if (m.l2 <= 0) m.l2 = ref.l2;
  if (m.l3 < 0) m.l3 = 0;  // some CPUs have none
  m.cores = std::max(1u, std::thread::hardware_concurrency());
  m.simd_bytes = simd_bytes();
  m.model = cpuinfo_model();
  if (m.model.empty()) m.model = cpuid_brand();
  if (m.model.empty()) m.model = "unknown CPU";
  return m;
}

const MachineInfo& machine() {
  static const MachineInfo m = tune_off() ? reference_machine() : detect_machine();
  return m;
}

Tuning derive_tuning(const MachineInfo& m) {
  const MachineInfo& r = reference_machine();
  Tuning t;  // the reference values
  // Wider with a larger L2, never narrower than the reference: a narrower tile reads each row in
  // pieces, which the prefetchers follow badly (sum(0) of [4096, 4096] took 1.5x as long with
  // 2048 columns on a Xeon with 1.25 MiB of L2), while the accumulator rows of a 4096-column
  // tile (one per level of the leaves' tree) take a few hundred KiB at most.
  t.reduce_tile = scale_pow2(t.reduce_tile, double(m.l2), double(r.l2), 4096, 16384);
  int depth = 4;
  while ((1 << depth) < 8 * m.cores && depth < 8) ++depth;
  t.reduce_parallel_depth = depth;
  t.softmax_cache_bytes = std::max(m.l2, m.l3 / std::max(1, m.cores)) / 2;
  t.fusion_tile = scale_pow2(t.fusion_tile, double(m.l1d), double(r.l1d), 1024, 16384);
  t.fusion_epilogue_block = scale_pow2(t.fusion_epilogue_block, double(m.l2), double(r.l2), 8192, 1 << 20);
  t.gemm_small_b_bytes = std::clamp<int64_t>(m.l1d * 2 / 3, 8 << 10, 64 << 10);
  // Half the last-level cache: an elementwise op's input and output together then overflow it.
  t.stream_store_bytes = std::max<int64_t>(m.l3, m.l2 * m.cores) / 2;
  // Narrower vectors: fewer multiply-adds per second per thread, so less work pays a thread.
  t.gemm_thread_work *= double(m.simd_bytes) / double(r.simd_bytes);
  t.onednn_one_thread_work *= double(m.simd_bytes) / double(r.simd_bytes);
  return t;
}

const Tuning& tuning() {
  static const Tuning t = [] {
    Tuning d = derive_tuning(machine());
    const char* e = std::getenv("KILN_TUNE_DEBUG");
    if (e && e[0] == '1') std::fprintf(stderr, "kiln: %s\n", describe_machine().c_str());
    return d;
  }();
  return t;
}

namespace {
std::atomic<int64_t> stream_override{-1};
}

bool stream_stores(int64_t bytes) {
  const int64_t o = stream_override.load(std::memory_order_relaxed);
  return bytes >= (o >= 0 ? o : tuning().stream_store_bytes);
}

void set_stream_store_bytes(int64_t bytes) { stream_override.store(bytes, std::memory_order_relaxed); }

std::string describe_machine() {
  const MachineInfo& m = machine();
  const Tuning t = derive_tuning(m);
  std::ostringstream s;
  s << m.model << " (" << m.source << "): L1d " << (m.l1d >> 10) << " KiB, L2 " << (m.l2 >> 10) << " KiB, L3 "
    << (m.l3 >> 20) << " MiB, " << m.cores << " CPUs, " << m.simd_bytes * 8 << "-bit SIMD; reduce tile "
    << t.reduce_tile << ", fusion tile " << t.fusion_tile << ", small-GEMM B " << (t.gemm_small_b_bytes >> 10)
    << " KiB, work per GEMM thread " << t.gemm_thread_work << ", streamed outputs from " << (t.stream_store_bytes >> 20)
    << " MiB";
  return s.str();
}

}  // namespace kiln::cpu
