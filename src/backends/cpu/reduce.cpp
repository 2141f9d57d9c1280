// SPDX-License-Identifier: MIT OR Apache-2.0
// Reduction kernels (Sum, Prod, Mean, Max, Min, ArgMax, ArgMin, Any, All, Var).
//
// Note [Reduction order]
// Every output is the pairwise (tree) combination of fixed-size leaves of its reduced range;
// the tree shape depends only on the sizes, never on the thread count, so 1 and N threads give
// bit-identical results. Two layouts:
//  - inner: the reduced range is walked by a linear index (innermost reduced dim fastest); a
//    leaf of kLeaf elements spreads consecutive elements over kLanes independent accumulators
//    (vectorisable, and a short dependency chain for accuracy), then folds the lanes pairwise.
//  - outer: the kept innermost dim is contiguous and the reduced dims are not; a leaf adds
//    kRowLeaf whole rows of col_tile() columns (vectorised across columns), leaves fold pairwise.
// Work is split over outputs when there are enough of them, else over subtrees of one output.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/reduce_full.h"
#include "backends/cpu/reduce_outer.h"
#include "backends/cpu/reduce_util.h"
#include "backends/cpu/vec.h"
#include "core/machine.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

using red::DimGroup;
using red::vec_extreme;

constexpr int kLanes = 32;
constexpr int64_t kLeaf = 2048;
constexpr int64_t kRowLeaf = 16;
/// Columns per task of the outer layout (sized to the L2, machine.h; no effect on the bits).
inline int64_t col_tile() { return tuning().reduce_tile; }

struct Plan {
  DimGroup kept, red;          // output dims (in output order) and reduced dims
  const char* base = nullptr;  // input element 0
  bool outer = false;
  DimGroup kept_outer;  // outer layout: the kept dims but the innermost
  int64_t width = 1;    // outer layout: size of the innermost kept dim
};

Plan make_plan(const ir::Op& op, void* const* in) {
  const ir::TensorDesc& x = op.inputs[0];
  size_t rank = x.shape.size();
  SmallVec<bool, 8> is_red(rank, false);
  if (rank)
    for (int64_t d : ir::ReduceAttrs::decode(op).dims) is_red[static_cast<size_t>(d)] = true;
  Plan p;
  for (size_t d = 0; d < rank; ++d) (is_red[d] ? p.red : p.kept).push(x.shape[d], x.strides[d]);
  p.kept.finish();
  p.red.finish();
  p.base = base_ptr(in[0], x);
  if (p.kept.inner_stride() == 1 && p.kept.inner_size() >= 4 && p.red.inner_stride() != 1 && p.red.numel > 1) {
    p.outer = true;
    p.width = p.kept.inner_size();
    for (size_t d = 0; d + 1 < p.kept.shape.size(); ++d) p.kept_outer.push(p.kept.shape[d], p.kept.strides[d]);
    p.kept_outer.finish();
  }
  return p;
}

// ---- reducers: init, add (element x at reduced index i), comb, pre (element transform) ----

template <class A>
inline A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) + static_cast<std::make_unsigned_t<A>>(b));
  else
    return a + b;
}
template <class A>
inline A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) * static_cast<std::make_unsigned_t<A>>(b));
  else
    return a * b;
}

struct NoPre {
  template <class A>
  A operator()(A x, int64_t) const {
    return x;
  }
};

template <class A_, class Pre = NoPre>
struct SumR {
  using A = A_;
  using Acc = A_;
  Pre pre;
  Acc init() const { return A(0); }
  void add(Acc& a, A x, int64_t) const { a = wrap_add(a, x); }
  void comb(Acc& a, const Acc& b) const { a = wrap_add(a, b); }
  /// Contiguous f32 runs use the vectorised sum (runtime-dispatched SIMD).
  template <class T>
  requires(std::is_same_v<T, float>&& std::is_same_v<A_, float>&& std::is_same_v<Pre, NoPre>) void run_contig(
      Acc& a, const T* q, int64_t n, int64_t) const {
    a += vec::sum_f32(q, n);
  }
  /// d[c] += row[c] for c < tw (the outer layout), with the widest vectors of the machine.
  template <class T>
  requires(std::is_same_v<T, float>&& std::is_same_v<A_, float>&& std::is_same_v<Pre, NoPre>) void run_row(
      Acc* d, const T* row, int tw) const {
    if (!vec::binary_f32(ir::OpKind::Add, d, 1, row, 1, d, tw))
      for (int c = 0; c < tw; ++c) d[c] += row[c];
  }
};

/// (x - center[o])^2: the second pass of the variance.
template <class A>
struct SqDev {
  const A* center;
  A operator()(A x, int64_t o) const {
    A d = x - center[o];
    return d * d;
  }
};

template <class A_>
struct ProdR {
  using A = A_;
  using Acc = A_;
  NoPre pre;
  Acc init() const { return A(1); }
  void add(Acc& a, A x, int64_t) const { a = wrap_mul(a, x); }
  void comb(Acc& a, const Acc& b) const { a = wrap_mul(a, b); }
};

template <class A>
inline bool isnan_(A x) {
  if constexpr (std::is_floating_point_v<A>)
    return x != x;
  else
    return false;
}

/// Index of the first element of q[0..n) equal to v (the first NaN when v is NaN); v must occur.
template <class T>
int64_t vec_find(const T* q, int64_t n, T v) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(16)));
  typedef I VI __attribute__((vector_size(16)));
  constexpr int B = 16 / static_cast<int>(sizeof(T)), U = 4;
  const bool nan = v != v;
  V vv;
  for (int j = 0; j < B; ++j) vv[j] = v;
  int64_t k = 0;
  for (; k + U * B <= n; k += U * B) {
    VI hit{};
    for (int u = 0; u < U; ++u) {
      V x;
      std::memcpy(&x, q + k + u * B, sizeof(V));
      hit |= nan ? VI(x != x) : VI(x == vv);
    }
    uint64_t w[2];
    std::memcpy(w, &hit, sizeof(w));
    if (w[0] | w[1]) break;
  }
  for (; k < n - 1; ++k)
    if (nan ? q[k] != q[k] : q[k] == v) break;
  return k;
}

/// NaN-propagating max (IsMax) or min.
template <class A_, bool IsMax>
struct ExtR {
  using A = A_;
  using Acc = A_;
  static constexpr bool kExact = true;
  NoPre pre;
  Acc init() const {
    if constexpr (std::is_floating_point_v<A>)
      return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    else
      return IsMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  }
  void add(Acc& a, A x, int64_t) const {
    if constexpr (std::is_floating_point_v<A>)
      a = ((IsMax ? x > a : x < a) | (x != x)) ? x : a;  // branchless: vectorises as a blend
    else
      a = (IsMax ? x > a : x < a) ? x : a;
  }
  void comb(Acc& a, const Acc& b) const { add(a, b, 0); }
  template <class T>
  void run_contig(Acc& a, const T* q, int64_t n, int64_t) const {
    if constexpr (std::is_same_v<T, float>)
      add(a, vec::extreme_f32(q, n, IsMax), 0);
    else if constexpr (std::is_floating_point_v<T>)
      add(a, vec_extreme<T, IsMax>(q, n), 0);
    else
      for (int64_t k = 0; k < n; ++k) add(a, static_cast<A>(q[k]), 0);
  }
  /// d[c] = extreme(d[c], row[c]) for c < tw (the outer layout), vectorised like vec_extreme.
  template <class T>
  void run_row(Acc* d, const T* row, int tw) const {
    if constexpr (std::is_floating_point_v<T>)
      red::vec_extreme_row<T, IsMax>(d, row, tw);
    else
      for (int c = 0; c < tw; ++c) add(d[c], static_cast<A>(row[c]), 0);
  }
};

template <class A>
struct ArgAcc {
  A v{};
  int64_t i = -1;
};

/// First index of the max (IsMax) or min; NaN counts as the extreme (PyTorch).
template <class A_, bool IsMax>
struct ArgR {
  using A = A_;
  using Acc = ArgAcc<A_>;
  static constexpr bool kExact = true;
  NoPre pre;
  static bool better(A x, A y) {
    if (isnan_(x)) return !isnan_(y);
    if (isnan_(y)) return false;
    return IsMax ? x > y : x < y;
  }
  Acc init() const { return Acc{}; }
  void add(Acc& a, A x, int64_t i) const {
    if (a.i < 0 || better(x, a.v)) a = Acc{x, i};
  }
  /// A contiguous run: the extreme by a vectorised pass, then its first position (the run is
  /// at most one leaf, so the second pass reads from L1).
  template <class T>
  void run_contig(Acc& a, const T* q, int64_t n, int64_t i0) const {
    if constexpr (std::is_floating_point_v<T>) {
      const T best = vec_extreme<T, IsMax>(q, n);
      add(a, best, i0 + vec_find<T>(q, n, best));
    } else {
      for (int64_t k = 0; k < n; ++k) add(a, static_cast<A>(q[k]), i0 + k);
    }
  }
  void comb(Acc& a, const Acc& b) const {
    if (b.i < 0) return;
    if (a.i < 0 || better(b.v, a.v) || (!better(a.v, b.v) && b.i < a.i)) a = b;
  }
};

template <class A_, bool IsAny>
struct BoolR {
  using A = A_;
  using Acc = uint8_t;
  static constexpr bool kExact = true;
  NoPre pre;
  Acc init() const { return IsAny ? 0 : 1; }
  void add(Acc& a, A x, int64_t) const {
    if constexpr (IsAny)
      a |= static_cast<uint8_t>(x != A(0));
    else
      a &= static_cast<uint8_t>(x != A(0));
  }
  void comb(Acc& a, const Acc& b) const {
    if constexpr (IsAny)
      a |= b;
    else
      a &= b;
  }
};

// ---- drivers ----------------------------------------------------------------------------------

template <class R, class T>
concept HasRunContig = requires(const R& r, typename R::Acc& a, const T* q) {
  r.run_contig(a, q, int64_t{}, int64_t{});
};

template <class R, class T>
concept HasRunRow = requires(const R& r, typename R::Acc* d, const T* q) {
  r.run_row(d, q, int{});
};

/// Reduced ranges shorter than this use one accumulator (lanes would cost more than they save).
constexpr int64_t kShort = 2 * kLanes;

template <class T, class R>
void leaf_inner(const R& r, const Plan& p, const T* ob, int64_t b, int64_t e, int64_t o, typename R::Acc* dst) {
  using A = typename R::A;
  using Acc = typename R::Acc;
  const int64_t L = p.red.inner_size(), s = p.red.inner_stride();
  if (p.red.numel < kShort) {
    Acc acc = r.init();
    if (L == p.red.numel) {
      for (int64_t i = b; i < e; ++i) r.add(acc, r.pre(static_cast<A>(ob[i * s]), o), i);
    } else {
      for (int64_t i = b; i < e; ++i) r.add(acc, r.pre(static_cast<A>(ob[p.red.offset(i)]), o), i);
    }
    *dst = acc;
    return;
  }
  if constexpr (HasRunContig<R, T>) {
    // One contiguous run: the lanes below would hold init() but in lane 0, and folding init()
    // changes no value, so this is the same result without them.
    if (s == 1 && e - b <= L - b % L) {
      Acc acc = r.init();
      r.run_contig(acc, ob + p.red.offset(b), e - b, b);
      *dst = acc;
      return;
    }
  }
  Acc lanes[kLanes];
  for (auto& l : lanes) l = r.init();
  int64_t i = b;
  while (i < e) {
    int64_t n = std::min(L - i % L, e - i);
    const T* q = ob + p.red.offset(i);
    if constexpr (HasRunContig<R, T>) {
      if (s == 1) {
        r.run_contig(lanes[0], q, n, i);
        i += n;
        continue;
      }
    }
    if (s == 1) {
      int64_t k = 0;
      for (; k + kLanes <= n; k += kLanes)
        for (int j = 0; j < kLanes; ++j) r.add(lanes[j], r.pre(static_cast<A>(q[k + j]), o), i + k + j);
      for (int j = 0; k < n; ++k, ++j) r.add(lanes[j], r.pre(static_cast<A>(q[k]), o), i + k);
    } else {
      int j = 0;
      for (int64_t k = 0; k < n; ++k) {
        r.add(lanes[j], r.pre(static_cast<A>(q[k * s]), o), i + k);
        if (++j == kLanes) j = 0;
      }
    }
    i += n;
  }
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) r.comb(lanes[j], lanes[j + w]);
  *dst = lanes[0];
}

/// Reduces every output o and calls fin(o, acc).
template <class T, class R, class Fin>
void run_reduce(const Plan& p, const R& r, const Fin& fin) {
  using A = typename R::A;
  using Acc = typename R::Acc;
  const T* base = reinterpret_cast<const T*>(p.base);
  const int64_t nred = p.red.numel;
  const int64_t nt = num_threads();
  auto comb = [&](Acc& a, const Acc& b) { r.comb(a, b); };
  if (nred == 0) {
    for (int64_t o = 0; o < p.kept.numel; ++o) fin(o, r.init());
    return;
  }
  if (!p.outer) {
    const int64_t nout = p.kept.numel;
    const int64_t leaf = requires { R::kExact; }
    ? 8 * kLeaf : kLeaf;  // no rounding to bound
    const int64_t nleaves = (nred + leaf - 1) / leaf;
    auto one = [&](int64_t o, bool par) {
      const T* ob = base + p.kept.offset(o);
      Acc acc;
      if (nleaves == 1) {
        leaf_inner<T>(r, p, ob, 0, nred, o, &acc);
        return fin(o, acc);
      }
      red::tree_reduce<Acc>(
          nleaves, 1, &acc,
          [&](int64_t li, Acc* dst) { leaf_inner<T>(r, p, ob, li * leaf, std::min(nred, (li + 1) * leaf), o, dst); },
          comb, par);
      fin(o, acc);
    };
    if (nred < kShort) {
      // Short ranges: G outputs at a time, each still summed in order (same result as one at a
      // time) but as independent dependency chains.
      constexpr int G = 8;
      int64_t roff[kShort];
      for (int64_t i = 0; i < nred; ++i) roff[i] = p.red.offset(i);
      parallel_for(nout, std::max<int64_t>(1, kGrain / nred), [&](int64_t b, int64_t e) {
        int64_t o = b;
        for (; o + G <= e; o += G) {
          const T* ob[G];
          Acc acc[G];
          for (int g = 0; g < G; ++g) {
            ob[g] = base + p.kept.offset(o + g);
            acc[g] = r.init();
          }
          for (int64_t i = 0; i < nred; ++i)
            for (int g = 0; g < G; ++g) r.add(acc[g], r.pre(static_cast<A>(ob[g][roff[i]]), o + g), i);
          for (int g = 0; g < G; ++g) fin(o + g, acc[g]);
        }
        for (; o < e; ++o) one(o, false);
      });
    } else if (nout >= 2 * nt || nleaves < 8) {
      parallel_for(nout, std::max<int64_t>(1, kGrain / nred), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) one(o, false);
      });
    } else {
      for (int64_t o = 0; o < nout; ++o) one(o, true);
    }
    return;
  }
  const int64_t W = p.width, ctile = col_tile(), ntiles = (W + ctile - 1) / ctile;
  const int64_t ntasks = p.kept_outer.numel * ntiles;
  // Order-independent reducers (max, argmax, any) need no pairwise tree: bigger leaves.
  const int64_t row_leaf = requires { R::kExact; }
  ? 1024 : kRowLeaf;
  const int64_t nleaves = (nred + row_leaf - 1) / row_leaf;
  auto task = [&](int64_t t, bool par) {
    int64_t q = t / ntiles, c0 = (t % ntiles) * ctile;
    int tw = static_cast<int>(std::min<int64_t>(ctile, W - c0));
    const T* qb = base + p.kept_outer.offset(q) + c0;
    int64_t o0 = q * W + c0;
    std::unique_ptr<Acc[]> accbuf(new Acc[static_cast<size_t>(tw)]);
    Acc* acc = accbuf.get();
    red::tree_reduce<Acc>(
        nleaves, tw, acc,
        [&](int64_t li, Acc* dst) {
          for (int c = 0; c < tw; ++c) dst[c] = r.init();
          int64_t b = li * row_leaf, e = std::min(nred, b + row_leaf);
          for (int64_t i = b; i < e; ++i) {
            const T* row = qb + p.red.offset(i);
            if constexpr (HasRunRow<R, T>)
              r.run_row(dst, row, tw);
            else
              for (int c = 0; c < tw; ++c) r.add(dst[c], r.pre(static_cast<A>(row[c]), o0 + c), i);
          }
        },
        comb, par);
    for (int c = 0; c < tw; ++c) fin(o0 + c, acc[c]);
  };
  if (ntasks >= 2 * nt || nleaves < 8) {
    parallel_for(ntasks, std::max<int64_t>(1, kGrain / (nred * ctile)), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) task(t, false);
    });
  } else {
    for (int64_t t = 0; t < ntasks; ++t) task(t, true);
  }
}

template <class O>
O* out_ptr(const ir::Op& op, void* const* out) {
  KILN_ASSERT(op.outputs[0].is_contiguous());
  return reinterpret_cast<O*>(base_ptr(out[0], op.outputs[0]));
}

template <class O, class A>
inline O to_out(A v) {
  if constexpr (std::is_same_v<O, bool>)
    return v != A(0);
  else
    return static_cast<O>(v);
}

/// Sum, Prod or Mean of T into O (O = T, or i64 for integer and bool inputs).
template <class T, class O>
void sum_like(const ir::Op& op, void* const* in, void* const* out) {
  using A = std::conditional_t<std::is_integral_v<T>, int64_t, acc_t<T>>;
  Plan p = make_plan(op, in);
  O* o = out_ptr<O>(op, out);
  if (op.kind == ir::OpKind::Prod) {
    run_reduce<T>(p, ProdR<A>{}, [&](int64_t i, A acc) { o[i] = to_out<O>(acc); });
  } else if (op.kind == ir::OpKind::Mean) {
    const A n = static_cast<A>(p.red.numel);
    run_reduce<T>(p, SumR<A>{}, [&](int64_t i, A acc) { o[i] = to_out<O>(acc / n); });
  } else {
    run_reduce<T>(p, SumR<A>{}, [&](int64_t i, A acc) { o[i] = to_out<O>(acc); });
  }
}

void sum_dispatch(const ir::Op& op, void* const* in, void* const* out, const char* name) {
  DType it = op.inputs[0].dtype, ot = op.outputs[0].dtype;
  if (ot == it) {
    KILN_SWITCH_ALL(it, name, T, sum_like<T, T>(op, in, out));
  } else {
    KILN_CHECK(ot == DType::I64 && !is_floating(it), name,
               "unsupported dtypes " << dtype_name(it).data() << " -> " << dtype_name(ot).data());
    KILN_SWITCH_INT_BOOL(it, name, T, (sum_like<T, int64_t>(op, in, out)));
  }
}

template <bool IsMax>
void ext_dispatch(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, IsMax ? "Max" : "Min", T, {
    using A = acc_t<T>;
    Plan p = make_plan(op, in);
    T* o = out_ptr<T>(op, out);
    run_reduce<T>(p, ExtR<A, IsMax>{}, [&](int64_t i, A acc) { o[i] = static_cast<T>(acc); });
  });
}

template <bool IsMax>
void arg_dispatch(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, IsMax ? "ArgMax" : "ArgMin", T, {
    using A = acc_t<T>;
    Plan p = make_plan(op, in);
    int64_t* o = out_ptr<int64_t>(op, out);
    run_reduce<T>(p, ArgR<A, IsMax>{}, [&](int64_t i, const ArgAcc<A>& acc) { o[i] = acc.i < 0 ? 0 : acc.i; });
  });
}

template <bool IsAny>
void bool_dispatch(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, IsAny ? "Any" : "All", T, {
    using A = acc_t<T>;
    Plan p = make_plan(op, in);
    bool* o = out_ptr<bool>(op, out);
    run_reduce<T>(p, BoolR<A, IsAny>{}, [&](int64_t i, uint8_t acc) { o[i] = acc != 0; });
  });
}

}  // namespace

void k_Sum(const ir::Op& op, void* const* in, void* const* out) { sum_dispatch(op, in, out, "Sum"); }

// ---- the outer layout's Sum / Mean in two steps (reduce_outer.h) ---------------------------------

namespace outer {

int64_t leaf_rows() { return kRowLeaf; }

bool supports(const ir::Op& op, int64_t& rows, int64_t& width) {
  if ((op.kind != ir::OpKind::Sum && op.kind != ir::OpKind::Mean) || op.inputs.size() != 1) return false;
  const ir::TensorDesc& x = op.inputs[0];
  if ((x.dtype != DType::F32 && x.dtype != DType::F64) || op.outputs[0].dtype != x.dtype || !x.is_contiguous())
    return false;
  // ints: {keepdim, reduced dims...}: exactly the leading dims 0..lead-1, in order.
  const Dims dims = ir::ReduceAttrs::decode(op).dims;
  const size_t lead = dims.size();
  if (lead == 0 || lead >= x.shape.size()) return false;
  for (size_t i = 0; i < lead; ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  rows = 1;
  width = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) (d < lead ? rows : width) *= x.shape[d];
  return rows > 1 && width >= 4;  // else the kernel takes its inner layout
}

namespace {

template <class T>
void leaves_t(const T* x, int64_t width, int64_t r0, int64_t r1, T* partial) {
  for (int64_t li = r0 / kRowLeaf; li * kRowLeaf < r1; ++li) {
    T* dst = partial + li * width;
    std::fill(dst, dst + width, T(0));
    for (int64_t i = li * kRowLeaf, e = std::min(r1, (li + 1) * kRowLeaf); i < e; ++i) {
      const T* row = x + i * width;
      for (int64_t c = 0; c < width; ++c) dst[c] += row[c];  // SumR::add, row by row
    }
  }
}

template <class T>
void finish_t(bool mean, int64_t rows, int64_t width, const T* partial, T* out) {
  const int64_t ctile = col_tile(), nleaves = (rows + kRowLeaf - 1) / kRowLeaf, ntiles = (width + ctile - 1) / ctile;
  const T n = static_cast<T>(rows);
  auto comb = [](T& a, const T& b) { a = a + b; };
  auto task = [&](int64_t t, bool par) {  // as run_reduce's outer tasks (one kept row)
    const int64_t c0 = t * ctile;
    const int tw = static_cast<int>(std::min<int64_t>(ctile, width - c0));
    std::unique_ptr<T[]> acc(new T[static_cast<size_t>(tw)]);
    red::tree_reduce<T>(
        nleaves, tw, acc.get(),
        [&](int64_t li, T* dst) { std::copy(partial + li * width + c0, partial + li * width + c0 + tw, dst); }, comb,
        par);
    for (int c = 0; c < tw; ++c) out[c0 + c] = mean ? acc[c] / n : acc[c];
  };
  if (ntiles >= 2 * num_threads() || nleaves < 8) {
    parallel_for(ntiles, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) task(t, false);
    });
  } else {
    for (int64_t t = 0; t < ntiles; ++t) task(t, true);
  }
}

}  // namespace

void leaves(DType t, const void* x, int64_t width, int64_t r0, int64_t r1, void* partial) {
  if (t == DType::F32)
    leaves_t(static_cast<const float*>(x), width, r0, r1, static_cast<float*>(partial));
  else
    leaves_t(static_cast<const double*>(x), width, r0, r1, static_cast<double*>(partial));
}

void finish(DType t, bool mean, int64_t rows, int64_t width, const void* partial, void* out) {
  if (t == DType::F32)
    finish_t(mean, rows, width, static_cast<const float*>(partial), static_cast<float*>(out));
  else
    finish_t(mean, rows, width, static_cast<const double*>(partial), static_cast<double*>(out));
}

}  // namespace outer

// ---- the inner layout's full Sum / Mean in two steps (reduce_full.h) -----------------------------

namespace full {

int64_t leaf_elems() { return kLeaf; }

bool supports(const ir::Op& op, int64_t& n) {
  if ((op.kind != ir::OpKind::Sum && op.kind != ir::OpKind::Mean) || op.inputs.size() != 1) return false;
  const ir::TensorDesc& x = op.inputs[0];
  if (x.dtype != DType::F32 || op.outputs[0].dtype != DType::F32 || !x.is_contiguous()) return false;
  if (op.attrs.ints.size() != x.shape.size() + 1 || x.shape.empty()) return false;  // every dim
  n = x.numel();
  return n >= kShort;  // shorter: one accumulator, not leaves
}

void leaves(const float* x, int64_t e0, int64_t e1, float* partial) {
  for (int64_t li = e0 / kLeaf; li * kLeaf < e1; ++li) {  // as leaf_inner over a contiguous run
    const int64_t b = li * kLeaf, e = std::min(e1, b + kLeaf);
    float lanes[kLanes] = {};
    lanes[0] += vec::sum_f32(x + (b - e0), e - b);
    for (int w = kLanes / 2; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) lanes[j] = lanes[j] + lanes[j + w];
    partial[li] = lanes[0];
  }
}

float finish(bool mean, int64_t n, const float* partial) {
  const int64_t nleaves = (n + kLeaf - 1) / kLeaf;
  float acc = 0;
  red::tree_reduce<float>(
      nleaves, 1, &acc, [&](int64_t li, float* dst) { *dst = partial[li]; },
      [](float& a, const float& b) { a = a + b; }, false);
  return mean ? acc / static_cast<float>(n) : acc;
}

}  // namespace full

void k_Prod(const ir::Op& op, void* const* in, void* const* out) { sum_dispatch(op, in, out, "Prod"); }
void k_Mean(const ir::Op& op, void* const* in, void* const* out) { sum_dispatch(op, in, out, "Mean"); }
void k_Max(const ir::Op& op, void* const* in, void* const* out) { ext_dispatch<true>(op, in, out); }
void k_Min(const ir::Op& op, void* const* in, void* const* out) { ext_dispatch<false>(op, in, out); }
void k_ArgMax(const ir::Op& op, void* const* in, void* const* out) { arg_dispatch<true>(op, in, out); }
void k_ArgMin(const ir::Op& op, void* const* in, void* const* out) { arg_dispatch<false>(op, in, out); }
void k_Any(const ir::Op& op, void* const* in, void* const* out) { bool_dispatch<true>(op, in, out); }
void k_All(const ir::Op& op, void* const* in, void* const* out) { bool_dispatch<false>(op, in, out); }

// Two passes in f64: the mean, then the pairwise sum of squared deviations from it; the square
// root too for std (reals[1] != 0).
void k_Var(const ir::Op& op, void* const* in, void* const* out) {
  const ir::ReduceAttrs ra = ir::ReduceAttrs::decode(op);
  const double correction = ra.correction;
  const bool take_sqrt = ra.sqrt;
  KILN_SWITCH_FLOAT(op.inputs[0].dtype, "Var", T, {
    using A = double;  // like PyTorch's CPU kernel: no overflow of the squares in f32
    Plan p = make_plan(op, in);
    T* o = out_ptr<T>(op, out);
    const A n = static_cast<A>(p.red.numel);
    std::vector<A> mean(static_cast<size_t>(p.kept.numel));
    run_reduce<T>(p, SumR<A>{}, [&](int64_t i, A acc) { mean[static_cast<size_t>(i)] = acc / n; });
    const double div = std::max(0.0, static_cast<double>(p.red.numel) - correction);
    SumR<A, SqDev<A>> r{SqDev<A>{mean.data()}};
    run_reduce<T>(p, r, [&](int64_t i, A acc) {
      double v = acc / div;
      o[i] = static_cast<T>(take_sqrt ? std::sqrt(v) : v);
    });
  });
}

}  // namespace kiln::cpu
