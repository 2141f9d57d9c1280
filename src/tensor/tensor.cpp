// SPDX-License-Identifier: MIT OR Apache-2.0
// Tensor metadata, zero-copy views, copies and host transfer.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "autodiff/rules.h"
#include "core/checked.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_view;

TensorImpl& Tensor::impl() const {
  KILN_CHECK(impl_ != nullptr, "Tensor", "operation on an undefined tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[static_cast<size_t>(wrap_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[static_cast<size_t>(wrap_dim(d, dim(), "stride"))]; }
bool Tensor::is_contiguous() const { return detail::desc_of(*this).is_contiguous(); }
bool Tensor::is_same_storage(const Tensor& o) const { return impl().storage == o.impl().storage; }

void Tensor::check_one_element(const char* op) const {
  KILN_CHECK(numel() == 1, op, "expected a tensor with one element, got shape " << shape());
}

size_t Tensor::host_count(size_t elem_size) const {
  const int64_t n = numel();
  // No copy larger than the host's physical memory is attempted (an allocation that still
  // fails is caught where the vector is made).
  static const uint64_t host_bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{1} << 62;
  }();
  const uint64_t size = elem_size ? elem_size : 1;
  KILN_CHECK(static_cast<uint64_t>(n) <= host_bytes / size, "to_vector",
             "cannot copy " << n << " elements of shape " << shape() << " to the host: too many bytes (" << host_bytes
                            << " bytes of memory)");
  return static_cast<size_t>(n);
}

void Tensor::host_out_of_memory(size_t elem_size) const {
  KILN_CHECK(
      false, "to_vector",
      "out of memory: cannot allocate " << numel() << " x " << elem_size << " bytes on the host for shape " << shape());
}

// ---- copies ---------------------------------------------------------------------------------
Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  detail::OpScope scope("contiguous");  // names the op if the copy cannot be allocated
  return clone();
}

Tensor Tensor::clone() const {
  ir::Op op = detail::make_op(ir::OpKind::Copy);
  return detail::run1("clone", op, {*this});
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_defined("copy_", src);
  Tensor s = src;
  if (s.device() != device()) s = s.to(device());
  s = detail::cast_if_needed(s, dtype());
  Shape b = broadcast_shapes(s.shape(), shape(), "copy_");
  KILN_CHECK(b == shape(), "copy_", "source of shape " << src.shape() << " cannot be broadcast to " << shape());
  // Overlap between source and destination: copy the source first.
  if (s.is_same_storage(*this)) s = s.clone();
  ir::Op op = detail::make_op(ir::OpKind::Copy);
  detail::run_into("copy_", op, {s}, *this);
  return *this;
}

Tensor Tensor::to(DType t) const {
  check_dtype(t, "to");
  return detail::cast_if_needed(*this, t);
}
Tensor Tensor::to(const Device& d, DType t) const { return to(d).to(t); }

Tensor Tensor::to(const Device& d) const {
  if (d == device()) return *this;
  if (d.without_autodiff() == device().without_autodiff()) {
    // Same backend with or without the autodiff decorator: share the data, drop the tracking.
    auto impl = std::make_shared<TensorImpl>(this->impl());
    impl->autograd.reset();
    impl->device = d;
    return Tensor(std::move(impl));
  }
  Tensor out = detail::alloc(shape(), dtype(), d, "to");
  if (numel() == 0) return out;
  Tensor src = contiguous();
  size_t nbytes = static_cast<size_t>(numel()) * element_size();
  if (!device().backend()->has_data() || !d.backend()->has_data()) return out;
  const size_t off = static_cast<size_t>(src.storage_offset()) * element_size();
  // One copy where either side is host memory (the destination's write or the source's read
  // moves the bytes); two through a host buffer between two devices that are not.
  if (void* h = host_storage_data(src)) {
    d.backend()->write(*out.impl().storage, 0, static_cast<const char*>(h) + off, nbytes);
  } else if (void* h2 = host_storage_data(out)) {
    src.device().backend()->read(*src.impl().storage, off, h2, nbytes);
  } else {
    std::vector<uint8_t> host(nbytes);
    src.device().backend()->read(*src.impl().storage, off, host.data(), nbytes);
    d.backend()->write(*out.impl().storage, 0, host.data(), nbytes);
  }
  return out;
}

void Tensor::copy_to_host(void* dst, DType as) const {
  KILN_CHECK(device().backend()->has_data(), "to_vector",
             "the " << device().str() << " device holds no data; values can only be read on a computing device");
  if (numel() == 0) return;
  Tensor src = detail::cast_if_needed(*this, as).contiguous();
  device().backend()->read(*src.impl().storage, static_cast<size_t>(src.storage_offset()) * dtype_size(as), dst,
                           static_cast<size_t>(numel()) * dtype_size(as));
}

Scalar Tensor::item() const {
  check_one_element("item");
  if (is_floating(dtype())) return item<double>();
  if (dtype() == DType::Bool) return item<bool>();
  return item<int64_t>();
}

// ---- views ----------------------------------------------------------------------------------
namespace {
/// base + index * stride (an element offset), or kiln::Error("[op] ...") when it overflows.
int64_t view_offset(int64_t base, int64_t index, int64_t stride, const char* op) {
  return detail::checked_add(base, detail::checked_mul(index, stride, op), op);
}

Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t known = 1, infer = -1;  // known: product of the nonzero given sizes, overflow-checked
  bool zero = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer < 0, op, "only one dimension can be -1 in " << shape);
      infer = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(out[i] >= 0, op, "invalid size " << out[i] << " in " << shape);
      zero |= out[i] == 0;
      if (out[i] != 0 && __builtin_mul_overflow(known, out[i], &known)) [[unlikely]]
        KILN_CHECK(false, op, "shape " << shape << " has more elements than fit in int64");
    }
  }
  if (infer >= 0) {
    KILN_CHECK(!zero && numel % known == 0, op, "shape " << shape << " is invalid for input of size " << numel);
    out[static_cast<size_t>(infer)] = numel / known;
  } else {
    KILN_CHECK((zero ? 0 : known) == numel, op, "shape " << shape << " is invalid for input of size " << numel);
  }
  return out;
}

// Strides for viewing (shape, strides) as new_shape without a copy, if possible (PyTorch's rule:
// each chunk of old dims that is contiguous in memory may be re-split freely).
bool view_strides(const Shape& shape, const Strides& strides, const Shape& ns, Strides& out) {
  out = Strides(ns.size());
  if (shape_numel(shape) == 0 || shape.empty()) {
    out = contiguous_strides(ns);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(ns.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = static_cast<int64_t>(shape.size()) - 1; td >= 0; --td) {
    tensor_numel *= shape[static_cast<size_t>(td)];
    int64_t next;  // the stride that continues the chunk; one past int64 continues nothing
    const bool fits = !__builtin_mul_overflow(tensor_numel, chunk_base_stride, &next);
    if (td == 0 ||
        (shape[static_cast<size_t>(td - 1)] != 1 && (!fits || strides[static_cast<size_t>(td - 1)] != next))) {
      while (view_d >= 0 && (view_numel < tensor_numel || ns[static_cast<size_t>(view_d)] == 1)) {
        // A stride past int64 (huge strides of a view of few elements): no view, reshape copies.
        if (__builtin_mul_overflow(view_numel, chunk_base_stride, &out[static_cast<size_t>(view_d)])) return false;
        view_numel *= ns[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base_stride = strides[static_cast<size_t>(td - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

/// Records view v of base for autodiff when base tracks gradients (the view functions below
/// give how the view's gradient maps back to base's, written with differentiable ops).
template <class F>
Tensor tracked(const Tensor& base, Tensor v, const char* name, F&& backward) {
  if (autodiff::requires_grad(base) && grad_enabled()) autodiff::record_view(base, v, name, std::forward<F>(backward));
  return v;
}

/// Zero-pads g (the gradient of a narrow of base along dim w) back to base's shape.
Tensor unnarrow(const Tensor& g, const Shape& base, int64_t w, int64_t start) {
  Shape pads;
  for (int64_t d = static_cast<int64_t>(base.size()) - 1; d >= w; --d) {
    if (d == w) {
      pads.push_back(start);
      pads.push_back(base[static_cast<size_t>(w)] - start - g.size(w));
    } else {
      pads.push_back(0);
      pads.push_back(0);
    }
  }
  return pad(g, pads);
}

/// The gradient of an arbitrary view of a contiguous base: scatter-add g's elements to the
/// flat positions the view reads (positions repeated by stride 0 sum).
Tensor unview_contiguous(const Tensor& g, const Shape& base, const Shape& vs, const Strides& vst, int64_t rel_offset,
                         const char* name) {
  const int64_t n = shape_numel(base);
  Tensor pos = arange(n, DType::I64, g.device()).as_strided(vs, vst, rel_offset);
  Tensor flat = zeros({n}, TensorOptions{.dtype = g.dtype(), .device = g.device()});
  return index_add(flat, 0, pos.flatten(), g.flatten()).reshape(base);
}
}  // namespace

Tensor Tensor::view(const Shape& s) const {
  Shape ns = infer_size("view", s, numel());
  Strides st;
  KILN_CHECK(view_strides(shape(), strides(), ns, st), "view",
             "cannot view a tensor of shape " << shape() << " and strides " << strides() << " as " << ns
                                              << " without a copy; use reshape");
  Shape base = shape();
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "view"), "view",
                 [base](const Tensor& g) { return g.reshape(base); });
}

Tensor Tensor::reshape(const Shape& s) const {
  Shape ns = infer_size("reshape", s, numel());
  Strides st;
  if (view_strides(shape(), strides(), ns, st)) {
    Shape base = shape();
    return tracked(*this, make_view(*this, ns, st, storage_offset(), "reshape"), "reshape",
                   [base](const Tensor& g) { return g.reshape(base); });
  }
  return clone().view(ns);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  KILN_CHECK(s <= e, "flatten",
             "start_dim " << start_dim << " comes after end_dim " << end_dim << " for shape " << shape());
  Shape ns;
  for (int64_t i = 0; i < s; ++i) ns.push_back(shape()[static_cast<size_t>(i)]);
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= shape()[static_cast<size_t>(i)];
  ns.push_back(m);
  for (int64_t i = e + 1; i < dim(); ++i) ns.push_back(shape()[static_cast<size_t>(i)]);
  return reshape(ns);
}

Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const {
  int64_t w = wrap_dim(d, dim(), "unflatten");
  Shape inner = infer_size("unflatten", sizes, size(w));
  Shape ns;
  for (int64_t i = 0; i < w; ++i) ns.push_back(shape()[static_cast<size_t>(i)]);
  for (auto v : inner) ns.push_back(v);
  for (int64_t i = w + 1; i < dim(); ++i) ns.push_back(shape()[static_cast<size_t>(i)]);
  return reshape(ns);
}

Tensor Tensor::permute(const Dims& dims) const {
  KILN_CHECK(
      static_cast<int64_t>(dims.size()) == dim(), "permute",
      "number of dims " << static_cast<long long>(dims.size()) << " does not match the rank of shape " << shape());
  Shape ns(dims.size());
  Strides st(dims.size());
  SmallVec<bool, 8> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    KILN_CHECK(!seen[static_cast<size_t>(d)], "permute", "dim " << d << " repeated in " << to_string(dims));
    seen[static_cast<size_t>(d)] = true;
    ns[i] = shape()[static_cast<size_t>(d)];
    st[i] = strides()[static_cast<size_t>(d)];
  }
  if (!autodiff::requires_grad(*this)) return make_view(*this, ns, st, storage_offset(), "permute");
  Dims inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inv[static_cast<size_t>(wrap_dim(dims[i], dim(), "permute"))] = static_cast<int64_t>(i);
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "permute"), "permute",
                 [inv](const Tensor& g) { return g.permute(inv); });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) return *this;
  int64_t a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
  Shape ns = shape();
  Strides st = strides();
  std::swap(ns[static_cast<size_t>(a)], ns[static_cast<size_t>(b)]);
  std::swap(st[static_cast<size_t>(a)], st[static_cast<size_t>(b)]);
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "transpose"), "transpose",
                 [a, b](const Tensor& g) { return g.transpose(a, b); });
}

Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t", "expects a tensor with <= 2 dims, got shape " << shape());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::mT() const {
  KILN_CHECK(dim() >= 2, "mT", "expects a tensor with >= 2 dims, got shape " << shape());
  return transpose(-2, -1);
}

Tensor Tensor::movedim(const Dims& src, const Dims& dst) const {
  KILN_CHECK(src.size() == dst.size(), "movedim", "source and destination lists differ in length");
  int64_t n = dim();
  Dims perm(static_cast<size_t>(n), -1);
  SmallVec<bool, 8> used_src(static_cast<size_t>(n), false);
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t s = wrap_dim(src[i], n, "movedim"), d = wrap_dim(dst[i], n, "movedim");
    KILN_CHECK(perm[static_cast<size_t>(d)] == -1 && !used_src[static_cast<size_t>(s)], "movedim", "repeated dim");
    perm[static_cast<size_t>(d)] = s;
    used_src[static_cast<size_t>(s)] = true;
  }
  int64_t next = 0;
  for (auto& p : perm) {
    if (p != -1) continue;
    while (used_src[static_cast<size_t>(next)]) ++next;
    p = next++;
  }
  return permute(perm);
}

Tensor Tensor::squeeze() const {
  Shape ns;
  Strides st;
  for (int64_t i = 0; i < dim(); ++i)
    if (shape()[static_cast<size_t>(i)] != 1) {
      ns.push_back(shape()[static_cast<size_t>(i)]);
      st.push_back(strides()[static_cast<size_t>(i)]);
    }
  Shape base = shape();
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "squeeze"), "squeeze",
                 [base](const Tensor& g) { return g.reshape(base); });
}

Tensor Tensor::squeeze(const Dims& dims) const {
  if (dims.empty()) return squeeze();
  SmallVec<bool, 8> drop(static_cast<size_t>(dim()), false);
  for (auto d : dims) {
    if (dim() == 0) {
      wrap_dim(d, 0, "squeeze");
      continue;
    }
    int64_t w = wrap_dim(d, dim(), "squeeze");
    drop[static_cast<size_t>(w)] = shape()[static_cast<size_t>(w)] == 1;
  }
  Shape ns;
  Strides st;
  for (int64_t i = 0; i < dim(); ++i)
    if (!drop[static_cast<size_t>(i)]) {
      ns.push_back(shape()[static_cast<size_t>(i)]);
      st.push_back(strides()[static_cast<size_t>(i)]);
    }
  Shape base = shape();
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "squeeze"), "squeeze",
                 [base](const Tensor& g) { return g.reshape(base); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  int64_t w = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape ns = shape();
  Strides st = strides();
  int64_t s = w < dim() ? detail::checked_mul(st[static_cast<size_t>(w)], ns[static_cast<size_t>(w)], "unsqueeze") : 1;
  ns.insert(static_cast<size_t>(w), 1);
  st.insert(static_cast<size_t>(w), s);
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "unsqueeze"), "unsqueeze",
                 [w](const Tensor& g) { return g.squeeze(Dims{w}); });
}

Tensor Tensor::expand(const Shape& s) const {
  KILN_CHECK(
      s.size() >= shape().size(), "expand",
      "the number of sizes (" << static_cast<long long>(s.size()) << ") must be >= the rank of shape " << shape());
  size_t lead = s.size() - shape().size();
  Shape ns(s.size());
  Strides st(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(s[i] >= 0, "expand", "size " << s[i] << " is invalid for a new leading dim in " << s);
      ns[i] = s[i];
      st[i] = 0;
      continue;
    }
    int64_t have = shape()[i - lead];
    int64_t want = s[i] == -1 ? have : s[i];
    KILN_CHECK(want == have || have == 1, "expand",
               "cannot expand shape " << shape() << " to " << s << " (dim " << static_cast<long long>(i) << ")");
    ns[i] = want;
    st[i] = (want == have) ? strides()[i - lead] : 0;
  }
  Shape base = shape();
  return tracked(*this, make_view(*this, ns, st, storage_offset(), "expand"), "expand",
                 [base](const Tensor& g) { return autodiff::sum_to(g, base); });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  KILN_CHECK(dim() > 0, "narrow", "cannot narrow a 0-d tensor");
  int64_t w = wrap_dim(d, dim(), "narrow");
  int64_t n = shape()[static_cast<size_t>(w)];
  if (start < 0) start += n;
  KILN_CHECK(
      start >= 0 && length >= 0 && start <= n && length <= n - start, "narrow",
      "start " << start << " and length " << length << " are out of range for dim " << w << " of shape " << shape());
  Shape ns = shape();
  ns[static_cast<size_t>(w)] = length;
  Shape base = shape();
  const int64_t off = view_offset(storage_offset(), start, strides()[static_cast<size_t>(w)], "narrow");
  return tracked(*this, make_view(*this, ns, strides(), off, "narrow"), "narrow",
                 [base, w, start](const Tensor& g) { return unnarrow(g, base, w, start); });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) const {
  KILN_CHECK(dim() > 0, "slice", "cannot slice a 0-d tensor");
  KILN_CHECK(step > 0, "slice", "step must be positive, got " << step);
  int64_t w = wrap_dim(d, dim(), "slice");
  int64_t n = shape()[static_cast<size_t>(w)];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t b = start ? clampi(*start) : 0;
  int64_t e = stop ? clampi(*stop) : n;
  int64_t len = e > b ? (e - b - 1) / step + 1 : 0;  // no overflow for any step
  Shape ns = shape();
  Strides st = strides();
  ns[static_cast<size_t>(w)] = len;
  int64_t off = view_offset(storage_offset(), b, st[static_cast<size_t>(w)], "slice");
  int64_t& sw = st[static_cast<size_t>(w)];
  if (__builtin_mul_overflow(sw, step, &sw)) [[unlikely]]  // harmless when at most one element is taken
    sw = len <= 1 ? strides()[static_cast<size_t>(w)]
                  : detail::checked_mul(strides()[static_cast<size_t>(w)], step, "slice");
  Shape base = shape();
  return tracked(*this, make_view(*this, ns, st, off, "slice"), "slice", [base, w, b, step](const Tensor& g) {
    if (step == 1) return unnarrow(g, base, w, b);
    Tensor idx = arange(b, b + g.size(w) * step, step, DType::I64, g.device());
    return kiln::index_copy(zeros(base, TensorOptions{.dtype = g.dtype(), .device = g.device()}), w, idx, g);
  });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  KILN_CHECK(dim() > 0, "select", "cannot select from a 0-d tensor");
  int64_t w = wrap_dim(d, dim(), "select");
  int64_t n = shape()[static_cast<size_t>(w)];
  KILN_CHECK(index >= -n && index < n, "select",
             "index " << index << " is out of range for dim " << w << " of shape " << shape());
  if (index < 0) index += n;
  Shape ns = shape();
  Strides st = strides();
  int64_t off = view_offset(storage_offset(), index, st[static_cast<size_t>(w)], "select");
  ns.erase(static_cast<size_t>(w));
  st.erase(static_cast<size_t>(w));
  Shape base = shape();
  return tracked(*this, make_view(*this, ns, st, off, "select"), "select",
                 [base, w, index](const Tensor& g) { return unnarrow(g.unsqueeze(w), base, w, index); });
}

Tensor Tensor::flip(const Dims& dims) const {
  Dims nd = detail::normalize_dims("flip", dims, dim());
  if (dims.empty()) nd.clear();
  Strides st = strides();
  int64_t off = storage_offset();
  for (auto d : nd) {
    int64_t n = shape()[static_cast<size_t>(d)];
    if (n > 0) off = view_offset(off, n - 1, st[static_cast<size_t>(d)], "flip");
    st[static_cast<size_t>(d)] = -st[static_cast<size_t>(d)];
  }
  return tracked(*this, make_view(*this, shape(), st, off, "flip"), "flip",
                 [nd](const Tensor& g) { return g.flip(nd); });
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  KILN_CHECK(dim() >= 2, "diagonal", "expects a tensor with >= 2 dims, got shape " << shape());
  int64_t a = wrap_dim(dim1, dim(), "diagonal"), b = wrap_dim(dim2, dim(), "diagonal");
  KILN_CHECK(a != b, "diagonal", "dim1 and dim2 must differ, both are " << a);
  int64_t na = shape()[static_cast<size_t>(a)], nb = shape()[static_cast<size_t>(b)];
  int64_t len =
      offset >= 0 ? std::max<int64_t>(0, std::min(na, nb - offset)) : std::max<int64_t>(0, std::min(na + offset, nb));
  int64_t off = storage_offset();
  if (len > 0)
    off = offset >= 0 ? view_offset(off, offset, strides()[static_cast<size_t>(b)], "diagonal")
                      : view_offset(off, -offset, strides()[static_cast<size_t>(a)], "diagonal");
  Shape ns;
  Strides st;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != a && i != b) {
      ns.push_back(shape()[static_cast<size_t>(i)]);
      st.push_back(strides()[static_cast<size_t>(i)]);
    }
  ns.push_back(len);
  st.push_back(detail::checked_add(strides()[static_cast<size_t>(a)], strides()[static_cast<size_t>(b)], "diagonal"));
  if (!autodiff::requires_grad(*this)) return make_view(*this, ns, st, off, "diagonal");
  Shape base = shape();
  Strides cst = contiguous_strides(base);
  Strides vst;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != a && i != b) vst.push_back(cst[static_cast<size_t>(i)]);
  vst.push_back(cst[static_cast<size_t>(a)] + cst[static_cast<size_t>(b)]);
  int64_t rel =
      len > 0 ? (offset >= 0 ? offset * cst[static_cast<size_t>(b)] : -offset * cst[static_cast<size_t>(a)]) : 0;
  return tracked(*this, make_view(*this, ns, st, off, "diagonal"), "diagonal", [base, ns, vst, rel](const Tensor& g) {
    return unview_contiguous(g, base, ns, vst, rel, "diagonal");
  });
}

Tensor Tensor::as_strided(const Shape& s, const Strides& st, int64_t offset) const {
  KILN_CHECK(s.size() == st.size(), "as_strided", "shape " << s << " and strides " << st << " differ in rank");
  // make_view checks that the view stays inside the storage (Note [Checked sizes]).
  if (!autodiff::requires_grad(*this)) return make_view(*this, s, st, offset, "as_strided");
  KILN_CHECK(is_contiguous(), "as_strided",
             "gradients of as_strided are supported for contiguous inputs only, got shape "
                 << shape() << " and strides " << strides() << "; call contiguous() first");
  Shape base = shape();
  int64_t rel = offset - storage_offset();
  return tracked(*this, make_view(*this, s, st, offset, "as_strided"), "as_strided",
                 [base, s, st, rel](const Tensor& g) { return unview_contiguous(g, base, s, st, rel, "as_strided"); });
}

}  // namespace kiln
