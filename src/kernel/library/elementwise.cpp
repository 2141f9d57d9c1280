// SPDX-License-Identifier: MIT OR Apache-2.0
// Elementwise kernels of the library (kernel/library.h): one kernel per op function and
// storages, over strided and broadcast operands of any rank up to kMaxRank. The functions of
// the ops are in elementwise_ops.cpp.
#include <algorithm>
#include <cstdlib>

#include "kernel/library.h"

namespace kiln::kernel::lib {

std::optional<Store> storage_of(DType t, bool copy) {
  switch (t) {
    case DType::F32:
      return Store::F32;
    case DType::F64:
      return copy ? Store::X64 : Store::F64;
    case DType::I32:
      return Store::I32;
    case DType::I64:
      return copy ? Store::X64 : Store::I64;
    case DType::Bool:
      return copy ? Store::U8 : Store::B8;
    default:
      break;
  }
  if (!copy) return std::nullopt;
  switch (dtype_size(t)) {
    case 1:
      return Store::U8;
    case 4:
      return Store::I32;
    case 8:
      return Store::X64;
    default:
      return std::nullopt;
  }
}

bool uses_f64(const kiln::ir::Op& op) {
  for (const auto& d : op.inputs)
    if (d.dtype == DType::F64) return true;
  for (const auto& d : op.outputs)
    if (d.dtype == DType::F64) return true;
  return false;
}

namespace {

/// The shift of element e's byte in its word (U32).
Val byte_shift(Val e) { return cast(e & 3, Type::U32) * 8u; }

}  // namespace

Memory declare_store(Builder& b, Store s, const std::string& name, bool out) {
  switch (s) {
    case Store::F32:
      return out ? Memory(b.output<float>(name)) : Memory(b.input<float>(name));
    case Store::F64:
      return out ? Memory(b.output<double>(name)) : Memory(b.input<double>(name));
    case Store::I32:
      return out ? Memory(b.output<int32_t>(name)) : Memory(b.input<int32_t>(name));
    case Store::I64:
    case Store::X64:
      return out ? Memory(b.output<int64_t>(name)) : Memory(b.input<int64_t>(name));
    case Store::B8:
    case Store::U8:  // words; an output is read and written (atomics keep the other bytes)
      return out ? Memory(b.inout<uint32_t>(name)) : Memory(b.input<uint32_t>(name));
  }
  return Memory(0, false);
}

Val load_store(const Memory& m, Store s, Val e) {
  if (s != Store::B8 && s != Store::U8) return m[e];
  const Val w = m[e >> 2];
  const Val byte = (w >> byte_shift(e)) & 255u;
  return s == Store::B8 ? byte != 0u : byte;
}

void store_store(const Memory& m, Store s, Val e, Val v) {
  if (s != Store::B8 && s != Store::U8) {
    m[e] = v;
    return;
  }
  // Only this thread writes this byte: the old byte read atomically with the word stays valid,
  // and adding (new - old) << shift changes that byte alone, whatever neighbours do meanwhile.
  const Val sh = byte_shift(e);
  const Val nb = s == Store::B8 ? select(v, Val(1u), Val(0u)) : v;
  const Val old = atomic_add(m[e >> 2], Val(0u));
  const Val ob = (old >> sh) & 255u;
  atomic_add(m[e >> 2], (nb - ob) << sh);
}

Kernel trace_elementwise(const Elementwise& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const int arity = static_cast<int>(spec.inputs.size());
        const Memory out = declare_store(b, spec.output, "out", true);
        std::vector<Memory> in;
        for (int q = 0; q < arity; ++q) in.push_back(declare_store(b, spec.inputs[q], "in" + std::to_string(q), false));
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        Val reals[kMaxReals + 1];
        for (int r = 0; r < spec.reals; ++r)
          reals[r] = spec.real_type == Type::F64 ? b.scalar<double>("r" + std::to_string(r))
                                                 : b.scalar<float>("r" + std::to_string(r));
        if (spec.output == Store::I64 && arity == 0) reals[spec.reals] = b.scalar<int64_t>("v");
        if ((spec.output == Store::I32 || spec.output == Store::B8) && arity == 0)
          reals[spec.reals] = b.scalar<int32_t>("v");
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kCount], [&] {
          const Val rank = meta[kRank];
          Var rem(i);
          std::vector<Var> off;
          off.reserve(kMaxOperands);  // Vars are not moved: a copy would be a new variable
          for (int q = 0; q <= arity; ++q) off.emplace_back(meta[kOffsets + q]);
          for_(0, rank, [&](Val j) {
            const Val d = rank - 1 - j;
            const Val size = meta[kShape + d];
            const Val idx = rem % size;
            rem = rem / size;
            for (int q = 0; q <= arity; ++q)
              off[static_cast<size_t>(q)] = off[static_cast<size_t>(q)] + idx * meta[kStrides + q * kMaxRank + d];
          });
          Val x[kMaxOperands - 1];
          for (int q = 0; q < arity; ++q)
            x[q] = load_store(in[static_cast<size_t>(q)], spec.inputs[static_cast<size_t>(q)],
                              off[static_cast<size_t>(q + 1)]);
          store_store(out, spec.output, off[0], spec.fn(x, reals));
        });
      },
      limits);
}

namespace {

/// The strides of d over the output shape S (right-aligned; 0 where d broadcasts).
void strides_over(const kiln::ir::TensorDesc& d, const Shape& S, int32_t* st) {
  const size_t r = S.size(), rd = d.shape.size();
  for (size_t q = 0; q < r; ++q) {
    st[q] = 0;
    if (q + rd < r) continue;
    const size_t jd = q + rd - r;
    if (d.shape[jd] != 1) st[q] = static_cast<int32_t>(d.strides[jd]);
  }
}

bool in_i32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

}  // namespace

bool fits_i32(const kiln::ir::TensorDesc& d) {
  if (d.shape.size() > static_cast<size_t>(kMaxRank) || !in_i32(d.offset) || !in_i32(d.numel())) return false;
  int64_t last = d.offset;
  for (size_t q = 0; q < d.shape.size(); ++q) {
    if (!in_i32(d.strides[q])) return false;
    if (d.shape[q] > 0) last += (d.shape[q] - 1) * std::abs(d.strides[q]);
  }
  return in_i32(last);
}

bool elementwise_meta(const kiln::ir::Op& op, int32_t* meta) {
  const kiln::ir::TensorDesc& o = op.outputs[0];
  if (op.inputs.size() + 1 > static_cast<size_t>(kMaxOperands) || !fits_i32(o)) return false;
  for (const auto& d : op.inputs)
    if (!fits_i32(d) || d.shape.size() > o.shape.size()) return false;
  std::fill(meta, meta + kMetaInts, 0);
  meta[kRank] = static_cast<int32_t>(o.shape.size());
  meta[kCount] = static_cast<int32_t>(o.numel());
  meta[kOffsets] = static_cast<int32_t>(o.offset);
  for (size_t q = 0; q < o.shape.size(); ++q) meta[kShape + q] = static_cast<int32_t>(o.shape[q]);
  strides_over(o, o.shape, meta + kStrides);
  for (size_t q = 0; q < op.inputs.size(); ++q) {
    meta[kOffsets + 1 + q] = static_cast<int32_t>(op.inputs[q].offset);
    strides_over(op.inputs[q], o.shape, meta + kStrides + (q + 1) * kMaxRank);
  }
  return true;
}

std::array<uint32_t, 3> elementwise_groups(int64_t n) {
  const int64_t groups = std::max<int64_t>((n + 255) / 256, 1);
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(groups, 65535));
  return {gx, static_cast<uint32_t>((groups + gx - 1) / gx), 1};
}

}  // namespace kiln::kernel::lib
