// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Free functions over tensors, named and behaving as in PyTorch. Unless stated otherwise:
// binary ops broadcast their inputs (NumPy rules) and promote dtypes (promote_types, scalars by
// category); float-only ops turn integer inputs into f32; every op accepts any strides,
// 0-d and empty tensors; bad arguments throw kiln::Error("[op] ...").
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// ---- creation (src/ops/creation.cpp) ---------------------------------------------------------
/// A tensor holding a copy of shape_numel(shape) elements of `dtype` read from `data`.
Tensor from_blob_copy(const void* data, const Shape& shape, DType dtype, const Device& device);
/// As above, where `data` holds `count` elements: throws kiln::Error("[tensor] ...") unless
/// count == shape_numel(shape).
Tensor from_blob_copy(const void* data, size_t count, const Shape& shape, DType dtype, const Device& device);
/// A tensor holding `values` with the given shape (values.size() must equal the shape's numel,
/// else kiln::Error); dtype from T.
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, const Device& device = Device::default_device()) {
  return from_blob_copy(values.data(), values.size(), shape, dtype_of_v<T>, device);
}
template <class T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape, const Device& device = Device::default_device()) {
  return from_blob_copy(values.begin(), values.size(), shape, dtype_of_v<T>, device);
}
/// A 1-d tensor of the values.
template <class T>
Tensor tensor(std::initializer_list<T> values, const Device& device = Device::default_device()) {
  return from_blob_copy(values.begin(), Shape{static_cast<int64_t>(values.size())}, dtype_of_v<T>, device);
}
template <>
inline Tensor tensor<bool>(std::initializer_list<bool> values, const Shape& shape, const Device& device) {
  std::vector<uint8_t> b(values.begin(), values.end());
  return from_blob_copy(b.data(), b.size(), shape, DType::Bool, device);
}
template <>
inline Tensor tensor<bool>(const std::vector<bool>& values, const Shape& shape, const Device& device) {
  std::vector<uint8_t> b(values.begin(), values.end());
  return from_blob_copy(b.data(), b.size(), shape, DType::Bool, device);
}
/// A 0-d tensor holding s (dtype defaults to the scalar's natural dtype).
Tensor scalar_tensor(Scalar s, std::optional<DType> dtype = {}, const Device& device = Device::default_device());
Tensor empty(const Shape& shape, const TensorOptions& o = {});
Tensor zeros(const Shape& shape, const TensorOptions& o = {});
Tensor ones(const Shape& shape, const TensorOptions& o = {});
Tensor full(const Shape& shape, Scalar value, const TensorOptions& o = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
/// [start, end) with step; dtype i64 when all arguments are integers, else f32 (unless given).
Tensor arange(Scalar end, std::optional<DType> dtype = {}, const Device& device = Device::default_device());
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = {},
              const Device& device = Device::default_device());
/// `steps` points from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o = {});
Tensor logspace(double start, double end, int64_t steps, double base = 10, const TensorOptions& o = {});
/// n x m identity (m defaults to n).
Tensor eye(int64_t n, std::optional<int64_t> m = {}, const TensorOptions& o = {});
/// Uniform on [0, 1).
Tensor rand(const Shape& shape, const TensorOptions& o = {});
/// Uniform on [low, high).
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& o = {});
/// Standard normal.
Tensor randn(const Shape& shape, const TensorOptions& o = {});
Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& o = {});
/// Integers uniform on [low, high); dtype defaults to i64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o = {.dtype = i64});
/// 1 with probability p (elementwise), else 0; same dtype and shape as p.
Tensor bernoulli(const Tensor& p);
Tensor bernoulli(const Shape& shape, double p, const TensorOptions& o = {});
/// torch.multinomial: num_samples category indices (i64) drawn from each row of the weights
/// `probs` [C] or [N, C] (non-negative, finite, each row with a positive sum; they need not sum
/// to 1) -> [num_samples] or [N, num_samples]. Without replacement the draws of a row are
/// distinct and num_samples may not exceed its non-zero categories. Seeded by manual_seed; a
/// composite of rand, cumsum and topk, so it runs on every device.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
/// A random permutation of 0..n-1, like the other creation functions:
/// `randperm(n, {.dtype = i64, .device = d})`. dtype defaults to i64 when no options are given
/// (a TensorOptions written out takes its own dtype, f32 unless set, as for randint).
Tensor randperm(int64_t n, const TensorOptions& o = {.dtype = i64});
/// randperm(n, {.dtype = i64, .device = device}).
Tensor randperm(int64_t n, const Device& device);

// ---- unary elementwise (src/ops/unary.cpp) ----------------------------------------------------
#define KILN_DECLARE_UNARY(name) Tensor name(const Tensor& x);
KILN_DECLARE_UNARY(abs)
KILN_DECLARE_UNARY(neg)
KILN_DECLARE_UNARY(sign)
KILN_DECLARE_UNARY(exp)
KILN_DECLARE_UNARY(exp2)
KILN_DECLARE_UNARY(expm1)
KILN_DECLARE_UNARY(log)
KILN_DECLARE_UNARY(log2)
KILN_DECLARE_UNARY(log10)
KILN_DECLARE_UNARY(log1p)
KILN_DECLARE_UNARY(sqrt)
KILN_DECLARE_UNARY(rsqrt)
KILN_DECLARE_UNARY(reciprocal)
KILN_DECLARE_UNARY(square)
KILN_DECLARE_UNARY(sin)
KILN_DECLARE_UNARY(cos)
KILN_DECLARE_UNARY(tan)
KILN_DECLARE_UNARY(asin)
KILN_DECLARE_UNARY(acos)
KILN_DECLARE_UNARY(atan)
KILN_DECLARE_UNARY(sinh)
KILN_DECLARE_UNARY(cosh)
KILN_DECLARE_UNARY(tanh)
KILN_DECLARE_UNARY(asinh)
KILN_DECLARE_UNARY(acosh)
KILN_DECLARE_UNARY(atanh)
KILN_DECLARE_UNARY(erf)
KILN_DECLARE_UNARY(erfinv)
KILN_DECLARE_UNARY(floor)
KILN_DECLARE_UNARY(ceil)
KILN_DECLARE_UNARY(trunc)
KILN_DECLARE_UNARY(frac)
KILN_DECLARE_UNARY(sigmoid)
KILN_DECLARE_UNARY(relu)
KILN_DECLARE_UNARY(selu)
KILN_DECLARE_UNARY(silu)
KILN_DECLARE_UNARY(mish)
KILN_DECLARE_UNARY(softsign)
KILN_DECLARE_UNARY(hardsigmoid)
KILN_DECLARE_UNARY(hardswish)
KILN_DECLARE_UNARY(isnan)
KILN_DECLARE_UNARY(isinf)
KILN_DECLARE_UNARY(isfinite)
KILN_DECLARE_UNARY(isposinf)
KILN_DECLARE_UNARY(isneginf)
KILN_DECLARE_UNARY(logical_not)
KILN_DECLARE_UNARY(bitwise_not)
#undef KILN_DECLARE_UNARY
/// Round half to even; with decimals, round(x * 10^d) / 10^d.
Tensor round(const Tensor& x, int64_t decimals = 0);
/// log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given.
Tensor logit(const Tensor& x, std::optional<double> eps = {});
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor celu(const Tensor& x, double alpha = 1.0);
/// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);
/// Limits to [min, max]; either bound may be absent. Tensor bounds broadcast.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
Tensor clamp_min(const Tensor& x, Scalar min);
Tensor clamp_max(const Tensor& x, Scalar max);
/// NaN -> nan, +inf -> posinf (default: dtype max), -inf -> neginf (default: dtype lowest).
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = {},
                  std::optional<double> neginf = {});
/// Casts to dtype (PyTorch's .to(dtype)): float -> int truncates, anything -> bool is != 0.
Tensor cast(const Tensor& x, DType dtype);

// ---- binary and ternary elementwise (src/ops/binary.cpp) ---------------------------------------
#define KILN_DECLARE_BINARY(name)                \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& a, Scalar b);        \
  Tensor name(Scalar a, const Tensor& b);
KILN_DECLARE_BINARY(mul)
KILN_DECLARE_BINARY(remainder)
KILN_DECLARE_BINARY(fmod)
KILN_DECLARE_BINARY(pow)
KILN_DECLARE_BINARY(atan2)
KILN_DECLARE_BINARY(maximum)
KILN_DECLARE_BINARY(minimum)
KILN_DECLARE_BINARY(fmax)
KILN_DECLARE_BINARY(fmin)
KILN_DECLARE_BINARY(hypot)
KILN_DECLARE_BINARY(logaddexp)
KILN_DECLARE_BINARY(bitwise_and)
KILN_DECLARE_BINARY(bitwise_or)
KILN_DECLARE_BINARY(bitwise_xor)
KILN_DECLARE_BINARY(bitwise_left_shift)
KILN_DECLARE_BINARY(bitwise_right_shift)
KILN_DECLARE_BINARY(logical_and)
KILN_DECLARE_BINARY(logical_or)
KILN_DECLARE_BINARY(logical_xor)
KILN_DECLARE_BINARY(eq)
KILN_DECLARE_BINARY(ne)
KILN_DECLARE_BINARY(lt)
KILN_DECLARE_BINARY(le)
KILN_DECLARE_BINARY(gt)
KILN_DECLARE_BINARY(ge)
#undef KILN_DECLARE_BINARY
/// a + alpha * b.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b);
Tensor add(Scalar a, const Tensor& b);
/// a - alpha * b.
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
Tensor sub(Scalar a, const Tensor& b);
/// rounding_mode: "" (true division, float result), "trunc" or "floor".
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
Tensor div(const Tensor& a, Scalar b, const std::string& rounding_mode = "");
Tensor div(Scalar a, const Tensor& b, const std::string& rounding_mode = "");
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar b);
/// cond ? a : b, broadcast over all three; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);
/// x with value where mask (bool, broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
/// start + weight * (end - start).
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight);
/// |a - b| <= atol + rtol * |b| (NaNs equal when equal_nan).
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
/// Same shape and equal elements.
bool equal(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a);
// Rvalue forms: a temporary operand lends its buffer to the result when nothing else holds it.
Tensor operator+(Tensor&& a, const Tensor& b);
Tensor operator+(const Tensor& a, Tensor&& b);
Tensor operator+(Tensor&& a, Tensor&& b);
Tensor operator+(Tensor&& a, Scalar b);
Tensor operator*(Tensor&& a, const Tensor& b);
Tensor operator*(const Tensor& a, Tensor&& b);
Tensor operator*(Tensor&& a, Tensor&& b);
Tensor operator*(Tensor&& a, Scalar b);
Tensor operator~(const Tensor& a);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator<<(const Tensor& a, Scalar b);
Tensor operator>>(const Tensor& a, Scalar b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, Scalar b);

// ---- reductions (src/ops/reduce.cpp) ------------------------------------------------------------
// `dims` empty means all dims. Integer and bool inputs sum in i64 (as PyTorch).
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// Index of the first maximum (over the flattened tensor when dim is absent); i64.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
/// Values and indices of the max/min along dim.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// Variance with Bessel-style correction (divides by N - correction).
Tensor var(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
/// p-norm over dims (p = 2 default; inf and -inf allowed; p = 0 counts non-zeros).
Tensor norm(const Tensor& x, double p = 2, const Dims& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor any(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor all(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor count_nonzero(const Tensor& x, const Dims& dims = {});
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
/// Running max/min along dim: (values, indices of the last occurrence of the running extreme).
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);
/// Stable sort along dim: (values, i64 indices). NaNs sort last (ascending).
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);
/// k largest (or smallest) along dim: (values, indices), sorted.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
/// The k-th smallest (1-based) along dim: (values, indices).
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
/// Lower median over all elements.
Tensor median(const Tensor& x);
std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor nanmedian(const Tensor& x);
/// Sorted unique values of the flattened tensor, the inverse indices and counts.
struct UniqueResult {
  Tensor values, inverse, counts;
};
UniqueResult unique(const Tensor& x, bool sorted = true, bool return_inverse = false, bool return_counts = false);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// ---- indexing (src/ops/index.cpp) ---------------------------------------------------------------
/// Rows of x along dim picked by a 1-d integer index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j] = x[index[i][j]][j] for dim 0 (and so on); index has x's rank.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of x with src written at index along dim. reduce: "" (replace), "add", "multiply".
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce = "");
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value, const std::string& reduce = "");
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// reduce: "sum", "prod", "mean", "amax", "amin"; include_self as in PyTorch.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self = true);
/// x with alpha * src added at rows index along dim.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha = 1);
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
/// A copy of x with values put at the positions named by the index tensors (broadcast together).
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
/// Elements where mask (broadcast) is true, as a 1-d tensor.
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
/// Indices of non-zero elements: [n, rank] i64.
Tensor nonzero(const Tensor& x);
std::vector<Tensor> nonzero_tuple(const Tensor& x);
/// Elements of the flattened x at index (any shape).
Tensor take(const Tensor& x, const Tensor& index);
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = {});
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// Lower / upper triangle of the last two dims (diagonal k), the rest zero.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/// 1-d -> square matrix with the vector on diagonal k; 2-d -> the k-th diagonal as 1-d.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
/// [*, num_classes] i64 one-hot of an integer tensor (num_classes = max + 1 when -1).
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
/// Rows of weight [num, dim] picked by integer indices of any shape: [*indices, dim].
Tensor embedding(const Tensor& indices, const Tensor& weight);

// ---- movement (src/ops/movement.cpp) ------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
Tensor permute(const Tensor& x, const Dims& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor movedim(const Tensor& x, const Dims& src, const Dims& dst);
Tensor squeeze(const Tensor& x, const Dims& dims = {});
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& xs);
/// Tiles x: repeats.size() >= x.dim(); result dim i is x.size(i) * repeats[i].
Tensor repeat(const Tensor& x, const Shape& repeats);
/// Like repeat but prepends 1s to repeats when shorter than x.dim() (numpy.tile).
Tensor tile(const Tensor& x, const Shape& reps);
/// Repeats each element (along dim, or of the flattened x) `repeats` times.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = {});
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = {});
/// Concatenates along dim (shapes equal elsewhere; dtypes promoted; 1-d empty tensors skipped).
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor concat(const std::vector<Tensor>& xs, int64_t dim = 0);
/// Joins along a new dim.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor hstack(const std::vector<Tensor>& xs);
Tensor vstack(const std::vector<Tensor>& xs);
/// Pieces of split_size along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
Tensor flip(const Tensor& x, const Dims& dims);
Tensor fliplr(const Tensor& x);
Tensor flipud(const Tensor& x);
/// Rolls elements along dims (with no dims: over the flattened tensor).
Tensor roll(const Tensor& x, const Shape& shifts, const Dims& dims = {});
/// pads = {last_lo, last_hi, prev_lo, prev_hi, ...}; mode "constant", "reflect", "replicate", "circular".
Tensor pad(const Tensor& x, const Shape& pads, const std::string& mode = "constant", double value = 0);
/// indexing "ij" (default) or "xy".
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing = "ij");

}  // namespace kiln
