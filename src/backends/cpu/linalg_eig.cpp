// SPDX-License-Identifier: MIT OR Apache-2.0
// Linalg kernels: SVD (one-sided Jacobi) and the symmetric eigensolver (Householder
// tridiagonalisation + implicit QL, after EISPACK's tred2/tql2). Portable C++, computed in f64.
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_util.h"
#include "ir/attrs.h"
#include "kiln/error.h"

namespace kiln::cpu {

using namespace linalg;

namespace {

Shape batch_of(const ir::TensorDesc& d) { return Shape(d.shape.begin(), d.shape.end() - 2); }

bool all_finite(const double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

/// Columns of the column-major rows x cols matrix Q (column j at Q + j * rows) marked invalid
/// are replaced by unit vectors orthogonal to every valid column (and to each other).
void complete_basis(double* Q, int64_t rows, int64_t cols, std::vector<char>& valid) {
  int64_t cand = 0;
  std::vector<double> r(static_cast<size_t>(rows));
  for (int64_t j = 0; j < cols; ++j) {
    if (valid[static_cast<size_t>(j)]) continue;
    for (; cand < rows; ++cand) {
      std::fill(r.begin(), r.end(), 0.0);
      r[static_cast<size_t>(cand)] = 1;
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t c = 0; c < cols; ++c)
          if (valid[static_cast<size_t>(c)]) axpy(-dot(Q + c * rows, r.data(), rows), Q + c * rows, r.data(), rows);
      double nr = std::sqrt(dot(r.data(), r.data(), rows));
      if (nr > 0.5) {
        for (int64_t i = 0; i < rows; ++i) Q[j * rows + i] = r[static_cast<size_t>(i)] / nr;
        valid[static_cast<size_t>(j)] = 1;
        ++cand;
        break;
      }
    }
  }
}

/// One-sided Jacobi SVD of the column-major M x N matrix G (M >= N), in place: on return the
/// columns of G are U_j * s_j (mutually orthogonal) and V (N x N, column-major) holds the
/// accumulated rotations, so that A = G V^T.
void jacobi_svd(double* G, int64_t M, int64_t N, double* V, bool want_v) {
  if (want_v) {
    std::fill(V, V + N * N, 0.0);
    for (int64_t j = 0; j < N; ++j) V[j * N + j] = 1;
  }
  const double tol = std::numeric_limits<double>::epsilon() * std::max<double>(1.0, std::sqrt(static_cast<double>(M)));
  std::vector<double> nrm(static_cast<size_t>(N));
  for (int sweep = 0; sweep < 80; ++sweep) {
    bool rotated = false;
    for (int64_t j = 0; j < N; ++j) nrm[static_cast<size_t>(j)] = dot(G + j * M, G + j * M, M);
    for (int64_t p = 0; p + 1 < N; ++p) {
      double* gp = G + p * M;
      for (int64_t q = p + 1; q < N; ++q) {
        double* gq = G + q * M;
        const double alpha = nrm[static_cast<size_t>(p)], beta = nrm[static_cast<size_t>(q)];
        if (alpha == 0 || beta == 0) continue;
        const double gamma = dot(gp, gq, M);
        if (!(std::abs(gamma) > tol * std::sqrt(alpha) * std::sqrt(beta))) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = std::copysign(1.0, zeta) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int64_t i = 0; i < M; ++i) {
          const double x = gp[i], y = gq[i];
          gp[i] = c * x - s * y;
          gq[i] = s * x + c * y;
        }
        if (want_v) {
          double* vp = V + p * N;
          double* vq = V + q * N;
          for (int64_t i = 0; i < N; ++i) {
            const double x = vp[i], y = vq[i];
            vp[i] = c * x - s * y;
            vq[i] = s * x + c * y;
          }
        }
        nrm[static_cast<size_t>(p)] = alpha - t * gamma;
        nrm[static_cast<size_t>(q)] = beta + t * gamma;
      }
    }
    if (!rotated) break;
  }
}

template <class T>
void svd(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& a = op.inputs[0];
  const Shape batch = batch_of(a);
  const int64_t m = a.shape[a.shape.size() - 2], n = a.shape.back(), k = std::min(m, n), nb = shape_numel(batch);
  const ir::LinalgAttrs at = ir::LinalgAttrs::decode(op);
  const bool full = at.full_matrices, uv = at.compute_uv;
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  // Work on A (m >= n) or on A^T (m < n): M x N with M >= N, columns contiguous.
  const bool tr = m < n;
  const int64_t M = tr ? n : m, N = tr ? m : n;
  std::vector<int64_t> offs = batch_offsets(a, batch);
  const T* src = reinterpret_cast<const T*>(base_ptr(in[0], a));
  T* pu = uv ? reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0])) : nullptr;
  T* ps = reinterpret_cast<T*>(base_ptr(out[1], op.outputs[1]));
  T* pv = uv ? reinterpret_cast<T*>(base_ptr(out[2], op.outputs[2])) : nullptr;
  const int64_t rs = row_stride(a), cs = col_stride(a);
  for_each_matrix(nb, 8.0 * M * N * N, [&](int64_t b) {
    // G column j = column j of A (or row j of A when tr); load(transpose) writes dst[j*ld+i].
    const int64_t gcols = (uv && full) ? M : N;  // columns of the long side's basis
    std::vector<double> wg(static_cast<size_t>(M * N)), wv(uv ? static_cast<size_t>(N * N) : 0);
    double* G = wg.data();
    double* V = wv.data();
    if (tr)
      load(src + offs[static_cast<size_t>(b)], rs, cs, m, n, G, M, false);  // G[i*M + j] = A(i, j): col i = row i
    else
      load(src + offs[static_cast<size_t>(b)], rs, cs, m, n, G, M, true);
    T* S = ps + b * k;
    T* U = uv ? pu + b * m * ucols : nullptr;
    T* Vh = uv ? pv + b * vrows * n : nullptr;
    if (!all_finite(G, M * N)) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      std::fill(S, S + k, nan);
      if (uv) std::fill(U, U + m * ucols, nan), std::fill(Vh, Vh + vrows * n, nan);
      return;
    }
    jacobi_svd(G, M, N, V, uv);
    std::vector<double> sv(static_cast<size_t>(N));
    for (int64_t j = 0; j < N; ++j) sv[static_cast<size_t>(j)] = std::sqrt(dot(G + j * M, G + j * M, M));
    std::vector<int64_t> ord(static_cast<size_t>(N));
    std::iota(ord.begin(), ord.end(), 0);
    std::stable_sort(ord.begin(), ord.end(),
                     [&](int64_t x, int64_t y) { return sv[static_cast<size_t>(x)] > sv[static_cast<size_t>(y)]; });
    for (int64_t j = 0; j < k; ++j) S[j] = static_cast<T>(sv[static_cast<size_t>(ord[static_cast<size_t>(j)])]);
    if (!uv) return;
    // The long side's vectors: normalised columns of G in order, completed to gcols columns.
    std::vector<double> wl(static_cast<size_t>(M * gcols), 0.0);
    double* Lq = wl.data();
    std::vector<char> valid(static_cast<size_t>(gcols), 0);
    for (int64_t j = 0; j < N; ++j) {
      const int64_t o = ord[static_cast<size_t>(j)];
      const double s = sv[static_cast<size_t>(o)];
      if (s > std::numeric_limits<double>::min()) {
        for (int64_t i = 0; i < M; ++i) Lq[j * M + i] = G[o * M + i] / s;
        valid[static_cast<size_t>(j)] = 1;
      }
    }
    complete_basis(Lq, M, gcols, valid);
    // The short side's vectors: columns of V, in order (N x N).
    // Not tr: U = Lq (m x ucols), Vh row j = V column ord[j]. tr: U = V (ordered), Vh = Lq^T.
    if (!tr) {
      store(Lq, M, true, m, ucols, U);
      for (int64_t j = 0; j < vrows; ++j)
        for (int64_t i = 0; i < n; ++i) Vh[j * n + i] = static_cast<T>(V[ord[static_cast<size_t>(j)] * N + i]);
    } else {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < ucols; ++j) U[i * ucols + j] = static_cast<T>(V[ord[static_cast<size_t>(j)] * N + i]);
      store(Lq, M, false, vrows, n, Vh);
    }
  });
}

/// Householder reduction of the symmetric n x n matrix in V (full, symmetric) to tridiagonal
/// form: d = diagonal, e = subdiagonal (e[0] = 0); V becomes the orthogonal transform, stored
/// transposed (row j of the buffer is column j of the transform), which makes the inner loops
/// below contiguous. (EISPACK tred2, as in JAMA, with at(i, j) the transform's element.)
void tred2(double* V, int64_t n, double* d, double* e) {
  auto at = [&](int64_t i, int64_t j) -> double& { return V[j * n + i]; };
  for (int64_t j = 0; j < n; ++j) d[j] = at(n - 1, j);
  for (int64_t i = n - 1; i > 0; --i) {
    double scale = 0, h = 0;
    for (int64_t q = 0; q < i; ++q) scale += std::abs(d[q]);
    if (scale == 0) {
      e[i] = d[i - 1];
      for (int64_t j = 0; j < i; ++j) {
        d[j] = at(i - 1, j);
        at(i, j) = 0;
        at(j, i) = 0;
      }
    } else {
      for (int64_t q = 0; q < i; ++q) {
        d[q] /= scale;
        h += d[q] * d[q];
      }
      double f = d[i - 1];
      double g = std::sqrt(h);
      if (f > 0) g = -g;
      e[i] = scale * g;
      h -= f * g;
      d[i - 1] = f - g;
      for (int64_t j = 0; j < i; ++j) e[j] = 0;
      for (int64_t j = 0; j < i; ++j) {
        f = d[j];
        at(j, i) = f;
        g = e[j] + at(j, j) * f;
        for (int64_t q = j + 1; q <= i - 1; ++q) {
          g += at(q, j) * d[q];
          e[q] += at(q, j) * f;
        }
        e[j] = g;
      }
      f = 0;
      for (int64_t j = 0; j < i; ++j) {
        e[j] /= h;
        f += e[j] * d[j];
      }
      const double hh = f / (h + h);
      for (int64_t j = 0; j < i; ++j) e[j] -= hh * d[j];
      for (int64_t j = 0; j < i; ++j) {
        f = d[j];
        g = e[j];
        for (int64_t q = j; q <= i - 1; ++q) at(q, j) -= (f * e[q] + g * d[q]);
        d[j] = at(i - 1, j);
        at(i, j) = 0;
      }
    }
    d[i] = h;
  }
  for (int64_t i = 0; i < n - 1; ++i) {
    at(n - 1, i) = at(i, i);
    at(i, i) = 1;
    const double h = d[i + 1];
    if (h != 0) {
      for (int64_t q = 0; q <= i; ++q) d[q] = at(q, i + 1) / h;
      for (int64_t j = 0; j <= i; ++j) {
        double g = 0;
        for (int64_t q = 0; q <= i; ++q) g += at(q, i + 1) * at(q, j);
        for (int64_t q = 0; q <= i; ++q) at(q, j) -= g * d[q];
      }
    }
    for (int64_t q = 0; q <= i; ++q) at(q, i + 1) = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    d[j] = at(n - 1, j);
    at(n - 1, j) = 0;
  }
  at(n - 1, n - 1) = 1;
  e[0] = 0;
}

/// Implicit QL on the tridiagonal (d, e from tred2), rotating the rows of W = V^T (row-major
/// n x n; W row j ends as eigenvector j). Eigenvalues ascending in d. (EISPACK tql2.)
void tql2(double* W, int64_t n, double* d, double* e, bool want_v) {
  for (int64_t i = 1; i < n; ++i) e[i - 1] = e[i];
  e[n - 1] = 0;
  double f = 0, tst1 = 0;
  const double eps = std::numeric_limits<double>::epsilon();
  for (int64_t l = 0; l < n; ++l) {
    tst1 = std::max(tst1, std::abs(d[l]) + std::abs(e[l]));
    int64_t m = l;
    while (m < n - 1 && !(std::abs(e[m]) <= eps * tst1)) ++m;
    if (m > l) {
      int iter = 0;
      do {
        ++iter;
        double g = d[l];
        double p = (d[l + 1] - g) / (2 * e[l]);
        double r = std::hypot(p, 1.0);
        if (p < 0) r = -r;
        d[l] = e[l] / (p + r);
        d[l + 1] = e[l] * (p + r);
        const double dl1 = d[l + 1];
        double h = g - d[l];
        for (int64_t i = l + 2; i < n; ++i) d[i] -= h;
        f += h;
        p = d[m];
        double c = 1, c2 = 1, c3 = 1, s = 0, s2 = 0;
        const double el1 = e[l + 1];
        for (int64_t i = m - 1; i >= l; --i) {
          c3 = c2;
          c2 = c;
          s2 = s;
          g = c * e[i];
          h = c * p;
          r = std::hypot(p, e[i]);
          e[i + 1] = s * r;
          s = e[i] / r;
          c = p / r;
          p = c * d[i] - s * g;
          d[i + 1] = h + s * (c * g + s * d[i]);
          if (want_v) {
            double* wi = W + i * n;
            double* wi1 = W + (i + 1) * n;
            for (int64_t q = 0; q < n; ++q) {
              const double x = wi1[q];
              wi1[q] = s * wi[q] + c * x;
              wi[q] = c * wi[q] - s * x;
            }
          }
        }
        p = -s * s2 * c3 * el1 * e[l] / dl1;
        e[l] = s * p;
        d[l] = c * p;
      } while (std::abs(e[l]) > eps * tst1 && iter < 64);
    }
    d[l] += f;
    e[l] = 0;
  }
  // Selection sort ascending, swapping eigenvector rows along.
  for (int64_t i = 0; i + 1 < n; ++i) {
    int64_t q = i;
    double p = d[i];
    for (int64_t j = i + 1; j < n; ++j)
      if (d[j] < p) q = j, p = d[j];
    if (q != i) {
      d[q] = d[i];
      d[i] = p;
      if (want_v) std::swap_ranges(W + i * n, W + i * n + n, W + q * n);
    }
  }
}

template <class T>
void eigh(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& a = op.inputs[0];
  const Shape batch = batch_of(a);
  const int64_t n = a.shape.back(), nb = shape_numel(batch);
  const ir::LinalgAttrs at = ir::LinalgAttrs::decode(op);
  const bool upper = at.upper, want_v = at.compute_v;
  std::vector<int64_t> offs = batch_offsets(a, batch);
  const T* src = reinterpret_cast<const T*>(base_ptr(in[0], a));
  T* pw = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  T* pv = want_v ? reinterpret_cast<T*>(base_ptr(out[1], op.outputs[1])) : nullptr;
  const int64_t rs = row_stride(a), cs = col_stride(a);
  for_each_matrix(nb, 10.0 * n * n * n, [&](int64_t b) {
    if (n == 0) return;
    std::vector<double> wv(static_cast<size_t>(n * n)), d(static_cast<size_t>(n)), e(static_cast<size_t>(n));
    double* V = wv.data();
    const T* s = src + offs[static_cast<size_t>(b)];
    // Symmetric copy from the chosen triangle.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double v = upper ? static_cast<double>(s[j * rs + i * cs]) : static_cast<double>(s[i * rs + j * cs]);
        V[i * n + j] = V[j * n + i] = v;
      }
    T* w = pw + b * n;
    T* vec = want_v ? pv + b * n * n : nullptr;
    if (!all_finite(V, n * n)) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      std::fill(w, w + n, nan);
      if (want_v) std::fill(vec, vec + n * n, nan);
      return;
    }
    tred2(V, n, d.data(), e.data());
    double* W = V;  // tred2 leaves the transform transposed: W = V^T, as tql2 wants
    tql2(W, n, d.data(), e.data(), want_v);
    for (int64_t i = 0; i < n; ++i) w[i] = static_cast<T>(d[static_cast<size_t>(i)]);
    if (want_v) store(W, n, true, n, n, vec);
  });
}

}  // namespace

void k_Svd(const ir::Op& op, void* const* in, void* const* out) {
  DType dt = op.inputs[0].dtype;
  if (dt == DType::F32)
    svd<float>(op, in, out);
  else if (dt == DType::F64)
    svd<double>(op, in, out);
  else
    KILN_CHECK(false, "Svd", "unsupported dtype " << dtype_name(dt).data() << " (float32/float64 only)");
}

void k_Eigh(const ir::Op& op, void* const* in, void* const* out) {
  DType dt = op.inputs[0].dtype;
  if (dt == DType::F32)
    eigh<float>(op, in, out);
  else if (dt == DType::F64)
    eigh<double>(op, in, out);
  else
    KILN_CHECK(false, "Eigh", "unsupported dtype " << dtype_name(dt).data() << " (float32/float64 only)");
}

}  // namespace kiln::cpu
