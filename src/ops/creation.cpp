// SPDX-License-Identifier: MIT OR Apache-2.0
// Deterministic creation functions (random ones are in random.cpp).
#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "ir/attrs.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using ir::OpKind;

namespace {
/// Writes s converted to dtype into 8 bytes of out (little-endian host layout).
void scalar_bytes(Scalar s, DType dt, void* out) {
  auto put = [out](auto v) { std::memcpy(out, &v, sizeof v); };
  switch (dt) {
    case DType::Bool:
      return put(s.to<bool>());
    case DType::U8:
      return put(s.to<uint8_t>());
    case DType::U16:
      return put(s.to<uint16_t>());
    case DType::U32:
      return put(s.to<uint32_t>());
    case DType::U64:
      return put(s.to<uint64_t>());
    case DType::I8:
      return put(s.to<int8_t>());
    case DType::I16:
      return put(s.to<int16_t>());
    case DType::I32:
      return put(s.to<int32_t>());
    case DType::I64:
      return put(s.to<int64_t>());
    case DType::F16:
      return put(Half(static_cast<float>(s.to_double())).bits);
    case DType::BF16:
      return put(BFloat16(static_cast<float>(s.to_double())).bits);
    case DType::F32:
      return put(s.to<float>());
    case DType::F64:
      return put(s.to<double>());
  }
}

/// Throws kiln::Error("[api] ...") for a negative size, an invalid dtype or a shape whose bytes
/// overflow int64; returns the byte count.
size_t check_shape(const char* api, const Shape& shape, DType dtype) {
  return detail::checked_nbytes(shape, dtype, api);
}

/// full / zeros / ones / eye: a Fill op reported under `api`.
Tensor full_impl(const char* api, const Shape& shape, Scalar value, const TensorOptions& o) {
  detail::OpScope scope(api);
  check_shape(api, shape, o.dtype);
  ir::Op op = make_op(OpKind::Fill, {}, {}, o.dtype);
  ir::CreationAttrs{
      .shape = shape, .has_int = !value.is_floating(), .int_value = value.to_int(), .value = value.to_double()}
      .encode(op);
  return detail::run(api, op, o.device, {})[0];
}
}  // namespace

Tensor from_blob_copy(const void* data, const Shape& shape, DType dtype, const Device& device) {
  detail::OpScope scope("tensor");
  const size_t n = check_shape("tensor", shape, dtype);
  Tensor t = detail::alloc(shape, dtype, device, "tensor");
  if (n) device.backend()->write(*t.impl().storage, 0, data, n);
  return t;
}

Tensor from_blob_copy(const void* data, size_t count, const Shape& shape, DType dtype, const Device& device) {
  check_shape("tensor", shape, dtype);
  const int64_t n = shape_numel(shape);
  KILN_CHECK(static_cast<uint64_t>(n) == count, "tensor",
             "got " << static_cast<unsigned long>(count) << " values for shape " << shape << ", which holds " << n
                    << " elements");
  return from_blob_copy(data, shape, dtype, device);
}

Tensor scalar_tensor(Scalar s, std::optional<DType> dtype, const Device& device) {
  DType dt = dtype ? *dtype : s.natural_dtype();
  Tensor t = detail::alloc({}, dt, device, "scalar_tensor");
  uint64_t bytes = 0;
  scalar_bytes(s, dt, &bytes);
  device.backend()->write(*t.impl().storage, 0, &bytes, dtype_size(dt));
  return t;
}

namespace detail {
// Note [Scalar constants]: an op with a Scalar operand (x * 0.5, x + 1) runs on a 0-d tensor
// of it. Each thread keeps the last 32 it made, by device, dtype and bytes, so a loop does not
// allocate and write one per call (a model's step uses a few distinct constants in turn: a
// cache smaller than their count would miss every time). They are only handed to ops as inputs: an op never writes
// an input it does not own alone (Note [Buffer reuse]), and autodiff saves them unchanged.
Tensor scalar_constant(Scalar s, DType dt, const Device& device) {
  struct Entry {
    const Backend* backend = nullptr;
    int index = 0;
    DType dtype = DType::F32;
    uint64_t bytes = 0;
    Tensor t;
  };
  constexpr size_t kEntries = 32;
  thread_local Entry cache[kEntries];
  thread_local size_t next = 0;
  uint64_t bytes = 0;
  scalar_bytes(s, dt, &bytes);
  for (Entry& e : cache)
    if (e.bytes == bytes && e.backend == device.backend() && e.index == device.index() && e.dtype == dt &&
        e.t.defined())
      return e.t;
  Entry& e = cache[next++ % kEntries];
  e.t = Tensor();
  e.t = scalar_tensor(s, dt, device);
  e.backend = device.backend();
  e.index = device.index();
  e.dtype = dt;
  e.bytes = bytes;
  return e.t;
}
}  // namespace detail

Tensor empty(const Shape& shape, const TensorOptions& o) {
  check_shape("empty", shape, o.dtype);
  return detail::alloc(shape, o.dtype, o.device, "empty");
}

Tensor full(const Shape& shape, Scalar value, const TensorOptions& o) { return full_impl("full", shape, value, o); }
Tensor zeros(const Shape& shape, const TensorOptions& o) { return full_impl("zeros", shape, 0, o); }
Tensor ones(const Shape& shape, const TensorOptions& o) { return full_impl("ones", shape, 1, o); }
Tensor empty_like(const Tensor& t) {
  detail::check_defined("empty_like", t);
  return empty(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor zeros_like(const Tensor& t) {
  detail::check_defined("zeros_like", t);
  return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor ones_like(const Tensor& t) {
  detail::check_defined("ones_like", t);
  return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor full_like(const Tensor& t, Scalar v) {
  detail::check_defined("full_like", t);
  return full(t.shape(), v, {.dtype = t.dtype(), .device = t.device()});
}

Tensor arange(Scalar end, std::optional<DType> dtype, const Device& device) { return arange(0, end, 1, dtype, device); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, const Device& device) {
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK(st != 0, "arange", "step must be non-zero");
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), "arange", "start and end must be finite, got " << s << " and " << e);
  KILN_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "arange",
             "upper bound and step sign are inconsistent: start " << s << ", end " << e << ", step " << st);
  bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  DType dt = dtype ? *dtype : all_int ? DType::I64 : kDefaultFloat;
  check_dtype(dt, "arange");
  // The count in 128-bit (integers) or double arithmetic: extreme bounds must not wrap.
  __int128 n128;
  if (all_int) {
    __int128 a = start.to_int(), b = end.to_int(), c = step.to_int();
    n128 = c > 0 ? (b - a + c - 1) / c : (a - b + (-c) - 1) / (-c);
  } else {
    double nd = std::ceil((e - s) / st);
    KILN_CHECK(std::isfinite(nd) && nd < 0x1p63, "arange",
               "start " << s << ", end " << e << " and step " << st << " give more elements than fit in int64");
    n128 = static_cast<__int128>(nd);
  }
  KILN_CHECK(n128 <= INT64_MAX, "arange",
             "start " << s << ", end " << e << " and step " << st << " give more elements than fit in int64");
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(n128), 0);
  check_shape("arange", {n}, dt);
  ir::Op op = make_op(OpKind::Arange, {}, {}, dt);
  ir::CreationAttrs{.shape = {n}, .start = s, .step = st}.encode(op);
  return detail::run("arange", op, device, {})[0];
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o) {
  KILN_CHECK(steps >= 0, "linspace", "number of steps must be non-negative, got " << steps);
  detail::OpScope scope("linspace");
  check_shape("linspace", {steps}, o.dtype);
  check_shape("linspace", {steps}, DType::F64);  // the f64 ramp it is computed in
  if (steps == 0) return empty({0}, o);
  if (steps == 1) return full({1}, start, o);
  // PyTorch fills the first half from start and the second half from end (symmetric error).
  double step = (end - start) / static_cast<double>(steps - 1);
  int64_t half = steps / 2;
  Tensor idx = arange(0, steps, 1, DType::F64, o.device);
  Tensor lo = add(mul(idx, step), start);
  Tensor hi = sub(end, mul(sub(static_cast<double>(steps - 1), idx), step));
  Tensor r = where(lt(idx, static_cast<double>(half)), lo, hi);
  return cast(r, o.dtype);
}

Tensor logspace(double start, double end, int64_t steps, double base, const TensorOptions& o) {
  Tensor e =
      detail::as_op("logspace", [&] { return linspace(start, end, steps, {.dtype = DType::F64, .device = o.device}); });
  return cast(pow(base, e), o.dtype);
}

Tensor eye(int64_t n, std::optional<int64_t> m, const TensorOptions& o) {
  int64_t cols = m ? *m : n;
  KILN_CHECK(n >= 0 && cols >= 0, "eye", "sizes must be non-negative, got " << n << " x " << cols);
  detail::OpScope scope("eye");
  Tensor r = full_impl("eye", {n, cols}, 0, o);
  if (n && cols) r.diagonal().fill_(1);
  return r;
}

}  // namespace kiln
