// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Note [Checked sizes]
// ~~~~~~~~~~~~~~~~~~~~
// Every size, byte count and view extent that comes from user code, a model file or a network
// message is computed here, in overflow-checked int64 arithmetic, so that a hostile shape can
// only ever raise kiln::Error("[op] ...") and never wrap into a small buffer or an offset outside
// one. The helpers below are the one place for it: shape_numel and contiguous_strides
// (shape.cpp), alloc and make_view (ops/dispatch.cpp), the allocator (allocator.cpp, which also
// holds OpScope), shape inference (src/ir), the ONNX shape ops and the loaders use them.
#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::detail {

/// Throws kiln::Error("[op] integer overflow: a <sym> b does not fit in int64").
[[noreturn]] void throw_overflow(const char* op, int64_t a, char sym, int64_t b);

/// a * b, or kiln::Error("[op] integer overflow ...") when the product does not fit in int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) [[unlikely]]
    throw_overflow(op, a, '*', b);
  return r;
}
/// a + b, or kiln::Error("[op] integer overflow ...") when the sum does not fit in int64.
inline int64_t checked_add(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) [[unlikely]]
    throw_overflow(op, a, '+', b);
  return r;
}

/// The element count of s (0 when a dim is 0). Throws kiln::Error("[op] shape [...] has more
/// elements than fit in int64") when the product of its nonzero dims overflows, so that the
/// contiguous strides of s are representable too. Negative dims are the caller's to reject.
/// op == nullptr names the op in scope (OpScope), else "numel".
int64_t checked_numel(const Shape& s, const char* op);

/// Bytes of a contiguous tensor of shape s and dtype: throws kiln::Error("[op] ...") for an
/// invalid dtype, a negative dim, or a count past INT64_MAX bytes.
size_t checked_nbytes(const Shape& s, DType dtype, const char* op);

/// Throws kiln::Error("[op] view ... exceeds the storage ...") unless the view (shape, strides,
/// offset in elements of dtype) reaches only elements inside a storage of storage_nbytes bytes:
/// its nearest element (offset plus the negative strides' extents) is >= 0 and its furthest
/// (offset plus the positive strides' extents) ends within the storage, computed without
/// overflow. Views without elements only need offset >= 0.
void check_view_in_storage(const Shape& shape, const Strides& strides, int64_t offset, DType dtype,
                           size_t storage_nbytes, const char* op);

/// Names the user-facing op running on this thread, for errors raised far below it (an
/// allocation failure). The outermost scope wins: a composite (linspace) that runs primitives
/// (arange, mul) keeps its own name; an inner scope changes nothing.
class OpScope {
 public:
  explicit OpScope(const char* op) noexcept;
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  /// The outermost op name in scope on this thread, or `fallback` when there is none.
  static const char* current(const char* fallback) noexcept;

 private:
  const char* prev_;
};

/// Raises e again as the error of `api`: "[inner] text" becomes "[api] text".
[[noreturn]] void rethrow_as(const char* api, const Error& e);

/// f(), where a kiln::Error raised by an op that f calls (a composite's cat, expand or zeros)
/// names `api`, the op the user called, instead.
template <class F>
decltype(auto) as_op(const char* api, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    rethrow_as(api, e);
  }
}

}  // namespace kiln::detail
