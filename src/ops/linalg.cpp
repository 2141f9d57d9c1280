// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::linalg: argument checks and the primitives (LuFactor, Cholesky, Qr, Svd, Eigh,
// TriangularSolve), plus the composites written with public tensor ops (inv, det, slogdet,
// solve, lstsq, pinv, norms, cross, matrix_power, ...). Singular / not positive-definite
// inputs: the kernel reports `info`, the frontend reads it and throws (a sync point).
#include "kiln/linalg.h"

#include <cmath>
#include <limits>

#include "ir/attrs.h"
#include "kiln/matmul.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using ir::OpKind;

namespace {

/// Float32/float64 batches of matrices [..., m, n] (square when asked).
void check_matrix(const char* api, const Tensor& A, bool square, const char* name = "A") {
  detail::check_defined(api, A);
  KILN_CHECK(A.dim() >= 2, api, name << " must have at least 2 dimensions [..., m, n], got shape " << A.shape());
  KILN_CHECK(A.dtype() == f32 || A.dtype() == f64, api,
             "expected a float32 or float64 tensor as " << name << ", got " << dtype_name(A.dtype()).data()
                                                        << " (shape " << A.shape() << ")");
  KILN_CHECK(!square || A.size(-1) == A.size(-2), api,
             name << " must be batches of square matrices, but they are " << A.size(-2) << " by " << A.size(-1)
                  << " matrices (shape " << A.shape() << ")");
}

void check_same_dtype(const char* api, const Tensor& A, const Tensor& B) {
  detail::check_defined(api, B);
  detail::check_same_device(api, A, B);
  KILN_CHECK(A.dtype() == B.dtype(), api,
             "expected A and B to have the same dtype, but found A of type "
                 << dtype_name(A.dtype()).data() << " and B of type " << dtype_name(B.dtype()).data() << " instead");
}

Shape batch_shape(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

/// The batch element of the first non-zero info value and the value ({-1, 0} when all are zero).
std::pair<int64_t, int64_t> first_failure(const Tensor& info) {
  if (info.numel() == 0 || info.device().is_null()) return {-1, 0};  // null: shapes only
  std::vector<int64_t> v = info.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) return {static_cast<int64_t>(i), v[i]};
  return {-1, 0};
}

struct Lu {
  Tensor LU, pivots, info, perm;
};
Lu lu_raw(const char* api, const Tensor& A) {
  ir::Op op = make_op(OpKind::LuFactor);
  auto r = detail::run(api, op, A.device(), {A});
  return {r[0], r[1], r[2], r[3]};
}

/// Solves (L U) X = P B for an LU from lu_raw (batch dims broadcast with B [..., n, k]).
Tensor lu_solve(const Lu& lu, const Tensor& B) {
  const int64_t n = lu.LU.size(-1), k = B.size(-1);
  Shape bs = broadcast_shapes(batch_shape(lu.LU), batch_shape(B), "linalg.solve");
  Shape full = bs;
  full.push_back(n);
  full.push_back(k);
  Tensor idx = lu.perm.unsqueeze(-1).expand(full);
  Tensor pb = gather(B.expand(full), -2, idx);
  Tensor y = linalg::solve_triangular(lu.LU, pb, /*upper=*/false, true, /*unitriangular=*/true);
  return linalg::solve_triangular(lu.LU, y, /*upper=*/true);
}

/// ±1 with the parity of the row swaps of an LU.
Tensor pivot_sign(const Lu& lu, DType dt) {
  const int64_t k = lu.pivots.size(-1);
  Tensor swaps = sum(ne(lu.pivots, arange(Scalar(k), i64, lu.pivots.device())), {-1});
  return cast(sub(Scalar(1), mul(remainder(swaps, Scalar(2)), Scalar(2))), dt);
}

Tensor eye_like(const Tensor& A) {
  Tensor I = eye(A.size(-1), {}, {.dtype = A.dtype(), .device = A.device()});
  return I.expand(A.shape());
}

/// Adds size-1 dims at the (sorted) positions d0 < d1 of a keepdim result.
Tensor keep_dims(Tensor r, int64_t d0, int64_t d1) { return r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1)); }

/// pinv / matrix_rank tolerance per matrix [..., 1] from the largest magnitude [..., 1].
Tensor tolerance(const Tensor& smax, const linalg::PinvOptions& o, int64_t m, int64_t n, DType dt) {
  double eps = dt == f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  double rtol = o.rtol ? *o.rtol : (o.atol ? 0.0 : eps * static_cast<double>(std::max(m, n)));
  double atol = o.atol.value_or(0.0);
  return clamp_min(mul(smax, Scalar(rtol)), Scalar(atol));
}

}  // namespace

Tensor trace(const Tensor& x) {
  detail::check_defined("trace", x);
  KILN_CHECK(x.dim() == 2, "trace",
             "expected a matrix, but got a tensor with dim " << x.dim() << " (shape " << x.shape() << ")");
  return sum(diagonal(x, 0, 0, 1));
}

namespace linalg {

LuFactorResult lu_factor(const Tensor& A) {
  const char* api = "linalg.lu_factor";
  check_matrix(api, A, false);
  Lu lu = lu_raw(api, A);
  auto [b, k] = first_failure(lu.info);
  KILN_CHECK(b < 0, api,
             "U[" << k << "," << k << "] is zero (batch element " << b
                  << ") and using it on lu_solve would result in a division by zero");
  return {lu.LU, cast(add(lu.pivots, Scalar(1)), i32)};
}

Tensor inv(const Tensor& A) {
  const char* api = "linalg.inv";
  check_matrix(api, A, true);
  Lu lu = lu_raw(api, A);
  auto [b, k] = first_failure(lu.info);
  KILN_CHECK(b < 0, api,
             "the diagonal element " << k
                                     << " is zero, the inversion could not be completed because the input "
                                        "matrix is singular (batch element "
                                     << b << " of shape " << A.shape() << ")");
  return lu_solve(lu, eye_like(A));
}

Tensor det(const Tensor& A) {
  const char* api = "linalg.det";
  check_matrix(api, A, true);
  Lu lu = lu_raw(api, A);
  return mul(prod(diagonal(lu.LU, 0, -2, -1), {-1}), pivot_sign(lu, A.dtype()));
}

SlogdetResult slogdet(const Tensor& A) {
  const char* api = "linalg.slogdet";
  check_matrix(api, A, true);
  Lu lu = lu_raw(api, A);
  Tensor d = diagonal(lu.LU, 0, -2, -1);
  Tensor sgn = mul(prod(sign(d), {-1}), pivot_sign(lu, A.dtype()));
  return {sgn, sum(log(abs(d)), {-1})};
}

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  const char* api = "linalg.solve";
  check_matrix(api, A, true);
  check_same_dtype(api, A, B);
  const int64_t n = A.size(-1);
  // PyTorch's rule: B is a vector when 1-d or when its shape is A's batch shape + [n].
  bool vec = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.shape() == Shape(A.shape().begin(), A.shape().end() - 1));
  KILN_CHECK(!(vec && !left) || B.dim() >= 2, api,
             "incompatible shapes of A and B for the equation XA = B (A " << A.shape() << ", B " << B.shape() << ")");
  Tensor b = vec ? B.unsqueeze(-1) : B;
  KILN_CHECK(b.dim() >= 2 && (left ? b.size(-2) : b.size(-1)) == n, api,
             "incompatible shapes of A and B for the equation " << (left ? "AX = B" : "XA = B") << " (A " << A.shape()
                                                                << ", B " << B.shape() << ")");
  broadcast_shapes(batch_shape(A), batch_shape(b), api);
  Lu lu = lu_raw(api, left ? A : A.mT());
  auto [bi, k] = first_failure(lu.info);
  KILN_CHECK(bi < 0, api,
             "the solver failed because the input matrix is singular (batch element " << bi << " of shape " << A.shape()
                                                                                      << ")");
  Tensor x = lu_solve(lu, left ? b : b.mT());
  if (!left) x = x.mT();
  return vec ? x.squeeze({-1}) : x;
}

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  const char* api = "linalg.solve_triangular";
  check_matrix(api, A, true);
  check_same_dtype(api, A, B);
  check_matrix(api, B, false, "B");
  const int64_t n = A.size(-1);
  KILN_CHECK((left ? B.size(-2) : B.size(-1)) == n, api,
             "incompatible shapes of A " << A.shape() << " and B " << B.shape() << " for the equation "
                                         << (left ? "AX = B" : "XA = B"));
  broadcast_shapes(batch_shape(A), batch_shape(B), api);
  ir::Op op = make_op(OpKind::TriangularSolve);
  ir::LinalgAttrs{.upper = upper, .left = left, .unitriangular = unitriangular}.encode(op);
  return detail::run(api, op, A.device(), {A, B})[0];
}

Tensor cholesky(const Tensor& A, bool upper) {
  const char* api = "linalg.cholesky";
  check_matrix(api, A, true);
  ir::Op op = make_op(OpKind::Cholesky);
  ir::LinalgAttrs{.upper = upper}.encode(op);
  auto r = detail::run(api, op, A.device(), {A});
  auto [b, k] = first_failure(r[1]);
  KILN_CHECK(b < 0, api,
             "the factorization could not be completed because the input is not positive-definite (the leading "
             "minor of order "
                 << k << " is not positive-definite; batch element " << b << " of shape " << A.shape() << ")");
  return r[0];
}

QrResult qr(const Tensor& A, const std::string& mode) {
  const char* api = "linalg.qr";
  check_matrix(api, A, false);
  int64_t md = mode == "reduced" ? 0 : mode == "complete" ? 1 : mode == "r" ? 2 : -1;
  KILN_CHECK(md >= 0, api,
             "qr received unrecognized mode '" << mode
                                               << "' but expected one of 'reduced' (default), "
                                                  "'r', or 'complete'");
  ir::Op op = make_op(OpKind::Qr);
  ir::LinalgAttrs{.qr_mode = md}.encode(op);
  auto r = detail::run(api, op, A.device(), {A});
  return {r[0], r[1]};
}

SvdResult svd(const Tensor& A, bool full_matrices) {
  const char* api = "linalg.svd";
  check_matrix(api, A, false);
  ir::Op op = make_op(OpKind::Svd);
  ir::LinalgAttrs{.full_matrices = full_matrices, .compute_uv = true}.encode(op);
  auto r = detail::run(api, op, A.device(), {A});
  return {r[0], r[1], r[2]};
}

Tensor svdvals(const Tensor& A) {
  const char* api = "linalg.svdvals";
  check_matrix(api, A, false);
  ir::Op op = make_op(OpKind::Svd);
  ir::LinalgAttrs{.full_matrices = false, .compute_uv = false}.encode(op);
  return detail::run(api, op, A.device(), {A})[1];
}

namespace {
int64_t uplo_flag(const char* api, const std::string& UPLO) {
  KILN_CHECK(UPLO == "L" || UPLO == "U", api, "UPLO must be 'L' or 'U', got '" << UPLO << "'");
  return UPLO == "U" ? 1 : 0;
}
}  // namespace

EighResult eigh(const Tensor& A, const std::string& UPLO) {
  const char* api = "linalg.eigh";
  check_matrix(api, A, true);
  ir::Op op = make_op(OpKind::Eigh);
  ir::LinalgAttrs{.upper = uplo_flag(api, UPLO) != 0, .compute_v = true}.encode(op);
  auto r = detail::run(api, op, A.device(), {A});
  return {r[0], r[1]};
}

Tensor eigvalsh(const Tensor& A, const std::string& UPLO) {
  const char* api = "linalg.eigvalsh";
  check_matrix(api, A, true);
  ir::Op op = make_op(OpKind::Eigh);
  ir::LinalgAttrs{.upper = uplo_flag(api, UPLO) != 0, .compute_v = false}.encode(op);
  return detail::run(api, op, A.device(), {A})[0];
}

Tensor lstsq(const Tensor& A, const Tensor& B) {
  const char* api = "linalg.lstsq";
  check_matrix(api, A, false);
  check_same_dtype(api, A, B);
  const int64_t m = A.size(-2), n = A.size(-1);
  bool vec = B.dim() == A.dim() - 1;
  Tensor b = vec ? B.unsqueeze(-1) : B;
  KILN_CHECK(
      b.dim() >= 2 && b.size(-2) == m, api,
      "incompatible shapes of A " << A.shape() << " and B " << B.shape() << " (B must be [..., m, k] or [..., m])");
  broadcast_shapes(batch_shape(A), batch_shape(b), api);
  Tensor x;
  if (m >= n) {
    QrResult f = qr(A, "reduced");
    x = solve_triangular(f.R, matmul(f.Q.mT(), b), /*upper=*/true);
  } else {
    QrResult f = qr(A.mT(), "reduced");  // A^T = Q R, A = R^T Q^T
    x = matmul(f.Q, solve_triangular(f.R.mT(), b, /*upper=*/false));
  }
  return vec ? x.squeeze({-1}) : x;
}

Tensor pinv(const Tensor& A, const PinvOptions& o) {
  const char* api = "linalg.pinv";
  check_matrix(api, A, o.hermitian);
  const int64_t m = A.size(-2), n = A.size(-1);
  if (std::min(m, n) == 0) {
    Shape s = batch_shape(A);
    s.push_back(n);
    s.push_back(m);
    return zeros(s, {.dtype = A.dtype(), .device = A.device()});
  }
  if (o.hermitian) {
    EighResult e = eigh(A);
    Tensor aw = abs(e.eigenvalues);
    Tensor tol = tolerance(amax(aw, {-1}, true), o, m, n, A.dtype());
    Tensor winv = where(gt(aw, tol), reciprocal(e.eigenvalues), Scalar(0));
    return matmul(mul(e.eigenvectors, winv.unsqueeze(-2)), e.eigenvectors.mT());
  }
  SvdResult s = svd(A, false);
  Tensor tol = tolerance(amax(s.S, {-1}, true), o, m, n, A.dtype());
  Tensor sinv = where(gt(s.S, tol), reciprocal(s.S), Scalar(0));
  return matmul(mul(s.Vh.mT(), sinv.unsqueeze(-2)), s.U.mT());
}

Tensor matrix_rank(const Tensor& A, const PinvOptions& o) {
  const char* api = "linalg.matrix_rank";
  check_matrix(api, A, o.hermitian);
  const int64_t m = A.size(-2), n = A.size(-1);
  if (std::min(m, n) == 0) return zeros(batch_shape(A), {.dtype = i64, .device = A.device()});
  Tensor s = o.hermitian ? abs(eigvalsh(A)) : svdvals(A);
  Tensor tol = tolerance(amax(s, {-1}, true), o, m, n, A.dtype());
  return sum(gt(s, tol), {-1});
}

Tensor matrix_power(const Tensor& A, int64_t n) {
  const char* api = "linalg.matrix_power";
  detail::check_defined(api, A);
  KILN_CHECK(A.dim() >= 2 && A.size(-1) == A.size(-2), api,
             "expected a tensor of square matrices [..., n, n], got shape " << A.shape());
  if (n == 0) return eye_like(A).contiguous();
  Tensor base = A;
  if (n < 0) {
    check_matrix(api, A, true);
    base = inv(A);
    n = -n;
  }
  if (n == 1) return base.is_same_storage(A) ? base.clone() : base;
  Tensor result;
  while (n > 0) {
    if (n & 1) result = result.defined() ? matmul(result, base) : base;
    n >>= 1;
    if (n > 0) base = matmul(base, base);
  }
  return result;
}

namespace {
/// The two matrix dims of a matrix norm, wrapped and distinct.
std::pair<int64_t, int64_t> norm_dims(const char* api, const Tensor& A, const Dims& dim) {
  detail::check_defined(api, A);
  KILN_CHECK(dim.size() == 2, api, "dim must be a 2-tuple, got " << static_cast<long long>(dim.size()) << " dims");
  KILN_CHECK(A.dim() >= 2, api, "the input tensor A must have at least 2 dimensions, got shape " << A.shape());
  int64_t d0 = wrap_dim(dim[0], A.dim(), api), d1 = wrap_dim(dim[1], A.dim(), api);
  KILN_CHECK(d0 != d1, api, "dims must be different, got (" << dim[0] << ", " << dim[1] << ")");
  KILN_CHECK(is_floating(A.dtype()), api,
             "expected a floating point tensor as input, got " << dtype_name(A.dtype()).data());
  return {d0, d1};
}

/// Reduces the singular values of the matrices over (d0, d1) with f.
template <class F>
Tensor svd_norm(const Tensor& A, int64_t d0, int64_t d1, bool keepdim, const F& f) {
  Tensor s = svdvals(A.movedim({d0, d1}, {-2, -1}));
  Tensor r = f(s);
  return keepdim ? keep_dims(r, d0, d1) : r;
}
}  // namespace

Tensor matrix_norm(const Tensor& A, const std::string& ord, const Dims& dim, bool keepdim) {
  const char* api = "linalg.matrix_norm";
  auto [d0, d1] = norm_dims(api, A, dim);
  if (ord == "fro") return vector_norm(A, 2, {d0, d1}, keepdim);
  KILN_CHECK(ord == "nuc", api, "order '" << ord << "' not supported (expected 'fro' or 'nuc')");
  if (A.size(d0) == 0 || A.size(d1) == 0) return sum(A, {d0, d1}, keepdim);
  return svd_norm(A, d0, d1, keepdim, [](const Tensor& s) { return sum(s, {-1}); });
}

Tensor matrix_norm(const Tensor& A, double ord, const Dims& dim, bool keepdim) {
  const char* api = "linalg.matrix_norm";
  auto [d0, d1] = norm_dims(api, A, dim);
  const double a = std::abs(ord);
  KILN_CHECK(a == 1 || a == 2 || std::isinf(ord), api,
             "order " << ord << " not supported (expected 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2)");
  if (A.size(d0) == 0 || A.size(d1) == 0) return sum(A, {d0, d1}, keepdim);  // zeros, as PyTorch
  const bool mx = ord > 0;
  if (a == 2) return svd_norm(A, d0, d1, keepdim, [mx](const Tensor& s) { return mx ? amax(s, {-1}) : amin(s, {-1}); });
  // 1: column sums (over rows d0), then the extreme over columns d1; inf: the other way.
  const int64_t first = a == 1 ? d0 : d1, second = a == 1 ? d1 : d0;
  Tensor sums = sum(abs(A), {first}, true);
  Tensor r = mx ? amax(sums, {second}, true) : amin(sums, {second}, true);
  return keepdim ? r : r.squeeze({d0, d1});
}

Tensor vector_norm(const Tensor& x, double ord, const Dims& dim, bool keepdim) {
  const char* api = "linalg.vector_norm";
  detail::check_defined(api, x);
  KILN_CHECK(is_floating(x.dtype()), api,
             "expected a floating point tensor as input, got " << dtype_name(x.dtype()).data() << " (shape "
                                                               << x.shape() << ")");
  Dims nd = detail::normalize_dims(api, dim, x.dim());
  if (std::isinf(ord) && x.dim() > 0)
    for (auto d : nd)
      KILN_CHECK(x.size(d) > 0, api,
                 "expected a non-empty reduction for ord " << ord << ", but dim " << d << " of shape " << x.shape()
                                                           << " is empty");
  return kiln::norm(x, ord, nd, keepdim);
}

Tensor norm(const Tensor& x, std::optional<double> ord, const std::optional<Dims>& dim, bool keepdim) {
  const char* api = "linalg.norm";
  detail::check_defined(api, x);
  if (!ord) return vector_norm(x, 2, dim.value_or(Dims{}), keepdim);
  if (dim) {
    KILN_CHECK(dim->size() == 1 || dim->size() == 2, api,
               "dim must have 1 or 2 entries, got " << static_cast<long long>(dim->size()));
    return dim->size() == 1 ? vector_norm(x, *ord, *dim, keepdim) : matrix_norm(x, *ord, *dim, keepdim);
  }
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, api,
             "input must be 1-D or 2-D when dim is None and ord is not None, got shape " << x.shape());
  return x.dim() == 1 ? vector_norm(x, *ord, {}, keepdim) : matrix_norm(x, *ord, {-2, -1}, keepdim);
}

Tensor norm(const Tensor& x, double ord, const std::optional<Dims>& dim, bool keepdim) {
  return norm(x, std::optional<double>(ord), dim, keepdim);
}

Tensor norm(const Tensor& x, const std::string& ord, const std::optional<Dims>& dim, bool keepdim) {
  const char* api = "linalg.norm";
  detail::check_defined(api, x);
  KILN_CHECK(dim || x.dim() == 2, api,
             "input must be 2-D when dim is None and ord is '" << ord << "', got shape " << x.shape());
  return matrix_norm(x, ord, dim.value_or(Dims{-2, -1}), keepdim);
}

Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  const char* api = "linalg.cross";
  detail::check_defined(api, a);
  detail::check_defined(api, b);
  detail::check_same_device(api, a, b);
  DType dt = detail::result_type(a, b);
  std::vector<Tensor> ab = broadcast_tensors({detail::cast_if_needed(a, dt), detail::cast_if_needed(b, dt)});
  const int64_t d = wrap_dim(dim, ab[0].dim(), api);
  const int64_t back = d - ab[0].dim();  // the dim counted from the end
  auto len = [&](const Tensor& t) { return -back <= t.dim() ? t.size(back) : int64_t{1}; };
  KILN_CHECK(len(a) == 3 && len(b) == 3, api,
             "inputs dimension " << dim << " must have length 3. Got " << len(a) << " and " << len(b));
  auto c = [&](const Tensor& t, int64_t i) { return t.narrow(d, i, 1); };
  const Tensor &x = ab[0], &y = ab[1];
  return cat({sub(mul(c(x, 1), c(y, 2)), mul(c(x, 2), c(y, 1))), sub(mul(c(x, 2), c(y, 0)), mul(c(x, 0), c(y, 2))),
              sub(mul(c(x, 0), c(y, 1)), mul(c(x, 1), c(y, 0)))},
             d);
}

}  // namespace linalg
}  // namespace kiln
