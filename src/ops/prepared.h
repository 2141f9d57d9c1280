// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Steps that keep the IR op they issue from one run to the next (Note [Prepared steps]): the
// ONNX run-time path's Conv, MatMul and Gemm steps, and in inference the Conv modules (forward,
// nn::conv_act, nn::conv_bn) and nn::Linear.
#include <atomic>
#include <cstdint>
#include <span>

#include "ir/op.h"
#include "kiln/tensor.h"

namespace kiln::detail {

// Note [Prepared steps]
// A Conv, MatMul or Gemm step of the run-time plan issues one IR op (ir::Op) whose attributes
// and descriptors follow from its node and from the layouts of its inputs alone. Building it
// (the node's window attributes read, the conv or product checks), its shape inference
// (ir::infer, which decodes the conv attributes), the views a product takes of its operands and
// dispatch's argument checks cost as much again as a small convolution's kernel (MobileNet at
// batch 1 has 19 of them; bench/onnx/RESULTS.md, round 13). Such a step keeps the op it last
// issued, inferred, beside the layout (shape, strides, offset, dtype) of the step input each
// operand was taken from. When a run's inputs have the same layouts, on the same device, with no
// gradient to record, the step only binds the new buffers: detail::run_prepared refreshes the
// content stamps, allocates the output and executes the op, which is the op the step would have
// built (bitwise the same results). Otherwise the step builds its op as before and keeps that
// one. A slot holds one op (a Conv pair has two slots); it is used by one run at a time (`busy`):
// a run of the same model on another thread that finds it taken builds its op as before. A
// step whose op is not the plain case (asymmetric pads, a broadcast residual, operands that
// record a gradient) never fills its slot. The op holds descriptors only, no tensor: nothing is
// kept alive by it.
//
// A caller whose op depends on more than its inputs' layouts (a Conv module: its configuration
// and the call's options) passes those as a `key`: the slot is used only by a
// call with an equal key.
struct PreparedOp {
  std::atomic<bool> busy{false};
  bool ready = false;
  Device dev;
  const char* api = nullptr;
  ir::Op op;
  /// Per op input: the index of the step input it reads (in the list run_prepared is given) and
  /// that input's layout when the op was built.
  SmallVec<uint8_t, 4> src;
  InlineVec<ir::TensorDesc, 4> layout;
  /// The step's result: the op's one output viewed with this contiguous descriptor (a product's
  /// [1, M, N] output as [..., M, N]).
  ir::TensorDesc result;
  /// What else the op was built from (empty for ONNX steps).
  SmallVec<int64_t, 32> key;
};

/// The result of p's op over the buffers of `in` when p holds an op built from inputs laid out
/// as `in` is (Note [Prepared steps]); an undefined Tensor otherwise, or when p is null (the
/// caller then builds the op and may keep it with keep_prepared). An undefined input matches no
/// operand; `key` must equal the one the op was kept with.
Tensor run_prepared(PreparedOp* p, std::span<const Tensor> in, std::span<const int64_t> key = {});

/// Keeps op, just run by dispatch on dev, in p (when p is not null and no other run holds it):
/// op input i was in[src[i]] or a view of it that depends only on its layout, and the step's
/// result is op's output viewed as `result_shape` (contiguous, the same number of elements).
/// The caller stands for the plain case: every operand on dev, no gradient recorded.
void keep_prepared(PreparedOp* p, const char* api, const ir::Op& op, const Device& dev, std::span<const Tensor> in,
                   std::span<const int> src, const Shape& result_shape, std::span<const int64_t> key = {});

/// a [..., K] times a 2-D b [K, N] (plus bias [N] when defined) as the one MatMul op that matmul
/// and linear issue for it ([1, M, K] x [1, K, N] views), without their argument parsing; an
/// undefined Tensor when not that plain case (the caller then takes the general path). With
/// `keep`, a, b and bias are views (depending only on their layouts) of sources[0], [1] and [2],
/// and the op is kept in `keep` for the next call with those sources' layouts and `key`.
Tensor matmul_op(const Tensor& a, const Tensor& b, const Tensor& bias, PreparedOp* keep = nullptr,
                 std::span<const Tensor> sources = {}, std::span<const int64_t> key = {});

}  // namespace kiln::detail
