// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Discrete Fourier transforms (kiln::fft, like torch.fft) and the short-time Fourier transform
// with its window functions (kiln::stft, kiln::istft, kiln::hann_window, ...).
//
// Complex numbers: Kiln has no complex dtype yet. A complex tensor of shape [d0, ..., dk] is a
// real tensor of shape [d0, ..., dk, 2] holding (re, im) pairs, PyTorch's torch.view_as_real
// layout. Functions whose input is complex (fft, ifft, fft2, ifft2, fftn, ifftn, irfft, irfft2,
// irfftn, hfft, istft) take that layout, and their `dim` / `dims` arguments index the complex
// shape [d0, ..., dk] (the trailing 2 is not a dim of it; -1 is dk). Complex results use the
// same layout. Real-input functions (rfft, rfft2, rfftn, ihfft, stft) take plain real tensors.
// So torch.fft.fft(x) on a real x ports as fft::fft(fft::to_complex(x)), and
// torch.view_as_real(torch.fft.rfft(x)) as fft::rfft(x).
//
// dtypes: f32 and f64 compute in their own precision, f16/bf16 compute in f32 and round the
// result; integer inputs are converted to f32 first. Any length n works (mixed radix for
// lengths with small prime factors, Bluestein's algorithm otherwise).
//
// norm: "backward" (default; the forward transform is unscaled, the inverse scales by 1/n),
// "ortho" (1/sqrt(n) both ways) or "forward" (the forward transform scales by 1/n).
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln::fft {

// ---- complex helpers ([..., 2] layout) -----------------------------------------------------

/// Real x [...] -> complex [..., 2] with a zero imaginary part (integers become f32).
Tensor to_complex(const Tensor& x);
/// re [...], im [...] (broadcast together, same dtype after promotion) -> complex [..., 2].
Tensor complex(const Tensor& re, const Tensor& im);
/// Complex z [..., 2] -> its real part [...] (a view).
Tensor real(const Tensor& z);
/// Complex z [..., 2] -> its imaginary part [...] (a view).
Tensor imag(const Tensor& z);
/// Complex z [..., 2] -> |z| [...] (hypot(re, im)).
Tensor abs(const Tensor& z);
/// Complex z [..., 2] -> arg(z) [...] in (-pi, pi] (atan2(im, re)).
Tensor angle(const Tensor& z);
/// Complex z [..., 2] -> its conjugate [..., 2].
Tensor conj(const Tensor& z);
/// Complex product of a [..., 2] and b [..., 2] (the complex shapes broadcast) -> [..., 2].
Tensor mul(const Tensor& a, const Tensor& b);

// ---- one-dimensional transforms -------------------------------------------------------------

/// Complex z [..., n, ..., 2] -> complex DFT along complex dim `dim`. With `n`, the input is
/// first trimmed or zero-padded to n points along dim (n >= 1).
Tensor fft(const Tensor& z, std::optional<int64_t> n = {}, int64_t dim = -1, const std::string& norm = "backward");
/// Inverse of fft: complex [..., n, ..., 2] -> complex, same contract.
Tensor ifft(const Tensor& z, std::optional<int64_t> n = {}, int64_t dim = -1, const std::string& norm = "backward");
/// Real x [..., n, ...] -> the non-negative half of its spectrum, complex [..., n/2+1, ..., 2].
/// `n` trims or zero-pads x along dim first.
Tensor rfft(const Tensor& x, std::optional<int64_t> n = {}, int64_t dim = -1, const std::string& norm = "backward");
/// Inverse of rfft: complex [..., m, ..., 2] (a Hermitian half spectrum) -> real [..., n, ...]
/// with n = 2 * (m - 1) by default. Reads the first n/2+1 bins (missing ones count as zero);
/// the imaginary parts of bin 0 and (even n) bin n/2 are ignored.
Tensor irfft(const Tensor& z, std::optional<int64_t> n = {}, int64_t dim = -1, const std::string& norm = "backward");
/// Complex half spectrum z [..., m, ..., 2] of a Hermitian signal -> its real DFT [..., n, ...]
/// (n = 2 * (m - 1) by default): irfft of conj(z) with the forward normalisation.
Tensor hfft(const Tensor& z, std::optional<int64_t> n = {}, int64_t dim = -1, const std::string& norm = "backward");
/// Inverse of hfft: real x [..., n, ...] -> complex [..., n/2+1, ..., 2].
Tensor ihfft(const Tensor& x, std::optional<int64_t> n = {}, int64_t dim = -1, const std::string& norm = "backward");

// ---- multi-dimensional transforms -----------------------------------------------------------
// `s` gives the signal size per transformed dim (-1 keeps that dim's size); with no `dim`, the
// last s.size() dims are transformed (fftn/rfftn/irfftn: all dims when s is absent too).

/// Complex z -> 2-d DFT over complex dims `dim` (default the last two).
Tensor fft2(const Tensor& z, std::optional<Shape> s = {}, const Dims& dim = {-2, -1},
            const std::string& norm = "backward");
/// Inverse of fft2.
Tensor ifft2(const Tensor& z, std::optional<Shape> s = {}, const Dims& dim = {-2, -1},
             const std::string& norm = "backward");
/// Real x -> complex 2-d DFT, the last of `dim` halved to n/2+1 bins.
Tensor rfft2(const Tensor& x, std::optional<Shape> s = {}, const Dims& dim = {-2, -1},
             const std::string& norm = "backward");
/// Inverse of rfft2: complex -> real; the last of `dim` gets s.back() or 2 * (m - 1) points.
Tensor irfft2(const Tensor& z, std::optional<Shape> s = {}, const Dims& dim = {-2, -1},
              const std::string& norm = "backward");
/// Complex z -> n-d DFT over `dim` (default: see above).
Tensor fftn(const Tensor& z, std::optional<Shape> s = {}, std::optional<Dims> dim = {},
            const std::string& norm = "backward");
/// Inverse of fftn.
Tensor ifftn(const Tensor& z, std::optional<Shape> s = {}, std::optional<Dims> dim = {},
             const std::string& norm = "backward");
/// Real x -> complex n-d DFT, the last of `dim` halved to n/2+1 bins.
Tensor rfftn(const Tensor& x, std::optional<Shape> s = {}, std::optional<Dims> dim = {},
             const std::string& norm = "backward");
/// Inverse of rfftn: complex -> real.
Tensor irfftn(const Tensor& z, std::optional<Shape> s = {}, std::optional<Dims> dim = {},
              const std::string& norm = "backward");

// ---- helpers ---------------------------------------------------------------------------------

/// Sample frequencies of an n-point DFT with sample spacing d: [0, 1, ..., -(n/2), ..., -1] /
/// (d * n), shape [n]. dtype must be floating (default f32).
Tensor fftfreq(int64_t n, double d = 1.0, const TensorOptions& o = {});
/// Sample frequencies of rfft: [0, 1, ..., n/2] / (d * n), shape [n/2+1].
Tensor rfftfreq(int64_t n, double d = 1.0, const TensorOptions& o = {});
/// Moves the zero-frequency term to the centre: rolls each of `dims` (default all dims of x)
/// by size/2. Works on any tensor and `dims` index x's own dims: for a complex [..., 2] tensor
/// pass the complex dims explicitly (fftshift(z, Dims{-2}) shifts the last complex dim).
Tensor fftshift(const Tensor& x, std::optional<Dims> dims = {});
/// Inverse of fftshift (rolls by -(size/2)).
Tensor ifftshift(const Tensor& x, std::optional<Dims> dims = {});

}  // namespace kiln::fft

namespace kiln {

// ---- window functions (torch.hann_window, ...) -----------------------------------------------
// A window of `window_length` points; periodic = true computes window_length + 1 points of the
// symmetric window and drops the last (the form stft wants). Length 0 -> empty, 1 -> [1].

/// 0.5 - 0.5 cos(2 pi k / N).
Tensor hann_window(int64_t window_length, bool periodic = true, const TensorOptions& o = {});
/// alpha - beta cos(2 pi k / N).
Tensor hamming_window(int64_t window_length, bool periodic = true, double alpha = 0.54, double beta = 0.46,
                      const TensorOptions& o = {});
/// 0.42 - 0.5 cos(2 pi k / N) + 0.08 cos(4 pi k / N).
Tensor blackman_window(int64_t window_length, bool periodic = true, const TensorOptions& o = {});

/// Options of stft (torch.stft's keyword arguments).
struct StftOptions {
  std::optional<int64_t> hop_length{};  ///< default n_fft / 4
  std::optional<int64_t> win_length{};  ///< default n_fft; the window is zero-padded to n_fft, centred
  Tensor window{};                      ///< 1-d of win_length; undefined = rectangular (ones)
  bool center = true;                   ///< pad n_fft / 2 on both sides so frame t is centred at t * hop
  std::string pad_mode = "reflect";     ///< padding mode when center (see kiln::pad)
  bool normalized = false;              ///< multiply by n_fft^-0.5
  bool onesided = true;                 ///< n_fft / 2 + 1 frequencies (false: all n_fft)
};
/// Short-time Fourier transform of real x [L] or [B, L] -> complex [(B,) freq, frames, 2] with
/// freq = n_fft/2+1 (onesided) or n_fft, frames = 1 + (L' - n_fft) / hop (L' = L + 2 * (n_fft / 2)
/// when center). This is torch.view_as_real(torch.stft(x, ..., return_complex=True)).
Tensor stft(const Tensor& x, int64_t n_fft, const StftOptions& o = {});

/// Options of istft (torch.istft's keyword arguments).
struct IstftOptions {
  std::optional<int64_t> hop_length{};  ///< default n_fft / 4
  std::optional<int64_t> win_length{};  ///< default n_fft
  Tensor window{};                      ///< undefined = rectangular (ones)
  bool center = true;
  bool normalized = false;
  std::optional<bool> onesided{};   ///< default: freq != n_fft
  std::optional<int64_t> length{};  ///< trim or zero-pad the output to this many samples
};
/// Inverse of stft: complex z [(B,) freq, frames, 2] -> real [(B,) L] by inverse FFT of every
/// frame, windowing, overlap-add and division by the overlap-added squared window (which must
/// stay above 1e-11 over the output: the NOLA condition). istft(stft(x, n, o), n, o) == x.
Tensor istft(const Tensor& z, int64_t n_fft, const IstftOptions& o = {});

}  // namespace kiln
