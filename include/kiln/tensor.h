// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Tensor handle. Light on purpose: no backend, kernel or iostream headers.
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/scalar.h"
#include "kiln/shape.h"

namespace kiln {

struct Storage;       // a buffer owned by a backend (internal)
struct AutogradMeta;  // per-tensor autodiff state (owned by the autodiff decorator)
class Gradients;      // the result of backward() (kiln/autodiff.h)

/// Options of Tensor::backward.
struct BackwardOptions {
  /// Keep the graph (and the buffers it saved) so backward can run through it again.
  bool retain_graph = false;
  /// Record the backward pass itself, so the returned gradients are differentiable (gradients
  /// of gradients: gradient penalties, Hessian-vector products). Implies retain_graph.
  bool create_graph = false;
};

/// Options for creation functions: `zeros({2, 3}, {.dtype = f64, .device = cpu})`.
struct TensorOptions {
  DType dtype = f32;
  Device device = Device::default_device();
};

/// Shared state behind a Tensor handle: a strided view of a Storage.
struct TensorImpl {
  Shape shape;
  Strides strides;     // in elements; 0 for broadcast dims, negative after flip
  int64_t offset = 0;  // in elements, from the start of the storage
  DType dtype = f32;
  Device device;
  std::shared_ptr<Storage> storage;
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor;
/// One entry of `Tensor::index({...})`: an integer, a Slice, None (new axis), Ellipsis, or a
/// tensor (integer indices or a boolean mask).
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
struct NoneIndex {};
struct EllipsisIndex {};
inline constexpr NoneIndex None{};
inline constexpr EllipsisIndex Ellipsis{};
class TensorIndex;

/// A cheap, shared handle to an n-dimensional array on a Device. Copying a Tensor shares data
/// (like PyTorch); `clone()` copies it. A default-constructed Tensor is undefined.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata -------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& sizes() const { return impl().shape; }
  /// Size of dim d (negative counts from the end).
  int64_t size(int64_t d) const;
  const Strides& strides() const { return impl().strides; }
  int64_t stride(int64_t d) const;
  int64_t storage_offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t ndim() const { return dim(); }
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  size_t element_size() const { return dtype_size(dtype()); }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  /// True when both handles view the same storage.
  bool is_same_storage(const Tensor& o) const;
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  std::string str() const;  ///< PyTorch-style printout

  // ---- autodiff (kiln/autodiff.h; the device must have `.autodiff()`) ----------------------
  /// Marks this tensor (a float leaf) as needing gradients; returns the same handle.
  /// `require_grad(false)` turns tracking off again for a leaf.
  Tensor require_grad(bool on = true) const;
  /// Whether ops on this tensor are recorded for backward.
  bool requires_grad() const;
  /// True for tensors not produced by a recorded op (inputs, parameters, detached tensors).
  bool is_leaf() const;
  /// The same data without gradient tracking.
  Tensor detach() const;
  /// Backpropagates from this one-element tensor; returns the gradients of every tensor it
  /// reached. `{.create_graph = true}` makes them differentiable.
  Gradients backward(const BackwardOptions& options = {}) const;
  /// The same from a tensor of any shape, with the gradient `seed` of that shape.
  Gradients backward(const Tensor& seed, const BackwardOptions& options = {}) const;
  /// This tensor's gradient in `grads`, or an undefined tensor when it has none.
  Tensor grad(const Gradients& grads) const;

  // ---- conversion and copies -------------------------------------------------------------
  Tensor to(const Device& d) const;
  Tensor to(DType t) const;
  Tensor to(const Device& d, DType t) const;
  Tensor contiguous() const;
  Tensor clone() const;
  /// Copies src (broadcast to this shape, cast to this dtype) into this tensor's elements.
  Tensor& copy_(const Tensor& src);
  /// Copies the elements to the host as T (converting from the tensor's dtype).
  template <class T>
  std::vector<T> to_vector() const {
    using E = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    std::vector<E> v;
    try {
      v.resize(host_count(sizeof(E)));
    } catch (const std::bad_alloc&) {
      host_out_of_memory(sizeof(E));
    }
    copy_to_host(v.data(), dtype_of_v<T>);
    if constexpr (std::is_same_v<T, bool>)
      return std::vector<bool>(v.begin(), v.end());
    else
      return v;
  }
  /// The value of a one-element tensor as T.
  template <class T>
  T item() const {
    T v{};
    check_one_element("item");
    copy_to_host(&v, dtype_of_v<T>);
    return v;
  }
  Scalar item() const;
  /// Writes numel() elements of type `as` to dst (reads from the device; a sync point).
  void copy_to_host(void* dst, DType as) const;

  // ---- views (zero-copy where the layout allows) ------------------------------------------
  Tensor reshape(const Shape& shape) const;  ///< one dim may be -1
  Tensor view(const Shape& shape) const;     ///< like reshape but never copies; throws if it must
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor permute(const Dims& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;   ///< transpose of a <= 2-d tensor
  Tensor mT() const;  ///< transpose of the last two dims
  Tensor movedim(const Dims& src, const Dims& dst) const;
  Tensor squeeze() const;
  Tensor squeeze(const Dims& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;  ///< -1 keeps a size; new dims on the left
  Tensor expand_as(const Tensor& o) const { return expand(o.shape()); }
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Elements start, start+step, ... below stop along dim (Python slice rules, clamped).
  Tensor slice(int64_t dim, std::optional<int64_t> start = {}, std::optional<int64_t> stop = {},
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor flip(const Dims& dims) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor as_strided(const Shape& shape, const Strides& strides, int64_t offset) const;
  /// NumPy/PyTorch indexing: ints, Slice{}, None, Ellipsis, index tensors, boolean masks.
  Tensor index(std::initializer_list<TensorIndex> idx) const;
  Tensor index(const std::vector<TensorIndex>& idx) const;
  /// Slice / index assignment: `x.index_put_({Slice{0, 2}}, 0.f)`.
  Tensor& index_put_(const std::vector<TensorIndex>& idx, const Tensor& value);
  Tensor& index_put_(const std::vector<TensorIndex>& idx, Scalar value);

  // ---- the everyday ops as methods (free functions in ops.h) ----------------------------
#define KILN_UNARY_METHOD(name) Tensor name() const;
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
  Tensor round(int64_t decimals = 0) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(Scalar e) const;

  /// Sum over all elements (0-d result).
  Tensor sum(std::optional<DType> dtype = {}) const;
  /// Sum over dims; keepdim keeps them as size 1.
  Tensor sum(const Dims& dims, bool keepdim = false, std::optional<DType> dtype = {}) const;
  Tensor mean() const;
  Tensor mean(const Dims& dims, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor amax(const Dims& dims = {}, bool keepdim = false) const;
  Tensor amin(const Dims& dims = {}, bool keepdim = false) const;
  Tensor max() const;  ///< over all elements
  Tensor min() const;
  /// Max along dim: (values, indices).
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor var(const Dims& dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor std(const Dims& dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor any() const;
  Tensor all() const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // Matrix products (kiln/matmul.h has the contracts).
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;

  // Method forms of the free functions in ops.h (same contracts; see there).
  Tensor add(const Tensor& o, Scalar alpha = 1) const;
  Tensor add(Scalar o) const;
  Tensor sub(const Tensor& o, Scalar alpha = 1) const;
  Tensor sub(Scalar o) const;
  Tensor mul(const Tensor& o) const;
  Tensor mul(Scalar o) const;
  Tensor div(const Tensor& o, const std::string& rounding_mode = "") const;
  Tensor div(Scalar o, const std::string& rounding_mode = "") const;
  Tensor remainder(const Tensor& o) const;
  Tensor remainder(Scalar o) const;
  Tensor fmod(const Tensor& o) const;
  Tensor fmod(Scalar o) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor atan2(const Tensor& o) const;
  Tensor hypot(const Tensor& o) const;
  Tensor logaddexp(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor eq(Scalar o) const;
  Tensor ne(const Tensor& o) const;
  Tensor ne(Scalar o) const;
  Tensor lt(const Tensor& o) const;
  Tensor lt(Scalar o) const;
  Tensor le(const Tensor& o) const;
  Tensor le(Scalar o) const;
  Tensor gt(const Tensor& o) const;
  Tensor gt(Scalar o) const;
  Tensor ge(const Tensor& o) const;
  Tensor ge(Scalar o) const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;
  Tensor bitwise_and(const Tensor& o) const;
  Tensor bitwise_or(const Tensor& o) const;
  Tensor bitwise_xor(const Tensor& o) const;
  Tensor clamp_min(Scalar min) const;
  Tensor clamp_max(Scalar max) const;
  Tensor nan_to_num(double nan = 0.0) const;
  Tensor logit(std::optional<double> eps = {}) const;
  /// PyTorch's x.where(cond, other): x where cond is true, else other.
  Tensor where(const Tensor& cond, const Tensor& other) const;
  Tensor where(const Tensor& cond, Scalar other) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor lerp(const Tensor& end, Scalar weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor isclose(const Tensor& o, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool allclose(const Tensor& o, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool equal(const Tensor& o) const;
  Tensor norm(double p = 2, const Dims& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const Dims& dims, bool keepdim = false) const;
  Tensor any(const Dims& dims, bool keepdim = false) const;
  Tensor all(const Dims& dims, bool keepdim = false) const;
  Tensor count_nonzero(const Dims& dims = {}) const;
  Tensor cumsum(int64_t dim) const;
  Tensor cumprod(int64_t dim) const;
  std::pair<Tensor, Tensor> cummax(int64_t dim) const;
  std::pair<Tensor, Tensor> cummin(int64_t dim) const;
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  std::pair<Tensor, Tensor> kthvalue(int64_t k, int64_t dim = -1, bool keepdim = false) const;
  Tensor median() const;
  std::pair<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                        bool include_self = true) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha = 1) const;
  Tensor index_copy(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_fill(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor masked_scatter(const Tensor& mask, const Tensor& source) const;
  Tensor nonzero() const;
  Tensor take(const Tensor& index) const;
  Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = {}) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor diag(int64_t diagonal = 0) const;
  Tensor diag_embed(int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1) const;
  Tensor repeat(const Shape& repeats) const;
  Tensor tile(const Shape& reps) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = {}) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor roll(const Shape& shifts, const Dims& dims = {}) const;
  Tensor fliplr() const;
  Tensor flipud() const;
  Tensor view_as(const Tensor& o) const { return view(o.shape()); }
  Tensor reshape_as(const Tensor& o) const { return reshape(o.shape()); }
  Tensor type_as(const Tensor& o) const { return to(o.dtype()); }

  // In-place forms write into this tensor's elements (which may be a view).
  Tensor& add_(const Tensor& o, Scalar alpha = 1);
  Tensor& add_(Scalar o);
  Tensor& sub_(const Tensor& o, Scalar alpha = 1);
  Tensor& sub_(Scalar o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar o);
  Tensor& fill_(Scalar v);
  Tensor& zero_();
  Tensor& masked_fill_(const Tensor& mask, Scalar v);

  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(Scalar o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(Scalar o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(Scalar o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(Scalar o) { return div_(o); }

 private:
  void check_one_element(const char* op) const;
  /// numel() as a host element count for to_vector, after checking that numel() elements of
  /// elem_size bytes can be allocated on the host (kiln::Error naming to_vector otherwise).
  size_t host_count(size_t elem_size) const;
  /// Throws the kiln::Error of a host copy for to_vector that could not be allocated.
  [[noreturn]] void host_out_of_memory(size_t elem_size) const;
  std::shared_ptr<TensorImpl> impl_;
};

/// See Tensor::index.
class TensorIndex {
 public:
  enum class Kind : uint8_t { Int, Slice, None, Ellipsis, Tensor };
  TensorIndex(int64_t i) : kind_(Kind::Int), int_(i) {}                  // NOLINT
  TensorIndex(int i) : kind_(Kind::Int), int_(i) {}                      // NOLINT
  TensorIndex(Slice s) : kind_(Kind::Slice), slice_(s) {}                // NOLINT
  TensorIndex(NoneIndex) : kind_(Kind::None) {}                          // NOLINT
  TensorIndex(EllipsisIndex) : kind_(Kind::Ellipsis) {}                  // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}  // NOLINT
  Kind kind() const { return kind_; }
  int64_t integer() const { return int_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t int_ = 0;
  Slice slice_;
  Tensor tensor_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace kiln
