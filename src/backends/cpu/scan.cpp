// SPDX-License-Identifier: MIT OR Apache-2.0
// Cumulative kernels along one dim: CumSum, CumProd (accumulate in f64 for float types and i64
// for integers, like PyTorch's CPU kernels), CumMax, CumMin (values and i64 indices).
// Lines along dim are independent; when dim is not innermost, a task scans a tile of up to
// kTile neighbouring lines together so the inner loop runs across contiguous columns.
#include <cmath>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/reduce_util.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

constexpr int kTile = 64;

/// Calls step(state, x, out_index, l) for every element x of every line along op's dim, in
/// order along the line; state starts as init() per line; out_index is the element's index in
/// the contiguous output.
template <class T, class State, class Init, class Step>
void scan_lines(const ir::Op& op, void* const* in, const Init& init, const Step& step) {
  const ir::TensorDesc& x = op.inputs[0];
  const int64_t dim = ir::ScanAttrs::decode(op).dim;
  red::LinePlan lp(x, dim);
  const T* base = reinterpret_cast<const T*>(base_ptr(in[0], x));
  const int64_t L = lp.len, inner = lp.inner.numel, nouter = lp.outer.numel;
  if (L == 0 || inner == 0 || nouter == 0) return;
  if (inner == 1) {
    parallel_for(nouter, std::max<int64_t>(1, kGrain / L), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* p = base + lp.outer.offset(o);
        State s = init();
        for (int64_t l = 0; l < L; ++l) step(s, p[l * lp.stride], o * L + l, l);
      }
    });
    return;
  }
  const int64_t ntiles = (inner + kTile - 1) / kTile;
  parallel_for(nouter * ntiles, std::max<int64_t>(1, kGrain / (L * kTile)), [&](int64_t b, int64_t e) {
    State st[kTile];
    int64_t coff[kTile];
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / ntiles, c0 = (t % ntiles) * kTile;
      int tw = static_cast<int>(std::min<int64_t>(kTile, inner - c0));
      const T* p = base + lp.outer.offset(o);
      for (int c = 0; c < tw; ++c) {
        coff[c] = lp.inner.offset(c0 + c);
        st[c] = init();
      }
      for (int64_t l = 0; l < L; ++l) {
        const T* row = p + l * lp.stride;
        int64_t obase = (o * L + l) * inner + c0;
        for (int c = 0; c < tw; ++c) step(st[c], row[coff[c]], obase + c, l);
      }
    }
  });
}

template <class T, class O>
void cum_kernel(const ir::Op& op, void* const* in, void* const* out, bool is_prod) {
  using A = std::conditional_t<is_float_v<T>, double, int64_t>;
  O* o = reinterpret_cast<O*>(base_ptr(out[0], op.outputs[0]));
  auto init = [&] { return is_prod ? A(1) : A(0); };
  auto cast_out = [](A v) {
    if constexpr (std::is_same_v<O, bool>)
      return v != A(0);
    else if constexpr (is_half_v<O>)
      return O(static_cast<float>(v));
    else
      return static_cast<O>(v);
  };
  if (is_prod) {
    scan_lines<T, A>(op, in, init, [&](A& s, T x, int64_t i, int64_t) {
      if constexpr (std::is_integral_v<A>)
        s = static_cast<A>(static_cast<uint64_t>(s) * static_cast<uint64_t>(static_cast<A>(x)));
      else
        s *= static_cast<A>(static_cast<acc_t<T>>(x));
      o[i] = cast_out(s);
    });
  } else {
    scan_lines<T, A>(op, in, init, [&](A& s, T x, int64_t i, int64_t) {
      if constexpr (std::is_integral_v<A>)
        s = static_cast<A>(static_cast<uint64_t>(s) + static_cast<uint64_t>(static_cast<A>(x)));
      else
        s += static_cast<A>(static_cast<acc_t<T>>(x));
      o[i] = cast_out(s);
    });
  }
}

void cum_dispatch(const ir::Op& op, void* const* in, void* const* out, const char* name, bool is_prod) {
  DType it = op.inputs[0].dtype, ot = op.outputs[0].dtype;
  if (ot == it) {
    KILN_SWITCH_ALL(it, name, T, (cum_kernel<T, T>(op, in, out, is_prod)));
  } else {
    KILN_CHECK(ot == DType::I64 && !is_floating(it), name,
               "unsupported dtypes " << dtype_name(it).data() << " -> " << dtype_name(ot).data());
    KILN_SWITCH_INT_BOOL(it, name, T, (cum_kernel<T, int64_t>(op, in, out, is_prod)));
  }
}

template <class A>
struct CumState {
  A v{};
  int64_t i = -1;
};

/// Running max (IsMax) or min with the index of its last occurrence; a NaN sticks (PyTorch).
template <bool IsMax>
void cum_ext(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_ALL(op.inputs[0].dtype, IsMax ? "CumMax" : "CumMin", T, {
    using A = acc_t<T>;
    T* ov = reinterpret_cast<T*>(base_ptr(out[0], op.outputs[0]));
    int64_t* oi = reinterpret_cast<int64_t*>(base_ptr(out[1], op.outputs[1]));
    auto isnan_ = [](A v) {
      if constexpr (std::is_floating_point_v<A>)
        return v != v;
      else
        return false;
    };
    scan_lines<T, CumState<A>>(
        op, in, [] { return CumState<A>{}; },
        [&](CumState<A>& s, T xt, int64_t i, int64_t l) {
          A x = static_cast<A>(xt);
          if (s.i < 0 || isnan_(x) || (!isnan_(s.v) && (IsMax ? x >= s.v : x <= s.v))) {
            s.v = x;
            s.i = l;
          }
          ov[i] = static_cast<T>(s.v);
          oi[i] = s.i;
        });
  });
}

}  // namespace

void k_CumSum(const ir::Op& op, void* const* in, void* const* out) { cum_dispatch(op, in, out, "CumSum", false); }
void k_CumProd(const ir::Op& op, void* const* in, void* const* out) { cum_dispatch(op, in, out, "CumProd", true); }
void k_CumMax(const ir::Op& op, void* const* in, void* const* out) { cum_ext<true>(op, in, out); }
void k_CumMin(const ir::Op& op, void* const* in, void* const* out) { cum_ext<false>(op, in, out); }

}  // namespace kiln::cpu
