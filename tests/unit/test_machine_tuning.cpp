// The CPU backend's machine description and the sizes derived from it (backends/cpu/machine.h),
// and the kernel paths those sizes steer: reductions (single-run leaves, vectorised row adds,
// column tiles), the global average pool, against f64 references and across thread counts.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/machine.h"
#include "test_util.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::vector<float> rnd(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.5f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

/// A fake sysfs cpu folder with the given cache sizes of cpu0.
fs::path fake_sysfs(const std::string& name, const char* l1d, const char* l2, const char* l3) {
  fs::path root = fs::temp_directory_path() / ("kiln_machine_" + name);
  fs::remove_all(root);
  struct C {
    const char *level, *type, *size;
  } caches[] = {{"1", "Data", l1d}, {"1", "Instruction", "32K"}, {"2", "Unified", l2}, {"3", "Unified", l3}};
  for (int i = 0; i < 4; ++i) {
    fs::path d = root / "cpu0" / "cache" / ("index" + std::to_string(i));
    fs::create_directories(d);
    std::ofstream(d / "level") << caches[i].level << "\n";
    std::ofstream(d / "type") << caches[i].type << "\n";
    std::ofstream(d / "size") << caches[i].size << "\n";
  }
  return root;
}

}  // namespace

TEST(MachineTuning, ReadsCachesFromSysfs) {
  fs::path root = fake_sysfs("zen4", "32K", "1024K", "32768K");
  cpu::MachineInfo m = cpu::detect_machine(root.string());
  EXPECT_EQ(m.l1d, 32 << 10);
  EXPECT_EQ(m.l2, 1 << 20);
  EXPECT_EQ(m.l3, int64_t{32} << 20);
  EXPECT_STREQ(m.source, "sysfs");
  EXPECT_GE(m.cores, 1);
  EXPECT_TRUE(m.simd_bytes == 16 || m.simd_bytes == 32 || m.simd_bytes == 64);
  fs::remove_all(root);
}

TEST(MachineTuning, FallsBackWithoutSysfs) {
  cpu::MachineInfo m = cpu::detect_machine("/nonexistent/kiln");
  EXPECT_GT(m.l1d, 0);  // cpuid, or the reference sizes where cpuid has none
  EXPECT_GT(m.l2, 0);
  EXPECT_FALSE(m.model.empty());
}

TEST(MachineTuning, ReferenceMachineGivesTheOldConstants) {
  const cpu::Tuning t = cpu::derive_tuning(cpu::reference_machine());
  EXPECT_EQ(t.reduce_tile, 4096);
  EXPECT_EQ(t.reduce_parallel_depth, 4);
  EXPECT_EQ(t.softmax_cache_bytes, int64_t{120} << 20);
  EXPECT_EQ(t.fusion_tile, 4096);
  EXPECT_EQ(t.fusion_epilogue_block, 65536);
  EXPECT_EQ(t.gemm_small_b_bytes, 32 << 10);
  EXPECT_EQ(t.gemm_thread_work, 64.0 * 64 * 64);
  EXPECT_EQ(t.onednn_one_thread_work, 96.0 * 96 * 96);
}

TEST(MachineTuning, SmallerCachesGiveSmallerTiles) {
  cpu::MachineInfo m = cpu::reference_machine();
  m.l1d = 32 << 10;
  m.l2 = 1 << 20;
  m.l3 = int64_t{32} << 20;
  m.cores = 16;
  m.simd_bytes = 32;
  const cpu::Tuning t = cpu::derive_tuning(m);
  EXPECT_EQ(t.reduce_tile, 4096);  // never narrower: rows read in pieces are read slower
  EXPECT_EQ(t.fusion_tile, 2048);
  EXPECT_EQ(t.fusion_epilogue_block, 32768);
  EXPECT_EQ(t.reduce_parallel_depth, 7);      // 128 subtrees for 16 cores
  EXPECT_EQ(t.softmax_cache_bytes, 1 << 20);  // half of a core's 2 MiB share of the L3
  EXPECT_LT(t.gemm_small_b_bytes, 32 << 10);
  EXPECT_LT(t.gemm_thread_work, 64.0 * 64 * 64);
}

TEST(MachineTuning, LargerL2GivesWiderReductionTiles) {
  cpu::MachineInfo m = cpu::reference_machine();
  m.l2 = 4 << 20;
  EXPECT_EQ(cpu::derive_tuning(m).reduce_tile, 8192);
  m.l2 = 64 << 20;
  EXPECT_EQ(cpu::derive_tuning(m).reduce_tile, 16384);
}

TEST(MachineTuning, DescriptionNamesTheCaches) {
  const std::string d = cpu::describe_machine();
  EXPECT_NE(d.find("L1d"), std::string::npos) << d;
  EXPECT_NE(d.find("L2"), std::string::npos) << d;
}

// Row sums over lengths around the leaf size (2048), odd widths for the vectorised row adds,
// strided views; all against f64 sums, and the same bits with 1 and 2 threads.
TEST(MachineTuning, ReductionsMatchF64AndThreadCounts) {
  for (int64_t len : {1, 63, 64, 2047, 2048, 2049, 4096 + 17}) {
    const int64_t rows = 37;
    auto v = rnd(static_cast<size_t>(rows * len), static_cast<uint32_t>(len));
    Tensor x = tensor(v, {rows, len});
    auto run = [&] { return std::vector<Tensor>{sum(x, {-1}), amax(x, {-1}), sum(x, {0}), amax(x, {0}), sum(x)}; };
    auto a = test::with_threads(1, run), b = test::with_threads(2, run);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << "len " << len << " result " << i;
    auto s1 = a[0].to_vector<float>(), m1 = a[1].to_vector<float>();
    auto s0 = a[2].to_vector<float>(), m0 = a[3].to_vector<float>();
    double all = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      float m = -INFINITY;
      for (int64_t c = 0; c < len; ++c) {
        s += v[static_cast<size_t>(r * len + c)];
        m = std::max(m, v[static_cast<size_t>(r * len + c)]);
      }
      all += s;
      EXPECT_NEAR(s1[static_cast<size_t>(r)], s, 1e-4 * (1 + std::sqrt(double(len))));
      EXPECT_EQ(m1[static_cast<size_t>(r)], m);
    }
    for (int64_t c = 0; c < len; ++c) {
      double s = 0;
      float m = -INFINITY;
      for (int64_t r = 0; r < rows; ++r) {
        s += v[static_cast<size_t>(r * len + c)];
        m = std::max(m, v[static_cast<size_t>(r * len + c)]);
      }
      EXPECT_NEAR(s0[static_cast<size_t>(c)], s, 1e-4 * rows);
      EXPECT_EQ(m0[static_cast<size_t>(c)], m);
    }
    EXPECT_NEAR(a[4].item<float>(), all, 1e-4 * double(rows * len));
  }
}

TEST(MachineTuning, ReductionsOfViewsAndEmpty) {
  auto v = rnd(300 * 2051, 7);
  Tensor x = tensor(v, {300, 2051});
  Tensor t = x.t();                    // strided rows: the lane path, not the single run
  Tensor part = x.narrow(1, 3, 2045);  // rows that do not start at a leaf boundary
  Tensor s = sum(t, {0}), p = sum(part, {1}), r = sum(x, {1});
  auto sv = s.to_vector<float>(), pv = p.to_vector<float>(), rv = r.to_vector<float>();
  for (int64_t i = 0; i < 300; ++i) {
    double a = 0, b = 0;
    for (int64_t c = 0; c < 2051; ++c) a += v[static_cast<size_t>(i * 2051 + c)];
    for (int64_t c = 3; c < 2048; ++c) b += v[static_cast<size_t>(i * 2051 + c)];
    EXPECT_NEAR(sv[static_cast<size_t>(i)], a, 1e-2);
    EXPECT_NEAR(pv[static_cast<size_t>(i)], b, 1e-2);
    EXPECT_EQ(sv[static_cast<size_t>(i)], rv[static_cast<size_t>(i)]);  // same leaves, same bits
  }
  Tensor e = zeros({0, 5});
  EXPECT_EQ(sum(e, {0}).to_vector<float>(), std::vector<float>(5, 0.f));
  EXPECT_EQ(sum(e, {1}).numel(), 0);
  EXPECT_EQ(sum(e).item<float>(), 0.f);
}

// The global average (output 1 x 1): contiguous planes take one vectorised sum each, others
// the general path; f64 reference, odd sizes, views, empty, 1 and 2 threads.
TEST(MachineTuning, GlobalAveragePool) {
  namespace F = nn::functional;
  for (auto shape : {Shape{3, 5, 7, 9}, Shape{2, 64, 56, 56}, Shape{1, 3, 1, 1}}) {
    auto v = rnd(static_cast<size_t>(shape_numel(shape)), 11);
    Tensor x = tensor(v, shape);
    const int64_t planes = shape[0] * shape[1], n = shape[2] * shape[3];
    auto run = [&] { return F::adaptive_avg_pool2d(x, 1); };
    Tensor a = test::with_threads(1, run), b = test::with_threads(2, run);
    EXPECT_EQ(a.shape(), (Shape{shape[0], shape[1], 1, 1}));
    EXPECT_TRUE(same_bits(a, b));
    auto av = a.to_vector<float>();
    for (int64_t p = 0; p < planes; ++p) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += v[static_cast<size_t>(p * n + i)];
      EXPECT_NEAR(av[static_cast<size_t>(p)], s / double(n), 1e-5);
    }
    // A channels-last view and a cropped view (planes not contiguous): the general path.
    Tensor cl = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    EXPECT_TRUE(allclose(F::adaptive_avg_pool2d(cl, 1), a, 1e-5, 1e-6));
    if (shape[3] > 2) {
      Tensor crop = x.narrow(3, 1, shape[3] - 2);
      Tensor want = crop.contiguous();
      EXPECT_TRUE(allclose(F::adaptive_avg_pool2d(crop, 1), F::adaptive_avg_pool2d(want, 1), 1e-5, 1e-6));
    }
  }
  Tensor e = zeros({0, 4, 5, 5});
  EXPECT_EQ(F::adaptive_avg_pool2d(e, 1).shape(), (Shape{0, 4, 1, 1}));
}

// softmax over a non-innermost dim: tiles of columns, narrowed where the tile's lines would not
// fit a core's share of the L3 (several tiles, the last one partial); f64 reference, 1 vs 2 threads.
TEST(MachineTuning, ColumnSoftmaxTiles) {
  for (auto [L, W] : {std::pair<int64_t, int64_t>{600, 300}, {3, 1030}, {1, 5}}) {
    auto v = rnd(static_cast<size_t>(L * W), static_cast<uint32_t>(L + W));
    Tensor x = tensor(v, {L, W});
    auto run = [&] { return softmax(x, 0); };
    Tensor a = test::with_threads(1, run), b = test::with_threads(2, run);
    EXPECT_TRUE(same_bits(a, b));
    auto av = a.to_vector<float>();
    for (int64_t c = 0; c < W; ++c) {
      double mx = -INFINITY, s = 0;
      for (int64_t l = 0; l < L; ++l) mx = std::max(mx, double(v[static_cast<size_t>(l * W + c)]));
      for (int64_t l = 0; l < L; ++l) s += std::exp(double(v[static_cast<size_t>(l * W + c)]) - mx);
      for (int64_t l = 0; l < L; ++l) {
        const double want = std::exp(double(v[static_cast<size_t>(l * W + c)]) - mx) / s;
        ASSERT_NEAR(av[static_cast<size_t>(l * W + c)], want, 1e-6 + 1e-5 * want) << L << "x" << W;
      }
    }
  }
}

// Outputs written with non-temporal stores (stream_stores: large outputs) hold the same bits as
// plain stores: every length around the vector width, inputs at every float offset from a line,
// the unary ops of both loops (plain, and guarded: sin, expm1), the binary ops with a broadcast
// scalar and row (rows of 10 floats: most start off a 64-byte line and take plain stores), 1 and
// 2 threads. The threshold is lowered to 0 so that these small tensors stream.
TEST(MachineTuning, StreamedStoresGiveTheSameBits) {
  struct Restore {
    ~Restore() { cpu::set_stream_store_bytes(-1); }
  } restore;
  auto v = rnd(4200, 11), w = rnd(4200, 12);
  for (auto& x : w) x += x >= 0 ? 0.5f : -0.5f;  // a divisor away from 0
  Tensor big = tensor(v, {4200}), big2 = tensor(w, {4200});
  for (int64_t n : {0, 1, 5, 15, 16, 17, 31, 33, 100, 1000, 4099})
    for (int64_t off : {0, 1, 3, 7, 15}) {
      Tensor x = big.narrow(0, off, n), y = big2.narrow(0, 16 - off, n);
      const int64_t cols = n >= 10 ? 10 : 1;
      Tensor row = big2.narrow(0, off, cols);
      auto run = [&] {
        Tensor m = x.narrow(0, 0, n / cols * cols).reshape({n / cols, cols});
        return std::vector<Tensor>{relu(x), exp(x), sigmoid(x), tanh(x), gelu(x),  erf(x),  sin(x), expm1(x),
                                   x + y,   x * y,  x - y,      x / y,   x + 2.5f, m * row, m - row};
      };
      cpu::set_stream_store_bytes(-1);
      auto plain = test::with_threads(1, run);
      cpu::set_stream_store_bytes(0);
      auto s1 = test::with_threads(1, run), s2 = test::with_threads(2, run);
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_TRUE(same_bits(plain[i], s1[i])) << "n " << n << " offset " << off << " result " << i;
        EXPECT_TRUE(same_bits(plain[i], s2[i])) << "n " << n << " offset " << off << " result " << i << " (2 threads)";
      }
    }
}

TEST(MachineTuning, StreamsOutputsLargerThanHalfTheLastLevelCache) {
  cpu::MachineInfo m = cpu::reference_machine();
  EXPECT_EQ(cpu::derive_tuning(m).stream_store_bytes, int64_t{240} << 20);
  m.l3 = int64_t{32} << 20;
  EXPECT_EQ(cpu::derive_tuning(m).stream_store_bytes, int64_t{16} << 20);
  m.l3 = 0;  // no L3: the L2s together
  m.cores = 8;
  EXPECT_EQ(cpu::derive_tuning(m).stream_store_bytes, int64_t{8} << 20);
}
