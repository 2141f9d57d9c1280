// SPDX-License-Identifier: MIT OR Apache-2.0
// Movement kernels: Cat (blocks copied into the output, memcpy for contiguous pieces) and Pad
// (constant, reflect, replicate, circular). Both move bytes only, so they work for every dtype.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "ir/attrs.h"

namespace kiln::cpu {

namespace {

template <size_t S>
struct Bytes {
  unsigned char b[S];
};

/// Copies rows of a strided loop (operand 0 = destination) element by element, memcpy when
/// both sides are contiguous.
template <size_t S>
void copy_range(const StridedLoop<2>& loop, int64_t b, int64_t e) {
  loop.run_range(
      [](const std::array<char*, 2>& p, const int64_t* st, int64_t n) {
        if (st[0] == static_cast<int64_t>(S) && st[1] == static_cast<int64_t>(S)) {
          std::memcpy(p[0], p[1], static_cast<size_t>(n) * S);
          return;
        }
        char* o = p[0];
        const char* i = p[1];
        for (int64_t k = 0; k < n; ++k, o += st[0], i += st[1]) std::memcpy(o, i, S);
      },
      b, e);
}

void copy_range_any(size_t es, const StridedLoop<2>& loop, int64_t b, int64_t e) {
  switch (es) {
    case 1:
      return copy_range<1>(loop, b, e);
    case 2:
      return copy_range<2>(loop, b, e);
    case 4:
      return copy_range<4>(loop, b, e);
    default:
      return copy_range<8>(loop, b, e);
  }
}

}  // namespace

// Each input k is copied into the slab of the output that starts at its running offset along
// the cat dim: the destination is a strided view of the output with the input's shape.
void k_Cat(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& o = op.outputs[0];
  const size_t es = dtype_size(o.dtype);
  const size_t d = static_cast<size_t>(ir::ScanAttrs::decode(op).dim);
  std::vector<StridedLoop<2>> loops;
  loops.reserve(op.inputs.size());
  int64_t along = 0, total = 0, biggest = 0;
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    const ir::TensorDesc& x = op.inputs[k];
    ir::TensorDesc dst{x.shape, o.strides, o.offset + along * o.strides[d], o.dtype};
    along += x.shape[d];
    if (x.numel() == 0) continue;
    const ir::TensorDesc* ins[1] = {&x};
    loops.emplace_back(dst, out[0], ins, &in[k]);
    total += x.numel();
    biggest = std::max(biggest, x.numel());
  }
  if (loops.empty()) return;
  // Large pieces: one piece at a time, each split over the threads. Many small pieces: the
  // pieces themselves are spread over the threads.
  if (biggest >= 2 * kGrain || loops.size() == 1) {
    for (auto& l : loops) parallel_for(l.numel, kGrain, [&](int64_t b, int64_t e) { copy_range_any(es, l, b, e); });
    return;
  }
  int64_t avg = std::max<int64_t>(1, total / static_cast<int64_t>(loops.size()));
  int64_t grain = std::max<int64_t>(1, kGrain / avg);
  parallel_for(static_cast<int64_t>(loops.size()), grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      copy_range_any(es, loops[static_cast<size_t>(i)], 0, loops[static_cast<size_t>(i)].numel);
  });
}

namespace {

/// For one dim: the source index of every output position (-1: the constant value).
std::vector<int64_t> pad_map(int64_t mode, int64_t n, int64_t lo, int64_t out_n) {
  std::vector<int64_t> m(static_cast<size_t>(out_n));
  for (int64_t o = 0; o < out_n; ++o) {
    int64_t i = o - lo;
    if (i < 0 || i >= n) {
      if (mode == 0) {
        i = -1;  // constant: the value
      } else if (mode == 1) {
        i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect (pad < n)
      } else if (mode == 2) {
        i = i < 0 ? 0 : n - 1;  // replicate
      } else {
        i = ((i % n) + n) % n;  // circular
      }
    }
    m[static_cast<size_t>(o)] = i;
  }
  return m;
}

template <size_t S>
void pad_rows(const ir::Op& op, const std::vector<std::vector<int64_t>>& maps, int64_t last_lo, const char* src,
              char* dst, const Bytes<S>& value) {
  const ir::TensorDesc& x = op.inputs[0];
  const ir::TensorDesc& o = op.outputs[0];
  const size_t r = o.shape.size();
  const int64_t inner = o.shape[r - 1];
  const int64_t rows = inner == 0 ? 0 : o.numel() / inner;
  const std::vector<int64_t>& last = maps[r - 1];
  const int64_t in_st = x.strides[r - 1] * static_cast<int64_t>(S);
  // Output positions [lo, lo + n) read the input in order (the unpadded middle).
  const int64_t mid_b = std::clamp<int64_t>(last_lo, 0, inner);
  const int64_t mid_e = std::clamp<int64_t>(last_lo + x.shape[r - 1], mid_b, inner);
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r, 0);
    int64_t rem = b;
    for (size_t dd = r - 1; dd-- > 0;) {
      idx[dd] = rem % o.shape[dd];
      rem /= o.shape[dd];
    }
    for (int64_t row = b; row < e; ++row) {
      char* op_ = dst + row * inner * static_cast<int64_t>(S);
      int64_t off = 0;
      bool fill = false;
      for (size_t dd = 0; dd + 1 < r; ++dd) {
        int64_t si = maps[dd][static_cast<size_t>(idx[dd])];
        if (si < 0) {
          fill = true;
          break;
        }
        off += si * x.strides[dd];
      }
      if (fill) {
        for (int64_t k = 0; k < inner; ++k) std::memcpy(op_ + k * static_cast<int64_t>(S), &value, S);
      } else {
        const char* ip = src + off * static_cast<int64_t>(S);
        for (int64_t k = 0; k < mid_b; ++k) {
          int64_t si = last[static_cast<size_t>(k)];
          std::memcpy(op_ + k * static_cast<int64_t>(S),
                      si < 0 ? value.b : reinterpret_cast<const unsigned char*>(ip + si * in_st), S);
        }
        if (mid_e > mid_b) {
          const char* mp = ip + last[static_cast<size_t>(mid_b)] * in_st;
          char* mo = op_ + mid_b * static_cast<int64_t>(S);
          if (in_st == static_cast<int64_t>(S)) {
            std::memcpy(mo, mp, static_cast<size_t>(mid_e - mid_b) * S);
          } else {
            for (int64_t k = mid_b; k < mid_e; ++k, mo += S, mp += in_st) std::memcpy(mo, mp, S);
          }
        }
        for (int64_t k = mid_e; k < inner; ++k) {
          int64_t si = last[static_cast<size_t>(k)];
          std::memcpy(op_ + k * static_cast<int64_t>(S),
                      si < 0 ? value.b : reinterpret_cast<const unsigned char*>(ip + si * in_st), S);
        }
      }
      for (size_t dd = r - 1; dd-- > 0;) {
        if (++idx[dd] < o.shape[dd]) break;
        idx[dd] = 0;
      }
    }
  });
}

}  // namespace

// ints = {mode, lo_last, hi_last, lo_prev, hi_prev, ...}; reals = {value}. Each output element
// reads the input at the per-dim mapped index, or takes the value (constant mode, outside).
void k_Pad(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& x = op.inputs[0];
  const ir::TensorDesc& o = op.outputs[0];
  const ir::PadAttrs pa = ir::PadAttrs::decode(op);
  const int64_t mode = pa.mode;
  const size_t r = o.shape.size();
  const size_t npad = pa.npad();
  std::vector<std::vector<int64_t>> maps(r);
  int64_t last_lo = 0;
  for (size_t d = 0; d < r; ++d) {
    int64_t lo = 0;
    if (r - 1 - d < npad) lo = pa.pads[2 * (r - 1 - d)];
    maps[d] = pad_map(mode, x.shape[d], lo, o.shape[d]);
    if (d + 1 == r) last_lo = lo;
  }
  const double v = pa.value;
  Bytes<8> value{};
  KILN_SWITCH_ALL(o.dtype, "pad", T, {
    T t;
    if constexpr (std::is_same_v<T, bool>)
      t = v != 0;
    else if constexpr (is_half_v<T>)
      t = T(static_cast<float>(v));
    else
      t = static_cast<T>(v);
    std::memcpy(value.b, &t, sizeof(T));
  });
  const char* src = base_ptr(in[0], x);
  char* dst = base_ptr(out[0], o);
  if (r == 0) {
    std::memcpy(dst, src, dtype_size(o.dtype));
    return;
  }
  switch (dtype_size(o.dtype)) {
    case 1:
      return pad_rows<1>(op, maps, last_lo, src, dst, reinterpret_cast<const Bytes<1>&>(value));
    case 2:
      return pad_rows<2>(op, maps, last_lo, src, dst, reinterpret_cast<const Bytes<2>&>(value));
    case 4:
      return pad_rows<4>(op, maps, last_lo, src, dst, reinterpret_cast<const Bytes<4>&>(value));
    default:
      return pad_rows<8>(op, maps, last_lo, src, dst, reinterpret_cast<const Bytes<8>&>(value));
  }
}

}  // namespace kiln::cpu
