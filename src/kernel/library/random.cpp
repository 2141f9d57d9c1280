// SPDX-License-Identifier: MIT OR Apache-2.0
// Random ops of the library (kernel/library.h) as elementwise kernels over the element's index:
// the CPU's Philox-4x32-10 words for (seed, offset + block) and the CPU's conversions, so a
// device draws the same numbers as the CPU for the same seed (src/core/rng.h, Note [Random
// layouts] in src/backends/cpu/random.cpp).
#include <cmath>
#include <limits>

#include "ir/attrs.h"
#include "kernel/library.h"

namespace kiln::kernel::lib {
namespace {

/// The high and low words of the 64-bit product of two U32 values, from 16-bit halves (no
/// 64-bit multiply, no signed overflow).
void mul_hilo(Val a, uint32_t m, Val& hi, Val& lo) {
  const Val al = a & 0xffffu, ah = a >> 16u;
  const uint32_t ml = m & 0xffffu, mh = m >> 16;
  const Val t = al * ml;
  const Val m1 = ah * ml + (t >> 16u);
  const Val m2 = al * mh + (m1 & 0xffffu);
  hi = ah * mh + (m1 >> 16u) + (m2 >> 16u);
  lo = a * m;
}

/// Word `s` (0..3, I32) of Philox-4x32-10 for key (k0, k1) and counter (c0, c1), as
/// rng::Philox::generate.
Val philox_word(Val k0, Val k1, Val c0, Val c1, Val s) {
  Val x0 = c0, x1 = c1, x2 = Val(0x9E3779B9u), x3 = Val(0x243F6A88u);
  for (int r = 0; r < 10; ++r) {  // unrolled while tracing
    Val hi0, lo0, hi1, lo1;
    mul_hilo(x0, 0xD2511F53u, hi0, lo0);
    mul_hilo(x2, 0xCD9E8D57u, hi1, lo1);
    const Val n0 = hi1 ^ x1 ^ k0, n2 = hi0 ^ x3 ^ k1;
    x0 = n0, x1 = lo1, x2 = n2, x3 = lo0;
    k0 = k0 + 0x9E3779B9u;
    k1 = k1 + 0xBB67AE85u;
  }
  return select(s == 0, x0, select(s == 1, x1, select(s == 2, x2, x3)));
}

}  // namespace

std::optional<Elementwise> random_of(const kiln::ir::Op& op) {
  if (op.kind != kiln::ir::OpKind::RandUniform || op.outputs[0].dtype != DType::F32) return std::nullopt;
  const kiln::ir::CreationAttrs a = kiln::ir::CreationAttrs::decode(op);
  const double lo = a.a, hi = a.b;
  const float hf = static_cast<float>(hi), lf = static_cast<float>(lo);
  // f >= hf is moved just below hf (when hi > lo); a NaN cap never compares true
  const float cap = hi > lo ? hf : std::numeric_limits<float>::quiet_NaN();
  Elementwise e;
  e.output = Store::F32;
  e.with_index = true;
  e.needs_f64 = true;
  e.reals = 6;
  e.real_types = {Type::I64, Type::I64, Type::F64, Type::F64, Type::F32, Type::F32};
  e.push = {Arg(static_cast<int64_t>(a.seed)), Arg(static_cast<int64_t>(a.offset)), Arg(lo), Arg(hi - lo), Arg(cap),
            Arg(std::nextafter(hf, lf))};
  e.fn = [](const Val* x, const Val* r) {
    // f32: four elements per block of four words
    const Val ctr = r[1] + cast(x[0] >> 2, Type::I64);
    const Val k0 = cast(r[0] & 0xffffffffll, Type::U32), k1 = cast((r[0] >> 32ll) & 0xffffffffll, Type::U32);
    const Val c0 = cast(ctr & 0xffffffffll, Type::U32), c1 = cast((ctr >> 32ll) & 0xffffffffll, Type::U32);
    const Val w = philox_word(k0, k1, c0, c1, x[0] & 3);
    const Val unit = cast(w >> 8u, Type::F64) * (1.0 / 16777216.0);
    const Val f = cast(r[2] + unit * r[3], Type::F32);
    return select(f >= r[4], r[5], f);
  };
  return e;
}

}  // namespace kiln::kernel::lib
