// SPDX-License-Identifier: MIT OR Apache-2.0
// Math functions of the library (kernel/library.h) in the CPU's polynomial forms, written with
// plain f32 arithmetic, so every target meets the CPU's stated bounds (docs/tensors.md,
// Accuracy) where its built-ins would not. Scalings by powers of two are built from exponent
// bits, not left to the target's exp2 or ldexp.
#include "kernel/library.h"

namespace kiln::kernel::lib {

// exp(x) to ~1 ulp: Cephes' expf polynomial after a two-constant ln 2 reduction, as the CPU's
// ExpSafe (src/backends/cpu/vec_math-inl.h), the scale 2^n applied in two halves so results
// reach +inf and the subnormals out of the arithmetic itself (a device that flushes subnormal
// results gives 0 there, below 2^-126); NaN passes through.
Val exp_f32(Val x) {
  const Val xc = min(max(x, Val(-104.0f)), Val(89.0f));
  const Val n = floor(xc * 1.44269504088896341f + 0.5f);
  Val r = xc - n * 0.693359375f;  // exact: the constant has 9 significant bits
  r = r - n * -2.12194440e-4f;
  Val p = Val(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Val y = p * (r * r) + (r + 1.0f);
  const Val ni = cast(n, Type::I32), n1 = ni >> 1, n2 = ni - n1;
  const Val s1 = bitcast((n1 + 127) << 23, Type::F32), s2 = bitcast((n2 + 127) << 23, Type::F32);
  return select(x != x, x, y * s1 * s2);
}

// 1 / (1 + exp(-x)), as the CPU: exp(-x) = +inf for very negative x gives 0.
Val sigmoid_f32(Val x) { return 1.0f / (1.0f + exp_f32(-x)); }

}  // namespace kiln::kernel::lib
