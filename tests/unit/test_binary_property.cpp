// SPDX-License-Identifier: MIT OR Apache-2.0
// Property test of the binary (and ternary) elementwise ops against a scalar reference: float
// results within each op's bound in ulps of an f64 reference, integer and bool results exact.
// Every op at lengths 0 to 300 and a few large odd ones, the first operand contiguous, strided
// or flipped and the second a tensor of the same length or a 0-d tensor, on f32 and integer
// inputs, out of place and in place (add_/sub_/mul_/div_ into the first operand, the rvalue
// operators reusing a temporary, the vector kernel and the program interpreter writing over an
// operand), at every SIMD level, on the plain and the fused CPU.
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
#include "test_util.h"

using namespace kiln;
using namespace kiln::test::prop;

namespace {

using TensorFn = std::function<Tensor(const Tensor&, const Tensor&)>;

double floor_div_ref(double a, double b) {  // PyTorch's floor division, evaluated in f64
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}
double remainder_ref(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && (b < 0) != (r < 0)) r += b;
  return r;
}
double logaddexp_ref(double a, double b) {
  const double m = std::max(a, b);
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (std::isinf(m) && a == b) return a;
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

/// A float op: Kiln function, f64 reference, bound in ulps; kind for the kernel-level runs
/// (Copy: none); is_bool: a bool result compared exactly.
struct FloatBinary {
  const char* name;
  TensorFn f;
  std::function<double(double, double)> ref;
  double ulps;
  ir::OpKind kind = ir::OpKind::Copy;
  bool is_bool = false;
  double atol = 0;  ///< times max(1, |a|, |b|): for results that cancel (logaddexp near 0)
  std::string check(float got, double a, double b) const {
    const double m = std::max({1.0, std::fabs(a), std::fabs(b)});
    return mismatch(got, ref(a, b), ulps, atol > 0 && std::isfinite(m) ? atol * m : 0.0);
  }
};

std::vector<FloatBinary> float_binaries() {
  using K = ir::OpKind;
  const double r = 0.501;  // correctly rounded (the f64 reference may itself be a rounding off)
  auto cmp = [](const char* n, TensorFn f, std::function<double(double, double)> g, K k) {
    return FloatBinary{n, std::move(f), std::move(g), 0, k, true};
  };
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }, r,
       K::Add},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; }, r,
       K::Sub},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; }, r,
       K::Mul},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; }, r,
       K::Div},
      {"div_trunc", [](const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); },
       [](double a, double b) { return std::trunc(static_cast<float>(a / b)); }, r,
       K::TruncDiv},  // of the f32 quotient
      {"floor_divide", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); }, floor_div_ref, 1,
       K::FloorDiv},
      {"remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, remainder_ref, r, K::Remainder},
      {"fmod", [](const Tensor& a, const Tensor& b) { return fmod(a, b); },
       [](double a, double b) { return std::fmod(a, b); }, 0, K::Fmod},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 4, K::Pow},
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); },
       [](double a, double b) { return std::atan2(a, b); }, 4, K::Atan2},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, nan_max, 0, K::Maximum},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, nan_min, 0, K::Minimum},
      {"fmax", [](const Tensor& a, const Tensor& b) { return fmax(a, b); },
       [](double a, double b) { return std::fmax(a, b); }, 0, K::Fmax},
      {"fmin", [](const Tensor& a, const Tensor& b) { return fmin(a, b); },
       [](double a, double b) { return std::fmin(a, b); }, 0, K::Fmin},
      {"hypot", [](const Tensor& a, const Tensor& b) { return hypot(a, b); },
       [](double a, double b) { return std::hypot(a, b); }, 2, K::Hypot},
      {"logaddexp", [](const Tensor& a, const Tensor& b) { return logaddexp(a, b); }, logaddexp_ref, 4, K::LogAddExp,
       false, 1e-7},
      cmp(
          "eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, [](double a, double b) { return a == b; },
          K::Eq),
      cmp(
          "ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, [](double a, double b) { return a != b; },
          K::Ne),
      cmp(
          "lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, [](double a, double b) { return a < b; },
          K::Lt),
      cmp(
          "le", [](const Tensor& a, const Tensor& b) { return le(a, b); }, [](double a, double b) { return a <= b; },
          K::Le),
      cmp(
          "gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, [](double a, double b) { return a > b; },
          K::Gt),
      cmp(
          "ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, [](double a, double b) { return a >= b; },
          K::Ge),
      cmp(
          "logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(a, b); },
          [](double a, double b) { return a != 0 && b != 0; }, K::LogicalAnd),
      cmp(
          "logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(a, b); },
          [](double a, double b) { return a != 0 || b != 0; }, K::LogicalOr),
      cmp(
          "logical_xor", [](const Tensor& a, const Tensor& b) { return logical_xor(a, b); },
          [](double a, double b) { return (a != 0) != (b != 0); }, K::LogicalXor),
  };
}

/// Checks got (f32 or bool values of y) against op.ref over (va, vb); vb of one element
/// broadcasts.
std::string check_values(const FloatBinary& op, const Tensor& y, const std::vector<float>& va,
                         const std::vector<float>& vb) {
  const size_t n = va.size();
  if (y.numel() != static_cast<int64_t>(n)) return "wrong numel";
  std::vector<float> got;
  if (op.is_bool) {
    if (y.dtype() != DType::Bool) return "not bool";
    for (bool b : y.to_vector<bool>()) got.push_back(b ? 1.f : 0.f);
  } else {
    if (y.dtype() != DType::F32) return "not f32";
    got = y.to_vector<float>();
  }
  for (size_t i = 0; i < n; ++i) {
    const double a = va[i], b = vb[vb.size() == 1 ? 0 : i];
    const std::string why = op.check(got[i], a, b);
    if (!why.empty())
      return "element " + std::to_string(i) + " (" + std::to_string(a) + ", " + std::to_string(b) + "): " + why;
  }
  return "";
}

/// Every float op on dev over the lengths, layouts of a, a full or 0-d b, out of place and (for
/// add/sub/mul/div) in place.
void check_float_binaries(const Device& dev, bool full) {
  for (const FloatBinary& op : float_binaries())
    for (int64_t n : full ? lengths() : edge_lengths()) {
      const auto va = float_values(n, static_cast<uint32_t>(n) + 17);
      const auto vb_full = float_values(n, static_cast<uint32_t>(n) + 29, 2.0f);
      for (Layout l : {Layout::kContiguous, Layout::kStrided, Layout::kFlipped})
        for (bool scalar_b : {false, true}) {
          const std::vector<float> vb = scalar_b ? std::vector<float>{n > 0 ? vb_full[0] + 0.75f : 1.5f} : vb_full;
          Tensor a = make_input(va, l, dev);
          Tensor b = scalar_b ? tensor(vb, {}, dev) : make_input(vb, Layout::kContiguous, dev);
          const std::string ctx = std::string(op.name) + " on " + dev.str() + ", a " + layout_name(l) +
                                  (scalar_b ? ", b 0-d" : "") + ", n=" + std::to_string(n) + ": ";
          std::string why = check_values(op, op.f(a, b), va, vb);
          ASSERT_TRUE(why.empty()) << ctx << why;
          // In place into a (a kernel writing over its first operand), then the rvalue operators.
          Tensor t = make_input(va, l, dev);
          bool ran = true;
          switch (op.kind) {
            case ir::OpKind::Add:
              t.add_(b);
              break;
            case ir::OpKind::Sub:
              t.sub_(b);
              break;
            case ir::OpKind::Mul:
              t.mul_(b);
              break;
            case ir::OpKind::Div:
              t.div_(b);
              break;
            default:
              ran = false;
          }
          if (ran) ASSERT_TRUE((why = check_values(op, t, va, vb)).empty()) << ctx << "in place: " << why;
          if (op.kind == ir::OpKind::Add)
            ASSERT_TRUE((why = check_values(op, (a * 1.0) + b, va, vb)).empty()) << ctx << "rvalue: " << why;
          if (op.kind == ir::OpKind::Mul)
            ASSERT_TRUE((why = check_values(op, (a * 1.0) * b, va, vb)).empty()) << ctx << "rvalue: " << why;
        }
    }
}

}  // namespace

TEST(BinaryProperty, FloatOpsMatchF64ReferencePlainCpu) {
  int level = 0;
  test::at_every_simd_level([&] { check_float_binaries(plain_cpu(), level++ == 0); });
}

TEST(BinaryProperty, FloatOpsMatchF64ReferenceFusedCpu) {
  const test::SmallLimit all(0);
  const test::JitMode interp(cpu::vec::JitMode::kOff);
  int level = 0;
  test::at_every_simd_level([&] { check_float_binaries(fused_cpu(), level++ == 0); });
}

TEST(BinaryProperty, VectorKernelAndProgramInPlace) {
  // binary_f32 writing over a, over b, and with a broadcast b; one program instruction whose
  // destination register is its first operand, stored over a's buffer.
  test::at_every_simd_level([] {
    for (const FloatBinary& op : float_binaries()) {
      if (op.kind == ir::OpKind::Copy) continue;
      ir::Op k;
      k.kind = op.kind;
      k.inputs = {ir::contiguous_desc({1}, DType::F32), ir::contiguous_desc({1}, DType::F32)};
      k.outputs = {ir::contiguous_desc({1}, op.is_bool ? DType::Bool : DType::F32)};
      cpu::vec::PInstr ins;
      const bool in_program = !op.is_bool && cpu::vec::program_supports(k, &ins);
      ins.code = cpu::vec::PInstr::Op;
      ins.dst = 0, ins.a = 0, ins.b = 1;
      cpu::vec::PInstr la, lb, st;
      la.code = lb.code = cpu::vec::PInstr::Load;
      lb.dst = 1, lb.slot = 1;
      st.code = cpu::vec::PInstr::Store;
      const cpu::vec::PInstr prog[] = {la, lb, ins, st};
      for (int64_t n : lengths()) {
        const auto va = float_values(n, static_cast<uint32_t>(n) + 41);
        const auto vb = float_values(n, static_cast<uint32_t>(n) + 43, 2.0f);
        auto expect = [&](const std::vector<float>& got, bool bcast, const char* how) {
          for (size_t i = 0; i < va.size(); ++i) {
            const std::string why = op.check(got[i], va[i], vb[bcast ? 0 : i]);
            ASSERT_TRUE(why.empty()) << op.name << " " << how << ", n=" << n << ", element " << i << ": " << why;
          }
        };
        if (!op.is_bool) {
          std::vector<float> a = va, b = vb;
          if (cpu::vec::binary_f32(op.kind, a.data(), 1, vb.data(), 1, a.data(), n)) {
            expect(a, false, "kernel over a");
            ASSERT_TRUE(cpu::vec::binary_f32(op.kind, va.data(), 1, b.data(), 1, b.data(), n));
            expect(b, false, "kernel over b");
            if (n > 0) {
              a = va;
              ASSERT_TRUE(cpu::vec::binary_f32(op.kind, a.data(), 1, vb.data(), 0, a.data(), n));
              expect(a, true, "kernel over a, b broadcast");
            }
          }
        }
        if (in_program) {
          std::vector<float> a = va, b = vb;
          void* ptrs[] = {a.data(), b.data()};
          cpu::vec::run_program(prog, 4, 2, ptrs, n, false);
          expect(a, false, "program over a");
        }
      }
    }
  });
}

namespace {

/// Integer ops with an exact int64 reference (wrapped to T); divisors are never 0.
struct IntBinary {
  const char* name;
  TensorFn f;
  std::function<int64_t(int64_t, int64_t)> ref;
  bool is_bool = false;
};

int64_t floor_div_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

template <class T>
void check_int_binaries(const Device& dev) {
  const IntBinary ops[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](int64_t a, int64_t b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](int64_t a, int64_t b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](int64_t a, int64_t b) { return a * b; }},
      {"floor_divide", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); }, floor_div_int},
      {"div_trunc", [](const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); },
       [](int64_t a, int64_t b) { return a / b; }},
      {"remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
       [](int64_t a, int64_t b) { return a - b * floor_div_int(a, b); }},
      {"fmod", [](const Tensor& a, const Tensor& b) { return fmod(a, b); }, [](int64_t a, int64_t b) { return a % b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](int64_t a, int64_t b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](int64_t a, int64_t b) { return std::min(a, b); }},
      {"bitwise_and", [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); },
       [](int64_t a, int64_t b) { return a & b; }},
      {"bitwise_or", [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); },
       [](int64_t a, int64_t b) { return a | b; }},
      {"bitwise_xor", [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); },
       [](int64_t a, int64_t b) { return a ^ b; }},
      {"shift_left", [](const Tensor& a, const Tensor& b) { return bitwise_left_shift(a, abs(b) % 8); },
       [](int64_t a, int64_t b) { return a * (int64_t{1} << ((b < 0 ? -b : b) % 8)); }},
      {"shift_right", [](const Tensor& a, const Tensor& b) { return bitwise_right_shift(a, abs(b) % 8); },
       [](int64_t a, int64_t b) { return a >> ((b < 0 ? -b : b) % 8); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, [](int64_t a, int64_t b) { return a < b; },
       true},
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, [](int64_t a, int64_t b) { return a == b; },
       true},
  };
  for (const IntBinary& op : ops)
    for (int64_t n : lengths())
      for (Layout l : {Layout::kContiguous, Layout::kStrided, Layout::kFlipped}) {
        const std::vector<T> va = int_values<T>(n, static_cast<uint32_t>(n) + 51, -1000, 1000);
        std::vector<T> vb = int_values<T>(n, static_cast<uint32_t>(n) + 53, -9, 9);
        for (T& v : vb) v = v == 0 ? T{7} : v;
        Tensor y = op.f(make_input(va, l, dev), make_input(vb, Layout::kContiguous, dev));
        const std::string ctx = std::string(op.name) + " on " + dev.str() + " " + layout_name(l) +
                                ", n=" + std::to_string(n) + ", element ";
        if (op.is_bool) {
          const std::vector<bool> got = y.to_vector<bool>();
          for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(got[i], op.ref(va[i], vb[i]) != 0) << ctx << i;
        } else {
          ASSERT_EQ(y.dtype(), dtype_of<T>::value) << ctx;
          const std::vector<T> got = y.template to_vector<T>();
          for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(got[i], static_cast<T>(op.ref(va[i], vb[i]))) << ctx << i;
        }
      }
}

}  // namespace

TEST(BinaryProperty, IntegerOpsExact) {
  const test::SmallLimit all(0);
  for (const Device& dev : {plain_cpu(), fused_cpu()}) {
    check_int_binaries<int32_t>(dev);
    check_int_binaries<int64_t>(dev);
  }
}

TEST(BinaryProperty, WhereAndLerpMatchReference) {
  // The ternary program instructions: where picks exactly, lerp within 2 ulps of f64.
  const test::SmallLimit all(0);
  const test::JitMode interp(cpu::vec::JitMode::kOff);
  test::at_every_simd_level([] {
    for (const Device& dev : {plain_cpu(), fused_cpu()})
      for (int64_t n : edge_lengths())
        for (Layout l : {Layout::kContiguous, Layout::kStrided, Layout::kFlipped}) {
          const auto va = float_values(n, 61), vb = float_values(n, 67);
          std::vector<float> vw = float_values(n, 71, 0.5f);
          for (float& w : vw) w = std::isfinite(w) ? std::fmod(w, 1.5f) : 0.25f;
          Tensor a = make_input(va, l, dev), b = make_input(vb, Layout::kContiguous, dev);
          Tensor w = make_input(vw, Layout::kContiguous, dev);
          const std::vector<float> picked = where(gt(a, b), a * 1.0, b).to_vector<float>();
          const std::vector<float> mixed = lerp(a, b, w).to_vector<float>();
          for (size_t i = 0; i < va.size(); ++i) {
            const float want = va[i] > vb[i] ? va[i] : vb[i];
            ASSERT_TRUE(mismatch(picked[i], want, 0, 0).empty()) << "where n=" << n << " element " << i;
            const double s = va[i], e = vb[i], t = vw[i];
            const double ref = std::fabs(t) < 0.5 ? s + t * (e - s) : e - (e - s) * (1 - t);
            // The f32 formula rounds the difference and the product: a bound in ulps of the operands.
            const double tol = 4 * ulp32(std::max({std::fabs(s), std::fabs(e), std::fabs(ref)}));
            if (std::isfinite(ref) && std::isfinite(mixed[i]))
              ASSERT_LE(std::fabs(mixed[i] - ref), tol) << "lerp on " << dev.str() << " n=" << n << " element " << i;
            else
              ASSERT_TRUE(mismatch(mixed[i], ref, 0, 0).empty() || std::isnan(ref))
                  << "lerp n=" << n << " element " << i << ": " << mixed[i] << " vs " << ref;
          }
        }
  });
}

TEST(BinaryProperty, InPlaceWritesWithOverlap) {
  for (const Device& dev : {plain_cpu(), fused_cpu()}) {
    // An operand overlapping the written tensor in another layout reads the values from before
    // the write (Kiln copies it first, where PyTorch refuses).
    for (int64_t n : edge_lengths()) {
      const std::vector<float> v = float_values(n + 1, static_cast<uint32_t>(n));
      Tensor a = tensor(v, {n + 1}, dev);
      Tensor want = a.slice(0, 1) + a.slice(0, 0, n);
      Tensor dst = a.slice(0, 1);
      dst.add_(a.slice(0, 0, n));
      Tensor flip = tensor(v, {n + 1}, dev);
      Tensor want_flip = flip * flip.flip({0});
      flip.mul_(flip.flip({0}));
      const auto got = dst.to_vector<float>(), exp = want.to_vector<float>();
      const auto got_f = flip.to_vector<float>(), exp_f = want_flip.to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(mismatch(got[i], exp[i], 0, 0).empty()) << n << " " << i;
      for (size_t i = 0; i < got_f.size(); ++i) ASSERT_TRUE(mismatch(got_f[i], exp_f[i], 0, 0).empty()) << n;
    }
    // A written tensor with several elements at one address is refused before anything changes.
    Tensor base = tensor(std::vector<float>{1, 2, 3, 4}, {4}, dev);
    Tensor wide = base.expand({3, 4});
    test::expect_error([&] { wide.add_(1.0); }, "add_", "single memory location");
    test::expect_error([&] { wide.mul_(wide); }, "mul_", "single memory location");
    test::expect_error([&] { wide.copy_(ones({3, 4}, {.device = dev})); }, "copy_", "single memory location");
    EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  }
}

TEST(BinaryProperty, FloatOpsOnEveryTestDevice) {
  // The devices of KILN_TEST_DEVICES beyond the two CPUs above (subset: its own elementwise
  // kernels over handles, the rest through the fallback), at the default SIMD level.
  for (const test::TestDevice& d : test::value_devices())
    if (d.device().type() != DeviceType::CPU) {
      SCOPED_TRACE(d.name);
      check_float_binaries(d.device(), true);
    }
}
