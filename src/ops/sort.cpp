// SPDX-License-Identifier: MIT OR Apache-2.0
// Sorting and order statistics: sort, argsort, topk, kthvalue, median, nanmedian (composites of
// the Sort primitive and elementwise ops), and unique (data-dependent size: computed on the host).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ir/attrs.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using ir::OpKind;

namespace {

/// A 0-d tensor is sorted as a 1-element 1-d one; `dim` is wrapped against x.
struct Line {
  Tensor x;  // at least 1-d
  int64_t dim;
  bool was_0d;
};
Line as_line(const char* api, const Tensor& x, int64_t dim) {
  detail::check_defined(api, x);
  int64_t d = wrap_dim(dim, x.dim(), api);
  if (x.dim() == 0) return {x.reshape({1}), 0, true};
  return {x, d, false};
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  detail::check_defined("sort", x);
  int64_t d = wrap_dim(dim, x.dim(), "sort");
  ir::Op op = make_op(OpKind::Sort);
  ir::ScanAttrs{.dim = d, .descending = descending}.encode(op);
  auto r = detail::run("sort", op, x.device(), {x});
  return {r[0], r[1]};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  detail::check_defined("argsort", x);
  wrap_dim(dim, x.dim(), "argsort");
  return sort(x, dim, descending, stable).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  Line l = as_line("topk", x, dim);
  int64_t n = l.x.size(l.dim);
  KILN_CHECK(k >= 0 && k <= n, "topk",
             "k (" << k << ") out of range for dim " << dim << " of size " << n << " (shape " << x.shape() << ")");
  auto [v, i] = sort(l.x, l.dim, largest);
  v = v.narrow(l.dim, 0, k).contiguous();
  i = i.narrow(l.dim, 0, k).contiguous();
  if (l.was_0d && k == 1) return {v.reshape({}), i.reshape({})};
  return {v, i};
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  Line l = as_line("kthvalue", x, dim);
  int64_t n = l.x.size(l.dim);
  KILN_CHECK(k >= 1 && k <= n, "kthvalue",
             "k (" << k << ") out of range for dim " << dim << " of size " << n << " (shape " << x.shape() << ")");
  auto [v, i] = sort(l.x, l.dim);
  v = v.select(l.dim, k - 1);
  i = i.select(l.dim, k - 1);
  if (keepdim && !l.was_0d) {
    v = v.unsqueeze(l.dim);
    i = i.unsqueeze(l.dim);
  }
  return {v.contiguous(), i.contiguous()};
}

std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  Line l = as_line("median", x, dim);
  int64_t n = l.x.size(l.dim);
  KILN_CHECK(n > 0, "median", "expected reduction dim " << dim << " to have non-zero size, got shape " << x.shape());
  auto [v, i] = sort(l.x, l.dim);
  v = v.select(l.dim, (n - 1) / 2);
  i = i.select(l.dim, (n - 1) / 2);
  if (is_floating(x.dtype())) {
    // A NaN anywhere in the line makes the median NaN, with the index of the first NaN.
    Tensor nan = isnan(l.x);
    Tensor has = any(nan, {l.dim});
    v = where(has, Scalar(std::numeric_limits<double>::quiet_NaN()), v);
    i = where(has, argmax(nan, l.dim), i);
  }
  if (keepdim && !l.was_0d) {
    v = v.unsqueeze(l.dim);
    i = i.unsqueeze(l.dim);
  }
  return {v.contiguous(), i.contiguous()};
}

Tensor median(const Tensor& x) {
  detail::check_defined("median", x);
  if (x.numel() == 0) {
    KILN_CHECK(is_floating(x.dtype()), "median",
               "cannot compute the median of an empty " << dtype_name(x.dtype()).data() << " tensor (shape "
                                                        << x.shape() << ")");
    return full({}, std::numeric_limits<double>::quiet_NaN(), {.dtype = x.dtype(), .device = x.device()});
  }
  return median(x.reshape({x.numel()}), 0, false).first;
}

Tensor nanmedian(const Tensor& x) {
  detail::check_defined("nanmedian", x);
  if (!is_floating(x.dtype())) return median(x);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (x.numel() == 0) return full({}, nan, {.dtype = x.dtype(), .device = x.device()});
  Tensor flat = x.reshape({x.numel()});
  Tensor sorted = sort(flat).first;  // NaNs last
  // Lower median of the c non-NaN values: position (c - 1) / 2, picked without a host read.
  Tensor c = sum(logical_not(isnan(flat)));
  Tensor pos = floor_divide(clamp_min(c - 1, Scalar(0)), Scalar(2));
  Tensor mask = eq(arange(x.numel(), DType::I64, x.device()), pos);
  Tensor v = amax(where(mask, sorted, Scalar(-std::numeric_limits<double>::infinity())));
  return where(eq(c, Scalar(0)), Scalar(nan), v);
}

namespace {

template <class T>
bool nan_(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return std::isnan(static_cast<float>(v));
  else if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

template <class T>
auto key(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return static_cast<float>(v);
  else
    return v;
}

/// Host-side unique of the flattened values (T is the host element type; `dt` the dtype).
template <class T>
UniqueResult unique_host(const Tensor& x, DType dt) {
  std::vector<T> v(static_cast<size_t>(x.numel()));
  x.copy_to_host(v.data(), dt);
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    T va = v[static_cast<size_t>(a)], vb = v[static_cast<size_t>(b)];
    if (nan_(va)) return false;
    if (nan_(vb)) return true;
    return key(va) < key(vb);
  });
  std::vector<T> values;
  std::vector<int64_t> counts, inverse(v.size());
  for (size_t k = 0; k < order.size(); ++k) {
    T cur = v[static_cast<size_t>(order[k])];
    // NaN != NaN: every NaN is its own value, as in PyTorch.
    if (values.empty() || !(key(values.back()) == key(cur))) {
      values.push_back(cur);
      counts.push_back(0);
    }
    counts.back()++;
    inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(values.size()) - 1;
  }
  const Device dev = x.device();
  UniqueResult r;
  r.values = from_blob_copy(values.data(), {static_cast<int64_t>(values.size())}, dt, dev);
  r.inverse = from_blob_copy(inverse.data(), x.shape(), DType::I64, dev);
  r.counts = from_blob_copy(counts.data(), {static_cast<int64_t>(counts.size())}, DType::I64, dev);
  return r;
}

}  // namespace

UniqueResult unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts) {
  detail::check_defined("unique", x);
  KILN_CHECK(!x.device().is_null(), "unique",
             "needs the tensor's values (its output size depends on them), which the null device does not hold "
             "(shape "
                 << x.shape() << ")");
  // The result is always sorted; inverse and counts are always filled (cheap on the host).
  switch (x.dtype()) {
    case DType::Bool:
    case DType::U8:
      return unique_host<uint8_t>(x, x.dtype());
    case DType::I8:
      return unique_host<int8_t>(x, x.dtype());
    case DType::I16:
      return unique_host<int16_t>(x, x.dtype());
    case DType::I32:
      return unique_host<int32_t>(x, x.dtype());
    case DType::I64:
      return unique_host<int64_t>(x, x.dtype());
    case DType::F16:
      return unique_host<Half>(x, x.dtype());
    case DType::BF16:
      return unique_host<BFloat16>(x, x.dtype());
    case DType::F32:
      return unique_host<float>(x, x.dtype());
    case DType::F64:
      return unique_host<double>(x, x.dtype());
    case DType::U16:
      return unique_host<uint16_t>(x, x.dtype());
    case DType::U32:
      return unique_host<uint32_t>(x, x.dtype());
    case DType::U64:
      return unique_host<uint64_t>(x, x.dtype());
  }
  KILN_CHECK(false, "unique", "unsupported dtype " << dtype_name(x.dtype()).data());
}

}  // namespace kiln
