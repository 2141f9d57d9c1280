// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Vulkan backend's fusion executor (fusion/executor.h): a planned group of elementwise ops
// runs as one kernel of the library (kernel/library.h, fused_launch) over the group's loads and
// stored values; a row op closing the group, and a product whose epilogue it is, run as their
// own kernels around it. Groups the library cannot fuse run one kernel per op.
#include "backends/vulkan/context.h"
#include "backends/vulkan/kernels.h"
#include "core/backend.h"
#include "fusion/executor.h"

namespace kiln::vulkan {

class FusionExecutor final : public fusion::Executor {
 public:
  FusionExecutor(Backend* backend, Context& ctx, Kernels& kernels) : backend_(backend), ctx_(ctx), kernels_(kernels) {}
  bool program_step(const ir::Op&, fusion::PInstr*) const override { return false; }
  bool long_reduction(const ir::Op&) const override { return false; }
  bool column_reduction(const ir::Op&, int64_t&) const override { return false; }
  bool row_pipelines() const override { return false; }
  bool small_ops_alone() const override { return false; }
  void check_allocation(size_t nbytes) const override { ctx_.check_size(nbytes); }
  void run_op(const ir::Op& op, void* const* in, void* const* out) override;
  void run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) override;
  void run_pipeline(fusion::Buffers& mem, const fusion::PipelineLaunch& p) override;

 private:
  /// Runs steps [begin, end) of l's group as one kernel (or one per op where the library has
  /// no fused form), storing what the group stores and what later steps and its tail read.
  void run_segment(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin, size_t end);
  /// The memory of a buffer (real: the decorator's pointer; an empty one has none).
  Buf* memory(void* real);
  Buf* memory(fusion::Buffers& mem, fusion::Buf* b);
  /// Runs the stream's record r on its buffers' memory (materialised first).
  void run_rec(fusion::Buffers& mem, const fusion::Rec& r);
  Backend* backend_;
  Context& ctx_;
  Kernels& kernels_;
  Buf* empty_ = nullptr;  ///< bound where a buffer is empty (never released: the backend lives on)
};

}  // namespace kiln::vulkan
