// SPDX-License-Identifier: MIT OR Apache-2.0
// Reductions, cumulative ops and softmax: checks, PyTorch dtype rules, Op construction, and the
// composites (std, var_mean, norm, logsumexp, count_nonzero) built from primitives.
#include <cmath>
#include <limits>

#include "ir/attrs.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using detail::run1;
using ir::OpKind;

namespace {

/// A Reduce op over the normalised dims (all dims when empty; dim 0 for a 0-d input); Var's
/// correction and sqrt (the standard deviation).
ir::Op reduce_op(OpKind k, const Dims& nd, bool keepdim, DType dtype = DType::F32, double correction = 1,
                 bool sqrt = false) {
  ir::Op op = make_op(k, {}, {}, dtype);
  ir::ReduceAttrs{.keepdim = keepdim, .dims = nd.empty() ? Dims{0} : nd, .correction = correction, .sqrt = sqrt}.encode(
      op);
  return op;
}

/// Normalised dims of a reduction (empty `dims` means all of them).
Dims reduce_dims(const char* api, const Tensor& x, const Dims& dims) {
  detail::check_defined(api, x);
  return detail::normalize_dims(api, dims, x.dim());
}

/// Throws unless every reduced dim is non-empty (ops without an identity: max, min, argmax).
void check_nonempty(const char* api, const Tensor& x, const Dims& nd) {
  if (x.dim() == 0) return;
  for (auto d : nd)
    KILN_CHECK(x.size(d) > 0, api,
               "expected reduction dim " << d << " to have non-zero size, got shape " << x.shape()
                                         << " (the op has no identity)");
}

void check_float(const char* api, const Tensor& x) {
  KILN_CHECK(
      is_floating(x.dtype()), api,
      "only supports floating point dtypes, got " << dtype_name(x.dtype()).data() << " (shape " << x.shape() << ")");
}

/// Sum/Prod: integer and bool inputs accumulate to i64 unless dtype is given.
Tensor sum_like(const char* api, OpKind k, const Tensor& x, const Dims& dims, bool keepdim,
                std::optional<DType> dtype) {
  Dims nd = reduce_dims(api, x, dims);
  DType out = dtype ? *dtype : is_floating(x.dtype()) ? x.dtype() : DType::I64;
  bool direct = out == x.dtype() || (out == DType::I64 && !is_floating(x.dtype()));
  ir::Op op = reduce_op(k, nd, keepdim, out);
  return run1(api, op, {direct ? x : cast(x, out)});
}

Tensor extreme(const char* api, OpKind k, const Tensor& x, const Dims& dims, bool keepdim) {
  Dims nd = reduce_dims(api, x, dims);
  check_nonempty(api, x, nd);
  ir::Op op = reduce_op(k, nd, keepdim);
  return run1(api, op, {x});
}

Tensor arg_extreme(const char* api, OpKind k, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  detail::check_defined(api, x);
  if (!dim) {
    KILN_CHECK(x.numel() > 0, api, "expected a non-empty tensor when no dim is given, got shape " << x.shape());
    Tensor r = arg_extreme(api, k, x.reshape({x.numel()}), 0, false);
    return keepdim ? r.reshape(Shape(static_cast<size_t>(x.dim()), int64_t{1})) : r;
  }
  int64_t d = wrap_dim(*dim, x.dim(), api);
  check_nonempty(api, x, {d});
  ir::Op op = reduce_op(k, x.dim() == 0 ? Dims{} : Dims{d}, keepdim);
  return run1(api, op, {x});
}

Tensor cum_like(const char* api, OpKind k, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  detail::check_defined(api, x);
  int64_t d = wrap_dim(dim, x.dim(), api);
  DType out = dtype ? *dtype : is_floating(x.dtype()) ? x.dtype() : DType::I64;
  bool direct = out == x.dtype() || (out == DType::I64 && !is_floating(x.dtype()));
  ir::Op op = make_op(k, {}, {}, out);
  ir::ScanAttrs{.dim = d}.encode(op);
  return run1(api, op, {direct ? x : cast(x, out)});
}

std::pair<Tensor, Tensor> cum_ext(const char* api, OpKind k, const Tensor& x, int64_t dim) {
  detail::check_defined(api, x);
  int64_t d = wrap_dim(dim, x.dim(), api);
  ir::Op op = make_op(k);
  ir::ScanAttrs{.dim = d}.encode(op);
  auto r = detail::run(api, op, x.device(), {x});
  return {r[0], r[1]};
}

Tensor softmax_like(const char* api, OpKind k, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  detail::check_defined(api, x);
  KILN_CHECK(!dtype || is_floating(*dtype), api,
             "dtype must be a floating point type, got " << dtype_name(*dtype).data());
  int64_t d = wrap_dim(dim, x.dim(), api);
  DType dt = dtype ? *dtype : is_floating(x.dtype()) ? x.dtype() : kDefaultFloat;
  ir::Op op = make_op(k);
  ir::ScanAttrs{.dim = d}.encode(op);
  return run1(api, op, {detail::cast_if_needed(x, dt)});
}

int64_t reduced_count(const Tensor& x, const Dims& nd) {
  int64_t n = 1;
  if (x.dim() == 0) return 1;
  for (auto d : nd) n *= x.size(d);
  return n;
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like("sum", OpKind::Sum, x, dims, keepdim, dtype);
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like("prod", OpKind::Prod, x, dims, keepdim, dtype);
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  Dims nd = reduce_dims("mean", x, dims);
  KILN_CHECK(is_floating(x.dtype()), "mean",
             "could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: "
                 << dtype_name(x.dtype()).data() << " (shape " << x.shape() << ")");
  ir::Op op = reduce_op(OpKind::Mean, nd, keepdim, x.dtype());
  return run1("mean", op, {x});
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) { return extreme("amax", OpKind::Max, x, dims, keepdim); }
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) { return extreme("amin", OpKind::Min, x, dims, keepdim); }
Tensor max(const Tensor& x) { return extreme("max", OpKind::Max, x, {}, false); }
Tensor min(const Tensor& x) { return extreme("min", OpKind::Min, x, {}, false); }

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmax", OpKind::ArgMax, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmin", OpKind::ArgMin, x, dim, keepdim);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("max", x);
  int64_t d = wrap_dim(dim, x.dim(), "max");
  Tensor v = extreme("max", OpKind::Max, x, {d}, keepdim);
  return {v, arg_extreme("max", OpKind::ArgMax, x, d, keepdim)};
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("min", x);
  int64_t d = wrap_dim(dim, x.dim(), "min");
  Tensor v = extreme("min", OpKind::Min, x, {d}, keepdim);
  return {v, arg_extreme("min", OpKind::ArgMin, x, d, keepdim)};
}

Tensor var(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  Dims nd = reduce_dims("var", x, dims);
  check_float("var", x);
  ir::Op op = reduce_op(OpKind::Var, nd, keepdim, x.dtype(), correction);
  return run1("var", op, {x});
}

Tensor std(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  Dims nd = reduce_dims("std", x, dims);
  check_float("std", x);
  ir::Op op = reduce_op(OpKind::Var, nd, keepdim, x.dtype(), correction, true);
  return run1("std", op, {x});
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  detail::check_defined("var_mean", x);
  check_float("var_mean", x);
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) {
  Dims nd = reduce_dims("norm", x, dims);
  check_float("norm", x);
  if (p == 2) return sqrt(sum(square(x), nd, keepdim));
  if (p == 1) return sum(abs(x), nd, keepdim);
  if (std::isinf(p)) {
    check_nonempty("norm", x, nd);
    return p > 0 ? extreme("norm", OpKind::Max, abs(x), nd, keepdim)
                 : extreme("norm", OpKind::Min, abs(x), nd, keepdim);
  }
  if (p == 0) return cast(sum(ne(x, Scalar(0)), nd, keepdim), x.dtype());
  return pow(sum(pow(abs(x), Scalar(p)), nd, keepdim), Scalar(1.0 / p));
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  Dims nd = reduce_dims("logsumexp", x, dims);
  Tensor xf = is_floating(x.dtype()) ? x : cast(x, kDefaultFloat);
  if (reduced_count(x, nd) == 0) return log(sum(exp(xf), nd, keepdim));  // -inf, like PyTorch
  // Subtract the max (0 where it is infinite) so exp cannot overflow.
  Tensor m = extreme("logsumexp", OpKind::Max, xf, nd, true);
  m = masked_fill(m, isinf(m), Scalar(0));
  Tensor r = log(sum(exp(xf - m), nd, keepdim));
  return r + (keepdim || x.dim() == 0 ? m : m.squeeze(nd));
}

// PyTorch keeps u8 for u8 inputs of any/all (a legacy rule); every other dtype gives bool.
Tensor any(const Tensor& x, const Dims& dims, bool keepdim) {
  Dims nd = reduce_dims("any", x, dims);
  ir::Op op = reduce_op(OpKind::Any, nd, keepdim);
  Tensor r = run1("any", op, {x});
  return x.dtype() == DType::U8 ? cast(r, DType::U8) : r;
}

Tensor all(const Tensor& x, const Dims& dims, bool keepdim) {
  Dims nd = reduce_dims("all", x, dims);
  ir::Op op = reduce_op(OpKind::All, nd, keepdim);
  Tensor r = run1("all", op, {x});
  return x.dtype() == DType::U8 ? cast(r, DType::U8) : r;
}

Tensor count_nonzero(const Tensor& x, const Dims& dims) {
  Dims nd = reduce_dims("count_nonzero", x, dims);
  return sum(x.dtype() == DType::Bool ? x : ne(x, Scalar(0)), nd, false, DType::I64);
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return cum_like("cumsum", OpKind::CumSum, x, dim, dtype);
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return cum_like("cumprod", OpKind::CumProd, x, dim, dtype);
}
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) { return cum_ext("cummax", OpKind::CumMax, x, dim); }
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) { return cum_ext("cummin", OpKind::CumMin, x, dim); }

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like("softmax", OpKind::Softmax, x, dim, dtype);
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like("log_softmax", OpKind::LogSoftmax, x, dim, dtype);
}

}  // namespace kiln
