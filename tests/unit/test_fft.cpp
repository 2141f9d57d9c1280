// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::fft against a naive O(n^2) DFT in long double, round trips, Parseval, strided inputs,
// dtypes, errors and thread-count independence. (PyTorch comparisons: tests/conformance.)
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

std::vector<double> randv(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// Naive DFT of n complex values (interleaved), sign -1 forward, +1 inverse (unscaled).
std::vector<double> naive_dft(const std::vector<double>& x, bool inverse) {
  const size_t n = x.size() / 2;
  std::vector<double> y(2 * n);
  const long double sg = inverse ? 1 : -1;
  for (size_t k = 0; k < n; ++k) {
    long double re = 0, im = 0;
    for (size_t t = 0; t < n; ++t) {
      const long double a = sg * 2 * std::numbers::pi_v<long double> * static_cast<long double>((k * t) % n) /
                            static_cast<long double>(n);
      const long double c = std::cos(a), s = std::sin(a);
      re += x[2 * t] * c - x[2 * t + 1] * s;
      im += x[2 * t] * s + x[2 * t + 1] * c;
    }
    y[2 * k] = static_cast<double>(re);
    y[2 * k + 1] = static_cast<double>(im);
  }
  return y;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}

Tensor t64(const std::vector<double>& v, const Shape& s) { return tensor<double>(v, s); }

}  // namespace

TEST(Fft, MatchesNaiveDftEveryLength) {
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 40; ++n) ns.push_back(n);
  for (int64_t n : {49, 60, 64, 97, 100, 121, 128, 210, 243, 256, 257, 289, 341, 500, 512, 961, 997, 1000, 1024})
    ns.push_back(n);
  for (int64_t n : ns) {
    auto x = randv(2 * static_cast<size_t>(n), static_cast<uint32_t>(n));
    auto ref = naive_dft(x, false);
    auto got = fft::fft(t64(x, {n, 2}), {}, 0).to_vector<double>();
    const double scale = max_abs(ref) + 1;
    EXPECT_LT(max_abs_diff(got, ref), 1e-13 * scale * std::log2(n + 1.0) + 1e-14) << "n=" << n;
    auto inv = fft::ifft(t64(x, {n, 2})).to_vector<double>();
    auto iref = naive_dft(x, true);
    for (auto& v : iref) v /= static_cast<double>(n);
    EXPECT_LT(max_abs_diff(inv, iref), 1e-13 * (max_abs(iref) + 1) * std::log2(n + 1.0)) << "n=" << n;
    // f32: comparable to pocketfft (relative to the largest output)
    auto got32 = fft::fft(t64(x, {n, 2}).to(f32)).to_vector<double>();
    EXPECT_LT(max_abs_diff(got32, ref), 2e-6 * scale * std::log2(n + 1.0)) << "f32 n=" << n;
  }
}

TEST(Fft, RoundTrips) {
  for (int64_t n : {1, 2, 3, 5, 7, 8, 12, 16, 17, 97, 100, 128, 257, 1031}) {
    Tensor x = randn({3, n, 2}, {.dtype = f64});
    EXPECT_TRUE(allclose(fft::ifft(fft::fft(x, {}, 1), {}, 1), x, 1e-12, 1e-12)) << n;
    for (const char* norm : {"backward", "ortho", "forward"})
      EXPECT_TRUE(allclose(fft::ifft(fft::fft(x, {}, -1, norm), {}, -1, norm), x, 1e-12, 1e-12)) << n << norm;
    Tensor r = randn({2, n}, {.dtype = f64});
    EXPECT_TRUE(allclose(fft::irfft(fft::rfft(r), n), r, 1e-12, 1e-12)) << n;
    Tensor rf = randn({2, n}, {.dtype = f32});
    EXPECT_TRUE(allclose(fft::irfft(fft::rfft(rf), n), rf, 1e-4, 1e-5)) << n;
    EXPECT_TRUE(allclose(fft::hfft(fft::ihfft(r), n), r, 1e-12, 1e-12)) << n;
  }
  Tensor x = randn({6, 5, 4, 2}, {.dtype = f64});
  EXPECT_TRUE(allclose(fft::ifftn(fft::fftn(x)), x, 1e-12, 1e-12));
  Tensor r = randn({4, 6, 7}, {.dtype = f64});
  EXPECT_TRUE(allclose(fft::irfftn(fft::rfftn(r), Shape{4, 6, 7}), r, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(fft::irfft2(fft::rfft2(r), Shape{6, 7}), r, 1e-12, 1e-12));
}

TEST(Fft, Parseval) {
  for (int64_t n : {16, 30, 97}) {
    Tensor x = randn({4, n, 2}, {.dtype = f64});
    Tensor X = fft::fft(x, {}, 1);
    double ex = (x * x).sum().item<double>(), eX = (X * X).sum().item<double>() / static_cast<double>(n);
    EXPECT_NEAR(ex, eX, 1e-10 * ex);
    Tensor Xo = fft::fft(x, {}, 1, "ortho");
    EXPECT_NEAR(ex, (Xo * Xo).sum().item<double>(), 1e-10 * ex);
  }
}

TEST(Fft, RealInputAgreesWithComplex) {
  for (int64_t n : {1, 2, 9, 10, 31, 97}) {
    Tensor r = randn({3, n}, {.dtype = f64});
    Tensor full = fft::fft(fft::to_complex(r));
    EXPECT_TRUE(allclose(fft::rfft(r), full.narrow(1, 0, n / 2 + 1), 1e-12, 1e-12)) << n;
    // hfft of a Hermitian half spectrum is the real DFT.
    Tensor h = fft::ihfft(r);
    EXPECT_TRUE(allclose(fft::hfft(h, n), r, 1e-12, 1e-12)) << n;
  }
}

TEST(Fft, StridedInputsAndDims) {
  Tensor base = randn({5, 6, 7, 2}, {.dtype = f64});
  // dim in the middle, non-contiguous (transposed and flipped) views
  Tensor v = base.transpose(0, 2).flip(Dims{1});  // [7, 6, 5, 2]
  Tensor a = fft::fft(v, {}, 1), b = fft::fft(v.contiguous(), {}, 1);
  EXPECT_TRUE(allclose(a, b, 1e-14, 1e-14));
  // trailing (re, im) dim with a non-unit stride
  Tensor t = randn({2, 9, 3}, {.dtype = f64}).transpose(0, 2);  // [3, 9, 2], re/im stride 27
  EXPECT_TRUE(allclose(fft::fft(t, {}, 1), fft::fft(t.contiguous(), {}, 1), 1e-14, 1e-14));
  Tensor r = randn({8, 12}, {.dtype = f32}).t();
  EXPECT_TRUE(allclose(fft::rfft(r, {}, 0), fft::rfft(r.contiguous(), {}, 0), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(fft::irfft(fft::rfft(r, {}, 0), 12, 0), r, 1e-5, 1e-5));
  // expanded input (stride 0)
  Tensor e = randn({1, 10, 2}, {.dtype = f64}).expand({4, 10, 2});
  Tensor fe = fft::fft(e, {}, 1);
  EXPECT_TRUE(allclose(fe.select(0, 3), fft::fft(e.select(0, 0)), 1e-14, 1e-14));
  // negative dims count from the last complex dim
  EXPECT_TRUE(allclose(fft::fft(base, {}, -3), fft::fft(base, {}, 0), 0, 0));
}

TEST(Fft, PadAndTrim) {
  Tensor x = randn({10, 2}, {.dtype = f64});
  Tensor padded = cat({x, zeros({6, 2}, {.dtype = f64})}, 0);
  EXPECT_TRUE(allclose(fft::fft(x, 16), fft::fft(padded), 1e-14, 1e-14));
  EXPECT_TRUE(allclose(fft::fft(x, 4), fft::fft(x.narrow(0, 0, 4)), 1e-14, 1e-14));
  Tensor r = randn({10}, {.dtype = f64});
  EXPECT_EQ(fft::rfft(r, 7).shape(), (Shape{4, 2}));
  EXPECT_EQ(fft::irfft(fft::rfft(r)).shape(), (Shape{10}));
  EXPECT_EQ(fft::irfft(fft::rfft(r), 25).shape(), (Shape{25}));
  EXPECT_EQ(fft::fft2(randn({3, 4, 5, 2}), Shape{6, 2}).shape(), (Shape{3, 6, 2, 2}));
  EXPECT_EQ(fft::rfftn(randn({3, 4, 5})).shape(), (Shape{3, 4, 3, 2}));
  EXPECT_EQ(fft::irfftn(randn({3, 4, 3, 2}), Shape{-1, 5}).shape(), (Shape{3, 4, 5}));
}

TEST(Fft, HalfAndIntegerInputs) {
  Tensor x = randn({4, 24, 2});
  for (DType dt : {f16, bf16}) {
    Tensor y = fft::fft(x.to(dt), {}, 1);
    EXPECT_EQ(y.dtype(), dt);
    Tensor ref = fft::fft(x.to(dt).to(f32), {}, 1);
    EXPECT_TRUE(allclose(y.to(f32), ref, dt == f16 ? 4e-3 : 2e-2, 5e-2));
  }
  Tensor i = arange(8, i64);
  EXPECT_EQ(fft::rfft(i).dtype(), f32);
  EXPECT_EQ(fft::to_complex(i).dtype(), f32);
  EXPECT_NEAR(fft::rfft(i).select(0, 0).select(0, 0).item<double>(), 28.0, 1e-5);
}

TEST(Fft, ComplexHelpers) {
  Tensor re = tensor<float>({3, 0, -1}, {3}), im = tensor<float>({4, 2, 0}, {3});
  Tensor z = fft::complex(re, im);
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_TRUE(allclose(fft::abs(z), tensor<float>({5, 2, 1}, {3})));
  EXPECT_TRUE(allclose(fft::real(z), re));
  EXPECT_TRUE(allclose(fft::imag(fft::conj(z)), -im));
  EXPECT_TRUE(allclose(fft::angle(z).select(0, 1), scalar_tensor(std::numbers::pi / 2), 1e-6));
  Tensor p = fft::mul(z, fft::conj(z));  // |z|^2 + 0i
  EXPECT_TRUE(allclose(fft::real(p), tensor<float>({25, 4, 1}, {3})));
  EXPECT_TRUE(allclose(fft::imag(p), zeros({3})));
  // convolution theorem: circular convolution via rfft
  Tensor a = randn({16}, {.dtype = f64}), b = randn({16}, {.dtype = f64});
  Tensor c = fft::irfft(fft::mul(fft::rfft(a), fft::rfft(b)), 16);
  auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  for (int k = 0; k < 16; ++k) {
    double s = 0;
    for (int j = 0; j < 16; ++j) s += av[j] * bv[(k - j + 16) % 16];
    EXPECT_NEAR(cv[k], s, 1e-12);
  }
}

TEST(Fft, FreqAndShift) {
  EXPECT_TRUE(allclose(fft::fftfreq(5), tensor<float>({0, 0.2f, 0.4f, -0.4f, -0.2f}, {5})));
  EXPECT_TRUE(allclose(fft::fftfreq(4, 0.5), tensor<float>({0, 0.5f, -1, -0.5f}, {4})));
  EXPECT_TRUE(allclose(fft::rfftfreq(5, 2.0, {.dtype = f64}), tensor<double>({0, 0.1, 0.2}, {3})));
  Tensor f = fft::fftfreq(7);
  EXPECT_TRUE(allclose(fft::ifftshift(fft::fftshift(f)), f, 0, 0));
  EXPECT_TRUE(allclose(fft::fftshift(fft::fftfreq(4)), tensor<float>({-0.5f, -0.25f, 0, 0.25f}, {4})));
}

TEST(Fft, Windows) {
  auto h = hann_window(4).to_vector<float>();
  EXPECT_NEAR(h[0], 0, 1e-7);
  EXPECT_NEAR(h[1], 0.5, 1e-7);
  EXPECT_NEAR(h[2], 1, 1e-7);
  auto hs = hann_window(5, false, {.dtype = f64}).to_vector<double>();
  EXPECT_NEAR(hs[4], 0, 1e-15);
  EXPECT_NEAR(hs[2], 1, 1e-15);
  EXPECT_EQ(hann_window(0).numel(), 0);
  EXPECT_EQ(blackman_window(1).item<float>(), 1.0f);
  EXPECT_NEAR(hamming_window(8).to_vector<float>()[0], 0.08, 1e-7);
  expect_error([] { hann_window(-1); }, "hann_window");
  expect_error([] { hann_window(4, true, {.dtype = i32}); }, "hann_window");
}

TEST(Fft, StftRoundTrip) {
  Tensor x = randn({2, 400}, {.dtype = f64});
  for (int64_t n_fft : {64, 50, 33}) {
    for (int w = 0; w < 3; ++w) {
      Tensor win = w == 0   ? hann_window(n_fft, true, {.dtype = f64})
                   : w == 1 ? hamming_window(n_fft, true, 0.54, 0.46, {.dtype = f64})
                            : blackman_window(n_fft, true, {.dtype = f64});
      Tensor z = stft(x, n_fft, {.window = win});
      EXPECT_EQ(z.shape(), (Shape{2, n_fft / 2 + 1, 1 + (400 + 2 * (n_fft / 2) - n_fft) / (n_fft / 4), 2}));
      Tensor y = istft(z, n_fft, {.window = win, .length = 400});
      EXPECT_TRUE(allclose(y, x, 1e-10, 1e-10)) << n_fft << " " << w;
    }
  }
  // 1-d signal, rectangular window, no centring, two-sided, normalized
  Tensor s = randn({300}, {.dtype = f64});
  Tensor z = stft(s, 40, {.hop_length = 10, .center = false, .normalized = true, .onesided = false});
  EXPECT_EQ(z.shape(), (Shape{40, 27, 2}));
  Tensor y = istft(z, 40, {.hop_length = 10, .center = false, .normalized = true});
  EXPECT_EQ(y.shape(), (Shape{300}));
  EXPECT_TRUE(allclose(y, s, 1e-10, 1e-10));
  // shorter window, zero-padded to n_fft
  Tensor w = hann_window(48, true, {.dtype = f64});
  Tensor z2 = stft(x, 64, {.hop_length = 12, .win_length = 48, .window = w});
  EXPECT_TRUE(
      allclose(istft(z2, 64, {.hop_length = 12, .win_length = 48, .window = w, .length = 400}), x, 1e-10, 1e-10));
}

TEST(Fft, Errors) {
  Tensor z = randn({4, 8, 2});
  expect_error([&] { fft::fft(z, {}, 2); }, "fft.fft", "out of range");
  expect_error([&] { fft::fft(z, {}, -3); }, "fft.fft");
  expect_error([&] { fft::fft(z, 0); }, "fft.fft", "invalid number of data points");
  expect_error([&] { fft::ifft(z, -2); }, "fft.ifft");
  expect_error([&] { fft::fft(randn({4, 3})); }, "fft.fft", "[..., 2]");
  expect_error([&] { fft::fft(randn({2})); }, "fft.fft", "[..., 2]");
  expect_error([&] { fft::irfft(randn({4, 3})); }, "fft.irfft", "[..., 2]");
  expect_error([&] { fft::irfft(randn({1, 2})); }, "fft.irfft", "invalid number of data points (0)");
  expect_error([&] { fft::rfft(scalar_tensor(1.0)); }, "fft.rfft");
  expect_error([&] { fft::rfft(randn({4}), 0); }, "fft.rfft");
  expect_error([&] { fft::rfft(randn({0})); }, "fft.rfft");
  expect_error([&] { fft::fft(z, {}, -1, "bogus"); }, "fft.fft", "normalization");
  expect_error([&] { fft::fft2(randn({8, 2})); }, "fft.fft2");  // one complex dim only
  expect_error([&] { fft::fftn(z, Shape{4, 4, 4}); }, "fft.fftn");
  expect_error([&] { fft::fftn(z, {}, Dims{0, 0}); }, "fft.fftn", "unique");
  expect_error([&] { fft::fft(Tensor()); }, "fft.fft");
  expect_error([&] { stft(randn({3, 4, 5}), 4); }, "stft");
  expect_error([&] { stft(randn({10}), 32, {.center = false}); }, "stft", "n_fft");
  expect_error([&] { stft(randn({100}), 16, {.window = ones({10})}); }, "stft", "window");
  expect_error([&] { istft(randn({9, 5, 2}), 32); }, "istft");
  expect_error(
      [&] {
        istft(randn({17, 5, 2}), 32, {.hop_length = 8, .window = zeros({32})});
      },
      "istft", "window overlap add");
  expect_error([] { fft::fftfreq(-1); }, "fft.fftfreq");
}

TEST(Fft, ThreadCountIndependent) {
  Tensor x = randn({64, 1000, 2});
  Tensor r = randn({96, 513}, {.dtype = f64});
  auto run = [&] {
    return std::vector<Tensor>{fft::fft(x, {}, 0), fft::fft(x, {}, 1), fft::rfft(r, {}, 1), fft::rfft(r, {}, 0),
                               fft::irfft(fft::rfft(r), 513)};
  };
  auto a = kiln::test::with_threads(1, run);
  auto b = kiln::test::with_threads(2, run);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(equal(a[i], b[i])) << i;
}
