// SPDX-License-Identifier: MIT OR Apache-2.0
// Movement ops: views forwarded to the Tensor methods, Cat and Pad primitives, and composites
// (repeat, tile, repeat_interleave, stack, split, chunk, unbind, roll, meshgrid, ...).
#include <algorithm>
#include <numeric>

#include "core/checked.h"
#include "ir/attrs.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using ir::OpKind;

namespace {

void check_all_defined(const char* api, const std::vector<Tensor>& xs) {
  KILN_CHECK(!xs.empty(), api, "expected a non-empty list of tensors");
  for (const Tensor& x : xs) detail::check_defined(api, x);
  for (size_t i = 1; i < xs.size(); ++i) detail::check_same_device(api, xs[0], xs[i]);
}

std::string shapes_of(const std::vector<Tensor>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + to_string(xs[i].shape());
  return s;
}

Tensor atleast_1d(const Tensor& x) { return x.dim() == 0 ? x.reshape({1}) : x; }
Tensor atleast_2d(const Tensor& x) {
  if (x.dim() == 0) return x.reshape({1, 1});
  return x.dim() == 1 ? x.unsqueeze(0) : x;
}

/// One roll along one dim: the last `s` elements move to the front (a copy, like PyTorch).
Tensor roll1(const Tensor& x, int64_t shift, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "roll");
  int64_t n = x.size(d);
  if (n == 0) return x.clone();
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x.clone();
  return cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
}

}  // namespace

// ---- views ----------------------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape) {
  detail::check_defined("reshape", x);
  return x.reshape(shape);
}
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  detail::check_defined("flatten", x);
  return x.flatten(start_dim, end_dim);
}
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  detail::check_defined("unflatten", x);
  return x.unflatten(dim, sizes);
}
Tensor permute(const Tensor& x, const Dims& dims) {
  detail::check_defined("permute", x);
  return x.permute(dims);
}
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  detail::check_defined("transpose", x);
  return x.transpose(d0, d1);
}
Tensor movedim(const Tensor& x, const Dims& src, const Dims& dst) {
  detail::check_defined("movedim", x);
  return x.movedim(src, dst);
}
Tensor squeeze(const Tensor& x, const Dims& dims) {
  detail::check_defined("squeeze", x);
  return x.squeeze(dims);
}
Tensor unsqueeze(const Tensor& x, int64_t dim) {
  detail::check_defined("unsqueeze", x);
  return x.unsqueeze(dim);
}
Tensor expand(const Tensor& x, const Shape& shape) {
  detail::check_defined("expand", x);
  return x.expand(shape);
}
Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  detail::check_defined("broadcast_to", x);
  return detail::as_op("broadcast_to", [&] { return x.expand(shape); });
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& xs) {
  if (xs.empty()) return {};
  for (const Tensor& x : xs) detail::check_defined("broadcast_tensors", x);
  Shape s = xs[0].shape();
  for (size_t i = 1; i < xs.size(); ++i) s = broadcast_shapes(s, xs[i].shape(), "broadcast_tensors");
  std::vector<Tensor> out;
  out.reserve(xs.size());
  for (const Tensor& x : xs) out.push_back(x.expand(s));
  return out;
}

// ---- repeats --------------------------------------------------------------------------------
namespace {
/// repeat, reported as `api` (repeat or tile): the result's shape is computed with checked
/// arithmetic before anything is allocated.
Tensor repeat_impl(const char* api, const Tensor& x, const Shape& repeats) {
  detail::check_defined(api, x);
  detail::OpScope scope(api);
  KILN_CHECK(
      static_cast<int64_t>(repeats.size()) >= x.dim(), api,
      "number of repeat dims " << to_string(repeats) << " can not be smaller than the rank of shape " << x.shape());
  for (auto r : repeats) KILN_CHECK(r >= 0, api, "repeats must be non-negative, got " << to_string(repeats));
  size_t k = repeats.size(), lead = k - static_cast<size_t>(x.dim());
  // [1, s0, 1, s1, ...] viewed, expanded to [r0, s0, r1, s1, ...], copied, then merged pairwise.
  Shape inter, expanded, final_shape;
  for (size_t i = 0; i < k; ++i) {
    int64_t s = i < lead ? 1 : x.shape()[i - lead];
    inter.push_back(1);
    inter.push_back(s);
    expanded.push_back(repeats[i]);
    expanded.push_back(s);
    final_shape.push_back(detail::checked_mul(repeats[i], s, api));
  }
  detail::checked_nbytes(final_shape, x.dtype(), api);  // the result's numel and bytes fit
  return x.reshape(inter).expand(expanded).clone().view(final_shape);
}
}  // namespace

Tensor repeat(const Tensor& x, const Shape& repeats) { return repeat_impl("repeat", x, repeats); }

Tensor tile(const Tensor& x, const Shape& reps) {
  detail::check_defined("tile", x);
  Shape r = reps;
  while (static_cast<int64_t>(r.size()) < x.dim()) r.insert(0, 1);
  return repeat_impl("tile", x, r);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  detail::check_defined("repeat_interleave", x);
  KILN_CHECK(repeats >= 0, "repeat_interleave", "repeats can not be negative, got " << repeats);
  Tensor v = dim ? atleast_1d(x) : x.reshape({-1});
  int64_t d = dim ? wrap_dim(*dim, v.dim(), "repeat_interleave") : 0;
  Tensor u = v.unsqueeze(d + 1);
  Shape s = u.shape();
  s[static_cast<size_t>(d + 1)] = repeats;
  return detail::as_op("repeat_interleave", [&] { return u.expand(s).clone().flatten(d, d + 1); });
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  const char* api = "repeat_interleave";
  detail::check_defined(api, x);
  detail::check_defined(api, repeats);
  KILN_CHECK(is_integral(repeats.dtype()), api,
             "repeats must be an integer tensor, got " << dtype_name(repeats.dtype()));
  KILN_CHECK(repeats.dim() <= 1, api, "repeats must be 0-d or 1-d, got shape " << repeats.shape());
  KILN_CHECK(repeats.device().backend()->has_data(), api,
             "needs the values of repeats, which the " << repeats.device().str() << " device does not hold");
  Tensor v = dim ? atleast_1d(x) : x.reshape({-1});
  int64_t d = dim ? wrap_dim(*dim, v.dim(), api) : 0;
  int64_t n = v.size(d);
  if (repeats.numel() == 1) return repeat_interleave(x, repeats.item<int64_t>(), dim);
  KILN_CHECK(repeats.numel() == n, api,
             "repeats must have the same size as input along dim "
                 << d << ", but got repeats of shape " << repeats.shape() << " and input of shape " << v.shape());
  // Row i of v along d appears r[i] times: gather the rows by a host-built index.
  std::vector<int64_t> r = repeats.to_vector<int64_t>();
  std::vector<int64_t> idx;
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t ri = r[static_cast<size_t>(i)];
    KILN_CHECK(ri >= 0, api, "repeats can not be negative, got " << ri);
    total = detail::checked_add(total, ri, api);
    detail::checked_nbytes({total}, DType::I64, api);
    idx.insert(idx.end(), static_cast<size_t>(ri), i);
  }
  Tensor index = from_blob_copy(idx.data(), {static_cast<int64_t>(idx.size())}, DType::I64, v.device());
  return index_select(v, d, index);
}

// ---- joining --------------------------------------------------------------------------------
namespace {
/// Throws "[api] ..." when the concatenation of ins along d would have more elements or bytes
/// than int64_t holds (the sizes are summed and multiplied in overflow-checked arithmetic).
void check_cat_size(const char* api, const std::vector<Tensor>& ins, int64_t d, DType dt) {
  int64_t total = 0;
  for (const Tensor& x : ins)
    KILN_CHECK(!__builtin_add_overflow(total, x.size(d), &total), api,
               "the result's size in dimension " << d << " overflows int64 (shapes " << shapes_of(ins) << ")");
  int64_t elems = static_cast<int64_t>(dtype_size(dt));
  for (int64_t j = 0; j < ins[0].dim(); ++j)
    KILN_CHECK(!__builtin_mul_overflow(elems, j == d ? total : ins[0].size(j), &elems), api,
               "the result would hold more bytes than int64 counts (shapes " << shapes_of(ins) << ")");
}
}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  const char* api = "cat";
  check_all_defined(api, xs);
  DType dt = xs[0].dtype();
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK(xs[i].dim() > 0, api,
               "zero-dimensional tensor (at position " << static_cast<long long>(i) << ") cannot be concatenated");
    KILN_CHECK(!promotion_refused(dt, xs[i].dtype()), api,
               "no dtype holds both " << dtype_name(dt).data() << " and " << dtype_name(xs[i].dtype()).data()
                                      << xs[i].shape() << " (at position " << static_cast<long long>(i)
                                      << "): cast one of them explicitly");
    dt = promote_types(dt, xs[i].dtype());
  }
  // PyTorch skips 1-d tensors of shape [0] (legacy empty tensors) whatever the other shapes.
  auto legacy_empty = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  const Tensor* ref = nullptr;
  for (const Tensor& x : xs)
    if (!legacy_empty(x)) {
      ref = &x;
      break;
    }
  if (ref == nullptr) return empty({0}, {.dtype = dt, .device = xs[0].device()});
  int64_t d = wrap_dim(dim, ref->dim(), api);
  std::vector<Tensor> ins;
  ins.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    if (legacy_empty(x)) continue;
    KILN_CHECK(x.dim() == ref->dim(), api,
               "tensors must have the same number of dimensions: got " << ref->dim() << " and " << x.dim()
                                                                       << " (shapes " << shapes_of(xs) << ")");
    for (int64_t j = 0; j < x.dim(); ++j)
      KILN_CHECK(j == d || x.size(j) == ref->size(j), api,
                 "sizes of tensors must match except in dimension "
                     << d << ". Expected size " << ref->size(j) << " but got size " << x.size(j)
                     << " for tensor number " << static_cast<long long>(i) << " in the list (shapes " << shapes_of(xs)
                     << ")");
    ins.push_back(detail::cast_if_needed(x, dt));
  }
  check_cat_size(api, ins, d, dt);
  ir::Op op = make_op(OpKind::Cat);
  ir::ScanAttrs{.dim = d}.encode(op);
  return detail::run(api, op, xs[0].device(), ins)[0];
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) { return cat(xs, dim); }

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  check_all_defined("stack", xs);
  for (size_t i = 1; i < xs.size(); ++i)
    KILN_CHECK(xs[i].shape() == xs[0].shape(), "stack",
               "expects each tensor to be equal size, but got " << xs[0].shape() << " at entry 0 and " << xs[i].shape()
                                                                << " at entry " << static_cast<long long>(i));
  int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  u.reserve(xs.size());
  for (const Tensor& x : xs) u.push_back(x.unsqueeze(d));
  return detail::as_op("stack", [&] { return cat(u, d); });
}

Tensor hstack(const std::vector<Tensor>& xs) {
  check_all_defined("hstack", xs);
  std::vector<Tensor> u;
  for (const Tensor& x : xs) u.push_back(atleast_1d(x));
  return cat(u, u[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& xs) {
  check_all_defined("vstack", xs);
  std::vector<Tensor> u;
  for (const Tensor& x : xs) u.push_back(atleast_2d(x));
  return cat(u, 0);
}

// ---- splitting ------------------------------------------------------------------------------
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  detail::check_defined("split", x);
  KILN_CHECK(x.dim() > 0, "split", "expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t n = x.size(d);
  KILN_CHECK(split_size >= 0, "split", "split_size must be non-negative, got " << split_size);
  KILN_CHECK(split_size > 0 || n == 0, "split",
             "split_size can only be 0 if dimension size is 0, but got dimension size of " << n << " (shape "
                                                                                           << x.shape() << ")");
  int64_t count = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t start = i * split_size;
    out.push_back(x.narrow(d, start, std::min(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  detail::check_defined("split", x);
  KILN_CHECK(x.dim() > 0, "split", "expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (auto s : sizes) {
    KILN_CHECK(s >= 0, "split", "split sizes must be non-negative, got " << s);
    total += s;
  }
  KILN_CHECK(total == x.size(d), "split",
             "split sizes must sum exactly to " << x.size(d) << " (the size of dim " << d << " of shape " << x.shape()
                                                << "), but they sum to " << total);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (auto s : sizes) {
    out.push_back(x.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  detail::check_defined("chunk", x);
  KILN_CHECK(x.dim() > 0, "chunk", "expects at least a 1-dimensional tensor");
  KILN_CHECK(chunks > 0, "chunk", "expects `chunks` to be greater than 0, got " << chunks);
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.size(d);
  int64_t size = (n + chunks - 1) / chunks;
  if (n == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  return split(x, size, d);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  detail::check_defined("unbind", x);
  KILN_CHECK(x.dim() > 0, "unbind", "dimension specified as " << dim << " but tensor has no dimensions");
  int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(x.select(d, i));
  return out;
}

// ---- flips and rolls ------------------------------------------------------------------------
Tensor flip(const Tensor& x, const Dims& dims) {
  detail::check_defined("flip", x);
  return x.flip(dims);
}
Tensor fliplr(const Tensor& x) {
  detail::check_defined("fliplr", x);
  KILN_CHECK(x.dim() >= 2, "fliplr", "input must be >= 2-d, got shape " << x.shape());
  return x.flip({1});
}
Tensor flipud(const Tensor& x) {
  detail::check_defined("flipud", x);
  KILN_CHECK(x.dim() >= 1, "flipud", "input must be >= 1-d, got shape " << x.shape());
  return x.flip({0});
}

Tensor roll(const Tensor& x, const Shape& shifts, const Dims& dims) {
  detail::check_defined("roll", x);
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, "roll", "without dims, shifts must have one element, got " << to_string(shifts));
    return roll1(x.reshape({-1}), shifts[0], 0).view(x.shape());
  }
  KILN_CHECK(shifts.size() == dims.size(), "roll",
             "shifts and dims must align, got shifts " << to_string(shifts) << " and dims " << to_string(dims));
  KILN_CHECK(x.dim() > 0, "roll", "cannot roll a 0-d tensor along a dim");
  Tensor r = x;
  for (size_t i = 0; i < dims.size(); ++i) r = roll1(r, shifts[i], dims[i]);
  return r;
}

// ---- padding --------------------------------------------------------------------------------
Tensor pad(const Tensor& x, const Shape& pads, const std::string& mode, double value) {
  const char* api = "pad";
  detail::check_defined(api, x);
  int64_t m = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "replicate" ? 2 : mode == "circular" ? 3 : -1;
  KILN_CHECK(m >= 0, api, "unknown padding mode '" << mode << "'; expected constant, reflect, replicate or circular");
  KILN_CHECK(pads.size() % 2 == 0, api, "padding length must be divisible by 2, got " << to_string(pads));
  KILN_CHECK(static_cast<int64_t>(pads.size() / 2) <= x.dim(), api,
             "padding " << to_string(pads) << " pads more dims than the input of shape " << x.shape() << " has");
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(i);
    int64_t n = x.size(d), lo = pads[2 * i], hi = pads[2 * i + 1];
    if (m == 0) {
      KILN_CHECK(detail::checked_add(detail::checked_add(n, lo, api), hi, api) >= 0, api,
                 "padding (" << lo << ", " << hi << ") makes dim " << d << " of input " << x.shape() << " negative");
      continue;
    }
    KILN_CHECK(lo >= 0 && hi >= 0, api,
               "negative padding (" << lo << ", " << hi << ") is only supported in constant mode, not " << mode);
    if (lo == 0 && hi == 0) continue;
    KILN_CHECK(n > 0, api, mode << " padding needs a non-empty dim " << d << ", got input " << x.shape());
    if (m == 1)
      KILN_CHECK(lo < n && hi < n, api,
                 "padding size should be less than the corresponding input dimension, but got padding ("
                     << lo << ", " << hi << ") at dimension " << d << " of input " << x.shape());
    if (m == 3)
      KILN_CHECK(lo <= n && hi <= n, api,
                 "padding (" << lo << ", " << hi << ") wraps around more than once at dimension " << d << " of input "
                             << x.shape());
  }
  ir::Op op = make_op(OpKind::Pad);
  ir::PadAttrs{.mode = m, .pads = Dims(pads.begin(), pads.end()), .value = value}.encode(op);
  return detail::run1(api, op, {x});
}

// ---- grids ----------------------------------------------------------------------------------
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing) {
  const char* api = "meshgrid";
  check_all_defined(api, xs);
  KILN_CHECK(indexing == "ij" || indexing == "xy", api, "indexing must be 'ij' or 'xy', got '" << indexing << "'");
  for (const Tensor& x : xs) {
    KILN_CHECK(x.dim() <= 1, api, "expected 0-d or 1-d tensors, got shape " << x.shape());
    KILN_CHECK(x.dtype() == xs[0].dtype(), api,
               "expects all tensors to have the same dtype, got " << dtype_name(xs[0].dtype()) << " and "
                                                                  << dtype_name(x.dtype()));
  }
  bool xy = indexing == "xy" && xs.size() >= 2;
  std::vector<Tensor> in = xs;
  if (xy) std::swap(in[0], in[1]);
  Shape s;
  for (const Tensor& x : in) s.push_back(x.numel());
  std::vector<Tensor> out;
  for (size_t i = 0; i < in.size(); ++i) {
    Shape v(in.size(), 1);
    v[i] = -1;
    out.push_back(in[i].reshape(v).expand(s));
  }
  if (xy) std::swap(out[0], out[1]);
  return out;
}

}  // namespace kiln
