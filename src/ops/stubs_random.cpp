// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: placeholders until random creation is implemented; delete when done.
#include "kiln/ops.h"

namespace kiln {

Tensor rand_like(const Tensor& t) { KILN_CHECK(false, "rand_like", "not implemented yet"); }
Tensor randn_like(const Tensor& t) { KILN_CHECK(false, "randn_like", "not implemented yet"); }
Tensor rand(const Shape& shape, const TensorOptions& o) { KILN_CHECK(false, "rand", "not implemented yet"); }
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& o) { KILN_CHECK(false, "uniform", "not implemented yet"); }
Tensor randn(const Shape& shape, const TensorOptions& o) { KILN_CHECK(false, "randn", "not implemented yet"); }
Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& o) { KILN_CHECK(false, "normal", "not implemented yet"); }
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o) { KILN_CHECK(false, "randint", "not implemented yet"); }
Tensor bernoulli(const Tensor& p) { KILN_CHECK(false, "bernoulli", "not implemented yet"); }
Tensor bernoulli(const Shape& shape, double p, const TensorOptions& o) { KILN_CHECK(false, "bernoulli", "not implemented yet"); }
Tensor randperm(int64_t n, const Device& device) { KILN_CHECK(false, "randperm", "not implemented yet"); }

}  // namespace kiln
