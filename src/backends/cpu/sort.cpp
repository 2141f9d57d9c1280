// SPDX-License-Identifier: MIT OR Apache-2.0
// Sort along one dim: stable, NaN sorts as the largest value (PyTorch), values and i64 indices.
#include <algorithm>
#include <utility>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/reduce_util.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

template <class A>
inline bool isnan_(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return false;
}

template <class T>
void sort_kernel(const ir::Op& op, void* const* in, void* const* out) {
  using A = acc_t<T>;
  const ir::TensorDesc& x = op.inputs[0];
  const ir::ScanAttrs at = ir::ScanAttrs::decode(op);
  const int64_t dim = at.dim;
  const bool descending = at.descending;
  red::LinePlan lp(x, dim);
  const T* base = reinterpret_cast<const T*>(base_ptr(in[0], x));
  T* ov = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
  int64_t* oi = reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1]));
  const int64_t L = lp.len, inner = lp.inner.numel, nlines = lp.outer.numel * inner;
  if (L == 0 || nlines == 0) return;
  // Ascending: a < b with NaN largest. Descending: a > b with NaN largest (so first). Equal
  // keys keep their input order (stable_sort).
  auto less = [](const std::pair<A, int64_t>& a, const std::pair<A, int64_t>& b) {
    if (isnan_(a.first)) return false;
    if (isnan_(b.first)) return true;
    return a.first < b.first;
  };
  auto greater = [](const std::pair<A, int64_t>& a, const std::pair<A, int64_t>& b) {
    if (isnan_(a.first)) return !isnan_(b.first);
    if (isnan_(b.first)) return false;
    return a.first > b.first;
  };
  parallel_for(nlines, std::max<int64_t>(1, kGrain / (L * 8)), [&](int64_t b, int64_t e) {
    std::vector<std::pair<A, int64_t>> buf(static_cast<size_t>(L));
    for (int64_t line = b; line < e; ++line) {
      int64_t o = line / inner, c = line % inner;
      const T* p = base + lp.outer.offset(o) + lp.inner.offset(c);
      for (int64_t l = 0; l < L; ++l) buf[static_cast<size_t>(l)] = {static_cast<A>(p[l * lp.stride]), l};
      if (descending)
        std::stable_sort(buf.begin(), buf.end(), greater);
      else
        std::stable_sort(buf.begin(), buf.end(), less);
      int64_t ob = o * L * inner + c;
      for (int64_t l = 0; l < L; ++l) {
        ov[ob + l * inner] = static_cast<T>(buf[static_cast<size_t>(l)].first);
        oi[ob + l * inner] = buf[static_cast<size_t>(l)].second;
      }
    }
  });
}

}  // namespace

void k_Sort(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, "Sort", T, sort_kernel<T>(op, in, out));
}

}  // namespace kiln::cpu
