// SPDX-License-Identifier: MIT OR Apache-2.0
// The packed GEMM (gemm_f32 / gemm_f64) against a double-accumulating reference, and the
// MatMul kernel through its oneDNN and portable paths and every dtype.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/onednn.h"
#include "test_util.h"

namespace kiln {
namespace {

using cpu::gemm_f32;
using cpu::gemm_f64;

/// Strided view of a buffer: element (r, c) at off + r * rs + c * cs.
struct View {
  int64_t rs, cs, off, size;
};

/// Row-major (or, transposed, column-major) view of rows x cols with padded leading dims.
View make_view(int64_t rows, int64_t cols, bool trans, int64_t pad) {
  if (!trans) return {cols + pad, 1, 3, 3 + rows * (cols + pad) + 1};
  return {1, rows + pad, 5, 5 + cols * (rows + pad) + 1};
}

template <class T>
std::vector<T> random_vec(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(u(g));
  return v;
}

template <class T>
void reference(int64_t M, int64_t N, int64_t K, double alpha, const T* A, View va, const T* B, View vb, double beta,
               T* C, View vc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(A[va.off + m * va.rs + k * va.cs]) * double(B[vb.off + k * vb.rs + n * vb.cs]);
      T& c = C[vc.off + m * vc.rs + n * vc.cs];
      c = static_cast<T>(beta == 0 ? alpha * acc : alpha * acc + beta * double(c));
    }
}

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, View va, const T* B, View vb, T beta, T* C, View vc) {
  if constexpr (std::is_same_v<T, float>)
    gemm_f32(M, N, K, alpha, A + va.off, va.rs, va.cs, B + vb.off, vb.rs, vb.cs, beta, C + vc.off, vc.rs, vc.cs);
  else
    gemm_f64(M, N, K, alpha, A + va.off, va.rs, va.cs, B + vb.off, vb.rs, vb.cs, beta, C + vc.off, vc.rs, vc.cs);
}

/// Runs one case against the reference; checks every element, and that the elements outside
/// the C view are untouched.
template <class T>
void check_case(int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool tc, T alpha, T beta, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K << " ta=" << ta << " tb=" << tb << " tc=" << tc
                                  << " alpha=" << alpha << " beta=" << beta);
  View va = make_view(M, K, ta, 2), vb = make_view(K, N, tb, 1), vc = make_view(M, N, tc, 3);
  auto A = random_vec<T>(va.size, seed), B = random_vec<T>(vb.size, seed + 1), C = random_vec<T>(vc.size, seed + 2);
  if (beta == T(0)) {
    // beta = 0 must not read C: poison the view's elements.
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) C[static_cast<size_t>(vc.off + m * vc.rs + n * vc.cs)] = NAN;
  }
  auto R = C;
  reference<T>(M, N, K, alpha, A.data(), va, B.data(), vb, beta, R.data(), vc);
  gemm<T>(M, N, K, alpha, A.data(), va, B.data(), vb, beta, C.data(), vc);
  const double eps = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (size_t i = 0; i < C.size(); ++i) {
    const double tol = eps * (1 + std::sqrt(double(K))) * (1 + std::abs(double(R[i])));
    ASSERT_NEAR(double(C[i]), double(R[i]), tol) << "at flat index " << i;
  }
}

const std::vector<std::array<int64_t, 3>> kShapes = {
    {1, 1, 1},    {1, 7, 5},     {7, 1, 5},     {7, 13, 5},    {2, 2, 300},   {12, 32, 8},    {13, 33, 9},
    {24, 64, 1},  {67, 129, 33}, {5, 200, 17},  {100, 3, 70},  {97, 97, 257}, {130, 70, 513}, {3, 1000, 4},
    {1000, 2, 3}, {1, 300, 260}, {300, 1, 260}, {49, 50, 600}, {200, 300, 40}};

TEST(Gemm, MatchesReferenceF32) {
  uint32_t seed = 1;
  for (auto [M, N, K] : kShapes)
    for (int t = 0; t < 8; ++t) check_case<float>(M, N, K, t & 1, t & 2, t & 4, 1.f, 0.f, seed++);
}

TEST(Gemm, MatchesReferenceF64) {
  uint32_t seed = 100;
  for (auto [M, N, K] : kShapes)
    for (int t = 0; t < 8; ++t) check_case<double>(M, N, K, t & 1, t & 2, t & 4, 1.0, 0.0, seed++);
}

TEST(Gemm, EveryKernelLevel) {
  // AVX2, SSE4 (x86) and the scalar fallback on a few shapes, then back to the best.
  struct Reset {
    ~Reset() { cpu::gemm_detail::set_kernel_limit_for_test(0); }
  } reset;
  for (int level : {1, 2, 3}) {
    SCOPED_TRACE(level);
    cpu::gemm_detail::set_kernel_limit_for_test(level);
    uint32_t seed = 300;
    for (auto [M, N, K] : {std::array<int64_t, 3>{7, 13, 5}, {67, 129, 33}, {1, 40, 30}, {40, 1, 30}, {130, 70, 513}})
      for (int t = 0; t < 8; t += 3) {
        check_case<float>(M, N, K, t & 1, t & 2, t & 4, 1.f, 0.5f, seed++);
        check_case<double>(M, N, K, t & 1, t & 2, t & 4, 1.0, 0.0, seed++);
      }
  }
}

// Small products take the unpacked kernel (gemm_small_f32): every row tail (1-4 rows of a
// block), full and partial last vectors, column blocks past one, transposed and padded operands,
// a column-major C, beta 0 / 1 / 0.5, at every kernel level (AVX-512, AVX2 and SSE4 blocks).
TEST(Gemm, SmallProductsMatchReference) {
  struct Reset {
    ~Reset() { cpu::gemm_detail::set_kernel_limit_for_test(0); }
  } reset;
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 2, 1},   {1, 16, 32}, {2, 17, 3},   {3, 8, 16},  {4, 16, 8},  {5, 31, 7},   {6, 33, 5},  {7, 48, 2},
      {8, 64, 11}, {9, 65, 4},  {16, 96, 32}, {16, 16, 8}, {16, 8, 16}, {13, 127, 9}, {2, 200, 3}, {64, 64, 64}};
  for (int level : {0, 1, 2}) {
    SCOPED_TRACE(level);
    cpu::gemm_detail::set_kernel_limit_for_test(level);
    uint32_t seed = 900;
    for (auto [M, N, K] : shapes) {
      ASSERT_TRUE(cpu::gemm_small_fits(M, N, K, sizeof(float)));
      for (int t = 0; t < 8; ++t)
        for (float beta : {0.f, 1.f, 0.5f}) check_case<float>(M, N, K, t & 1, t & 2, t & 4, 1.f, beta, seed++);
      check_case<float>(M, N, K, false, false, false, -0.75f, 0.f, seed++);
    }
  }
  // Larger products are not small, and gemm_small_f32 leaves them alone.
  EXPECT_FALSE(cpu::gemm_small_fits(65, 64, 64, sizeof(float)));
  EXPECT_FALSE(cpu::gemm_small_fits(4, 256, 64, sizeof(float)));  // B past 32 KiB
  {  // a transposed B is copied first, so only up to 8 KiB of it
    std::vector<float> x(4 * 64, 1.f), bt(96 * 64, 1.f), y(4 * 96, 7.f);
    EXPECT_FALSE(cpu::gemm_small_f32(4, 96, 64, 1.f, x.data(), 64, 1, bt.data(), 1, 64, 0.f, y.data(), 96, 1));
    EXPECT_EQ(y[0], 7.f);
    EXPECT_TRUE(cpu::gemm_small_f32(4, 32, 64, 1.f, x.data(), 64, 1, bt.data(), 1, 64, 0.f, y.data(), 32, 1));
    EXPECT_EQ(y[0], 64.f);
  }
  std::vector<float> a(65 * 64, 1.f), b(64 * 64, 1.f), c(65 * 64, 7.f);
  EXPECT_FALSE(cpu::gemm_small_f32(65, 64, 64, 1.f, a.data(), 64, 1, b.data(), 64, 1, 0.f, c.data(), 64, 1));
  EXPECT_EQ(c[0], 7.f);
  // Each element is summed over k in order, so a row does not depend on the rows beside it.
  auto x = random_vec<float>(9 * 40, 5), w = random_vec<float>(40 * 48, 6);
  std::vector<float> all(9 * 48), one(48);
  ASSERT_TRUE(cpu::gemm_small_f32(9, 48, 40, 1.f, x.data(), 40, 1, w.data(), 48, 1, 0.f, all.data(), 48, 1));
  for (int64_t r = 0; r < 9; ++r) {
    ASSERT_TRUE(cpu::gemm_small_f32(1, 48, 40, 1.f, x.data() + r * 40, 40, 1, w.data(), 48, 1, 0.f, one.data(), 48, 1));
    EXPECT_EQ(0, std::memcmp(one.data(), all.data() + r * 48, sizeof(float) * 48)) << "row " << r;
  }
}

TEST(Gemm, AlphaBeta) {
  uint32_t seed = 500;
  for (auto [M, N, K] : {std::array<int64_t, 3>{7, 13, 5}, {67, 129, 300}, {1, 50, 40}, {50, 1, 40}}) {
    check_case<float>(M, N, K, false, false, false, 0.5f, 2.f, seed++);
    check_case<float>(M, N, K, true, false, true, -1.5f, 1.f, seed++);
    check_case<double>(M, N, K, false, true, false, 2.0, -0.25, seed++);
    check_case<float>(M, N, K, false, false, false, 0.f, 0.5f, seed++);  // alpha = 0: beta * C only
  }
}

TEST(Gemm, EmptyDims) {
  // K = 0: C = beta * C (beta = 0 writes zeros even over NaN); M = 0 or N = 0: nothing.
  std::vector<float> C = {1, 2, 3, NAN};
  gemm_f32(2, 2, 0, 1.f, nullptr, 0, 1, nullptr, 2, 1, 2.f, C.data(), 2, 1);
  EXPECT_EQ(C[0], 2.f);
  EXPECT_EQ(C[2], 6.f);
  gemm_f32(2, 2, 0, 1.f, nullptr, 0, 1, nullptr, 2, 1, 0.f, C.data(), 2, 1);
  for (float v : C) EXPECT_EQ(v, 0.f);
  C = {1, 2, 3, 4};
  gemm_f32(0, 2, 3, 1.f, nullptr, 3, 1, nullptr, 2, 1, 0.f, C.data(), 2, 1);
  gemm_f32(2, 0, 3, 1.f, nullptr, 3, 1, nullptr, 2, 1, 0.f, C.data(), 2, 1);
  EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 4}));
  std::vector<double> D = {5, 6};
  gemm_f64(1, 2, 0, 1.0, nullptr, 1, 1, nullptr, 2, 1, 0.5, D.data(), 2, 1);
  EXPECT_EQ(D, (std::vector<double>{2.5, 3}));
}

TEST(Gemm, NegativeAndBroadcastStrides) {
  // A read backwards (negative row stride), B with a zero column stride (every column equal).
  const int64_t M = 9, N = 20, K = 31;
  auto A = random_vec<float>(M * K, 7), B = random_vec<float>(K, 8);
  std::vector<float> C(M * N), R(M * N);
  gemm_f32(M, N, K, 1.f, A.data() + (M - 1) * K, -K, 1, B.data(), 1, 0, 0.f, C.data(), N, 1);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(A[(M - 1 - m) * K + k]) * B[k];
      EXPECT_NEAR(C[m * N + n], acc, 1e-5);
    }
}

TEST(Gemm, ThreadCountDoesNotChangeBits) {
  for (auto [M, N, K] :
       {std::array<int64_t, 3>{256, 256, 256}, {300, 129, 700}, {40, 1000, 300}, {2000, 1, 500}, {1, 3000, 200}}) {
    auto A = random_vec<float>(M * K, 1), B = random_vec<float>(K * N, 2);
    auto run = [&](int threads) {
      return test::with_threads(threads, [&] {
        std::vector<float> C(static_cast<size_t>(M * N));
        gemm_f32(M, N, K, 1.f, A.data(), K, 1, B.data(), N, 1, 0.f, C.data(), N, 1);
        return C;
      });
    };
    auto c1 = run(1), c2 = run(2), c3 = run(3);
    EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * 4)) << M << "x" << N << "x" << K;
    EXPECT_EQ(0, std::memcmp(c1.data(), c3.data(), c1.size() * 4)) << M << "x" << N << "x" << K;
  }
}

// ---- the MatMul kernel ---------------------------------------------------------------------

/// Switches the oneDNN path for the scope.
struct OneDnn {
  bool saved = cpu::onednn::enabled();
  explicit OneDnn(bool on) { cpu::onednn::set_enabled(on); }
  ~OneDnn() { cpu::onednn::set_enabled(saved); }
};

Tensor rand_t(Shape s, DType dt = DType::F32, uint64_t seed = 0) {
  manual_seed(seed);
  return rand(s).mul(2).sub(1).to(dt);
}

/// matmul of the same operands through oneDNN and the portable path; returns max |diff|.
double path_diff(const Tensor& a, const Tensor& b) {
  Tensor x, y;
  {
    OneDnn on(true);
    x = matmul(a, b);
  }
  {
    OneDnn off(false);
    y = matmul(a, b);
  }
  EXPECT_EQ(x.shape(), y.shape());
  return (x.to(DType::F64) - y.to(DType::F64)).abs().max().item<double>();
}

TEST(MatMulKernel, OneDnnAndPortableAgree) {
  Tensor a = rand_t({3, 67, 129}, DType::F32, 1), b = rand_t({3, 129, 33}, DType::F32, 2);
  EXPECT_LT(path_diff(a, b), 1e-4);
  // Transposed, sliced and broadcast operands.
  EXPECT_LT(path_diff(a.transpose(1, 2).contiguous().transpose(1, 2), b), 1e-4);
  EXPECT_LT(path_diff(a, rand_t({3, 33, 129}, DType::F32, 3).transpose(1, 2)), 1e-4);
  EXPECT_LT(path_diff(rand_t({200, 300}, DType::F32, 4).slice(1, 0, 300, 2), rand_t({150, 70}, DType::F32, 5)), 1e-4);
  EXPECT_LT(path_diff(a, rand_t({129, 33}, DType::F32, 6)), 1e-4);  // b broadcast over batch
  EXPECT_LT(path_diff(rand_t({5, 64}, DType::F32, 7), rand_t({4, 64, 8}, DType::F32, 8)), 1e-4);  // a broadcast
  EXPECT_LT(path_diff(rand_t({512, 256}, DType::F32, 9), rand_t({256, 384}, DType::F32, 10)), 1e-3);
  EXPECT_LT(path_diff(rand_t({1000, 64}, DType::F32, 11), rand_t({64}, DType::F32, 12)), 1e-4);  // mat-vec
}

TEST(MatMulKernel, MatchesF64Reference) {
  for (bool on : {true, false}) {
    OneDnn path(on);
    Tensor a = rand_t({4, 37, 50}, DType::F64, 3), b = rand_t({4, 50, 21}, DType::F64, 4);
    Tensor r64 = matmul(a, b);
    Tensor r32 = matmul(a.to(DType::F32), b.to(DType::F32));
    EXPECT_LT((r32.to(DType::F64) - r64).abs().max().item<double>(), 1e-4) << "onednn=" << on;
    // f64 against an elementwise reference.
    Tensor ref = (a.unsqueeze(3) * b.unsqueeze(1)).sum({2});
    EXPECT_LT((r64 - ref).abs().max().item<double>(), 1e-12);
  }
}

TEST(MatMulKernel, HalfTypesComputeInF32) {
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor a = rand_t({2, 20, 40}, dt, 5), b = rand_t({2, 40, 12}, dt, 6);
    Tensor r = matmul(a, b);
    EXPECT_EQ(r.dtype(), dt);
    Tensor ref = matmul(a.to(DType::F32), b.to(DType::F32)).to(dt);  // one rounding at the end
    EXPECT_EQ((r.to(DType::F32) - ref.to(DType::F32)).abs().max().item<float>(), 0.f) << dtype_name(dt);
    // Transposed half operand.
    Tensor rt = matmul(a, b.transpose(1, 2).contiguous().transpose(1, 2));
    EXPECT_EQ((rt.to(DType::F32) - r.to(DType::F32)).abs().max().item<float>(), 0.f);
  }
}

TEST(MatMulKernel, IntegersAreExactAndWrap) {
  Tensor a = tensor(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor(std::vector<int32_t>{7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor r = matmul(a, b);
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{58, 64, 139, 154}));
  // int8 wraps: 100 * 2 + 100 * 1 = 300 -> 44.
  Tensor c = tensor(std::vector<int8_t>{100, 100}, {1, 2});
  Tensor d = tensor(std::vector<int8_t>{2, 1}, {2, 1});
  EXPECT_EQ(matmul(c, d).to_vector<int8_t>(), (std::vector<int8_t>{44}));
  // int64 on a transposed operand against float64.
  Tensor e = rand_t({3, 17, 9}, DType::F64, 9).mul(100).to(DType::I64);
  Tensor f = rand_t({3, 11, 9}, DType::F64, 10).mul(100).to(DType::I64).transpose(1, 2);
  Tensor g = matmul(e, f);
  Tensor h = matmul(e.to(DType::F64), f.to(DType::F64)).to(DType::I64);
  EXPECT_EQ(g.to_vector<int64_t>(), h.to_vector<int64_t>());
  for (DType dt : {DType::U8, DType::I16})
    EXPECT_EQ(matmul(tensor(std::vector<int32_t>{1, 2, 3}, {1, 3}).to(dt),
                     tensor(std::vector<int32_t>{4, 5, 6}, {3, 1}).to(dt))
                  .to(DType::I64)
                  .item<int64_t>(),
              32);
}

TEST(MatMulKernel, ManySmallBatchesAndThreads) {
  for (bool on : {true, false}) {
    OneDnn path(on);
    Tensor a = rand_t({64, 16, 16}, DType::F32, 11), b = rand_t({64, 16, 16}, DType::F32, 12);
    Tensor r1 = test::with_threads(1, [&] { return matmul(a, b); });
    Tensor r2 = test::with_threads(2, [&] { return matmul(a, b); });
    EXPECT_TRUE(equal(r1, r2)) << "onednn=" << on;
    Tensor ref = (a.to(DType::F64).unsqueeze(3) * b.to(DType::F64).unsqueeze(1)).sum({2});
    EXPECT_LT((r1.to(DType::F64) - ref).abs().max().item<double>(), 1e-5);
    // Large enough to split one product across threads.
    Tensor x = rand_t({300, 500}, DType::F32, 13), y = rand_t({500, 260}, DType::F32, 14);
    Tensor s1 = test::with_threads(1, [&] { return matmul(x, y); });
    Tensor s2 = test::with_threads(2, [&] { return matmul(x, y); });
    EXPECT_TRUE(equal(s1, s2)) << "onednn=" << on;
  }
}

// Note [Transposed weights]: a small product by a transposed weight (linear's W^T) uses a kept
// transposed copy, keyed on the weight's content stamp: writes to the weight between calls are
// seen, whichever way they are made.
TEST(MatMulKernel, TransposedWeightsFollowWrites) {
  const Device plain = Device::cpu().without_fusion();
  for (const Device& d : {plain, plain.fusion()}) {
    SCOPED_TRACE(d.str());
    Tensor x = rand_t({3, 16, 32}, DType::F32, 21).to(d), w = rand_t({48, 32}, DType::F32, 22).to(d);
    Tensor bias = rand_t({48}, DType::F32, 23).to(d);
    auto check = [&](const char* what) {
      SCOPED_TRACE(what);
      // The contiguous W^T is a second path: no transposed operand, no kept copy.
      Tensor wt = w.t().contiguous();
      EXPECT_LT((matmul(x, w.t()) - matmul(x, wt)).abs().max().item<float>(), 1e-5f);
      Tensor y = linear(x, w, bias);
      Tensor ref = (x.to(DType::F64).unsqueeze(3) * w.t().to(DType::F64).unsqueeze(0).unsqueeze(0)).sum({2}) +
                   bias.to(DType::F64);
      EXPECT_LT((y.to(DType::F64) - ref).abs().max().item<double>(), 1e-5);
    };
    check("first");
    check("again");
    w.add_(1.0);
    check("after add_");
    w.index({Slice{0, 5}}).fill_(0.25);
    check("after a write through a view");
    w.copy_(rand_t({48, 32}, DType::F32, 24).to(d));
    check("after copy_");
    {
      NoGradGuard g;
      w.mul_(-2.0);
    }
    check("after mul_");
    // More weights than the cache holds (64), each freed in turn so its address is reused with
    // other contents, then the first again.
    for (int i = 0; i < 70; ++i) {
      Tensor other = rand_t({48, 32}, DType::F32, 30 + i).to(d);
      EXPECT_LT((matmul(x, other.t()) - matmul(x, other.t().contiguous())).abs().max().item<float>(), 1e-5f);
    }
    check("after other weights");
  }
}

TEST(MatMulKernel, EmptyAndZeroK) {
  for (bool on : {true, false}) {
    OneDnn path(on);
    Tensor z = matmul(rand_t({3, 0}), rand_t({0, 4}));
    EXPECT_EQ(z.shape(), (Shape{3, 4}));
    EXPECT_EQ(z.abs().sum().item<float>(), 0.f);
    EXPECT_EQ(matmul(rand_t({0, 5}), rand_t({5, 4})).shape(), (Shape{0, 4}));
    EXPECT_EQ(matmul(rand_t({2, 0, 5}), rand_t({2, 5, 4})).shape(), (Shape{2, 0, 4}));
  }
}

}  // namespace
}  // namespace kiln
