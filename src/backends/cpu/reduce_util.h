// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers shared by the reduction and scan kernels: groups of dims walked by a linear index,
// and a pairwise tree over fixed-size leaves whose shape does not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/machine.h"
#include "core/parallel.h"
#include "ir/op.h"

namespace kiln::cpu::red {

/// A set of dims (outermost first) of a strided view, coalesced where the layout allows, and
/// walked by a linear index in row-major order. Strides are in elements.
struct DimGroup {
  SmallVec<int64_t, 6> shape, strides;
  int64_t numel = 1;

  void push(int64_t size, int64_t stride) {
    numel *= size;
    if (size == 1) return;
    if (!shape.empty() && strides.back() == stride * size) {
      shape.back() *= size;
      strides.back() = stride;
      return;
    }
    shape.push_back(size);
    strides.push_back(stride);
  }
  /// Call once all dims are pushed: guarantees at least one (possibly size-1) dim.
  void finish() {
    if (shape.empty()) {
      shape.push_back(1);
      strides.push_back(0);
    }
  }
  int64_t inner_size() const { return shape.back(); }
  int64_t inner_stride() const { return strides.back(); }
  /// Element offset of linear index i.
  int64_t offset(int64_t i) const {
    if (shape.size() == 1) return i * strides[0];
    int64_t off = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      off += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return off;
  }
};

/// A view split around one dim: out index (o, l, c) with o over the dims before `dim`, l along
/// it and c over the dims after it; the output (contiguous, same shape) holds it at
/// (o * len + l) * inner.numel + c.
struct LinePlan {
  DimGroup outer, inner;
  int64_t len = 1, stride = 0;  // size and element stride along dim
  LinePlan(const ir::TensorDesc& x, int64_t dim) {
    int64_t rank = static_cast<int64_t>(x.shape.size());
    for (int64_t d = 0; d < rank; ++d) {
      size_t u = static_cast<size_t>(d);
      if (d < dim) outer.push(x.shape[u], x.strides[u]);
      if (d > dim) inner.push(x.shape[u], x.strides[u]);
    }
    if (rank > 0) {
      len = x.shape[static_cast<size_t>(dim)];
      stride = x.strides[static_cast<size_t>(dim)];
    }
    outer.finish();
    inner.finish();
  }
};

/// NaN-propagating max (IsMax) or min of q[0..n), n >= 1, with GCC vector extensions of the
/// baseline SSE width and an explicit bitwise blend (scalar code with this blend does not
/// auto-vectorise).
template <class T, bool IsMax>
T vec_extreme(const T* q, int64_t n) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(16)));
  typedef I VI __attribute__((vector_size(16)));
  constexpr int B = 16 / static_cast<int>(sizeof(T)), U = 8;
  V m[U];
  for (int u = 0; u < U; ++u)
    for (int j = 0; j < B; ++j) m[u][j] = q[0];
  int64_t k = 0;
  for (; k + U * B <= n; k += U * B) {
    for (int u = 0; u < U; ++u) {
      V x;
      std::memcpy(&x, q + k + u * B, sizeof(V));
      VI take = (IsMax ? x > m[u] : x < m[u]) | (x != x);
      m[u] = (V)(((VI)x & take) | ((VI)m[u] & ~take));
    }
  }
  T r = q[0];
  auto fold = [&](T x) { r = ((IsMax ? x > r : x < r) || x != x || r != r) ? (r != r ? r : x) : r; };
  for (int u = 0; u < U; ++u)
    for (int j = 0; j < B; ++j) fold(m[u][j]);
  for (; k < n; ++k) fold(q[k]);
  return r;
}

/// d[c] = NaN-propagating max (IsMax) or min of d[c] and row[c], for c < n; vectorised like
/// vec_extreme.
template <class T, bool IsMax>
void vec_extreme_row(T* d, const T* row, int64_t n) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(16)));
  typedef I VI __attribute__((vector_size(16)));
  constexpr int B = 16 / static_cast<int>(sizeof(T));
  int64_t c = 0;
  for (; c + B <= n; c += B) {
    V x, m;
    std::memcpy(&x, row + c, sizeof(V));
    std::memcpy(&m, d + c, sizeof(V));
    VI take = (IsMax ? x > m : x < m) | (x != x);
    m = (V)(((VI)x & take) | ((VI)m & ~take));
    std::memcpy(d + c, &m, sizeof(V));
  }
  for (; c < n; ++c) {
    T x = row[c];
    if ((IsMax ? x > d[c] : x < d[c]) || x != x) d[c] = x;
  }
}

/// Depth of the tree levels evaluated as separate parallel tasks (2^depth subtrees, several
/// per core; machine.h). Any depth gives the same bits: the fold rebuilds the same tree.
inline int parallel_depth() { return tuning().reduce_parallel_depth; }

/// Pairwise combination over leaves [0, nleaves): leaf(li, Acc* dst) writes w accumulators,
/// comb(Acc& a, const Acc& b) folds b into a. Results land in out[0..w). The tree shape (split
/// at the midpoint) is fixed, so serial and parallel evaluation give bit-identical results.
/// Temporaries: one row of w accumulators per tree level, on the heap.
template <class Acc, class Leaf, class Comb>
void tree_reduce(int64_t nleaves, int w, Acc* out, const Leaf& leaf, const Comb& comb, bool parallel) {
  int levels = 1;
  while ((int64_t{1} << (levels - 1)) < nleaves) ++levels;
  const size_t per_task = static_cast<size_t>(levels) * static_cast<size_t>(w);
  struct Rec {
    const Leaf& leaf;
    const Comb& comb;
    int w;
    void run(int64_t lo, int64_t hi, Acc* dst, Acc* scratch) const {
      if (hi - lo == 1) return leaf(lo, dst);
      int64_t mid = lo + (hi - lo) / 2;
      run(lo, mid, dst, scratch + w);
      run(mid, hi, scratch, scratch + w);
      for (int c = 0; c < w; ++c) comb(dst[c], scratch[c]);
    }
    void collect(int64_t lo, int64_t hi, int depth, std::vector<std::pair<int64_t, int64_t>>& nodes) const {
      if (depth == 0 || hi - lo == 1) return nodes.push_back({lo, hi});
      int64_t mid = lo + (hi - lo) / 2;
      collect(lo, mid, depth - 1, nodes);
      collect(mid, hi, depth - 1, nodes);
    }
    void fold(int64_t lo, int64_t hi, int depth, const Acc* vals, size_t& k, Acc* dst, Acc* scratch) const {
      if (depth == 0 || hi - lo == 1) {
        std::copy(vals + k * w, vals + (k + 1) * w, dst);
        ++k;
        return;
      }
      int64_t mid = lo + (hi - lo) / 2;
      fold(lo, mid, depth - 1, vals, k, dst, scratch + w);
      fold(mid, hi, depth - 1, vals, k, scratch, scratch + w);
      for (int c = 0; c < w; ++c) comb(dst[c], scratch[c]);
    }
  };
  Rec rec{leaf, comb, w};
  auto with_scratch = [&](auto&& f) {  // short trees (one output of a few leaves): no heap
    if (per_task <= 64) {
      Acc buf[64];
      return f(buf);
    }
    std::unique_ptr<Acc[]> buf(new Acc[per_task]);
    f(buf.get());
  };
  if (!parallel || nleaves < 2) return with_scratch([&](Acc* scr) { rec.run(0, nleaves, out, scr); });
  std::vector<std::pair<int64_t, int64_t>> nodes;
  rec.collect(0, nleaves, parallel_depth(), nodes);
  std::unique_ptr<Acc[]> vals(new Acc[nodes.size() * static_cast<size_t>(w)]);
  parallel_blocks(static_cast<int64_t>(nodes.size()), [&](int64_t i) {
    with_scratch([&](Acc* scr) {
      rec.run(nodes[static_cast<size_t>(i)].first, nodes[static_cast<size_t>(i)].second,
              &vals[static_cast<size_t>(i) * w], scr);
    });
  });
  size_t k = 0;
  with_scratch([&](Acc* scr) { rec.fold(0, nleaves, parallel_depth(), vals.get(), k, out, scr); });
}

}  // namespace kiln::cpu::red
