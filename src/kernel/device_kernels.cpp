// SPDX-License-Identifier: MIT OR Apache-2.0
// The library's kernels bound to a GPU device's buffers and recorded on its queue
// (device_kernels.h), for every GPU backend.
#include "kernel/device_kernels.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "kernel/ir.h"
#include "kiln/error.h"
#include "kiln/half.h"

namespace kiln::kernel {

using kiln::ir::OpKind;

size_t push_bytes(const ir::Kernel& k, std::vector<size_t>* offsets) {
  size_t end = 0;
  for (const auto& sc : k.scalars) {
    const size_t sz = sc.type == Type::I64 || sc.type == Type::F64 ? 8 : 4;  // aligned to their size
    end = (end + sz - 1) / sz * sz;
    if (offsets) offsets->push_back(end);
    end += sz;
  }
  return (end + 3) / 4 * 4;
}

std::vector<char> pack_push(const Kernel& kern, const std::vector<Arg>& args) {
  std::vector<size_t> offsets;
  std::vector<char> bytes(push_bytes(kern.ir(), &offsets), 0);
  const auto& scalars = kern.ir().scalars;
  KILN_CHECK(args.size() == scalars.size(), "kernel",
             "kernel '" << kern.name() << "' takes " << scalars.size() << " constants, not " << args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    char* at = bytes.data() + offsets[i];
    switch (scalars[i].type) {
      case Type::F32: {
        const bool real = args[i].type == Type::F32 || args[i].type == Type::F64;
        const float v = static_cast<float>(real ? args[i].f : static_cast<double>(args[i].i));
        std::memcpy(at, &v, 4);
        break;
      }
      case Type::I64: {
        const int64_t v = args[i].i;
        std::memcpy(at, &v, 8);
        break;
      }
      case Type::F64: {
        const double v =
            args[i].type == Type::F64 || args[i].type == Type::F32 ? args[i].f : static_cast<double>(args[i].i);
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

/// Makes check c on the host over the values of op's input c.input in buffer b (as doubles:
/// integers up to 2^53 exactly, which covers every valid index): the bytes the input spans are
/// read back first.
void check_on_host(DeviceQueue& q, const kiln::ir::Op& op, const lib::HostCheck& c, const void* b) {
  const kiln::ir::TensorDesc& d = op.inputs[static_cast<size_t>(c.input)];
  if (d.numel() == 0) return;
  const size_t r = d.shape.size();
  int64_t first = d.offset, last = d.offset;  // the lowest and highest element offsets
  for (size_t k = 0; k < r; ++k) (d.strides[k] < 0 ? first : last) += (d.shape[k] - 1) * d.strides[k];
  const int64_t size = static_cast<int64_t>(dtype_size(d.dtype));
  std::vector<char> bytes(static_cast<size_t>((last - first + 1) * size));
  q.read(b, static_cast<size_t>(first * size), bytes.data(), bytes.size());
  const bool integer = is_integral(d.dtype);
  std::vector<int64_t> idx(r, 0);
  for (int64_t n = 0; n < d.numel(); ++n) {
    int64_t off = d.offset - first;
    for (size_t k = 0; k < r; ++k) off += idx[k] * d.strides[k];
    const char* at = bytes.data() + off * size;
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
        KILN_CHECK(false, kiln::ir::op_name(op.kind).data(), "no host check for dtype " << dtype_name(d.dtype).data());
    }
    if (c.nonzero ? v == 0 : !(v >= c.lo && (integer ? v < c.hi : v <= c.hi))) c.fail(v);
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < d.shape[k]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace

bool DeviceKernels::supports(const kiln::ir::Op& op) const {
  auto ok = [&](const kiln::ir::Op& o, bool float64) {
    const std::optional<lib::Launch> l = lib::launch_of(o, float64);
    return l.has_value() && renders(*l);
  };
  if (op.kind != OpKind::Cat) return ok(op, float64_);
  const std::vector<kiln::ir::Op> pieces = lib::cat_pieces(op);
  return !pieces.empty() &&
         std::all_of(pieces.begin(), pieces.end(), [&](const kiln::ir::Op& c) { return ok(c, true); });
}

bool DeviceKernels::renders(const lib::Launch& l) const {
  if (!renders_to_ || l.groups[0] == 0) return true;
  auto one = [&](const std::string& name, const std::function<Kernel(const Limits&)>& trace) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = renders_.find(name);
      if (it != renders_.end()) return it->second;
    }
    bool r = true;
    try {
      render(get(name, [&] { return trace(limits_); }), *renders_to_);
    } catch (const Error&) {
      r = false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    return renders_[name] = r;
  };
  return one(l.name, l.trace) &&
         std::all_of(l.variants.begin(), l.variants.end(), [&](const auto& v) { return one(v.name, v.trace); });
}

const Kernel& DeviceKernels::get(const std::string& name, const std::function<Kernel()>& make) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(name);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(name, make()).first->second;
}

bool DeviceKernels::try_run(DeviceQueue& q, const kiln::ir::Op& op, void* const* in, void* const* out) {
  if (op.kind == OpKind::Cat) {  // one copy per input (moving bits: no f64 arithmetic)
    const std::vector<kiln::ir::Op> pieces = lib::cat_pieces(op);
    std::vector<std::optional<lib::Launch>> ls;
    for (const kiln::ir::Op& c : pieces)
      if (!ls.emplace_back(lib::launch_of(c, true))) return false;
    if (pieces.empty()) return false;
    for (size_t p = 0; p < pieces.size(); ++p) launch(q, pieces[p], ls[p], in + p, out);
    return true;
  }
  const std::optional<lib::Launch> l = lib::launch_of(op, float64_);
  if (!l) return false;
  launch(q, op, l, in, out);
  return true;
}

void DeviceKernels::run(DeviceQueue& q, const kiln::ir::Op& op, void* const* in, void* const* out) {
  KILN_CHECK(try_run(q, op, in, out), kiln::ir::op_name(op.kind).data(), "no " << backend_ << " kernel");
}

void DeviceKernels::run(DeviceQueue& q, const lib::Launch& l, void* const* in, void* const* out) {
  static const kiln::ir::Op none{};  // the launch names its buffer counts
  if (l.groups[0] != 0) record(q, none, l, l.name, l.trace, l.groups, in, out);
}

void DeviceKernels::launch(DeviceQueue& q, const kiln::ir::Op& op, const std::optional<lib::Launch>& l, void* const* in,
                           void* const* out) {
  KILN_CHECK(l.has_value(), kiln::ir::op_name(op.kind).data(), "no " << backend_ << " kernel");
  if (l->host_check) check_on_host(q, op, *l->host_check, in[l->host_check->input]);
  if (l->groups[0] == 0) return;
  size_t v = 0;
  if (!l->variants.empty())
    v = tuner_.choose(l->tune_key, 1 + l->variants.size(),
                      [&](size_t i) { return time_variant(q, op, *l, i, in, out); });
  if (v == 0) return record(q, op, *l, l->name, l->trace, l->groups, in, out);
  const lib::Launch::Variant& alt = l->variants[v - 1];
  record(q, op, *l, alt.name, alt.trace, alt.groups, in, out);
}

double DeviceKernels::time_variant(DeviceQueue& q, const kiln::ir::Op& op, const lib::Launch& l, size_t i,
                                   void* const* in, void* const* out) {
  q.sync();  // the work before this op is not timed
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {  // the first run builds the pipeline: the best of the rest counts
    const auto t0 = std::chrono::steady_clock::now();
    if (i == 0)
      record(q, op, l, l.name, l.trace, l.groups, in, out);
    else
      record(q, op, l, l.variants[i - 1].name, l.variants[i - 1].trace, l.variants[i - 1].groups, in, out);
    q.sync();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep == 1 || (rep > 1 && s < best)) best = s;
  }
  return best;
}

void DeviceKernels::record(DeviceQueue& q, const kiln::ir::Op& op, const lib::Launch& l, const std::string& name,
                           const std::function<Kernel(const Limits&)>& trace, std::array<uint32_t, 3> groups,
                           void* const* in, void* const* out) {
  const Kernel& kern = get(name, [&] { return trace(limits_); });
  std::vector<void*> b;
  for (int p = 0; p < l.outputs; ++p) b.push_back(out[p]);
  const size_t inputs = l.inputs < 0 ? op.inputs.size() : static_cast<size_t>(l.inputs);
  for (size_t p = 0; p < inputs; ++p) b.push_back(in[p]);
  q.record(kern, b, l.meta, pack_push(kern, l.push), groups);
}

}  // namespace kiln::kernel
