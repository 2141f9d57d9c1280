// SPDX-License-Identifier: MIT OR Apache-2.0
// Pooling of the library (kernel/library.h): MaxPool (values and indices), AvgPool,
// AdaptiveAvgPool and AdaptiveMaxPool over 1 to 3 spatial dims viewed as [D, H, W], one thread
// per output element. Each visits its window as the CPU does (src/backends/cpu/pool.cpp): max
// in row-major window order with the rule `v > max || isnan(v)` (the last NaN wins; a window
// of -inf gives the first valid position as its index); averages (integers in i64) sum each
// window column over the rows first, then the columns in order, and divide as the CPU
// (count_include_pad, divisor_override, the window clipped to the padded input).
#include <algorithm>
#include <limits>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {

using kiln::ir::OpKind;
using kiln::ir::TensorDesc;

namespace {

/// The storage of a pool's values: floats; i32 and i64 with `ints`; the 1- and 2-byte integers
/// with `small` (max pools).
std::optional<Store> pool_store(DType t, bool ints, bool small) {
  if (t == DType::U8 || t == DType::I8 || t == DType::I16 || t == DType::U16)
    return small ? storage_of(t, false) : std::nullopt;
  if (t == DType::Bool || ((t == DType::I32 || t == DType::I64) && !ints)) return std::nullopt;
  return value_storage_of(t);
}

/// The identity of a max over values of type t (-inf, or the lowest integer).
Val lowest(Type t) {
  if (t == Type::U32) return Val(0u);
  if (t == Type::I32) return Val(std::numeric_limits<int32_t>::lowest());
  if (t == Type::I64) return Val(static_cast<long long>(std::numeric_limits<int64_t>::lowest()));
  return Val::constant(-std::numeric_limits<double>::infinity(), t);
}

/// The first in-range position of a window starting at `start` with dilation `dl`.
Val first_valid(Val start, Val dl) { return select(start < 0, start + ((dl - 1 - start) / dl) * dl, start); }

/// Start and end (exclusive) of adaptive window a of b over c positions.
Val ad_start(Val a, Val b, Val c) { return (a / b) * c + ((a % b) * c) / b; }
Val ad_end(Val a, Val b, Val c) { return 1 + ((a + 1) * c - 1) / b; }

/// The loop body of one output element: coordinates, the plane's input offset and the output
/// element index.
struct At {
  Val u, pl, o[3], base;
};

At locate(const Buffer<int32_t>& meta, Val u) {
  At a;
  a.u = u;
  Var r(u);
  for (int d = 2; d >= 0; --d) {
    a.o[d] = Val(r) % meta[kPlOut + d];
    r = Val(r) / meta[kPlOut + d];
  }
  a.pl = r;
  a.base = meta[kPlInOffset] + (a.pl / meta[kPlC]) * meta[kPlXsN] + (a.pl % meta[kPlC]) * meta[kPlXsC];
  return a;
}

/// Max over the window of a MaxPool (taps k, start o * s - p, dilation dl) or an adaptive max.
void trace_max(const Pool& spec, const Memory& out, const Buffer<int64_t>& oidx, const Memory& x,
               const Buffer<int32_t>& meta, const At& at) {
  const Type vt = value_type(spec.value);
  const bool adaptive = spec.kind == OpKind::AdaptiveMaxPool;
  Val start[3], end[3], step[3];
  for (int d = 0; d < 3; ++d) {
    const Val n = meta[kPlIn + d];
    if (adaptive) {
      start[d] = ad_start(at.o[d], meta[kPlOut + d], n);
      end[d] = ad_end(at.o[d], meta[kPlOut + d], n);
      step[d] = Val(1);
    } else {
      start[d] = at.o[d] * meta[kPlS + d] - meta[kPlP + d];
      step[d] = meta[kPlDl + d];
      end[d] = start[d] + meta[kPlK + d] * step[d];
    }
  }
  Var m(lowest(vt)), pos(Val(-1));
  const Val H = meta[kPlIn + 1], W = meta[kPlIn + 2];
  for_(start[0], end[0], step[0], [&](Val id) {
    if_(id >= 0 && id < meta[kPlIn], [&] {
      for_(start[1], end[1], step[1], [&](Val ih) {
        if_(ih >= 0 && ih < H, [&] {
          for_(start[2], end[2], step[2], [&](Val iw) {
            if_(iw >= 0 && iw < W, [&] {
              const Val e = at.base + id * meta[kPlXs] + ih * meta[kPlXs + 1] + iw * meta[kPlXs + 2];
              const Val v = load_store(x, spec.value, e);
              Val upd = v > Val(m);
              if (is_float(vt)) upd = upd || v != v;
              if_(upd, [&] {
                m = v;
                pos = (id * H + ih) * W + iw;
              });
            });
          });
        });
      });
    });
  });
  store_store(out, spec.value, meta[kPlOutOffset] + at.u, m);
  if (!spec.indices) return;
  Val first = Val(pos);
  if (!adaptive)
    first = (first_valid(start[0], step[0]) * H + first_valid(start[1], step[1])) * W + first_valid(start[2], step[2]);
  else
    first = (start[0] * H + start[1]) * W + start[2];
  oidx[meta[kPlIdxOffset] + at.u] = cast(select(Val(pos) < 0, first, Val(pos)), Type::I64);
}

/// The sum of the window of an AvgPool divided as the CPU's avg_pool_impl.
void trace_avg(const Pool& spec, const Memory& out, const Memory& x, const Buffer<int32_t>& meta, const At& at) {
  const Type vt = value_type(spec.value);
  const Type acc = vt == Type::F64 ? Type::F64 : is_int(vt) ? Type::I64 : Type::F32;
  Val start[3], pool = Val(1), count = Val(1);
  for (int d = 0; d < 3; ++d) {
    const Val n = meta[kPlIn + d], p = meta[kPlP + d];
    start[d] = at.o[d] * meta[kPlS + d] - p;
    const Val e = min(start[d] + meta[kPlK + d], n + p);
    pool = pool * (e - start[d]);
    count = count * (min(e, n) - max(start[d], Val(0)));
  }
  Var sum(Val::constant(0, acc));
  for_(0, meta[kPlK + 2], [&](Val t) {
    const Val iw = start[2] + t;
    if_(iw >= 0 && iw < meta[kPlIn + 2], [&] {
      Var col(Val::constant(0, acc));
      for_(0, meta[kPlK], [&](Val i) {
        const Val id = start[0] + i;
        if_(id >= 0 && id < meta[kPlIn], [&] {
          for_(0, meta[kPlK + 1], [&](Val j) {
            const Val ih = start[1] + j;
            if_(ih >= 0 && ih < meta[kPlIn + 1], [&] {
              const Val e = at.base + id * meta[kPlXs] + ih * meta[kPlXs + 1] + iw * meta[kPlXs + 2];
              const Val v = load_store(x, spec.value, e);
              col = Val(col) + (v.type == acc ? v : cast(v, acc));
            });
          });
        });
      });
      sum = Val(sum) + Val(col);
    });
  });
  // integers divide as the CPU's int64 (truncating)
  const Val dv = select(meta[kPlDivisor] != 0, meta[kPlDivisor], select(meta[kPlCip] != 0, pool, count));
  const Val q = Val(sum) / cast(dv, acc);
  store_store(out, spec.value, meta[kPlOutOffset] + at.u, q.type == vt || vt != Type::I32 ? q : cast(q, vt));
}

/// The mean of an adaptive window: column sums over the rows, then over the columns.
void trace_adaptive_avg(const Pool& spec, const Memory& out, const Memory& x, const Buffer<int32_t>& meta,
                        const At& at) {
  const Type acc = spec.value == Store::F64 ? Type::F64 : Type::F32;
  Val start[3], end[3];
  for (int d = 0; d < 3; ++d) {
    start[d] = ad_start(at.o[d], meta[kPlOut + d], meta[kPlIn + d]);
    end[d] = ad_end(at.o[d], meta[kPlOut + d], meta[kPlIn + d]);
  }
  Var sum(Val::constant(0, acc));
  for_(start[2], end[2], [&](Val iw) {
    Var col(Val::constant(0, acc));
    for_(start[0], end[0], [&](Val id) {
      for_(start[1], end[1], [&](Val ih) {
        const Val e = at.base + id * meta[kPlXs] + ih * meta[kPlXs + 1] + iw * meta[kPlXs + 2];
        col = Val(col) + load_store(x, spec.value, e);
      });
    });
    sum = Val(sum) + Val(col);
  });
  const Val dh = cast((end[0] - start[0]) * (end[1] - start[1]), acc);
  store_store(out, spec.value, meta[kPlOutOffset] + at.u, Val(sum) / (dh * cast(end[2] - start[2], acc)));
}

}  // namespace

std::optional<Pool> pool_of(const kiln::ir::Op& op) {
  const OpKind k = op.kind;
  if (k != OpKind::MaxPool && k != OpKind::AvgPool && k != OpKind::AdaptiveAvgPool && k != OpKind::AdaptiveMaxPool)
    return std::nullopt;
  if (op.inputs.size() != 1 || op.outputs.empty()) return std::nullopt;
  const bool max = k == OpKind::MaxPool || k == OpKind::AdaptiveMaxPool;
  // 1- and 2-byte integers: max forms only (their identity is below every value, so a window
  // of the lowest value takes its first position, as the CPU's)
  const std::optional<Store> s = pool_store(op.inputs[0].dtype, k != OpKind::AdaptiveAvgPool, max);
  if (!s || op.outputs[0].dtype != op.inputs[0].dtype) return std::nullopt;
  Pool p;
  p.kind = k;
  p.value = *s;
  // the max forms always have an indices output, empty without with_indices
  p.indices = max && kiln::ir::PoolAttrs::decode(op).with_indices;
  if (op.outputs.size() != (max ? 2u : 1u)) return std::nullopt;
  if (p.indices && op.outputs[1].dtype != DType::I64) return std::nullopt;
  p.name = "pool_" + std::string(kiln::ir::op_name(k)) + "_" + store_name(*s) + (p.indices ? "_idx" : "");
  return p;
}

bool pool_meta(const kiln::ir::Op& op, int32_t* meta) {
  const TensorDesc &x = op.inputs[0], &y = op.outputs[0];
  const kiln::ir::PoolAttrs a = kiln::ir::PoolAttrs::decode(op);
  const int64_t nsp = a.nsp, lead = 3 - nsp;
  if (nsp < 1 || nsp > 3 || x.shape.size() != static_cast<size_t>(nsp + 2) || y.shape.size() != x.shape.size())
    return false;
  if (!fits_i32(x) || !fits_i32(y) || !y.is_contiguous() || x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1])
    return false;
  const bool indices = op.outputs.size() > 1 && kiln::ir::PoolAttrs::decode(op).with_indices;
  if (indices && (!op.outputs[1].is_contiguous() || !fits_i32(op.outputs[1]) || op.outputs[1].shape != y.shape))
    return false;
  const bool window = op.kind == OpKind::MaxPool || op.kind == OpKind::AvgPool;
  if (window && (a.kernel.size() != static_cast<size_t>(nsp) || a.stride.size() != static_cast<size_t>(nsp) ||
                 a.padding.size() != static_cast<size_t>(nsp)))
    return false;
  std::fill(meta, meta + kPoolMetaInts, 0);
  meta[kPlCount] = static_cast<int32_t>(y.numel());
  meta[kPlC] = static_cast<int32_t>(std::max<int64_t>(x.shape[1], 1));
  meta[kPlXsN] = static_cast<int32_t>(x.strides[0]);
  meta[kPlXsC] = static_cast<int32_t>(x.strides[1]);
  meta[kPlInOffset] = static_cast<int32_t>(x.offset);
  meta[kPlOutOffset] = static_cast<int32_t>(y.offset);
  meta[kPlIdxOffset] = indices ? static_cast<int32_t>(op.outputs[1].offset) : 0;
  meta[kPlDivisor] = static_cast<int32_t>(a.divisor);
  meta[kPlCip] = a.count_include_pad ? 1 : 0;
  for (int d = 0; d < 3; ++d) {
    meta[kPlIn + d] = meta[kPlOut + d] = meta[kPlK + d] = meta[kPlS + d] = meta[kPlDl + d] = 1;
    meta[kPlP + d] = meta[kPlXs + d] = 0;
  }
  for (int64_t d = 0; d < nsp; ++d) {
    const size_t q = static_cast<size_t>(2 + d);
    const int64_t at = lead + d;
    meta[kPlIn + at] = static_cast<int32_t>(x.shape[q]);
    meta[kPlOut + at] = static_cast<int32_t>(y.shape[q]);
    meta[kPlXs + at] = static_cast<int32_t>(x.strides[q]);
    if (!window) {
      // an adaptive window over an empty input dim has no value (the CPU rejects it)
      if (x.shape[q] == 0 && y.shape[q] > 0) return false;
      continue;
    }
    if (a.kernel[d] < 1 || a.stride[d] < 1) return false;
    meta[kPlK + at] = static_cast<int32_t>(a.kernel[d]);
    meta[kPlS + at] = static_cast<int32_t>(a.stride[d]);
    meta[kPlP + at] = static_cast<int32_t>(a.padding[d]);
    if (!a.dilation.empty()) meta[kPlDl + at] = static_cast<int32_t>(a.dilation[d]);
    if (meta[kPlDl + at] < 1) return false;
  }
  return true;
}

Kernel trace_pool(const Pool& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.value, "out", true);
        const Buffer<int64_t> oidx = spec.indices ? b.output<int64_t>("indices") : Buffer<int64_t>(0, false);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kPlCount], [&] {
          const At at = locate(meta, i);
          switch (spec.kind) {
            case OpKind::AvgPool:
              return trace_avg(spec, out, x, meta, at);
            case OpKind::AdaptiveAvgPool:
              return trace_adaptive_avg(spec, out, x, meta, at);
            default:
              return trace_max(spec, out, oidx, x, meta, at);
          }
        });
      },
      limits);
}

std::optional<Unpool> unpool_of(const kiln::ir::Op& op) {
  if (op.kind != OpKind::MaxUnpool || op.inputs.size() != 2 || op.outputs.size() != 1) return std::nullopt;
  const std::optional<Store> s = pool_store(op.inputs[0].dtype, true, true);
  if (!s || op.outputs[0].dtype != op.inputs[0].dtype || op.inputs[1].dtype != DType::I64) return std::nullopt;
  return Unpool{std::string("max_unpool_") + store_name(*s), *s};
}

bool unpool_meta(const kiln::ir::Op& op, int32_t* meta) {
  const TensorDesc &x = op.inputs[0], &ix = op.inputs[1], &y = op.outputs[0];
  const int64_t nsp = kiln::ir::PoolAttrs::decode(op).nsp, lead = 3 - nsp;
  const size_t r = static_cast<size_t>(nsp + 2);
  if (nsp < 1 || nsp > 3 || x.shape.size() != r || ix.shape != x.shape || y.shape.size() != r) return false;
  if (!fits_i32(x) || !fits_i32(ix) || !fits_i32(y) || !y.is_contiguous() || y.shape[0] != x.shape[0] ||
      y.shape[1] != x.shape[1])
    return false;
  std::fill(meta, meta + kUnpoolMetaInts, 0);
  const int64_t planes = x.shape[0] * x.shape[1];
  meta[kUpPlanes] = static_cast<int32_t>(planes);
  meta[kUpC] = static_cast<int32_t>(std::max<int64_t>(x.shape[1], 1));
  meta[kUpOutPlane] = static_cast<int32_t>(planes == 0 ? 0 : y.numel() / planes);
  meta[kUpXOff] = static_cast<int32_t>(x.offset);
  meta[kUpIOff] = static_cast<int32_t>(ix.offset);
  meta[kUpYOff] = static_cast<int32_t>(y.offset);
  for (int d = 0; d < 3; ++d) meta[kUpIn + d] = 1;
  for (size_t q = 0; q < r; ++q) {
    const int at = q < 2 ? static_cast<int>(q) : static_cast<int>(2 + lead + static_cast<int64_t>(q) - 2);
    meta[kUpXs + at] = static_cast<int32_t>(x.strides[q]);
    meta[kUpIs + at] = static_cast<int32_t>(ix.strides[q]);
    if (q >= 2) meta[kUpIn + at - 2] = static_cast<int32_t>(x.shape[q]);
  }
  return true;
}

Kernel trace_unpool(const Unpool& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;  // elementwise_groups
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.value, "out", true);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Buffer<int64_t> index = b.input<int64_t>("indices");
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        const Val plane = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(plane < meta[kUpPlanes], [&] {
          const Val n = plane / meta[kUpC], c = plane % meta[kUpC], size = meta[kUpOutPlane];
          const Val yb = meta[kUpYOff] + plane * size;
          const Val zero = Val::constant(0, value_type(spec.value));
          for_(0, size, [&](Val j) { store_store(out, spec.value, yb + j, zero); });
          const Val xb = meta[kUpXOff] + n * meta[kUpXs] + c * meta[kUpXs + 1];
          const Val ib = meta[kUpIOff] + n * meta[kUpIs] + c * meta[kUpIs + 1];
          const Val d1 = meta[kUpIn + 1], d2 = meta[kUpIn + 2];
          for_(0, meta[kUpIn] * d1 * d2, [&](Val q) {  // in order: a later duplicate wins
            const Val w = q % d2, h = (q / d2) % d1, a = q / (d1 * d2);
            const Val xi = xb + a * meta[kUpXs + 2] + h * meta[kUpXs + 3] + w * meta[kUpXs + 4];
            const Val ii = ib + a * meta[kUpIs + 2] + h * meta[kUpIs + 3] + w * meta[kUpIs + 4];
            store_store(out, spec.value, yb + cast(Val(index[ii]), Type::I32), load_store(x, spec.value, xi));
          });
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
