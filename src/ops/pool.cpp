// SPDX-License-Identifier: MIT OR Apache-2.0
// Pooling frontends: argument checks with PyTorch's rules, unbatched inputs folded to a batch
// of one, and the MaxPool / AvgPool / AdaptiveAvgPool / AdaptiveMaxPool / MaxUnpool ops
// (src/backends/cpu/pool.cpp runs them; any input strides are fine).
#include "kiln/nn/functional/pool.h"

#include <sstream>

#include "core/checked.h"
#include "ir/attrs.h"
#include "kiln/autodiff.h"
#include "ops/dispatch.h"

namespace kiln::nn::functional {

using detail::make_op;
using ir::OpKind;

namespace {

std::string dims_str(const Dims& d) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < d.size(); ++i) os << (i ? ", " : "") << d[i];
  os << ")";
  return os.str();
}

/// x as [N, C, *sp] (unbatched [C, *sp] gets a batch of one); checks rank and that only the
/// batch dim may be empty.
Tensor fold_batch(const char* api, const Tensor& x, int64_t nsp, bool& unbatched) {
  detail::check_defined(api, x);
  KILN_CHECK(
      x.dim() == nsp + 1 || x.dim() == nsp + 2, api,
      "expected a " << nsp + 1 << "-d (unbatched) or " << nsp + 2 << "-d (batched) input, got shape " << x.shape());
  unbatched = x.dim() == nsp + 1;
  for (int64_t d = unbatched ? 0 : 1; d < x.dim(); ++d)
    KILN_CHECK(x.size(d) > 0, api,
               "expected non-empty dims except an optional batch dim of size 0, got shape " << x.shape());
  return unbatched ? x.unsqueeze(0) : x;
}

Tensor unfold_batch(const Tensor& t, bool unbatched) { return unbatched ? t.squeeze({0}) : t; }

void check_dtype(const char* api, const Tensor& x, bool ints, bool i64_only = false) {
  const DType dt = x.dtype();
  bool ok = is_floating(dt) || (ints && dt != DType::Bool && !is_floating(dt) && (!i64_only || dt == DType::I64));
  KILN_CHECK(ok, api,
             "not implemented for dtype "
                 << dtype_name(dt).data() << " (shape " << x.shape() << "); expected "
                 << (ints ? (i64_only ? "a float dtype or i64" : "a float or integer dtype") : "a float dtype"));
}

/// PyTorch's pooling_output_shape, in 128 bits (any argument may be as large as int64 allows);
/// kiln::Error("[api] ...") when the result does not fit in int64.
int64_t pool_out(const char* api, int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  using I = __int128;
  I num = I{in} + I{2} * pad - I{dil} * (I{k} - 1) - 1 + (ceil_mode ? I{stride} - 1 : I{0});
  I q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);
  I out = q + 1;
  if (ceil_mode && (out - 1) * stride >= I{in} + pad) --out;
  KILN_CHECK(out <= INT64_MAX && out >= INT64_MIN, api,
             "output size does not fit in int64 (input size " << in << ", kernel_size " << k << ", padding " << pad
                                                              << ", dilation " << dil << ")");
  return static_cast<int64_t>(out);
}

struct Window {
  Dims k, s, p, d;
};

/// Expands and checks kernel/stride/padding/dilation, and that the output is not empty.
Window window(const char* api, const Tensor& xb, int64_t nsp, const IntList& kernel, const IntList& stride,
              const IntList& padding, const IntList& dilation, bool ceil_mode) {
  Window w;
  w.k = kernel.expand(nsp, api, "kernel_size");
  w.s = stride.values().empty() ? w.k : stride.expand(nsp, api, "stride");
  w.p = padding.expand(nsp, api, "padding");
  w.d = dilation.expand(nsp, api, "dilation");
  for (int64_t i = 0; i < nsp; ++i) {
    KILN_CHECK(w.k[i] > 0, api, "kernel_size must be greater than zero, got " << dims_str(w.k));
    KILN_CHECK(w.s[i] > 0, api, "stride must be greater than zero, got " << dims_str(w.s));
    KILN_CHECK(w.d[i] > 0, api, "dilation must be greater than zero, got " << dims_str(w.d));
    KILN_CHECK(w.p[i] >= 0, api, "padding must be non-negative, got " << dims_str(w.p));
    KILN_CHECK(w.p[i] <= w.k[i] / 2, api,
               "pad should be at most half of kernel size, but got padding=" << dims_str(w.p)
                                                                             << " and kernel_size=" << dims_str(w.k));
  }
  Dims out;
  bool ok = true;
  for (int64_t i = 0; i < nsp; ++i) {
    out.push_back(pool_out(api, xb.size(2 + i), w.k[i], w.p[i], w.s[i], w.d[i], ceil_mode));
    ok &= out.back() >= 1;
  }
  KILN_CHECK(ok, api,
             "given input shape " << xb.shape() << ", the calculated output size " << dims_str(out)
                                  << " is too small (kernel_size=" << dims_str(w.k) << ", stride=" << dims_str(w.s)
                                  << ", padding=" << dims_str(w.p) << ", dilation=" << dims_str(w.d) << ")");
  return w;
}

std::pair<Tensor, Tensor> max_pool(const char* api, int64_t nsp, const Tensor& x, const IntList& kernel,
                                   const MaxPoolOptions& o, bool with_indices) {
  bool ub = false;
  Tensor xb = fold_batch(api, x, nsp, ub);
  check_dtype(api, x, true);
  Window w = window(api, xb, nsp, kernel, o.stride, o.padding, o.dilation, o.ceil_mode);
  ir::Op op = make_op(OpKind::MaxPool);
  // A tracked input always gets indices: the gradient scatters through them (nn_grad_pool.cpp).
  ir::PoolAttrs{.nsp = nsp,
                .kernel = w.k,
                .stride = w.s,
                .padding = w.p,
                .dilation = w.d,
                .ceil_mode = o.ceil_mode,
                .with_indices = with_indices || (grad_enabled() && xb.requires_grad())}
      .encode(op);
  auto r = detail::run(api, op, xb.device(), {xb});
  return {unfold_batch(r[0], ub), with_indices ? unfold_batch(r[1], ub) : Tensor()};
}

Tensor avg_pool(const char* api, int64_t nsp, const Tensor& x, const IntList& kernel, const AvgPoolOptions& o) {
  bool ub = false;
  Tensor xb = fold_batch(api, x, nsp, ub);
  check_dtype(api, x, true, true);
  KILN_CHECK(!o.divisor_override || *o.divisor_override != 0, api, "divisor must be not zero");
  Window w = window(api, xb, nsp, kernel, o.stride, o.padding, IntList(1), o.ceil_mode);
  ir::Op op = make_op(OpKind::AvgPool);
  ir::PoolAttrs{.nsp = nsp,
                .kernel = w.k,
                .stride = w.s,
                .padding = w.p,
                .ceil_mode = o.ceil_mode,
                .count_include_pad = o.count_include_pad,
                .divisor = o.divisor_override.value_or(0)}
      .encode(op);
  return unfold_batch(detail::run1(api, op, {xb}), ub);
}

std::pair<Tensor, Tensor> adaptive(const char* api, OpKind kind, int64_t nsp, const Tensor& x, const OutputSize& size,
                                   bool with_indices) {
  bool ub = false;
  Tensor xb = fold_batch(api, x, nsp, ub);
  check_dtype(api, x, false);
  Dims out = size.resolve(xb.shape(), nsp, api);
  ir::Op op = make_op(kind);
  // A tracked input always gets indices, as max_pool (AdaptiveMaxPool only).
  ir::PoolAttrs{.nsp = nsp, .out = out, .with_indices = with_indices || (grad_enabled() && xb.requires_grad())}.encode(
      op);
  auto r = detail::run(api, op, xb.device(), {xb});
  return {unfold_batch(r[0], ub), with_indices ? unfold_batch(r[1], ub) : Tensor()};
}

Tensor max_unpool(const char* api, int64_t nsp, const Tensor& x, const Tensor& indices, const IntList& kernel,
                  const MaxUnpoolOptions& o) {
  bool ub = false;
  Tensor xb = fold_batch(api, x, nsp, ub);
  detail::check_defined(api, indices);
  detail::check_same_device(api, x, indices);
  check_dtype(api, x, false);
  KILN_CHECK(indices.dtype() == DType::I64, api,
             "expected indices of dtype i64, got " << dtype_name(indices.dtype()).data());
  KILN_CHECK(indices.shape() == x.shape(), api,
             "expected indices of the input's shape " << x.shape() << ", got " << indices.shape());
  Tensor ib = ub ? indices.unsqueeze(0) : indices;
  Dims k = kernel.expand(nsp, api, "kernel_size");
  Dims s = o.stride.values().empty() ? k : o.stride.expand(nsp, api, "stride");
  Dims p = o.padding.expand(nsp, api, "padding");
  Dims def;
  for (int64_t i = 0; i < nsp; ++i) {
    KILN_CHECK(k[i] > 0 && s[i] > 0 && p[i] >= 0, api,
               "kernel_size and stride must be positive and padding non-negative, got kernel_size="
                   << dims_str(k) << ", stride=" << dims_str(s) << ", padding=" << dims_str(p));
    // (in - 1) * stride + kernel - 2 * padding, checked: the arguments may be as large as int64 allows.
    def.push_back(
        detail::checked_add(detail::checked_add(detail::checked_mul(xb.size(2 + i) - 1, s[i], api), k[i], api),
                            -detail::checked_mul(2, p[i], api), api));
  }
  Dims out = def;
  if (!o.output_size.empty()) {
    Shape os = o.output_size;
    if (static_cast<int64_t>(os.size()) == nsp + 2) os = Shape(os.begin() + 2, os.end());
    KILN_CHECK(static_cast<int64_t>(os.size()) == nsp, api,
               "output_size should be a sequence containing " << nsp << " or " << nsp + 2
                                                              << " elements, but it has a length of " << os.size());
    for (int64_t i = 0; i < nsp; ++i) {
      int64_t lo = def[i] - s[i], hi = def[i] + s[i];
      KILN_CHECK(lo < os[i] && os[i] < hi, api,
                 "invalid output_size " << os << " (dim " << i << " must be between " << lo << " and " << hi << ")");
      out[i] = os[i];
    }
  }
  for (int64_t i = 0; i < nsp; ++i)
    KILN_CHECK(out[i] > 0, api, "the output size " << dims_str(out) << " must be positive");
  ir::Op op = make_op(OpKind::MaxUnpool);
  ir::PoolAttrs{.nsp = nsp, .out = out}.encode(op);
  return unfold_batch(detail::run1(api, op, {xb, ib}), ub);
}

}  // namespace

Dims OutputSize::resolve(const Shape& in, int64_t n, const char* op) const {
  KILN_CHECK(static_cast<int64_t>(v_.size()) == n || v_.size() == 1, op,
             "output_size must have 1 or " << n << " values, got " << v_.size());
  Dims r;
  for (int64_t i = 0; i < n; ++i) {
    const auto& v = v_.size() == 1 ? v_[0] : v_[static_cast<size_t>(i)];
    int64_t s = v ? *v : in[in.size() - static_cast<size_t>(n - i)];
    KILN_CHECK(s >= 0, op, "output_size must be non-negative, got " << s);
    r.push_back(s);
  }
  return r;
}

Tensor max_pool1d(const Tensor& x, IntList k, const MaxPoolOptions& o) {
  return max_pool("max_pool1d", 1, x, k, o, false).first;
}
Tensor max_pool2d(const Tensor& x, IntList k, const MaxPoolOptions& o) {
  return max_pool("max_pool2d", 2, x, k, o, false).first;
}
Tensor max_pool3d(const Tensor& x, IntList k, const MaxPoolOptions& o) {
  return max_pool("max_pool3d", 3, x, k, o, false).first;
}
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, IntList k, const MaxPoolOptions& o) {
  return max_pool("max_pool1d", 1, x, k, o, true);
}
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList k, const MaxPoolOptions& o) {
  return max_pool("max_pool2d", 2, x, k, o, true);
}
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, IntList k, const MaxPoolOptions& o) {
  return max_pool("max_pool3d", 3, x, k, o, true);
}

Tensor avg_pool1d(const Tensor& x, IntList k, const AvgPoolOptions& o) { return avg_pool("avg_pool1d", 1, x, k, o); }
Tensor avg_pool2d(const Tensor& x, IntList k, const AvgPoolOptions& o) { return avg_pool("avg_pool2d", 2, x, k, o); }
Tensor avg_pool3d(const Tensor& x, IntList k, const AvgPoolOptions& o) { return avg_pool("avg_pool3d", 3, x, k, o); }

Tensor adaptive_avg_pool1d(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_avg_pool1d", OpKind::AdaptiveAvgPool, 1, x, s, false).first;
}
Tensor adaptive_avg_pool2d(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_avg_pool2d", OpKind::AdaptiveAvgPool, 2, x, s, false).first;
}
Tensor adaptive_avg_pool3d(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_avg_pool3d", OpKind::AdaptiveAvgPool, 3, x, s, false).first;
}
Tensor adaptive_max_pool1d(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_max_pool1d", OpKind::AdaptiveMaxPool, 1, x, s, false).first;
}
Tensor adaptive_max_pool2d(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_max_pool2d", OpKind::AdaptiveMaxPool, 2, x, s, false).first;
}
Tensor adaptive_max_pool3d(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_max_pool3d", OpKind::AdaptiveMaxPool, 3, x, s, false).first;
}
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_max_pool1d", OpKind::AdaptiveMaxPool, 1, x, s, true);
}
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_max_pool2d", OpKind::AdaptiveMaxPool, 2, x, s, true);
}
std::pair<Tensor, Tensor> adaptive_max_pool3d_with_indices(const Tensor& x, OutputSize s) {
  return adaptive("adaptive_max_pool3d", OpKind::AdaptiveMaxPool, 3, x, s, true);
}

Tensor max_unpool1d(const Tensor& x, const Tensor& i, IntList k, const MaxUnpoolOptions& o) {
  return max_unpool("max_unpool1d", 1, x, i, k, o);
}
Tensor max_unpool2d(const Tensor& x, const Tensor& i, IntList k, const MaxUnpoolOptions& o) {
  return max_unpool("max_unpool2d", 2, x, i, k, o);
}
Tensor max_unpool3d(const Tensor& x, const Tensor& i, IntList k, const MaxUnpoolOptions& o) {
  return max_unpool("max_unpool3d", 3, x, i, k, o);
}

}  // namespace kiln::nn::functional
