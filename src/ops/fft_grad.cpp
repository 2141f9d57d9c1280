// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the fft ops (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
//
// Complex tensors are real [..., 2] tensors, and the gradient of a real loss with respect to
// one is the [..., 2] pair (dL/dre, dL/dim), i.e. the conjugate Wirtinger gradient as PyTorch
// defines it. For a linear map y = M z that gradient is M^H gy, so (with s the op's scale and
// theta = 2 pi j k / n):
//   Fft:   y = s F z (F the unscaled DFT, e^-i theta forward, e^+i theta inverse)
//          -> gz = s F^H gy, the unscaled transform in the other direction times s.
//   Rfft:  y_k = s sum_j x_j e^-i theta (k < m = n/2+1)
//          -> gx_j = s Re sum_{k<m} gy_k e^+i theta: the real part of the unscaled inverse DFT of
//          gy zero-padded to n bins.
//   Irfft: x_j = s Re sum_{k<h} c_k z_k e^+i theta (h = n/2+1 bins read, c_k = 2 for the bins
//          whose conjugates are implied, 0 < k <= (n-1)/2, and 1 for bin 0 and bin n/2 of an
//          even n; the ignored imaginary parts of those bins have sin(theta) = 0 weights)
//          -> gz_k = s c_k sum_j gx_j e^-i theta = s c_k rfft(gx)_k, trimmed or zero-padded
//          to the m input bins.
// These are PyTorch's fft_c2c / fft_r2c / fft_c2r backward formulas.
#include <cmath>
#include <string>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
[[maybe_unused]] void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
[[maybe_unused]] void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }

/// The complex DFT along complex dim d (e^-i theta, or e^+i theta when inverse) scaled by s.
/// Uses the norm whose scaling is s when there is one, else the unscaled transform times s.
Tensor dft(const Tensor& z, int64_t d, bool inverse, double s) {
  const double n = static_cast<double>(z.size(d));
  std::string norm;
  if (s == 1.0)
    norm = inverse ? "forward" : "backward";
  else if (std::abs(s * n - 1.0) < 1e-12)
    norm = inverse ? "backward" : "forward";
  else if (std::abs(s * s * n - 1.0) < 1e-12)
    norm = "ortho";
  const std::string& nm = norm.empty() ? (inverse ? std::string("forward") : std::string("backward")) : norm;
  Tensor r = inverse ? fft::ifft(z, std::nullopt, d, nm) : fft::fft(z, std::nullopt, d, nm);
  return norm.empty() ? r * s : r;
}

/// t trimmed or zero-padded to n entries along (actual) dim d.
Tensor resize_dim(const Tensor& t, int64_t d, int64_t n) {
  const int64_t cur = t.size(d);
  if (n == cur) return t;
  if (n < cur) return t.narrow(d, 0, n);
  Shape pads(static_cast<size_t>(2 * (t.dim() - d)), 0);
  pads.back() = n - cur;
  return pad(t, pads);
}
}  // namespace

void register_fft_grads() {
  using K = ir::OpKind;

  // Fft(z) ints = {dim, inverse}, reals = {scale}.
  rule(K::Fft, kSaveNothing, [](C c) -> V {
    if (!c.needs(0) || !c.grads[0].defined()) return {Tensor()};
    const ir::FftAttrs a = ir::FftAttrs::decode(c.op);
    return {dft(c.grads[0], a.dim, !a.inverse, a.scale)};
  });

  // Rfft(x real [..., n, ...]) ints = {dim}, reals = {scale} -> complex [..., n/2+1, ..., 2].
  rule(K::Rfft, kSaveNothing, [](C c) -> V {
    if (!c.needs(0) || !c.grads[0].defined()) return {Tensor()};
    const ir::FftAttrs a = ir::FftAttrs::decode(c.op);
    const int64_t d = a.dim;
    const int64_t n = c.op.inputs[0].shape[static_cast<size_t>(d)];
    Tensor g = resize_dim(c.grads[0], d, n);
    return {dft(g, d, /*inverse=*/true, a.scale).select(-1, 0)};
  });

  // Irfft(z [..., m, ..., 2]) ints = {dim, n}, reals = {scale} -> real [..., n, ...].
  rule(K::Irfft, kSaveNothing, [](C c) -> V {
    if (!c.needs(0) || !c.grads[0].defined()) return {Tensor()};
    const ir::FftAttrs a = ir::FftAttrs::decode(c.op);
    const int64_t d = a.dim, n = a.n;
    const double s = a.scale;
    const int64_t m = c.op.inputs[0].shape[static_cast<size_t>(d)];
    const Tensor& g = c.grads[0];
    Tensor G = fft::rfft(g, std::nullopt, d, "backward");  // [..., n/2+1, ..., 2], unscaled
    const int64_t h = n / 2 + 1;
    std::vector<double> w(static_cast<size_t>(h), s);
    for (int64_t k = 1; k <= (n - 1) / 2; ++k) w[static_cast<size_t>(k)] = 2 * s;
    Shape ws(static_cast<size_t>(G.dim()), 1);
    ws[static_cast<size_t>(d)] = h;
    G = G * tensor(w, ws, g.device()).to(g.dtype());
    return {resize_dim(G, d, m)};
  });
}

}  // namespace kiln::autodiff
