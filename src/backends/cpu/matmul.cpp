// SPDX-License-Identifier: MIT OR Apache-2.0
// MatMul kernel: batched [B, M, K] x [B, K, N] over any strides (reference version).
#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"

namespace kiln::cpu {

void k_MatMul(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc &a = op.inputs[0], &b = op.inputs[1], &c = op.outputs[0];
  const int64_t B = c.shape[0], M = c.shape[1], N = c.shape[2], K = a.shape[2];
  KILN_SWITCH_NUMERIC(a.dtype, "matmul", T, {
    using A = std::conditional_t<is_float_v<T>, std::conditional_t<std::is_same_v<T, double>, double, float>, T>;
    const T* pa = reinterpret_cast<const T*>(base_ptr(in[0], a));
    const T* pb = reinterpret_cast<const T*>(base_ptr(in[1], b));
    T* pc = reinterpret_cast<T*>(base_ptr(out[0], c));
    for (int64_t i = 0; i < B; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          A acc{};
          for (int64_t k = 0; k < K; ++k)
            acc += A(pa[i * a.strides[0] + m * a.strides[1] + k * a.strides[2]]) *
                   A(pb[i * b.strides[0] + k * b.strides[1] + n * b.strides[2]]);
          pc[i * c.strides[0] + m * c.strides[1] + n * c.strides[2]] = T(acc);
        }
  });
}

}  // namespace kiln::cpu
