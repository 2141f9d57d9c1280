// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan backend's native ops (kernels.h), written in the kernel language (kiln/kernel.h)
// and rendered to GLSL. Every other op runs through the fallback (src/ops/fallback.cpp).
#include "backends/vulkan/kernels.h"

#include <cstring>
#include <map>
#include <mutex>

#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

namespace k = kiln::kernel;
using ir::OpKind;

constexpr int kMaxRank = 8;
constexpr int kMaxOperands = 4;  // the output and up to three inputs
constexpr uint32_t kGroup = 256;
// The parameters of one elementwise dispatch (int32, uploaded per dispatch): rank, element
// count, an element offset per operand, the output shape, then the strides of each operand
// over the output's dims (0 where it broadcasts).
enum : int { kRank = 0, kCount = 1, kOffsets = 2, kShape = kOffsets + kMaxOperands, kStrides = kShape + kMaxRank };
constexpr int kMetaInts = kStrides + kMaxOperands * kMaxRank;

/// What an elementwise op computes on the kernel's values (null: not native).
using ElemFn = k::Val (*)(const k::Val* x);

ElemFn unary_f32(OpKind kind) {
  switch (kind) {
    case OpKind::Abs:
      return [](const k::Val* x) { return k::abs(x[0]); };
    case OpKind::Neg:
      return [](const k::Val* x) { return -x[0]; };
    case OpKind::Square:
      return [](const k::Val* x) { return x[0] * x[0]; };
    case OpKind::Reciprocal:
      return [](const k::Val* x) { return 1.0f / x[0]; };
    case OpKind::Sqrt:
      return [](const k::Val* x) { return k::sqrt(x[0]); };
    case OpKind::Floor:
      return [](const k::Val* x) { return k::floor(x[0]); };
    case OpKind::Ceil:
      return [](const k::Val* x) { return k::ceil(x[0]); };
    // x < 0 is false for NaN, which passes through as on the CPU.
    case OpKind::Relu:
      return [](const k::Val* x) { return k::select(x[0] < 0.0f, k::Val(0.0f), x[0]); };
    // exp, log, tanh and sigmoid are not here yet: the GLSL built-ins they render to are off by
    // more ulps than the CPU's bounds (tests/unit/test_unary_property.cpp), and drivers may flush
    // denormal inputs to zero (lavapipe does); they run on the CPU until the kernel language
    // renders the CPU's polynomial forms.
    default:
      return nullptr;
  }
}

ElemFn binary(OpKind kind, bool floating) {
  switch (kind) {
    case OpKind::Add:
      return [](const k::Val* x) { return x[0] + x[1]; };
    case OpKind::Sub:
      return [](const k::Val* x) { return x[0] - x[1]; };
    case OpKind::Mul:
      return [](const k::Val* x) { return x[0] * x[1]; };
    case OpKind::Div:
      if (floating) return [](const k::Val* x) { return x[0] / x[1]; };
      return nullptr;
    default:
      return nullptr;
  }
}

/// The element type a dtype is moved as (Copy: any 4-byte dtype as its bits).
bool kernel_type(DType t, k::Type& out) {
  switch (t) {
    case DType::F32:
      out = k::Type::F32;
      return true;
    case DType::I32:
      out = k::Type::I32;
      return true;
    default:
      return false;
  }
}

/// The function of op on its dtype, or null. `words`: Copy moves 4-byte words.
ElemFn elem_fn(const ir::Op& op) {
  if (op.outputs.size() != 1 || !op.attrs.ints.empty() || !op.attrs.reals.empty()) return nullptr;
  const DType t = op.outputs[0].dtype;
  for (const auto& d : op.inputs)
    if (d.dtype != t) return nullptr;
  if (op.kind == OpKind::Copy)
    return dtype_size(t) == 4 ? static_cast<ElemFn>([](const k::Val* x) { return x[0]; }) : nullptr;
  const ir::Family f = ir::op_family(op.kind);
  if (f == ir::Family::Unary && t == DType::F32) return unary_f32(op.kind);
  if (f == ir::Family::Binary && (t == DType::F32 || t == DType::I32)) return binary(op.kind, t == DType::F32);
  return nullptr;
}

/// Traces the elementwise kernel of fn over `arity` inputs of type t.
k::Kernel trace_elementwise(const std::string& name, ElemFn fn, int arity, k::Type t, const k::Limits& limits) {
  return k::trace(
      name,
      [&](k::Builder& b) {
        b.group_size(kGroup);
        std::vector<k::Memory> bufs;
        k::Memory out = t == k::Type::F32   ? k::Memory(b.output<float>("out"))
                        : t == k::Type::I32 ? k::Memory(b.output<int32_t>("out"))
                                            : k::Memory(b.output<uint32_t>("out"));
        std::vector<k::Memory> in;
        for (int q = 0; q < arity; ++q) {
          const std::string n = "in" + std::to_string(q);
          in.push_back(t == k::Type::F32   ? k::Memory(b.input<float>(n))
                       : t == k::Type::I32 ? k::Memory(b.input<int32_t>(n))
                                           : k::Memory(b.input<uint32_t>(n)));
        }
        k::Buffer<int32_t> meta = b.input<int32_t>("meta");
        const k::Val i =
            (k::group_id(1) * k::num_groups(0) + k::group_id(0)) * static_cast<int>(kGroup) + k::thread_id(0);
        k::if_(i < meta[kCount], [&] {
          const k::Val rank = meta[kRank];
          k::Var rem(i);
          std::vector<k::Var> off;
          off.reserve(kMaxOperands);  // Vars are not moved: a copy would be a new variable
          for (int q = 0; q <= arity; ++q) off.emplace_back(meta[kOffsets + q]);
          k::for_(0, rank, [&](k::Val j) {
            const k::Val d = rank - 1 - j;
            const k::Val size = meta[kShape + d];
            const k::Val idx = rem % size;
            rem = rem / size;
            for (int q = 0; q <= arity; ++q)
              off[static_cast<size_t>(q)] = off[static_cast<size_t>(q)] + idx * meta[kStrides + q * kMaxRank + d];
          });
          k::Val x[kMaxOperands - 1];
          for (int q = 0; q < arity; ++q) x[q] = in[static_cast<size_t>(q)][off[static_cast<size_t>(q + 1)]];
          out[off[0]] = fn(x);
        });
      },
      limits);
}

/// The strides of d over the output shape S (right-aligned; 0 where d broadcasts).
void strides_over(const ir::TensorDesc& d, const Shape& S, int32_t* st) {
  const size_t r = S.size(), rd = d.shape.size();
  for (size_t q = 0; q < r; ++q) {
    st[q] = 0;
    if (q + rd < r) continue;
    const size_t jd = q + rd - r;
    if (d.shape[jd] != 1) st[q] = static_cast<int32_t>(d.strides[jd]);
  }
}

bool fits_i32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/// Whether every index of d fits the kernel's int32 arithmetic.
bool fits(const ir::TensorDesc& d) {
  if (d.shape.size() > static_cast<size_t>(kMaxRank) || !fits_i32(d.offset) || !fits_i32(d.numel())) return false;
  int64_t last = d.offset;
  for (size_t q = 0; q < d.shape.size(); ++q) {
    if (!fits_i32(d.strides[q])) return false;
    if (d.shape[q] > 0) last += (d.shape[q] - 1) * std::abs(d.strides[q]);
  }
  return fits_i32(last);
}

}  // namespace

bool Kernels::supports(const ir::Op& op) {
  if (!elem_fn(op)) return false;
  if (op.inputs.size() + 1 > static_cast<size_t>(kMaxOperands) ||
      op.outputs[0].shape.size() > static_cast<size_t>(kMaxRank))
    return false;
  for (const auto& d : op.inputs)
    if (!fits(d) || d.shape.size() > op.outputs[0].shape.size()) return false;
  return fits(op.outputs[0]);
}

const k::Kernel& Kernels::elementwise(const ir::Op& op) {
  const DType t = op.outputs[0].dtype;
  const std::string key = std::string(ir::op_name(op.kind)) + "_" + std::string(dtype_name(t));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  k::Type kt;
  if (op.kind == OpKind::Copy)
    kt = t == DType::F32 ? k::Type::F32 : t == DType::I32 ? k::Type::I32 : k::Type::U32;
  else if (!kernel_type(t, kt))
    throw Error("[vulkan] no kernel for " + key);
  return cache_.emplace(key, trace_elementwise(key, elem_fn(op), static_cast<int>(op.inputs.size()), kt, limits_))
      .first->second;
}

void Kernels::run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const ir::TensorDesc& o = op.outputs[0];
  const int64_t n = o.numel();
  if (n == 0) return;
  const k::Kernel& kern = elementwise(op);
  Pipeline& p = ctx.pipeline(kern);
  int32_t meta[kMetaInts] = {};
  meta[kRank] = static_cast<int32_t>(o.shape.size());
  meta[kCount] = static_cast<int32_t>(n);
  meta[kOffsets] = static_cast<int32_t>(o.offset);
  for (size_t q = 0; q < o.shape.size(); ++q) meta[kShape + q] = static_cast<int32_t>(o.shape[q]);
  strides_over(o, o.shape, meta + kStrides);
  for (size_t q = 0; q < op.inputs.size(); ++q) {
    meta[kOffsets + 1 + q] = static_cast<int32_t>(op.inputs[q].offset);
    strides_over(op.inputs[q], o.shape, meta + kStrides + (q + 1) * kMaxRank);
  }
  ctx.reserve(sizeof meta);
  std::vector<Binding> b;
  b.push_back(Binding{out[0], 0});
  for (size_t q = 0; q < op.inputs.size(); ++q) b.push_back(Binding{in[q], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  const int64_t groups = (n + kGroup - 1) / kGroup;
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(groups, 65535));
  const uint32_t gy = static_cast<uint32_t>((groups + gx - 1) / gx);
  ctx.dispatch(p, b, nullptr, 0, {gx, gy, 1});
}

}  // namespace kiln::vulkan
