// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Vulkan backend's fusion executor (fusion/executor.h): a planned group of elementwise ops
// runs as one kernel of the library (kernel/library.h, fused_launch) over the group's loads and
// stored values. A row op closing the group runs its own kernel reading the steps' values in
// registers (fused_tail_launch); a product whose epilogue the group is hands its results to the
// steps in its kernel (a MatMul or a Conv: fused_product_launch). A group past the device's bindings is split into
// kernels; groups the library cannot fuse run one kernel per op.
#include "backends/vulkan/context.h"
#include "backends/vulkan/kernels.h"
#include "core/backend.h"
#include "fusion/executor.h"

namespace kiln::vulkan {

struct GroupChain;

class FusionExecutor final : public fusion::Executor {
 public:
  FusionExecutor(Backend* backend, Context& ctx, Queue& queue, Kernels& kernels)
      : backend_(backend), ctx_(ctx), queue_(queue), kernels_(kernels) {}
  bool program_step(const ir::Op&, fusion::PInstr*) const override { return false; }
  bool long_reduction(const ir::Op&) const override { return false; }
  bool column_reduction(const ir::Op&, int64_t&) const override { return false; }
  bool row_pipelines() const override { return false; }
  bool small_ops_alone() const override { return false; }
  int64_t epilogue_min_bytes() const override { return 0; }
  bool conv_products() const override { return true; }
  void check_allocation(size_t nbytes) const override { ctx_.check_size(nbytes); }
  void run_op(const ir::Op& op, void* const* in, void* const* out) override;
  void run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) override;
  void run_pipeline(fusion::Buffers& mem, const fusion::PipelineLaunch& p) override;

 private:
  /// Buffers a fused kernel binds around its chain's: outputs before the stored steps', inputs
  /// before and after the loads'.
  struct Around {
    std::vector<fusion::Buf*> out, in, in_last;
  };
  /// Runs steps [begin, end) of l's group as one kernel (or one per op where the library has
  /// no fused form), storing what the group stores and what later steps and its tail read.
  void run_segment(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin, size_t end);
  /// Runs steps [begin, end of the group) in the tail's kernel; false (nothing run) where it
  /// does not fit the bindings or the library has no such kernel.
  bool run_with_tail(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin);
  /// Runs the product with steps [0, end) as its epilogue; false (nothing run) as above.
  bool run_with_product(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t end);
  /// Records launch, a chain c of l's group from step begin, over its buffers.
  void record(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin, const kernel::lib::Launch& launch,
              const GroupChain& c, const Around& around);
  /// The memory of a buffer (real: the decorator's pointer; an empty one has none).
  Buf* memory(void* real);
  Buf* memory(fusion::Buffers& mem, fusion::Buf* b);
  /// Runs the stream's record r on its buffers' memory (materialised first).
  void run_rec(fusion::Buffers& mem, const fusion::Rec& r);
  Backend* backend_;
  Context& ctx_;
  Queue& queue_;
  Kernels& kernels_;
  Buf* empty_ = nullptr;  ///< bound where a buffer is empty (never released: the backend lives on)
};

}  // namespace kiln::vulkan
