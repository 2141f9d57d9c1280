// Elementwise frontends: dtype rules, every argument check, strided inputs against a scalar
// reference, and thread-count independence.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <string>

#include "test_util.h"

using namespace kiln;

TEST(Elementwise, DtypeRules) {
  Tensor i = tensor({1, -2, 3}, {3});
  EXPECT_EQ(exp(i).dtype(), f32);  // float ops promote integers
  EXPECT_EQ(abs(i).dtype(), i32);  // numeric ops keep them
  EXPECT_EQ(abs(i).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(sign(i).to_vector<int32_t>(), (std::vector<int32_t>{1, -1, 1}));
  EXPECT_EQ(div(i, 2).dtype(), f32);
  EXPECT_EQ(div(i, 2, "floor").to_vector<int32_t>(), (std::vector<int32_t>{0, -1, 1}));
  EXPECT_EQ(div(i, 2, "trunc").to_vector<int32_t>(), (std::vector<int32_t>{0, -1, 1}));
  EXPECT_EQ(remainder(i, 2).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(fmod(i, 2).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ((i < 0).dtype(), bool_);
  EXPECT_EQ(pow(i, 2).to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 9}));
  EXPECT_EQ((i << 2).to_vector<int32_t>(), (std::vector<int32_t>{4, -8, 12}));
  EXPECT_EQ((i >> 1).to_vector<int32_t>(), (std::vector<int32_t>{0, -1, 1}));
  Tensor b = tensor({true, false, true}, {3});
  EXPECT_EQ((b & tensor({true, true, false}, {3})).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((~b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(logical_xor(i, b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((b + b).dtype(), bool_);
  EXPECT_EQ(where(b, i, 0.5).dtype(), f32);
  EXPECT_EQ(where(b, 1, 0).dtype(), i64);
  EXPECT_EQ(clamp(i, 0, std::nullopt).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 3}));
  EXPECT_EQ(clamp(i, 0.5, std::nullopt).dtype(), f32);
}

TEST(Elementwise, EveryCheckFires) {
  Tensor f = ones({2, 3});
  Tensor i = ones({2, 3}, {.dtype = i64});
  Tensor b = ones({3}, {.dtype = bool_});
  EXPECT_ERROR(add(f, ones({4})), "[add] shapes [2, 3] and [4] cannot be broadcast");
  EXPECT_ERROR(f * ones({2, 2}), "[mul]");
  EXPECT_ERROR(sub(b, b), "[sub] subtraction of bool tensors");
  EXPECT_ERROR(b - true, "[sub]");
  EXPECT_ERROR(bitwise_and(f, f), "[bitwise_and] expects integer or bool tensors, got f32");
  EXPECT_ERROR(bitwise_not(f), "[bitwise_not]");
  EXPECT_ERROR(div(f, f, "round"), "[div] rounding_mode");
  EXPECT_ERROR(gelu(f, "fast"), "[gelu]");
  EXPECT_ERROR(abs(b), "[abs] not supported for bool");
  EXPECT_ERROR(neg(b), "[neg]");
  EXPECT_ERROR(pow(i, -1), "[pow]");
  EXPECT_ERROR(round(i, 2), "[round]");
  EXPECT_ERROR(logit(f, 0.7), "[logit]");
  EXPECT_ERROR(celu(f, 0.0), "[celu]");
  EXPECT_ERROR(hardtanh(f, 1.0, -1.0), "[hardtanh]");
  EXPECT_ERROR(clamp(f, std::nullopt, std::nullopt), "[clamp]");
  EXPECT_ERROR(clamp(b, 0, 1), "[clamp]");
  EXPECT_ERROR(where(f, f, f), "[where] condition must be a bool tensor, got f32");
  EXPECT_ERROR(where(ones({2}, {.dtype = bool_}), f, f), "[where]");
  EXPECT_ERROR(masked_fill(f, ones({2, 3}), 1), "[masked_fill] mask must be bool");
  EXPECT_ERROR(masked_fill(f, ones({4, 2, 3}, {.dtype = bool_}), 1), "[masked_fill]");
  EXPECT_ERROR(lerp(i, i, 0.5), "[lerp]");
  EXPECT_ERROR(isclose(f, f, -1), "[isclose]");
  EXPECT_ERROR(add(Tensor(), f), "[add] expected a defined tensor");
  EXPECT_ERROR(add(f, zeros({2, 3}, {.device = Device::null()})), "[add] expected all tensors on one device");
}

TEST(Elementwise, SpecialValues) {
  Tensor x = tensor({0.f, -0.f, INFINITY, -INFINITY, NAN, -1.f}, {6});
  auto l = log(x).to_vector<float>();
  EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0);
  EXPECT_TRUE(std::isinf(l[2]) && l[2] > 0);
  EXPECT_TRUE(std::isnan(l[3]) && std::isnan(l[4]) && std::isnan(l[5]));
  auto e = exp(x).to_vector<float>();
  EXPECT_EQ(e[0], 1.f);
  EXPECT_TRUE(std::isinf(e[2]));
  EXPECT_EQ(e[3], 0.f);
  EXPECT_TRUE(std::isnan(e[4]));
  auto s = sigmoid(x).to_vector<float>();
  EXPECT_EQ(s[2], 1.f);
  EXPECT_EQ(s[3], 0.f);
  EXPECT_TRUE(std::isnan(s[4]));
  auto t = tanh(x).to_vector<float>();
  EXPECT_EQ(t[2], 1.f);
  EXPECT_EQ(t[3], -1.f);
  EXPECT_TRUE(std::isnan(t[4]));
  auto m = maximum(x, zeros({6})).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[4]));
  EXPECT_EQ(fmax(x, zeros({6})).to_vector<float>()[4], 0.f);
  auto n = nan_to_num(x).to_vector<float>();
  EXPECT_EQ(n[2], std::numeric_limits<float>::max());
  EXPECT_EQ(n[3], std::numeric_limits<float>::lowest());
  EXPECT_EQ(n[4], 0.f);
  auto h = nan_to_num(x.to(f16)).to_vector<float>();
  EXPECT_EQ(h[2], 65504.f);
  EXPECT_EQ(isinf(x).to_vector<bool>(), (std::vector<bool>{false, false, true, true, false, false}));
  EXPECT_EQ(isposinf(x).to_vector<bool>(), (std::vector<bool>{false, false, true, false, false, false}));
  EXPECT_EQ(isnan(x).to_vector<bool>(), (std::vector<bool>{false, false, false, false, true, false}));
  // Integer division by zero raises (PyTorch's ZeroDivisionError) instead of returning 0.
  EXPECT_ERROR(div(tensor({5}, {1}), tensor({0}, {1}), "floor").to_vector<int32_t>(), "[div] integer division by zero");
}

TEST(Elementwise, StridedInputsMatchScalarReference) {
  // Every unary float op on a transposed, sliced, flipped view against std:: math on the
  // contiguous copy (exercises both the vector and the strided paths).
  Tensor base = uniform({37, 53}, -3, 3);
  std::vector<Tensor> views = {base, base.t(), base.slice(1, 1, std::nullopt, 3), base.flip({0}),
                               base.select(1, 4).unsqueeze(1).expand({37, 5})};
  struct Case {
    const char* name;
    Tensor (*fn)(const Tensor&);
    double (*ref)(double);
    double tol;
  };
  const Case cases[] = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); }, 2e-6},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); }, 2e-6},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, [](double v) { return 1 / (1 + std::exp(-v)); }, 2e-6},
      {"gelu", [](const Tensor& t) { return gelu(t); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, 2e-6},
      {"erf", [](const Tensor& t) { return erf(t); }, [](double v) { return std::erf(v); }, 2e-6},
      {"relu", [](const Tensor& t) { return relu(t); }, [](double v) { return v > 0 ? v : 0.0; }, 0},
      {"sin", [](const Tensor& t) { return sin(t); }, [](double v) { return std::sin(v); }, 2e-6},
      {"silu", [](const Tensor& t) { return silu(t); }, [](double v) { return v / (1 + std::exp(-v)); }, 2e-6},
  };
  for (const auto& v : views) {
    auto in = v.contiguous().to_vector<float>();
    for (const auto& c : cases) {
      auto out = c.fn(v).contiguous().to_vector<float>();
      ASSERT_EQ(out.size(), in.size());
      for (size_t k = 0; k < in.size(); ++k) {
        double want = c.ref(in[k]);
        ASSERT_NEAR(out[k], want, c.tol * (1 + std::abs(want)))
            << c.name << " at " << k << " of " << to_string(v.shape());
      }
    }
  }
}

TEST(Elementwise, ResultsDoNotDependOnThreadCount) {
  Tensor x = randn({300001});
  Tensor y = randn({1, 300001});
  auto run = [&] { return gelu(x * y + 1).to_vector<float>(); };
  auto a1 = test::with_threads(1, run);
  auto a2 = test::with_threads(2, run);
  EXPECT_EQ(a1, a2);
}

TEST(Elementwise, HalfTypesComputeInFloat) {
  Tensor x = tensor({0.5f, 1.5f, -2.f}, {3});
  for (DType t : {f16, bf16}) {
    Tensor h = x.to(t);
    EXPECT_EQ(exp(h).dtype(), t);
    auto e = exp(h).to_vector<float>();
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(e[i], std::exp(x.to_vector<float>()[i]), 0.02 * e[i]);
    EXPECT_EQ((h + h).to_vector<float>(), (std::vector<float>{1.f, 3.f, -4.f}));
    EXPECT_EQ((h + 1).dtype(), t);
    EXPECT_EQ((h + ones({3}, {.dtype = f64})).dtype(), f64);
  }
}

TEST(Elementwise, VectorMathAccuracyOnADenseGrid) {
  // The SIMD approximations against double-precision std:: functions, over a grid that covers
  // the saturated tails (values must be within a few f32 ulps).
  std::vector<float> xs;
  for (double v = -30; v <= 30; v += 1.0 / 512) xs.push_back(static_cast<float>(v));
  Tensor x = tensor(xs, {static_cast<int64_t>(xs.size())});
  struct Case {
    const char* name;
    Tensor (*fn)(const Tensor&);
    double (*ref)(double);
    double atol;  // gelu's 1 + erf(x) cancels in f32 for x < -4, as in PyTorch
  };
  const Case cases[] = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); }, 1e-37},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); }, 1e-37},
      {"erf", [](const Tensor& t) { return erf(t); }, [](double v) { return std::erf(v); }, 1e-37},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, [](double v) { return 1 / (1 + std::exp(-v)); }, 1e-37},
      {"gelu", [](const Tensor& t) { return gelu(t); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, 1e-6},
      {"silu", [](const Tensor& t) { return silu(t); }, [](double v) { return v / (1 + std::exp(-v)); }, 1e-37},
  };
  for (const auto& c : cases) {
    auto out = c.fn(x).to_vector<float>();
    for (size_t k = 0; k < xs.size(); ++k) {
      double want = c.ref(xs[k]);
      ASSERT_NEAR(out[k], want, 1e-6 * std::abs(want) + c.atol) << c.name << "(" << xs[k] << ")";
    }
  }
}
