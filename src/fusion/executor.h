// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The seam between the fusion planner and a backend: what a backend implements to run fused
// kernels (Backend::fusion_executor). The planner records, cuts groups, marks what is stored,
// caches plans and writes each group's program (fusion/plan.h); the executor answers capability
// questions while groups are cut and runs what was planned on its memory. A backend without an
// executor is decorated with pass-through: every op runs unfused. See docs/backends.md.
#include <cstdint>
#include <vector>

#include "fusion/plan.h"

namespace kiln::fusion {

/// The decorator's side of a launch: memory of its lazy buffers.
class Buffers {
 public:
  /// Allocates b's memory on the inner backend (b->real) unless it has some.
  virtual void materialise(Buf* b) = 0;

 protected:
  ~Buffers() = default;
};

/// One planned group: group g of stream s, with w's stores, loads, sources and program set by
/// the planner; with `matmul`, the epilogue of that product, run per block of its rows.
struct GroupLaunch {
  const std::vector<Rec>& s;
  const Group& g;
  GroupScratch& w;
  const Rec* matmul = nullptr;  ///< the product (MatMul, or Conv: Executor::conv_products) before it
};

/// One planned row pipeline (Note [Row pipelines] in rows.cpp): its stages over iteration shape
/// S with rows of the trailing k dims; scratch[i] is stage i's planned group (null for a row op
/// alone or a Sum over the rows).
struct PipelineLaunch {
  const std::vector<Rec>& s;
  const std::vector<Stage>& stages;
  const std::vector<GroupScratch*>& scratch;
  const Shape& S;
  int64_t k = 0;
};

/// What a backend offers the fusion decorator. Capability queries come while groups are cut;
/// a launch runs the planned kernels with the results bitwise those of the ops run one by one.
class Executor {
 public:
  virtual ~Executor() = default;
  /// Whether op can be an Op instruction of a fused program (PInstr); fills ins's kind and reals.
  virtual bool program_step(const ir::Op& op, PInstr* ins) const = 0;
  /// Whether op, a full Sum / Mean longer than a tile, can close a group by per-tile partials.
  virtual bool long_reduction(const ir::Op& op) const = 0;
  /// Whether op, a Sum / Mean over the leading dims of its input, can be a stage of a row
  /// pipeline; `width` is then the elements of each row it reduces over.
  virtual bool column_reduction(const ir::Op& op, int64_t& width) const = 0;
  /// Throws kiln::Error when the backend could never give a buffer of nbytes (the decorator
  /// asks when a buffer is made; its memory comes later, when a value is stored in it).
  virtual void check_allocation(size_t nbytes) const { (void)nbytes; }
  /// Whether an op with small results (fusion::small_limit) runs at once instead of queued:
  /// on the CPU it costs less than planning; on a GPU every kernel saved counts.
  virtual bool small_ops_alone() const { return true; }
  /// Whether a convolution (Conv, f32 or f64, contiguous result) may take the group after it as
  /// its epilogue, as a matrix product does (GroupLaunch::matmul), where the backend cannot fuse
  /// the CPU's conv epilogue ops (ops.def) into it.
  virtual bool conv_products() const { return false; }
  /// The smallest product (in bytes) that takes an elementwise epilogue: on the CPU a product
  /// runs in row blocks each followed by the group, which pays only for large products.
  virtual int64_t epilogue_min_bytes() const { return kEpilogueMinBytes; }
  /// Whether groups may be planned as row pipelines (run_pipeline); false: each group runs
  /// alone through run_group, its row op closing it as a tail.
  virtual bool row_pipelines() const { return true; }
  /// Runs one op on the memory of its buffers (an op that is not part of a fused group).
  virtual void run_op(const ir::Op& op, void* const* in, void* const* out) = 0;
  /// Runs a planned group over its elements, alone or as a product's epilogue.
  virtual void run_group(Buffers& mem, const GroupLaunch& l) = 0;
  /// Runs a planned row pipeline.
  virtual void run_pipeline(Buffers& mem, const PipelineLaunch& p) = 0;
};

}  // namespace kiln::fusion
