// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan backend's native ops (kernels.h): the library's kernels (kernel/library.h) bound
// to buffers and dispatched. Every other op runs through the fallback (src/ops/fallback.cpp).
#include "backends/vulkan/kernels.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "kernel/ir.h"
#include "kernel/library.h"
#include "kiln/error.h"
#include "kiln/half.h"

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

/// Calls fn(offset) for every element of d in order (the memory is host-visible; a pending
/// producer of b is waited for first).
void for_each_element(Context& ctx, const ir::TensorDesc& d, const Buf* b, const std::function<void(int64_t)>& fn) {
  if (d.numel() == 0) return;
  if (ctx.pending(b)) ctx.sync();
  const size_t r = d.shape.size();
  std::vector<int64_t> at(r, 0);
  for (int64_t n = 0; n < d.numel(); ++n) {
    int64_t off = d.offset;
    for (size_t k = 0; k < r; ++k) off += at[k] * d.strides[k];
    fn(off);
    for (size_t k = r; k-- > 0;) {
      if (++at[k] < d.shape[k]) break;
      at[k] = 0;
    }
  }
}

/// Makes check c on the host over the values of op's input c.input in buffer b (as doubles:
/// integers up to 2^53 exactly, which covers every valid index).
void check_on_host(Context& ctx, const ir::Op& op, const lib::HostCheck& c, const Buf* b) {
  const ir::TensorDesc& d = op.inputs[static_cast<size_t>(c.input)];
  std::vector<char> copy;  // staged memory: the values are read back first
  if (!b->map && d.numel() > 0) {
    copy.resize(b->in_use);
    ctx.read(b, 0, copy.data(), copy.size());
  }
  const char* data = b->map ? static_cast<const char*>(b->map) : copy.data();
  const int64_t size = static_cast<int64_t>(dtype_size(d.dtype));
  const bool integer = is_integral(d.dtype);
  for_each_element(ctx, d, b, [&](int64_t off) {
    const char* at = data + off * size;
    double v = 0;
    switch (d.dtype) {
      case DType::I64:
        v = static_cast<double>(*reinterpret_cast<const int64_t*>(at));
        break;
      case DType::I32:
        v = *reinterpret_cast<const int32_t*>(at);
        break;
      case DType::U32:
        v = *reinterpret_cast<const uint32_t*>(at);
        break;
      case DType::I16:
        v = *reinterpret_cast<const int16_t*>(at);
        break;
      case DType::U16:
        v = *reinterpret_cast<const uint16_t*>(at);
        break;
      case DType::U64:
        v = static_cast<double>(*reinterpret_cast<const uint64_t*>(at));
        break;
      case DType::I8:
        v = *reinterpret_cast<const int8_t*>(at);
        break;
      case DType::U8:
      case DType::Bool:
        v = *reinterpret_cast<const uint8_t*>(at);
        break;
      case DType::F64:
        v = *reinterpret_cast<const double*>(at);
        break;
      case DType::F16:
        v = static_cast<float>(*reinterpret_cast<const Half*>(at));
        break;
      case DType::BF16:
        v = static_cast<float>(*reinterpret_cast<const BFloat16*>(at));
        break;
      case DType::F32:
        v = *reinterpret_cast<const float*>(at);
        break;
      default:
        KILN_CHECK(false, ir::op_name(op.kind).data(), "no host check for dtype " << dtype_name(d.dtype).data());
    }
    if (c.nonzero ? v == 0 : !(v >= c.lo && (integer ? v < c.hi : v <= c.hi))) c.fail(v);
  });
}

}  // namespace

bool Kernels::supports(const ir::Op& op) const {
  if (op.kind != OpKind::Cat) return lib::launch_of(op, float64_).has_value();
  const std::vector<ir::Op> pieces = lib::cat_pieces(op);
  return !pieces.empty() &&
         std::all_of(pieces.begin(), pieces.end(), [](const ir::Op& c) { return lib::launch_of(c, true).has_value(); });
}

const k::Kernel& Kernels::get(const std::string& name, const std::function<k::Kernel()>& make) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(name);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(name, make()).first->second;
}

bool Kernels::try_run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  if (op.kind == OpKind::Cat) {  // one copy per input (moving bits: no f64 arithmetic)
    const std::vector<ir::Op> pieces = lib::cat_pieces(op);
    std::vector<std::optional<lib::Launch>> ls;
    for (const ir::Op& c : pieces)
      if (!ls.emplace_back(lib::launch_of(c, true))) return false;
    if (pieces.empty()) return false;
    for (size_t q = 0; q < pieces.size(); ++q) launch(ctx, pieces[q], ls[q], in + q, out);
    return true;
  }
  const std::optional<lib::Launch> l = lib::launch_of(op, float64_);
  if (!l) return false;
  launch(ctx, op, l, in, out);
  return true;
}

void Kernels::run(Context& ctx, const ir::Op& op, Buf* const* in, Buf* const* out) {
  KILN_CHECK(try_run(ctx, op, in, out), ir::op_name(op.kind).data(), "no Vulkan kernel");
}

void Kernels::run(Context& ctx, const lib::Launch& l, Buf* const* in, Buf* const* out) {
  static const ir::Op none{};  // the launch names its buffer counts
  if (l.groups[0] != 0) record(ctx, none, l, l.name, l.trace, l.groups, in, out);
}

void Kernels::launch(Context& ctx, const ir::Op& op, const std::optional<lib::Launch>& l, Buf* const* in,
                     Buf* const* out) {
  KILN_CHECK(l.has_value(), ir::op_name(op.kind).data(), "no Vulkan kernel");
  if (l->host_check) check_on_host(ctx, op, *l->host_check, in[l->host_check->input]);
  if (l->groups[0] == 0) return;
  size_t v = 0;
  if (!l->variants.empty())
    v = tuner_.choose(l->tune_key, 1 + l->variants.size(),
                      [&](size_t i) { return time_variant(ctx, op, *l, i, in, out); });
  if (v == 0) return record(ctx, op, *l, l->name, l->trace, l->groups, in, out);
  const lib::Launch::Variant& alt = l->variants[v - 1];
  record(ctx, op, *l, alt.name, alt.trace, alt.groups, in, out);
}

double Kernels::time_variant(Context& ctx, const ir::Op& op, const lib::Launch& l, size_t i, Buf* const* in,
                             Buf* const* out) {
  ctx.sync();  // the work before this op is not timed
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {  // the first run builds the pipeline: the best of the rest counts
    const auto t0 = std::chrono::steady_clock::now();
    if (i == 0)
      record(ctx, op, l, l.name, l.trace, l.groups, in, out);
    else
      record(ctx, op, l, l.variants[i - 1].name, l.variants[i - 1].trace, l.variants[i - 1].groups, in, out);
    ctx.sync();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep == 1 || (rep > 1 && s < best)) best = s;
  }
  return best;
}

void Kernels::record(Context& ctx, const ir::Op& op, const lib::Launch& l, const std::string& name,
                     const std::function<k::Kernel(const k::Limits&)>& trace, std::array<uint32_t, 3> groups,
                     Buf* const* in, Buf* const* out) {
  const k::Kernel& kern = get(name, [&] { return trace(limits_); });
  Pipeline& p = ctx.pipeline(kern);
  const std::vector<char> push = pack_push(kern, l.push);
  const size_t meta_bytes = l.meta.size() * sizeof(int32_t);
  ctx.reserve(meta_bytes);
  std::vector<Binding> b;
  for (int q = 0; q < l.outputs; ++q) b.push_back(Binding{out[q], 0});
  const size_t inputs = l.inputs < 0 ? op.inputs.size() : static_cast<size_t>(l.inputs);
  for (size_t q = 0; q < inputs; ++q) b.push_back(Binding{in[q], 0});
  b.push_back(ctx.upload(l.meta.data(), meta_bytes));
  ctx.dispatch(p, b, push.data(), push.size(), groups);
}

}  // namespace kiln::vulkan
