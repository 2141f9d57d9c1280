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

}  // namespace kiln
