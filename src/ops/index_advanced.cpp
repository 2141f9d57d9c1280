// SPDX-License-Identifier: MIT OR Apache-2.0
// NumPy/PyTorch indexing: Tensor::index, Tensor::index_put_ and index_put.
//
// Note [Indexing plan]: entries are applied left to right. Integers select (and drop) a dim,
// slices narrow one, None inserts a size-1 dim, Ellipsis skips the dims no entry names. These
// "basic" entries only make a view. Index tensors ("advanced" entries; a bool mask of rank k
// becomes k integer tensors via nonzero) are broadcast together to a shape B. When their dims
// are adjacent, B replaces them in place; otherwise B goes first (PyTorch's rule; integers are
// basic here, as in PyTorch, so x[0, :, idx] puts B last). Advanced entries are computed by
// permuting the indexed dims to the front, flattening them, and using one linear index with
// IndexSelect (read) or IndexCopy / IndexAdd (write).
//
// Note [Differentiable index_put_]: a write through an index into a tensor that autodiff tracks
// (or of a value it tracks) is recorded as one custom node from (x's previous value, the values)
// to x's new value: x's gradient is the incoming one with the written positions zeroed, the
// values' is the incoming one read at those positions. x's storage is updated in place as usual
// and x's handle is rebound to the node (its autograd meta replaced), like PyTorch's CopySlices.
// The node keeps only the written positions (i64), so repeated writes into x stay valid. Leaves
// that require grad and views of tracked tensors are refused (their base would not see the write).
#include <algorithm>
#include <string>

#include "autodiff/graph.h"
#include "ops/dispatch.h"

namespace kiln {

namespace detail {
// Shared with index.cpp.
Tensor index_as_i64(const char* api, const Tensor& idx);
Tensor run_index(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs, int64_t dim_from, int64_t dim_to);
Tensor index_select_as(const char* api, const Tensor& x, int64_t dim, const Tensor& index, bool wrap);
Tensor wrap_indices(const char* api, const Tensor& idx, int64_t n, int64_t dim_label);
Tensor index_update_as(const char* api, ir::OpKind kind, const Tensor& x, int64_t dim, const Tensor& index,
                       const Tensor& src, double alpha, bool wrap);
void require_data(const char* api, const Tensor& t);
}  // namespace detail

namespace {

using detail::check_defined;

/// One advanced entry: an integer index tensor (not yet wrapped) for dim `dim` of the view.
struct AdvEntry {
  int64_t dim;
  Tensor index;
};

struct Parsed {
  Tensor view;
  std::vector<AdvEntry> adv;
};

bool is_mask(const Tensor& t) { return t.dtype() == DType::Bool || t.dtype() == DType::U8; }

/// Applies the basic entries to x, collecting the advanced ones (Note [Indexing plan]).
Parsed parse(const char* api, const Tensor& x, const std::vector<TensorIndex>& idx) {
  check_defined(api, x);
  int64_t consumed = 0, ellipses = 0;
  for (const auto& e : idx) {
    switch (e.kind()) {
      case TensorIndex::Kind::Int:
      case TensorIndex::Kind::Slice:
        ++consumed;
        break;
      case TensorIndex::Kind::Tensor: {
        const Tensor& t = e.tensor();
        check_defined(api, t);
        KILN_CHECK(is_integral(t.dtype(), true), api,
                   "tensors used as indices must be integer or bool, got " << dtype_name(t.dtype()).data()
                                                                           << " of shape " << t.shape());
        consumed += is_mask(t) ? t.dim() : 1;
        break;
      }
      case TensorIndex::Kind::Ellipsis:
        ++ellipses;
        break;
      case TensorIndex::Kind::None:
        break;
    }
  }
  KILN_CHECK(ellipses <= 1, api, "an index can only have a single ellipsis");
  KILN_CHECK(consumed <= x.dim(), api,
             "too many indices for a tensor of shape " << x.shape() << ": " << consumed << " dims indexed");
  Parsed p{x, {}};
  int64_t d = 0;
  for (const auto& e : idx) {
    Tensor& v = p.view;
    switch (e.kind()) {
      case TensorIndex::Kind::Int: {
        int64_t n = v.size(d), i = e.integer();
        KILN_CHECK(i >= -n && i < n, api,
                   "index " << i << " is out of range for dim " << d << " with size " << n << " (view shape "
                            << v.shape() << ")");
        v = v.select(d, i);
        break;
      }
      case TensorIndex::Kind::Slice: {
        const Slice& s = e.slice();
        KILN_CHECK(s.step > 0, api, "slice step must be positive, got " << s.step);
        v = v.slice(d, s.start, s.stop, s.step);
        ++d;
        break;
      }
      case TensorIndex::Kind::None:
        v = v.unsqueeze(d);
        ++d;
        break;
      case TensorIndex::Kind::Ellipsis:
        d += x.dim() - consumed;
        break;
      case TensorIndex::Kind::Tensor: {
        const Tensor& t = e.tensor();
        detail::check_same_device(api, x, t);
        if (!is_mask(t)) {
          p.adv.push_back({d, detail::index_as_i64(api, t)});
          ++d;
        } else if (t.dim() == 0) {
          // x[True] adds a dim of size 1, x[False] one of size 0 (an advanced index on a new dim).
          detail::require_data(api, t);
          bool on = t.item<bool>();
          v = v.unsqueeze(d);
          p.adv.push_back({d, on ? zeros({1}, {.dtype = DType::I64, .device = t.device()})
                                 : zeros({0}, {.dtype = DType::I64, .device = t.device()})});
          ++d;
        } else {
          for (int64_t k = 0; k < t.dim(); ++k)
            KILN_CHECK(t.size(k) == v.size(d + k), api,
                       "the shape of the mask " << t.shape() << " does not match the indexed dims " << d << ".."
                                                << d + t.dim() - 1 << " of shape " << v.shape());
          detail::require_data(api, t);
          for (Tensor& c : nonzero_tuple(t.to(DType::Bool))) p.adv.push_back({d++, c});
        }
        break;
      }
    }
  }
  return p;
}

/// Where the advanced dims go: see Note [Indexing plan].
struct Plan {
  Shape B;          // broadcast shape of the index tensors
  bool adjacent;    // advanced dims consecutive: B replaces them in place
  int64_t first;    // the first advanced dim
  Dims perm;        // advanced dims first, then the others in order
  Shape adv_sizes;  // sizes of the advanced dims
  Shape others;     // sizes of the other dims
  Shape result;     // shape of the indexing result
};

Plan make_plan(const char* api, const Tensor& v, const std::vector<AdvEntry>& adv) {
  Plan p;
  for (const auto& e : adv) p.B = broadcast_shapes(p.B, e.index.shape(), api);
  p.first = adv.front().dim;
  p.adjacent = adv.back().dim - adv.front().dim == static_cast<int64_t>(adv.size()) - 1;
  std::vector<bool> is_adv(static_cast<size_t>(v.dim()), false);
  for (const auto& e : adv) {
    is_adv[static_cast<size_t>(e.dim)] = true;
    p.perm.push_back(e.dim);
    p.adv_sizes.push_back(v.size(e.dim));
  }
  for (int64_t k = 0; k < v.dim(); ++k)
    if (!is_adv[static_cast<size_t>(k)]) {
      p.perm.push_back(k);
      p.others.push_back(v.size(k));
    }
  int64_t at = p.adjacent ? p.first : 0;
  for (int64_t k = 0; k < at; ++k) p.result.push_back(p.others[static_cast<size_t>(k)]);
  for (auto b : p.B) p.result.push_back(b);
  for (size_t k = static_cast<size_t>(at); k < p.others.size(); ++k) p.result.push_back(p.others[k]);
  return p;
}

/// The linear index into the flattened advanced dims, broadcast to B (validated, wrapped).
Tensor linear_index(const char* api, const Tensor& v, const std::vector<AdvEntry>& adv, const Plan& p) {
  Tensor lin;
  int64_t mult = 1;
  for (size_t k = adv.size(); k-- > 0;) {
    int64_t n = v.size(adv[k].dim);
    Tensor w = detail::wrap_indices(api, adv[k].index, n, adv[k].dim).reshape(adv[k].index.shape());
    Tensor term = mult == 1 ? w : w * mult;
    lin = lin.defined() ? term + lin : term;
    mult *= n;
  }
  return lin.expand(p.B);
}

/// Permutation moving the first nb dims (B) of a [B..., others...] tensor to position `at`.
Dims place_b(int64_t nb, int64_t nothers, int64_t at) {
  Dims d;
  for (int64_t k = 0; k < at; ++k) d.push_back(nb + k);
  for (int64_t k = 0; k < nb; ++k) d.push_back(k);
  for (int64_t k = at; k < nothers; ++k) d.push_back(nb + k);
  return d;
}

/// The view v with flattened advanced dims first: [prod(adv_sizes), others...].
Tensor front_flat(const Tensor& v, const Plan& p) {
  Shape s{shape_numel(p.adv_sizes)};
  for (auto o : p.others) s.push_back(o);
  return v.permute(p.perm).reshape(s);
}

Shape with_front(int64_t n, const Shape& rest) {
  Shape s{n};
  for (auto r : rest) s.push_back(r);
  return s;
}

Tensor gather_advanced(const char* api, const Tensor& v, const std::vector<AdvEntry>& adv) {
  Plan p = make_plan(api, v, adv);
  if (adv.size() == 1) {
    const AdvEntry& e = adv[0];
    Tensor r = detail::index_select_as(api, v, e.dim, e.index.reshape({-1}), true);
    return r.reshape(p.result);
  }
  Tensor lin = linear_index(api, v, adv, p);
  Tensor r = detail::index_select_as(api, front_flat(v, p), 0, lin.reshape({-1}), false);
  Shape bs = p.B;
  for (auto o : p.others) bs.push_back(o);
  r = r.reshape(bs);
  if (!p.adjacent || p.first == 0) return r;
  int64_t nb = static_cast<int64_t>(p.B.size()), no = static_cast<int64_t>(p.others.size());
  return r.permute(place_b(nb, no, p.first)).contiguous();
}

/// Drops leading size-1 dims of values beyond the target rank (as PyTorch's setitem does) and
/// checks that it broadcasts to shape.
Tensor fit_values(const char* api, const Tensor& values, const Shape& shape) {
  Tensor v = values;
  while (v.dim() > static_cast<int64_t>(shape.size()) && v.size(0) == 1) v = v.squeeze({0});
  bool ok = v.dim() <= static_cast<int64_t>(shape.size());
  for (int64_t k = 1; ok && k <= v.dim(); ++k) {
    int64_t a = v.size(-k), b = shape[shape.size() - static_cast<size_t>(k)];
    ok = a == b || a == 1;
  }
  KILN_CHECK(ok, api,
             "values of shape " << values.shape() << " cannot be broadcast to the indexing result of shape " << shape);
  return v.expand(shape);
}

/// A copy of the view v (contiguous) with values (broadcast to the indexing result) written or
/// added at the advanced positions.
Tensor put_advanced(const char* api, const Tensor& v, const std::vector<AdvEntry>& adv, const Tensor& values,
                    bool accumulate) {
  Plan p = make_plan(api, v, adv);
  Tensor vals = fit_values(api, values, p.result);
  ir::OpKind kind = accumulate ? ir::OpKind::IndexAdd : ir::OpKind::IndexCopy;
  if (adv.size() == 1) {
    const AdvEntry& e = adv[0];
    Shape s = v.shape();
    s[static_cast<size_t>(e.dim)] = e.index.numel();
    return detail::index_update_as(api, kind, v, e.dim, e.index.reshape({-1}), vals.reshape(s), 1.0, true);
  }
  Tensor lin = linear_index(api, v, adv, p);
  int64_t nb = static_cast<int64_t>(p.B.size()), no = static_cast<int64_t>(p.others.size());
  if (p.adjacent && p.first != 0) {
    // Inverse of place_b: bring B to the front.
    Dims fwd = place_b(nb, no, p.first), inv(fwd.size());
    for (size_t k = 0; k < fwd.size(); ++k) inv[static_cast<size_t>(fwd[k])] = static_cast<int64_t>(k);
    vals = vals.permute(inv);
  }
  vals = vals.reshape(with_front(shape_numel(p.B), p.others));
  Tensor r = detail::index_update_as(api, kind, front_flat(v, p), 0, lin.reshape({-1}), vals, 1.0, false);
  Shape full = p.adv_sizes;
  for (auto o : p.others) full.push_back(o);
  Dims inv(p.perm.size());
  for (size_t k = 0; k < p.perm.size(); ++k) inv[static_cast<size_t>(p.perm[k])] = static_cast<int64_t>(k);
  return r.reshape(full).permute(inv).contiguous();
}

/// index_put_ when autodiff tracks x or the value (Note [Differentiable index_put_]).
void tracked_put(const char* api, Tensor& x, const std::vector<TensorIndex>& idx, const Tensor& value) {
  const auto& m = x.impl().autograd;
  KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), api,
             "a leaf tensor that requires grad is used in an in-place operation; wrap the update in a "
             "kiln::NoGradGuard, or write into a copy (clone()) or a tensor made by an op");
  KILN_CHECK(!(m && m->is_view), api,
             "in-place writes into a view of a tensor that requires grad are not supported; index the base tensor "
             "instead, or build the result out of place (index_put, where, cat)");
  // The row-major positions in x of the elements the index writes, shaped like the indexing result.
  Tensor flat;
  Shape vs;
  {
    NoGradGuard no_grad;
    Tensor all = arange(x.numel(), DType::I64, x.device()).reshape(x.shape());
    Parsed p = parse(api, all, idx);
    Tensor pos = p.adv.empty() ? p.view : gather_advanced(api, p.view, p.adv);
    vs = pos.shape();
    flat = pos.reshape({-1});
    if (flat.is_same_storage(all)) flat = flat.clone();  // keep only the written positions
  }
  Tensor vals = fit_values(api, value, vs);
  // The write itself, untracked.
  {
    NoGradGuard no_grad;
    Parsed p = parse(api, x, idx);
    if (p.adv.empty())
      p.view.copy_(vals);
    else
      p.view.copy_(put_advanced(api, p.view, p.adv, vals, false));
  }
  // The node: x's old value and vals in, x's new value out. It keeps only the positions, so later
  // writes into x (or into the value) leave it valid.
  Shape xs = x.shape();
  auto out = std::make_shared<TensorImpl>(x.impl());
  out->autograd.reset();
  std::vector<Tensor> outs{Tensor(out)};
  autodiff::record_custom(
      "index_put_", {x, vals}, outs,
      [flat, xs, vs](const autodiff::GradContext& c) -> std::vector<Tensor> {
        Tensor g = c.grads[0].reshape({-1});
        return {c.needs(0) ? index_fill(g, 0, flat, Scalar(0)).reshape(xs) : Tensor(),
                c.needs(1) ? index_select(g, 0, flat).reshape(vs) : Tensor()};
      },
      /*save_inputs=*/false);
  if (outs[0].impl().autograd) x.impl().autograd = outs[0].impl().autograd;
}

}  // namespace

Tensor Tensor::index(std::initializer_list<TensorIndex> idx) const {
  return index(std::vector<TensorIndex>(idx.begin(), idx.end()));
}

Tensor Tensor::index(const std::vector<TensorIndex>& idx) const {
  Parsed p = parse("index", *this, idx);
  if (p.adv.empty()) return p.view;
  return gather_advanced("index", p.view, p.adv);
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& idx, const Tensor& value) {
  const char* api = "index_put_";
  check_defined(api, value);
  detail::check_same_device(api, *this, value);
  Tensor v = detail::cast_if_needed(value, dtype());
  if (grad_enabled() && (autodiff::requires_grad(*this) || autodiff::requires_grad(v))) {
    tracked_put(api, *this, idx, v);
    return *this;
  }
  Parsed p = parse(api, *this, idx);
  if (p.adv.empty()) {
    p.view.copy_(fit_values(api, v, p.view.shape()));
    return *this;
  }
  p.view.copy_(put_advanced(api, p.view, p.adv, v, false));
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& idx, Scalar value) {
  check_defined("index_put_", *this);
  return index_put_(idx, scalar_tensor(value, dtype(), device()));
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const char* api = "index_put";
  check_defined(api, x);
  check_defined(api, values);
  detail::check_same_device(api, x, values);
  KILN_CHECK(values.dtype() == x.dtype(), api,
             "values dtype " << dtype_name(values.dtype()).data() << " must equal the input's "
                             << dtype_name(x.dtype()).data());
  std::vector<TensorIndex> idx;
  for (const Tensor& t : indices) idx.push_back(t.defined() ? TensorIndex(t) : TensorIndex(Slice{}));
  Parsed p = parse(api, x, idx);
  if (p.adv.empty()) {
    Tensor v = fit_values(api, values, x.shape());
    return accumulate ? x + v : v.clone();
  }
  return put_advanced(api, p.view, p.adv, values, accumulate);
}

}  // namespace kiln
