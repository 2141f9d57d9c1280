// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: placeholders until this family is implemented; delete when done.
#include "kiln/ops.h"

namespace kiln {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) { KILN_CHECK(false, "index_select", "not implemented yet"); }
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { KILN_CHECK(false, "gather", "not implemented yet"); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) { KILN_CHECK(false, "scatter", "not implemented yet"); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value, const std::string& reduce) { KILN_CHECK(false, "scatter", "not implemented yet"); }
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) { KILN_CHECK(false, "scatter_add", "not implemented yet"); }
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce, bool include_self) { KILN_CHECK(false, "scatter_reduce", "not implemented yet"); }
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) { KILN_CHECK(false, "index_add", "not implemented yet"); }
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) { KILN_CHECK(false, "index_copy", "not implemented yet"); }
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) { KILN_CHECK(false, "index_fill", "not implemented yet"); }
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) { KILN_CHECK(false, "index_put", "not implemented yet"); }
Tensor masked_select(const Tensor& x, const Tensor& mask) { KILN_CHECK(false, "masked_select", "not implemented yet"); }
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) { KILN_CHECK(false, "masked_scatter", "not implemented yet"); }
Tensor nonzero(const Tensor& x) { KILN_CHECK(false, "nonzero", "not implemented yet"); }
std::vector<Tensor> nonzero_tuple(const Tensor& x) { KILN_CHECK(false, "nonzero_tuple", "not implemented yet"); }
Tensor take(const Tensor& x, const Tensor& index) { KILN_CHECK(false, "take", "not implemented yet"); }
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) { KILN_CHECK(false, "take_along_dim", "not implemented yet"); }
Tensor select(const Tensor& x, int64_t dim, int64_t index) { KILN_CHECK(false, "select", "not implemented yet"); }
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) { KILN_CHECK(false, "narrow", "not implemented yet"); }
Tensor tril(const Tensor& x, int64_t diagonal) { KILN_CHECK(false, "tril", "not implemented yet"); }
Tensor triu(const Tensor& x, int64_t diagonal) { KILN_CHECK(false, "triu", "not implemented yet"); }
Tensor diag(const Tensor& x, int64_t diagonal) { KILN_CHECK(false, "diag", "not implemented yet"); }
Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) { KILN_CHECK(false, "diag_embed", "not implemented yet"); }
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) { KILN_CHECK(false, "diagonal", "not implemented yet"); }
Tensor one_hot(const Tensor& x, int64_t num_classes) { KILN_CHECK(false, "one_hot", "not implemented yet"); }
Tensor embedding(const Tensor& indices, const Tensor& weight) { KILN_CHECK(false, "embedding", "not implemented yet"); }

}  // namespace kiln

namespace kiln {
Tensor Tensor::index(std::initializer_list<TensorIndex>) const { KILN_CHECK(false, "index", "not implemented yet"); }
Tensor Tensor::index(const std::vector<TensorIndex>&) const { KILN_CHECK(false, "index", "not implemented yet"); }
Tensor& Tensor::index_put_(const std::vector<TensorIndex>&, const Tensor&) { KILN_CHECK(false, "index_put_", "not implemented yet"); }
Tensor& Tensor::index_put_(const std::vector<TensorIndex>&, Scalar) { KILN_CHECK(false, "index_put_", "not implemented yet"); }
}  // namespace kiln
