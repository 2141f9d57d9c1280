// SPDX-License-Identifier: MIT OR Apache-2.0
// Tensor methods that forward to the free functions of ops.h.
#include "kiln/ops.h"

namespace kiln {

#define KILN_UNARY_METHOD(name) \
  Tensor Tensor::name() const { return kiln::name(*this); }
KILN_UNARY_METHOD(abs)
KILN_UNARY_METHOD(neg)
KILN_UNARY_METHOD(sign)
KILN_UNARY_METHOD(exp)
KILN_UNARY_METHOD(exp2)
KILN_UNARY_METHOD(expm1)
KILN_UNARY_METHOD(log)
KILN_UNARY_METHOD(log2)
KILN_UNARY_METHOD(log10)
KILN_UNARY_METHOD(log1p)
KILN_UNARY_METHOD(sqrt)
KILN_UNARY_METHOD(rsqrt)
KILN_UNARY_METHOD(reciprocal)
KILN_UNARY_METHOD(square)
KILN_UNARY_METHOD(sin)
KILN_UNARY_METHOD(cos)
KILN_UNARY_METHOD(tan)
KILN_UNARY_METHOD(asin)
KILN_UNARY_METHOD(acos)
KILN_UNARY_METHOD(atan)
KILN_UNARY_METHOD(sinh)
KILN_UNARY_METHOD(cosh)
KILN_UNARY_METHOD(tanh)
KILN_UNARY_METHOD(asinh)
KILN_UNARY_METHOD(acosh)
KILN_UNARY_METHOD(atanh)
KILN_UNARY_METHOD(erf)
KILN_UNARY_METHOD(erfinv)
KILN_UNARY_METHOD(floor)
KILN_UNARY_METHOD(ceil)
KILN_UNARY_METHOD(trunc)
KILN_UNARY_METHOD(frac)
KILN_UNARY_METHOD(sigmoid)
KILN_UNARY_METHOD(relu)
KILN_UNARY_METHOD(silu)
KILN_UNARY_METHOD(isnan)
KILN_UNARY_METHOD(isinf)
KILN_UNARY_METHOD(isfinite)
KILN_UNARY_METHOD(logical_not)
KILN_UNARY_METHOD(bitwise_not)
#undef KILN_UNARY_METHOD

Tensor Tensor::round(int64_t decimals) const { return kiln::round(*this, decimals); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return kiln::clamp(*this, min, max);
}
Tensor Tensor::pow(const Tensor& e) const { return kiln::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return kiln::pow(*this, e); }

Tensor Tensor::sum(std::optional<DType> dtype) const { return kiln::sum(*this, {}, false, dtype); }
Tensor Tensor::sum(const Dims& dims, bool keepdim, std::optional<DType> dtype) const {
  return kiln::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean() const { return kiln::mean(*this); }
Tensor Tensor::mean(const Dims& dims, bool keepdim) const { return kiln::mean(*this, dims, keepdim); }
Tensor Tensor::prod() const { return kiln::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return kiln::prod(*this, {dim}, keepdim); }
Tensor Tensor::amax(const Dims& dims, bool keepdim) const { return kiln::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Dims& dims, bool keepdim) const { return kiln::amin(*this, dims, keepdim); }
Tensor Tensor::max() const { return kiln::max(*this); }
Tensor Tensor::min() const { return kiln::min(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return kiln::max(*this, dim, keepdim); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return kiln::min(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmin(*this, dim, keepdim); }
Tensor Tensor::var(const Dims& dims, double correction, bool keepdim) const {
  return kiln::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const Dims& dims, double correction, bool keepdim) const {
  return kiln::std(*this, dims, correction, keepdim);
}
Tensor Tensor::any() const { return kiln::any(*this); }
Tensor Tensor::all() const { return kiln::all(*this); }
Tensor Tensor::softmax(int64_t dim) const { return kiln::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return kiln::log_softmax(*this, dim); }

// ---- method forms of ops.h ---------------------------------------------------------------
Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::add(Scalar o) const { return kiln::add(*this, o); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::sub(Scalar o) const { return kiln::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return kiln::mul(*this, o); }
Tensor Tensor::mul(Scalar o) const { return kiln::mul(*this, o); }
Tensor Tensor::div(const Tensor& o, const std::string& m) const { return kiln::div(*this, o, m); }
Tensor Tensor::div(Scalar o, const std::string& m) const { return kiln::div(*this, o, m); }
#define KILN_BINARY_METHOD(name) \
  Tensor Tensor::name(const Tensor& o) const { return kiln::name(*this, o); }
#define KILN_BINARY_METHOD_S(name) \
  KILN_BINARY_METHOD(name)         \
  Tensor Tensor::name(Scalar o) const { return kiln::name(*this, o); }
KILN_BINARY_METHOD_S(remainder)
KILN_BINARY_METHOD_S(fmod)
KILN_BINARY_METHOD(maximum)
KILN_BINARY_METHOD(minimum)
KILN_BINARY_METHOD(atan2)
KILN_BINARY_METHOD(hypot)
KILN_BINARY_METHOD(logaddexp)
KILN_BINARY_METHOD_S(eq)
KILN_BINARY_METHOD_S(ne)
KILN_BINARY_METHOD_S(lt)
KILN_BINARY_METHOD_S(le)
KILN_BINARY_METHOD_S(gt)
KILN_BINARY_METHOD_S(ge)
KILN_BINARY_METHOD(logical_and)
KILN_BINARY_METHOD(logical_or)
KILN_BINARY_METHOD(logical_xor)
KILN_BINARY_METHOD(bitwise_and)
KILN_BINARY_METHOD(bitwise_or)
KILN_BINARY_METHOD(bitwise_xor)
#undef KILN_BINARY_METHOD_S
#undef KILN_BINARY_METHOD
Tensor Tensor::clamp_min(Scalar min) const { return kiln::clamp_min(*this, min); }
Tensor Tensor::clamp_max(Scalar max) const { return kiln::clamp_max(*this, max); }
Tensor Tensor::nan_to_num(double nan) const { return kiln::nan_to_num(*this, nan); }
Tensor Tensor::logit(std::optional<double> eps) const { return kiln::logit(*this, eps); }
Tensor Tensor::where(const Tensor& cond, const Tensor& other) const { return kiln::where(cond, *this, other); }
Tensor Tensor::where(const Tensor& cond, Scalar other) const { return kiln::where(cond, *this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const { return kiln::masked_fill(*this, mask, value); }
Tensor Tensor::lerp(const Tensor& end, Scalar weight) const { return kiln::lerp(*this, end, weight); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const { return kiln::lerp(*this, end, weight); }
Tensor Tensor::isclose(const Tensor& o, double rtol, double atol, bool equal_nan) const {
  return kiln::isclose(*this, o, rtol, atol, equal_nan);
}
bool Tensor::allclose(const Tensor& o, double rtol, double atol, bool equal_nan) const {
  return kiln::allclose(*this, o, rtol, atol, equal_nan);
}
bool Tensor::equal(const Tensor& o) const { return kiln::equal(*this, o); }
Tensor Tensor::norm(double p, const Dims& dims, bool keepdim) const { return kiln::norm(*this, p, dims, keepdim); }
Tensor Tensor::logsumexp(const Dims& dims, bool keepdim) const { return kiln::logsumexp(*this, dims, keepdim); }
Tensor Tensor::any(const Dims& dims, bool keepdim) const { return kiln::any(*this, dims, keepdim); }
Tensor Tensor::all(const Dims& dims, bool keepdim) const { return kiln::all(*this, dims, keepdim); }
Tensor Tensor::count_nonzero(const Dims& dims) const { return kiln::count_nonzero(*this, dims); }
Tensor Tensor::cumsum(int64_t dim) const { return kiln::cumsum(*this, dim); }
Tensor Tensor::cumprod(int64_t dim) const { return kiln::cumprod(*this, dim); }
std::pair<Tensor, Tensor> Tensor::cummax(int64_t dim) const { return kiln::cummax(*this, dim); }
std::pair<Tensor, Tensor> Tensor::cummin(int64_t dim) const { return kiln::cummin(*this, dim); }
std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return kiln::sort(*this, dim, descending);
}
Tensor Tensor::argsort(int64_t dim, bool descending) const { return kiln::argsort(*this, dim, descending); }
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return kiln::topk(*this, k, dim, largest, sorted);
}
std::pair<Tensor, Tensor> Tensor::kthvalue(int64_t k, int64_t dim, bool keepdim) const {
  return kiln::kthvalue(*this, k, dim, keepdim);
}
Tensor Tensor::median() const { return kiln::median(*this); }
std::pair<Tensor, Tensor> Tensor::median(int64_t dim, bool keepdim) const { return kiln::median(*this, dim, keepdim); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return kiln::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return kiln::gather(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, Scalar value) const {
  return kiln::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter_add(*this, dim, index, src);
}
Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                              bool include_self) const {
  return kiln::scatter_reduce(*this, dim, index, src, reduce, include_self);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) const {
  return kiln::index_add(*this, dim, index, src, alpha);
}
Tensor Tensor::index_copy(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::index_copy(*this, dim, index, src);
}
Tensor Tensor::index_fill(int64_t dim, const Tensor& index, Scalar value) const {
  return kiln::index_fill(*this, dim, index, value);
}
Tensor Tensor::masked_select(const Tensor& mask) const { return kiln::masked_select(*this, mask); }
Tensor Tensor::masked_scatter(const Tensor& mask, const Tensor& source) const {
  return kiln::masked_scatter(*this, mask, source);
}
Tensor Tensor::nonzero() const { return kiln::nonzero(*this); }
Tensor Tensor::take(const Tensor& index) const { return kiln::take(*this, index); }
Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<int64_t> dim) const {
  return kiln::take_along_dim(*this, indices, dim);
}
Tensor Tensor::tril(int64_t diagonal) const { return kiln::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return kiln::triu(*this, diagonal); }
Tensor Tensor::diag(int64_t diagonal) const { return kiln::diag(*this, diagonal); }
Tensor Tensor::diag_embed(int64_t offset, int64_t dim1, int64_t dim2) const {
  return kiln::diag_embed(*this, offset, dim1, dim2);
}
Tensor Tensor::repeat(const Shape& repeats) const { return kiln::repeat(*this, repeats); }
Tensor Tensor::tile(const Shape& reps) const { return kiln::tile(*this, reps); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return kiln::repeat_interleave(*this, repeats, dim);
}
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return kiln::split(*this, split_size, dim); }
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t dim) const {
  return kiln::split(*this, sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return kiln::chunk(*this, chunks, dim); }
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return kiln::unbind(*this, dim); }
Tensor Tensor::roll(const Shape& shifts, const Dims& dims) const { return kiln::roll(*this, shifts, dims); }
Tensor Tensor::fliplr() const { return kiln::fliplr(*this); }
Tensor Tensor::flipud() const { return kiln::flipud(*this); }

}  // namespace kiln
