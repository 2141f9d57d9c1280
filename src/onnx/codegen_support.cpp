// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers that generated code calls: control flow (If, Loop, Scan), with the same semantics as
// the run-time path's ops in ops_control.cpp, and shape values (host integer vectors) with the
// semantics of the shape ops in ops_shape.cpp and ops_elementwise.cpp.
#include <algorithm>
#include <sstream>

#include "core/backend.h"
#include "kiln/error.h"
#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "onnx/ops.h"

namespace kiln::onnx {

Tensor fix_negative(const Tensor& idx, int64_t dim) {
  Tensor i = idx.dtype() == i64 ? idx : cast(idx, i64);
  if (i.device().is_cpu() && i.is_contiguous() && i.impl().storage) {
    // Host indices (token ids): read them, and skip the where() when none is negative.
    const auto* p =
        reinterpret_cast<const int64_t*>(static_cast<const char*>(host_storage_data(i)) + i.storage_offset() * 8);
    if (std::none_of(p, p + i.numel(), [](int64_t v) { return v < 0; })) return i;
  }
  return where(i < 0, i + dim, i);
}

namespace ops {

bool condition(const Tensor& cond) {
  KILN_CHECK(cond.defined() && cond.numel() == 1, "onnx",
             "control flow: a condition must have one element, got shape "
                 << (cond.defined() ? to_string(cond.shape()) : std::string("(none)")));
  return cond.to(bool_).reshape({}).item<bool>();
}

int64_t trip_count(const Tensor& m) {
  KILN_CHECK(m.defined() && m.numel() == 1, "onnx",
             "Loop: the trip count must have one element, got shape "
                 << (m.defined() ? to_string(m.shape()) : std::string("(none)")));
  return m.to(i64).reshape({}).item<int64_t>();
}

Tensor scan_input(const Tensor& x, int64_t axis, bool reverse) {
  int64_t r = x.dim();
  KILN_CHECK(axis >= -r && axis < r, "onnx", "Scan: scan axis " << axis << " out of range for rank " << r);
  if (axis < 0) axis += r;
  Tensor y = x.movedim({axis}, {0});
  return reverse ? y.flip({0}) : y;
}

int64_t scan_length(const std::vector<Tensor>& xs) {
  int64_t len = -1;
  for (const auto& x : xs) {
    KILN_CHECK(x.dim() >= 1, "onnx", "Scan: a scan input has rank 0");
    KILN_CHECK(len < 0 || x.size(0) == len, "onnx", "Scan: scan inputs differ in length");
    len = x.size(0);
  }
  return len < 0 ? 0 : len;
}

Tensor stack_steps(const std::vector<Tensor>& steps, int64_t axis, bool reverse) {
  KILN_CHECK(!steps.empty(), "onnx", "control flow: a scan output with zero iterations has no known shape");
  Tensor y = stack(steps, 0);
  if (reverse) y = y.flip({0});
  int64_t r = y.dim();
  KILN_CHECK(axis >= -r && axis < r, "onnx", "Scan: output axis " << axis << " out of range for rank " << r);
  if (axis < 0) axis += r;
  return axis == 0 ? y : y.movedim({0}, {axis}).contiguous();
}

namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << ']';
  return s.str();
}

}  // namespace

std::vector<int64_t> shape_of(const Tensor& x, int64_t start, int64_t end) {
  const int64_t n = x.dim();
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, 0, n);
  std::vector<int64_t> r;
  for (int64_t i = start; i < end; ++i) r.push_back(x.size(i));
  return r;
}

std::vector<int64_t> gather_ints(const std::vector<int64_t>& data, const std::vector<int64_t>& indices) {
  const int64_t n = static_cast<int64_t>(data.size());
  std::vector<int64_t> r;
  r.reserve(indices.size());
  for (int64_t i : indices) {
    KILN_CHECK(
        i >= -n && i < n, "onnx",
        "Gather: index " << i << " is out of range for a shape value of " << n << " elements " << ints_str(data));
    r.push_back(data[static_cast<size_t>(i < 0 ? i + n : i)]);
  }
  return r;
}

std::vector<int64_t> squeeze_ints(const std::vector<int64_t>& v) {
  KILN_CHECK(v.size() == 1, "onnx", "Squeeze: cannot squeeze axis 0 of size " << v.size() << " " << ints_str(v));
  return v;
}

std::vector<int64_t> concat_ints(const std::vector<std::vector<int64_t>>& parts) {
  std::vector<int64_t> r;
  for (const auto& p : parts) r.insert(r.end(), p.begin(), p.end());
  return r;
}

std::vector<int64_t> int_binary(char op, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t na = a.size(), nb = b.size();
  KILN_CHECK(na == nb || na == 1 || nb == 1, "onnx",
             "'" << op << "' of shape values: lengths " << na << " and " << nb << " do not broadcast (" << ints_str(a)
                 << ", " << ints_str(b) << ")");
  const size_t n = na == 1 ? nb : na;
  std::vector<int64_t> r(n);
  for (size_t i = 0; i < n; ++i) {
    // Two's complement wrap-around, as the integer kernels.
    const uint64_t x = static_cast<uint64_t>(a[na == 1 ? 0 : i]), y = static_cast<uint64_t>(b[nb == 1 ? 0 : i]);
    switch (op) {
      case '+':
        r[i] = static_cast<int64_t>(x + y);
        break;
      case '-':
        r[i] = static_cast<int64_t>(x - y);
        break;
      case '*':
        r[i] = static_cast<int64_t>(x * y);
        break;
      case '/': {
        const int64_t p = static_cast<int64_t>(x), q = static_cast<int64_t>(y);
        KILN_CHECK(q != 0, "onnx",
                   "Div of shape values: division by zero (" << ints_str(a) << " / " << ints_str(b) << ")");
        r[i] = q == -1 ? static_cast<int64_t>(0 - x) : p / q;  // truncates, like C++
        break;
      }
      default:
        KILN_CHECK(false, "onnx", "int_binary: unknown operator '" << op << "'");
    }
  }
  return r;
}

std::vector<int64_t> cast_ints(const std::vector<int64_t>& v, DType to) {
  KILN_CHECK(to == i64 || to == i32, "onnx",
             "Cast of a shape value: to " << to_string(to) << " is not an integer type held as a shape value");
  if (to == i64) return v;
  std::vector<int64_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v[i])));
  return r;
}

Tensor ints_tensor(const std::vector<int64_t>& v, bool scalar, DType dtype, const Device& device) {
  KILN_CHECK(!scalar || v.size() == 1, "onnx", "a rank-0 shape value must hold one element, got " << ints_str(v));
  Shape s = scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())};
  Tensor t = tensor(v, s, device);
  return dtype == i64 ? t : cast(t, dtype);
}

namespace {

/// axis in [-rank, rank) (rank 0 counts as 1) made non-negative; throws naming `op` otherwise.
int64_t norm_axis(const char* op, int64_t axis, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  KILN_CHECK(axis >= -r && axis < r, "onnx", op << ": axis " << axis << " is out of range for rank " << rank);
  return axis < 0 ? axis + r : axis;
}

}  // namespace

Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
             const std::vector<int64_t>& axes_in, const std::vector<int64_t>& steps_in) {
  KILN_CHECK(starts.size() == ends.size(), "onnx",
             "Slice: starts " << ints_str(starts) << " and ends " << ints_str(ends) << " differ in length");
  std::vector<int64_t> axes = axes_in, steps = steps_in;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  KILN_CHECK(axes.size() == starts.size() && steps.size() == starts.size(), "onnx",
             "Slice: axes " << ints_str(axes) << " and steps " << ints_str(steps) << " must have one value per start "
                            << ints_str(starts));
  Tensor y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t axis = norm_axis("Slice", axes[i], y.dim()), dim = y.size(axis), step = steps[i];
    KILN_CHECK(step != 0, "onnx", "Slice: step must not be 0, got steps " << ints_str(steps));
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i], end = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      y = end <= start ? y.narrow(axis, start, 0) : y.slice(axis, start, end, step);
      continue;
    }
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    std::vector<int64_t> idx;
    for (int64_t k = start; k > end; k += step) idx.push_back(k);
    y = index_select(y, axis, tensor(idx, Shape{static_cast<int64_t>(idx.size())}, y.device()));
  }
  return y;
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return x.squeeze();
  Dims d;
  for (int64_t a : axes) {
    const int64_t w = norm_axis("Squeeze", a, x.dim());
    KILN_CHECK(x.size(w) == 1, "onnx",
               "Squeeze: cannot squeeze axis " << a << " of size " << x.size(w) << " of " << to_string(x.shape()));
    d.push_back(w);
  }
  return x.squeeze(d);
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  KILN_CHECK(!xs.empty(), "onnx", "Concat: needs at least one input");
  // Kiln's cat skips 1-d empty tensors; ONNX keeps every input, which only matters for rank.
  return cat(xs, norm_axis("Concat", axis, xs[0].dim()));
}

Tensor constant_of_shape(const std::vector<int64_t>& shape, Scalar value, DType dtype, const Device& device) {
  for (int64_t d : shape) KILN_CHECK(d >= 0, "onnx", "ConstantOfShape: negative size in shape " << ints_str(shape));
  return full(Shape(shape.begin(), shape.end()), value, {.dtype = dtype, .device = device});
}

Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis) {
  KILN_CHECK(x.dim() > 0, "onnx", "Gather: the data must have rank >= 1, got a scalar");
  const int64_t a = norm_axis("Gather", axis, x.dim());
  KILN_CHECK(!is_floating(indices.dtype()) && indices.dtype() != bool_, "onnx",
             "Gather: indices must be integers, got " << dtype_name(indices.dtype()).data());
  Tensor flat = index_select(x, a, fix_negative(indices, x.size(a)).reshape({-1}));
  Shape s(x.shape().begin(), x.shape().begin() + a);
  for (int64_t d : indices.shape()) s.push_back(d);
  for (int64_t k = a + 1; k < x.dim(); ++k) s.push_back(x.size(k));
  return flat.reshape(s);
}

Tensor div(const Tensor& a, const Tensor& b) {
  return keep_dtype(is_integral(a.dtype()) && is_integral(b.dtype()) ? kiln::div(a, b, "trunc") : kiln::div(a, b),
                    a.dtype());
}

Tensor pow(const Tensor& a, const Tensor& b) {
  if (is_integral(a.dtype()) && is_floating(b.dtype())) return cast(kiln::pow(a.to(f64), b.to(f64)), a.dtype());
  if (is_floating(a.dtype()) && b.dtype() != a.dtype()) return kiln::pow(a, b.to(a.dtype()));
  return keep_dtype(kiln::pow(a, b), a.dtype());
}

Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape, bool allowzero) {
  std::vector<int64_t> s = shape;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == 0 && !allowzero) {
      KILN_CHECK(static_cast<int64_t>(i) < x.dim(), "onnx",
                 "Reshape: the shape " << ints_str(shape) << " has a 0 at position " << i
                                       << ", beyond the input's rank " << x.dim() << " (" << to_string(x.shape())
                                       << ")");
      s[i] = x.size(static_cast<int64_t>(i));
    }
  return x.reshape(Shape(s.begin(), s.end()));
}

}  // namespace ops
}  // namespace kiln::onnx
