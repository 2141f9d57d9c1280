// SPDX-License-Identifier: MIT OR Apache-2.0
// Property test of the unary elementwise ops against a scalar reference computed in f64: every
// op, at lengths 0 to 300 and a few large odd ones, contiguous, strided and flipped, on f32 and
// integer inputs (whose float buffer the op then overwrites in place), out of place and in place
// (a fused chain's dead temporary, the vector kernel and the program interpreter called with
// their output over their input), at every SIMD level, on the plain and the fused CPU. Each
// op's bound in ulps is stated in its row and in docs/tensors.md (Accuracy).
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/vec.h"
#include "elementwise_property.h"
#include "fusion_jit_mode.h"
#include "fusion_small_limit.h"
#include "simd_levels.h"
#include "test_devices.h"

using namespace kiln;
using namespace kiln::test::prop;

namespace {

constexpr double kPi = 3.14159265358979323846;

double erfinv_ref(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return NAN;
  if (y == 1 || y == -1) return std::copysign(INFINITY, y);
  double lo = -6, hi = 6;  // erf is monotone; bisection to f64's resolution
  for (int i = 0; i < 200 && lo < hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_ref(double x, double beta, double th) {
  return x * beta > th ? x : std::log1p(std::exp(x * beta)) / beta;
}
double clamp_ref(double x, double lo, double hi) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); }

/// One float op: the Kiln function, its f64 reference, its bound (ulps of the result, plus
/// atol * max(1, |x|) for results that cancel, such as 1 + erf(x) in GELU), and its kind and real
/// attributes for the kernel-level in-place runs.
struct FloatOp {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::function<double(double)> ref;
  double ulps;
  double atol = 0;
  ir::OpKind kind = ir::OpKind::Copy;  // Copy: no kernel-level run
  std::vector<double> reals = {};
  /// The op (kind, real attributes, one f32 input and output) for the kernel-level runs.
  ir::Op ir_op() const {
    ir::Op k;
    k.kind = kind;
    k.attrs.reals.assign(reals.begin(), reals.end());
    k.inputs = {ir::contiguous_desc({1}, DType::F32)};
    k.outputs = {ir::contiguous_desc({1}, DType::F32)};
    return k;
  }
  std::string check(float got, double x) const {
    return mismatch(got, ref(x), ulps, atol > 0 && std::isfinite(x) ? atol * std::max(1.0, std::fabs(x)) : 0.0);
  }
};

std::vector<FloatOp> float_ops() {
  using K = ir::OpKind;
  const double selu_a = 1.6732632423543772848170429916717, selu_s = 1.0507009873554804934193349852946;
  return {
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, 0, 0, K::Abs},
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, 0, 0, K::Neg},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double x) { return static_cast<double>((x > 0) - (x < 0)); },
       0, 0, K::Sign},  // NaN -> 0
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, 0.5, 0, K::Square},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.5, 0, K::Sqrt},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 2, 0, K::Rsqrt},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, 0.5, 0,
       K::Reciprocal},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, 2, 0, K::Exp},
      {"exp2", [](const Tensor& x) { return exp2(x); }, [](double x) { return std::exp2(x); }, 2, 0, K::Exp2},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); }, 4, 0, K::Expm1},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 4, 0, K::Log},
      {"log2", [](const Tensor& x) { return log2(x); }, [](double x) { return std::log2(x); }, 4, 0, K::Log2},
      {"log10", [](const Tensor& x) { return log10(x); }, [](double x) { return std::log10(x); }, 4, 0, K::Log10},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, 4, 0, K::Log1p},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, 4, 0, K::Sin},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, 4, 0, K::Cos},
      {"tan", [](const Tensor& x) { return tan(x); }, [](double x) { return std::tan(x); }, 4, 0, K::Tan},
      {"asin", [](const Tensor& x) { return asin(x); }, [](double x) { return std::asin(x); }, 4, 0, K::Asin},
      {"acos", [](const Tensor& x) { return acos(x); }, [](double x) { return std::acos(x); }, 4, 0, K::Acos},
      {"atan", [](const Tensor& x) { return atan(x); }, [](double x) { return std::atan(x); }, 4, 0, K::Atan},
      {"sinh", [](const Tensor& x) { return sinh(x); }, [](double x) { return std::sinh(x); }, 4, 0, K::Sinh},
      {"cosh", [](const Tensor& x) { return cosh(x); }, [](double x) { return std::cosh(x); }, 4, 0, K::Cosh},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 8, 0, K::Tanh},
      {"asinh", [](const Tensor& x) { return asinh(x); }, [](double x) { return std::asinh(x); }, 4, 0, K::Asinh},
      {"acosh", [](const Tensor& x) { return acosh(x); }, [](double x) { return std::acosh(x); }, 4, 0, K::Acosh},
      {"atanh", [](const Tensor& x) { return atanh(x); }, [](double x) { return std::atanh(x); }, 4, 0, K::Atanh},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, 8, 0, K::Erf},
      {"erfinv", [](const Tensor& x) { return erfinv(x); }, erfinv_ref, 8, 0, K::Erfinv},
      {"floor", [](const Tensor& x) { return floor(x); }, [](double x) { return std::floor(x); }, 0, 0, K::Floor},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](double x) { return std::ceil(x); }, 0, 0, K::Ceil},
      {"round", [](const Tensor& x) { return round(x); }, [](double x) { return std::nearbyint(x); }, 0, 0, K::Round},
      {"trunc", [](const Tensor& x) { return trunc(x); }, [](double x) { return std::trunc(x); }, 0, 0, K::Trunc},
      {"frac", [](const Tensor& x) { return frac(x); }, [](double x) { return x - std::trunc(x); }, 0, 0, K::Frac},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, 4, 0, K::Sigmoid},
      {"logit", [](const Tensor& x) { return logit(x); }, [](double x) { return std::log(x / (1 - x)); }, 8, 1e-7,
       K::Logit},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return std::isnan(x) || x > 0 ? x : 0.0; }, 0, 0,
       K::Relu},
      {"leaky_relu",
       [](const Tensor& x) { return leaky_relu(x, 0.1); },
       [](double x) { return x > 0 ? x : static_cast<double>(0.1f) * x; },
       1,
       0,
       K::LeakyRelu,
       {0.1}},
      {"elu",
       [](const Tensor& x) { return elu(x, 0.7); },
       [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); },
       4,
       1e-7,
       K::Elu,
       {0.7, 1.0, 1.0}},
      {"selu",
       [](const Tensor& x) { return selu(x); },
       [=](double x) { return x > 0 ? selu_s * x : selu_s * selu_a * std::expm1(x); },
       4,
       1e-7,
       K::Elu,
       {selu_a, selu_s, 1.0}},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, 8, 3e-7},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x))); }, 8, 3e-7},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, 4, 1e-7, K::Silu},
      {"mish", [](const Tensor& x) { return mish(x); }, [](double x) { return x * std::tanh(softplus_ref(x, 1, 20)); },
       8, 3e-7, K::Mish},
      {"softplus",
       [](const Tensor& x) { return softplus(x, 1.5, 10.0); },
       [](double x) { return softplus_ref(x, 1.5, 10); },
       4,
       1e-7,
       K::Softplus,
       {1.5, 10.0}},
      {"softsign", [](const Tensor& x) { return softsign(x); }, [](double x) { return x / (1 + std::fabs(x)); }, 2, 0,
       K::Softsign},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); },
       [](double x) { return clamp_ref(x / 6 + 0.5, 0, 1); }, 2, 1e-7, K::Hardsigmoid},
      {"hardswish", [](const Tensor& x) { return hardswish(x); },
       [](double x) { return x * clamp_ref(x + 3, 0, 6) / 6; }, 2, 0, K::Hardswish},
      {"clamp", [](const Tensor& x) { return clamp(x, Scalar(-0.3), Scalar(2.5)); },
       [](double x) { return clamp_ref(x, static_cast<double>(-0.3f), static_cast<double>(2.5f)); }, 0},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x); }, [](double x) { return clamp_ref(x, -1, 1); }, 0},
      {"relu6", [](const Tensor& x) { return relu6(x); }, [](double x) { return clamp_ref(x, 0, 6); }, 0},
      {"nan_to_num", [](const Tensor& x) { return nan_to_num(x); },
       [](double x) {
         const double m = std::numeric_limits<float>::max();
         return std::isnan(x) ? 0.0 : x == INFINITY ? m : x == -INFINITY ? -m : x;
       },
       0},
  };
}

/// f over values v (given as doubles, stored as T) in layout on dev, checked against op.ref.
template <class T>
void check_float_op(const FloatOp& op, const std::vector<T>& v, Layout layout, const Device& dev, bool chain) {
  Tensor x = make_input(v, layout, dev);
  // chain: the op reads a temporary that dies with it (a fused program may write over it).
  Tensor y = chain ? op.f(x * 1.0) : op.f(x);
  // Float results; ops that keep an integer dtype (abs, floor, clamp, ...) compare as floats.
  ASSERT_TRUE(y.dtype() == DType::F32 || y.dtype() == x.dtype()) << op.name;
  ASSERT_EQ(y.numel(), static_cast<int64_t>(v.size())) << op.name;
  const std::vector<float> got = y.to(DType::F32).to_vector<float>();
  int bad = 0;
  for (size_t i = 0; i < v.size() && bad < 3; ++i) {
    const double in = static_cast<double>(static_cast<float>(v[i]));
    const std::string why = op.check(got[i], in);
    if (why.empty()) continue;
    ++bad;
    ADD_FAILURE() << op.name << " on " << dev.str() << ", " << dtype_name(x.dtype()).data() << " "
                  << layout_name(layout) << (chain ? " (chained)" : "") << ", n=" << v.size() << ", element " << i
                  << " (input " << in << "): " << why;
  }
}

/// Every float op over every length, layout and input dtype on dev; fused devices also run the
/// op on a chain's temporary. The lower SIMD levels take the edge lengths only.
void check_float_ops(const Device& dev, bool full) {
  const bool fused = dev.has_fusion();
  for (const FloatOp& op : float_ops()) {
    const int failures = failure_count();
    for (int64_t n : full ? lengths() : edge_lengths()) {
      const auto fv = float_values(n, static_cast<uint32_t>(n) + 7);
      const auto iv = int_values<int32_t>(n, static_cast<uint32_t>(n) + 11);
      for (Layout l : {Layout::kContiguous, Layout::kStrided, Layout::kFlipped}) {
        check_float_op(op, fv, l, dev, false);
        check_float_op(op, iv, l, dev, false);  // the cast's buffer is overwritten in place
        if (fused) check_float_op(op, fv, l, dev, true);
      }
      if (failure_count() > failures) break;  // one report per broken op, not thousands of lines
    }
  }
}

}  // namespace

TEST(UnaryProperty, FloatOpsMatchF64ReferencePlainCpu) {
  int level = 0;
  test::at_every_simd_level([&] { check_float_ops(plain_cpu(), level++ == 0); });
}

TEST(UnaryProperty, FloatOpsMatchF64ReferenceFusedCpu) {
  const test::SmallLimit all(0);  // every op queued: even one element runs as a program
  const test::JitMode interp(cpu::vec::JitMode::kOff);
  int level = 0;
  test::at_every_simd_level([&] { check_float_ops(fused_cpu(), level++ == 0); });
}

TEST(UnaryProperty, I64InputsOfFloatOps) {
  // i64 values (cast to f32 first) through the same ops, at the edge lengths.
  for (const Device& dev : {plain_cpu(), fused_cpu()})
    for (const FloatOp& op : float_ops())
      for (int64_t n : edge_lengths()) check_float_op(op, int_values<int64_t>(n, 5), Layout::kContiguous, dev, false);
}

TEST(UnaryProperty, VectorKernelInPlace) {
  // The row kernel (cpu::vec::unary_f32) with its output over its input, and out of place.
  test::at_every_simd_level([] {
    for (const FloatOp& op : float_ops()) {
      if (op.kind == ir::OpKind::Copy) continue;
      const ir::Op k = op.ir_op();
      for (int64_t n : lengths()) {
        const std::vector<float> v = float_values(n, static_cast<uint32_t>(n) + 3);
        std::vector<float> in_place = v, out(v.size());
        if (!cpu::vec::unary_f32(k, v.data(), out.data(), n)) break;  // no vector form
        ASSERT_TRUE(cpu::vec::unary_f32(k, in_place.data(), in_place.data(), n));
        for (size_t i = 0; i < v.size(); ++i) {
          const std::string why = op.check(in_place[i], v[i]);
          ASSERT_TRUE(why.empty()) << op.name << " in place, n=" << n << ", element " << i << " (input " << v[i]
                                   << "): " << why;
          ASSERT_EQ(std::memcmp(&in_place[i], &out[i], 4), 0) << op.name << ": in place differs, element " << i;
        }
      }
    }
  });
}

TEST(UnaryProperty, ProgramInstructionInPlace) {
  // One Op instruction of the program interpreter whose destination register is its operand,
  // storing over the loaded buffer itself.
  test::at_every_simd_level([] {
    for (const FloatOp& op : float_ops()) {
      if (op.kind == ir::OpKind::Copy) continue;
      const ir::Op k = op.ir_op();
      cpu::vec::PInstr ins;
      if (!cpu::vec::program_supports(k, &ins)) continue;
      cpu::vec::PInstr load, store;
      load.code = cpu::vec::PInstr::Load;
      store.code = cpu::vec::PInstr::Store;
      ins.code = cpu::vec::PInstr::Op;
      const cpu::vec::PInstr prog[] = {load, ins, store};  // r0 <- mem; r0 <- op(r0); mem <- r0
      for (int64_t n : lengths()) {
        const std::vector<float> v = float_values(n, static_cast<uint32_t>(n) + 5);
        std::vector<float> buf = v;
        void* ptrs[] = {buf.data()};
        cpu::vec::run_program(prog, 3, 1, ptrs, n, false);
        for (size_t i = 0; i < v.size(); ++i) {
          const std::string why = op.check(buf[i], v[i]);
          ASSERT_TRUE(why.empty()) << op.name << " program in place, n=" << n << ", element " << i << " (input " << v[i]
                                   << "): " << why;
        }
      }
    }
  });
}

namespace {

/// Ops that keep an integer dtype, with their exact int64 reference.
struct IntOp {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::function<int64_t(int64_t)> ref;
};

template <class T>
void check_int_ops(const Device& dev) {
  const IntOp ops[] = {
      {"abs", [](const Tensor& x) { return abs(x); }, [](int64_t x) { return x < 0 ? -x : x; }},
      {"neg", [](const Tensor& x) { return neg(x); }, [](int64_t x) { return -x; }},
      {"sign", [](const Tensor& x) { return sign(x); }, [](int64_t x) { return int64_t{(x > 0) - (x < 0)}; }},
      {"square", [](const Tensor& x) { return square(x); }, [](int64_t x) { return x * x; }},
      {"relu", [](const Tensor& x) { return relu(x); }, [](int64_t x) { return x > 0 ? x : 0; }},
      {"floor", [](const Tensor& x) { return floor(x); }, [](int64_t x) { return x; }},
      {"round", [](const Tensor& x) { return round(x); }, [](int64_t x) { return x; }},
      {"clamp", [](const Tensor& x) { return clamp(x, Scalar(-3), Scalar(17)); },
       [](int64_t x) { return std::min<int64_t>(std::max<int64_t>(x, -3), 17); }},
      {"bitwise_not", [](const Tensor& x) { return bitwise_not(x); }, [](int64_t x) { return ~x; }},
  };
  for (const IntOp& op : ops)
    for (int64_t n : lengths())
      for (Layout l : {Layout::kContiguous, Layout::kStrided, Layout::kFlipped}) {
        const std::vector<T> v = int_values<T>(n, static_cast<uint32_t>(n) + 13, -100, 100);
        Tensor y = op.f(make_input(v, l, dev));
        ASSERT_EQ(y.dtype(), dtype_of<T>::value) << op.name;
        const std::vector<T> got = y.template to_vector<T>();
        for (size_t i = 0; i < v.size(); ++i)
          ASSERT_EQ(got[i], static_cast<T>(op.ref(v[i])))
              << op.name << " on " << dev.str() << " " << layout_name(l) << ", n=" << n << ", element " << i;
      }
}

}  // namespace

TEST(UnaryProperty, IntegerOpsExact) {
  for (const Device& dev : {plain_cpu(), fused_cpu()}) {
    const test::SmallLimit all(0);
    check_int_ops<int32_t>(dev);
    check_int_ops<int64_t>(dev);
  }
}

TEST(UnaryProperty, FloatOpsOnEveryTestDevice) {
  // The devices of KILN_TEST_DEVICES beyond the two CPUs above (subset: its own elementwise
  // kernels over handles, the rest through the fallback), at the default SIMD level.
  for (const test::TestDevice& d : test::value_devices())
    if (d.device().type() != DeviceType::CPU) {
      SCOPED_TRACE(d.name);
      check_float_ops(d.device(), true);
    }
}
