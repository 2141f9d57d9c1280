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
    case DType::U8:
      return Store::U8;
    case DType::I8:
      return copy ? Store::U8 : Store::I8;
    case DType::I16:
      return copy ? Store::U16 : Store::I16;
    case DType::F16:
      return copy ? Store::U16 : Store::F16;
    case DType::BF16:
      return copy ? Store::U16 : Store::BF16;
    case DType::U32:  // copies move 4-byte words as i32 does
      return copy ? Store::I32 : Store::U32;
    case DType::U16:  // values zero-extended to u32, as u8's
      return Store::U16;
    default:
      break;
  }
  if (!copy) return std::nullopt;
  switch (dtype_size(t)) {
    case 1:
      return Store::U8;
    case 2:
      return Store::U16;
    case 4:
      return Store::I32;
    case 8:
      return Store::X64;
    default:
      return std::nullopt;
  }
}

std::optional<Store> value_storage_of(DType t) {
  if (t == DType::U8 || t == DType::I8 || t == DType::I16 || t == DType::U16) return std::nullopt;
  return storage_of(t, false);
}

bool uses_f64(const kiln::ir::Op& op) {
  for (const auto& d : op.inputs)
    if (d.dtype == DType::F64) return true;
  for (const auto& d : op.outputs)
    if (d.dtype == DType::F64) return true;
  return false;
}

namespace {

/// Bytes per element of a packed storage.
int width(Store s) { return s == Store::I16 || s == Store::U16 || s == Store::F16 || s == Store::BF16 ? 2 : 1; }

/// The shift of element e's bits in its word (U32), and the word's index.
Val elem_shift(Val e, int w) { return w == 1 ? cast(e & 3, Type::U32) * 8u : cast(e & 1, Type::U32) * 16u; }
Val word_of(Val e, int w) { return w == 1 ? e >> 2 : e >> 1; }

/// f16 bits (U32) as f32: exact, subnormals included (built in integers, so a device that
/// flushes subnormal floats still gets them right). A kernel function, as float_to_half.
Val half_to_float(Val h) {
  return call_library("half_to_float", {h}, [](const std::vector<Val>& a) {
    const Val hb = a[0], sign = (hb & 0x8000u) << 16u, e = (hb >> 10u) & 0x1fu, m = hb & 0x3ffu;
    const Val special = bitcast(sign | 0x7f800000u | (m << 13u), Type::F32);
    const Val normal = bitcast(sign | ((e + 112u) << 23u) | (m << 13u), Type::F32);
    const Val sub = cast(m, Type::F32) * 5.9604644775390625e-8f;
    return select(e == 0x1fu, special, select(e == 0u, select(sign != 0u, -sub, sub), normal));
  });
}

/// f32 as f16 bits (U32), round to nearest even (the CPU's conversion, line for line).
Val float_to_half(Val f) {
  return call_library("float_to_half", {f}, [](const std::vector<Val>& a) {
    const Val x = bitcast(a[0], Type::U32), sign = (x >> 16u) & 0x8000u, ax = x & 0x7fffffffu;
    const Val nan_inf = sign | select(ax > 0x7f800000u, Val(0x7e00u), Val(0x7c00u));
    const Val tiny = sign | (bitcast(bitcast(ax, Type::F32) + 0.5f, Type::U32) - 0x3f000000u);
    const Val normal = sign | ((ax + 0xc8000fffu + ((ax >> 13u) & 1u)) >> 13u);
    return select(ax >= 0x7f800000u, nan_inf,
                  select(ax >= 0x477ff000u, sign | 0x7c00u, select(ax < 0x38800000u, tiny, normal)));
  });
}

/// f32 as bf16 bits (U32), round to nearest even, NaN kept quiet.
Val float_to_bf16(Val f) {
  const Val u = bitcast(f, Type::U32);
  return select((u & 0x7fffffffu) > 0x7f800000u, (u >> 16u) | 0x40u, (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u);
}

/// Sign-extends the low `bits` of raw (U32) to I32.
Val sign_extend(Val raw, uint32_t bits) {
  const uint32_t top = 1u << (bits - 1);
  return cast(raw ^ top, Type::I32) - static_cast<int>(top);
}

}  // namespace

Memory declare_store(Builder& b, Store s, const std::string& name, bool out) {
  switch (s) {
    case Store::F32:
      return out ? Memory(b.output<float>(name)) : Memory(b.input<float>(name));
    case Store::F64:
      return out ? Memory(b.output<double>(name)) : Memory(b.input<double>(name));
    case Store::I32:
      return out ? Memory(b.output<int32_t>(name)) : Memory(b.input<int32_t>(name));
    case Store::U32:
      return out ? Memory(b.output<uint32_t>(name)) : Memory(b.input<uint32_t>(name));
    case Store::I64:
    case Store::X64:
      return out ? Memory(b.output<int64_t>(name)) : Memory(b.input<int64_t>(name));
    default:  // packed in words; an output is read and written (atomics keep the other bytes)
      return out ? Memory(b.inout<uint32_t>(name)) : Memory(b.input<uint32_t>(name));
  }
  return Memory(0, false);
}

Memory shared_of(Builder& b, Type t, const std::string& name, uint32_t count) {
  switch (t) {
    case Type::F64:
      return b.shared<double>(name, count);
    case Type::I64:
      return b.shared<int64_t>(name, count);
    case Type::U32:
      return b.shared<uint32_t>(name, count);
    case Type::I32:
    case Type::Bool:
      return b.shared<int32_t>(name, count);
    default:
      return b.shared<float>(name, count);
  }
}

void tree_fold(const Memory& sh, Val t, uint32_t n, Val (*fn)(Val, Val)) {
  tree_steps(n, [&](Val s) {
    if_(t < s, [&] {
      const Val a = sh[t], b = sh[t + s];
      sh[t] = fn(a, b);
    });
  });
}

void tree_steps(uint32_t n, const std::function<void(Val)>& step) {
  Var s(static_cast<int>(n / 2));
  while_([&] { return Val(s) > 0; },
         [&] {
           step(Val(s));
           barrier();
           s = Val(s) >> 1;
         });
}

namespace {

/// The value of element bits `raw` (U32, the element's bytes) of packed storage s.
Val decode_bits(Store s, Val raw) {
  switch (s) {
    case Store::B8:
      return raw != 0u;
    case Store::I8:
      return sign_extend(raw, 8);
    case Store::I16:
      return sign_extend(raw, 16);
    case Store::F16:
      return half_to_float(raw);
    case Store::BF16:
      return bitcast(raw << 16u, Type::F32);
    default:  // U8, U16
      return raw;
  }
}

/// The bits (U32) packed storage s keeps of value v.
Val encode_bits(Store s, Val v) {
  switch (s) {
    case Store::B8:
      return select(v, Val(1u), Val(0u));
    case Store::F16:
      return float_to_half(v);
    case Store::BF16:
      return float_to_bf16(v);
    default:  // integers: the low bits (wrapping, as the CPU's conversion)
      return (v.type == Type::U32 ? v : cast(v, Type::U32)) & (width(s) == 1 ? 0xffu : 0xffffu);
  }
}

}  // namespace

Val load_store(const Memory& m, Store s, Val e) {
  if (!packed(s)) return m[e];
  const int w = width(s);
  const Val word = m[word_of(e, w)];
  return decode_bits(s, (word >> elem_shift(e, w)) & (w == 1 ? 0xffu : 0xffffu));
}

Val round_trip(Store s, Val v) { return packed(s) ? decode_bits(s, encode_bits(s, v)) : v; }

void store_store(const Memory& m, Store s, Val e, Val v) {
  if (!packed(s)) {
    m[e] = v;
    return;
  }
  const int w = width(s);
  const uint32_t mask = w == 1 ? 0xffu : 0xffffu;
  const Val bits = encode_bits(s, v);
  // Only this thread writes these bits: the old ones read atomically with the word stay valid,
  // and adding (new - old) << shift changes them alone, whatever neighbours do meanwhile.
  const Val sh = elem_shift(e, w);
  const Val old = atomic_add(m[word_of(e, w)], Val(0u));
  const Val ob = (old >> sh) & mask;
  atomic_add(m[word_of(e, w)], (bits - ob) << sh);
}

Val real_of(Builder& b, const Elementwise& spec, int r, const std::string& name) {
  const Type t = spec.real_types.empty() ? spec.real_type : spec.real_types[static_cast<size_t>(r)];
  return t == Type::F64   ? b.scalar<double>(name)
         : t == Type::I64 ? b.scalar<int64_t>(name)
         : t == Type::I32 ? b.scalar<int32_t>(name)
                          : b.scalar<float>(name);
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
        for (int r = 0; r < spec.reals; ++r) {
          std::string rn = "r";  // appended: GCC 12 warns (-Wrestrict) on "r" + std::string here
          rn += std::to_string(r);
          reals[r] = real_of(b, spec, r, rn);
        }
        const bool fill = arity == 0 && !spec.with_index;
        if (spec.output == Store::I64 && fill) reals[spec.reals] = b.scalar<int64_t>("v");
        if ((spec.output == Store::I32 || spec.output == Store::B8 || spec.output == Store::I8 ||
             spec.output == Store::I16 || spec.output == Store::U8 || spec.output == Store::U16) &&
            fill)
          reals[spec.reals] = b.scalar<int32_t>("v");
        if (spec.output == Store::U32 && fill) reals[spec.reals] = b.scalar<uint32_t>("v");
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
          Val x[kMaxOperands];
          for (int q = 0; q < arity; ++q)
            x[q] = load_store(in[static_cast<size_t>(q)], spec.inputs[static_cast<size_t>(q)],
                              off[static_cast<size_t>(q + 1)]);
          if (spec.with_index) x[arity] = i;
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
