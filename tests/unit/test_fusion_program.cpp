// SPDX-License-Identifier: MIT OR Apache-2.0
// Fused groups run as elementwise programs (cpu::vec::run_program): every op with a program
// form, on special values (NaN, +-inf, +-0, values outside the vector approximations' ranges)
// and on sizes that end in partial vectors and chunks, gives the bits of the unfused CPU
// kernels and of the op-by-op tile path; bool values, scalar and broadcast loads, stored
// intermediates, a trailing row op and the streamed large-result path included.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/vec.h"
#include "fusion/fusion.h"
#include "fusion_jit_mode.h"
#include "fusion_small_limit.h"
#include "simd_levels.h"

using namespace kiln;

namespace {

Device plain() { return Device::cpu().without_fusion(); }
Device fused() { return plain().fusion(); }

/// Inputs mixing ordinary values with the special ones, n elements.
std::vector<float> inputs(int64_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.f, scale);
  const float special[] = {0.f,      -0.f,  INFINITY, -INFINITY, NAN,  1e30f, -1e30f, 50000.f,
                           -50000.f, 100.f, -100.f,   1e-40f,    0.5f, -0.5f, 1.f,    -1.f,
                           3.0f,     -3.0f, 6.0f,     -6.0f,     9.5f, -9.5f, 89.f,   -104.f};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = (i % 7 == 3) ? special[(i / 7) % std::size(special)] : nd(g);
  return v;
}

/// Bitwise equal, except that any NaN equals any NaN.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return ::testing::AssertionFailure() << "shape or dtype";
  if (a.dtype() == DType::Bool) {
    if (a.to_vector<bool>() != b.to_vector<bool>()) return ::testing::AssertionFailure() << "bool values differ";
    return ::testing::AssertionSuccess();
  }
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) && std::isnan(vb[i])) continue;
    if (std::memcmp(&va[i], &vb[i], 4) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
  }
  return ::testing::AssertionSuccess();
}

using Chain = std::function<std::vector<Tensor>(const Tensor&)>;

/// Runs chain on the CPU, then fused as an interpreted program, as a compiled one
/// (cpu::vec::compiled_program) and op by op; all four must agree bitwise, and the program and
/// compiled paths must have run.
void check(const std::string& name, const Chain& chain, int64_t n, uint32_t seed = 1, float scale = 3.0f) {
  SCOPED_TRACE(name + " n=" + std::to_string(n));
  const test::SmallLimit all(0);  // small tensors: every op queued
  const std::vector<float> v = inputs(n, seed, scale);
  Tensor xc = tensor(v, {n}).to(plain());
  std::vector<Tensor> ref = chain(xc);
  enum { kProgram, kCompiled, kOpByOp };
  for (int mode : {kProgram, kCompiled, kOpByOp}) {
    const char* what = mode == kProgram ? " (program)" : mode == kCompiled ? " (compiled)" : " (op by op)";
    fusion::set_program_enabled(mode != kOpByOp);
    const test::JitMode jit(mode == kCompiled ? cpu::vec::JitMode::kSync : cpu::vec::JitMode::kOff);
    fusion::reset_stats();
    std::vector<Tensor> got = chain(xc.to(fused()));
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "output " << i << what;
    if (mode != kOpByOp) EXPECT_GE(fusion::stats().program_groups, 1) << "the group did not run as a program";
    if (mode == kCompiled && test::jit_expected())
      EXPECT_GE(fusion::stats().compiled_groups, 1) << "no compiled kernel ran: " << cpu::vec::jit_unavailable_reason();
  }
  fusion::set_program_enabled(true);
}

struct UnaryCase {
  const char* name;
  Tensor (*f)(const Tensor&);
};

}  // namespace

TEST(FusionProgram, EveryUnaryOpMatchesBitwise) {
  const UnaryCase cases[] = {
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"square", [](const Tensor& x) { return square(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"erf", [](const Tensor& x) { return erf(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"log1p", [](const Tensor& x) { return log1p(x); }},
      {"log2", [](const Tensor& x) { return log2(x); }},
      {"log10", [](const Tensor& x) { return log10(x); }},
      {"expm1", [](const Tensor& x) { return expm1(x); }},
      {"atan", [](const Tensor& x) { return atan(x); }},
      {"asinh", [](const Tensor& x) { return asinh(x); }},
      {"sinh", [](const Tensor& x) { return sinh(x); }},
      {"floor", [](const Tensor& x) { return floor(x); }},
      {"ceil", [](const Tensor& x) { return ceil(x); }},
      {"trunc", [](const Tensor& x) { return trunc(x); }},
      {"sign", [](const Tensor& x) { return sign(x); }},
      {"softsign", [](const Tensor& x) { return softsign(x); }},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x, 1.5, 10.0); }},
      {"mish", [](const Tensor& x) { return mish(x); }},
      {"elu", [](const Tensor& x) { return elu(x, 0.7); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }},
      {"clamp", [](const Tensor& x) { return clamp(x, Scalar(-0.3), Scalar(2.5)); }},
      {"clamp_min", [](const Tensor& x) { return clamp(x, Scalar(-0.3), std::nullopt); }},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x); }},
  };
  for (const UnaryCase& c : cases)
    for (int64_t n : {1, 17, 255, 1000, 4096 + 33})
      check(
          c.name,
          [&](const Tensor& x) {
            Tensor y = c.f(x * 1.5);  // the op inside a chain, its result stored
            return std::vector<Tensor>{y, y * 0.5};
          },
          n);
}

TEST(FusionProgram, BinaryCompareLogicalAndWhereMatchBitwise) {
  const int64_t n = 3000;
  Tensor other = tensor(inputs(n, 7), {n}).to(plain());  // a second input, with its own specials
  check(
      "add sub mul div",
      [&](const Tensor& x) { return std::vector<Tensor>{((x + other.to(x.device())) * x - 2.0) / (x - 1.0)}; }, n);
  check(
      "maximum minimum",
      [&](const Tensor& x) {
        Tensor o = other.to(x.device());
        return std::vector<Tensor>{maximum(x, o) - minimum(x * 0.5, o)};
      },
      n);
  for (int k = 0; k < 6; ++k)
    check(
        "compare " + std::to_string(k),
        [&](const Tensor& x) {
          Tensor o = other.to(x.device()), y = x * 2.0;
          Tensor m = k == 0   ? eq(y, o)
                     : k == 1 ? ne(y, o)
                     : k == 2 ? lt(y, o)
                     : k == 3 ? le(y, o)
                     : k == 4 ? gt(y, o)
                              : ge(y, o);
          return std::vector<Tensor>{m, where(m, y, o)};  // a bool result stored, and used
        },
        n);
  check(
      "logical",
      [&](const Tensor& x) {
        Tensor a = gt(x, 0.0), b = lt(x * 3.0, 1.0);
        return std::vector<Tensor>{logical_and(a, b), logical_or(a, logical_not(b)), logical_xor(a, b),
                                   logical_not(x * 1.0)};
      },
      n);
  check(
      "lerp",  // weights inside, at and beyond [0, 1], NaN and inf among them; a scalar weight too
      [&](const Tensor& x) {
        Tensor o = other.to(x.device());
        return std::vector<Tensor>{lerp(x * 0.5, o, x * 0.25), lerp(x, o * 2.0, scalar_tensor(0.3).to(x.device()))};
      },
      n);
  check(
      "isnan isfinite casts",
      [&](const Tensor& x) {
        Tensor y = x * 2.0;
        return std::vector<Tensor>{isnan(y), isfinite(y), y.to(DType::Bool),
                                   isnan(y).to(DType::F32) + y.to(DType::Bool).to(DType::F32)};
      },
      n);
}

TEST(FusionProgram, ScalarBroadcastAndBoolLoadsMatch) {
  // A [64, 300] chain reading a row vector, a column vector (gathered), a 0-d scalar and a
  // bool mask made eagerly (loaded from memory as bytes).
  const int64_t r = 64, c = 300;
  Tensor row = tensor(inputs(c, 3), {1, c}).to(plain()), col = tensor(inputs(r, 4), {r, 1}).to(plain());
  Tensor s = scalar_tensor(0.75).to(plain());
  Tensor mask = gt(tensor(inputs(r * c, 5), {r, c}).to(plain()), 0.0);
  check(
      "broadcast",
      [&](const Tensor& x) {
        const Device d = x.device();
        Tensor x2 = x.reshape({r, c});
        Tensor y = (x2 * row.to(d) + col.to(d)) * s.to(d);
        return std::vector<Tensor>{where(mask.to(d), y, x2), logical_and(mask.to(d), gt(y, 0.0))};
      },
      r * c);
}

TEST(FusionProgram, TrailingRowOpReadsTheProgramsValue) {
  const int64_t r = 37, c = 513;
  check(
      "softmax",
      [&](const Tensor& x) {
        Tensor y = gelu(x.reshape({r, c}) * 0.25);
        return std::vector<Tensor>{softmax(y - 1.0, -1)};
      },
      r * c, 9, 1.0f);
  check(
      "sum",
      [&](const Tensor& x) {
        Tensor y = relu(x.reshape({r, c})) * 2.0;
        return std::vector<Tensor>{y, kiln::sum(y, {1})};
      },
      r * c);
}

TEST(FusionProgram, LargeStreamedResultsMatch) {
  const int64_t n = (int64_t{5} << 20) + 40;  // 20 MB of f32: non-temporal stores, then a partial tile
  check(
      "streamed", [](const Tensor& x) { return std::vector<Tensor>{tanh(x * 0.3) * x + 1.0}; }, n, 11, 1.0f);
}

TEST(FusionProgram, LongChainsReuseRegisters) {
  // 60 ops in one group: registers are freed after their last reader and reused.
  check(
      "long",
      [](const Tensor& x) {
        Tensor y = x * 0.1, z = x;
        for (int i = 0; i < 30; ++i) {
          y = tanh(y) + z * 0.01;
          if (i % 10 == 0) z = y;
        }
        return std::vector<Tensor>{y};
      },
      5000, 13);
}

TEST(FusionProgram, ScalarPostStepsMatchBitwise) {
  // A scalar +, -, *, / after an op runs as that op's post step (PInstr::Post), in both operand
  // orders, after a unary op with a vector form, a guarded one (sin: lanes outside its range go
  // through the scalar function and the post step), a binary op and where; the bits are those
  // of the ops run apart (no FMA of a product and the sum after it).
  using F = Tensor (*)(const Tensor&);
  const F heads[] = {
      [](const Tensor& x) { return tanh(x); },
      [](const Tensor& x) { return sin(x); },
      [](const Tensor& x) { return x * x; },
      [](const Tensor& x) { return where(gt(x, 0.5), x, x * 2.0); },
  };
  const F posts[] = {
      [](const Tensor& y) { return y + 0.25; },      [](const Tensor& y) { return y - 0.25; },
      [](const Tensor& y) { return 0.25 - y; },      [](const Tensor& y) { return y * 1.7; },
      [](const Tensor& y) { return y / 3.0; },       [](const Tensor& y) { return 3.0 / y; },
      [](const Tensor& y) { return y * 1.5 + 0.1; },  // the second op: a post step of the first
  };
  for (size_t h = 0; h < std::size(heads); ++h)
    for (size_t p = 0; p < std::size(posts); ++p)
      for (int64_t n : {1, 300, 4096 + 17}) {
        check(
            "head " + std::to_string(h) + " post " + std::to_string(p),
            [&](const Tensor& x) { return std::vector<Tensor>{posts[p](heads[h](x * 1.25))}; }, n);
      }
  // A 0-d tensor as the scalar; the counter sees the post steps.
  Tensor s = scalar_tensor(0.3).to(plain());
  fusion::reset_stats();
  {
    const test::SmallLimit all(0);
    Tensor x = tensor(inputs(1000, 21), {1000}).to(fused());
    Tensor y = (tanh(x) * s.to(fused())) - 1.0;
    EXPECT_TRUE(same_bits(y, (tanh(x.to(plain())) * s) - 1.0));
  }
  EXPECT_GE(fusion::stats().post_steps, 1);
  // Not a post step: a result that is also stored, or read twice.
  check(
      "stored",
      [](const Tensor& x) {
        Tensor t = tanh(x);
        return std::vector<Tensor>{t, t * 2.0};
      },
      500);
  check(
      "read twice",
      [](const Tensor& x) {
        Tensor t = tanh(x);
        return std::vector<Tensor>{t * 2.0 + t};
      },
      500);
}

TEST(FusionProgram, CompiledKernelsAtEverySimdLevel) {
  // The compiled kernels are built for the target the interpreter dispatches to: at SSE4 and
  // AVX2 too (where tanh and erf divide), each matches that level's interpreter and kernels.
  test::at_every_simd_level([] {
    check(
        "tanh chain", [](const Tensor& x) { return std::vector<Tensor>{tanh(relu(x * 1.5 + 0.25) - x) * 0.5}; },
        4096 + 17);
    check(
        "erf-GELU", [](const Tensor& x) { return std::vector<Tensor>{x * 0.5 * (erf(x / std::sqrt(2.0)) + 1.0)}; },
        300);
    check(
        "sin, compare, where",
        [](const Tensor& x) {
          Tensor m = gt(sin(x) * 2.0, 0.5);
          return std::vector<Tensor>{m, where(m, exp(x * 0.1), x - 1.0)};
        },
        1000);
  });
}
