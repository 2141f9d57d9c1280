// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the elementwise families (Unary, Binary, Ternary in ops.def): finite-
// difference gradcheck on contiguous, transposed, sliced and expanded inputs and with
// broadcasting, gradgradcheck (second order), composite activations, and the in-place forms on
// tracked tensors (version checks, leaf errors).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autodiff/graph.h"
#include "grad_coverage.h"
#include "gradcheck.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::ad_device;
using kiln::test::Fn;
using kiln::test::gradcheck;
using kiln::test::gradgradcheck;

KILN_GRAD_COVERED(elementwise, "Abs", "Neg", "Exp", "Exp2", "Expm1", "Log", "Log2", "Log10", "Log1p", "Sqrt", "Rsqrt",
                  "Reciprocal", "Square", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh",
                  "Acosh", "Atanh", "Erf", "Erfinv", "Frac", "Sigmoid", "Logit", "Relu", "LeakyRelu", "Elu", "Gelu",
                  "GeluTanh", "Silu", "Mish", "Softplus", "Softsign", "Hardsigmoid", "Hardswish", "Clamp", "NanToNum",
                  "Cast", "Copy", "Add", "Sub", "Mul", "Div", "Remainder", "Fmod", "Pow", "Atan2", "Maximum", "Minimum",
                  "Fmax", "Fmin", "Hypot", "LogAddExp", "Where", "Lerp");

namespace {

using Fn1 = std::function<Tensor(const Tensor&)>;
using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;

/// Random f64 values in [lo, hi) on the autodiff device, each moved at least `gap` away from
/// every kink (points where the function is not differentiable), so finite differences hold.
Tensor input(const Shape& s, double lo, double hi, uint64_t seed, const std::vector<double>& kinks = {},
             double gap = 0.1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) {
    x = u(g);
    for (double k : kinks)
      if (std::abs(x - k) < gap) x = x < k ? k - gap - 0.01 : k + gap + 0.01;
  }
  return tensor(v, s, ad_device());
}

/// Values with magnitude in [lo, hi) and a random sign.
Tensor signed_input(const Shape& s, double lo, double hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::bernoulli_distribution coin(0.5);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = coin(g) ? u(g) : -u(g);
  return tensor(v, s, ad_device());
}

struct UnaryCase {
  const char* name;
  Fn1 f;
  double lo, hi;
  std::vector<double> kinks = {};
  bool second = true;  ///< run gradgradcheck (the gradient depends on the input)
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"abs", [](const Tensor& x) { return abs(x); }, -2, 2, {0}, false},
      {"neg", [](const Tensor& x) { return -x; }, -2, 2, {}, false},
      {"exp", [](const Tensor& x) { return exp(x); }, -2, 2},
      {"exp2", [](const Tensor& x) { return exp2(x); }, -2, 2},
      {"expm1", [](const Tensor& x) { return expm1(x); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, 0.3, 3},
      {"log2", [](const Tensor& x) { return log2(x); }, 0.3, 3},
      {"log10", [](const Tensor& x) { return log10(x); }, 0.3, 3},
      {"log1p", [](const Tensor& x) { return log1p(x); }, -0.6, 2},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.3, 3},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.3, 3},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, -2, 2, {0}},
      {"square", [](const Tensor& x) { return square(x); }, -2, 2},
      {"sin", [](const Tensor& x) { return sin(x); }, -3, 3},
      {"cos", [](const Tensor& x) { return cos(x); }, -3, 3},
      {"tan", [](const Tensor& x) { return tan(x); }, -1.2, 1.2},
      {"asin", [](const Tensor& x) { return asin(x); }, -0.9, 0.9},
      {"acos", [](const Tensor& x) { return acos(x); }, -0.9, 0.9},
      {"atan", [](const Tensor& x) { return atan(x); }, -3, 3},
      {"sinh", [](const Tensor& x) { return sinh(x); }, -2, 2},
      {"cosh", [](const Tensor& x) { return cosh(x); }, -2, 2},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -2, 2},
      {"asinh", [](const Tensor& x) { return asinh(x); }, -3, 3},
      {"acosh", [](const Tensor& x) { return acosh(x); }, 1.3, 3},
      {"atanh", [](const Tensor& x) { return atanh(x); }, -0.9, 0.9},
      {"erf", [](const Tensor& x) { return erf(x); }, -2, 2},
      {"erfinv", [](const Tensor& x) { return erfinv(x); }, -0.9, 0.9},
      {"frac", [](const Tensor& x) { return frac(x); }, -2.5, 2.5, {-2, -1, 0, 1, 2}, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -4, 4},
      {"logit", [](const Tensor& x) { return logit(x); }, 0.1, 0.9},
      {"logit_eps", [](const Tensor& x) { return logit(x, 0.2); }, 0.02, 0.98, {0.2, 0.8}},
      {"relu", [](const Tensor& x) { return relu(x); }, -2, 2, {0}, false},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }, -2, 2, {0}, false},
      {"elu", [](const Tensor& x) { return elu(x, 1.3); }, -2, 2, {0}},
      {"selu", [](const Tensor& x) { return selu(x); }, -2, 2, {0}},
      {"celu", [](const Tensor& x) { return celu(x, 0.7); }, -2, 2, {0}},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, -3, 3},
      {"silu", [](const Tensor& x) { return silu(x); }, -3, 3},
      {"mish", [](const Tensor& x) { return mish(x); }, -3, 3},
      {"softplus", [](const Tensor& x) { return softplus(x); }, -3, 3},
      {"softplus_beta", [](const Tensor& x) { return softplus(x, 2.0, 3.0); }, -2, 3, {1.5}},
      {"softsign", [](const Tensor& x) { return softsign(x); }, -3, 3, {0}},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }, -4, 4, {-3, 3}, false},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }, -4, 4, {-3, 3}},
      {"clamp", [](const Tensor& x) { return clamp(x, Scalar(-0.5), Scalar(0.6)); }, -1, 1, {-0.5, 0.6}, false},
      {"clamp_min", [](const Tensor& x) { return clamp_min(x, -0.5); }, -1, 1, {-0.5}, false},
      {"clamp_max", [](const Tensor& x) { return clamp_max(x, 0.6); }, -1, 1, {0.6}, false},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x, -0.4, 0.8); }, -1, 1, {-0.4, 0.8}, false},
      {"relu6", [](const Tensor& x) { return relu6(x); }, -1, 7, {0, 6}, false},
      {"nan_to_num", [](const Tensor& x) { return nan_to_num(x); }, -2, 2, {}, false},
      {"copy", [](const Tensor& x) { return x.clone(); }, -2, 2, {}, false},
      {"cast", [](const Tensor& x) { return x.to(f32).to(f64) * 3; }, -2, 2, {}, false},
  };
}

std::string check_unary(const UnaryCase& c) {
  const bool coarse = std::string(c.name) == "cast";  // f32 round trip: a wider step
  const double eps = coarse ? 1e-2 : 1e-6, atol = coarse ? 1e-4 : 1e-5;
  auto run = [&](const char* what, Fn f, std::vector<Tensor> in) -> std::string {
    std::string r = gradcheck(f, std::move(in), eps, atol);
    return r.empty() ? r : std::string(c.name) + " (" + what + "): " + r;
  };
  Fn1 f = c.f;
  std::string r;
  // contiguous
  if (!(r = run("contiguous", [f](const std::vector<Tensor>& v) { return f(v[0]); },
                {input({3, 4}, c.lo, c.hi, 1, c.kinks)}))
           .empty())
    return r;
  // 0-d
  if (!(r = run("0-d", [f](const std::vector<Tensor>& v) { return f(v[0]); }, {input({}, c.lo, c.hi, 2, c.kinks)}))
           .empty())
    return r;
  // transposed view
  if (!(r = run("transposed", [f](const std::vector<Tensor>& v) { return f(v[0].transpose(0, 1)); },
                {input({4, 3}, c.lo, c.hi, 3, c.kinks)}))
           .empty())
    return r;
  // strided slice
  if (!(r = run("sliced", [f](const std::vector<Tensor>& v) { return f(v[0].slice(1, 1, 6, 2)); },
                {input({2, 6}, c.lo, c.hi, 4, c.kinks)}))
           .empty())
    return r;
  // expanded view (stride 0): gradients of the broadcast copies add up
  return run("expanded",
             [f](const std::vector<Tensor>& v) {
               return f(v[0].expand({3, 4}));
             },
             {input({1, 4}, c.lo, c.hi, 5, c.kinks)});
}

}  // namespace

TEST(GradElementwise, Unary) {
  for (const UnaryCase& c : unary_cases()) EXPECT_EQ(check_unary(c), "") << c.name;
}

TEST(GradElementwise, UnaryLowerPrecision) {
  // The rules keep the input's dtype (scalars and masks do not promote): f32 and bf16 gradients
  // come back in that dtype and agree with f64 ones taken at the same (rounded) points.
  auto grad_at = [](const Fn1& f, const Tensor& x0) {
    Tensor x = x0.detach().require_grad();
    Gradients g = (f(x) * 1.5).sum().backward();
    return x.grad(g);
  };
  for (const UnaryCase& c : unary_cases()) {
    Tensor x64 = input({8}, c.lo, c.hi, 7, c.kinks);
    for (DType dt : {f32, bf16}) {
      Tensor x = x64.to(dt);
      Tensor gx = grad_at(c.f, x);
      ASSERT_TRUE(gx.defined()) << c.name;
      EXPECT_EQ(gx.dtype(), dt) << c.name;
      std::vector<double> v = gx.to(f64).to_vector<double>(), ref = grad_at(c.f, x.to(f64)).to_vector<double>();
      const double tol = dt == f32 ? 1e-4 : 3e-2;
      if (std::string(c.name) == "cast") continue;  // rounds to f32 on purpose
      for (size_t i = 0; i < v.size(); ++i)
        EXPECT_NEAR(v[i], ref[i], tol * (1 + std::abs(ref[i]))) << c.name << " " << dtype_name(dt).data();
    }
  }
}

TEST(GradElementwise, UnarySecondOrder) {
  for (const UnaryCase& c : unary_cases()) {
    if (!c.second) continue;
    Fn1 f = c.f;
    EXPECT_EQ(gradgradcheck([f](const std::vector<Tensor>& v) { return f(v[0].transpose(0, 1)); },
                            {input({3, 2}, c.lo, c.hi, 11, c.kinks)}),
              "")
        << c.name;
  }
}

TEST(GradElementwise, UnaryBoundaries) {
  Device d = ad_device();
  auto grad1 = [&](const Fn1& f, std::vector<double> xs) {
    Tensor x = tensor(xs, {static_cast<int64_t>(xs.size())}, d).require_grad();
    Gradients g = f(x).sum().backward();
    return x.grad(g).to_vector<double>();
  };
  // abs'(0) = 0, relu'(0) = 0, clamp passes the gradient at its bounds, sqrt'(0) = inf.
  EXPECT_EQ(grad1([](const Tensor& x) { return abs(x); }, {-1, 0, 2}), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(grad1([](const Tensor& x) { return relu(x); }, {-1, 0, 2}), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(grad1([](const Tensor& x) { return clamp(x, Scalar(-1.0), Scalar(1.0)); }, {-2, -1, 0, 1, 2}),
            (std::vector<double>{0, 1, 1, 1, 0}));
  EXPECT_EQ(grad1([](const Tensor& x) { return sqrt(x); }, {0})[0], std::numeric_limits<double>::infinity());
  // nan_to_num: no gradient to the replaced values.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_EQ(grad1([](const Tensor& x) { return nan_to_num(x, 0.0, 1.0, -1.0); }, {1, nan, inf, -inf}),
            (std::vector<double>{1, 0, 0, 0}));
  // Hardswish's piecewise rule at its breakpoints (PyTorch: 0 below -3, x / 3 + 0.5 up to 3).
  EXPECT_EQ(grad1([](const Tensor& x) { return hardswish(x); }, {-3, 3, 4}), (std::vector<double>{-0.5, 1.5, 1}));
  // Cast: the gradient comes back in the input's dtype.
  Tensor x32 = tensor<float>({1, 2}, {2}, d).require_grad();
  Gradients g = (x32.to(f64) * tensor<double>({3, 4}, {2}, d)).sum().backward();
  EXPECT_EQ(x32.grad(g).dtype(), f32);
  EXPECT_EQ(x32.grad(g).to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(GradElementwise, NonDifferentiableUnary) {
  Tensor x = input({5}, -2, 2, 1, {-1, 0, 1}).require_grad();
  for (const Tensor& y : {sign(x), floor(x), ceil(x), round(x), round(x, 1), trunc(x), isnan(x), isinf(x), isfinite(x),
                          logical_not(x), x.to(i64), bernoulli(sigmoid(x))})
    EXPECT_FALSE(y.requires_grad());
  // ... and they contribute nothing to a sum with a differentiable term.
  Gradients g = (x * 2 + floor(x) + round(x) + sign(x)).sum().backward();
  EXPECT_EQ(x.grad(g).to_vector<double>(), std::vector<double>(5, 2.0));
}

// ---- binary ------------------------------------------------------------------------------------

namespace {

struct BinaryCase {
  const char* name;
  Fn2 f;
  std::function<Tensor(const Shape&, uint64_t)> a, b;  ///< input generators
  bool second = true;
};

std::function<Tensor(const Shape&, uint64_t)> uni(double lo, double hi, std::vector<double> kinks = {}) {
  return [=](const Shape& s, uint64_t seed) { return input(s, lo, hi, seed, kinks); };
}
std::function<Tensor(const Shape&, uint64_t)> sgn(double lo, double hi) {
  return [=](const Shape& s, uint64_t seed) { return signed_input(s, lo, hi, seed); };
}

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, uni(-2, 2), uni(-2, 2), false},
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }, uni(-2, 2), uni(-2, 2), false},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, uni(-2, 2), uni(-2, 2), false},
      {"sub_alpha", [](const Tensor& a, const Tensor& b) { return sub(a, b, 0.5); }, uni(-2, 2), uni(-2, 2), false},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, uni(-2, 2), uni(-2, 2)},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, uni(-2, 2), sgn(0.5, 2)},
      {"remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, sgn(3.2, 3.9), uni(1.5, 1.55),
       false},
      {"fmod", [](const Tensor& a, const Tensor& b) { return fmod(a, b); }, sgn(3.2, 3.9), sgn(1.5, 1.55), false},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, uni(0.5, 2), uni(-2, 2)},
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }, sgn(0.3, 2), uni(-2, 2)},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, uni(-2, 2), uni(-2, 2), false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, uni(-2, 2), uni(-2, 2), false},
      {"fmax", [](const Tensor& a, const Tensor& b) { return fmax(a, b); }, uni(-2, 2), uni(-2, 2), false},
      {"fmin", [](const Tensor& a, const Tensor& b) { return fmin(a, b); }, uni(-2, 2), uni(-2, 2), false},
      {"clamp_tensor", [](const Tensor& a, const Tensor& b) { return clamp(a, b - 1, b + 1); }, uni(-2, 2), uni(-1, 1),
       false},
      {"hypot", [](const Tensor& a, const Tensor& b) { return hypot(a, b); }, sgn(0.3, 2), uni(-2, 2)},
      {"logaddexp", [](const Tensor& a, const Tensor& b) { return logaddexp(a, b); }, uni(-3, 3), uni(-3, 3)},
  };
}

std::string check_binary(const BinaryCase& c) {
  Fn2 f = c.f;
  auto run = [&](const char* what, Fn g, std::vector<Tensor> in) -> std::string {
    std::string r = gradcheck(g, std::move(in));
    return r.empty() ? r : std::string(c.name) + " (" + what + "): " + r;
  };
  struct Layout {
    const char* what;
    Shape sa, sb;
    Fn g;
  };
  std::vector<Layout> layouts = {
      {"same shape", {3, 4}, {3, 4}, [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }},
      {"broadcast row", {2, 3, 4}, {4}, [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }},
      {"broadcast both", {3, 1}, {1, 4}, [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }},
      {"broadcast lhs", {4}, {3, 4}, [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }},
      {"0-d rhs", {3, 2}, {}, [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }},
      {"transposed and sliced",
       {4, 3},
       {3, 8},
       [f](const std::vector<Tensor>& v) { return f(v[0].transpose(0, 1), v[1].slice(1, 0, 8, 2)); }},
      {"expanded",
       {3, 1},
       {4},
       [f](const std::vector<Tensor>& v) {
         return f(v[0].expand({3, 4}), v[1]);
       }},
  };
  uint64_t seed = 20;
  for (const Layout& l : layouts) {
    std::string r = run(l.what, l.g, {c.a(l.sa, seed), c.b(l.sb, seed + 1)});
    if (!r.empty()) return r;
    seed += 2;
  }
  return "";
}

}  // namespace

TEST(GradElementwise, Binary) {
  for (const BinaryCase& c : binary_cases()) EXPECT_EQ(check_binary(c), "") << c.name;
}

TEST(GradElementwise, BinaryScalarOperands) {
  // A Scalar operand becomes a 0-d constant: only the tensor side gets a gradient.
  std::vector<std::pair<const char*, Fn1>> fs = {
      {"x + 2", [](const Tensor& x) { return x + 2.0; }},
      {"3 - x", [](const Tensor& x) { return 3.0 - x; }},
      {"x * 1.5", [](const Tensor& x) { return x * 1.5; }},
      {"2 / x", [](const Tensor& x) { return 2.0 / x; }},
      {"x ** 3", [](const Tensor& x) { return pow(x, 3.0); }},
      {"x ** 3 (int)", [](const Tensor& x) { return pow(x, 3); }},
      {"x ** 2", [](const Tensor& x) { return pow(x, 2.0); }},
      {"x ** -1.5", [](const Tensor& x) { return pow(abs(x), -1.5); }},
      {"2 ** x", [](const Tensor& x) { return pow(2.0, x); }},
      {"atan2(x, 0.5)", [](const Tensor& x) { return atan2(x, 0.5); }},
      {"maximum(x, 0.2)", [](const Tensor& x) { return maximum(x, 0.2); }},
      {"x % 0.7", [](const Tensor& x) { return x % 0.7; }},
  };
  for (auto& [name, f] : fs)
    EXPECT_EQ(gradcheck([g = f](const std::vector<Tensor>& v) { return g(v[0]); },
                        {input({7}, -2, 2, 3, {-1.4, -0.7, 0, 0.2, 0.7, 1.4}, 0.05)}),
              "")
        << name;
}

TEST(GradElementwise, BinarySecondOrder) {
  for (const BinaryCase& c : binary_cases()) {
    if (!c.second) continue;
    Fn2 f = c.f;
    EXPECT_EQ(gradgradcheck([f](const std::vector<Tensor>& v) { return f(v[0], v[1].transpose(0, 1)); },
                            {c.a({2, 3}, 31), c.b({3, 1}, 32)}),
              "")
        << c.name;
  }
}

TEST(GradElementwise, BinaryTiesAndSpecialValues) {
  Device d = ad_device();
  Tensor a = tensor<double>({1, 2, 3}, {3}, d).require_grad();
  Tensor b = tensor<double>({1, 5, 0}, {3}, d).require_grad();
  // maximum/minimum split the gradient evenly on ties.
  Gradients g = maximum(a, b).sum().backward();
  EXPECT_EQ(a.grad(g).to_vector<double>(), (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(b.grad(g).to_vector<double>(), (std::vector<double>{0.5, 1, 0}));
  g = minimum(a, b).sum().backward();
  EXPECT_EQ(a.grad(g).to_vector<double>(), (std::vector<double>{0.5, 1, 0}));
  EXPECT_EQ(b.grad(g).to_vector<double>(), (std::vector<double>{0.5, 0, 1}));
  // fmax/fmin send the whole gradient to the value they return (a on ties, the non-NaN one).
  const double nan = std::nan("");
  Tensor c = tensor<double>({1, nan, 3}, {3}, d).require_grad();
  Tensor e = tensor<double>({1, 2, nan}, {3}, d).require_grad();
  g = fmax(c, e).sum().backward();
  EXPECT_EQ(c.grad(g).to_vector<double>(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(e.grad(g).to_vector<double>(), (std::vector<double>{0, 1, 0}));
  g = fmin(c, e).sum().backward();
  EXPECT_EQ(c.grad(g).to_vector<double>(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(e.grad(g).to_vector<double>(), (std::vector<double>{0, 1, 0}));
  // pow: 0 ** y has a zero exponent gradient for y >= 0; x ** 0 a zero base gradient.
  Tensor x = tensor<double>({0, 0, 2}, {3}, d).require_grad();
  Tensor y = tensor<double>({0, 2, 0}, {3}, d).require_grad();
  g = pow(x, y).sum().backward();
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(y.grad(g).to_vector<double>(), (std::vector<double>{0, 0, std::log(2.0)}));
}

TEST(GradElementwise, NonDifferentiableBinary) {
  Tensor a = input({4}, 1, 3, 1).require_grad();
  Tensor b = input({4}, 0.5, 1, 2).require_grad();
  for (const Tensor& y :
       {div(a, b, "floor"), div(a, b, "trunc"), floor_divide(a, b), eq(a, b), ne(a, b), lt(a, b), le(a, b), gt(a, b),
        ge(a, b), logical_and(a, b), logical_or(a, b), logical_xor(a, b), isclose(a, b)})
    EXPECT_FALSE(y.requires_grad());
  Tensor i = tensor<int64_t>({1, 2}, {2}, ad_device());
  for (const Tensor& y : {i & i, i | i, i ^ i, i << 1, i >> 1, ~i}) EXPECT_FALSE(y.requires_grad());
  EXPECT_ERROR(i.require_grad(), "floating-point");
}

// ---- ternary -----------------------------------------------------------------------------------

TEST(GradElementwise, Where) {
  Device d = ad_device();
  Tensor cond = tensor<bool>({true, false, false, true, true, false, true, false, false, true, false, true}, {3, 4}, d);
  Tensor cond_row = tensor<bool>({true, false, true, false}, {4}, d);
  auto f = [cond](const std::vector<Tensor>& v) { return where(cond, v[0], v[1]); };
  EXPECT_EQ(gradcheck(f, {input({3, 4}, -2, 2, 1), input({3, 4}, -2, 2, 2)}), "");
  // broadcasting over the condition and both branches, non-contiguous branches
  EXPECT_EQ(gradcheck([cond_row](const std::vector<Tensor>& v) { return where(cond_row, v[0].transpose(0, 1), v[1]); },
                      {input({4, 3}, -2, 2, 3), input({3, 1}, -2, 2, 4)}),
            "");
  EXPECT_EQ(
      gradcheck([cond](const std::vector<Tensor>& v) { return where(cond, v[0], 0.5); }, {input({3, 4}, -2, 2, 5)}),
      "");
  EXPECT_EQ(gradcheck([cond](const std::vector<Tensor>& v) { return masked_fill(v[0], cond, -1.0); },
                      {input({3, 4}, -2, 2, 6)}),
            "");
  // second order through a nonlinear branch
  EXPECT_EQ(gradgradcheck([cond](const std::vector<Tensor>& v) { return where(cond, exp(v[0]), v[1] * v[1]); },
                          {input({3, 4}, -1, 1, 7), input({4}, -1, 1, 8)}),
            "");
}

TEST(GradElementwise, Lerp) {
  auto f = [](const std::vector<Tensor>& v) { return lerp(v[0], v[1], v[2]); };
  EXPECT_EQ(gradcheck(f, {input({3, 4}, -2, 2, 1), input({3, 4}, -2, 2, 2), input({3, 4}, 0, 1, 3)}), "");
  EXPECT_EQ(gradcheck(f, {input({2, 3, 4}, -2, 2, 4), input({4}, -2, 2, 5), input({3, 1}, -0.5, 1.5, 6)}), "");
  EXPECT_EQ(gradcheck([](const std::vector<Tensor>& v) { return lerp(v[0].transpose(0, 1), v[1], 0.3); },
                      {input({4, 3}, -2, 2, 7), input({3, 4}, -2, 2, 8)}),
            "");
  EXPECT_EQ(gradgradcheck([](const std::vector<Tensor>& v) { return lerp(v[0], v[1], v[2]) * v[0]; },
                          {input({2, 3}, -1, 1, 9), input({3}, -1, 1, 10), input({2, 1}, 0, 1, 11)}),
            "");
}

// ---- second order: the representative set, in combination -----------------------------------

TEST(GradElementwise, SecondOrderRepresentative) {
  std::vector<std::pair<const char*, Fn>> fs = {
      {"exp*log", [](const std::vector<Tensor>& v) { return exp(v[0]) * log(v[1]); }},
      {"sin/tanh", [](const std::vector<Tensor>& v) { return sin(v[0]) / (tanh(v[1]) + 2); }},
      {"sigmoid^pow", [](const std::vector<Tensor>& v) { return pow(sigmoid(v[0]) + 0.5, v[1]); }},
      {"gelu*softplus", [](const std::vector<Tensor>& v) { return gelu(v[0]) * softplus(v[1] * v[0]); }},
      {"silu+gelu_tanh", [](const std::vector<Tensor>& v) { return silu(v[0] * v[1]) + gelu(v[1], "tanh"); }},
  };
  for (auto& [name, f] : fs)
    EXPECT_EQ(gradgradcheck(f, {input({2, 3}, -1, 1, 41), input({3}, 0.5, 1.5, 42)}), "") << name;
}

// ---- composites built from primitives ----------------------------------------------------------

TEST(GradElementwise, Composites) {
  std::vector<std::pair<const char*, Fn>> fs = {
      {"logsigmoid", [](const std::vector<Tensor>& v) { return -softplus(-v[0]); }},
      {"tanhshrink", [](const std::vector<Tensor>& v) { return v[0] - tanh(v[0]); }},
      {"glu", [](const std::vector<Tensor>& v) { return v[0].slice(1, 0, 2) * sigmoid(v[0].slice(1, 2, 4)); }},
      {"swish_beta", [](const std::vector<Tensor>& v) { return v[0] * sigmoid(v[0] * 1.7); }},
      {"softmin_2", [](const std::vector<Tensor>& v) { return exp(-v[0]) / (exp(-v[0]) + exp(-v[1])); }},
      {"logsumexp_2", [](const std::vector<Tensor>& v) { return log(exp(v[0]) + exp(v[1])); }},
      {"rms", [](const std::vector<Tensor>& v) { return sqrt(square(v[0]) + square(v[1]) + 1e-3); }},
      {"smooth_l1",
       [](const std::vector<Tensor>& v) {
         Tensor d = abs(v[0] - v[1]);
         return where(lt(d, 0.5), square(d) * 0.5 / 0.5, d - 0.25);
       }},
  };
  for (auto& [name, f] : fs) {
    EXPECT_EQ(gradcheck(f, {input({3, 4}, -2, 2, 51), input({3, 4}, -2, 2, 52)}), "") << name;
    if (std::string(name) != "smooth_l1")
      EXPECT_EQ(gradgradcheck(f, {input({2, 4}, -1, 1, 53), input({2, 4}, -1, 1, 54)}), "") << name;
  }
}

// ---- in-place forms ------------------------------------------------------------------------------

namespace {
/// Gradients of sum(f(a, b) * w) with respect to a and b.
std::vector<std::vector<double>> grads_of(const Fn& f, const Tensor& a0, const Tensor& b0) {
  Tensor a = a0.detach().clone().require_grad(), b = b0.detach().clone().require_grad();
  Tensor y = f({a, b});
  Tensor w = input(y.shape(), 0.5, 1.5, 99);
  Gradients g = (y * w).sum().backward();
  std::vector<std::vector<double>> r;
  for (const Tensor& t : {a, b}) {
    Tensor gt = t.grad(g);
    r.push_back(gt.defined() ? gt.to_vector<double>() : std::vector<double>(t.numel(), 0.0));
  }
  return r;
}
}  // namespace

TEST(GradElementwise, InplaceMatchesOutOfPlace) {
  Tensor a = input({3, 4}, -2, 2, 61), b = input({4}, 0.5, 2, 62);
  Tensor mask = tensor<bool>({true, false, false, true}, {4}, ad_device());
  struct Pair {
    const char* name;
    Fn inplace, outofplace;
  };
  std::vector<Pair> pairs = {
      {"add_",
       [](const std::vector<Tensor>& v) {
         Tensor h = v[0] * 1.5;
         h.add_(v[1]);
         return h;
       },
       [](const std::vector<Tensor>& v) { return v[0] * 1.5 + v[1]; }},
      {"add_ alpha, sub_",
       [](const std::vector<Tensor>& v) {
         Tensor h = sin(v[0]);
         h.add_(v[1], 2.0);
         h.sub_(v[0]);
         h.sub_(0.5);
         return h;
       },
       [](const std::vector<Tensor>& v) { return sin(v[0]) + v[1] * 2.0 - v[0] - 0.5; }},
      {"mul_",
       [](const std::vector<Tensor>& v) {
         Tensor h = v[0] + 1;
         h.mul_(v[1]);
         h.mul_(3.0);
         return h;
       },
       [](const std::vector<Tensor>& v) { return (v[0] + 1) * v[1] * 3.0; }},
      {"div_",
       [](const std::vector<Tensor>& v) {
         Tensor h = sin(v[0]);
         h.div_(v[1]);
         h.div_(2.0);
         return h;
       },
       [](const std::vector<Tensor>& v) { return sin(v[0]) / v[1] / 2.0; }},
      {"mul_ by itself",
       [](const std::vector<Tensor>& v) {
         Tensor h = v[0] * v[1];
         h.mul_(h);
         return h;
       },
       [](const std::vector<Tensor>& v) { return square(v[0] * v[1]); }},
      {"masked_fill_",
       [mask](const std::vector<Tensor>& v) {
         Tensor h = v[0] * v[1];
         h.masked_fill_(mask, 0.25);
         return h * v[0];
       },
       [mask](const std::vector<Tensor>& v) { return masked_fill(v[0] * v[1], mask, 0.25) * v[0]; }},
      {"fill_, zero_",
       [](const std::vector<Tensor>& v) {
         Tensor h = v[0] * 2;
         h.fill_(3.0);
         Tensor k = exp(v[1]);
         k.zero_();
         return h * v[0] + k;
       },
       [](const std::vector<Tensor>& v) { return v[0] * 3.0 + zeros_like(v[1]); }},
      {"copy_",
       [](const std::vector<Tensor>& v) {
         Tensor h = v[0] * 2;
         h.copy_(exp(v[1]));  // broadcast source
         return h * v[0];
       },
       [](const std::vector<Tensor>& v) {
         return exp(v[1]).expand({3, 4}) * v[0];
       }},
  };
  for (const Pair& p : pairs) {
    EXPECT_EQ(gradcheck(p.inplace, {a, b}), "") << p.name;
    auto gi = grads_of(p.inplace, a, b), go = grads_of(p.outofplace, a, b);
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < gi[i].size(); ++j) EXPECT_NEAR(gi[i][j], go[i][j], 1e-12) << p.name << " input " << i;
  }
}

TEST(GradElementwise, InplaceSecondOrder) {
  EXPECT_EQ(gradgradcheck(
                [](const std::vector<Tensor>& v) {
                  Tensor h = v[0] * v[0];
                  h.mul_(v[1]);
                  h.div_(v[1] + 2);
                  h.add_(v[0]);
                  return h;
                },
                {input({2, 3}, -1, 1, 71), input({3}, 0.5, 1.5, 72)}),
            "");
}

TEST(GradElementwise, InplaceOnLeafThrows) {
  Tensor x = input({3}, -1, 1, 81).require_grad();
  const std::vector<double> initial = x.to_vector<double>();
  for (auto f : std::vector<std::function<void()>>{[&] { x.add_(1.0); }, [&] { x.mul_(x); }, [&] { x.zero_(); },
                                                   [&] { x.fill_(2.0); },
                                                   [&] { x.copy_(ones({3}, {.dtype = f64, .device = ad_device()})); }})
    EXPECT_ERROR(f(), "a leaf tensor that requires grad is used in an in-place operation");
  // The refused writes left the leaf untouched; updates under NoGradGuard are allowed (optimizer steps).
  std::vector<double> before = x.to_vector<double>();
  EXPECT_EQ(before, initial);
  {
    NoGradGuard ng;
    x.sub_(0.5);
  }
  std::vector<double> after = x.to_vector<double>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_DOUBLE_EQ(after[i], before[i] - 0.5);
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
}

TEST(GradElementwise, ModifiedSavedTensorThrows) {
  Tensor x = input({3}, -1, 1, 91).require_grad();
  // exp saves its output.
  Tensor y = exp(x);
  y.add_(1.0);
  EXPECT_ERROR(y.sum().backward(), "modified in place");
  // mul saves its inputs.
  Tensor h = x * 2;
  Tensor z = h * x;
  h.mul_(3.0);
  EXPECT_ERROR(z.sum().backward(), "modified in place");
  // A write to a tensor nobody saved is fine (add saves nothing).
  Tensor k = x * 1;
  Tensor u = k + 2;
  k.zero_();
  Gradients g = u.sum().backward();
  EXPECT_EQ(x.grad(g).to_vector<double>(), std::vector<double>(3, 1.0));
  // The in-place op's own saved inputs are the values from before the write (x.mul_(y) saves x).
  Tensor yy = input({3}, 0.5, 1, 92).require_grad();
  Tensor h2 = x * 1;
  h2.mul_(yy);
  h2.mul_(yy);
  g = h2.sum().backward();
  std::vector<double> xv = x.to_vector<double>(), yv = yy.to_vector<double>(), gy = yy.grad(g).to_vector<double>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(gy[i], 2 * xv[i] * yv[i], 1e-12);
}

TEST(GradElementwise, InplaceBadInputIsAnError) {
  Tensor x = input({3, 4}, -1, 1, 95).require_grad();
  Tensor h = x * 1;
  EXPECT_ERROR(h.add_(input({5}, -1, 1, 96)), "add_");
  EXPECT_ERROR(h.slice(1, 0, 2).mul_(2.0), "view");
  Tensor i = tensor<int64_t>({1, 2, 3}, {3}, ad_device());
  EXPECT_ERROR(i.add_(input({3}, -1, 1, 97)), "add_");
}

// Every op of the elementwise and creation families has a rule (checked above) or is marked
// non-differentiable.
TEST(GradElementwise, EveryElementwiseOpHasARule) {
  using ir::Family;
  for (int i = 0; i < ir::kNumOps; ++i) {
    const auto k = static_cast<ir::OpKind>(i);
    const Family f = ir::op_family(k);
    if (f != Family::Unary && f != Family::Binary && f != Family::Ternary && f != Family::Creation) continue;
    const std::string name(ir::op_name(k));
    const autodiff::GradRule& r = autodiff::rule_for(k);
    if (r.differentiable) {
      EXPECT_TRUE(static_cast<bool>(r.fn)) << name << " has no gradient rule";
      EXPECT_TRUE(kiln::test::grad_covered().count(name)) << name << " has a rule but no gradcheck";
    } else {
      EXPECT_FALSE(static_cast<bool>(r.fn)) << name;
    }
  }
}
