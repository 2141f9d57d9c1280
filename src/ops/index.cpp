// SPDX-License-Identifier: MIT OR Apache-2.0
// Indexing ops: index_select, gather, scatter family, index_add/copy/fill, take, triangles,
// diagonals, one_hot, embedding, and the data-dependent ops (nonzero, masked_select/scatter).
// Advanced indexing (Tensor::index, index_put) is in index_advanced.cpp.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "autodiff/graph.h"
#include "ops/dispatch.h"

namespace kiln {

using ir::OpKind;

namespace detail {

/// An integer index tensor as i64; float and bool tensors are refused, naming api.
Tensor index_as_i64(const char* api, const Tensor& idx) {
  check_defined(api, idx);
  KILN_CHECK(is_integral(idx.dtype()), api,
             "index must be an integer tensor, got " << dtype_name(idx.dtype()).data() << " of shape " << idx.shape());
  return cast_if_needed(idx, DType::I64);
}

/// Runs an Index-family op; errors raised under the primitive's name (by inference or by the
/// kernel's index validation) are re-raised under `api`, with "dim from" renamed "dim to".
Tensor run_index(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs, int64_t dim_from, int64_t dim_to) {
  try {
    return run1(api, op, inputs);
  } catch (const Error& e) {
    std::string m = e.what();
    std::string tag = "[" + std::string(ir::op_name(op.kind)) + "] ";
    if (m.rfind(tag, 0) != 0) throw;
    m = "[" + std::string(api) + "] " + m.substr(tag.size());
    if (dim_from >= 0 && dim_from != dim_to) {
      std::string from = " for dim " + std::to_string(dim_from) + " with";
      size_t p = m.find(from);
      if (p != std::string::npos) m.replace(p, from.size(), " for dim " + std::to_string(dim_to) + " with");
    }
    throw Error(m);
  }
}
Tensor run_index(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs) {
  return run_index(api, op, inputs, -1, -1);
}

/// x.index_select(dim, index) under api's name; wrap lets negative indices count from the end.
Tensor index_select_as(const char* api, const Tensor& x, int64_t dim, const Tensor& index, bool wrap) {
  check_defined(api, x);
  Tensor i = index_as_i64(api, index);
  check_same_device(api, x, "input", i, "index");
  KILN_CHECK(i.dim() <= 1, api, "index must be 0-d or 1-d, got shape " << i.shape());
  KILN_CHECK(x.dim() > 0 || i.numel() == 1, api, "indexing a 0-d tensor needs exactly one index, got " << i.numel());
  int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), api);
  ir::Op op = make_op(OpKind::IndexSelect, {d, wrap ? 1 : 0});
  return run_index(api, op, {x, i});
}

/// The indices of idx (any shape, integer) for a dim of size n, validated and with negatives
/// wrapped, as a flat i64 tensor; errors name api and dim `dim_label`.
Tensor wrap_indices(const char* api, const Tensor& idx, int64_t n, int64_t dim_label) {
  Tensor i = index_as_i64(api, idx).reshape({-1});
  Tensor r = arange(n, DType::I64, idx.device());
  ir::Op op = make_op(OpKind::IndexSelect, {0, 1});
  return run_index(api, op, {r, i}, 0, dim_label);
}

/// Throws unless t's device holds data (ops whose result size depends on values need them).
void require_data(const char* api, const Tensor& t) {
  KILN_CHECK(t.device().backend()->has_data(), api,
             "the result's size depends on the input's values, which the "
                 << t.device().str() << " device does not hold (shape " << t.shape() << ")");
}

/// IndexAdd / IndexCopy with checks. src must have x's shape with size(dim) = index.numel().
Tensor index_update_as(const char* api, OpKind kind, const Tensor& x, int64_t dim, const Tensor& index,
                       const Tensor& src, double alpha, bool wrap) {
  check_defined(api, x);
  check_defined(api, src);
  Tensor i = index_as_i64(api, index);
  check_same_device(api, x, "input", i, "index");
  check_same_device(api, x, "input", src, "src");
  KILN_CHECK(i.dim() <= 1, api, "index must be 0-d or 1-d, got shape " << i.shape());
  KILN_CHECK(
      src.dtype() == x.dtype(), api,
      "source dtype " << dtype_name(src.dtype()).data() << " must equal the input's " << dtype_name(x.dtype()).data());
  int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), api);
  if (x.dim() == 0) {
    KILN_CHECK(
        i.numel() == 1 && src.numel() == 1, api,
        "a 0-d input needs one index and one source element, got index " << i.shape() << " and source " << src.shape());
  } else {
    Shape want = x.shape();
    want[static_cast<size_t>(d)] = i.numel();
    KILN_CHECK(src.shape() == want, api,
               "source of shape " << src.shape() << " must have shape " << want << " (input " << x.shape()
                                  << " with dim " << d << " sized by the " << i.numel() << " indices)");
  }
  ir::Op op = make_op(kind, {d, wrap ? 1 : 0}, {alpha});
  return run_index(api, op, {x, i, x.dim() == 0 ? src.reshape({}) : src});
}

/// Scatter with checks; reduce is the code of ops.def.
Tensor scatter_as(const char* api, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, int64_t reduce,
                  bool include_self) {
  check_defined(api, x);
  check_defined(api, src);
  Tensor i = index_as_i64(api, index);
  check_same_device(api, x, "input", i, "index");
  check_same_device(api, x, "input", src, "src");
  KILN_CHECK(
      src.dtype() == x.dtype(), api,
      "source dtype " << dtype_name(src.dtype()).data() << " must equal the input's " << dtype_name(x.dtype()).data());
  KILN_CHECK(!(reduce == 3 && x.dtype() == DType::Bool), api, "reduce 'mean' is not supported for bool tensors");
  int64_t r = std::max<int64_t>(x.dim(), 1);
  int64_t d = wrap_dim(dim, r, api);
  KILN_CHECK(std::max<int64_t>(i.dim(), 1) == r && std::max<int64_t>(src.dim(), 1) == r, api,
             "index " << i.shape() << ", input " << x.shape() << " and source " << src.shape()
                      << " must have the same number of dims");
  auto sz = [](const Tensor& t, int64_t k) { return t.dim() == 0 ? int64_t{1} : t.size(k); };
  for (int64_t k = 0; k < r; ++k) {
    KILN_CHECK(sz(i, k) <= sz(src, k), api,
               "index shape " << i.shape() << " exceeds source shape " << src.shape() << " in dim " << k);
    KILN_CHECK(k == d || sz(i, k) <= sz(x, k), api,
               "index shape " << i.shape() << " exceeds input shape " << x.shape() << " in dim " << k);
  }
  ir::Op op = make_op(OpKind::Scatter, {d, reduce, include_self ? 1 : 0});
  return run_index(api, op, {x, i, src});
}

Tensor gather_as(const char* api, const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(api, x);
  Tensor i = index_as_i64(api, index);
  check_same_device(api, x, "input", i, "index");
  int64_t r = std::max<int64_t>(x.dim(), 1);
  int64_t d = wrap_dim(dim, r, api);
  KILN_CHECK(std::max<int64_t>(i.dim(), 1) == r, api,
             "index " << i.shape() << " and input " << x.shape() << " must have the same number of dims");
  for (int64_t k = 0; k < r && x.dim() > 0 && i.dim() > 0; ++k)
    KILN_CHECK(k == d || i.size(k) <= x.size(k), api,
               "index shape " << i.shape() << " exceeds input shape " << x.shape() << " in dim " << k);
  ir::Op op = make_op(OpKind::Gather, {d});
  return run_index(api, op, {x, i});
}

}  // namespace detail

using detail::check_defined;

// ---- selection -------------------------------------------------------------------------------
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return detail::index_select_as("index_select", x, dim, index, false);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { return detail::gather_as("gather", x, dim, index); }

Tensor take(const Tensor& x, const Tensor& index) {
  check_defined("take", x);
  Tensor i = detail::index_as_i64("take", index);
  Tensor r = detail::index_select_as("take", x.reshape({-1}), 0, i.reshape({-1}), true);
  return r.reshape(i.shape());
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  const char* api = "take_along_dim";
  check_defined(api, x);
  Tensor i = detail::index_as_i64(api, indices);
  if (!dim) return detail::gather_as(api, x.reshape({-1}), 0, i.reshape({-1}));
  KILN_CHECK(x.dim() == i.dim(), api,
             "input " << x.shape() << " and indices " << i.shape() << " must have the same number of dims");
  if (x.dim() == 0) return detail::gather_as(api, x, 0, i);
  int64_t d = wrap_dim(*dim, x.dim(), api);
  Shape xs = x.shape(), is = i.shape();
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k == d) continue;
    size_t u = static_cast<size_t>(k);
    KILN_CHECK(xs[u] == is[u] || xs[u] == 1 || is[u] == 1, api,
               "input " << x.shape() << " and indices " << i.shape() << " do not broadcast in dim " << k);
    xs[u] = is[u] = std::max(xs[u], is[u]);
    if (x.size(k) == 0 || i.size(k) == 0) xs[u] = is[u] = 0;
  }
  return detail::gather_as(api, x.expand(xs), d, i.expand(is));
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  const char* api = "embedding";
  check_defined(api, weight);
  KILN_CHECK(weight.dim() == 2, api, "weight must be 2-d [num, dim], got shape " << weight.shape());
  Tensor i = detail::index_as_i64(api, indices);
  Shape s = i.shape();
  s.push_back(weight.size(1));
  return detail::index_select_as(api, weight, 0, i.reshape({-1}), false).reshape(s);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  check_defined("select", x);
  return x.select(dim, index);
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_defined("narrow", x);
  return x.narrow(dim, start, length);
}
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  check_defined("diagonal", x);
  return x.diagonal(offset, dim1, dim2);
}

// ---- scatter family --------------------------------------------------------------------------
namespace {
int64_t scatter_code(const std::string& reduce) {
  if (reduce.empty()) return 0;
  if (reduce == "add") return 1;
  if (reduce == "multiply") return 2;
  KILN_CHECK(false, "scatter", "reduce must be '', 'add' or 'multiply', got '" << reduce << "'");
  return 0;
}
}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  return detail::scatter_as("scatter", x, dim, index, src, scatter_code(reduce), true);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value, const std::string& reduce) {
  check_defined("scatter", x);
  check_defined("scatter", index);
  Tensor v = scalar_tensor(value, x.dtype(), x.device()).expand(index.shape());
  return detail::scatter_as("scatter", x, dim, index, v, scatter_code(reduce), true);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return detail::scatter_as("scatter_add", x, dim, index, src, 1, true);
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  static const char* const names[] = {"sum", "prod", "mean", "amax", "amin"};
  int64_t code = 0;
  for (int64_t k = 0; k < 5; ++k)
    if (reduce == names[k]) code = k + 1;
  KILN_CHECK(code != 0, "scatter_reduce",
             "reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got '" << reduce << "'");
  return detail::scatter_as("scatter_reduce", x, dim, index, src, code, include_self);
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) {
  check_defined("index_add", x);
  KILN_CHECK(is_floating(x.dtype()) || !alpha.is_floating(), "index_add",
             "alpha must not be a floating-point number for " << dtype_name(x.dtype()).data() << " tensors");
  return detail::index_update_as("index_add", OpKind::IndexAdd, x, dim, index, src, alpha.to_double(), false);
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return detail::index_update_as("index_copy", OpKind::IndexCopy, x, dim, index, src, 1.0, false);
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  const char* api = "index_fill";
  check_defined(api, x);
  Tensor i = detail::index_as_i64(api, index);
  KILN_CHECK(i.dim() <= 1, api, "index must be 0-d or 1-d, got shape " << i.shape());
  Shape s = x.shape();
  if (x.dim() > 0) s[static_cast<size_t>(wrap_dim(dim, x.dim(), api))] = i.numel();
  Tensor v = scalar_tensor(value, x.dtype(), x.device()).expand(s);
  return detail::index_update_as(api, OpKind::IndexCopy, x, dim, i, v, 1.0, true);  // negatives wrap (PyTorch)
}

// ---- triangles and diagonals -----------------------------------------------------------------
namespace {
Tensor triangle(const char* api, const Tensor& x, int64_t k, bool lower) {
  check_defined(api, x);
  KILN_CHECK(x.dim() >= 2, api, "expects a tensor with at least 2 dims, got shape " << x.shape());
  Tensor rows = arange(x.size(-2), DType::I64, x.device()).unsqueeze(1);
  Tensor cols = arange(x.size(-1), DType::I64, x.device());
  Tensor diff = cols - rows;  // column minus row: 0 on the main diagonal
  Tensor keep = lower ? (diff <= k) : (diff >= k);
  return where(keep, x, scalar_tensor(0, x.dtype(), x.device()));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, false); }

namespace {
/// out (zeros) with x written into its (offset, a, b) diagonal; differentiable in x: the
/// gradient is the same diagonal of the output's gradient.
Tensor embed_diagonal(const Tensor& x, Shape s, int64_t offset, int64_t a, int64_t b) {
  std::vector<Tensor> out{zeros(s, {.dtype = x.dtype(), .device = x.device()})};
  {
    NoGradGuard ng;
    out[0].diagonal(offset, a, b).copy_(x);
  }
  if (autodiff::requires_grad(x) && grad_enabled())
    autodiff::record_custom(
        "diag_embed", {x}, out,
        [offset, a, b](const autodiff::GradContext& c) -> std::vector<Tensor> {
          return {c.grads[0].diagonal(offset, a, b)};
        },
        /*save_inputs=*/false);
  return out[0];
}
}  // namespace

Tensor diag(const Tensor& x, int64_t diagonal) {
  check_defined("diag", x);
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, "diag", "expects a 1-d or 2-d tensor, got shape " << x.shape());
  if (x.dim() == 2) return x.diagonal(diagonal, 0, 1).clone();
  int64_t m = x.size(0) + std::abs(diagonal);
  return embed_diagonal(x, {m, m}, diagonal, 0, 1);
}

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const char* api = "diag_embed";
  check_defined(api, x);
  KILN_CHECK(x.dim() >= 1, api, "expects a tensor with at least 1 dim, got shape " << x.shape());
  int64_t r = x.dim() + 1;
  int64_t a = wrap_dim(dim1, r, api), b = wrap_dim(dim2, r, api);
  KILN_CHECK(a != b, api, "dim1 and dim2 must differ, both are " << a);
  int64_t m = x.size(-1) + std::abs(offset);
  Shape s;
  int64_t next = 0;
  for (int64_t k = 0; k < r; ++k) s.push_back(k == a || k == b ? m : x.size(next++));
  return embed_diagonal(x, s, offset, a, b);
}

// ---- one_hot -----------------------------------------------------------------------------------
Tensor one_hot(const Tensor& x, int64_t num_classes) {
  const char* api = "one_hot";
  check_defined(api, x);
  KILN_CHECK(is_integral(x.dtype()), api,
             "expects an integer tensor of class indices, got " << dtype_name(x.dtype()).data());
  KILN_CHECK(num_classes >= -1, api, "num_classes must be -1 or non-negative, got " << num_classes);
  Tensor i = detail::cast_if_needed(x, DType::I64);
  if (num_classes == -1) {
    KILN_CHECK(i.numel() > 0, api, "cannot infer the number of classes from an empty tensor of shape " << x.shape());
    detail::require_data(api, i);
    auto v = i.to_vector<int64_t>();
    num_classes = *std::max_element(v.begin(), v.end()) + 1;
  }
  Shape s = i.shape();
  s.push_back(num_classes);
  Tensor out = zeros(s, {.dtype = DType::I64, .device = x.device()});
  return detail::scatter_as(api, out, -1, i.unsqueeze(-1),
                            ones(i.unsqueeze(-1).shape(), {.dtype = DType::I64, .device = x.device()}), 0, true);
}

// ---- data-dependent sizes ------------------------------------------------------------------------
namespace {
/// Row-major positions of the non-zero elements of t (any dtype; NaN counts as non-zero).
std::vector<int64_t> nonzero_positions(const char* api, const Tensor& t) {
  detail::require_data(api, t);
  auto v = detail::cast_if_needed(t, DType::Bool).to_vector<uint8_t>();
  std::vector<int64_t> pos;
  for (size_t k = 0; k < v.size(); ++k)
    if (v[k]) pos.push_back(static_cast<int64_t>(k));
  return pos;
}

Tensor mask_positions(const char* api, const Tensor& mask, const Shape& shape) {
  check_defined(api, mask);
  KILN_CHECK(mask.dtype() == DType::Bool, api, "mask must be bool, got " << dtype_name(mask.dtype()).data());
  auto pos = nonzero_positions(api, mask.expand(shape));
  return tensor(pos, {static_cast<int64_t>(pos.size())}, mask.device());
}
}  // namespace

Tensor nonzero(const Tensor& x) {
  check_defined("nonzero", x);
  auto pos = nonzero_positions("nonzero", x);
  int64_t n = static_cast<int64_t>(pos.size()), r = x.dim();
  std::vector<int64_t> coords(static_cast<size_t>(n * r));
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = pos[static_cast<size_t>(k)];
    for (int64_t d = r - 1; d >= 0; --d) {
      coords[static_cast<size_t>(k * r + d)] = p % x.size(d);
      p /= x.size(d);
    }
  }
  return tensor(coords, {n, r}, x.device());
}

std::vector<Tensor> nonzero_tuple(const Tensor& x) {
  check_defined("nonzero_tuple", x);
  auto pos = nonzero_positions("nonzero_tuple", x);
  int64_t n = static_cast<int64_t>(pos.size()), r = x.dim();
  if (r == 0) return {zeros({n}, {.dtype = DType::I64, .device = x.device()})};
  std::vector<std::vector<int64_t>> cols(static_cast<size_t>(r), std::vector<int64_t>(static_cast<size_t>(n)));
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = pos[static_cast<size_t>(k)];
    for (int64_t d = r - 1; d >= 0; --d) {
      cols[static_cast<size_t>(d)][static_cast<size_t>(k)] = p % x.size(d);
      p /= x.size(d);
    }
  }
  std::vector<Tensor> out;
  for (auto& c : cols) out.push_back(tensor(c, {n}, x.device()));
  return out;
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  const char* api = "masked_select";
  check_defined(api, x);
  check_defined(api, mask);
  detail::check_same_device(api, x, mask);
  Shape s = broadcast_shapes(x.shape(), mask.shape(), api);
  Tensor pos = mask_positions(api, mask, s);
  return detail::index_select_as(api, x.expand(s).reshape({-1}), 0, pos, false);
}

Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  const char* api = "masked_scatter";
  check_defined(api, x);
  check_defined(api, mask);
  check_defined(api, source);
  detail::check_same_device(api, x, mask);
  detail::check_same_device(api, x, source);
  KILN_CHECK(source.dtype() == x.dtype(), api,
             "source dtype " << dtype_name(source.dtype()).data() << " must equal the input's "
                             << dtype_name(x.dtype()).data());
  Shape s = broadcast_shapes(x.shape(), mask.shape(), api);
  KILN_CHECK(mask.dtype() == DType::Bool, api, "mask must be bool, got " << dtype_name(mask.dtype()).data());
  if (!x.device().backend()->has_data()) return detail::alloc(s, x.dtype(), x.device());  // shape only
  Tensor pos = mask_positions(api, mask, s);
  int64_t n = pos.numel();
  KILN_CHECK(
      source.numel() >= n, api,
      "source has " << source.numel() << " elements (shape " << source.shape() << ") but the mask selects " << n);
  Tensor src = source.reshape({-1}).narrow(0, 0, n);
  return detail::index_update_as(api, OpKind::IndexCopy, x.expand(s).reshape({-1}), 0, pos, src, 1.0, false).reshape(s);
}

}  // namespace kiln
