// SPDX-License-Identifier: MIT OR Apache-2.0
// LayerNorm / RMSNorm over the trailing dims of x (ops.def documents the attributes).
//
// Note [LayerNorm chunks]: a row of n normalised elements is cut into chunks of kChunk
// elements (fixed, independent of the thread count). Each chunk's mean and M2 come from a
// corrected two-pass sum over the chunk while it sits in L1 (norm_hwy.cpp); the chunks of a
// row are merged in order with Chan's formula in double. A row then normalises chunk by chunk.
// Many rows: one task per block of rows, each row read from memory once (the stats passes hit
// L1/L2). Few long rows: chunk statistics in parallel, the per-row merge, then the
// normalisation in parallel. Both schedules compute the same chunk statistics and merge them
// in the same order, so results are bitwise identical for any thread count.
// f16/bf16 rows (and rows that are not contiguous) are converted chunk by chunk into an f32 (or
// f64) buffer; mean and rstd are stored as f32 for f32/f16/bf16 and f64 for f64.
// Group mode (GroupNorm, InstanceNorm): x [N, C, *] is read as rows (n, g) of C/G channels times
// the spatial size, and the per-channel affine is applied run by run during the normalisation,
// so the whole op is one pass over memory.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/norm_vec.h"
#include "backends/cpu/reduce_util.h"
#include "core/parallel.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kChunk = 4096;

struct Stats {
  double n = 0, mean = 0, m2 = 0;  // m2: sum of squared deviations (or of squares for rms)
};

/// Chan et al.'s pairwise merge of two partial statistics.
inline void merge(Stats& a, const Stats& b) {
  if (b.n == 0) return;
  if (a.n == 0) {
    a = b;
    return;
  }
  const double n = a.n + b.n, delta = b.mean - a.mean;
  a.mean += delta * (b.n / n);
  a.m2 += b.m2 + delta * delta * (a.n * b.n / n);
  a.n = n;
}

inline void moments(const float* x, int64_t n, double* m, double* m2) { normvec::moments_f32(x, n, m, m2); }
inline void moments(const double* x, int64_t n, double* m, double* m2) { normvec::moments_f64(x, n, m, m2); }
inline double sumsq(const float* x, int64_t n) { return normvec::sumsq_f32(x, n); }
inline double sumsq(const double* x, int64_t n) { return normvec::sumsq_f64(x, n); }
template <class A>
inline void normalize(const A* x, A* y, int64_t n, A m, A ml, A r, A sh, const A* w, const A* b) {
  if constexpr (std::is_same_v<A, float>)
    normvec::normalize_f32(x, y, n, m, ml, r, sh, w, b);
  else
    normvec::normalize_f64(x, y, n, m, ml, r, sh, w, b);
}

/// A weight or bias as a contiguous array of A (borrowed when it already is one).
template <class A>
struct Param {
  std::vector<A> own;
  const A* p = nullptr;
  Param(const ir::TensorDesc* d, void* data) {
    if (!d) return;
    char* base = base_ptr(data, *d);
    if (d->dtype == dtype_of_v<A> && d->is_contiguous()) {
      p = reinterpret_cast<const A*>(base);
      return;
    }
    red::DimGroup g;
    for (size_t i = 0; i < d->shape.size(); ++i) g.push(d->shape[i], d->strides[i]);
    g.finish();
    own.resize(static_cast<size_t>(g.numel));
    KILN_SWITCH_FLOAT(d->dtype, "LayerNorm", P, {
      const P* q = reinterpret_cast<const P*>(base);
      for (int64_t i = 0; i < g.numel; ++i)
        own[static_cast<size_t>(i)] = static_cast<A>(static_cast<acc_t<P>>(q[g.offset(i)]));
    });
    p = own.data();
  }
};

template <class T>
struct LayerNormPlan {
  using A = acc_t<T>;
  static constexpr bool kSame = std::is_same_v<T, A>;
  const T* x = nullptr;
  T* y = nullptr;
  A* mean_out = nullptr;
  double* mean_hp = nullptr;  // the row means in double (the stored mean_out is rounded to A)
  A* rstd_out = nullptr;
  red::DimGroup outer, inner;
  int64_t n = 1, rows = 1, nch = 1;
  bool contig = true;  // each row is contiguous in x
  bool rms = false;
  double eps = 0;
  const A* w = nullptr;  // the normalised shape; per channel [C] in group mode
  const A* b = nullptr;
  int64_t groups = 0;  // > 0: group mode, rows (n, g) hold channels [g * cg, (g + 1) * cg) x spatial
  int64_t cg = 1, spatial = 1;

  /// Elements [s, s + len) of row r as A: a pointer into x, or converted/gathered into buf.
  const A* load(int64_t r, int64_t s, int64_t len, A* buf) const {
    const T* row = x + outer.offset(r);
    if (contig) {
      if constexpr (kSame) return row + s;
      for (int64_t i = 0; i < len; ++i) buf[i] = static_cast<A>(row[s + i]);
      return buf;
    }
    // Walk the inner dims with a multi-index from position s.
    const size_t nd = inner.shape.size();
    SmallVec<int64_t, 6> idx(nd, 0);
    int64_t rem = s, off = 0;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % inner.shape[d];
      rem /= inner.shape[d];
      off += idx[d] * inner.strides[d];
    }
    const int64_t last = inner.shape[nd - 1], lst = inner.strides[nd - 1];
    int64_t i = 0;
    while (i < len) {
      int64_t run = std::min(last - idx[nd - 1], len - i);
      for (int64_t k = 0; k < run; ++k) buf[i + k] = static_cast<A>(row[off + k * lst]);
      i += run;
      off += run * lst;
      idx[nd - 1] += run;
      for (size_t d = nd - 1; d > 0 && idx[d] == inner.shape[d]; --d) {
        off -= idx[d] * inner.strides[d];
        idx[d] = 0;
        ++idx[d - 1];
        off += inner.strides[d - 1];
      }
    }
    return buf;
  }

  /// Rows up to this long run by row block (run_short_rows); longer ones gained nothing from it
  /// and lost 15-25% ([8192, 1024]).
  static constexpr int64_t kShortRow = 256;
  /// run_rows for contiguous rows of at most kShortRow, read in place: the statistics of a block of
  /// rows, then their outputs, then their normalisation, so that the rows' dependency chains
  /// (two passes, horizontal sums, a square root) overlap instead of running one after another
  /// (a [16, 32] layer norm took 2.4 µs a call). The same steps per row: the same bits.
  void run_short_rows(int64_t rb, int64_t re) const {
    constexpr int64_t kBlock = 64;
    Stats st[kBlock];
    for (int64_t r0 = rb; r0 < re; r0 += kBlock) {
      const int64_t r1 = std::min(re, r0 + kBlock);
      for (int64_t r = r0; r < r1; ++r) st[r - r0] = chunk_stats(r, 0, nullptr);
      for (int64_t r = r0; r < r1; ++r) finish_row(r, &st[r - r0]);
      for (int64_t r = r0; r < r1; ++r) normalize_chunk(r, 0, nullptr, nullptr, nullptr);
    }
  }

  Stats chunk_stats(int64_t r, int64_t c, A* buf) const {
    const int64_t s = c * kChunk, len = std::min(kChunk, n - s);
    const A* p = load(r, s, len, buf);
    Stats st;
    st.n = static_cast<double>(len);
    if (rms)
      st.m2 = sumsq(p, len);
    else
      moments(p, len, &st.mean, &st.m2);
    return st;
  }

  /// Merges chunk statistics (in chunk order) into row r's mean and rstd outputs.
  void finish_row(int64_t r, const Stats* chunks) const {
    if (n == 0) {
      mean_out[r] = rms ? A(0) : std::numeric_limits<A>::quiet_NaN();
      rstd_out[r] = std::numeric_limits<A>::quiet_NaN();
      return;
    }
    Stats t;
    for (int64_t c = 0; c < nch; ++c) {
      if (rms) {
        t.n += chunks[c].n;
        t.m2 += chunks[c].m2;
      } else {
        merge(t, chunks[c]);
      }
    }
    const double var = t.m2 / t.n;
    mean_out[r] = rms ? A(0) : static_cast<A>(t.mean);
    mean_hp[r] = rms ? 0.0 : t.mean;
    rstd_out[r] = static_cast<A>(1.0 / std::sqrt(var + eps));
  }

  /// Normalises chunk c of row r; `in` is the chunk already loaded, or null to load it.
  void normalize_chunk(int64_t r, int64_t c, const A* in, A* buf, A* obuf) const {
    const int64_t s = c * kChunk, len = std::min(kChunk, n - s);
    if (!in) in = load(r, s, len, buf);
    T* dst = y + r * n + s;
    A* o = nullptr;
    if constexpr (kSame)
      o = dst;
    else
      o = obuf;
    const A m = mean_out[r], ml = static_cast<A>(mean_hp[r] - static_cast<double>(m)), rs = rstd_out[r];
    if (groups == 0) {
      normalize(in, o, len, m, ml, rs, A(0), w ? w + s : nullptr, b ? b + s : nullptr);
    } else {
      // Runs of one channel: scale rstd * w[c], shift b[c].
      int64_t i = 0;
      while (i < len) {
        const int64_t pos = s + i, j = pos / spatial, run = std::min(len - i, (j + 1) * spatial - pos);
        const int64_t c = (r % groups) * cg + j;
        normalize(in + i, o + i, run, m, ml, w ? rs * w[c] : rs, b ? b[c] : A(0), static_cast<const A*>(nullptr),
                  static_cast<const A*>(nullptr));
        i += run;
      }
    }
    if constexpr (!kSame)
      for (int64_t i = 0; i < len; ++i) dst[i] = static_cast<T>(obuf[i]);
  }

  void run_rows(int64_t rb, int64_t re) const {
    if (kSame && contig && n > 0 && n <= kShortRow) return run_short_rows(rb, re);
    std::vector<A> buf(static_cast<size_t>(std::min(n, kChunk))), obuf(kSame ? 0 : buf.size());
    std::vector<Stats> st(static_cast<size_t>(nch));
    for (int64_t r = rb; r < re; ++r) {
      for (int64_t c = 0; c < nch; ++c) st[static_cast<size_t>(c)] = chunk_stats(r, c, buf.data());
      finish_row(r, st.data());
      // One chunk: the buffer still holds it (when it was converted or gathered).
      const bool reuse = nch == 1 && !(kSame && contig);
      for (int64_t c = 0; c < nch; ++c) normalize_chunk(r, c, reuse ? buf.data() : nullptr, buf.data(), obuf.data());
    }
  }
};

template <class T>
void layer_norm_kernel(const ir::Op& op, void* const* in, void* const* out) {
  using A = acc_t<T>;
  const ir::TensorDesc& xd = op.inputs[0];
  const ir::NormAttrs a = ir::NormAttrs::decode(op);
  const int64_t nd = a.ndims;
  const bool has_w = a.has_weight, has_b = a.has_bias;
  LayerNormPlan<T> p;
  p.rms = a.rms;
  p.eps = a.eps;
  p.groups = a.groups;
  const size_t rank = xd.shape.size(), lead = rank - static_cast<size_t>(nd);
  if (p.groups > 0) {
    // x [N, C, *] viewed as [N, G, C/G, *]: rows over (N, G), normalised over (C/G, *).
    p.cg = xd.shape[1] / p.groups;
    p.spatial = 1;
    for (size_t i = 2; i < rank; ++i) p.spatial *= xd.shape[i];
    p.outer.push(xd.shape[0], xd.strides[0]);
    p.outer.push(p.groups, xd.strides[1] * p.cg);
    p.inner.push(p.cg, xd.strides[1]);
    for (size_t i = 2; i < rank; ++i) p.inner.push(xd.shape[i], xd.strides[i]);
  } else {
    for (size_t i = 0; i < rank; ++i) (i < lead ? p.outer : p.inner).push(xd.shape[i], xd.strides[i]);
  }
  p.outer.finish();
  p.inner.finish();
  p.n = p.inner.numel;
  p.rows = p.outer.numel;
  p.nch = std::max<int64_t>(1, (p.n + kChunk - 1) / kChunk);
  p.contig = p.inner.shape.size() == 1 && (p.inner.strides[0] == 1 || p.n <= 1);
  p.x = reinterpret_cast<const T*>(base_ptr(in[0], xd));
  p.y = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  p.mean_out = reinterpret_cast<A*>(base_ptr(out[1], op.outputs[1]));
  p.rstd_out = reinterpret_cast<A*>(base_ptr(out[2], op.outputs[2]));
  int k = 1;
  Param<A> w(has_w ? &op.inputs[k] : nullptr, has_w ? in[k] : nullptr);
  k += has_w ? 1 : 0;
  Param<A> b(has_b ? &op.inputs[k] : nullptr, has_b ? in[k] : nullptr);
  p.w = w.p;
  p.b = b.p;
  if (p.rows == 0) return;
  std::vector<double> mean_hp(static_cast<size_t>(p.rows));
  p.mean_hp = mean_hp.data();
  if (p.n == 0) {
    for (int64_t r = 0; r < p.rows; ++r) p.finish_row(r, nullptr);
    return;
  }
  const int nt = num_threads();
  if (p.nch == 1 || p.rows >= 4 * static_cast<int64_t>(nt)) {
    parallel_for(p.rows, std::max<int64_t>(1, kGrain / p.n), [&](int64_t rb, int64_t re) { p.run_rows(rb, re); });
    return;
  }
  // Few long rows: statistics of every chunk in parallel, merge per row, normalise in parallel.
  const int64_t total = p.rows * p.nch;
  std::vector<Stats> st(static_cast<size_t>(total));
  parallel_for(total, 1, [&](int64_t cb, int64_t ce) {
    std::vector<A> buf(kChunk);
    for (int64_t t = cb; t < ce; ++t) st[static_cast<size_t>(t)] = p.chunk_stats(t / p.nch, t % p.nch, buf.data());
  });
  for (int64_t r = 0; r < p.rows; ++r) p.finish_row(r, st.data() + r * p.nch);
  parallel_for(total, 1, [&](int64_t cb, int64_t ce) {
    std::vector<A> buf(kChunk), obuf(kChunk);
    for (int64_t t = cb; t < ce; ++t) p.normalize_chunk(t / p.nch, t % p.nch, nullptr, buf.data(), obuf.data());
  });
}

}  // namespace

void k_LayerNorm(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_FLOAT(op.inputs[0].dtype, "LayerNorm", T, layer_norm_kernel<T>(op, in, out));
}

}  // namespace kiln::cpu
