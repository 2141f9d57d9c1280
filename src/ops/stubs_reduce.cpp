// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: placeholders until this family is implemented; delete when done.
#include "kiln/ops.h"

namespace kiln {

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) { KILN_CHECK(false, "sum", "not implemented yet"); }
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) { KILN_CHECK(false, "mean", "not implemented yet"); }
Tensor prod(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) { KILN_CHECK(false, "prod", "not implemented yet"); }
Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) { KILN_CHECK(false, "amax", "not implemented yet"); }
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) { KILN_CHECK(false, "amin", "not implemented yet"); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { KILN_CHECK(false, "argmax", "not implemented yet"); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { KILN_CHECK(false, "argmin", "not implemented yet"); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { KILN_CHECK(false, "max", "not implemented yet"); }
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { KILN_CHECK(false, "min", "not implemented yet"); }
Tensor max(const Tensor& x) { KILN_CHECK(false, "max", "not implemented yet"); }
Tensor min(const Tensor& x) { KILN_CHECK(false, "min", "not implemented yet"); }
Tensor var(const Tensor& x, const Dims& dims, double correction, bool keepdim) { KILN_CHECK(false, "var", "not implemented yet"); }
Tensor std(const Tensor& x, const Dims& dims, double correction, bool keepdim) { KILN_CHECK(false, "std", "not implemented yet"); }
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const Dims& dims, double correction, bool keepdim) { KILN_CHECK(false, "var_mean", "not implemented yet"); }
Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) { KILN_CHECK(false, "norm", "not implemented yet"); }
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) { KILN_CHECK(false, "logsumexp", "not implemented yet"); }
Tensor any(const Tensor& x, const Dims& dims, bool keepdim) { KILN_CHECK(false, "any", "not implemented yet"); }
Tensor all(const Tensor& x, const Dims& dims, bool keepdim) { KILN_CHECK(false, "all", "not implemented yet"); }
Tensor count_nonzero(const Tensor& x, const Dims& dims) { KILN_CHECK(false, "count_nonzero", "not implemented yet"); }
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) { KILN_CHECK(false, "cumsum", "not implemented yet"); }
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) { KILN_CHECK(false, "cumprod", "not implemented yet"); }
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) { KILN_CHECK(false, "cummax", "not implemented yet"); }
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) { KILN_CHECK(false, "cummin", "not implemented yet"); }
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) { KILN_CHECK(false, "sort", "not implemented yet"); }
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) { KILN_CHECK(false, "argsort", "not implemented yet"); }
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) { KILN_CHECK(false, "topk", "not implemented yet"); }
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) { KILN_CHECK(false, "kthvalue", "not implemented yet"); }
Tensor median(const Tensor& x) { KILN_CHECK(false, "median", "not implemented yet"); }
std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) { KILN_CHECK(false, "median", "not implemented yet"); }
Tensor nanmedian(const Tensor& x) { KILN_CHECK(false, "nanmedian", "not implemented yet"); }
UniqueResult unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts) { KILN_CHECK(false, "unique", "not implemented yet"); }
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) { KILN_CHECK(false, "softmax", "not implemented yet"); }
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) { KILN_CHECK(false, "log_softmax", "not implemented yet"); }

}  // namespace kiln
