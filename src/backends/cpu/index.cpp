// SPDX-License-Identifier: MIT OR Apache-2.0
// Index family kernels: IndexSelect, Gather, Scatter (with reductions), IndexAdd, IndexCopy.
//
// Note [Index validation]: every kernel checks all index values before it writes anything.
// The check runs in parallel and only raises a flag; the first bad index (in row-major order)
// is then found serially and thrown outside any parallel region, so no exception ever crosses
// an OpenMP region and no out-of-bounds element is ever read or written.
//
// Note [Deterministic scatter]: the output elements that one index entry can reach differ
// only in the indexed dim, so the work is split over the other coordinates ("lines"); each
// line is handled by one thread, visiting the index entries in order. Duplicate indices thus
// resolve as "last write wins" and sums accumulate in index order, whatever the thread count.
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

/// 0-d views behave as [1].
ir::TensorDesc nonempty_rank(ir::TensorDesc d) {
  if (d.shape.empty()) {
    d.shape = {1};
    d.strides = {0};
  }
  return d;
}

int64_t elem_bytes(const ir::TensorDesc& d) { return static_cast<int64_t>(dtype_size(d.dtype)); }

/// See Note [Index validation]. Values must lie in [0, size), or [-size, size) when wrap.
void check_indices(const ir::Op& op, const ir::TensorDesc& idx, void* data, int64_t size, int64_t dim, bool wrap) {
  if (idx.numel() == 0) return;
  const int64_t lo = wrap ? -size : 0;
  ir::TensorDesc d = nonempty_rank(idx);
  StridedLoop<1> loop(d, data, nullptr, nullptr);
  std::atomic<bool> bad{false};
  loop.run([&](const std::array<char*, 1>& p, const int64_t* st, int64_t n) {
    const char* q = p[0];
    bool b = false;
    for (int64_t k = 0; k < n; ++k, q += st[0]) {
      int64_t v = *reinterpret_cast<const int64_t*>(q);
      b |= v < lo || v >= size;
    }
    if (b) bad.store(true, std::memory_order_relaxed);
  });
  if (!bad.load()) return;
  bool found = false;
  int64_t first = 0;
  loop.run_range(
      [&](const std::array<char*, 1>& p, const int64_t* st, int64_t n) {
        const char* q = p[0];
        for (int64_t k = 0; k < n && !found; ++k, q += st[0]) {
          int64_t v = *reinterpret_cast<const int64_t*>(q);
          if (v < lo || v >= size) {
            found = true;
            first = v;
          }
        }
      },
      0, loop.numel);
  KILN_CHECK(false, ir::op_name(op.kind),
             "index " << first << " is out of range for dim " << dim << " with size " << size);
}

/// Copies the view src into the view dst (same shape and dtype).
void copy_view(const ir::TensorDesc& src, void* src_data, const ir::TensorDesc& dst, void* dst_data) {
  ir::Op c;
  c.kind = ir::OpKind::Copy;
  c.inputs = {src};
  c.outputs = {dst};
  void* i[1] = {src_data};
  void* o[1] = {dst_data};
  k_Copy(c, i, o);
}

template <size_t S>
struct Bytes {
  unsigned char b[S];
};

/// out[p] = x[p with coordinate `dim` replaced by the index at p]. The loop's operands are
/// (out, index seen at out's shape, x seen at out's shape with stride 0 along dim).
template <size_t S>
void gather_rows(const StridedLoop<3>& loop, int64_t x_dim_bytes, int64_t size, bool wrap) {
  loop.run([&](const std::array<char*, 3>& p, const int64_t* st, int64_t n) {
    char* o = p[0];
    const char* ip = p[1];
    const char* xp = p[2];
    if (st[1] == 0) {  // one index value for the whole row
      int64_t v = *reinterpret_cast<const int64_t*>(ip);
      if (wrap && v < 0) v += size;
      xp += v * x_dim_bytes;
      if (st[0] == static_cast<int64_t>(S) && st[2] == static_cast<int64_t>(S)) {
        std::memcpy(o, xp, static_cast<size_t>(n) * S);
        return;
      }
      for (int64_t k = 0; k < n; ++k, o += st[0], xp += st[2]) std::memcpy(o, xp, S);
      return;
    }
    for (int64_t k = 0; k < n; ++k, o += st[0], ip += st[1], xp += st[2]) {
      int64_t v = *reinterpret_cast<const int64_t*>(ip);
      if (wrap && v < 0) v += size;
      *reinterpret_cast<Bytes<S>*>(o) = *reinterpret_cast<const Bytes<S>*>(xp + v * x_dim_bytes);
    }
  });
}

/// Shared by IndexSelect and Gather: `iv` is the index viewed at out's shape.
void gather_impl(const ir::TensorDesc& x, void* x_data, const ir::TensorDesc& iv, void* i_data,
                 const ir::TensorDesc& out, void* out_data, int64_t dim, bool wrap) {
  ir::TensorDesc xv = x;
  xv.shape = out.shape;
  int64_t x_dim_bytes = x.strides[static_cast<size_t>(dim)] * elem_bytes(x);
  xv.strides[static_cast<size_t>(dim)] = 0;
  const ir::TensorDesc* ins[2] = {&iv, &xv};
  void* in_data[2] = {i_data, x_data};
  StridedLoop<3> loop(out, out_data, ins, in_data);
  int64_t size = x.shape[static_cast<size_t>(dim)];
  switch (dtype_size(x.dtype)) {
    case 1:
      return gather_rows<1>(loop, x_dim_bytes, size, wrap);
    case 2:
      return gather_rows<2>(loop, x_dim_bytes, size, wrap);
    case 4:
      return gather_rows<4>(loop, x_dim_bytes, size, wrap);
    default:
      return gather_rows<8>(loop, x_dim_bytes, size, wrap);
  }
}

// ---- Scatter reductions ------------------------------------------------------------------------
enum Reduce : int64_t { kNone = 0, kSum = 1, kProd = 2, kMean = 3, kAmax = 4, kAmin = 5 };

template <class A>
inline A combine(int64_t r, A a, A b) {
  switch (r) {
    case kSum:
    case kMean:
      if constexpr (std::is_same_v<A, bool>)
        return a || b;
      else
        return static_cast<A>(a + b);
    case kProd:
      if constexpr (std::is_same_v<A, bool>)
        return a && b;
      else
        return static_cast<A>(a * b);
    case kAmax:
      if constexpr (std::is_floating_point_v<A>)
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return a < b ? b : a;
    case kAmin:
      if constexpr (std::is_floating_point_v<A>)
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return b < a ? b : a;
    default:
      return b;
  }
}

/// Mean of a sum over `count` values: true division for floats, floor division for integers.
template <class A>
inline A mean_of(A sum, int64_t count) {
  if constexpr (std::is_floating_point_v<A>) {
    return sum / static_cast<A>(count);
  } else if constexpr (std::is_same_v<A, bool>) {
    return sum;
  } else {
    int64_t s = static_cast<int64_t>(sum);
    int64_t q = s / count;
    if (s % count != 0 && s < 0) --q;
    return static_cast<A>(q);
  }
}

/// Element offsets [lo, hi] reachable by a view (relative to its first element).
std::pair<int64_t, int64_t> view_extent(const ir::TensorDesc& d) {
  int64_t lo = 0, hi = 0;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] == 0) return {0, -1};
    (d.strides[i] >= 0 ? hi : lo) += d.strides[i] * (d.shape[i] - 1);
  }
  return {lo, hi};
}

template <class T>
void scatter_typed(const ir::TensorDesc& out, void* out_data, const ir::TensorDesc& idx, void* idx_data,
                   const ir::TensorDesc& src, void* src_data, int64_t dim, int64_t reduce, bool include_self) {
  using A = acc_t<T>;
  const size_t ud = static_cast<size_t>(dim);
  const int64_t m = idx.shape[ud];
  if (m == 0 || idx.numel() == 0) return;
  // Line space: the index shape with the indexed dim collapsed.
  Shape ls = idx.shape;
  ls[ud] = 1;
  ir::TensorDesc ov = out, iv = idx, sv = src;
  ov.shape = ls;
  iv.shape = ls;
  sv.shape = ls;
  const ir::TensorDesc* ins[2] = {&iv, &sv};
  void* in_data[2] = {idx_data, src_data};
  StridedLoop<3> loop(ov, out_data, ins, in_data);
  const int64_t osd = out.strides[ud] * static_cast<int64_t>(sizeof(T));
  const int64_t isd = idx.strides[ud] * static_cast<int64_t>(sizeof(int64_t));
  const int64_t ssd = src.strides[ud] * static_cast<int64_t>(sizeof(T));
  const bool counting = reduce != kNone && (reduce == kMean || !include_self);
  std::vector<int64_t> counts;
  char* out_base = base_ptr(out_data, out);
  int64_t count_lo = 0;
  if (counting) {
    auto [lo, hi] = view_extent(out);
    count_lo = lo;
    counts.assign(static_cast<size_t>(hi - lo + 1), 0);
  }
  auto slot = [&](const char* o) -> int64_t& {
    return counts[static_cast<size_t>((o - out_base) / static_cast<int64_t>(sizeof(T)) - count_lo)];
  };
  const int64_t grain = std::max<int64_t>(1, kGrain / m);
  loop.run(
      [&](const std::array<char*, 3>& p, const int64_t* st, int64_t n) {
        // Line by line, each line's entries in index order: lines write disjoint parts of the
        // output, so the result (and the order of updates to any element) is that of a
        // t-outer loop, with far better locality.
        for (int64_t k = 0; k < n; ++k) {
          char* ol = p[0] + k * st[0];
          const char* il = p[1] + k * st[1];
          const char* sl = p[2] + k * st[2];
          for (int64_t t = 0; t < m; ++t, il += isd, sl += ssd) {
            T* o = reinterpret_cast<T*>(ol + *reinterpret_cast<const int64_t*>(il) * osd);
            T s = *reinterpret_cast<const T*>(sl);
            if (reduce == kNone) {
              *o = s;
            } else if (counting) {
              int64_t& c = slot(reinterpret_cast<char*>(o));
              *o = (c == 0 && !include_self)
                       ? s
                       : static_cast<T>(combine<A>(reduce, static_cast<A>(*o), static_cast<A>(s)));
              ++c;
            } else {
              *o = static_cast<T>(combine<A>(reduce, static_cast<A>(*o), static_cast<A>(s)));
            }
          }
        }
        if (reduce != kMean) return;
        for (int64_t t = 0; t < m; ++t) {
          char* ol = p[0];
          const char* il = p[1] + t * isd;
          for (int64_t k = 0; k < n; ++k, ol += st[0], il += st[1]) {
            T* o = reinterpret_cast<T*>(ol + *reinterpret_cast<const int64_t*>(il) * osd);
            int64_t& c = slot(reinterpret_cast<char*>(o));
            if (c == 0) continue;  // already divided (a duplicate index)
            *o = static_cast<T>(mean_of<A>(static_cast<A>(*o), c + (include_self ? 1 : 0)));
            c = 0;
          }
        }
      },
      grain);
}

/// IndexAdd (add = true) and IndexCopy: out[.., index[j], ..] (+)= alpha * src[.., j, ..].
template <class T>
void index_update_typed(const ir::TensorDesc& out, void* out_data, const ir::TensorDesc& idx, void* idx_data,
                        const ir::TensorDesc& src, void* src_data, int64_t dim, bool wrap, bool add, double alpha) {
  using A = acc_t<T>;
  const size_t ud = static_cast<size_t>(dim);
  const int64_t m = idx.numel();
  if (m == 0) return;
  const int64_t size = out.shape[ud];
  Shape ls = out.shape;
  ls[ud] = 1;
  ir::TensorDesc ov = out, sv = src;
  ov.shape = ls;
  sv.shape = ls;
  const ir::TensorDesc* ins[1] = {&sv};
  void* in_data[1] = {src_data};
  StridedLoop<2> loop(ov, out_data, ins, in_data);
  const int64_t osd = out.strides[ud] * static_cast<int64_t>(sizeof(T));
  const int64_t ssd = src.strides[ud] * static_cast<int64_t>(sizeof(T));
  const int64_t* ip = reinterpret_cast<const int64_t*>(base_ptr(idx_data, idx));
  const int64_t ist = idx.shape.empty() ? 0 : idx.strides[0];
  A a;
  if constexpr (std::is_same_v<A, bool>)
    a = alpha != 0;
  else if constexpr (std::is_integral_v<A>)
    a = static_cast<A>(static_cast<int64_t>(alpha));
  else
    a = static_cast<A>(alpha);
  const bool unit = alpha == 1.0;
  const int64_t grain = std::max<int64_t>(1, kGrain / m);
  loop.run(
      [&](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
        for (int64_t j = 0; j < m; ++j) {
          int64_t v = ip[j * ist];
          if (wrap && v < 0) v += size;
          char* ol = p[0] + v * osd;
          const char* sl = p[1] + j * ssd;
          for (int64_t k = 0; k < n; ++k, ol += st[0], sl += st[1]) {
            T* o = reinterpret_cast<T*>(ol);
            A s = static_cast<A>(*reinterpret_cast<const T*>(sl));
            if (!add) {
              *o = static_cast<T>(s);
            } else if constexpr (std::is_same_v<A, bool>) {
              *o = static_cast<T>(static_cast<A>(*o) || (s && a));
            } else {
              *o = static_cast<T>(static_cast<A>(*o) + (unit ? s : static_cast<A>(s * a)));
            }
          }
        }
      },
      grain);
}

void index_update(const ir::Op& op, void* const* in, void* const* out, bool add) {
  ir::TensorDesc x = nonempty_rank(op.inputs[0]), src = nonempty_rank(op.inputs[2]);
  ir::TensorDesc o = nonempty_rank(op.outputs[0]);
  const ir::TensorDesc& idx = op.inputs[1];
  const ir::IndexAttrs a = ir::IndexAttrs::decode(op);
  const int64_t dim = a.dim;
  const bool wrap = a.wrap;
  const double alpha = a.alpha;
  check_indices(op, idx, in[1], o.shape[static_cast<size_t>(dim)], dim, wrap);
  copy_view(x, in[0], o, out[0]);
  KILN_SWITCH_ALL(o.dtype, ir::op_name(op.kind), T,
                  index_update_typed<T>(o, out[0], idx, in[1], src, in[2], dim, wrap, add, alpha));
}

}  // namespace

void k_IndexSelect(const ir::Op& op, void* const* in, void* const* out) {
  ir::TensorDesc x = nonempty_rank(op.inputs[0]);
  ir::TensorDesc o = nonempty_rank(op.outputs[0]);
  const ir::TensorDesc& idx = op.inputs[1];
  const ir::IndexAttrs a = ir::IndexAttrs::decode(op);
  const int64_t dim = a.dim;
  const bool wrap = a.wrap;
  check_indices(op, idx, in[1], x.shape[static_cast<size_t>(dim)], dim, wrap);
  // The 1-d index seen at out's shape: it moves only along dim.
  ir::TensorDesc iv{o.shape, Strides(o.shape.size(), 0), idx.offset, DType::I64};
  iv.strides[static_cast<size_t>(dim)] = idx.shape.empty() ? 0 : idx.strides[0];
  gather_impl(x, in[0], iv, in[1], o, out[0], dim, wrap);
}

void k_Gather(const ir::Op& op, void* const* in, void* const* out) {
  ir::TensorDesc x = nonempty_rank(op.inputs[0]);
  ir::TensorDesc idx = nonempty_rank(op.inputs[1]);
  ir::TensorDesc o = nonempty_rank(op.outputs[0]);
  const int64_t dim = ir::IndexAttrs::decode(op).dim;
  check_indices(op, idx, in[1], x.shape[static_cast<size_t>(dim)], dim, false);
  gather_impl(x, in[0], idx, in[1], o, out[0], dim, false);
}

void k_Scatter(const ir::Op& op, void* const* in, void* const* out) {
  ir::TensorDesc x = nonempty_rank(op.inputs[0]), idx = nonempty_rank(op.inputs[1]);
  ir::TensorDesc src = nonempty_rank(op.inputs[2]), o = nonempty_rank(op.outputs[0]);
  const auto [dim, reduce, include_self] = ir::ScatterAttrs::decode(op);
  KILN_CHECK(reduce >= kNone && reduce <= kAmin, ir::op_name(op.kind), "unknown reduce code " << reduce);
  check_indices(op, idx, in[1], o.shape[static_cast<size_t>(dim)], dim, false);
  copy_view(x, in[0], o, out[0]);
  KILN_SWITCH_ALL(o.dtype, ir::op_name(op.kind), T,
                  scatter_typed<T>(o, out[0], idx, in[1], src, in[2], dim, reduce, include_self));
}

void k_IndexAdd(const ir::Op& op, void* const* in, void* const* out) { index_update(op, in, out, true); }
void k_IndexCopy(const ir::Op& op, void* const* in, void* const* out) { index_update(op, in, out, false); }

}  // namespace kiln::cpu
