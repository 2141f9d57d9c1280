// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradients of the linalg primitives (LuFactor, Cholesky, Qr, Svd, Eigh, TriangularSolve) and
// the fft primitives (Fft, Rfft, Irfft), checked through the public functions built on them
// (inv, det, slogdet, solve, lstsq, pinv, matrix norms; fft, ifft, rfft, irfft, fft2, rfft2,
// hfft, stft, istft, ...) by finite differences in f64.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "grad_coverage.h"
#include "gradcheck.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::ad_device;
using kiln::test::gradcheck;
using kiln::test::gradgradcheck;
using kiln::test::rand_input;
using Ts = std::vector<Tensor>;

KILN_GRAD_COVERED(linalg_fft, "LuFactor", "Cholesky", "Qr", "Svd", "Eigh", "TriangularSolve", "Fft", "Rfft", "Irfft");

namespace {

Tensor eye_f64(int64_t n) { return eye(n, {}, {.dtype = f64, .device = ad_device()}); }

/// A well-conditioned matrix that needs row swaps: x + n * J (J the anti-diagonal identity).
Tensor pivoting(const Tensor& x) {
  const int64_t n = x.size(-1);
  return x + eye_f64(n).flip({0}) * static_cast<double>(n);
}

/// Symmetric positive-definite from an unconstrained square x: x x^T + n I.
Tensor spd(const Tensor& x) { return matmul(x, x.mT()) + eye_f64(x.size(-1)) * static_cast<double>(x.size(-1)); }

/// Symmetric from an unconstrained square x.
Tensor sym(const Tensor& x) { return x + x.mT(); }

/// All the results flattened into one vector (gradcheck weighs every element).
Tensor flat(const Ts& ts) {
  Ts f;
  for (const auto& t : ts) f.push_back(t.reshape({-1}));
  return cat(f, 0);
}

}  // namespace

// ---- LU and its composites -------------------------------------------------------------------

TEST(GradLinalg, LuFactor) {
  // Square (with row swaps), wide and tall, batched.
  EXPECT_EQ(
      gradcheck([](const Ts& v) { return linalg::lu_factor(pivoting(v[0])).LU; }, {rand_input({2, 4, 4}, -.5, .5)}),
      "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::lu_factor(v[0]).LU; }, {rand_input({2, 3, 5}, -1, 1, 2)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::lu_factor(v[0]).LU; }, {rand_input({5, 3}, -1, 1, 3)}), "");
  EXPECT_EQ(
      gradgradcheck([](const Ts& v) { return linalg::lu_factor(pivoting(v[0])).LU; }, {rand_input({3, 3}, -.5, .5)}),
      "");
}

TEST(GradLinalg, Inv) {
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::inv(pivoting(v[0])); }, {rand_input({2, 4, 4}, -.5, .5)}), "");
  // Non-contiguous (transposed) input.
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::inv(pivoting(v[0]).mT()); }, {rand_input({3, 3}, -.5, .5, 4)}),
            "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return linalg::inv(pivoting(v[0])); }, {rand_input({3, 3}, -.5, .5, 5)}),
            "");
}

TEST(GradLinalg, DetSlogdet) {
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::det(pivoting(v[0])); }, {rand_input({2, 4, 4}, -.5, .5)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::det(v[0] + eye_f64(3) * 2.0); }, {rand_input({3, 3}, -1, 1, 6)}),
            "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return linalg::det(pivoting(v[0])); }, {rand_input({3, 3}, -.5, .5, 7)}),
            "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::slogdet(pivoting(v[0])).logabsdet; },
                      {rand_input({2, 3, 3}, -.5, .5, 8)}),
            "");
  // The sign is piecewise constant: its gradient is zero.
  EXPECT_EQ(gradcheck(
                [](const Ts& v) {
                  auto r = linalg::slogdet(pivoting(v[0].mT()));
                  return r.sign * exp(r.logabsdet);
                },
                {rand_input({4, 4}, -.5, .5, 9)}),
            "");
}

TEST(GradLinalg, Solve) {
  // Batch broadcasting: A [2, 3, 3] and B [3, 2].
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::solve(pivoting(v[0]), v[1]); },
                      {rand_input({2, 3, 3}, -.5, .5), rand_input({3, 2}, -1, 1, 2)}),
            "");
  // X A = B, B non-contiguous.
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::solve(pivoting(v[0]), v[1].mT(), false); },
                      {rand_input({3, 3}, -.5, .5, 3), rand_input({3, 4}, -1, 1, 4)}),
            "");
  // Vector right-hand side.
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::solve(pivoting(v[0]), v[1]); },
                      {rand_input({4, 4}, -.5, .5, 5), rand_input({4}, -1, 1, 6)}),
            "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return linalg::solve(pivoting(v[0]), v[1]); },
                          {rand_input({3, 3}, -.5, .5, 7), rand_input({3, 2}, -1, 1, 8)}),
            "");
}

TEST(GradLinalg, MatrixPower) {
  EXPECT_EQ(
      gradcheck([](const Ts& v) { return linalg::matrix_power(pivoting(v[0]), -2); }, {rand_input({3, 3}, -.5, .5, 9)}),
      "");
}

// ---- triangular solve ------------------------------------------------------------------------

TEST(GradLinalg, SolveTriangular) {
  for (bool upper : {false, true})
    for (bool left : {false, true})
      for (bool unit : {false, true}) {
        // A [3, 3] broadcast against B [2, 3, 2] (left) / [2, 2, 3] (right); only A's triangle is
        // read, so the other triangle (and the diagonal when unitriangular) gets a zero gradient.
        Shape bs = left ? Shape{2, 3, 2} : Shape{2, 2, 3};
        EXPECT_EQ(
            gradcheck(
                [=](const Ts& v) { return linalg::solve_triangular(v[0] + eye_f64(3) * 3.0, v[1], upper, left, unit); },
                {rand_input({3, 3}), rand_input(bs, -1, 1, 2)}),
            "")
            << "upper " << upper << " left " << left << " unit " << unit;
      }
  // Non-contiguous A and B, broadcast batch on A's side.
  EXPECT_EQ(gradcheck(
                [](const Ts& v) {
                  return linalg::solve_triangular(v[0].mT() + eye_f64(3) * 3.0, v[1].slice(-1, 0, 4, 2), true);
                },
                {rand_input({2, 3, 3}, -1, 1, 3), rand_input({3, 4}, -1, 1, 4)}),
            "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return linalg::solve_triangular(v[0] + eye_f64(3) * 3.0, v[1], false); },
                          {rand_input({3, 3}, -1, 1, 5), rand_input({3, 2}, -1, 1, 6)}),
            "");
}

// ---- Cholesky --------------------------------------------------------------------------------

TEST(GradLinalg, Cholesky) {
  for (bool upper : {false, true}) {
    EXPECT_EQ(gradcheck([=](const Ts& v) { return linalg::cholesky(spd(v[0]), upper); }, {rand_input({2, 4, 4})}), "")
        << "upper " << upper;
    EXPECT_EQ(
        gradgradcheck([=](const Ts& v) { return linalg::cholesky(spd(v[0]), upper); }, {rand_input({3, 3}, -1, 1, 2)}),
        "")
        << "upper " << upper;
  }
  // Non-contiguous: the spd matrix transposed (still symmetric) and sliced from a bigger one.
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::cholesky(spd(v[0]).mT().slice(-1, 0, 3).slice(-2, 0, 3)); },
                      {rand_input({4, 4}, -1, 1, 3)}),
            "");
}

// ---- QR --------------------------------------------------------------------------------------

TEST(GradLinalg, Qr) {
  auto qr_flat = [](const std::string& mode) {
    return [mode](const Ts& v) {
      auto r = linalg::qr(v[0], mode);
      return flat({r.Q, r.R});
    };
  };
  EXPECT_EQ(gradcheck(qr_flat("reduced"), {rand_input({2, 5, 3})}), "");         // tall
  EXPECT_EQ(gradcheck(qr_flat("reduced"), {rand_input({4, 4}, -1, 1, 2)}), "");  // square
  EXPECT_EQ(gradcheck(qr_flat("reduced"), {rand_input({3, 5}, -1, 1, 3)}), "");  // wide
  EXPECT_EQ(gradcheck(qr_flat("complete"), {rand_input({3, 5}, -1, 1, 4)}), "");
  // Q only and R only.
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::qr(v[0].mT()).Q; }, {rand_input({3, 5}, -1, 1, 5)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::qr(v[0]).R; }, {rand_input({3, 5}, -1, 1, 6)}), "");
  EXPECT_EQ(gradgradcheck(qr_flat("reduced"), {rand_input({4, 3}, -1, 1, 7)}), "");
  // Not differentiable: mode "r", and "complete" with m > n.
  Tensor a = rand_input({4, 3}).require_grad();
  EXPECT_ERROR(linalg::qr(a, "r").R.sum().backward(), "mode='r'");
  EXPECT_ERROR(linalg::qr(a, "complete").Q.sum().backward(), "not differentiable");
}

// ---- SVD -------------------------------------------------------------------------------------

TEST(GradLinalg, Svd) {
  // Losses invariant to the sign of each singular pair: S, U diag(S) Vh, U diag(S^2) U^T (U's
  // gradient alone), Vh^T diag(S) Vh (Vh's alone), |U|, |Vh|.
  auto loss = [](bool full) {
    return [full](const Ts& v) {
      auto r = linalg::svd(v[0], full);
      const int64_t k = r.S.size(-1);
      Tensor U = r.U.narrow(-1, 0, k), Vh = r.Vh.narrow(-2, 0, k);
      return flat({r.S, matmul(U * r.S.unsqueeze(-2), Vh), matmul(U * (r.S * r.S).unsqueeze(-2), U.mT()),
                   matmul(Vh.mT() * r.S.unsqueeze(-2), Vh), abs(U), abs(Vh)});
    };
  };
  for (bool full : {false, true}) {
    EXPECT_EQ(gradcheck(loss(full), {rand_input({2, 5, 3})}), "") << "tall, full " << full;
    EXPECT_EQ(gradcheck(loss(full), {rand_input({3, 5}, -1, 1, 2)}), "") << "wide, full " << full;
    EXPECT_EQ(gradcheck(loss(full), {rand_input({4, 4}, -1, 1, 3)}), "") << "square, full " << full;
  }
  // Each output alone (the other gradients undefined), non-contiguous input.
  EXPECT_EQ(gradcheck([](const Ts& v) { return abs(linalg::svd(v[0].mT(), false).U); }, {rand_input({3, 5}, -1, 1, 4)}),
            "");
  EXPECT_EQ(
      gradcheck([](const Ts& v) { return abs(linalg::svd(v[0].mT(), false).Vh); }, {rand_input({3, 5}, -1, 1, 5)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::svd(v[0], false).S; }, {rand_input({3, 5}, -1, 1, 6)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::svdvals(v[0]); }, {rand_input({2, 4, 3}, -1, 1, 7)}), "");
  EXPECT_EQ(gradgradcheck(loss(false), {rand_input({4, 3}, -1, 1, 8)}), "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return linalg::svdvals(v[0]); }, {rand_input({3, 4}, -1, 1, 9)}), "");
}

// ---- Eigh ------------------------------------------------------------------------------------

TEST(GradLinalg, Eigh) {
  // Eigenvalues, and eigenvectors through V diag(f(w)) V^T (sign invariant).
  auto loss = [](const std::string& uplo) {
    return [uplo](const Ts& v) {
      auto r = linalg::eigh(sym(v[0]), uplo);
      return flat({r.eigenvalues, matmul(r.eigenvectors * exp(r.eigenvalues).unsqueeze(-2), r.eigenvectors.mT()),
                   abs(r.eigenvectors)});
    };
  };
  EXPECT_EQ(gradcheck(loss("L"), {rand_input({2, 4, 4})}), "");
  EXPECT_EQ(gradcheck(loss("U"), {rand_input({3, 3}, -1, 1, 2)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return abs(linalg::eigh(sym(v[0].mT())).eigenvectors); },
                      {rand_input({4, 4}, -1, 1, 3)}),
            "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::eigvalsh(sym(v[0]), "U"); }, {rand_input({2, 3, 3}, -1, 1, 4)}),
            "");
  EXPECT_EQ(gradgradcheck(loss("L"), {rand_input({3, 3}, -1, 1, 5)}), "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return linalg::eigvalsh(sym(v[0])); }, {rand_input({3, 3}, -1, 1, 6)}), "");
}

// ---- composites through Qr / Svd / Eigh --------------------------------------------------------

TEST(GradLinalg, LstsqPinv) {
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::lstsq(v[0], v[1]); },
                      {rand_input({2, 5, 3}), rand_input({2, 5, 2}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::lstsq(v[0], v[1]); },
                      {rand_input({3, 5}, -1, 1, 3), rand_input({3}, -1, 1, 4)}),
            "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::pinv(v[0]); }, {rand_input({2, 4, 3}, -1, 1, 5)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::pinv(v[0].mT()); }, {rand_input({4, 3}, -1, 1, 6)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::pinv(spd(v[0]), {.hermitian = true}); },
                      {rand_input({3, 3}, -1, 1, 7)}),
            "");
}

TEST(GradLinalg, MatrixNorm) {
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::matrix_norm(v[0], "fro"); }, {rand_input({2, 3, 4})}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::matrix_norm(v[0], "nuc"); }, {rand_input({2, 3, 4}, -1, 1, 2)}),
            "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return linalg::matrix_norm(v[0], 2.0); }, {rand_input({2, 4, 3}, -1, 1, 3)}),
            "");
  EXPECT_EQ(gradcheck(
                [](const Ts& v) {
                  return linalg::matrix_norm(v[0], -2.0, {0, 2}, true);
                },
                {rand_input({3, 2, 4}, -1, 1, 4)}),
            "");
}

// ---- FFT -------------------------------------------------------------------------------------

TEST(GradFft, FftIfft) {
  for (const char* norm : {"backward", "ortho", "forward"}) {
    EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::fft(v[0], std::nullopt, -1, norm); }, {rand_input({2, 5, 2})}),
              "")
        << norm;
    EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::ifft(v[0], std::nullopt, 0, norm); },
                        {rand_input({6, 3, 2}, -1, 1, 2)}),
              "")
        << norm;
    // Zero-padding and trimming with n; a non-contiguous input.
    EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::fft(v[0].transpose(0, 1), 7, 0, norm); },
                        {rand_input({3, 4, 2}, -1, 1, 3)}),
              "")
        << norm;
    EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::ifft(v[0], 3, -1, norm); }, {rand_input({2, 5, 2}, -1, 1, 4)}),
              "")
        << norm;
  }
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return fft::fft(v[0]) * fft::fft(v[0]); }, {rand_input({4, 2})}), "");
}

TEST(GradFft, RfftIrfft) {
  for (const char* norm : {"backward", "ortho", "forward"}) {
    for (int64_t n : {6, 7}) {
      EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::rfft(v[0], std::nullopt, -1, norm); }, {rand_input({2, n})}),
                "")
          << norm << " n " << n;
      // irfft to n points from its default bin count, fewer bins and more bins.
      for (int64_t m : {n / 2 + 1, int64_t{2}, n}) {
        EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::irfft(v[0], n, 0, norm); },
                            {rand_input({m, 2, 2}, -1, 1, static_cast<uint64_t>(m))}),
                  "")
            << norm << " n " << n << " m " << m;
      }
    }
    // rfft along dim 0 of a non-contiguous input, with padding.
    EXPECT_EQ(gradcheck([=](const Ts& v) { return fft::rfft(v[0].mT(), 9, 0, norm); }, {rand_input({3, 5}, -1, 1, 5)}),
              "")
        << norm;
  }
  EXPECT_EQ(gradcheck([](const Ts& v) { return fft::irfft(v[0]); }, {rand_input({2, 5, 2}, -1, 1, 6)}), "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return fft::rfft(v[0] * v[0]); }, {rand_input({5}, -1, 1, 7)}), "");
  EXPECT_EQ(gradgradcheck([](const Ts& v) { return fft::irfft(v[0] * v[0], 6); }, {rand_input({4, 2}, -1, 1, 8)}), "");
  // The round trip is the identity.
  EXPECT_EQ(gradcheck([](const Ts& v) { return fft::irfft(fft::rfft(v[0]), 7); }, {rand_input({7}, -1, 1, 9)}), "");
}

TEST(GradFft, MultiDim) {
  for (const char* norm : {"backward", "ortho", "forward"}) {
    EXPECT_EQ(gradcheck(
                  [=](const Ts& v) {
                    return fft::fft2(v[0], std::nullopt, {-2, -1}, norm);
                  },
                  {rand_input({2, 3, 4, 2})}),
              "")
        << norm;
    EXPECT_EQ(gradcheck(
                  [=](const Ts& v) {
                    return fft::ifft2(v[0], Shape{4, 3}, {0, 1}, norm);
                  },
                  {rand_input({3, 4, 2}, -1, 1, 2)}),
              "")
        << norm;
    EXPECT_EQ(gradcheck(
                  [=](const Ts& v) {
                    return fft::rfft2(v[0], std::nullopt, {-2, -1}, norm);
                  },
                  {rand_input({2, 3, 4}, -1, 1, 3)}),
              "")
        << norm;
    EXPECT_EQ(gradcheck(
                  [=](const Ts& v) {
                    return fft::irfft2(v[0], Shape{3, 5}, {-2, -1}, norm);
                  },
                  {rand_input({3, 3, 2}, -1, 1, 4)}),
              "")
        << norm;
  }
  EXPECT_EQ(gradcheck([](const Ts& v) { return fft::fftn(v[0]); }, {rand_input({2, 3, 2}, -1, 1, 5)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return fft::hfft(v[0], 5); }, {rand_input({3, 2}, -1, 1, 6)}), "");
  EXPECT_EQ(gradcheck([](const Ts& v) { return fft::ihfft(v[0]); }, {rand_input({6}, -1, 1, 7)}), "");
}

TEST(GradFft, StftIstft) {
  Tensor w = hann_window(8, true, {.dtype = f64, .device = ad_device()});
  StftOptions so{.hop_length = 2, .window = w};
  EXPECT_EQ(gradcheck([=](const Ts& v) { return stft(v[0], 8, so); }, {rand_input({2, 16})}), "");
  StftOptions so2{.hop_length = 3, .center = false, .normalized = true, .onesided = false};
  EXPECT_EQ(gradcheck([=](const Ts& v) { return stft(v[0], 6, so2); }, {rand_input({14}, -1, 1, 2)}), "");
  // istft of an arbitrary spectrum (a linear map), and the round trip.
  IstftOptions io{.hop_length = 2, .window = w};
  EXPECT_EQ(gradcheck([=](const Ts& v) { return istft(v[0], 8, io); }, {rand_input({5, 7, 2}, -1, 1, 3)}), "");
  EXPECT_EQ(gradcheck([=](const Ts& v) { return istft(stft(v[0], 8, so), 8, io); }, {rand_input({12}, -1, 1, 4)}), "");
}
TEST(GradLinalg, Float32Inputs) {
  // f32 inputs get f32 gradients that match the f64 ones.
  Tensor a64 = pivoting(rand_input({3, 3}, -.5, .5, 11)).detach();
  Tensor a32 = a64.to(f32).require_grad();
  Tensor b64 = a64.clone().require_grad();
  Tensor g32 = a32.grad((linalg::inv(a32) * linalg::det(a32).unsqueeze(-1).unsqueeze(-1)).sum().backward());
  Tensor g64 = b64.grad((linalg::inv(b64) * linalg::det(b64).unsqueeze(-1).unsqueeze(-1)).sum().backward());
  EXPECT_EQ(g32.dtype(), f32);
  auto x = g32.to_vector<float>();
  auto y = g64.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-3 * (1 + std::abs(y[i])));
  Tensor z = rand_input({2, 6}, -1, 1, 12).to(f32).require_grad();
  Tensor gz = z.grad(fft::abs(fft::rfft(z)).sum().backward());
  EXPECT_EQ(gz.dtype(), f32);
  EXPECT_EQ(gz.shape(), z.shape());
}
