// SPDX-License-Identifier: MIT OR Apache-2.0
// Linalg kernels: LU with partial pivoting, Cholesky, triangular solve and Householder QR.
// Portable C++ on purpose (no LAPACK: the portable build targets WebAssembly and bare metal).
// Every matrix is copied into an f64 work buffer (any strides, f32 computed in f64), factored
// there, and written back; the batch runs in parallel, one matrix per task.
// SVD and the symmetric eigensolver are in linalg_eig.cpp.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_util.h"
#include "ir/attrs.h"
#include "kiln/error.h"

namespace kiln::cpu {

using namespace linalg;

namespace {

Shape batch_of(const ir::TensorDesc& d) { return Shape(d.shape.begin(), d.shape.end() - 2); }

template <class T>
void lu_factor(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& a = op.inputs[0];
  const Shape batch = batch_of(a);
  const int64_t m = a.shape[a.shape.size() - 2], n = a.shape[a.shape.size() - 1], k = std::min(m, n);
  const int64_t nb = shape_numel(batch);
  std::vector<int64_t> offs = batch_offsets(a, batch);
  const T* src = reinterpret_cast<const T*>(base_ptr(in[0], a));
  T* lu = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  int64_t* piv = reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1]));
  int64_t* info = reinterpret_cast<int64_t*>(base_ptr(out[2], op.outputs[2]));
  int64_t* perm = reinterpret_cast<int64_t*>(base_ptr(out[3], op.outputs[3]));
  const int64_t rs = row_stride(a), cs = col_stride(a);
  for_each_matrix(nb, static_cast<double>(m) * n * k, [&](int64_t b) {
    std::vector<double> w(static_cast<size_t>(m * n));
    double* A = w.data();
    load(src + offs[static_cast<size_t>(b)], rs, cs, m, n, A, n, false);
    int64_t* pv = piv + b * k;
    int64_t* pm = perm + b * m;
    for (int64_t i = 0; i < m; ++i) pm[i] = i;
    int64_t inf = 0;
    for (int64_t j = 0; j < k; ++j) {
      // Pivot: the first entry of largest magnitude in column j at or below the diagonal.
      int64_t p = j;
      double best = std::abs(A[j * n + j]);
      for (int64_t i = j + 1; i < m; ++i) {
        double v = std::abs(A[i * n + j]);
        if (v > best) best = v, p = i;
      }
      pv[j] = p;
      if (p != j) {
        std::swap_ranges(A + j * n, A + j * n + n, A + p * n);
        std::swap(pm[j], pm[p]);
      }
      const double d = A[j * n + j];
      if (d != 0) {
        for (int64_t i = j + 1; i < m; ++i) A[i * n + j] /= d;
      } else if (inf == 0) {
        inf = j + 1;
      }
      for (int64_t i = j + 1; i < m; ++i) {
        double l = A[i * n + j];
        if (l != 0) axpy(-l, A + j * n + j + 1, A + i * n + j + 1, n - j - 1);
      }
    }
    info[b] = inf;
    store(A, n, false, m, n, lu + b * m * n);
  });
}

template <class T>
void cholesky(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& a = op.inputs[0];
  const Shape batch = batch_of(a);
  const int64_t n = a.shape.back(), nb = shape_numel(batch);
  const bool upper = ir::LinalgAttrs::decode(op).upper;
  std::vector<int64_t> offs = batch_offsets(a, batch);
  const T* src = reinterpret_cast<const T*>(base_ptr(in[0], a));
  T* res = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  int64_t* info = reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1]));
  // The upper factor of A is the transpose of the lower factor of A read through its upper
  // triangle: load the transpose and solve the lower problem.
  const int64_t rs = upper ? col_stride(a) : row_stride(a), cs = upper ? row_stride(a) : col_stride(a);
  for_each_matrix(nb, static_cast<double>(n) * n * n / 3, [&](int64_t b) {
    std::vector<double> w(static_cast<size_t>(n * n), 0.0);
    double* L = w.data();
    const T* s = src + offs[static_cast<size_t>(b)];
    int64_t inf = 0;
    for (int64_t i = 0; i < n && inf == 0; ++i) {
      double* li = L + i * n;
      for (int64_t j = 0; j <= i; ++j) {
        double v = static_cast<double>(s[i * rs + j * cs]) - dot(li, L + j * n, j);
        if (j < i) {
          li[j] = v / L[j * n + j];
        } else if (v > 0) {
          li[i] = std::sqrt(v);
        } else {  // also NaN
          inf = i + 1;
          li[i] = v;
        }
      }
    }
    info[b] = inf;
    store(L, n, upper, n, n, res + b * n * n);
  });
}

template <class T>
void triangular_solve(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& a = op.inputs[0];
  const ir::TensorDesc& bd = op.inputs[1];
  const ir::TensorDesc& od = op.outputs[0];
  const Shape batch = batch_of(od);
  const int64_t nb = shape_numel(batch), n = a.shape.back();
  const ir::LinalgAttrs at = ir::LinalgAttrs::decode(op);
  const bool upper0 = at.upper, left = at.left, unit = at.unitriangular;
  // A right solve x a = b is the left solve a^T x^T = b^T: transpose both on load.
  const bool upper = left ? upper0 : !upper0;
  const int64_t k = left ? od.shape.back() : od.shape[od.shape.size() - 2];
  std::vector<int64_t> aoff = batch_offsets(a, batch), boff = batch_offsets(bd, batch);
  const T* pa = reinterpret_cast<const T*>(base_ptr(in[0], a));
  const T* pb = reinterpret_cast<const T*>(base_ptr(in[1], bd));
  T* px = reinterpret_cast<T*>(base_ptr(out[0], od));
  for_each_matrix(nb, static_cast<double>(n) * n * std::max<int64_t>(k, 1), [&](int64_t b) {
    std::vector<double> wa(static_cast<size_t>(n * n)), wb(static_cast<size_t>(n * k));
    double* A = wa.data();
    double* X = wb.data();
    load(pa + aoff[static_cast<size_t>(b)], row_stride(a), col_stride(a), n, n, A, n, !left);
    if (left)
      load(pb + boff[static_cast<size_t>(b)], row_stride(bd), col_stride(bd), n, k, X, k, false);
    else
      load(pb + boff[static_cast<size_t>(b)], row_stride(bd), col_stride(bd), k, n, X, k, true);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t i = upper ? n - 1 - s : s;
      double* xi = X + i * k;
      if (upper) {
        for (int64_t j = i + 1; j < n; ++j)
          if (A[i * n + j] != 0) axpy(-A[i * n + j], X + j * k, xi, k);
      } else {
        for (int64_t j = 0; j < i; ++j)
          if (A[i * n + j] != 0) axpy(-A[i * n + j], X + j * k, xi, k);
      }
      if (!unit) {
        const double d = A[i * n + i];
        for (int64_t c = 0; c < k; ++c) xi[c] /= d;
      }
    }
    if (left)
      store(X, k, false, n, k, px + b * n * k);
    else
      store(X, k, true, k, n, px + b * n * k);
  });
}

template <class T>
void qr(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& a = op.inputs[0];
  const Shape batch = batch_of(a);
  const int64_t m = a.shape[a.shape.size() - 2], n = a.shape.back(), k = std::min(m, n), nb = shape_numel(batch);
  const int64_t mode = ir::LinalgAttrs::decode(op).qr_mode;
  const int64_t qc = mode == 1 ? m : k;  // columns of Q
  const int64_t rr = mode == 1 ? m : k;  // rows of R
  std::vector<int64_t> offs = batch_offsets(a, batch);
  const T* src = reinterpret_cast<const T*>(base_ptr(in[0], a));
  T* pq = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  T* pr = reinterpret_cast<T*>(base_ptr(out[1], op.outputs[1]));
  for_each_matrix(nb, 2.0 * m * n * k, [&](int64_t b) {
    // Column-major work copy: column j is A + j * m (contiguous for the reflector updates).
    std::vector<double> wa(static_cast<size_t>(m * n)), tau(static_cast<size_t>(k));
    double* A = wa.data();
    load(src + offs[static_cast<size_t>(b)], row_stride(a), col_stride(a), m, n, A, m, true);
    for (int64_t j = 0; j < k; ++j) {
      // Reflector H = I - tau v v^T with v = [1, x / (alpha - beta)], as LAPACK's dlarfg.
      double* c = A + j * m;
      const double alpha = c[j];
      double xn = 0;
      for (int64_t i = j + 1; i < m; ++i) xn = std::hypot(xn, c[i]);
      if (xn == 0) {
        tau[static_cast<size_t>(j)] = 0;
        continue;
      }
      const double beta = -std::copysign(std::hypot(alpha, xn), alpha);
      const double t = (beta - alpha) / beta, sc = 1.0 / (alpha - beta);
      tau[static_cast<size_t>(j)] = t;
      for (int64_t i = j + 1; i < m; ++i) c[i] *= sc;
      c[j] = beta;
      for (int64_t l = j + 1; l < n; ++l) {
        double* cl = A + l * m;
        double w = t * (cl[j] + dot(c + j + 1, cl + j + 1, m - j - 1));
        cl[j] -= w;
        axpy(-w, c + j + 1, cl + j + 1, m - j - 1);
      }
    }
    T* R = pr + b * rr * n;
    for (int64_t i = 0; i < rr; ++i)
      for (int64_t l = 0; l < n; ++l) R[i * n + l] = static_cast<T>(l >= i && i < m ? A[l * m + i] : 0.0);
    if (mode == 2) return;
    // Q = H_0 ... H_{k-1} applied to the first qc columns of I, accumulated backwards.
    std::vector<double> wq(static_cast<size_t>(m * qc), 0.0);
    double* Q = wq.data();
    for (int64_t j = 0; j < qc; ++j) Q[j * m + j] = 1;
    for (int64_t j = k; j-- > 0;) {
      const double t = tau[static_cast<size_t>(j)];
      if (t == 0) continue;
      const double* v = A + j * m;
      for (int64_t l = j; l < qc; ++l) {
        double* ql = Q + l * m;
        double w = t * (ql[j] + dot(v + j + 1, ql + j + 1, m - j - 1));
        ql[j] -= w;
        axpy(-w, v + j + 1, ql + j + 1, m - j - 1);
      }
    }
    store(Q, m, true, m, qc, pq + b * m * qc);
  });
}

}  // namespace

#define KILN_LINALG_SWITCH_(op, fn)                                                            \
  do {                                                                                         \
    DType dt_ = (op).inputs[0].dtype;                                                          \
    if (dt_ == DType::F32)                                                                     \
      fn<float>(op, in, out);                                                                  \
    else if (dt_ == DType::F64)                                                                \
      fn<double>(op, in, out);                                                                 \
    else                                                                                       \
      KILN_CHECK(false, ir::op_name((op).kind).data(),                                         \
                 "unsupported dtype " << dtype_name(dt_).data() << " (float32/float64 only)"); \
  } while (0)

void k_LuFactor(const ir::Op& op, void* const* in, void* const* out) { KILN_LINALG_SWITCH_(op, lu_factor); }
void k_Cholesky(const ir::Op& op, void* const* in, void* const* out) { KILN_LINALG_SWITCH_(op, cholesky); }
void k_Qr(const ir::Op& op, void* const* in, void* const* out) { KILN_LINALG_SWITCH_(op, qr); }
void k_TriangularSolve(const ir::Op& op, void* const* in, void* const* out) {
  KILN_LINALG_SWITCH_(op, triangular_solve);
}

}  // namespace kiln::cpu
