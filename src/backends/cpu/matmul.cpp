// SPDX-License-Identifier: MIT OR Apache-2.0
// MatMul kernel: batched [B, M, K] x [B, K, N] [+ bias [N]] -> [B, M, N] over any strides (a
// batch stride may be 0). A bias is written into the result's rows first and the product
// accumulated onto it (beta = 1). f32 runs through oneDNN's sgemm when that path is on and the
// layouts allow it, otherwise through Kiln's packed GEMM (gemm.h); f64 through the packed GEMM;
// f16/bf16 are widened to f32, multiplied and rounded once; integers use exact wrapping loops.
#include <type_traits>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/onednn.h"
#include "core/machine.h"
#include "core/parallel.h"

namespace kiln::cpu {

namespace {

/// One operand of a batched product: matrix b starts at p + b * bs.
template <class T>
struct Mat {
  const T* p;
  int64_t bs, rs, cs;
};

/// Runs f(batch) for every batch: spread over the threads (each product single-threaded) when
/// the batches split evenly over them or the matrices are small, else one at a time (each
/// product parallel inside). The products are thread-count independent, so either way the
/// result is too.
template <class F>
void for_batches(int64_t nb, int64_t M, int64_t N, int64_t K, const F& f) {
  // Sizes from the work that pays for a thread on this machine (machine.h; 64^3 on the
  // reference: one product alone from 128^3, at least 32^3 of work per task). Whole products
  // per thread need no split and no join inside each product: 32 x 128^3 at 2 threads went
  // from 254 to 304 GFLOP/s, 32 x 192^3 from 277 to 321, 16 x 256^3 from 305 to 320 (timed
  // alone, Intel Xeon); a batch that does not split evenly (3 over 2 threads) keeps the per-product split.
  const double work = double(M) * double(N) * double(K), per_thread = tuning().gemm_thread_work;
  const int64_t nt = num_threads();
  const bool even = nb >= nt && (nb % nt == 0 || nb >= 4 * nt);
  if (nb == 1 || (work >= 8 * per_thread && !even)) {
    for (int64_t b = 0; b < nb; ++b) f(b);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(per_thread / 8 / std::max(work, 1.0)));
  parallel_for(nb, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b);
  });
}

/// Writes N bias values (stride bstride) into every row of C (M rows), split over the threads for
/// a large result (inline inside a parallel region, such as for_batches' own split).
template <class T>
void fill_rows(int64_t M, int64_t N, const T* bias, int64_t bstride, T* C, int64_t rsc, int64_t csc) {
  parallel_for(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t n = 0; n < N; ++n) C[m * rsc + n * csc] = bias[n * bstride];
  });
}

/// bias: null, or N values at stride bstride added to every row of every product.
template <class T>
void batched_float(int64_t nb, int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t cbs, int64_t rsc,
                   int64_t csc, const T* bias = nullptr, int64_t bstride = 1) {
  for_batches(nb, M, N, K, [&](int64_t i) {
    const T* pa = a.p + i * a.bs;
    const T* pb = b.p + i * b.bs;
    T* pc = c + i * cbs;
    if constexpr (std::is_same_v<T, float>) {
      matmul_f32(M, N, K, pa, a.rs, a.cs, pb, b.rs, b.cs, pc, rsc, csc, bias, bstride);
    } else {
      if (bias) fill_rows(M, N, bias, bstride, pc, rsc, csc);
      gemm_f64(M, N, K, 1.0, pa, a.rs, a.cs, pb, b.rs, b.cs, bias ? 1.0 : 0.0, pc, rsc, csc);
    }
  });
}

// Note [Transposed weights]: a linear layer multiplies by W^T, a transposed view of its weight.
// For a small product (gemm_small_fits) transposing B costs as much as the product, and oneDNN's
// per-call cost is larger still, so each thread keeps its last few transposed weights, keyed on
// the weight's content stamp and address (TensorDesc::stamp): inference transposes each weight
// once; a training step, which writes the weights, once per step. The cache holds 64 weights (at
// most 2 MiB, as a small product's B is at most 32 KiB) and replaces the oldest: a model's
// linears are used in turn, so a cache smaller than their count would miss on every call (a
// 2-layer BERT-style encoder has 9).
const float* transposed_weight(const float* w, int64_t K, int64_t N, int64_t cs, uint64_t stamp) {
  struct Entry {
    uint64_t stamp = 0;
    const float* w = nullptr;
    int64_t K = 0, N = 0, cs = 0;
    std::vector<float> buf;
  };
  constexpr size_t kEntries = 64;
  thread_local Entry cache[kEntries];
  thread_local size_t next = 0;
  for (Entry& e : cache)
    if (e.w == w && e.stamp == stamp && e.K == K && e.N == N && e.cs == cs) return e.buf.data();
  Entry& e = cache[next++ % kEntries];
  e.buf.resize(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)  // B(k, n) = w[k + n * cs]: read w's rows in order
    for (int64_t k = 0; k < K; ++k) e.buf[static_cast<size_t>(k * N + n)] = w[k + n * cs];
  e.stamp = stamp;
  e.w = w;
  e.K = K;
  e.N = N;
  e.cs = cs;
  return e.buf.data();
}

/// B of a product as batched_float reads it: a transposed f32 weight from the cache of
/// Note [Transposed weights] (one matrix for every batch, whole vectors per row), else as is.
template <class T>
Mat<T> weight_operand(Mat<T> b, int64_t nb, int64_t M, int64_t N, int64_t K, uint64_t stamp) {
  if constexpr (std::is_same_v<T, float>) {
    if ((nb == 1 || b.bs == 0) && b.rs == 1 && b.cs >= K && stamp != 0 && N % 16 == 0 &&
        gemm_small_fits(M, N, K, sizeof(float)))
      return {transposed_weight(b.p, K, N, b.cs, stamp), 0, N, 1};
  }
  return b;
}

/// Widens the distinct matrices of a half-precision operand to contiguous f32 (a batch stride
/// of 0 stays 0: the one matrix is converted once).
template <class H>
Mat<float> widen(const H* p, int64_t nb, int64_t bs, int64_t rs, int64_t cs, int64_t rows, int64_t cols,
                 std::vector<float>& buf) {
  const int64_t n = bs == 0 ? 1 : nb;
  buf.resize(static_cast<size_t>(n * rows * cols));
  parallel_for(n * rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const H* src = p + (r / rows) * bs + (r % rows) * rs;
      float* dst = buf.data() + r * cols;
      for (int64_t j = 0; j < cols; ++j) dst[j] = static_cast<float>(src[j * cs]);
    }
  });
  return {buf.data(), bs == 0 ? 0 : rows * cols, cols, 1};
}

template <class H>
void batched_half(int64_t nb, int64_t M, int64_t N, int64_t K, const H* pa, const ir::TensorDesc& a, const H* pb,
                  const ir::TensorDesc& b, H* pc, const ir::TensorDesc& c) {
  std::vector<float> ba, bb, bc(static_cast<size_t>(nb * M * N));
  Mat<float> fa = widen(pa, nb, a.strides[0], a.strides[1], a.strides[2], M, K, ba);
  Mat<float> fb = widen(pb, nb, b.strides[0], b.strides[1], b.strides[2], K, N, bb);
  batched_float<float>(nb, M, N, K, fa, fb, bc.data(), M * N, N, 1);
  parallel_for(nb * M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      H* dst = pc + (r / M) * c.strides[0] + (r % M) * c.strides[1];
      const float* src = bc.data() + r * N;
      for (int64_t j = 0; j < N; ++j) dst[j * c.strides[2]] = H(src[j]);
    }
  });
}

/// Exact integer products, wrapping like the C++ unsigned type of the same width.
template <class T>
void batched_int(int64_t nb, int64_t M, int64_t N, int64_t K, const T* pa, const ir::TensorDesc& a, const T* pb,
                 const ir::TensorDesc& b, T* pc, const ir::TensorDesc& c) {
  using U = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;  // no int promotion
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, N * K));
  parallel_for(nb * M, grain, [&](int64_t r0, int64_t r1) {
    std::vector<W> acc(static_cast<size_t>(N));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / M, m = r % M;
      std::fill(acc.begin(), acc.end(), W(0));
      const T* arow = pa + i * a.strides[0] + m * a.strides[1];
      const T* bmat = pb + i * b.strides[0];
      for (int64_t k = 0; k < K; ++k) {
        const W x = W(U(arow[k * a.strides[2]]));
        const T* brow = bmat + k * b.strides[1];
        for (int64_t n = 0; n < N; ++n) acc[n] += x * W(U(brow[n * b.strides[2]]));
      }
      T* crow = pc + i * c.strides[0] + m * c.strides[1];
      for (int64_t n = 0; n < N; ++n) crow[n * c.strides[2]] = static_cast<T>(U(acc[n]));
    }
  });
}

}  // namespace

void matmul_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa, const float* B, int64_t rsb,
                int64_t csb, float* C, int64_t rsc, int64_t csc, const float* bias, int64_t bstride) {
  if (bias) fill_rows(M, N, bias, bstride, C, rsc, csc);
  const float beta = bias ? 1.f : 0.f;
  if (gemm_small_f32(M, N, K, 1.f, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc)) return;
  if (onednn::sgemm(M, N, K, 1.f, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc)) return;
  gemm_f32(M, N, K, 1.f, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

void k_MatMul(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc &a = op.inputs[0], &b = op.inputs[1], &c = op.outputs[0];
  const int64_t nb = c.shape[0], M = c.shape[1], N = c.shape[2], K = a.shape[2];
  if (nb == 0 || M == 0 || N == 0) return;
  KILN_SWITCH_NUMERIC(a.dtype, "matmul", T, {
    const T* pa = reinterpret_cast<const T*>(base_ptr(in[0], a));
    const T* pb = reinterpret_cast<const T*>(base_ptr(in[1], b));
    T* pc = reinterpret_cast<T*>(base_ptr(out[0], c));
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const bool bias = op.inputs.size() > 2;  // ops.def: f32 / f64 only
      const Mat<T> mb = weight_operand<T>({pb, b.strides[0], b.strides[1], b.strides[2]}, nb, M, N, K, b.stamp);
      batched_float<T>(nb, M, N, K, {pa, a.strides[0], a.strides[1], a.strides[2]}, mb, pc, c.strides[0], c.strides[1],
                       c.strides[2], bias ? reinterpret_cast<const T*>(base_ptr(in[2], op.inputs[2])) : nullptr,
                       bias ? op.inputs[2].strides[0] : 1);
    } else if constexpr (is_half_v<T>) {
      batched_half(nb, M, N, K, pa, a, pb, b, pc, c);
    } else {
      batched_int(nb, M, N, K, pa, a, pb, b, pc, c);
    }
  });
}

}  // namespace kiln::cpu
