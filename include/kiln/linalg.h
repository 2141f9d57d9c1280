// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Linear algebra (kiln::linalg), named and behaving as torch.linalg. Matrices are the last two
// dims of a tensor [..., m, n]; leading dims are a batch (broadcast where PyTorch broadcasts).
// Factorisations take float32/float64 (computed in f64 internally) and any strides; n = 0
// matrices work as in PyTorch. Errors (singular, not positive-definite, not square, bad dtype)
// throw kiln::Error("[linalg.<op>] ..."). Implemented in portable C++ (no LAPACK).
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

/// Sum of the main diagonal of a 2-d tensor (torch.trace): 0-d; integers sum to i64.
Tensor trace(const Tensor& x);

namespace linalg {

/// LU factorisation with partial pivoting (torch.linalg.lu_factor): A [..., m, n] ->
/// LU [..., m, n] (unit L below the diagonal, U on and above) and pivots int32 [..., min(m, n)]
/// (1-based, LAPACK style: row i was swapped with row pivots[i]). Throws for a singular square A.
struct LuFactorResult {
  Tensor LU, pivots;
};
LuFactorResult lu_factor(const Tensor& A);

/// Inverse of square matrices [..., n, n]; throws when a matrix is singular.
Tensor inv(const Tensor& A);
/// Determinant [..., n, n] -> [...] (0 for singular matrices).
Tensor det(const Tensor& A);
/// sign and log|det| [..., n, n] -> ([...], [...]); singular: sign 0, logabsdet -inf.
struct SlogdetResult {
  Tensor sign, logabsdet;
};
SlogdetResult slogdet(const Tensor& A);

/// Solves A X = B (left) or X A = B (!left). A [..., n, n]; B [..., n, k], or a vector [..., n]
/// when B is 1-d or B's shape is A's batch shape + [n] (as PyTorch). Batch dims broadcast.
/// Throws when A is singular.
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);

/// Solves the triangular system A X = B (left) or X A = B. A [..., n, n] (only its upper or
/// lower triangle is read; unitriangular assumes ones on the diagonal); B [..., n, k] (left)
/// or [..., k, n]. Batch dims broadcast. No singularity check (zeros on the diagonal give inf/NaN).
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true, bool unitriangular = false);

/// Cholesky factor of symmetric positive-definite [..., n, n]: L (A = L L^T) or, with upper,
/// U (A = U^T U). Reads only the lower (upper) triangle. Throws when not positive-definite.
Tensor cholesky(const Tensor& A, bool upper = false);

/// QR of [..., m, n] with k = min(m, n). mode "reduced": Q [..., m, k], R [..., k, n];
/// "complete": Q [..., m, m], R [..., m, n]; "r": Q empty [0], R [..., k, n].
/// Signs follow LAPACK's Householder convention (as PyTorch on the CPU).
struct QrResult {
  Tensor Q, R;
};
QrResult qr(const Tensor& A, const std::string& mode = "reduced");

/// SVD A = U diag(S) Vh of [..., m, n], S descending [..., k]. full_matrices: U [..., m, m],
/// Vh [..., n, n]; else U [..., m, k], Vh [..., k, n]. Singular vectors are unique up to sign.
struct SvdResult {
  Tensor U, S, Vh;
};
SvdResult svd(const Tensor& A, bool full_matrices = true);
/// Singular values [..., k], descending.
Tensor svdvals(const Tensor& A);

/// Eigen-decomposition of symmetric [..., n, n] (reads the lower triangle for UPLO "L", the
/// upper for "U"): eigenvalues ascending [..., n], eigenvectors as columns [..., n, n].
struct EighResult {
  Tensor eigenvalues, eigenvectors;
};
EighResult eigh(const Tensor& A, const std::string& UPLO = "L");
/// Eigenvalues only, ascending [..., n].
Tensor eigvalsh(const Tensor& A, const std::string& UPLO = "L");

/// Least squares min ||A X - B|| for A [..., m, n] of full rank; B [..., m, k] or [..., m].
/// Tall or square A (m >= n): via QR, X = R^-1 Q^T B. Wide A (m < n): the minimum-norm
/// solution via the QR of A^T. For rank-deficient A use pinv(A) matmul B.
Tensor lstsq(const Tensor& A, const Tensor& B);

/// Options of pinv: singular values below max(atol, rtol * largest) count as zero. With neither
/// given, rtol = eps(dtype) * max(m, n). hermitian: A is symmetric (uses eigh, lower triangle).
struct PinvOptions {
  std::optional<double> atol, rtol;
  bool hermitian = false;
};
/// Moore-Penrose pseudo-inverse [..., m, n] -> [..., n, m].
Tensor pinv(const Tensor& A, const PinvOptions& o = {});

/// Numerical rank [..., m, n] -> i64 [...] (singular values above the tolerance of pinv).
Tensor matrix_rank(const Tensor& A, const PinvOptions& o = {});

/// A^n for square [..., n, n] (any dtype matmul takes); n = 0 gives the identity, n < 0 the
/// power of inv(A) (float only).
Tensor matrix_power(const Tensor& A, int64_t n);

/// Matrix norms over dims (2 of them, default the last two): ord "fro" or "nuc".
Tensor matrix_norm(const Tensor& A, const std::string& ord = "fro", const Dims& dim = {-2, -1}, bool keepdim = false);
/// ord inf / -inf (max / min row sum of |a|), 1 / -1 (column sums), 2 / -2 (largest / smallest
/// singular value).
Tensor matrix_norm(const Tensor& A, double ord, const Dims& dim = {-2, -1}, bool keepdim = false);

/// Vector norm over dims (all when empty): sum(|x|^ord)^(1/ord); ord inf = max |x|, -inf =
/// min |x|, 0 = number of non-zeros. Float inputs only.
Tensor vector_norm(const Tensor& x, double ord = 2, const Dims& dim = {}, bool keepdim = false);

/// torch.linalg.norm: without ord, the 2-norm of the flattened x (or a vector norm over dim);
/// with a numeric ord: a vector norm for 1 dim (or 1-d x), a matrix norm for 2 dims (or 2-d x).
Tensor norm(const Tensor& x, std::optional<double> ord = {}, const std::optional<Dims>& dim = {}, bool keepdim = false);
Tensor norm(const Tensor& x, double ord, const std::optional<Dims>& dim = {}, bool keepdim = false);
/// Matrix norm "fro" / "nuc" over dim (default: x must be 2-d).
Tensor norm(const Tensor& x, const std::string& ord, const std::optional<Dims>& dim = {}, bool keepdim = false);

/// Cross product of 3-vectors along dim (inputs broadcast; size 3 there).
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim = -1);

}  // namespace linalg
}  // namespace kiln
