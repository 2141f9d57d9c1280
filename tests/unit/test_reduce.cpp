// SPDX-License-Identifier: MIT OR Apache-2.0
// Reductions, cumulative ops and softmax against naive double-precision loops written here.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::vector<float> randv(size_t n, uint32_t seed, float mean = 0, float sd = 1) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

Shape out_shape(const Shape& s, const std::vector<bool>& red, bool keepdim) {
  Shape o;
  for (size_t i = 0; i < s.size(); ++i)
    if (!red[i])
      o.push_back(s[i]);
    else if (keepdim)
      o.push_back(1);
  return o;
}

/// Naive reduction over the flagged dims of a row-major array: returns per-output vectors of the
/// reduced elements (in row-major order), so every test can apply its own formula.
std::vector<std::vector<double>> groups(const std::vector<double>& x, const Shape& s, const std::vector<bool>& red) {
  size_t r = s.size();
  int64_t nout = 1;
  for (size_t i = 0; i < r; ++i)
    if (!red[i]) nout *= s[i];
  std::vector<std::vector<double>> g(static_cast<size_t>(nout));
  std::vector<int64_t> idx(r, 0);
  for (size_t lin = 0; lin < x.size(); ++lin) {
    int64_t o = 0;
    for (size_t i = 0; i < r; ++i)
      if (!red[i]) o = o * s[i] + idx[i];
    g[static_cast<size_t>(o)].push_back(x[lin]);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < s[i]) break;
      idx[i] = 0;
    }
  }
  return g;
}

std::vector<bool> flags(size_t rank, const std::vector<int>& dims) {
  std::vector<bool> f(rank, dims.size() == 0);
  for (int d : dims) f[static_cast<size_t>(d < 0 ? d + static_cast<int>(rank) : d)] = true;
  return f;
}

double rsum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol = 1e-5,
                  double atol = 1e-6, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " at " << i;
    }
  }
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(double)) == 0;
}

}  // namespace

TEST(Reduce, SumMeanProdEveryDimSet) {
  Shape s{3, 4, 5};
  auto v = randv(60, 1);
  Tensor x = tensor(v, s);
  std::vector<double> xd(v.begin(), v.end());
  std::vector<std::pair<Dims, std::vector<int>>> cases = {
      {{}, {}},         {{0}, {0}},        {{1}, {1}},       {{2}, {2}},       {{-1}, {-1}},
      {{0, 2}, {0, 2}}, {{-1, 0}, {0, 2}}, {{1, 2}, {1, 2}}, {{0, 1}, {0, 1}}, {{0, 1, 2}, {}}};
  for (auto& [dims, fl] : cases) {
    for (bool keep : {false, true}) {
      auto red = flags(3, fl);
      auto g = groups(xd, s, red);
      std::vector<double> ws, wm, wp;
      for (auto& gr : g) {
        ws.push_back(rsum(gr));
        wm.push_back(rsum(gr) / static_cast<double>(gr.size()));
        double p = 1;
        for (double e : gr) p *= e;
        wp.push_back(p);
      }
      Tensor ts = sum(x, dims, keep), tm = mean(x, dims, keep), tp = prod(x, dims, keep);
      EXPECT_EQ(ts.shape(), out_shape(s, red, keep));
      EXPECT_EQ(tm.shape(), out_shape(s, red, keep));
      EXPECT_EQ(ts.dtype(), f32);
      expect_close(ts.to_vector<double>(), ws, 1e-5, 1e-5, "sum");
      expect_close(tm.to_vector<double>(), wm, 1e-5, 1e-6, "mean");
      expect_close(tp.to_vector<double>(), wp, 1e-4, 1e-6, "prod");
    }
  }
}

TEST(Reduce, ExtremesEveryDimSet) {
  Shape s{4, 3, 6};
  auto v = randv(72, 2);
  Tensor x = tensor(v, s);
  std::vector<double> xd(v.begin(), v.end());
  for (auto fl : {std::initializer_list<int>{0}, {1}, {2}, {0, 2}, {}}) {
    auto red = flags(3, fl);
    Dims dims(fl.begin(), fl.end());
    auto g = groups(xd, s, red);
    std::vector<double> wmax, wmin;
    for (auto& gr : g) {
      wmax.push_back(*std::max_element(gr.begin(), gr.end()));
      wmin.push_back(*std::min_element(gr.begin(), gr.end()));
    }
    expect_close(amax(x, dims).to_vector<double>(), wmax, 0, 0, "amax");
    expect_close(amin(x, dims).to_vector<double>(), wmin, 0, 0, "amin");
  }
  // argmax / argmin along each dim: position in the group of the first extreme.
  for (int d = 0; d < 3; ++d) {
    auto g = groups(xd, s, flags(3, {d}));
    std::vector<double> wa, wi;
    for (auto& gr : g) {
      wa.push_back(static_cast<double>(std::max_element(gr.begin(), gr.end()) - gr.begin()));
      wi.push_back(static_cast<double>(std::min_element(gr.begin(), gr.end()) - gr.begin()));
    }
    Tensor a = argmax(x, d);
    EXPECT_EQ(a.dtype(), i64);
    expect_close(a.to_vector<double>(), wa, 0, 0, "argmax");
    expect_close(argmin(x, d).to_vector<double>(), wi, 0, 0, "argmin");
    auto [mv, mi] = max(x, d, true);
    EXPECT_EQ(mv.shape(), out_shape(s, flags(3, {d}), true));
    expect_close(mi.to_vector<double>(), wa, 0, 0, "max.indices");
  }
  // Flattened argmax.
  int64_t best = std::max_element(v.begin(), v.end()) - v.begin();
  EXPECT_EQ(argmax(x).item<int64_t>(), best);
  EXPECT_EQ(argmax(x, {}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(max(x).item<float>(), v[static_cast<size_t>(best)]);
}

TEST(Reduce, ArgmaxFirstOccurrence) {
  // Ties spread over several accumulator lanes and leaves: the first index must win.
  std::vector<float> v(10000, 1.0f);
  v[7777] = 5;
  v[4321] = 5;
  v[9000] = 5;
  Tensor x = tensor(v, {10000});
  EXPECT_EQ(argmax(x).item<int64_t>(), 4321);
  EXPECT_EQ(argmin(x).item<int64_t>(), 0);
  // Outer layout (reduce dim 0 of a [rows, cols] matrix).
  std::vector<float> m(300 * 70, 0.f);
  for (int c = 0; c < 70; ++c) {
    m[static_cast<size_t>((c + 5) * 70 + c)] = 2;
    m[static_cast<size_t>((c + 100) * 70 + c)] = 2;
  }
  auto idx = argmax(tensor(m, {300, 70}), 0).to_vector<int64_t>();
  for (int c = 0; c < 70; ++c) EXPECT_EQ(idx[static_cast<size_t>(c)], c + 5);
  // Integers and bools.
  EXPECT_EQ(argmax(tensor({3, 9, 9, 1}, {4})).item<int64_t>(), 1);
  EXPECT_EQ(argmax(tensor<bool>({false, true, true}, {3})).item<int64_t>(), 1);
}

TEST(Reduce, NaNPropagation) {
  Tensor x = tensor({1.f, NAN, 3.f, NAN, -2.f}, {5});
  EXPECT_TRUE(std::isnan(sum(x).item<float>()));
  EXPECT_TRUE(std::isnan(amax(x).item<float>()));
  EXPECT_TRUE(std::isnan(amin(x).item<float>()));
  EXPECT_TRUE(std::isnan(max(x).item<float>()));
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  EXPECT_EQ(argmin(x).item<int64_t>(), 1);
  auto [v, i] = max(x.reshape({1, 5}), 1);
  EXPECT_TRUE(std::isnan(v.item<float>()));
  EXPECT_EQ(i.item<int64_t>(), 1);
  EXPECT_TRUE(any(x).item<bool>());
  // A NaN in a long row (vectorised lanes) and in the outer layout.
  std::vector<float> big(5000, 1.f);
  big[4097] = NAN;
  EXPECT_TRUE(std::isnan(amax(tensor(big, {5000})).item<float>()));
  EXPECT_TRUE(std::isnan(amin(tensor(big, {5000})).item<float>()));
  auto col = amax(tensor(big, {1000, 5}), {0}).to_vector<float>();
  EXPECT_TRUE(std::isnan(col[2]));
  EXPECT_FALSE(std::isnan(col[1]));
  // Infinities.
  Tensor inf = tensor({-INFINITY, -INFINITY}, {2});
  EXPECT_EQ(amax(inf).item<float>(), -INFINITY);
  EXPECT_EQ(argmax(inf).item<int64_t>(), 0);
}

TEST(Reduce, DtypeRules) {
  Tensor xi = tensor({1, 2, 3, 4}, {2, 2});  // i32
  Tensor s = sum(xi);
  EXPECT_EQ(s.dtype(), i64);
  EXPECT_EQ(s.item<int64_t>(), 10);
  EXPECT_EQ(prod(xi).dtype(), i64);
  EXPECT_EQ(prod(xi).item<int64_t>(), 24);
  Tensor b = tensor<bool>({true, false, true, true}, {4});
  EXPECT_EQ(sum(b).dtype(), i64);
  EXPECT_EQ(sum(b).item<int64_t>(), 3);
  EXPECT_EQ(sum(xi, {0}, false, f64).dtype(), f64);
  expect_close(sum(xi, {0}, false, f64).to_vector<double>(), {4, 6});
  EXPECT_EQ(sum(tensor({1.5f, 2.5f}, {2}), {}, false, f64).dtype(), f64);
  EXPECT_EQ(sum(tensor({1.5f, 2.5f}, {2}), {}, false, i32).item<int32_t>(), 3);
  EXPECT_EQ(cumsum(xi, 1).dtype(), i64);
  EXPECT_EQ(amax(tensor<int16_t>({3, -7, 5}, {3})).dtype(), i16);
  EXPECT_EQ(amax(tensor<int16_t>({3, -7, 5}, {3})).item<int64_t>(), 5);
  EXPECT_EQ(amin(tensor<uint8_t>({3, 250, 5}, {3})).item<int64_t>(), 3);
  EXPECT_EQ(amax(b).dtype(), bool_);
  EXPECT_TRUE(amax(b).item<bool>());
  EXPECT_EQ(any(tensor({0.f, 0.f}, {2})).dtype(), bool_);
  EXPECT_FALSE(any(tensor({0.f, 0.f}, {2})).item<bool>());
  EXPECT_TRUE(all(tensor({1, 2}, {2})).item<bool>());
  EXPECT_FALSE(all(tensor({1, 0}, {2})).item<bool>());
  EXPECT_EQ(argmax(xi).dtype(), i64);
  // PyTorch's legacy rule: any/all of u8 stay u8.
  Tensor xu = tensor<uint8_t>({0, 3, 0, 0}, {2, 2});
  EXPECT_EQ(any(xu).dtype(), u8);
  EXPECT_EQ(any(xu, {1}).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(all(xu, {0}).dtype(), u8);
  // Integer sums wrap like PyTorch's int64 arithmetic rather than trapping.
  Tensor big = tensor<int64_t>({std::numeric_limits<int64_t>::max(), 1}, {2});
  EXPECT_EQ(sum(big).item<int64_t>(), std::numeric_limits<int64_t>::min());
  expect_error([&] { mean(xi); }, "mean", "could not infer output dtype");
  expect_error([&] { var(xi); }, "var", "floating point");
  expect_error([&] { kiln::std(xi); }, "std", "floating point");
  expect_error([&] { norm(xi); }, "norm", "floating point");
  expect_error([&] { softmax(tensor({1.f}, {1}), 0, i64); }, "softmax", "floating point");
}

TEST(Reduce, HalfAccumulatesInFloat) {
  std::vector<Half> h(4096, Half(0.1f));
  Tensor x = tensor(h, {4096});
  EXPECT_EQ(sum(x).dtype(), f16);
  // Accumulating in f16 would stall at 256; f32 accumulation rounds once at the end.
  EXPECT_NEAR(sum(x).item<float>(), 409.5f, 0.5f);
  EXPECT_NEAR(mean(x).item<float>(), 0.1f, 1e-3f);
  std::vector<BFloat16> bh(1000, BFloat16(2.0f));
  EXPECT_NEAR(sum(tensor(bh, {1000})).item<float>(), 2000.f, 8.f);
  EXPECT_NEAR(var(tensor(bh, {1000})).item<float>(), 0.f, 1e-6f);
}

TEST(Reduce, EmptyAndZeroD) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(sum(e).item<float>(), 0.f);
  EXPECT_EQ(prod(e).item<float>(), 1.f);
  EXPECT_TRUE(std::isnan(mean(e).item<float>()));
  EXPECT_EQ(sum(e, {0}).shape(), (Shape{3}));
  expect_close(sum(e, {0}).to_vector<double>(), {0, 0, 0});
  expect_close(prod(e, {0}).to_vector<double>(), {1, 1, 1});
  EXPECT_EQ(sum(e, {1}).shape(), (Shape{0}));
  EXPECT_EQ(amax(e, {1}).shape(), (Shape{0}));
  EXPECT_FALSE(any(e).item<bool>());
  EXPECT_TRUE(all(e).item<bool>());
  EXPECT_EQ(count_nonzero(e).item<int64_t>(), 0);
  expect_error([&] { amax(e); }, "amax", "non-zero size");
  expect_error([&] { amin(e, {0}); }, "amin", "non-zero size");
  expect_error([&] { max(e); }, "max");
  expect_error([&] { max(e, 0); }, "max", "[0, 3]");
  expect_error([&] { argmax(e); }, "argmax");
  expect_error([&] { argmin(e, 0); }, "argmin");
  EXPECT_EQ(logsumexp(e, {0}).to_vector<float>()[0], -INFINITY);
  // 0-d inputs.
  Tensor z = scalar_tensor(2.5, f32);
  EXPECT_EQ(sum(z).shape(), Shape{});
  EXPECT_EQ(sum(z).item<float>(), 2.5f);
  EXPECT_EQ(sum(z, {0}, true).shape(), Shape{});
  EXPECT_EQ(amax(z, {-1}).item<float>(), 2.5f);
  EXPECT_EQ(argmax(z).item<int64_t>(), 0);
  EXPECT_EQ(argmax(z, 0).item<int64_t>(), 0);
  EXPECT_TRUE(std::isnan(var(z).item<float>()));
  EXPECT_EQ(var(z, {}, 0).item<float>(), 0.f);
  EXPECT_EQ(softmax(z, 0).item<float>(), 1.f);
  EXPECT_EQ(log_softmax(z, -1).item<float>(), 0.f);
  EXPECT_EQ(cumsum(z, 0).item<float>(), 2.5f);
  EXPECT_EQ(logsumexp(z, {}).item<float>(), 2.5f);
  EXPECT_EQ(norm(z).item<float>(), 2.5f);
}

TEST(Reduce, NonContiguousInputs) {
  auto v = randv(6 * 8 * 5, 3);
  Tensor base = tensor(v, {6, 8, 5});
  std::vector<Tensor> views = {
      base.transpose(0, 2),                              // permuted
      base.slice(1, 1, 7, 2),                            // stepped
      base.flip({1}),                                    // negative stride
      base.select(2, 3).unsqueeze(1).expand({6, 4, 8}),  // broadcast (stride 0)
      base.permute({1, 2, 0}).slice(0, 2, 8),
  };
  for (size_t k = 0; k < views.size(); ++k) {
    Tensor x = views[k];
    Tensor c = x.contiguous();
    auto xd = c.to_vector<double>();
    for (int d = -1; d < 3; ++d) {
      std::vector<bool> red = d < 0 ? std::vector<bool>(3, true) : flags(3, {d});
      Dims dims = d < 0 ? Dims{} : Dims{d};
      auto g = groups(xd, c.shape(), red);
      std::vector<double> ws, wmax, wvar;
      for (auto& gr : g) {
        ws.push_back(rsum(gr));
        wmax.push_back(*std::max_element(gr.begin(), gr.end()));
        double m = rsum(gr) / static_cast<double>(gr.size()), q = 0;
        for (double e : gr) q += (e - m) * (e - m);
        wvar.push_back(q / static_cast<double>(gr.size() - 1));
      }
      std::string what = "view " + std::to_string(k) + " dim " + std::to_string(d);
      expect_close(sum(x, dims).to_vector<double>(), ws, 1e-5, 1e-5, what);
      expect_close(amax(x, dims).to_vector<double>(), wmax, 0, 0, what);
      expect_close(var(x, dims).to_vector<double>(), wvar, 1e-5, 1e-6, what);
      if (d >= 0) EXPECT_TRUE(bit_equal(argmax(x, d), argmax(c, d))) << what;
      if (d >= 0) expect_close(cumsum(x, d).to_vector<double>(), cumsum(c, d).to_vector<double>(), 1e-6, 1e-6, what);
      if (d >= 0) expect_close(softmax(x, d).to_vector<double>(), softmax(c, d).to_vector<double>(), 1e-6, 1e-7, what);
    }
  }
}

TEST(Reduce, LargeAccuracy) {
  // 1e6 elements with a non-zero mean: naive float accumulation would drift far beyond 1e-5.
  const size_t n = 1000000;
  auto v = randv(n, 4, 1.0f, 1.0f);
  double ref = 0;
  for (float f : v) ref += f;
  Tensor x = tensor(v, {static_cast<int64_t>(n)});
  EXPECT_NEAR(sum(x).item<float>(), ref, 1e-6 * std::abs(ref));
  EXPECT_NEAR(mean(x).item<float>(), ref / n, 1e-6 * std::abs(ref / n));
  double m = ref / n, q = 0;
  for (float f : v) q += (f - m) * (f - m);
  EXPECT_NEAR(var(x).item<float>(), q / (n - 1), 1e-5 * q / (n - 1));
  // Column sums over 1e6 / 50 rows (outer layout) and row sums.
  Tensor mtx = x.reshape({20000, 50});
  auto cols = sum(mtx, {0}).to_vector<double>();
  for (size_t c = 0; c < 50; ++c) {
    double r = 0;
    for (size_t row = 0; row < 20000; ++row) r += v[row * 50 + c];
    EXPECT_NEAR(cols[c], r, 1e-5 * std::abs(r));
  }
  auto rows = sum(x.reshape({50, 20000}), {1}).to_vector<double>();
  for (size_t row = 0; row < 50; ++row) {
    double r = 0;
    for (size_t c = 0; c < 20000; ++c) r += v[row * 20000 + c];
    EXPECT_NEAR(rows[row], r, 1e-5 * std::abs(r));
  }
}

TEST(Reduce, ThreadDeterminism) {
  auto v = randv(3 * 1024 * 1024 + 7, 5, 0.5f);
  Tensor x = tensor(v, {static_cast<int64_t>(v.size())});
  Tensor m = x.narrow(0, 0, 3000 * 1000).reshape({3000, 1000});
  Tensor thin = x.narrow(0, 0, 1000000 * 3).reshape({1000000, 3});
  auto run_all = [&] {
    return std::vector<Tensor>{
        sum(x),        mean(x),       var(x),       amax(x),           argmax(x),       sum(m, {0}),
        sum(m, {1}),   var(m, {0}),   argmax(m, 0), sum(thin, {0}),    sum(m.t(), {1}), prod(m, {1}),
        softmax(m, 1), softmax(m, 0), cumsum(m, 0), logsumexp(m, {1}), norm(x)};
  };
  auto a = test::with_threads(1, run_all);
  auto b = test::with_threads(2, run_all);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "result " << i;
}

TEST(Reduce, VarStdCorrection) {
  Shape s{5, 7};
  auto v = randv(35, 6, 3.f, 2.f);
  Tensor x = tensor(v, s).to(f64);
  std::vector<double> xd(v.begin(), v.end());
  for (double corr : {0.0, 1.0, 2.0}) {
    for (int d : {0, 1}) {
      auto g = groups(xd, s, flags(2, {d}));
      std::vector<double> wv, ws, wm;
      for (auto& gr : g) {
        double m = rsum(gr) / static_cast<double>(gr.size()), q = 0;
        for (double e : gr) q += (e - m) * (e - m);
        wv.push_back(q / (static_cast<double>(gr.size()) - corr));
        ws.push_back(std::sqrt(wv.back()));
        wm.push_back(m);
      }
      expect_close(var(x, {d}, corr).to_vector<double>(), wv, 1e-12, 1e-12);
      expect_close(kiln::std(x, {d}, corr, true).to_vector<double>(), ws, 1e-12, 1e-12);
      EXPECT_EQ(kiln::std(x, {d}, corr, true).shape(), out_shape(s, flags(2, {d}), true));
      auto [vv, mm] = var_mean(x, {d}, corr);
      expect_close(vv.to_vector<double>(), wv, 1e-12, 1e-12);
      expect_close(mm.to_vector<double>(), wm, 1e-12, 1e-12);
    }
  }
  // Squares beyond the f32 range: accumulated in f64, and std takes the root before rounding.
  Tensor huge = tensor({1e20f, -1e20f, 3e20f}, {3});
  EXPECT_NEAR(kiln::std(huge).item<float>() / 2e20f, 1.f, 1e-6);
  EXPECT_TRUE(std::isinf(var(huge).item<float>()));
  // N - correction <= 0 gives inf (or NaN for zero spread), as in PyTorch.
  EXPECT_TRUE(std::isinf(var(tensor({1.0, 2.0}, {2}), {}, 2).item<double>()));
  EXPECT_EQ(x.var().dtype(), f64);
  EXPECT_EQ(var(tensor({1.f, 2.f}, {2})).dtype(), f32);
}

TEST(Reduce, Norms) {
  Shape s{4, 6};
  auto v = randv(24, 7);
  v[3] = 0;
  v[10] = 0;
  Tensor x = tensor(v, s);
  std::vector<double> xd(v.begin(), v.end());
  for (double p : {2.0, 1.0, kInf, -kInf, 0.0, 3.0, 0.5}) {
    for (int d : {-1, 0, 1}) {
      auto red = d < 0 ? std::vector<bool>(2, true) : flags(2, {d});
      auto g = groups(xd, s, red);
      std::vector<double> w;
      for (auto& gr : g) {
        double r = 0;
        if (std::isinf(p)) {
          r = p > 0 ? 0 : kInf;
          for (double e : gr) r = p > 0 ? std::max(r, std::abs(e)) : std::min(r, std::abs(e));
        } else if (p == 0) {
          for (double e : gr) r += e != 0;
        } else {
          for (double e : gr) r += std::pow(std::abs(e), p);
          r = std::pow(r, 1 / p);
        }
        w.push_back(r);
      }
      Tensor n = d < 0 ? norm(x, p) : norm(x, p, {d});
      EXPECT_EQ(n.dtype(), f32);
      expect_close(n.to_vector<double>(), w, 1e-5, 1e-6, "p=" + std::to_string(p));
    }
  }
  expect_error([&] { norm(zeros({0}), kInf); }, "norm");
}

TEST(Reduce, LogSumExp) {
  Tensor x = tensor({1.f, 2.f, 3.f, 1000.f, 1000.f, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, {3, 3});
  auto r = logsumexp(x, {1}).to_vector<double>();
  EXPECT_NEAR(r[0], std::log(std::exp(1.) + std::exp(2.) + std::exp(3.)), 1e-5);
  EXPECT_NEAR(r[1], 1000 + std::log(2.), 1e-3);
  EXPECT_EQ(r[2], -kInf);
  EXPECT_EQ(logsumexp(x, {1}, true).shape(), (Shape{3, 1}));
  auto c = logsumexp(x.narrow(0, 0, 2), {0}).to_vector<double>();
  EXPECT_NEAR(c[0], 1000.0, 1e-3);
  EXPECT_NEAR(c[2], 3.0, 1e-6);
  Tensor xi = tensor({0, 0}, {2});
  EXPECT_EQ(logsumexp(xi, {0}).dtype(), f32);
  EXPECT_NEAR(logsumexp(xi, {0}).item<float>(), std::log(2.f), 1e-6);
  Tensor pinf = tensor({INFINITY, 1.f}, {2});
  EXPECT_EQ(logsumexp(pinf, {0}).item<float>(), INFINITY);
}

TEST(Reduce, CountNonzeroAnyAll) {
  Tensor x = tensor({0.f, 1.f, NAN, 0.f, -2.f, 0.f}, {2, 3});
  EXPECT_EQ(count_nonzero(x).item<int64_t>(), 3);
  EXPECT_EQ(count_nonzero(x, {1}).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(count_nonzero(x, {0}).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(count_nonzero(x).dtype(), i64);
  EXPECT_EQ(any(x, {1}).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(all(x, {0}).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(all(x, {0}, true).shape(), (Shape{1, 3}));
  std::vector<float> ones(100000, 1.f);
  EXPECT_TRUE(all(tensor(ones, {100000})).item<bool>());
  ones[99999] = 0;
  EXPECT_FALSE(all(tensor(ones, {100000})).item<bool>());
  EXPECT_TRUE(any(tensor(ones, {100000})).item<bool>());
}

TEST(Reduce, CumulativeOps) {
  Shape s{3, 4, 5};
  auto v = randv(60, 8);
  Tensor x = tensor(v, s);
  for (int d : {0, 1, 2, -1}) {
    int dd = d < 0 ? d + 3 : d;
    auto cs = cumsum(x, d).to_vector<double>();
    auto cp = cumprod(x, d).to_vector<double>();
    auto [mv, mi] = cummax(x, d);
    auto [nv, ni] = cummin(x, d);
    EXPECT_EQ(mi.dtype(), i64);
    auto mvv = mv.to_vector<double>(), nvv = nv.to_vector<double>();
    auto miv = mi.to_vector<int64_t>(), niv = ni.to_vector<int64_t>();
    Strides st = contiguous_strides(s);
    for (int64_t lin = 0; lin < 60; ++lin) {
      int64_t pos = (lin / st[static_cast<size_t>(dd)]) % s[static_cast<size_t>(dd)];
      int64_t start = lin - pos * st[static_cast<size_t>(dd)];
      double rs = 0, rp = 1, best = -kInf, worst = kInf;
      int64_t bi = 0, wi = 0;
      for (int64_t k = 0; k <= pos; ++k) {
        double e = v[static_cast<size_t>(start + k * st[static_cast<size_t>(dd)])];
        rs += e;
        rp *= e;
        if (e >= best) best = e, bi = k;
        if (e <= worst) worst = e, wi = k;
      }
      EXPECT_NEAR(cs[static_cast<size_t>(lin)], rs, 1e-5);
      EXPECT_NEAR(cp[static_cast<size_t>(lin)], rp, 1e-5 * std::abs(rp) + 1e-7);
      EXPECT_EQ(mvv[static_cast<size_t>(lin)], best);
      EXPECT_EQ(miv[static_cast<size_t>(lin)], bi);
      EXPECT_EQ(nvv[static_cast<size_t>(lin)], worst);
      EXPECT_EQ(niv[static_cast<size_t>(lin)], wi);
    }
  }
  // Ties: the index of the last occurrence; a NaN sticks with its own index.
  auto [tv, ti] = cummax(tensor({1.f, 3.f, 3.f, NAN, 5.f, NAN}, {6}), 0);
  EXPECT_EQ(ti.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 3, 5}));
  EXPECT_TRUE(std::isnan(tv.to_vector<float>()[4]));
  // Integer dtype rules and explicit dtype.
  Tensor xi = tensor({1, 2, 3}, {3});
  EXPECT_EQ(cumsum(xi, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(cumprod(xi, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 6}));
  EXPECT_EQ(cumsum(xi, 0, f32).dtype(), f32);
  EXPECT_EQ(cumsum(tensor<bool>({true, true, false}, {3}), 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(cummax(xi, 0).first.dtype(), i32);
  // cumsum accumulates in f64 for f32 (PyTorch's CPU kernel): no drift over 1e6 ones * 0.1.
  std::vector<float> tenth(1000000, 0.1f);
  float last = cumsum(tensor(tenth, {1000000}), 0).to_vector<float>().back();
  EXPECT_NEAR(last, 1000000.0 * static_cast<double>(0.1f), 1e-2);
  expect_error([&] { cumsum(x, 3); }, "cumsum", "out of range");
  EXPECT_EQ(cumsum(zeros({0, 2}), 0).shape(), (Shape{0, 2}));
}

TEST(Reduce, SoftmaxMatchesNaive) {
  Shape s{3, 4, 37};
  auto v = randv(3 * 4 * 37, 9, 0.f, 5.f);
  Tensor x = tensor(v, s);
  std::vector<double> xd(v.begin(), v.end());
  Strides st = contiguous_strides(s);
  for (int d : {0, 1, 2}) {
    auto sm = softmax(x, d).to_vector<double>();
    auto lsm = log_softmax(x, d).to_vector<double>();
    for (int64_t lin = 0; lin < static_cast<int64_t>(v.size()); ++lin) {
      int64_t sd = st[static_cast<size_t>(d)];
      int64_t pos = (lin / sd) % s[static_cast<size_t>(d)];
      int64_t start = lin - pos * sd;
      double m = -kInf, z = 0;
      for (int64_t k = 0; k < s[static_cast<size_t>(d)]; ++k) m = std::max(m, xd[static_cast<size_t>(start + k * sd)]);
      for (int64_t k = 0; k < s[static_cast<size_t>(d)]; ++k)
        z += std::exp(xd[static_cast<size_t>(start + k * sd)] - m);
      double ref = std::exp(xd[static_cast<size_t>(lin)] - m) / z;
      EXPECT_NEAR(sm[static_cast<size_t>(lin)], ref, 1e-6 + 1e-5 * ref);
      EXPECT_NEAR(lsm[static_cast<size_t>(lin)], xd[static_cast<size_t>(lin)] - m - std::log(z), 1e-5);
    }
  }
  // Large values do not overflow; a row with NaN is all NaN; f64 and explicit dtype.
  auto big = softmax(tensor({1000.f, 1000.f, -1000.f}, {3}), 0).to_vector<float>();
  EXPECT_NEAR(big[0], 0.5f, 1e-6);
  EXPECT_EQ(big[2], 0.f);
  auto nanrow = softmax(tensor({1.f, NAN, 2.f}, {3}), 0).to_vector<float>();
  for (float f : nanrow) EXPECT_TRUE(std::isnan(f));
  Tensor xd64 = softmax(x, -1, f64);
  EXPECT_EQ(xd64.dtype(), f64);
  EXPECT_NEAR(sum(xd64, {-1}).to_vector<double>()[0], 1.0, 1e-12);
  EXPECT_EQ(softmax(tensor({1, 2}, {2}), 0).dtype(), f32);
  std::vector<Half> hv = {Half(1.f), Half(2.f), Half(3.f)};
  auto hs = softmax(tensor(hv, {3}), 0);
  EXPECT_EQ(hs.dtype(), f16);
  EXPECT_NEAR(hs.to_vector<float>()[2], std::exp(3.) / (std::exp(1.) + std::exp(2.) + std::exp(3.)), 1e-3);
  EXPECT_EQ(x.softmax(1).shape(), s);
  expect_error([&] { softmax(x, 3); }, "softmax", "out of range");
  expect_error([&] { log_softmax(x, -4); }, "log_softmax", "out of range");
}

TEST(Reduce, DimErrors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { sum(x, {2}); }, "sum", "out of range");
  expect_error([&] { sum(x, {0, -2}); }, "sum", "more than once");
  expect_error([&] { mean(x, {-3}); }, "mean", "out of range");
  expect_error([&] { amax(x, {5}); }, "amax");
  expect_error([&] { argmax(x, 2); }, "argmax");
  expect_error([&] { max(x, 2); }, "max");
  expect_error([&] { var(x, {7}); }, "var");
  expect_error([&] { any(x, {3}); }, "any");
  expect_error([&] { sum(Tensor()); }, "sum", "undefined");
}

TEST(Reduce, NullDeviceShapes) {
  Tensor x = zeros({4, 5, 6}, {.dtype = i32, .device = Device::null()});
  Tensor s = sum(x, {1}, true);
  EXPECT_EQ(s.shape(), (Shape{4, 1, 6}));
  EXPECT_EQ(s.dtype(), i64);
  EXPECT_EQ(argmax(x, -1).shape(), (Shape{4, 5}));
  Tensor xf = zeros({4, 5}, {.dtype = f32, .device = Device::null()});
  EXPECT_EQ(softmax(xf, 0).shape(), (Shape{4, 5}));
  EXPECT_EQ(var(xf, {0}).shape(), (Shape{5}));
  EXPECT_EQ(cummax(xf, 1).second.dtype(), i64);
}

TEST(Reduce, MethodsForward) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  EXPECT_EQ(x.sum().item<float>(), 10.f);
  EXPECT_EQ(x.sum({0}).to_vector<float>(), (std::vector<float>{4.f, 6.f}));
  EXPECT_EQ(x.mean().item<float>(), 2.5f);
  EXPECT_EQ(x.prod(1).to_vector<float>(), (std::vector<float>{2.f, 12.f}));
  EXPECT_EQ(x.amax({1}).to_vector<float>(), (std::vector<float>{2.f, 4.f}));
  EXPECT_EQ(x.argmax().item<int64_t>(), 3);
  EXPECT_EQ(x.max(0).second.to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_NEAR(x.std().item<float>(), std::sqrt(5.f / 3.f), 1e-6);
}

TEST(Reduce, ExtremesLongRowsAllLayouts) {
  // Long contiguous rows (vectorised extreme + first-index search), columns (outer layout),
  // and f64 / f16 / integer dtypes, checked against std:: on the host.
  const int64_t R = 7, C = 20011;
  auto v = randv(static_cast<size_t>(R * C), 12);
  std::vector<double> vd(v.begin(), v.end());
  for (DType dt : {f32, f64, f16, i32}) {
    Tensor x = tensor(v, {R, C}).to(dt);
    auto host = x.to_vector<double>();
    auto amx = amax(x, {1}).to_vector<double>();
    auto ami = argmin(x, 1).to_vector<int64_t>();
    auto cmx = argmax(x, 0).to_vector<int64_t>();
    for (int64_t r = 0; r < R; ++r) {
      auto b = host.begin() + r * C;
      EXPECT_EQ(amx[static_cast<size_t>(r)], *std::max_element(b, b + C)) << dtype_name(dt);
      EXPECT_EQ(ami[static_cast<size_t>(r)], std::min_element(b, b + C) - b) << dtype_name(dt);
    }
    for (int64_t c = 0; c < C; c += 997) {
      int64_t best = 0;
      for (int64_t r = 1; r < R; ++r)
        if (host[static_cast<size_t>(r * C + c)] > host[static_cast<size_t>(best * C + c)]) best = r;
      EXPECT_EQ(cmx[static_cast<size_t>(c)], best) << dtype_name(dt);
    }
  }
  // NaN deep inside a long f64 row: amax is NaN, argmax/argmin point at the first NaN.
  std::vector<double> w(50000, 1.0);
  w[31337] = kNaN;
  w[40000] = kNaN;
  w[100] = 7.0;
  Tensor t = tensor(w, {50000});
  EXPECT_TRUE(std::isnan(amax(t).item<double>()));
  EXPECT_EQ(argmax(t).item<int64_t>(), 31337);
  EXPECT_EQ(argmin(t).item<int64_t>(), 31337);
  w[31337] = 1.0;
  w[40000] = 1.0;
  EXPECT_EQ(argmax(tensor(w, {50000})).item<int64_t>(), 100);
  // Column NaN (outer layout) for argmax and amin.
  std::vector<float> m(64 * 40, 0.f);
  m[static_cast<size_t>(33 * 40 + 5)] = NAN;
  auto am = argmax(tensor(m, {64, 40}), 0).to_vector<int64_t>();
  EXPECT_EQ(am[5], 33);
  EXPECT_EQ(am[6], 0);
  EXPECT_TRUE(std::isnan(amin(tensor(m, {64, 40}), {0}).to_vector<float>()[5]));
  // any / all along columns.
  std::vector<uint8_t> bits(64 * 40, 0);
  bits[static_cast<size_t>(50 * 40 + 3)] = 1;
  Tensor bt = tensor(std::vector<bool>(bits.begin(), bits.end()), {64, 40});
  auto an = any(bt, {0}).to_vector<uint8_t>();
  EXPECT_EQ(an[3], 1);
  EXPECT_EQ(an[4], 0);
  EXPECT_EQ(count_nonzero(bt, {0}).to_vector<int64_t>()[3], 1);
}

TEST(Reduce, ThreadDeterminismMoreLayouts) {
  auto v = randv(2000000, 13);
  Tensor x = tensor(v, {2000000});
  Tensor short_rows = x.reshape({125000, 16});
  Tensor wide = x.reshape({400, 5000});
  auto run_all = [&] {
    return std::vector<Tensor>{sum(short_rows, {1}), mean(short_rows, {0}), amax(wide, {0}), argmax(wide, 1),
                               argmin(wide, 0),      var(wide, {1}),        any(x > 3.f),    kiln::std(wide.t(), {1}),
                               log_softmax(wide, 0), cummax(wide, 0).second};
  };
  auto a = test::with_threads(1, run_all);
  auto b = test::with_threads(2, run_all);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "result " << i;
}
