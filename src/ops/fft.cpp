// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::fft frontends: argument checks, trimming / zero-padding to the requested sizes, the
// normalisation scale, and the Fft / Rfft / Irfft primitives along one dim each (multi-dim
// transforms are sequences of them). Complex tensors use the [..., 2] layout (kiln/fft.h).
// Composites: complex helpers, hfft/ihfft, fftfreq, fftshift, windows, stft and istft.
#include "kiln/fft.h"

#include <cmath>
#include <numbers>

#include "ir/attrs.h"
#include "kiln/ops.h"
#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using detail::run1;
using ir::OpKind;

namespace {

/// A complex [..., 2] input with at least one complex dim, converted to a float dtype.
Tensor complex_input(const char* api, const Tensor& z) {
  detail::check_defined(api, z);
  KILN_CHECK(z.dim() >= 2 && z.size(-1) == 2, api,
             "expects a complex tensor in the [..., 2] layout (re, im) with at least one complex dim, got shape "
                 << z.shape() << " (use fft::to_complex for real data)");
  return is_floating(z.dtype()) ? z : z.to(kDefaultFloat);
}

/// A real input with at least one dim, converted to a float dtype.
Tensor real_input(const char* api, const Tensor& x) {
  detail::check_defined(api, x);
  KILN_CHECK(x.dim() >= 1, api, "expects a tensor with at least one dim, got shape " << x.shape());
  return is_floating(x.dtype()) ? x : x.to(kDefaultFloat);
}

/// Scale of a transform of n points: forward or inverse, under norm.
double norm_scale(const char* api, const std::string& norm, int64_t n, bool inverse) {
  const double dn = static_cast<double>(n);
  if (norm == "backward" || norm.empty()) return inverse ? 1.0 / dn : 1.0;
  if (norm == "ortho") return 1.0 / std::sqrt(dn);
  if (norm == "forward") return inverse ? 1.0 : 1.0 / dn;
  KILN_CHECK(false, api, "invalid normalization mode '" << norm << "'; expected backward, ortho or forward");
  return 1.0;
}

/// The norm whose forward scaling is the given norm's inverse scaling (hfft / ihfft).
std::string swap_norm(const char* api, const std::string& norm) {
  norm_scale(api, norm, 1, false);  // validates
  return norm == "forward" ? "backward" : norm == "ortho" ? "ortho" : "forward";
}

void check_n(const char* api, int64_t n) {
  KILN_CHECK(n >= 1, api, "invalid number of data points (" << n << ") specified");
}

/// x trimmed or zero-padded to n elements along (actual) dim d.
Tensor resize_dim(const Tensor& x, int64_t d, int64_t n) {
  const int64_t cur = x.size(d);
  if (n == cur) return x;
  if (n < cur) return x.narrow(d, 0, n);
  Shape pads(static_cast<size_t>(2 * (x.dim() - d)), 0);
  pads.back() = n - cur;
  return kiln::pad(x, pads);
}

/// One complex transform along complex dim d (already wrapped) of a float complex tensor.
Tensor c2c(const char* api, const Tensor& z, int64_t d, const std::string& norm, bool inverse) {
  const int64_t n = z.size(d);
  check_n(api, n);
  ir::Op op = make_op(OpKind::Fft, {}, {}, z.dtype());
  ir::FftAttrs{.dim = d, .inverse = inverse, .scale = norm_scale(api, norm, n, inverse)}.encode(op);
  return run1(api, op, {z});
}

Tensor r2c(const char* api, const Tensor& x, int64_t d, const std::string& norm) {
  const int64_t n = x.size(d);
  check_n(api, n);
  ir::Op op = make_op(OpKind::Rfft, {}, {}, x.dtype());
  ir::FftAttrs{.dim = d, .scale = norm_scale(api, norm, n, false)}.encode(op);
  return run1(api, op, {x});
}

Tensor c2r(const char* api, const Tensor& z, int64_t d, int64_t n, const std::string& norm) {
  check_n(api, n);
  ir::Op op = make_op(OpKind::Irfft, {}, {}, z.dtype());
  ir::FftAttrs{.dim = d, .n = n, .scale = norm_scale(api, norm, n, true)}.encode(op);
  return run1(api, op, {z});
}

Tensor fft1(const char* api, const Tensor& z0, std::optional<int64_t> n, int64_t dim, const std::string& norm,
            bool inverse) {
  Tensor z = complex_input(api, z0);
  const int64_t d = wrap_dim(dim, z.dim() - 1, api);
  if (n) {
    check_n(api, *n);
    z = resize_dim(z, d, *n);
  }
  return c2c(api, z, d, norm, inverse);
}

Tensor rfft1(const char* api, const Tensor& x0, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  Tensor x = real_input(api, x0);
  const int64_t d = wrap_dim(dim, x.dim(), api);
  if (n) {
    check_n(api, *n);
    x = resize_dim(x, d, *n);
  }
  return r2c(api, x, d, norm);
}

Tensor irfft1(const char* api, const Tensor& z0, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  Tensor z = complex_input(api, z0);
  const int64_t d = wrap_dim(dim, z.dim() - 1, api);
  const int64_t out = n ? *n : 2 * (z.size(d) - 1);
  return c2r(api, z, d, out, norm);
}

/// The dims and sizes of an n-d transform over a (complex or real) shape of rank `rank`.
struct NdPlan {
  Dims dims;
  std::vector<int64_t> sizes;  // -1: keep
};

NdPlan nd_plan(const char* api, int64_t rank, const std::optional<Shape>& s, const std::optional<Dims>& dim) {
  NdPlan p;
  if (dim) {
    for (int64_t d : *dim) {
      const int64_t w = wrap_dim(d, rank, api);
      for (int64_t e : p.dims) KILN_CHECK(e != w, api, "dims must be unique, got " << to_string(*dim));
      p.dims.push_back(w);
    }
    if (s)
      KILN_CHECK(s->size() == dim->size(), api,
                 "when given, s and dim must have the same length, got s = " << to_string(*s)
                                                                             << " and dim = " << to_string(*dim));
  } else if (s) {
    KILN_CHECK(static_cast<int64_t>(s->size()) <= rank, api,
               "s = " << to_string(*s) << " has more entries than the input has dims (" << rank << ")");
    for (int64_t d = rank - static_cast<int64_t>(s->size()); d < rank; ++d) p.dims.push_back(d);
  } else {
    for (int64_t d = 0; d < rank; ++d) p.dims.push_back(d);
  }
  for (size_t i = 0; i < p.dims.size(); ++i) {
    int64_t v = s ? (*s)[i] : -1;
    KILN_CHECK(v == -1 || v >= 1, api, "invalid number of data points (" << v << ") specified in s");
    p.sizes.push_back(v);
  }
  return p;
}

Tensor fftn_impl(const char* api, const Tensor& z0, const std::optional<Shape>& s, const std::optional<Dims>& dim,
                 const std::string& norm, bool inverse) {
  Tensor z = complex_input(api, z0);
  NdPlan p = nd_plan(api, z.dim() - 1, s, dim);
  for (size_t i = 0; i < p.dims.size(); ++i)
    if (p.sizes[i] > 0) z = resize_dim(z, p.dims[i], p.sizes[i]);
  for (size_t i = p.dims.size(); i-- > 0;) z = c2c(api, z, p.dims[i], norm, inverse);
  return z;
}

Tensor rfftn_impl(const char* api, const Tensor& x0, const std::optional<Shape>& s, const std::optional<Dims>& dim,
                  const std::string& norm) {
  Tensor x = real_input(api, x0);
  NdPlan p = nd_plan(api, x.dim(), s, dim);
  KILN_CHECK(!p.dims.empty(), api, "needs at least one dim to transform");
  for (size_t i = 0; i < p.dims.size(); ++i)
    if (p.sizes[i] > 0) x = resize_dim(x, p.dims[i], p.sizes[i]);
  Tensor z = r2c(api, x, p.dims.back(), norm);
  for (size_t i = p.dims.size() - 1; i-- > 0;) z = c2c(api, z, p.dims[i], norm, false);
  return z;
}

Tensor irfftn_impl(const char* api, const Tensor& z0, const std::optional<Shape>& s, const std::optional<Dims>& dim,
                   const std::string& norm) {
  Tensor z = complex_input(api, z0);
  NdPlan p = nd_plan(api, z.dim() - 1, s, dim);
  KILN_CHECK(!p.dims.empty(), api, "needs at least one dim to transform");
  const size_t last = p.dims.size() - 1;
  for (size_t i = 0; i < last; ++i)
    if (p.sizes[i] > 0) z = resize_dim(z, p.dims[i], p.sizes[i]);
  const int64_t n = p.sizes[last] > 0 ? p.sizes[last] : 2 * (z.size(p.dims[last]) - 1);
  check_n(api, n);
  for (size_t i = last; i-- > 0;) z = c2c(api, z, p.dims[i], norm, true);
  return c2r(api, z, p.dims[last], n, norm);
}

void check_float_dtype(const char* api, DType dt) {
  KILN_CHECK(is_floating(dt), api, "expects a floating point dtype, got " << dtype_name(dt).data());
}

/// cos-sum window sum_j a[j] cos(2 pi j k / N) (signs included in a), computed in f64.
Tensor cosine_window(const char* api, int64_t length, bool periodic, std::initializer_list<double> a,
                     const TensorOptions& o) {
  KILN_CHECK(length >= 0, api, "window_length must be non-negative, got " << length);
  check_float_dtype(api, o.dtype);
  if (length == 0) return empty({0}, o);
  if (length == 1) return ones({1}, o);
  const int64_t N = periodic ? length : length - 1;  // the denominator
  Tensor k = arange(length, f64, o.device) * (2.0 * std::numbers::pi / static_cast<double>(N));
  Tensor w = full({length}, 0.0, {.dtype = f64, .device = o.device});
  int j = 0;
  for (double c : a) {
    w = j == 0 ? w + c : w + cos(k * static_cast<double>(j)) * c;
    ++j;
  }
  return w.to(o.dtype);
}

Tensor padded_window(const char* api, const Tensor& window, int64_t win_length, int64_t n_fft, DType dt,
                     const Device& dev) {
  Tensor w;
  if (window.defined()) {
    KILN_CHECK(window.dim() == 1 && window.size(0) == win_length, api,
               "expected a 1-d window of size win_length = " << win_length << ", got shape " << window.shape());
    detail::check_same_device(api, window, ones({1}, {.dtype = dt, .device = dev}));
    w = window.to(dt);
  } else {
    w = ones({win_length}, {.dtype = dt, .device = dev});
  }
  if (win_length != n_fft) {
    const int64_t left = (n_fft - win_length) / 2;
    w = kiln::pad(w, {left, n_fft - win_length - left});
  }
  return w;
}

}  // namespace

namespace fft {

// ---- complex helpers --------------------------------------------------------------------------
Tensor to_complex(const Tensor& x) {
  const char* api = "fft.to_complex";
  detail::check_defined(api, x);
  Tensor r = is_floating(x.dtype()) ? x : x.to(kDefaultFloat);
  return kiln::stack({r, zeros_like(r)}, -1);
}

Tensor complex(const Tensor& re, const Tensor& im) {
  const char* api = "fft.complex";
  detail::check_defined(api, re);
  detail::check_defined(api, im);
  detail::check_same_device(api, re, im);
  KILN_CHECK(is_floating(re.dtype()) && re.dtype() == im.dtype(), api,
             "expects re and im of one floating point dtype, got " << dtype_name(re.dtype()).data() << " and "
                                                                   << dtype_name(im.dtype()).data());
  Shape s = broadcast_shapes(re.shape(), im.shape(), api);
  return kiln::stack({re.expand(s), im.expand(s)}, -1);
}

Tensor real(const Tensor& z) { return complex_input("fft.real", z).select(-1, 0); }
Tensor imag(const Tensor& z) { return complex_input("fft.imag", z).select(-1, 1); }
Tensor abs(const Tensor& z) {
  Tensor c = complex_input("fft.abs", z);
  return kiln::hypot(c.select(-1, 0), c.select(-1, 1));
}
Tensor angle(const Tensor& z) {
  Tensor c = complex_input("fft.angle", z);
  return kiln::atan2(c.select(-1, 1), c.select(-1, 0));
}
Tensor conj(const Tensor& z) {
  Tensor c = complex_input("fft.conj", z);
  return kiln::stack({c.select(-1, 0), kiln::neg(c.select(-1, 1))}, -1);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  const char* api = "fft.mul";
  Tensor x = complex_input(api, a), y = complex_input(api, b);
  detail::check_same_device(api, x, y);
  Tensor ar = x.select(-1, 0), ai = x.select(-1, 1), br = y.select(-1, 0), bi = y.select(-1, 1);
  return kiln::stack({ar * br - ai * bi, ar * bi + ai * br}, -1);
}

// ---- 1-d --------------------------------------------------------------------------------------
Tensor fft(const Tensor& z, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  return fft1("fft.fft", z, n, dim, norm, false);
}
Tensor ifft(const Tensor& z, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  return fft1("fft.ifft", z, n, dim, norm, true);
}
Tensor rfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  return rfft1("fft.rfft", x, n, dim, norm);
}
Tensor irfft(const Tensor& z, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  return irfft1("fft.irfft", z, n, dim, norm);
}
Tensor hfft(const Tensor& z, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  const char* api = "fft.hfft";
  Tensor c = complex_input(api, z);
  return irfft1(api, conj(c), n, dim, swap_norm(api, norm));
}
Tensor ihfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const std::string& norm) {
  const char* api = "fft.ihfft";
  return conj(rfft1(api, x, n, dim, swap_norm(api, norm)));
}

// ---- n-d --------------------------------------------------------------------------------------
Tensor fft2(const Tensor& z, std::optional<Shape> s, const Dims& dim, const std::string& norm) {
  return fftn_impl("fft.fft2", z, s, dim, norm, false);
}
Tensor ifft2(const Tensor& z, std::optional<Shape> s, const Dims& dim, const std::string& norm) {
  return fftn_impl("fft.ifft2", z, s, dim, norm, true);
}
Tensor rfft2(const Tensor& x, std::optional<Shape> s, const Dims& dim, const std::string& norm) {
  return rfftn_impl("fft.rfft2", x, s, dim, norm);
}
Tensor irfft2(const Tensor& z, std::optional<Shape> s, const Dims& dim, const std::string& norm) {
  return irfftn_impl("fft.irfft2", z, s, dim, norm);
}
Tensor fftn(const Tensor& z, std::optional<Shape> s, std::optional<Dims> dim, const std::string& norm) {
  return fftn_impl("fft.fftn", z, s, dim, norm, false);
}
Tensor ifftn(const Tensor& z, std::optional<Shape> s, std::optional<Dims> dim, const std::string& norm) {
  return fftn_impl("fft.ifftn", z, s, dim, norm, true);
}
Tensor rfftn(const Tensor& x, std::optional<Shape> s, std::optional<Dims> dim, const std::string& norm) {
  return rfftn_impl("fft.rfftn", x, s, dim, norm);
}
Tensor irfftn(const Tensor& z, std::optional<Shape> s, std::optional<Dims> dim, const std::string& norm) {
  return irfftn_impl("fft.irfftn", z, s, dim, norm);
}

// ---- helpers ----------------------------------------------------------------------------------
Tensor fftfreq(int64_t n, double d, const TensorOptions& o) {
  const char* api = "fft.fftfreq";
  KILN_CHECK(n >= 0, api, "n must be non-negative, got " << n);
  check_float_dtype(api, o.dtype);
  Tensor k = arange(n, f64, o.device);
  const int64_t pos = (n - 1) / 2 + 1;  // 0 .. (n-1)/2 are non-negative
  k = where(k < static_cast<double>(pos), k, k - static_cast<double>(n));
  return (k * (1.0 / (static_cast<double>(n) * d))).to(o.dtype);
}

Tensor rfftfreq(int64_t n, double d, const TensorOptions& o) {
  const char* api = "fft.rfftfreq";
  KILN_CHECK(n >= 0, api, "n must be non-negative, got " << n);
  check_float_dtype(api, o.dtype);
  return (arange(n / 2 + 1, f64, o.device) * (1.0 / (static_cast<double>(n) * d))).to(o.dtype);
}

namespace {
Tensor shift(const char* api, const Tensor& x, const std::optional<Dims>& dims, bool inverse) {
  detail::check_defined(api, x);
  Dims ds;
  if (dims)
    for (int64_t d : *dims) ds.push_back(wrap_dim(d, x.dim(), api));
  else
    for (int64_t d = 0; d < x.dim(); ++d) ds.push_back(d);
  if (ds.empty()) return x.clone();
  Shape shifts;
  for (int64_t d : ds) shifts.push_back(inverse ? -(x.size(d) / 2) : x.size(d) / 2);
  return kiln::roll(x, shifts, ds);
}
}  // namespace

Tensor fftshift(const Tensor& x, std::optional<Dims> dims) { return shift("fft.fftshift", x, dims, false); }
Tensor ifftshift(const Tensor& x, std::optional<Dims> dims) { return shift("fft.ifftshift", x, dims, true); }

}  // namespace fft

// ---- windows ------------------------------------------------------------------------------------
Tensor hann_window(int64_t window_length, bool periodic, const TensorOptions& o) {
  return cosine_window("hann_window", window_length, periodic, {0.5, -0.5}, o);
}
Tensor hamming_window(int64_t window_length, bool periodic, double alpha, double beta, const TensorOptions& o) {
  return cosine_window("hamming_window", window_length, periodic, {alpha, -beta}, o);
}
Tensor blackman_window(int64_t window_length, bool periodic, const TensorOptions& o) {
  return cosine_window("blackman_window", window_length, periodic, {0.42, -0.5, 0.08}, o);
}

// ---- stft / istft -------------------------------------------------------------------------------
Tensor stft(const Tensor& x0, int64_t n_fft, const StftOptions& o) {
  const char* api = "stft";
  detail::check_defined(api, x0);
  KILN_CHECK(x0.dim() == 1 || x0.dim() == 2, api, "expected a 1-d [L] or 2-d [B, L] input, got shape " << x0.shape());
  KILN_CHECK(
      is_floating(x0.dtype()), api,
      "expected a floating point input, got " << dtype_name(x0.dtype()).data() << " (complex input is not supported)");
  const int64_t hop = o.hop_length.value_or(n_fft / 4), win = o.win_length.value_or(n_fft);
  KILN_CHECK(n_fft > 0, api, "expected n_fft > 0, got " << n_fft);
  KILN_CHECK(hop > 0, api, "expected hop_length > 0, got " << hop);
  KILN_CHECK(win > 0 && win <= n_fft, api,
             "expected 0 < win_length <= n_fft, got win_length = " << win << ", n_fft = " << n_fft);
  Tensor x = x0.dim() == 1 ? x0.unsqueeze(0) : x0;
  if (o.center) {
    const int64_t p = n_fft / 2;
    // reflect/replicate/circular padding of a [B, L] signal (kiln::pad pads the last dim).
    x = kiln::pad(x, {p, p}, o.pad_mode);
  }
  const int64_t len = x.size(1);
  KILN_CHECK(n_fft <= len, api,
             "expected 0 < n_fft <= " << len << " (the " << (o.center ? "padded " : "")
                                      << "signal length), got n_fft = " << n_fft << " for input " << x0.shape());
  Tensor w = padded_window(api, o.window, win, n_fft, x.dtype(), x.device());
  const int64_t frames = 1 + (len - n_fft) / hop;
  x = x.contiguous();
  Tensor f =
      x.as_strided({x.size(0), frames, n_fft}, {x.stride(0), hop * x.stride(1), x.stride(1)}, x.storage_offset());
  f = f * w;
  const std::string norm = o.normalized ? "ortho" : "backward";
  Tensor z = o.onesided ? r2c(api, f, 2, norm) : c2c(api, fft::to_complex(f), 2, norm, false);
  z = z.transpose(1, 2);  // [B, freq, frames, 2]
  return x0.dim() == 1 ? z.squeeze(Dims{0}) : z;
}

Tensor istft(const Tensor& z0, int64_t n_fft, const IstftOptions& o) {
  const char* api = "istft";
  detail::check_defined(api, z0);
  KILN_CHECK((z0.dim() == 3 || z0.dim() == 4) && z0.size(-1) == 2, api,
             "expected a complex [freq, frames, 2] or [B, freq, frames, 2] input, got shape " << z0.shape());
  KILN_CHECK(z0.numel() > 0, api, "input cannot be empty, got shape " << z0.shape());
  KILN_CHECK(is_floating(z0.dtype()), api, "expected a floating point input, got " << dtype_name(z0.dtype()).data());
  const int64_t hop = o.hop_length.value_or(n_fft / 4), win = o.win_length.value_or(n_fft);
  KILN_CHECK(n_fft > 0, api, "expected n_fft > 0, got " << n_fft);
  KILN_CHECK(win > 0 && win <= n_fft, api,
             "expected 0 < win_length <= n_fft, got win_length = " << win << ", n_fft = " << n_fft);
  KILN_CHECK(hop > 0 && hop <= win, api,
             "expected 0 < hop_length <= win_length, got hop_length = " << hop << ", win_length = " << win);
  Tensor z = z0.dim() == 3 ? z0.unsqueeze(0) : z0;  // [B, freq, frames, 2]
  const int64_t B = z.size(0), nfreq = z.size(1), frames = z.size(2);
  const bool onesided = o.onesided.value_or(nfreq != n_fft);
  if (onesided)
    KILN_CHECK(nfreq == n_fft / 2 + 1, api,
               "expected the frequency dim to have size n_fft / 2 + 1 = " << n_fft / 2 + 1 << " (onesided), got shape "
                                                                          << z0.shape());
  else
    KILN_CHECK(nfreq == n_fft, api,
               "expected the frequency dim to have size n_fft = " << n_fft << " (two-sided), got shape " << z0.shape());
  Tensor w = padded_window(api, o.window, win, n_fft, z.dtype(), z.device());
  // A two-sided spectrum of a real signal: irfft reads its first n_fft/2+1 bins (as PyTorch).
  Tensor f = c2r(api, z.transpose(1, 2), 2, n_fft, o.normalized ? "ortho" : "backward");  // [B, frames, n_fft]
  f = f * w;
  const int64_t total = n_fft + hop * (frames - 1);
  Tensor idx = (arange(frames, i64, z.device()) * hop).unsqueeze(1) + arange(n_fft, i64, z.device());
  idx = idx.reshape({frames * n_fft});
  Tensor y =
      index_add(zeros({B, total}, {.dtype = f.dtype(), .device = f.device()}), 1, idx, f.reshape({B, frames * n_fft}));
  Tensor env = index_add(zeros({total}, {.dtype = f.dtype(), .device = f.device()}), 0, idx,
                         (w * w).expand({frames, n_fft}).reshape({frames * n_fft}));
  const int64_t start = o.center ? n_fft / 2 : 0;
  int64_t end = o.length ? start + *o.length : o.center ? total - n_fft / 2 : total;
  KILN_CHECK(!o.length || *o.length >= 0, api, "length must be non-negative, got " << *o.length);
  const int64_t stop = std::max(start, std::min(end, total));
  y = y.slice(1, start, stop);
  env = env.slice(0, start, stop);
  if (env.numel() > 0 && !env.device().is_null()) {  // a value check: needs a device holding data
    const double lo = kiln::abs(env).min().item<double>();
    KILN_CHECK(lo >= 1e-11, api,
               "window overlap add min: " << lo
                                          << " (the squared window summed over the frames vanishes somewhere; choose "
                                             "a window and hop_length that satisfy the NOLA condition)");
  }
  y = y / env;
  if (end > stop) y = kiln::pad(y, {0, end - stop});
  return z0.dim() == 3 ? y.squeeze(Dims{0}) : y;
}

}  // namespace kiln
