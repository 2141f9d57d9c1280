// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Strided elementwise iteration for CPU kernels. Operand 0 is the output; inputs broadcast to
// its shape (stride 0). Dimensions are coalesced, and the work is split over the thread pool
// in linear-index ranges, so a kernel only sees rows: fn(ptrs, byte_strides, n).
#include <array>
#include <cstdint>

#include "core/parallel.h"
#include "ir/op.h"
#include "kiln/dtype.h"

namespace kiln::cpu {

/// Elements per thread below which a loop runs on one thread.
inline constexpr int64_t kGrain = 32768;

/// Pointer to element 0 of a view in a CPU buffer.
inline char* base_ptr(void* data, const ir::TensorDesc& d) {
  return static_cast<char*>(data) + d.offset * static_cast<int64_t>(dtype_size(d.dtype));
}

template <int N>
struct StridedLoop {
  int ndim = 0;
  SmallVec<int64_t, 6> shape;                   // coalesced, outermost first
  std::array<SmallVec<int64_t, 6>, N> strides;  // bytes
  std::array<char*, N> base{};
  int64_t numel = 1;

  /// out: output view; ins: N-1 input views broadcast to out's shape.
  StridedLoop(const ir::TensorDesc& out, void* out_data, const ir::TensorDesc* const* ins, void* const* in_data) {
    const Shape& s = out.shape;
    size_t r = s.size();
    SmallVec<int64_t, 6> sh(s.begin(), s.end());
    std::array<SmallVec<int64_t, 6>, N> st;
    for (int k = 0; k < N; ++k) {
      const ir::TensorDesc& d = k == 0 ? out : *ins[k - 1];
      int64_t es = static_cast<int64_t>(dtype_size(d.dtype));
      st[k].resize(r, 0);
      size_t lead = r - d.shape.size();
      for (size_t i = 0; i < d.shape.size(); ++i) st[k][lead + i] = d.shape[i] == 1 ? 0 : d.strides[i] * es;
      base[k] = base_ptr(k == 0 ? out_data : in_data[k - 1], d);
    }
    // Drop size-1 dims, then merge dim i into i+1 when every operand is contiguous across them.
    for (size_t i = 0; i < r; ++i) {
      numel *= sh[i];
      if (sh[i] == 1) continue;
      if (!shape.empty()) {
        size_t j = shape.size() - 1;
        bool merge = true;
        for (int k = 0; k < N; ++k) merge &= strides[k][j] == st[k][i] * sh[i];
        if (merge) {
          shape[j] *= sh[i];
          for (int k = 0; k < N; ++k) strides[k][j] = st[k][i];
          continue;
        }
      }
      shape.push_back(sh[i]);
      for (int k = 0; k < N; ++k) strides[k].push_back(st[k][i]);
    }
    if (shape.empty()) {
      shape.push_back(1);
      for (int k = 0; k < N; ++k) strides[k].push_back(0);
    }
    ndim = static_cast<int>(shape.size());
  }

  /// Calls fn(std::array<char*,N> ptrs, const int64_t* inner_strides, int64_t n) for every row
  /// piece, in parallel when large. grain: elements per task.
  template <class F>
  void run(const F& fn, int64_t grain = kGrain) const {
    if (numel == 0) return;
    parallel_for(numel, grain, [&](int64_t b, int64_t e) { run_range(fn, b, e); });
  }

  template <class F>
  void run_range(const F& fn, int64_t begin, int64_t end) const {
    int64_t inner = shape[static_cast<size_t>(ndim - 1)];
    std::array<int64_t, N> inner_st;
    for (int k = 0; k < N; ++k) inner_st[k] = strides[k][static_cast<size_t>(ndim - 1)];
    // Multi-index of `begin` over the outer dims.
    SmallVec<int64_t, 6> idx(static_cast<size_t>(ndim), 0);
    int64_t rem = begin / inner;
    for (int d = ndim - 2; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = rem % shape[static_cast<size_t>(d)];
      rem /= shape[static_cast<size_t>(d)];
    }
    int64_t pos = begin;
    int64_t col = begin % inner;
    while (pos < end) {
      std::array<char*, N> p;
      for (int k = 0; k < N; ++k) {
        char* q = base[k];
        for (int d = 0; d < ndim - 1; ++d) q += idx[static_cast<size_t>(d)] * strides[k][static_cast<size_t>(d)];
        p[k] = q + col * inner_st[k];
      }
      int64_t n = std::min(inner - col, end - pos);
      fn(p, inner_st.data(), n);
      pos += n;
      col = 0;
      for (int d = ndim - 2; d >= 0; --d) {
        if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
  }
};

/// Convenience: a unary loop (out, in).
inline StridedLoop<2> unary_loop(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc* ins[1] = {&op.inputs[0]};
  return StridedLoop<2>(op.outputs[0], out[0], ins, in);
}
inline StridedLoop<3> binary_loop(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc* ins[2] = {&op.inputs[0], &op.inputs[1]};
  return StridedLoop<3>(op.outputs[0], out[0], ins, in);
}
inline StridedLoop<4> ternary_loop(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc* ins[3] = {&op.inputs[0], &op.inputs[1], &op.inputs[2]};
  return StridedLoop<4>(op.outputs[0], out[0], ins, in);
}

/// Loads/stores elements of T through the arithmetic type.
template <class T>
inline auto load(const char* p) {
  return static_cast<std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>>(
      *reinterpret_cast<const T*>(p));
}

}  // namespace kiln::cpu
