// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers shared by the reduction and scan kernels: groups of dims walked by a linear index,
// and a pairwise tree over fixed-size leaves whose shape does not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

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

/// Depth of the tree levels evaluated as separate parallel tasks (2^depth subtrees).
inline constexpr int kParallelDepth = 4;

/// Pairwise combination over leaves [0, nleaves): leaf(li, Acc* dst) writes w accumulators,
/// comb(Acc& a, const Acc& b) folds b into a. Results land in out[0..w). The tree shape (split
/// at the midpoint) is fixed, so serial and parallel evaluation give bit-identical results.
/// Wmax bounds w (stack buffers).
template <class Acc, int Wmax, class Leaf, class Comb>
void tree_reduce(int64_t nleaves, int w, Acc* out, const Leaf& leaf, const Comb& comb, bool parallel) {
  struct Rec {
    const Leaf& leaf;
    const Comb& comb;
    int w;
    void run(int64_t lo, int64_t hi, Acc* dst) const {
      if (hi - lo == 1) return leaf(lo, dst);
      int64_t mid = lo + (hi - lo) / 2;
      run(lo, mid, dst);
      Acc tmp[Wmax];
      run(mid, hi, tmp);
      for (int c = 0; c < w; ++c) comb(dst[c], tmp[c]);
    }
    void collect(int64_t lo, int64_t hi, int depth, std::vector<std::pair<int64_t, int64_t>>& nodes) const {
      if (depth == 0 || hi - lo == 1) return nodes.push_back({lo, hi});
      int64_t mid = lo + (hi - lo) / 2;
      collect(lo, mid, depth - 1, nodes);
      collect(mid, hi, depth - 1, nodes);
    }
    void fold(int64_t lo, int64_t hi, int depth, const Acc* vals, size_t& k, Acc* dst) const {
      if (depth == 0 || hi - lo == 1) {
        std::copy(vals + k * w, vals + (k + 1) * w, dst);
        ++k;
        return;
      }
      int64_t mid = lo + (hi - lo) / 2;
      fold(lo, mid, depth - 1, vals, k, dst);
      Acc tmp[Wmax];
      fold(mid, hi, depth - 1, vals, k, tmp);
      for (int c = 0; c < w; ++c) comb(dst[c], tmp[c]);
    }
  };
  Rec rec{leaf, comb, w};
  if (!parallel || nleaves < 2) return rec.run(0, nleaves, out);
  std::vector<std::pair<int64_t, int64_t>> nodes;
  rec.collect(0, nleaves, kParallelDepth, nodes);
  std::unique_ptr<Acc[]> vals(new Acc[nodes.size() * static_cast<size_t>(w)]);
  parallel_blocks(static_cast<int64_t>(nodes.size()), [&](int64_t i) {
    rec.run(nodes[static_cast<size_t>(i)].first, nodes[static_cast<size_t>(i)].second, &vals[static_cast<size_t>(i) * w]);
  });
  size_t k = 0;
  rec.fold(0, nleaves, kParallelDepth, vals.get(), k, out);
}

}  // namespace kiln::cpu::red
