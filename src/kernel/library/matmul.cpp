// SPDX-License-Identifier: MIT OR Apache-2.0
// Batched matmul of the library (kernel/library.h) on f32, f64, f16 and bf16 (in f32, rounded
// once, as the CPU) and i32 and i64 (wrapping): 16 x 16 (or 8 x 8, an autotuned variant with
// the same results: each output adds its products in k order either way) output tiles, one per group,
// each thread one output; the K dimension walks through 16 x 16 tiles of a and b staged in
// shared memory. Operands may have any strides (a batch stride of 0 broadcasts). With a bias
// the product accumulates onto it, as the CPU's MatMul does.
#include <algorithm>

#include "kernel/library.h"

namespace kiln::kernel::lib {

std::optional<MatMul> matmul_of(const kiln::ir::Op& op) {
  if (op.kind != kiln::ir::OpKind::MatMul || op.outputs.size() != 1) return std::nullopt;
  if (op.inputs.size() != 2 && op.inputs.size() != 3) return std::nullopt;
  const auto& a = op.inputs[0];
  const auto& o = op.outputs[0];
  const std::optional<Store> s = storage_of(o.dtype, false);
  if (!s || (*s != Store::F32 && *s != Store::F64 && *s != Store::F16 && *s != Store::BF16 && *s != Store::I32 &&
             *s != Store::I64))
    return std::nullopt;
  for (const auto& d : op.inputs)
    if (d.dtype != o.dtype || !fits_i32(d)) return std::nullopt;
  if (!fits_i32(o) || a.shape.size() != 3 || o.shape.size() != 3) return std::nullopt;
  if (op.inputs.size() == 3 && op.inputs[2].shape.size() != 1) return std::nullopt;
  if (o.shape[0] > 65535 || (o.shape[1] + 7) / 8 > 65535 || (o.shape[2] + 7) / 8 > 65535) return std::nullopt;
  MatMul m;
  m.value = *s;
  m.bias = op.inputs.size() == 3;
  m.name = std::string(m.bias ? "matmul_bias_" : "matmul_") + store_name(m.value);  // tile 16
  return m;
}

void matmul_meta(const kiln::ir::Op& op, int32_t* meta) {
  const auto &a = op.inputs[0], &b = op.inputs[1], &o = op.outputs[0];
  std::fill(meta, meta + kMatMulMetaInts, 0);
  const auto i32 = [](int64_t v) { return static_cast<int32_t>(v); };
  meta[kM] = i32(o.shape[1]);
  meta[kN] = i32(o.shape[2]);
  meta[kK] = i32(a.shape[2]);
  const kiln::ir::TensorDesc* ds[3] = {&a, &b, &o};
  for (int q = 0; q < 3; ++q) {
    const auto& d = *ds[q];
    meta[kMatOff + 4 * q] = i32(d.offset);
    for (int j = 0; j < 3; ++j)
      meta[kMatOff + 4 * q + 1 + j] = d.shape[static_cast<size_t>(j)] == 1 ? 0 : i32(d.strides[static_cast<size_t>(j)]);
  }
  if (op.inputs.size() == 3) {
    meta[kBiasOff] = i32(op.inputs[2].offset);
    meta[kBiasStride] = i32(op.inputs[2].strides[0]);
  }
}

Kernel trace_matmul(const MatMul& spec, const Limits& limits) {
  return trace_matmul_into(spec, limits, *no_source(), true);
}

Kernel trace_matmul_into(const MatMul& spec, const Limits& limits, Source& src, bool keep) {
  const int kTile = spec.tile;
  return trace(
      spec.name,
      [&](Builder& b) {
        b.group_size(kTile, kTile);
        const Store st = spec.value;
        const Type at_t = value_type(st);
        std::optional<Memory> out;
        if (keep) out = declare_store(b, st, "out", true);
        src.outputs(b);
        const Memory a = declare_store(b, st, "a", false);
        const Memory bm = declare_store(b, st, "b", false);
        std::optional<Memory> bias;
        if (spec.bias) bias = declare_store(b, st, "bias", false);
        src.inputs(b, st, "in");
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        src.scalars(b, meta);
        const Memory ta = shared_of(b, at_t, "ta", kTile * kTile), tb = shared_of(b, at_t, "tb", kTile * kTile);
        const Val zero = Val::constant(0, at_t);
        const Val tx = thread_id(0), ty = thread_id(1);
        const Val M = meta[kM], N = meta[kN], K = meta[kK];
        const Val batch = group_id(2);
        const Val row = group_id(1) * kTile + ty, col = group_id(0) * kTile + tx;
        // meta[kMatOff + 4q + 0..3]: offset, batch, row and column strides of a, b, out.
        const auto at = [&](int q, Val r, Val c) {
          const int base = kMatOff + 4 * q;
          return meta[base] + batch * meta[base + 1] + r * meta[base + 2] + c * meta[base + 3];
        };
        Var acc(zero);
        if (bias) {
          if_(col < N, [&] {
            const Val bo = meta[kBiasOff] + col * meta[kBiasStride];
            acc = load_store(*bias, st, bo);
          });
        }
        for_(0, K, kTile, [&](Val k0) {
          const Val ka = k0 + tx, kb = k0 + ty;
          ta[ty * kTile + tx] =
              select(row < M && ka < K,
                     load_store(a, st, at(0, select(row < M, row, Val(0)), select(ka < K, ka, Val(0)))), zero);
          tb[ty * kTile + tx] =
              select(kb < K && col < N,
                     load_store(bm, st, at(1, select(kb < K, kb, Val(0)), select(col < N, col, Val(0)))), zero);
          barrier();
          for (int kk = 0; kk < kTile; ++kk) {
            const Val x = ta[ty * kTile + kk];
            const Val y = tb[kk * kTile + tx];
            acc = acc + x * y;
          }
          barrier();
        });
        if_(row < M && col < N, [&] {
          if (out) store_store(*out, st, at(2, row, col), Val(acc));
          // the epilogue's element: the product's, contiguous [B, M, N]
          src.epilogue((batch * M + row) * N + col, round_trip(st, Val(acc)));
        });
      },
      limits);
}

std::array<uint32_t, 3> matmul_groups(const kiln::ir::Op& op, int tile) {
  const auto& o = op.outputs[0];
  return {static_cast<uint32_t>((o.shape[2] + tile - 1) / tile), static_cast<uint32_t>((o.shape[1] + tile - 1) / tile),
          static_cast<uint32_t>(o.shape[0])};
}

MatMul matmul_variant(const MatMul& spec, int tile) {
  MatMul m = spec;
  m.tile = tile;
  m.name = spec.name + "_t" + std::to_string(tile);
  return m;
}

}  // namespace kiln::kernel::lib
