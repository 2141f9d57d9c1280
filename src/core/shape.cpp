// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/shape.h"

#include <algorithm>
#include <limits>

#include "core/checked.h"
#include "kiln/error.h"

namespace kiln {

namespace detail {

void throw_overflow(const char* op, int64_t a, char sym, int64_t b) {
  MsgBuilder m;
  m << "[" << op << "] integer overflow: " << static_cast<long long>(a) << ' ' << sym << ' '
    << static_cast<long long>(b) << " does not fit in int64 (a size, offset or stride is too large)";
  throw_error(m.str());
}

int64_t checked_numel(const Shape& s, const char* op) {
  int64_t n = 1;
  bool zero = false;
  for (auto d : s) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(n, d, &n)) [[unlikely]]
      KILN_CHECK(false, op ? op : OpScope::current("numel"), "shape " << s << " has more elements than fit in int64");
  }
  return zero ? 0 : n;
}

size_t checked_nbytes(const Shape& s, DType dtype, const char* op) {
  check_dtype(dtype, op);
  for (auto d : s) KILN_CHECK(d >= 0, op, "negative size in shape " << s);
  const int64_t n = checked_numel(s, op);
  int64_t bytes;
  KILN_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes), op,
             "shape " << s << " of dtype " << dtype_name(dtype) << " needs more than INT64_MAX bytes (" << n
                      << " elements of " << static_cast<long long>(dtype_size(dtype)) << " bytes)");
  return static_cast<size_t>(bytes);
}

void check_view_in_storage(const Shape& shape, const Strides& strides, int64_t offset, DType dtype,
                           size_t storage_nbytes, const char* op) {
  KILN_CHECK(shape.size() == strides.size(), op, "shape " << shape << " and strides " << strides << " differ in rank");
  bool empty = false;
  for (auto d : shape) {
    KILN_CHECK(d >= 0, op, "negative size in shape " << shape);
    empty |= d == 0;
  }
  checked_numel(shape, op);  // a view's numel (and contiguous strides) must be representable too
  // lo / hi: the nearest and furthest element reachable, in elements from the storage's start.
  int64_t lo = offset, hi = offset;
  bool ok = offset >= 0;
  for (size_t i = 0; i < shape.size() && ok && !empty; ++i) {
    int64_t ext;
    ok = !__builtin_mul_overflow(strides[i], shape[i] - 1, &ext) &&
         !__builtin_add_overflow(ext < 0 ? lo : hi, ext, ext < 0 ? &lo : &hi);
  }
  const int64_t cap = static_cast<int64_t>(std::min<uint64_t>(storage_nbytes / dtype_size(dtype), INT64_MAX));
  ok = ok && (empty || (lo >= 0 && hi < cap));
  KILN_CHECK(ok, op,
             "view of shape " << shape << ", strides " << strides << " and storage offset "
                              << static_cast<long long>(offset) << " reaches outside its storage of "
                              << static_cast<long long>(cap) << " elements");
}

}  // namespace detail

// Without an op name of their own, these name the user op running on this thread (OpScope).
int64_t shape_numel(const Shape& s) { return detail::checked_numel(s, nullptr); }

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    if (__builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc)) [[unlikely]]
      KILN_CHECK(false, detail::OpScope::current("contiguous_strides"),
                 "shape " << s << " has more elements than fit in int64");
  }
  return st;
}

std::string to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, op,
               "shapes " << a << " and " << b << " cannot be broadcast (dim " << static_cast<long long>(i) << ": " << da
                         << " vs " << db << ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dim 0 and -1
  KILN_CHECK(dim >= -r && dim < r, op, "dim " << dim << " out of range for a tensor of rank " << rank);
  return dim < 0 ? dim + r : dim;
}

}  // namespace kiln
