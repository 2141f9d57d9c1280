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

/// Words 2p and 2p + 1 (p 0 or 1, I32) of Philox-4x32-10 for key (k0, k1) and counter (c0, c1),
/// as rng::Philox::generate, as one I64 (word 2p in the high half): a kernel function, so a
/// kernel records one call instead of the rounds.
Val philox_pair(Val k0, Val k1, Val c0, Val c1, Val p) {
  return call_library("philox_pair", {k0, k1, c0, c1, p}, [](const std::vector<Val>& a) {
    Val k0 = a[0], k1 = a[1], x0 = a[2], x1 = a[3], x2 = Val(0x9E3779B9u), x3 = Val(0x243F6A88u);
    for (int r = 0; r < 10; ++r) {  // unrolled while tracing
      Val hi0, lo0, hi1, lo1;
      mul_hilo(x0, 0xD2511F53u, hi0, lo0);
      mul_hilo(x2, 0xCD9E8D57u, hi1, lo1);
      const Val n0 = hi1 ^ x1 ^ k0, n2 = hi0 ^ x3 ^ k1;
      x0 = n0, x1 = lo1, x2 = n2, x3 = lo0;
      k0 = k0 + 0x9E3779B9u;
      k1 = k1 + 0xBB67AE85u;
    }
    // hi as a signed word times 2^32 plus lo: no signed overflow on any target
    const Val first = a[4] == 0;
    const Val hi = cast(bitcast(select(first, x0, x2), Type::I32), Type::I64);
    const Val lo = cast(select(first, x1, x3), Type::I64);
    return hi * 4294967296ll + lo;
  });
}

/// The high (word 2p) and low (word 2p + 1) words of a philox_pair, as U32 (an arithmetic shift
/// gives hi's bits back).
Val pair_hi(Val pair) { return cast((pair >> 32ll) & 0xffffffffll, Type::U32); }
Val pair_lo(Val pair) { return cast(pair & 0xffffffffll, Type::U32); }

/// Word `s` (0..3, I32) of Philox-4x32-10 for key (k0, k1) and counter (c0, c1).
Val philox_word(Val k0, Val k1, Val c0, Val c1, Val s) {
  const Val pair = philox_pair(k0, k1, c0, c1, s >> 1);
  return select((s & 1) == 0, pair_hi(pair), pair_lo(pair));
}

/// The two key words of a seed (I64) and the two counter words of block ctr (I64).
void key_and_counter(Val seed, Val ctr, Val& k0, Val& k1, Val& c0, Val& c1) {
  k0 = cast(seed & 0xffffffffll, Type::U32), k1 = cast((seed >> 32ll) & 0xffffffffll, Type::U32);
  c0 = cast(ctr & 0xffffffffll, Type::U32), c1 = cast((ctr >> 32ll) & 0xffffffffll, Type::U32);
}

/// RandNormal of f32 as the CPU's Box-Muller over a block of four words (two pairs): r =
/// sqrt(-2 log u1), u1 in (0, 1] from one word, t = 2 pi u2 from the next, r cos t and r sin t;
/// log, cos and sin to within an ulp of the CPU's (the numbers agree to a few ulps, not bits).
std::optional<Elementwise> normal_of(const kiln::ir::Op& op) {
  if (op.outputs[0].dtype != DType::F32) return std::nullopt;
  const kiln::ir::CreationAttrs a = kiln::ir::CreationAttrs::decode(op);
  Elementwise e;
  e.output = Store::F32;
  e.with_index = true;
  e.needs_f64 = true;
  e.reals = 4;
  e.real_types = {Type::I64, Type::I64, Type::F64, Type::F64};
  e.push = {Arg(static_cast<int64_t>(a.seed)), Arg(static_cast<int64_t>(a.offset)), Arg(a.a), Arg(a.b)};
  e.fn = [](const Val* x, const Val* r) {
    Val k0, k1, c0, c1;
    key_and_counter(r[0], r[1] + cast(x[0] >> 2, Type::I64), k0, k1, c0, c1);
    const Val words = philox_pair(k0, k1, c0, c1, (x[0] >> 1) & 1);
    const Val w1 = pair_hi(words), w2 = pair_lo(words);
    const Val u1 = cast((cast(w1, Type::F64) + 1.0) * (1.0 / 4294967296.0), Type::F32);
    const Val rad = sqrt(-2.0f * cast(log_f64(cast(u1, Type::F64)), Type::F32));
    const Val t = 6.2831855f * (cast(w2 >> 8u, Type::F32) * (1.0f / 16777216.0f));
    const Val trig = select((x[0] & 1) == 0, trig_f32(kiln::ir::OpKind::Cos, t), trig_f32(kiln::ir::OpKind::Sin, t));
    return cast(r[2] + r[3] * cast(rad * trig, Type::F64), Type::F32);
  };
  return e;
}

}  // namespace

// Bernoulli as the CPU's: element i draws the 53-bit uniform of words (2 s, 2 s + 1), s = i mod
// 2, of block offset + i / 2, and is 1 when it is below p (p's values are checked on the host
// first: Launch::check_unit_interval).
std::optional<Elementwise> bernoulli_of(const kiln::ir::Op& op) {
  const std::optional<Store> s = storage_of(op.outputs[0].dtype, false);
  if (op.inputs.size() != 1 || !s || op.inputs[0].dtype != op.outputs[0].dtype ||
      (*s != Store::F32 && *s != Store::F64 && *s != Store::F16 && *s != Store::BF16))
    return std::nullopt;
  const kiln::ir::CreationAttrs a = kiln::ir::CreationAttrs::decode(op);
  Elementwise e;
  e.inputs = {*s};
  e.output = *s;
  e.with_index = true;
  e.needs_f64 = true;
  e.reals = 2;
  e.real_types = {Type::I64, Type::I64};
  e.push = {Arg(static_cast<int64_t>(a.seed)), Arg(static_cast<int64_t>(a.offset))};
  e.fn = [](const Val* x, const Val* r) {
    Val k0, k1, c0, c1;
    key_and_counter(r[0], r[1] + cast(x[1] >> 1, Type::I64), k0, k1, c0, c1);
    const Val words = philox_pair(k0, k1, c0, c1, x[1] & 1);
    const Val hi = cast(pair_hi(words), Type::I64), lo = pair_lo(words);
    const Val bits = ((hi << 21ll) ^ cast(lo >> 11u, Type::I64)) & ((1ll << 53) - 1);
    const Val u = cast(bits, Type::F64) * (1.0 / 9007199254740992.0);
    return select(u < cast(x[0], Type::F64), Val::constant(1, x[0].type), Val::constant(0, x[0].type));
  };
  return e;
}

std::optional<Elementwise> random_of(const kiln::ir::Op& op) {
  if (op.kind == kiln::ir::OpKind::RandNormal) return normal_of(op);
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
    Val k0, k1, c0, c1;
    key_and_counter(r[0], r[1] + cast(x[0] >> 2, Type::I64), k0, k1, c0, c1);
    const Val w = philox_word(k0, k1, c0, c1, x[0] & 3);
    const Val unit = cast(w >> 8u, Type::F64) * (1.0 / 16777216.0);
    const Val f = cast(r[2] + unit * r[3], Type::F32);
    return select(f >= r[4], r[5], f);
  };
  return e;
}

}  // namespace kiln::kernel::lib
