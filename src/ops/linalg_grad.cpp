// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the linalg ops (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
//
// The formulas are PyTorch's (torch/csrc/autograd/FunctionsManual.cpp, real case):
// linalg_lu_backward (square, wide and tall), cholesky_backward, linalg_qr_backward,
// svd_backward, linalg_eig_backward (hermitian) and linalg_solve_triangular backward. The
// composites of src/ops/linalg.cpp (inv, det, slogdet, solve through LuFactor and
// TriangularSolve; lstsq through Qr; pinv, svd norms through Svd / Eigh) are differentiable
// through these rules, with no rule of their own.
//
// Conventions, as PyTorch: Cholesky and Eigh read one triangle but return a symmetric gradient
// (the gradient for a symmetric perturbation of A); the gradients of Svd / Eigh need distinct
// singular values / eigenvalues (they divide by s_j^2 - s_i^2 / w_j - w_i) and Svd's also
// non-zero singular values when a U or Vh gradient flows for a non-square A; with
// full_matrices only the first min(m, n) columns of U and rows of Vh are differentiable (the
// rest are not unique). Qr is not differentiable in mode "r" (no Q) nor in mode "complete" with
// m > n; the rule throws for those.
#include <cmath>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
[[maybe_unused]] void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
[[maybe_unused]] void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }

/// a + b where either may be undefined (zero).
Tensor add_opt(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a + b;
}

/// Identity [k, k] (or [m, k]) of t's dtype and device (broadcasts against batches).
Tensor eye_of(const Tensor& t, int64_t m, int64_t k) { return eye(m, k, {.dtype = t.dtype(), .device = t.device()}); }

Tensor zeros_of(const Tensor& t, const Shape& s) { return zeros(s, {.dtype = t.dtype(), .device = t.device()}); }

/// diag(v) [..., k, k] of v [..., k] (a product with the identity, differentiable without the
/// in-place writes diag_embed makes).
Tensor diag_of(const Tensor& v) { return v.unsqueeze(-1) * eye_of(v, v.size(-1), v.size(-1)); }

/// t with its last two dims replaced by (r, c).
Shape mat_shape(const Tensor& t, int64_t r, int64_t c) {
  Shape s(t.shape().begin(), t.shape().end() - 2);
  s.push_back(r);
  s.push_back(c);
  return s;
}

/// P^T X for the row permutation P of an LU (P A = A[perm] = L U): row perm[i] of the result
/// is row i of X.
Tensor unpermute_rows(const Tensor& X, const Tensor& perm) {
  const int64_t m = X.size(-2);
  Tensor P = one_hot(perm, m).to(X.dtype());  // P[i, j] = (perm[i] == j)
  return matmul(P.mT(), X);
}

/// Gradient of A from the gradient g of the packed LU of A (PyTorch's linalg_lu_backward with
/// L_grad / U_grad the strictly lower / upper (with diagonal) parts of g).
Tensor lu_backward(const Tensor& g, const Tensor& LU, const Tensor& perm) {
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  if (k == 0) return zeros_of(g, g.shape());
  Tensor L = tril(LU.narrow(-1, 0, k), -1) + eye_of(LU, m, k);  // [m, k], unit lower
  Tensor U = triu(LU.narrow(-2, 0, k));                         // [k, n]
  Tensor gL = tril(g.narrow(-1, 0, k), -1);
  Tensor gU = triu(g.narrow(-2, 0, k));
  Tensor X;
  if (m == n) {
    // gA = P^T L^-T [tril(L^T gL, -1) + triu(gU U^T)] U^-T
    X = tril(matmul(L.mT(), gL), -1) + triu(matmul(gU, U.mT()));
    X = linalg::solve_triangular(U.mT(), X, /*upper=*/false, /*left=*/false);
    X = linalg::solve_triangular(L.mT(), X, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
  } else if (m < n) {
    // Wide: gA1 = P^T L^-T [gU1 + tril(L^T gL - gU U^T, -1) U1^-T], gA2 = P^T L^-T gU2.
    Tensor U1 = U.narrow(-1, 0, k);
    X = tril(matmul(L.mT(), gL) - matmul(gU, U.mT()), -1);
    X = linalg::solve_triangular(U1.mT(), X, /*upper=*/false, /*left=*/false);
    X = cat({X + gU.narrow(-1, 0, k), gU.narrow(-1, k, n - k)}, -1);
    X = linalg::solve_triangular(L.mT(), X, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
  } else {
    // Tall: gA1 = P^T [gL1 + L1^-T triu(gU U^T - L^T gL)] U^-T, gA2 = P^T gL2 U^-T.
    Tensor L1 = L.narrow(-2, 0, k);
    X = triu(matmul(gU, U.mT()) - matmul(L.mT(), gL));
    X = linalg::solve_triangular(L1.mT(), X, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
    X = cat({X + gL.narrow(-2, 0, k), gL.narrow(-2, k, m - k)}, -2);
    X = linalg::solve_triangular(U.mT(), X, /*upper=*/false, /*left=*/false);
  }
  return unpermute_rows(X, perm);
}

/// Cholesky: gA = L^-T Phi(L^T gL) L^-1 with Phi(X) = (tril(X) + tril(X, -1)^T) / 2 (symmetric).
Tensor cholesky_backward(Tensor gL, Tensor L, bool upper) {
  if (upper) {
    L = L.mT();
    gL = gL.mT();
  }
  Tensor P = tril(matmul(L.mT(), gL));
  P = (P + tril(P, -1).mT()) * 0.5;
  P = linalg::solve_triangular(L.mT(), P, /*upper=*/true, /*left=*/true);
  return linalg::solve_triangular(L, P, /*upper=*/false, /*left=*/false);
}

/// Reduced QR (or complete with m <= n): A = Q R, Q [m, k], R [k, n].
Tensor qr_backward(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  const int64_t m = Q.size(-2), n = R.size(-1);
  // M = gR R^T - Q^T gQ
  Tensor M = add_opt(gR.defined() ? matmul(gR, R.mT()) : Tensor(), gQ.defined() ? -matmul(Q.mT(), gQ) : Tensor());
  if (m >= n) {
    // gA = (gQ + Q syminvadj(triu(M))) R^-T, syminvadj(T) = T + T^T with the diagonal once.
    Tensor b = matmul(Q, triu(M) + triu(M, 1).mT());
    if (gQ.defined()) b = b + gQ;
    return linalg::solve_triangular(R.mT(), b, /*upper=*/false, /*left=*/false);
  }
  // Wide: gA = [Q tril(M^T - M) R1^-T, 0] + Q gR.
  Tensor b = matmul(Q, tril(M.mT() - M));
  Tensor gA = linalg::solve_triangular(R.narrow(-1, 0, m).mT(), b, /*upper=*/false, /*left=*/false);
  gA = cat({gA, zeros_of(gA, mat_shape(gA, m, n - m))}, -1);
  if (gR.defined()) gA = gA + matmul(Q, gR);
  return gA;
}

/// SVD A = U diag(S) Vh with U [m, k], Vh [k, n] (the reduced factors).
Tensor svd_backward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const int64_t m = U.size(-2), n = Vh.size(-1), k = S.size(-1);
  if (!gU.defined() && !gVh.defined()) {  // svdvals: U diag(gS) Vh
    return m >= n ? matmul(U, gS.unsqueeze(-1) * Vh) : matmul(U * gS.unsqueeze(-2), Vh);
  }
  auto skew = [](const Tensor& X) { return X - X.mT(); };
  Tensor S2 = S * S;
  // E[i, j] = S_j^2 - S_i^2 off the diagonal, 1 on it (the numerators vanish there).
  Tensor E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_of(S, k, k);
  Tensor ret;
  if (gU.defined()) ret = skew(matmul(U.mT(), gU)) * S.unsqueeze(-2);
  if (gVh.defined()) ret = add_opt(ret, S.unsqueeze(-1) * skew(matmul(Vh, gVh.mT())));
  ret = ret / E;
  if (gS.defined()) ret = ret + diag_of(gS);
  if (m > n && gU.defined()) {
    // gA = [U ret + (I - U U^T) gU S^-1] Vh
    Tensor gUSinv = gU / S.unsqueeze(-2);
    Tensor gA = matmul(U, ret) + gUSinv - matmul(U, matmul(U.mT(), gUSinv));
    return matmul(gA, Vh);
  }
  if (m < n && gVh.defined()) {
    // gA = U [ret Vh + S^-1 gVh (I - V Vh)]
    Tensor SinvgVh = gVh / S.unsqueeze(-1);
    Tensor gA = matmul(ret, Vh) + SinvgVh - matmul(matmul(SinvgVh, Vh.mT()), Vh);
    return matmul(U, gA);
  }
  return m >= n ? matmul(U, matmul(ret, Vh)) : matmul(matmul(U, ret), Vh);
}

/// Symmetric eigendecomposition A = V diag(w) V^T: gA = V (skew(V^T gV) / 2 / E + diag(gw)) V^T
/// with E[i, j] = w_j - w_i (symmetric).
Tensor eigh_backward(const Tensor& gw, const Tensor& gV, const Tensor& w, const Tensor& Vm) {
  const int64_t n = w.size(-1);
  Tensor ret;
  if (gV.defined()) {
    Tensor VtgV = matmul(Vm.mT(), gV);
    Tensor E = w.unsqueeze(-2) - w.unsqueeze(-1) + eye_of(w, n, n);
    ret = (VtgV - VtgV.mT()) * 0.5 / E;
  }
  if (gw.defined()) ret = add_opt(ret, diag_of(gw));
  return matmul(matmul(Vm, ret), Vm.mT());
}
}  // namespace

void register_linalg_grads() {
  using K = ir::OpKind;

  // LuFactor -> (LU, pivots, info, perm): only LU is differentiable.
  rule(K::LuFactor, kSaveOutputs, [](C c) -> V {
    if (!c.needs(0) || !c.grads[0].defined()) return {Tensor()};
    return {lu_backward(c.grads[0], c.outputs[0], c.outputs[3])};
  });

  // Cholesky ints = {upper} -> (L or U, info).
  rule(K::Cholesky, kSaveOutputs, [](C c) -> V {
    if (!c.needs(0) || !c.grads[0].defined()) return {Tensor()};
    return {cholesky_backward(c.grads[0], c.outputs[0], ir::LinalgAttrs::decode(c.op).upper)};
  });

  // Qr ints = {mode: 0 reduced, 1 complete, 2 r} -> (Q, R).
  rule(K::Qr, kSaveOutputs, [](C c) -> V {
    const Tensor &gQ = c.grads[0], &gR = c.grads[1];
    if (!c.needs(0) || (!gQ.defined() && !gR.defined())) return {Tensor()};
    const int64_t mode = ir::LinalgAttrs::decode(c.op).qr_mode;
    KILN_CHECK(mode != 2, "linalg.qr",
               "the derivative of linalg.qr depends on Q, which is not computed when mode='r'; use mode='reduced' "
               "to differentiate through linalg.qr");
    const Shape& a = c.op.inputs[0].shape;
    const int64_t m = a[a.size() - 2], n = a[a.size() - 1];
    KILN_CHECK(mode == 0 || m <= n, "linalg.qr",
               "the QR decomposition is not differentiable when mode='complete' and nrows > ncols (A is " << m << " by "
                                                                                                          << n << ")");
    return {qr_backward(gQ, gR, c.outputs[0], c.outputs[1])};
  });

  // Svd ints = {full_matrices, compute_uv} -> (U, S, Vh). Without compute_uv (svdvals) the rule
  // recomputes the reduced factors from the saved input.
  rule(K::Svd, kSaveBoth, [](C c) -> V {
    const ir::LinalgAttrs a = ir::LinalgAttrs::decode(c.op);
    const bool full = a.full_matrices, uv = a.compute_uv;
    Tensor gU = uv ? c.grads[0] : Tensor(), gS = c.grads[1], gVh = uv ? c.grads[2] : Tensor();
    if (!c.needs(0) || (!gU.defined() && !gS.defined() && !gVh.defined())) return {Tensor()};
    Tensor U = c.outputs[0], S = c.outputs[1], Vh = c.outputs[2];
    const int64_t k = S.size(-1);
    if (!uv) {
      linalg::SvdResult r = linalg::svd(c.inputs[0], false);
      U = r.U;
      Vh = r.Vh;
    } else if (full) {
      U = U.narrow(-1, 0, k);
      Vh = Vh.narrow(-2, 0, k);
      if (gU.defined()) gU = gU.narrow(-1, 0, k);
      if (gVh.defined()) gVh = gVh.narrow(-2, 0, k);
    }
    if (k == 0) return {zeros_of(S, c.op.inputs[0].shape)};
    return {svd_backward(gU, gS, gVh, U, S, Vh)};
  });

  // Eigh ints = {upper, compute_v} -> (eigenvalues, eigenvectors). Without compute_v
  // (eigvalsh) the rule recomputes the eigenvectors from the saved input.
  rule(K::Eigh, kSaveBoth, [](C c) -> V {
    const ir::LinalgAttrs a = ir::LinalgAttrs::decode(c.op);
    const bool upper = a.upper, cv = a.compute_v;
    Tensor gw = c.grads[0], gV = cv ? c.grads[1] : Tensor();
    if (!c.needs(0) || (!gw.defined() && !gV.defined())) return {Tensor()};
    Tensor w = c.outputs[0], Vm = c.outputs[1];
    if (!cv) Vm = linalg::eigh(c.inputs[0], upper ? "U" : "L").eigenvectors;
    if (w.size(-1) == 0) return {zeros_of(w, c.op.inputs[0].shape)};
    return {eigh_backward(gw, gV, w, Vm)};
  });

  // TriangularSolve(a, b) ints = {upper, left, unitriangular} -> x (batch dims broadcast).
  // left: gB = A^-T gX, gA = -gB X^T; right: gB = gX A^-T, gA = -X^T gB; gA keeps A's triangle.
  rule(K::TriangularSolve, kSaveBoth, [](C c) -> V {
    const ir::LinalgAttrs a = ir::LinalgAttrs::decode(c.op);
    const bool upper = a.upper, left = a.left, unit = a.unitriangular;
    if (!c.grads[0].defined() || (!c.needs(0) && !c.needs(1))) return {Tensor(), Tensor()};
    const Tensor& A = c.inputs[0];
    const Tensor& X = c.outputs[0];
    Tensor gB = linalg::solve_triangular(A.mT(), c.grads[0], !upper, left, unit);
    Tensor gA;
    if (c.needs(0)) {
      gA = left ? -matmul(gB, X.mT()) : -matmul(X.mT(), gB);
      gA = upper ? triu(gA, unit ? 1 : 0) : tril(gA, unit ? -1 : 0);
      gA = sum_to(gA, c.op.inputs[0].shape);
    }
    return {gA, c.needs(1) ? sum_to(gB, c.op.inputs[1].shape) : Tensor()};
  });
}

}  // namespace kiln::autodiff
