// SPDX-License-Identifier: MIT OR Apache-2.0
// Random creation: the frontend reserves Philox counter blocks from the global generator and
// passes (seed, offset) as attributes, so every element depends only on (seed, offset, index).
// Block counts per element follow Note [Random layouts] in backends/cpu/random.cpp.
#include <cmath>
#include <limits>
#include <new>
#include <numeric>

#include "core/checked.h"
#include "core/rng.h"
#include "ir/attrs.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using ir::OpKind;

namespace {

void check_shape(const char* api, const Shape& shape) {
  for (auto d : shape) KILN_CHECK(d >= 0, api, "negative size in shape " << shape);
  detail::checked_numel(shape, api);  // the count must fit in int64 (Note [Checked sizes])
}

void check_float(const char* api, DType dt) {
  KILN_CHECK(is_floating(dt), api, "expects a floating dtype, got " << dtype_name(dt));
}

/// An op of kind k with ints = {seed_lo, seed_hi, offset, extra..., shape...}, reserving enough
/// blocks for numel elements at per_block elements per block.
ir::Op random_op(OpKind k, const Shape& shape, int64_t per_block, std::initializer_list<int64_t> extra,
                 std::initializer_list<double> reals, DType dt) {
  int64_t n = shape_numel(shape);
  rng::GeneratorState st = rng::reserve(static_cast<uint64_t>((n + per_block - 1) / per_block));
  ir::Op op = make_op(k, {}, {}, dt);
  ir::CreationAttrs a{.shape = shape, .seed = st.seed, .offset = st.offset};
  if (k == OpKind::RandInt) {
    a.low = extra.begin()[0];
    a.high = extra.begin()[1];
  } else {
    a.a = reals.begin()[0];
    a.b = reals.begin()[1];
  }
  a.encode(op);
  return op;
}

}  // namespace

Tensor rand(const Shape& shape, const TensorOptions& o) {
  check_shape("rand", shape);
  check_float("rand", o.dtype);
  ir::Op op = random_op(OpKind::RandUniform, shape, o.dtype == DType::F64 ? 2 : 4, {}, {0.0, 1.0}, o.dtype);
  return detail::run("rand", op, o.device, {})[0];
}

Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& o) {
  check_shape("uniform", shape);
  check_float("uniform", o.dtype);
  KILN_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, "uniform",
             "expects a finite range [low, high) with low <= high, got low=" << low << " and high=" << high);
  ir::Op op = random_op(OpKind::RandUniform, shape, o.dtype == DType::F64 ? 2 : 4, {}, {low, high}, o.dtype);
  return detail::run("uniform", op, o.device, {})[0];
}

namespace {
Tensor normal_impl(const char* api, const Shape& shape, double mean, double std, const TensorOptions& o) {
  check_shape(api, shape);
  check_float(api, o.dtype);
  KILN_CHECK(std >= 0.0, api, "expects std >= 0, got " << std);
  ir::Op op = random_op(OpKind::RandNormal, shape, o.dtype == DType::F64 ? 2 : 4, {}, {mean, std}, o.dtype);
  return detail::run(api, op, o.device, {})[0];
}
}  // namespace

Tensor randn(const Shape& shape, const TensorOptions& o) { return normal_impl("randn", shape, 0.0, 1.0, o); }

Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& o) {
  return normal_impl("normal", shape, mean, std, o);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o) {
  check_shape("randint", shape);
  KILN_CHECK(low < high, "randint", "expects low < high, got low=" << low << " and high=" << high);
  DType dt = o.dtype;
  auto check_range = [&](long double lo, long double hi) {
    KILN_CHECK(static_cast<long double>(low) >= lo && static_cast<long double>(high) - 1 <= hi, "randint",
               "range [" << low << ", " << high << ") does not fit dtype " << dtype_name(dt));
  };
  switch (dt) {
    case DType::Bool:
      check_range(0, 1);
      break;
    case DType::U8:
      check_range(0, 255);
      break;
    case DType::I8:
      check_range(-128, 127);
      break;
    case DType::I16:
      check_range(-32768, 32767);
      break;
    case DType::I32:
      check_range(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      break;
    case DType::U16:
      check_range(0, std::numeric_limits<uint16_t>::max());
      break;
    case DType::U32:
      check_range(0, std::numeric_limits<uint32_t>::max());
      break;
    case DType::U64:
      check_range(0, std::numeric_limits<int64_t>::max());
      break;
    default:
      break;
  }
  ir::Op op = random_op(OpKind::RandInt, shape, 2, {low, high}, {}, dt);
  return detail::run("randint", op, o.device, {})[0];
}

Tensor bernoulli(const Tensor& p) {
  detail::check_defined("bernoulli", p);
  KILN_CHECK(is_floating(p.dtype()), "bernoulli",
             "expects p to be a floating tensor, got " << dtype_name(p.dtype()) << " of shape " << p.shape());
  rng::GeneratorState st = rng::reserve(static_cast<uint64_t>((p.numel() + 1) / 2));
  ir::Op op = make_op(OpKind::Bernoulli);
  ir::CreationAttrs{.seed = st.seed, .offset = st.offset}.encode(op);
  return detail::run1("bernoulli", op, {p});
}

Tensor bernoulli(const Shape& shape, double p, const TensorOptions& o) {
  check_shape("bernoulli", shape);
  KILN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli", "expects p in [0, 1], got " << p);
  // f32 results draw against an f32 p directly (no f64 mask and cast: the fused CPU then runs
  // dropout's mask and scale as one program); other dtypes draw against p in f64.
  const DType pd = o.dtype == DType::F32 ? DType::F32 : DType::F64;
  Tensor pt = scalar_tensor(p, pd, o.device).expand(shape);
  return detail::cast_if_needed(bernoulli(pt), o.dtype);
}

Tensor rand_like(const Tensor& t) {
  detail::check_defined("rand_like", t);
  check_float("rand_like", t.dtype());
  return rand(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}

Tensor randn_like(const Tensor& t) {
  detail::check_defined("randn_like", t);
  check_float("randn_like", t.dtype());
  return randn(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}

// Fisher-Yates on the host from Philox numbers (64 bits per swap, two swaps per block), then
// uploaded. On a device without data only the shape is produced.
Tensor randperm(int64_t n, const TensorOptions& o) {
  Tensor p = randperm(n, o.device);
  return o.dtype == DType::I64 ? p : p.to(o.dtype);
}

Tensor randperm(int64_t n, const Device& device) {
  KILN_CHECK(n >= 0, "randperm", "n must be non-negative, got " << n);
  detail::checked_nbytes({n}, DType::I64, "randperm");
  detail::OpScope scope("randperm");  // names randperm in an allocation failure
  // The result first: a size no device can hold fails there, as kiln::Error, before the host
  // copy of the same size is attempted.
  Tensor out = empty({n}, {.dtype = DType::I64, .device = device});
  if (!device.backend()->has_data()) return out;
  std::vector<int64_t> v;
  try {
    v.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    KILN_CHECK(false, "randperm", "out of memory: cannot allocate the " << n << " host values of a permutation");
  }
  rng::GeneratorState st = rng::reserve(static_cast<uint64_t>(n / 2 + 1));
  std::iota(v.begin(), v.end(), int64_t{0});
  uint32_t w[4] = {};
  int64_t cur = -1;
  for (int64_t i = n - 1, k = 0; i >= 1; --i, ++k) {
    if (k / 2 != cur) {
      cur = k / 2;
      rng::Philox::generate(st.seed, st.offset + static_cast<uint64_t>(cur), w);
    }
    int s = static_cast<int>(k % 2);
    uint64_t r = (static_cast<uint64_t>(w[2 * s]) << 32) | w[2 * s + 1];
    int64_t j = static_cast<int64_t>(r % static_cast<uint64_t>(i + 1));
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(j)]);
  }
  if (n > 0) device.backend()->write(*out.impl().storage, 0, v.data(), static_cast<size_t>(n) * sizeof(int64_t));
  return out;
}

}  // namespace kiln
