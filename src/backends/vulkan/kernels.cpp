// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan backend's native ops (kernels.h): the library's kernels (kernel/library.h) bound
// to buffers and dispatched. Every other op runs through the fallback (src/ops/fallback.cpp).
#include "backends/vulkan/kernels.h"

#include <cstring>

#include "kernel/ir.h"
#include "kernel/library.h"
#include "kiln/error.h"

namespace kiln::vulkan {

namespace k = kiln::kernel;
namespace lib = kiln::kernel::lib;
using ir::OpKind;

std::vector<char> pack_push(const k::Kernel& kern, const std::vector<k::Arg>& args) {
  std::vector<size_t> offsets;
  std::vector<char> bytes(push_bytes(kern.ir(), &offsets), 0);
  const auto& scalars = kern.ir().scalars;
  KILN_CHECK(args.size() == scalars.size(), "vulkan",
             "kernel '" << kern.name() << "' takes " << scalars.size() << " constants, not " << args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    char* at = bytes.data() + offsets[i];
    switch (scalars[i].type) {
      case k::Type::F32: {
        const float v = static_cast<float>(args[i].type == k::Type::F32 ? args[i].f : static_cast<double>(args[i].i));
        std::memcpy(at, &v, 4);
        break;
      }
      case k::Type::I64: {
        const int64_t v = args[i].i;
        std::memcpy(at, &v, 8);
        break;
      }
      case k::Type::F64: {
        const double v =
            args[i].type == k::Type::F64 || args[i].type == k::Type::F32 ? args[i].f : static_cast<double>(args[i].i);
        std::memcpy(at, &v, 8);
        break;
      }
      default: {
        const int32_t v = static_cast<int32_t>(args[i].i);
        std::memcpy(at, &v, 4);
        break;
      }
    }
  }
  return bytes;
}

namespace {

bool elementwise_supported(const ir::Op& op, bool float64) {
  const std::optional<lib::Elementwise> e = lib::elementwise_of(op);
  if (!e || (e->needs_f64 && !float64)) return false;
  int32_t meta[lib::kMetaInts];
  return lib::elementwise_meta(op, meta);
}

bool reduce_supported(const ir::Op& op, bool float64) {
  const std::optional<lib::Reduce> spec = lib::reduce_of(op);
  if (!spec || (spec->acc == k::Type::F64 && !float64)) return false;
  int32_t meta[lib::kReduceMetaInts];
  if (!lib::reduce_meta(op, meta)) return false;
  // max, min and their arg forms have no value over an empty range (the CPU says so)
  return meta[lib::kRed] > 0 || op.kind == OpKind::Sum || op.kind == OpKind::Mean || op.kind == OpKind::Prod ||
         op.kind == OpKind::Any || op.kind == OpKind::All;
}

bool index_supported(const ir::Op& op) {
  int32_t meta[lib::kIndexMetaInts];
  return lib::index_of(op) && lib::index_meta(op, meta);
}

/// Checks the index values of an index op on the host (the memory is host-visible; a pending
/// producer is waited for), so an out-of-range value is the CPU's error, before any write.
void check_indices(Context& ctx, const ir::Op& op, const Buf* b) {
  const ir::TensorDesc& d = op.inputs[1];
  if (d.numel() == 0) return;
  if (ctx.pending(b)) ctx.sync();
  const lib::IndexCheck c = lib::index_check_of(op);
  const int64_t lo = c.wrap ? -c.size : 0;
  const int64_t* data = reinterpret_cast<const int64_t*>(b->map);
  const size_t r = d.shape.size();
  std::vector<int64_t> at(r, 0);
  for (int64_t n = 0; n < d.numel(); ++n) {
    int64_t off = d.offset;
    for (size_t k = 0; k < r; ++k) off += at[k] * d.strides[k];
    const int64_t v = data[off];
    KILN_CHECK(v >= lo && v < c.size, ir::op_name(op.kind).data(),
               "index " << v << " is out of range for dim " << c.dim << " with size " << c.size);
    for (size_t k = r; k-- > 0;) {
      if (++at[k] < d.shape[k]) break;
      at[k] = 0;
    }
  }
}

bool pad_supported(const ir::Op& op) {
  int32_t meta[lib::kPadMetaInts];
  return lib::pad_of(op) && lib::pad_meta(op, meta);
}

bool cat_supported(const ir::Op& op) {
  const std::vector<ir::Op> pieces = lib::cat_pieces(op);
  if (pieces.empty()) return false;
  for (const ir::Op& c : pieces)
    if (!elementwise_supported(c, true)) return false;
  return true;
}

bool scan_supported(const ir::Op& op, bool float64) {
  int32_t meta[lib::kReduceMetaInts];
  const std::optional<lib::Scan> s = lib::scan_of(op);
  return s && (float64 || s->acc != k::Type::F64) && lib::softmax_meta(op, meta);
}

bool pool_supported(const ir::Op& op) {
  int32_t meta[lib::kPoolMetaInts];
  return lib::pool_of(op) && lib::pool_meta(op, meta);
}

bool conv_supported(const ir::Op& op, bool float64) {
  int32_t meta[lib::kConvMetaInts];
  return float64 && lib::conv_of(op) && lib::conv_meta(op, meta);
}

bool softmax_supported(const ir::Op& op) {
  int32_t meta[lib::kReduceMetaInts];
  return lib::softmax_of(op) && lib::softmax_meta(op, meta);
}

}  // namespace

bool Kernels::supports(const ir::Op& op) const {
  if (!float64_ && lib::uses_f64(op)) return false;
  if (op.kind == OpKind::Cat) return cat_supported(op);
  if (op.kind == OpKind::Pad) return pad_supported(op);
  switch (ir::op_family(op.kind)) {
    case ir::Family::Reduce:
      return reduce_supported(op, float64_);
    case ir::Family::Contract:
      return lib::matmul_of(op).has_value();
    case ir::Family::Scan:
      return softmax_supported(op) || scan_supported(op, float64_);
    case ir::Family::Index:
      return index_supported(op);
    case ir::Family::Pool:
      return pool_supported(op);
    case ir::Family::Conv:
      return conv_supported(op, float64_);
    default:
      return elementwise_supported(op, float64_);
  }
}

const k::Kernel& Kernels::get(const std::string& name, const std::function<k::Kernel()>& make) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(name);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(name, make()).first->second;
}

void Kernels::run_elementwise(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const int64_t n = op.outputs[0].numel();
  if (n == 0) return;
  const std::optional<lib::Elementwise> spec = lib::elementwise_of(op);
  KILN_CHECK(spec.has_value(), ir::op_name(op.kind).data(), "no Vulkan kernel");
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_elementwise(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  int32_t meta[lib::kMetaInts];
  KILN_CHECK(lib::elementwise_meta(op, meta), ir::op_name(op.kind).data(), "sizes past int32 on Vulkan");
  const std::vector<char> push = pack_push(kern, spec->push);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b;
  b.push_back(Binding{out[0], 0});
  for (size_t q = 0; q < op.inputs.size(); ++q) b.push_back(Binding{in[q], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  ctx.dispatch(p, b, push.data(), push.size(), lib::elementwise_groups(n));
}

void Kernels::run_reduce(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Reduce> spec = lib::reduce_of(op);
  int32_t meta[lib::kReduceMetaInts];
  KILN_CHECK(spec && lib::reduce_meta(op, meta), ir::op_name(op.kind).data(), "no Vulkan kernel");
  if (meta[lib::kOut] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_reduce(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  const std::vector<char> push = pack_push(kern, spec->push);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}, Binding{in[0], 0}, ctx.upload(meta, sizeof meta)};
  ctx.dispatch(p, b, push.data(), push.size(), lib::reduce_groups(meta[lib::kOut]));
}

void Kernels::run_matmul(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::MatMul> spec = lib::matmul_of(op);
  KILN_CHECK(spec.has_value(), "MatMul", "no Vulkan kernel");
  const std::array<uint32_t, 3> groups = lib::matmul_groups(op);
  if (groups[0] == 0 || groups[1] == 0 || groups[2] == 0) return;
  int32_t meta[lib::kMatMulMetaInts];
  lib::matmul_meta(op, meta);
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_matmul(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}};
  for (size_t q = 0; q < op.inputs.size(); ++q) b.push_back(Binding{in[q], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  ctx.dispatch(p, b, nullptr, 0, groups);
}

void Kernels::run_scan(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Scan> spec = lib::scan_of(op);
  int32_t meta[lib::kReduceMetaInts];
  KILN_CHECK(spec && lib::softmax_meta(op, meta), ir::op_name(op.kind).data(), "no Vulkan kernel");
  if (meta[lib::kOut] == 0 || meta[lib::kRed] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_scan(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b;
  for (size_t q = 0; q < op.outputs.size(); ++q) b.push_back(Binding{out[q], 0});
  b.push_back(Binding{in[0], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  ctx.dispatch(p, b, nullptr, 0, lib::elementwise_groups(meta[lib::kOut]));
}

void Kernels::run_softmax(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Softmax> spec = lib::softmax_of(op);
  int32_t meta[lib::kReduceMetaInts];
  KILN_CHECK(spec && lib::softmax_meta(op, meta), ir::op_name(op.kind).data(), "no Vulkan kernel");
  if (meta[lib::kOut] == 0 || meta[lib::kRed] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_softmax(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}, Binding{in[0], 0}, ctx.upload(meta, sizeof meta)};
  ctx.dispatch(p, b, nullptr, 0, lib::reduce_groups(meta[lib::kOut]));
}

void Kernels::run_index(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Index> spec = lib::index_of(op);
  int32_t meta[lib::kIndexMetaInts];
  KILN_CHECK(spec && lib::index_meta(op, meta), ir::op_name(op.kind).data(), "no Vulkan kernel");
  check_indices(ctx, op, in[1]);
  if (meta[lib::kIxCount] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_index(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  const std::vector<char> push = pack_push(kern, spec->push);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}};
  for (size_t q = 0; q < op.inputs.size(); ++q) b.push_back(Binding{in[q], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  ctx.dispatch(p, b, push.data(), push.size(), lib::elementwise_groups(meta[lib::kIxCount]));
}

void Kernels::run_pad(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Pad> spec = lib::pad_of(op);
  int32_t meta[lib::kPadMetaInts];
  KILN_CHECK(spec && lib::pad_meta(op, meta), "Pad", "no Vulkan kernel");
  if (meta[lib::kPdCount] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_pad(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  const std::vector<char> push = pack_push(kern, spec->push);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}, Binding{in[0], 0}, ctx.upload(meta, sizeof meta)};
  ctx.dispatch(p, b, push.data(), push.size(), lib::elementwise_groups(meta[lib::kPdCount]));
}

void Kernels::run_pool(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Pool> spec = lib::pool_of(op);
  int32_t meta[lib::kPoolMetaInts];
  KILN_CHECK(spec && lib::pool_meta(op, meta), ir::op_name(op.kind).data(), "no Vulkan kernel");
  if (meta[lib::kPlCount] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_pool(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}};
  if (spec->indices) b.push_back(Binding{out[1], 0});
  b.push_back(Binding{in[0], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  ctx.dispatch(p, b, nullptr, 0, lib::elementwise_groups(meta[lib::kPlCount]));
}

void Kernels::run_conv(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  const std::optional<lib::Conv> spec = lib::conv_of(op);
  int32_t meta[lib::kConvMetaInts];
  KILN_CHECK(spec && lib::conv_meta(op, meta), ir::op_name(op.kind).data(), "no Vulkan kernel");
  if (meta[lib::kCvCount] == 0) return;
  const k::Kernel& kern = get(spec->name, [&] { return lib::trace_conv(*spec, limits_); });
  Pipeline& p = ctx.pipeline(kern);
  ctx.reserve(sizeof meta);
  std::vector<Binding> b{Binding{out[0], 0}};
  for (size_t q = 0; q < op.inputs.size(); ++q) b.push_back(Binding{in[q], 0});
  b.push_back(ctx.upload(meta, sizeof meta));
  ctx.dispatch(p, b, nullptr, 0, lib::elementwise_groups(meta[lib::kCvCount]));
}

void Kernels::run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  if (op.kind == OpKind::Cat) {
    const std::vector<ir::Op> pieces = lib::cat_pieces(op);
    for (size_t q = 0; q < pieces.size(); ++q) run_elementwise(ctx, pieces[q], in + q, out);
    return;
  }
  if (op.kind == OpKind::Pad) return run_pad(ctx, op, in, out);
  switch (ir::op_family(op.kind)) {
    case ir::Family::Reduce:
      return run_reduce(ctx, op, in, out);
    case ir::Family::Contract:
      return run_matmul(ctx, op, in, out);
    case ir::Family::Scan:
      if (lib::scan_of(op)) return run_scan(ctx, op, in, out);
      return run_softmax(ctx, op, in, out);
    case ir::Family::Index:
      return run_index(ctx, op, in, out);
    case ir::Family::Pool:
      return run_pool(ctx, op, in, out);
    case ir::Family::Conv:
      return run_conv(ctx, op, in, out);
    default:
      return run_elementwise(ctx, op, in, out);
  }
}

}  // namespace kiln::vulkan
