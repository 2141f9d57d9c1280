// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX signal ops: DFT (forward, inverse, one-sided, with a length) and STFT, as products with
// cosine and sine tables in f64 (O(n^2) per transform: meant for the short signals and frames
// of audio front ends, not for long FFTs).
#include <cmath>

#include "kiln/matmul.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

/// cos and sin of 2 pi k t / len for k in [0, bins), t in [0, n): two [bins, n] f64 tables.
std::pair<Tensor, Tensor> tables(int64_t bins, int64_t n, int64_t len, const Device& dev) {
  Tensor k = arange(bins, f64, dev).reshape({bins, 1}), t = arange(n, f64, dev).reshape({1, n});
  // k * t mod len keeps the angle small (exact in f64 for these sizes), so the tables are accurate.
  Tensor angle = remainder(k * t, static_cast<double>(len)) * (2 * M_PI / static_cast<double>(len));
  return {cos(angle), sin(angle)};
}

/// The real and imaginary parts of a signal [..., n, 1 or 2] as f64 tensors [..., n], along
/// `axis` moved last and cut or zero-padded to len.
std::pair<Tensor, Tensor> parts_along(const Tensor& x, int64_t axis, int64_t len) {
  Tensor re = x.select(-1, 0).to(f64);
  Tensor im = x.size(-1) == 2 ? x.select(-1, 1).to(f64) : zeros_like(re);
  re = movedim(re, {axis}, {-1});
  im = movedim(im, {axis}, {-1});
  const int64_t n = re.size(-1);
  if (n > len) {
    re = re.narrow(-1, 0, len);
    im = im.narrow(-1, 0, len);
  } else if (n < len) {
    re = pad(re, {0, len - n});
    im = pad(im, {0, len - n});
  }
  return {re, im};
}

/// DFT of x [..., n, 1 or 2] along axis (of the rank without the last dim): forward (bins: len,
/// or len / 2 + 1 one-sided) or inverse (complex, or real from one-sided bins), as
/// [..., bins, 2] (or [..., len, 1] for a one-sided inverse) in x's dtype.
Tensor dft(const Tensor& x, int64_t axis, int64_t len, bool inverse, bool onesided) {
  const Device dev = x.device();
  Tensor y;
  if (!inverse) {
    auto [re, im] = parts_along(x, axis, len);
    const int64_t bins = onesided ? len / 2 + 1 : len;
    auto [c, s] = tables(bins, len, len, dev);
    Tensor yr = matmul(re, c.t()) + matmul(im, s.t()), yi = matmul(im, c.t()) - matmul(re, s.t());
    y = stack({movedim(yr, {-1}, {axis}), movedim(yi, {-1}, {axis})}, -1);
  } else if (!onesided) {
    auto [re, im] = parts_along(x, axis, len);
    auto [c, s] = tables(len, len, len, dev);
    Tensor yr = (matmul(re, c.t()) - matmul(im, s.t())) / static_cast<double>(len);
    Tensor yi = (matmul(re, s.t()) + matmul(im, c.t())) / static_cast<double>(len);
    y = stack({movedim(yr, {-1}, {axis}), movedim(yi, {-1}, {axis})}, -1);
  } else {
    // One-sided bins 0..len/2 of a real signal: the others are their conjugates. The DC bin
    // (and the Nyquist bin of an even length) counts once and only its real part; the imaginary
    // parts there are ignored, as NumPy's irfft.
    const int64_t bins = len / 2 + 1;
    auto [re, im] = parts_along(x, axis, bins);
    Tensor w = full({bins}, 2.0, {.dtype = f64, .device = dev});
    w = where(arange(bins, i64, dev) == 0, full({}, 1.0, {.dtype = f64, .device = dev}), w);
    if (len % 2 == 0) w = where(arange(bins, i64, dev) == bins - 1, full({}, 1.0, {.dtype = f64, .device = dev}), w);
    Tensor imw = where(w == 1.0, zeros_like(im), im);
    auto [c, s] = tables(bins, len, len, dev);  // [bins, len]
    Tensor yr = (matmul(re * w, c) - matmul(imw * w, s)) / static_cast<double>(len);
    y = movedim(yr, {-1}, {axis}).unsqueeze(-1);
  }
  return y.to(x.dtype());
}

void dft_op(OpContext& c) {
  const Tensor& x = c.x(0);
  c.check(x.dim() >= 2 && (x.size(-1) == 1 || x.size(-1) == 2),
          "input [..., signal, 1 or 2] expected, got " + to_string(x.shape()));
  const int64_t rank = x.dim() - 1;  // the signal's rank, without the real / imaginary dim
  int64_t axis = c.opset >= 20 ? (c.has(2) ? c.ints_in(2).at(0) : -2) : c.attr_i("axis", 1);
  if (c.opset >= 20 && axis < 0) axis += x.dim();  // opset 20 counts the last dim too
  if (axis < 0) axis += rank;
  c.check(axis >= 0 && axis < rank, "axis out of range for " + to_string(x.shape()));
  const bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
  c.check(!(onesided && !inverse && x.size(-1) == 2), "a one-sided forward DFT needs a real input");
  int64_t len = inverse && onesided ? 2 * (x.size(axis) - 1) : x.size(axis);
  if (c.has(1)) len = c.ints_in(1).at(0);
  c.check(len >= 1, "dft_length must be positive");
  c.set(0, dft(x, axis, len, inverse, onesided));
}

/// signal [batch, length, 1 or 2], frame_step, optional window [frame_length] and frame_length
/// -> [batch, frames, bins, 2]: the DFT of each windowed frame (one-sided by default).
void stft_op(OpContext& c) {
  const Tensor& x = c.x(0);
  c.check(x.dim() == 3 && (x.size(2) == 1 || x.size(2) == 2),
          "signal [batch, length, 1 or 2] expected, got " + to_string(x.shape()));
  const int64_t step = c.ints_in(1).at(0);
  const Tensor window = c.has(2) ? c.x(2) : Tensor{};
  int64_t flen = c.has(3) ? c.ints_in(3).at(0) : (window.defined() ? window.numel() : 0);
  c.check(flen >= 1 && step >= 1, "STFT needs a frame_length (or a window) and a positive frame_step");
  c.check(!window.defined() || window.numel() == flen, "the window's length must be frame_length");
  const int64_t frames = (x.size(1) - flen) / step + 1;
  c.check(x.size(1) >= flen, "the signal is shorter than one frame");
  const bool onesided = c.attr_i("onesided", 1) != 0;
  c.check(!(onesided && x.size(2) == 2), "a one-sided STFT needs a real signal");
  // frames as [batch, frames, frame_length, 1 or 2], gathered by index
  Tensor idx =
      (arange(frames, i64, x.device()).reshape({frames, 1}) * step + arange(flen, i64, x.device()).reshape({1, flen}))
          .reshape({-1});
  Tensor fr = index_select(x, 1, idx).reshape({x.size(0), frames, flen, x.size(2)});
  if (window.defined()) fr = fr * window.to(fr.dtype()).reshape({1, 1, flen, 1});
  c.set(0, dft(fr, 2, flen, false, onesided));
}

}  // namespace

void register_signal(Registry& r) {
  r["DFT"] = dft_op;
  r["STFT"] = stft_op;
}

}  // namespace kiln::onnx
