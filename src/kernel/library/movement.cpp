// SPDX-License-Identifier: MIT OR Apache-2.0
// Movement ops of the library (kernel/library.h): Cat as one strided copy per input into its
// slice of the output (the elementwise copy kernel), and Pad in every mode, one thread per
// output element mapping its coordinates back to the input's.
#include <algorithm>
#include <cstring>

#include "ir/attrs.h"
#include "kernel/library.h"
#include "kiln/half.h"

namespace kiln::kernel::lib {

using kiln::ir::OpKind;
using kiln::ir::TensorDesc;

std::vector<kiln::ir::Op> cat_pieces(const kiln::ir::Op& op) {
  if (op.kind != OpKind::Cat || op.outputs.size() != 1) return {};
  const TensorDesc& o = op.outputs[0];
  const int64_t r = static_cast<int64_t>(o.shape.size());
  int64_t dim = kiln::ir::ScanAttrs::decode(op).dim;
  if (dim < 0) dim += r;
  if (dim < 0 || dim >= r) return {};
  std::vector<kiln::ir::Op> pieces;
  int64_t at = 0;
  for (const TensorDesc& in : op.inputs) {
    if (static_cast<int64_t>(in.shape.size()) != r || in.dtype != o.dtype) return {};
    kiln::ir::Op c;
    c.kind = OpKind::Copy;
    c.inputs = {in};
    TensorDesc slice = o;
    slice.shape[static_cast<size_t>(dim)] = in.shape[static_cast<size_t>(dim)];
    slice.offset = o.offset + at * o.strides[static_cast<size_t>(dim)];
    at += in.shape[static_cast<size_t>(dim)];
    c.outputs = {slice};
    pieces.push_back(std::move(c));
  }
  if (at != o.shape[static_cast<size_t>(dim)]) return {};
  return pieces;
}

namespace {

/// The bits of v converted to dtype t as the CPU's pad converts it (static_cast; bool: nonzero;
/// f16 and bf16 through float), zero-extended.
uint64_t constant_bits(DType t, double v) {
  auto bits = [](auto x) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof(x));
    return b;
  };
  switch (t) {
    case DType::F64:
      return bits(v);
    case DType::F32:
      return bits(static_cast<float>(v));
    case DType::F16:
      return bits(Half(static_cast<float>(v)));
    case DType::BF16:
      return bits(BFloat16(static_cast<float>(v)));
    case DType::Bool:
      return v != 0;
    case DType::I8:
      return bits(static_cast<int8_t>(v));
    case DType::I16:
      return bits(static_cast<int16_t>(v));
    case DType::I32:
      return bits(static_cast<int32_t>(v));
    case DType::U8:
      return bits(static_cast<uint8_t>(v));
    case DType::U16:
      return bits(static_cast<uint16_t>(v));
    case DType::U32:
      return bits(static_cast<uint32_t>(v));
    case DType::U64:
      return bits(static_cast<uint64_t>(v));
    default:
      return bits(static_cast<int64_t>(v));
  }
}

}  // namespace

std::optional<Pad> pad_of(const kiln::ir::Op& op) {
  if (op.kind != OpKind::Pad || op.inputs.size() != 1 || op.outputs.size() != 1) return std::nullopt;
  const kiln::ir::PadAttrs a = kiln::ir::PadAttrs::decode(op);
  const bool constant = a.mode == kiln::ir::PadAttrs::kConstant;
  if (a.mode < kiln::ir::PadAttrs::kConstant || a.mode > kiln::ir::PadAttrs::kCircular) return std::nullopt;
  const DType t = op.outputs[0].dtype;
  // every mode moves bits; the constant is converted on the host as the CPU converts it
  const std::optional<Store> s = storage_of(t, true);
  if (!s) return std::nullopt;
  Pad p;
  p.value = *s;
  p.mode = static_cast<int>(a.mode);
  if (constant) {
    const uint64_t b = constant_bits(t, a.value);
    if (*s == Store::F32)
      p.push = {Arg(static_cast<float>(a.value))};
    else if (*s == Store::X64)
      p.push = {Arg(static_cast<int64_t>(b))};
    else
      p.push = {Arg(static_cast<int32_t>(static_cast<uint32_t>(b)))};
  }
  p.name = "pad_" + std::to_string(p.mode) + "_" + store_name(*s);
  return p;
}

bool pad_meta(const kiln::ir::Op& op, int32_t* meta) {
  const TensorDesc &o = op.outputs[0], &x = op.inputs[0];
  const size_t r = o.shape.size();
  if (r > static_cast<size_t>(kMaxRank) || x.shape.size() != r || !fits_i32(o) || !fits_i32(x)) return false;
  const kiln::ir::PadAttrs a = kiln::ir::PadAttrs::decode(op);
  if (a.npad() > r) return false;
  std::fill(meta, meta + kPadMetaInts, 0);
  meta[kPdRank] = static_cast<int32_t>(r);
  meta[kPdCount] = static_cast<int32_t>(o.numel());
  meta[kPdOutOffset] = static_cast<int32_t>(o.offset);
  meta[kPdInOffset] = static_cast<int32_t>(x.offset);
  for (size_t k = 0; k < r; ++k) {
    meta[kPdShape + k] = static_cast<int32_t>(o.shape[k]);
    meta[kPdOutStrides + k] = static_cast<int32_t>(o.strides[k]);
    meta[kPdInShape + k] = static_cast<int32_t>(x.shape[k]);
    meta[kPdInStrides + k] = static_cast<int32_t>(x.strides[k]);
  }
  // pads come as {lo, hi} pairs from the last dim
  for (size_t q = 0; q < a.npad(); ++q) meta[kPdLo + (r - 1 - q)] = static_cast<int32_t>(a.pads[2 * q]);
  // an empty input dim reads nothing: only the constant mode can pad it (the CPU checks)
  for (size_t k = 0; k < r; ++k)
    if (x.shape[k] == 0 && o.shape[k] > 0 && a.mode != kiln::ir::PadAttrs::kConstant) return false;
  return true;
}

Kernel trace_pad(const Pad& spec, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        const Memory out = declare_store(b, spec.value, "out", true);
        const Memory x = declare_store(b, spec.value, "x", false);
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        Val fill;
        if (!spec.push.empty()) {  // the constant's bits in the storage's type
          const Type ft = value_type(spec.value);
          fill = ft == Type::F32   ? b.scalar<float>("value")
                 : ft == Type::I64 ? b.scalar<int64_t>("value")
                 : ft == Type::U32 ? b.scalar<uint32_t>("value")
                                   : b.scalar<int32_t>("value");
        }
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kPdCount], [&] {
          const Val rank = meta[kPdRank];
          const Val o0 = meta[kPdOutOffset], i0 = meta[kPdInOffset];
          Var rem(i), oo(o0), io(i0), outside(Val(false));
          for_(0, rank, [&](Val j) {
            const Val d = rank - 1 - j;
            const Val size = meta[kPdShape + d];
            const Val c = rem % size;
            rem = rem / size;
            oo = Val(oo) + c * meta[kPdOutStrides + d];
            const Val n = meta[kPdInShape + d];
            Val s = c - meta[kPdLo + d];
            switch (spec.mode) {
              case 0:  // constant
                outside = Val(outside) || s < 0 || s >= n;
                break;
              case 1:  // reflect (pad < size)
                s = select(s < 0, -s, s);
                s = select(s >= n, (n - 1) * 2 - s, s);
                break;
              case 2:  // replicate
                s = min(max(s, Val(0)), n - 1);
                break;
              default:  // circular (pad <= size)
                s = (s % n + n) % n;
                break;
            }
            io = Val(io) + s * meta[kPdInStrides + d];
          });
          if (spec.mode == 0) {
            Var v(fill);
            if_(!Val(outside), [&] { v = load_store(x, spec.value, io); });
            store_store(out, spec.value, oo, v);
          } else {
            store_store(out, spec.value, oo, load_store(x, spec.value, io));
          }
        });
      },
      limits);
}

}  // namespace kiln::kernel::lib
