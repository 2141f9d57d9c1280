// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::linalg: identities for the factors that are unique only up to signs (Q R = A, U S Vh =
// A, A V = V diag(w), orthogonality), error paths, empty and 1x1 matrices, NaN inputs, and
// thread-count independence. Values that are unique are compared with PyTorch by the
// conformance suite (scripts/golden_cases/linalg.py).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

/// Random normal [shape] of dtype dt (plus shift on the diagonal of the last two dims).
Tensor randm(const Shape& shape, DType dt = f64, double shift = 0, uint32_t seed = 1) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = d(g);
  Tensor t = tensor(v, shape);
  if (shift != 0) t = t + eye(shape[shape.size() - 2], shape[shape.size() - 1], {.dtype = f64}) * shift;
  return t.to(dt);
}

double maxdiff(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 && b.numel() == 0) return 0;
  return (a.to(f64) - b.to(f64)).abs().max().item<double>();
}

Tensor eye_batch(int64_t n, const Shape& batch, DType dt = f64) {
  Shape s = batch;
  s.push_back(n);
  s.push_back(n);
  return eye(n, {}, {.dtype = dt}).expand(s);
}

}  // namespace

TEST(Linalg, LuFactorReconstructs) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 5}, {6, 3}, {3, 6}}) {
    Tensor A = randm({2, m, n}, f64, 0, 7);
    auto [LU, piv] = linalg::lu_factor(A);
    EXPECT_EQ(piv.dtype(), i32);
    int64_t k = std::min(m, n);
    Tensor L = (LU.narrow(-1, 0, k).tril(-1) + eye(m, k, {.dtype = f64}));
    Tensor U = LU.narrow(-2, 0, k).triu();
    Tensor LUp = matmul(L, U);
    // Undo the row swaps (1-based, sequential) on the host.
    std::vector<int32_t> p = piv.to_vector<int32_t>();
    for (int64_t b = 0; b < 2; ++b) {
      Tensor Ab = A.select(0, b).clone();
      for (int64_t i = 0; i < k; ++i) {
        int64_t j = p[static_cast<size_t>(b * k + i)] - 1;
        if (j != i) {
          Tensor ri = Ab.select(0, i).clone(), rj = Ab.select(0, j).clone();
          Ab.select(0, i).copy_(rj);
          Ab.select(0, j).copy_(ri);
        }
      }
      EXPECT_LT(maxdiff(LUp.select(0, b), Ab), 1e-12) << m << "x" << n;
    }
  }
}

TEST(Linalg, InvSolveDet) {
  for (DType dt : {f32, f64}) {
    double tol = dt == f32 ? 1e-5 : 1e-12;
    Tensor A = randm({3, 6, 6}, dt, 6, 2);
    Tensor Ai = linalg::inv(A);
    EXPECT_LT(maxdiff(matmul(A, Ai), eye_batch(6, {3})), tol);
    // Non-contiguous input: the transposed view.
    Tensor At = A.mT();
    EXPECT_LT(maxdiff(linalg::inv(At), Ai.mT()), tol);
    Tensor B = randm({3, 6, 2}, dt, 0, 3);
    Tensor X = linalg::solve(A, B);
    EXPECT_LT(maxdiff(matmul(A, X), B), 10 * tol);
    Tensor Xr = linalg::solve(A, B.mT(), /*left=*/false);
    EXPECT_LT(maxdiff(matmul(Xr, A), B.mT()), 10 * tol);
    Tensor bv = randm({6}, dt, 0, 4);
    Tensor xv = linalg::solve(A, bv);
    EXPECT_EQ(xv.shape(), (Shape{3, 6}));
    EXPECT_LT(maxdiff(matmul(A, xv.unsqueeze(-1)).squeeze({-1}), bv.expand({3, 6})), 10 * tol);
    // det = product of eigen... check det(A B) = det(A) det(B) and det(A^-1) = 1/det(A).
    Tensor d = linalg::det(A);
    EXPECT_LT(maxdiff(linalg::det(Ai) * d, ones({3}, {.dtype = dt})), 10 * tol);
    auto [s, l] = linalg::slogdet(A);
    EXPECT_LT(maxdiff(s * l.exp(), d), 1e-4 * d.abs().max().item<double>());
  }
}

TEST(Linalg, KnownValues) {
  Tensor A = tensor<double>({4, 3, 6, 3}, {2, 2});
  EXPECT_DOUBLE_EQ(linalg::det(A).item<double>(), -6.0);
  auto [s, l] = linalg::slogdet(A);
  EXPECT_EQ(s.item<double>(), -1.0);
  EXPECT_NEAR(l.item<double>(), std::log(6.0), 1e-15);
  Tensor Ai = linalg::inv(A);
  std::vector<double> e = {-0.5, 0.5, 1.0, -2.0 / 3.0};
  std::vector<double> got = Ai.to_vector<double>();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], e[i], 1e-15);
  Tensor S = tensor<double>({1, 2, 2, 4}, {2, 2});
  EXPECT_EQ(linalg::det(S).item<double>(), 0.0);
  auto [s0, l0] = linalg::slogdet(S);
  EXPECT_EQ(s0.item<double>(), 0.0);
  EXPECT_TRUE(std::isinf(l0.item<double>()) && l0.item<double>() < 0);
  // A permutation matrix: det -1.
  Tensor P = tensor<float>({0, 1, 0, 1, 0, 0, 0, 0, 1}, {3, 3});
  EXPECT_EQ(linalg::det(P).item<float>(), -1.0f);
  EXPECT_EQ(trace(tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3})).item<int64_t>(), 6);
  EXPECT_EQ(trace(tensor<int32_t>({1, 2, 3, 4}, {2, 2})).dtype(), i64);
}

TEST(Linalg, SolveTriangularAllFlags) {
  Tensor A = randm({2, 5, 5}, f64, 5, 9);
  Tensor B = randm({2, 5, 3}, f64, 0, 10);
  for (bool upper : {false, true})
    for (bool left : {true, false})
      for (bool unit : {false, true}) {
        Tensor T = upper ? A.triu() : A.tril();
        if (unit) T = T - diag_embed(T.diagonal(0, -2, -1)) + eye(5, {}, {.dtype = f64});
        Tensor b = left ? B : B.mT();
        Tensor X = linalg::solve_triangular(A, b, upper, left, unit);
        Tensor R = left ? matmul(T, X) : matmul(X, T);
        EXPECT_LT(maxdiff(R, b), 1e-12) << upper << left << unit;
      }
  // Batch broadcast: a [5, 5] with b [2, 5, 3].
  Tensor X = linalg::solve_triangular(A.select(0, 0), B, true);
  EXPECT_EQ(X.shape(), (Shape{2, 5, 3}));
}

TEST(Linalg, CholeskyIdentity) {
  Tensor Bm = randm({3, 5, 5}, f64, 0, 11);
  Tensor A = matmul(Bm, Bm.mT()) + eye(5, {}, {.dtype = f64}) * 5.0;
  Tensor L = linalg::cholesky(A);
  EXPECT_LT(maxdiff(matmul(L, L.mT()), A), 1e-12);
  EXPECT_LT(maxdiff(L, L.tril()), 0.0 + 1e-300);
  Tensor U = linalg::cholesky(A, /*upper=*/true);
  EXPECT_LT(maxdiff(matmul(U.mT(), U), A), 1e-12);
  EXPECT_LT(maxdiff(U, L.mT()), 1e-12);
  // Only the lower triangle is read.
  Tensor Ag = A.tril() + A.triu(1) * 100.0;
  EXPECT_LT(maxdiff(linalg::cholesky(Ag), L), 1e-12);
}

TEST(Linalg, QrIdentities) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{6, 4}, {4, 6}, {5, 5}, {1, 1}}) {
    for (DType dt : {f32, f64}) {
      double tol = dt == f32 ? 2e-5 : 1e-12;
      Tensor A = randm({2, m, n}, dt, 0, 12).mT().mT();  // same values, via a view
      Tensor At = randm({2, n, m}, dt, 0, 12).mT();      // non-contiguous input
      for (const Tensor& X : {A, At}) {
        int64_t mm = X.size(-2), nn = X.size(-1), k = std::min(mm, nn);
        auto [Q, R] = linalg::qr(X);
        EXPECT_EQ(Q.shape(), (Shape{2, mm, k}));
        EXPECT_EQ(R.shape(), (Shape{2, k, nn}));
        EXPECT_LT(maxdiff(matmul(Q, R), X), tol);
        EXPECT_LT(maxdiff(matmul(Q.mT(), Q), eye_batch(k, {2})), tol);
        EXPECT_EQ(maxdiff(R, R.triu()), 0.0);
        auto [Qc, Rc] = linalg::qr(X, "complete");
        EXPECT_EQ(Qc.shape(), (Shape{2, mm, mm}));
        EXPECT_LT(maxdiff(matmul(Qc, Rc), X), tol);
        EXPECT_LT(maxdiff(matmul(Qc.mT(), Qc), eye_batch(mm, {2})), tol);
        auto [Qr, Rr] = linalg::qr(X, "r");
        EXPECT_EQ(Qr.numel(), 0);
        EXPECT_LT(maxdiff(Rr, R), 0.0 + 1e-300);
      }
    }
  }
}

TEST(Linalg, SvdIdentities) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 4}, {4, 7}, {5, 5}, {1, 3}}) {
    for (DType dt : {f32, f64}) {
      double tol = dt == f32 ? 3e-5 : 1e-12;
      Tensor A = randm({2, m, n}, dt, 0, 13);
      int64_t k = std::min(m, n);
      for (bool full : {true, false}) {
        auto [U, S, Vh] = linalg::svd(A, full);
        int64_t uc = full ? m : k, vr = full ? n : k;
        EXPECT_EQ(U.shape(), (Shape{2, m, uc}));
        EXPECT_EQ(S.shape(), (Shape{2, k}));
        EXPECT_EQ(Vh.shape(), (Shape{2, vr, n}));
        Tensor Us = U.narrow(-1, 0, k), Vs = Vh.narrow(-2, 0, k);
        EXPECT_LT(maxdiff(matmul(Us * S.unsqueeze(-2), Vs), A), tol) << m << "x" << n << " full " << full;
        EXPECT_LT(maxdiff(matmul(U.mT(), U), eye_batch(uc, {2})), tol);
        EXPECT_LT(maxdiff(matmul(Vh, Vh.mT()), eye_batch(vr, {2})), tol);
        // Descending, non-negative.
        std::vector<double> s = S.to(f64).to_vector<double>();
        for (size_t i = 0; i + 1 < s.size(); ++i)
          if ((i + 1) % static_cast<size_t>(k) != 0) EXPECT_GE(s[i], s[i + 1]);
        for (double v : s) EXPECT_GE(v, 0);
      }
      EXPECT_LT(maxdiff(linalg::svdvals(A), linalg::svd(A).S), 0.0 + 1e-300);
    }
  }
}

TEST(Linalg, SvdRankDeficientCompletesBases) {
  // Rank 1 with exact zero columns: U and V must still be orthogonal.
  Tensor A = zeros({5, 4}, {.dtype = f64});
  A.select(1, 1).copy_(tensor<double>({1, 2, 3, 4, 5}));
  auto [U, S, Vh] = linalg::svd(A);
  EXPECT_LT(maxdiff(matmul(U.mT(), U), eye(5, {}, {.dtype = f64})), 1e-12);
  EXPECT_LT(maxdiff(matmul(Vh, Vh.mT()), eye(4, {}, {.dtype = f64})), 1e-12);
  EXPECT_NEAR(S.to_vector<double>()[0], std::sqrt(55.0), 1e-12);
  EXPECT_EQ(S.to_vector<double>()[3], 0.0);
  EXPECT_LT(maxdiff(matmul(U.narrow(-1, 0, 4) * S.unsqueeze(0), Vh), A), 1e-12);
  auto [Uz, Sz, Vz] = linalg::svd(zeros({3, 2}, {.dtype = f32}));
  EXPECT_LT(maxdiff(matmul(Uz.mT(), Uz), eye(3)), 1e-6);
  EXPECT_EQ(Sz.abs().max().item<float>(), 0.0f);
}

TEST(Linalg, EighIdentities) {
  for (DType dt : {f32, f64}) {
    double tol = dt == f32 ? 3e-5 : 1e-11;
    for (int64_t n : {1, 2, 6, 17}) {
      Tensor B = randm({3, n, n}, dt, 0, 14);
      Tensor A = (B + B.mT()) * 0.5;
      auto [w, V] = linalg::eigh(A);
      EXPECT_LT(maxdiff(matmul(A, V), V * w.unsqueeze(-2)), tol * n) << n;
      EXPECT_LT(maxdiff(matmul(V.mT(), V), eye_batch(n, {3})), tol * n);
      std::vector<double> wv = w.to(f64).to_vector<double>();
      for (size_t i = 0; i + 1 < wv.size(); ++i)
        if ((i + 1) % static_cast<size_t>(n) != 0) EXPECT_LE(wv[i], wv[i + 1]);
      EXPECT_LT(maxdiff(linalg::eigvalsh(A), w), tol * n);
      // UPLO: a non-symmetric input read through one triangle.
      auto [wu, Vu] = linalg::eigh(B, "U");
      Tensor Au = B.triu() + B.triu(1).mT();
      EXPECT_LT(maxdiff(matmul(Au, Vu), Vu * wu.unsqueeze(-2)), tol * n);
      EXPECT_LT(maxdiff(linalg::eigvalsh(B, "L"), linalg::eigvalsh(B.tril() + B.tril(-1).mT())), tol * n);
    }
  }
  // Repeated eigenvalues (identity, diagonal): still orthonormal vectors.
  auto [w, V] = linalg::eigh(eye(4, {}, {.dtype = f64}) * 2.0);
  EXPECT_LT(maxdiff(w, full({4}, 2.0, {.dtype = f64})), 1e-15);
  EXPECT_LT(maxdiff(matmul(V.mT(), V), eye(4, {}, {.dtype = f64})), 1e-15);
}

TEST(Linalg, NonFiniteInputsGiveNaN) {
  Tensor A = randm({3, 3}, f64, 3, 15);
  A.index_put_({1, 0}, std::numeric_limits<double>::quiet_NaN());  // the lower triangle is read
  EXPECT_TRUE(linalg::eigvalsh(A).isnan().all().item<bool>());
  EXPECT_TRUE(linalg::svdvals(A).isnan().all().item<bool>());
  A.index_put_({0, 1}, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(linalg::svd(A).U.isnan().all().item<bool>());
}

TEST(Linalg, EmptyAndOneByOne) {
  EXPECT_EQ(linalg::inv(zeros({0, 0})).shape(), (Shape{0, 0}));
  EXPECT_EQ(linalg::det(zeros({2, 0, 0})).to_vector<float>(), (std::vector<float>{1, 1}));
  auto [U, S, Vh] = linalg::svd(zeros({0, 3}));
  EXPECT_EQ(U.shape(), (Shape{0, 0}));
  EXPECT_EQ(S.shape(), (Shape{0}));
  EXPECT_LT(maxdiff(Vh, eye(3)), 1e-7);
  auto [w, V] = linalg::eigh(zeros({2, 0, 0}));
  EXPECT_EQ(w.shape(), (Shape{2, 0}));
  EXPECT_EQ(V.shape(), (Shape{2, 0, 0}));
  EXPECT_EQ(linalg::cholesky(zeros({0, 0})).shape(), (Shape{0, 0}));
  EXPECT_EQ(linalg::qr(zeros({0, 3}), "complete").R.shape(), (Shape{0, 3}));
  EXPECT_EQ(linalg::solve(zeros({0, 0}), zeros({0})).shape(), (Shape{0}));
  EXPECT_EQ(linalg::pinv(zeros({2, 0})).shape(), (Shape{0, 2}));
  EXPECT_EQ(linalg::matrix_norm(zeros({0, 0}), 2).item<float>(), 0.0f);
  Tensor one = full({1, 1}, -4.0, {.dtype = f64});
  EXPECT_EQ(linalg::inv(one).item<double>(), -0.25);
  EXPECT_EQ(linalg::eigvalsh(one).item<double>(), -4.0);
  EXPECT_EQ(linalg::svdvals(one).item<double>(), 4.0);
  EXPECT_EQ(linalg::cholesky(one.abs()).item<double>(), 2.0);
}

TEST(Linalg, PinvLstsqPowerRank) {
  Tensor A = matmul(randm({6, 2}, f64, 0, 16), randm({2, 4}, f64, 0, 17));  // rank 2
  Tensor P = linalg::pinv(A);
  EXPECT_EQ(P.shape(), (Shape{4, 6}));
  EXPECT_LT(maxdiff(matmul(matmul(A, P), A), A), 1e-10);
  EXPECT_LT(maxdiff(matmul(matmul(P, A), P), P), 1e-10);
  EXPECT_EQ(linalg::matrix_rank(A).item<int64_t>(), 2);
  Tensor Sym = matmul(A, A.mT());
  EXPECT_LT(maxdiff(linalg::pinv(Sym, {.hermitian = true}), linalg::pinv(Sym)), 1e-8);
  // Wide full-rank lstsq = minimum-norm solution = pinv(A) B.
  Tensor W = randm({3, 5}, f64, 0, 18), b = randm({3, 2}, f64, 0, 19);
  EXPECT_LT(maxdiff(linalg::lstsq(W, b), matmul(linalg::pinv(W), b)), 1e-12);
  Tensor Tl = randm({7, 3}, f64, 0, 20), bt = randm({7}, f64, 0, 21);
  EXPECT_LT(maxdiff(linalg::lstsq(Tl, bt), matmul(linalg::pinv(Tl), bt)), 1e-12);
  Tensor M = randm({2, 3, 3}, f64, 3, 22);
  EXPECT_LT(maxdiff(linalg::matrix_power(M, 3), matmul(M, matmul(M, M))), 1e-12);
  EXPECT_LT(maxdiff(linalg::matrix_power(M, -2), linalg::inv(matmul(M, M))), 1e-12);
  EXPECT_LT(maxdiff(linalg::matrix_power(M, 0), eye_batch(3, {2})), 0.0 + 1e-300);
  Tensor Mi = tensor<int64_t>({1, 1, 1, 0}, {2, 2});
  EXPECT_EQ(linalg::matrix_power(Mi, 10).to_vector<int64_t>(), (std::vector<int64_t>{89, 55, 55, 34}));
}

TEST(Linalg, Norms) {
  Tensor A = tensor<double>({1, -2, 3, -4}, {2, 2});
  EXPECT_DOUBLE_EQ(linalg::matrix_norm(A, 1).item<double>(), 6.0);
  EXPECT_DOUBLE_EQ(linalg::matrix_norm(A, -1).item<double>(), 4.0);
  EXPECT_DOUBLE_EQ(linalg::matrix_norm(A, INFINITY).item<double>(), 7.0);
  EXPECT_DOUBLE_EQ(linalg::matrix_norm(A, -INFINITY).item<double>(), 3.0);
  EXPECT_NEAR(linalg::matrix_norm(A).item<double>(), std::sqrt(30.0), 1e-14);
  Tensor s = linalg::svdvals(A);
  EXPECT_NEAR(linalg::matrix_norm(A, "nuc").item<double>(), s.sum().item<double>(), 1e-14);
  EXPECT_NEAR(linalg::matrix_norm(A, 2).item<double>(), s.max().item<double>(), 1e-14);
  EXPECT_NEAR(linalg::matrix_norm(A, -2).item<double>(), s.min().item<double>(), 1e-14);
  EXPECT_EQ(linalg::matrix_norm(A.reshape({1, 2, 2}), 2, {-2, -1}, true).shape(), (Shape{1, 1, 1}));
  Tensor v = tensor<float>({3, -4, 0});
  EXPECT_FLOAT_EQ(linalg::vector_norm(v).item<float>(), 5.0f);
  EXPECT_FLOAT_EQ(linalg::vector_norm(v, 0).item<float>(), 2.0f);
  EXPECT_FLOAT_EQ(linalg::vector_norm(v, INFINITY).item<float>(), 4.0f);
  EXPECT_FLOAT_EQ(linalg::vector_norm(v, -INFINITY).item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(linalg::norm(v).item<float>(), 5.0f);
  EXPECT_FLOAT_EQ(linalg::norm(v, 1).item<float>(), 7.0f);
  EXPECT_NEAR(linalg::norm(A, "fro").item<double>(), std::sqrt(30.0), 1e-14);
  Tensor c = linalg::cross(tensor<float>({1, 0, 0}), tensor<float>({0, 1, 0}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 0, 1}));
}

TEST(Linalg, Errors) {
  Tensor S = tensor<double>({1, 2, 2, 4}, {2, 2});
  expect_error([&] { linalg::inv(S); }, "linalg.inv", "singular");
  expect_error([&] { linalg::solve(S, ones({2}, {.dtype = f64})); }, "linalg.solve", "singular");
  expect_error([&] { linalg::lu_factor(S); }, "linalg.lu_factor", "zero");
  expect_error([&] { linalg::cholesky(-eye(3)); }, "linalg.cholesky", "positive-definite");
  expect_error([&] { linalg::cholesky(S); }, "linalg.cholesky", "order 2");
  expect_error([&] { linalg::inv(ones({2, 3})); }, "linalg.inv", "square");
  expect_error([&] { linalg::det(ones({3})); }, "linalg.det", "2 dimensions");
  expect_error([&] { linalg::inv(ones({2, 2}, {.dtype = i64})); }, "linalg.inv", "float32 or float64");
  expect_error([&] { linalg::eigh(ones({2, 2}, {.dtype = f16})); }, "linalg.eigh", "float32 or float64");
  expect_error([&] { linalg::solve(eye(2), ones({2}, {.dtype = f64})); }, "linalg.solve", "same dtype");
  expect_error([&] { linalg::solve(eye(3).expand({2, 3, 3}), ones({4, 3, 1})); }, "linalg.solve");
  expect_error([&] { linalg::solve(eye(3), ones({4, 1})); }, "linalg.solve", "incompatible");
  expect_error([&] { linalg::qr(eye(2), "full"); }, "linalg.qr", "mode");
  expect_error([&] { linalg::eigh(eye(2), "X"); }, "linalg.eigh", "UPLO");
  expect_error([&] { linalg::matrix_norm(eye(2), 3); }, "linalg.matrix_norm", "order");
  expect_error([&] { linalg::matrix_norm(eye(2), "abc"); }, "linalg.matrix_norm", "order");
  expect_error([&] { linalg::vector_norm(ones({2}, {.dtype = i32})); }, "linalg.vector_norm", "floating");
  expect_error([&] { linalg::cross(ones({4}), ones({4})); }, "linalg.cross", "length 3");
  expect_error(
      [&] {
        linalg::solve_triangular(eye(3), ones({2, 2}), true);
      },
      "linalg.solve_triangular", "incompatible");
  expect_error([&] { trace(ones({2, 2, 2})); }, "trace", "matrix");
  expect_error([&] { linalg::matrix_power(ones({2, 3}), 2); }, "linalg.matrix_power", "square");
  expect_error([&] { linalg::norm(ones({2, 2, 2}), 2.0); }, "linalg.norm", "1-D or 2-D");
}

TEST(Linalg, ThreadCountIndependent) {
  Tensor A = randm({64, 12, 12}, f32, 4, 23);
  Tensor Sym = A + A.mT();
  auto run = [&] {
    auto [U, S, Vh] = linalg::svd(A);
    auto [w, V] = linalg::eigh(Sym);
    auto [Q, R] = linalg::qr(A);
    return std::vector<Tensor>{
        linalg::inv(A), linalg::det(A), U, S, Vh, w, V, Q, R, linalg::cholesky(matmul(A, A.mT()))};
  };
  auto r1 = kiln::test::with_threads(1, run);
  auto r2 = kiln::test::with_threads(2, run);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_TRUE(equal(r1[i], r2[i])) << i;
}

TEST(Linalg, LargerMatricesAccuracyAndTime) {
  const int64_t n = 128;
  Tensor A = randm({n, n}, f64, 0, 24);
  auto t0 = std::chrono::steady_clock::now();
  auto [U, S, Vh] = linalg::svd(A);
  auto t1 = std::chrono::steady_clock::now();
  Tensor Sym = A + A.mT();
  auto [w, V] = linalg::eigh(Sym);
  auto t2 = std::chrono::steady_clock::now();
  Tensor Ai = linalg::inv(A);
  auto t3 = std::chrono::steady_clock::now();
  EXPECT_LT(maxdiff(matmul(U * S.unsqueeze(0), Vh), A), 1e-11);
  EXPECT_LT(maxdiff(matmul(Sym, V), V * w.unsqueeze(0)), 1e-11);
  EXPECT_LT(maxdiff(matmul(A, Ai), eye(n, {}, {.dtype = f64})), 1e-10);
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("[linalg] %lldx%lld f64: svd %.1f ms, eigh %.1f ms, inv %.1f ms\n", static_cast<long long>(n),
              static_cast<long long>(n), ms(t0, t1), ms(t1, t2), ms(t2, t3));
}

// Timing only (run with --gtest_also_run_disabled_tests --gtest_filter=*LinalgBench*).
TEST(Linalg, DISABLED_LinalgBench) {
  for (int64_t n : {128, 256, 512}) {
    Tensor A = randm({n, n}, f64, 0, 25);
    Tensor Sym = A + A.mT();
    Tensor Spd = matmul(A, A.mT()) + eye(n, {}, {.dtype = f64}) * static_cast<double>(n);
    auto time = [](auto f) {
      f();
      auto t0 = std::chrono::steady_clock::now();
      f();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    std::printf("[linalg] n=%lld svd %.1f eigh %.1f inv %.1f qr %.1f cholesky %.1f ms\n", static_cast<long long>(n),
                time([&] { return linalg::svd(A); }), time([&] { return linalg::eigh(Sym); }),
                time([&] { return linalg::inv(A); }), time([&] { return linalg::qr(A); }),
                time([&] { return linalg::cholesky(Spd); }));
  }
}
