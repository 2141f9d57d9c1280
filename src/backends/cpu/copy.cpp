// SPDX-License-Identifier: MIT OR Apache-2.0
// Copy (strided, broadcasting), Cast between all dtypes, Fill and Arange.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

/// Value conversion with PyTorch's semantics, defined for every input (NaN -> 0 for integers,
/// out-of-range floats saturate instead of being undefined behaviour).
template <class To, class From>
inline To convert(From v) {
  using A = acc_t<From>;
  A a = static_cast<A>(v);
  if constexpr (std::is_same_v<To, bool>) {
    return a != A(0);
  } else if constexpr (std::is_integral_v<To> && is_float_v<From>) {
    if (std::isnan(a)) return To(0);
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    double d = static_cast<double>(a);
    if (d <= lo) return std::numeric_limits<To>::lowest();
    if (d >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(a));
  } else {
    return static_cast<To>(a);
  }
}

template <size_t S>
struct Bytes {
  unsigned char b[S];
};

template <size_t S>
void copy_rows(const StridedLoop<2>& loop) {
  loop.run([](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
    if (st[0] == static_cast<int64_t>(S) && st[1] == static_cast<int64_t>(S)) {
      std::memcpy(p[0], p[1], static_cast<size_t>(n) * S);
      return;
    }
    char* o = p[0];
    const char* i = p[1];
    if (st[1] == 0) {
      Bytes<S> v;
      std::memcpy(&v, i, S);
      for (int64_t k = 0; k < n; ++k, o += st[0]) std::memcpy(o, &v, S);
      return;
    }
    for (int64_t k = 0; k < n; ++k, o += st[0], i += st[1]) std::memcpy(o, i, S);
  });
}

/// Copies when the output is contiguous along its last dim but the input is contiguous along
/// the one before (a transpose): 32 x 32 tiles keep both the reads and the writes in cache
/// lines instead of striding through memory on one side. Returns false for other layouts.
template <size_t S>
bool copy_transposed(const StridedLoop<2>& loop) {
  const int nd = loop.ndim;
  if (nd < 2) return false;
  const int64_t es = static_cast<int64_t>(S);
  const size_t a = static_cast<size_t>(nd - 2), b = static_cast<size_t>(nd - 1);
  const int64_t oa = loop.strides[0][a], ob = loop.strides[0][b], ia = loop.strides[1][a], ib = loop.strides[1][b];
  const int64_t na = loop.shape[a], nb = loop.shape[b];
  if (ob != es || ia != es || ib == es || na < 16 || nb < 16) return false;
  constexpr int64_t kT = 32;
  int64_t outer = 1;
  for (size_t d = 0; d < a; ++d) outer *= loop.shape[d];
  const int64_t ta = (na + kT - 1) / kT, tb = (nb + kT - 1) / kT;
  parallel_for(outer * ta * tb, std::max<int64_t>(1, kGrain / (kT * kT)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t o = t / (ta * tb), r = t % (ta * tb);
      int64_t a0 = (r / tb) * kT, b0 = (r % tb) * kT;
      char* po = loop.base[0];
      const char* pi = loop.base[1];
      for (size_t d = a; d-- > 0;) {  // outer multi-index, last dim fastest
        int64_t idx = o % loop.shape[d];
        o /= loop.shape[d];
        po += idx * loop.strides[0][d];
        pi += idx * loop.strides[1][d];
      }
      const int64_t ea = std::min(na, a0 + kT), eb = std::min(nb, b0 + kT);
      for (int64_t j = b0; j < eb; ++j)    // input rows: contiguous along a
        for (int64_t i = a0; i < ea; ++i)  // output rows: contiguous along b
          std::memcpy(po + i * oa + j * es, pi + i * es + j * ib, S);
    }
  });
  return true;
}

}  // namespace

void k_Copy(const ir::Op& op, void* const* in, void* const* out) {
  auto loop = unary_loop(op, in, out);
  switch (dtype_size(op.outputs[0].dtype)) {
    case 2:
      if (copy_transposed<2>(loop)) return;
      break;
    case 4:
      if (copy_transposed<4>(loop)) return;
      break;
    case 8:
      if (copy_transposed<8>(loop)) return;
      break;
    default:
      break;
  }
  switch (dtype_size(op.outputs[0].dtype)) {
    case 1:
      return copy_rows<1>(loop);
    case 2:
      return copy_rows<2>(loop);
    case 4:
      return copy_rows<4>(loop);
    default:
      return copy_rows<8>(loop);
  }
}

void k_Cast(const ir::Op& op, void* const* in, void* const* out) {
  auto loop = unary_loop(op, in, out);
  KILN_SWITCH_ALL(op.inputs[0].dtype, "cast", From, {
    KILN_SWITCH_ALL(op.outputs[0].dtype, "cast", To, {
      loop.run([](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
        char* o = p[0];
        const char* i = p[1];
        if (st[0] == sizeof(To) && st[1] == sizeof(From)) {
          To* oo = reinterpret_cast<To*>(o);
          const From* ii = reinterpret_cast<const From*>(i);
          for (int64_t k = 0; k < n; ++k) oo[k] = convert<To, From>(ii[k]);
          return;
        }
        for (int64_t k = 0; k < n; ++k, o += st[0], i += st[1])
          *reinterpret_cast<To*>(o) = convert<To, From>(*reinterpret_cast<const From*>(i));
      });
    });
  });
}

void k_Fill(const ir::Op& op, void* const*, void* const* out) {
  const ir::TensorDesc& d = op.outputs[0];
  int64_t n = d.numel();
  const ir::CreationAttrs a = ir::CreationAttrs::decode(op);
  KILN_SWITCH_ALL(d.dtype, "fill", T, {
    // Integers travel exactly: as their bits, but for a float of a u64 past INT64_MAX (whose
    // bits read as a negative int64 while its value is positive).
    const bool big_unsigned = a.has_int && a.int_value < 0 && a.value >= 0;
    T val =
        a.has_int && !(big_unsigned && is_float_v<T>) ? convert<T, int64_t>(a.int_value) : convert<T, double>(a.value);
    T* o = reinterpret_cast<T*>(base_ptr(out[0], d));
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = val;
    });
  });
}

void k_Arange(const ir::Op& op, void* const*, void* const* out) {
  const ir::TensorDesc& d = op.outputs[0];
  const ir::CreationAttrs a = ir::CreationAttrs::decode(op);
  double start = a.start, step = a.step;
  int64_t n = d.numel();
  KILN_SWITCH_NUMERIC(d.dtype, "arange", T, {
    T* o = reinterpret_cast<T*>(base_ptr(out[0], d));
    if constexpr (std::is_integral_v<T>) {
      // Bounds as integers (saturated: a double of 2^63 is past int64), and start + i * step in
      // modular arithmetic, exact wherever the element lies in int64 (every element between
      // start and end does) and never undefined on the way there (start + 2 * step may not fit).
      auto to_int = [](double v) -> uint64_t {
        const int64_t r = v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : static_cast<int64_t>(v);
        return static_cast<uint64_t>(r);
      };
      const uint64_t s = to_int(start), st = to_int(step);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<int64_t>(s + static_cast<uint64_t>(i) * st));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = convert<T, double>(start + static_cast<double>(i) * step);
    }
  });
}

}  // namespace kiln::cpu
