// SPDX-License-Identifier: MIT OR Apache-2.0
// The CPU fusion executor's row pipelines (Note [Row pipelines] in src/fusion/rows.cpp, which
// plans them): every stage runs over one block of whole rows after the other, while the block is
// in the cache; values that no tensor holds and nothing after the pipeline reads live in
// per-thread blocks only.
#include <algorithm>
#include <deque>
#include <functional>
#include <string>

#include "backends/cpu/fusion_exec.h"
#include "backends/cpu/fusion_tiles.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/reduce_outer.h"
#include "core/machine.h"
#include "core/parallel.h"

namespace kiln::cpu {
namespace {

using RangeFn = std::function<void(int64_t e0, int64_t e1)>;

/// The pipeline's values that live in per-thread blocks: outputs of its stages that no live
/// tensor holds, nothing after the pipeline reads and that have no memory yet; bytes per row of
/// each in row_bytes.
void find_internal(const fusion::PipelineLaunch& p, int64_t rows, PipelineBlocks& blocks,
                   std::vector<size_t>& row_bytes) {
  int64_t last = -1;
  std::vector<const Rec*> writers;
  auto note = [&](size_t idx) {
    last = std::max(last, static_cast<int64_t>(idx));
    writers.push_back(&p.s[idx]);
  };
  for (const fusion::Stage& st : p.stages) {
    if (st.lone >= 0) note(static_cast<size_t>(st.lone));
    if (st.column >= 0) last = std::max(last, static_cast<int64_t>(st.column));  // written after the blocks
    for (size_t q : st.g.steps) note(q);
    if (st.g.tail >= 0) note(static_cast<size_t>(st.g.tail));
  }
  for (const Rec* r : writers)
    for (size_t q = 0; q < r->out.size(); ++q) {
      Buf* b = r->out[q];
      if (b->alive || fusion::fl(b).last_reader > last || b->real || blocks.is_internal(b)) continue;
      blocks.internal.push_back(b);
      const ir::TensorDesc& d = r->op.outputs[q];
      row_bytes.push_back(static_cast<size_t>(d.numel() / rows) * dtype_size(d.dtype));
    }
}

}  // namespace

void FusionExecutor::run_pipeline(fusion::Buffers& mem, const fusion::PipelineLaunch& p) {
  const std::vector<Rec>& s = p.s;
  const std::vector<fusion::Stage>& stages = p.stages;
  const Shape& S = p.S;
  const int64_t k = p.k;
  const fusion::Stage& s0 = stages[0];
  const Rec& head = s[static_cast<size_t>(s0.lone >= 0 ? s0.lone : s0.g.tail)];
  int64_t rowlen = 1;
  for (size_t q = S.size() - static_cast<size_t>(k); q < S.size(); ++q) rowlen *= S[q];
  const int64_t rows = shape_numel(S) / rowlen;
  // Blocks of about tuning().fusion_epilogue_block elements, at least one per thread when there are rows enough.
  const int64_t nt = std::max(1, num_threads());
  int64_t per_block = std::max<int64_t>(1, std::min(tuning().fusion_epilogue_block / rowlen, (rows + nt - 1) / nt));
  bool columns = false;
  for (const fusion::Stage& st : stages) columns = columns || st.column >= 0;
  if (columns) {  // whole leaves of the Sums over the rows in each block
    const int64_t leaf = outer::leaf_rows();
    per_block = (per_block + leaf - 1) / leaf * leaf;
  }
  const int64_t nblocks = (rows + per_block - 1) / per_block;
  fusion::bump(&fusion::Stats::row_pipelines);
  PipelineBlocks blocks;
  std::vector<size_t> row_bytes;  // per internal value: bytes per row
  find_internal(p, rows, blocks, row_bytes);
  auto materialise_unless_internal = [&](Buf* b) {
    if (!blocks.is_internal(b)) mem.materialise(b);
  };
  if (fusion::debug_on())
    fusion::dbg("  row pipeline: " + std::to_string(stages.size()) + " stages over " + std::to_string(rows) +
                " rows of " + std::to_string(rowlen) + ", in blocks of " + std::to_string(per_block) + " rows; " +
                std::to_string(blocks.internal.size()) + " values only in blocks");
  std::vector<RangeFn> fns;
  // A row op alone: its kernel over the rows of the range (input and outputs contiguous).
  if (s0.lone >= 0) {
    for (Buf* b : head.in) mem.materialise(b);
    for (Buf* b : head.out) materialise_unless_internal(b);
    if (fusion::debug_on())
      fusion::dbg("    stage 1: " + std::string(ir::op_name(head.op.kind)) + " " + fusion::desc_str(head.op.inputs[0]));
    fns.push_back([&](int64_t e0, int64_t e1) {
      const int64_t r0 = e0 / rowlen, nr = (e1 - e0) / rowlen;
      ir::Op op = head.op;
      fusion::rows_op(op, head.op, S, k, nr);
      SmallVec<void*, 4> in, out;
      const ir::TensorDesc& x = head.op.inputs[0];
      in.push_back(static_cast<char*>(head.in[0]->real) + static_cast<size_t>(x.offset + e0) * dtype_size(x.dtype));
      for (size_t q = 1; q < head.in.size(); ++q) in.push_back(head.in[q]->real);
      for (size_t q = 0; q < head.out.size(); ++q) {
        const ir::TensorDesc& od = head.op.outputs[q];
        out.push_back(blocks.base_of(head.out[q]) +
                      static_cast<size_t>(r0 * (od.numel() / rows)) * dtype_size(od.dtype));
      }
      kKernels[static_cast<int>(op.kind)](op, in.data(), out.data());
    });
  }
  // Sums over the rows: each block's leaves into `partials`, folded after the blocks.
  std::vector<std::vector<char>> partials(stages.size());
  std::deque<GroupRun> groups;  // set up in stage order (stable addresses: fns point at them)
  for (size_t i = 0; i < stages.size(); ++i) {
    const fusion::Stage& st = stages[i];
    if (st.lone >= 0) continue;
    if (st.column >= 0) {
      const Rec& cr = s[static_cast<size_t>(st.column)];
      const DType dt = cr.op.inputs[0].dtype;
      materialise_unless_internal(cr.in[0]);
      mem.materialise(cr.out[0]);
      const int64_t leaf = outer::leaf_rows();
      partials[i].resize(static_cast<size_t>((rows + leaf - 1) / leaf * rowlen) * dtype_size(dt));
      if (fusion::debug_on())
        fusion::dbg("    stage " + std::to_string(i + 1) + ": " + std::string(ir::op_name(cr.op.kind)) +
                    " over the rows of " + fusion::desc_str(cr.op.inputs[0]));
      fns.push_back([&, i, dt](int64_t e0, int64_t e1) {
        outer::leaves(dt, blocks.base_of(cr.in[0]), rowlen, e0 / rowlen, e1 / rowlen, partials[i].data());
      });
      continue;
    }
    const GroupRun& run =
        groups.emplace_back(mem, fusion::GroupLaunch{s, st.g, *p.scratch[i]}, &blocks, i + 1 == stages.size());
    RangeFn f = [&run](int64_t e0, int64_t e1) { run.tiles(e0, e1, 0, (e1 - e0 + run.tile - 1) / run.tile, nullptr); };
    if (st.per_row)  // one element per row
      fns.push_back([f, rowlen](int64_t e0, int64_t e1) { f(e0 / rowlen, e1 / rowlen); });
    else
      fns.push_back(std::move(f));
  }
  parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<std::vector<char>> mem_blocks;
    mem_blocks.resize(std::max(mem_blocks.size(), blocks.internal.size()));
    PipelineBlocks::t_bases.assign(blocks.internal.size(), nullptr);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * per_block, e0 = r0 * rowlen, e1 = std::min(rows, r0 + per_block) * rowlen;
      for (size_t j = 0; j < blocks.internal.size(); ++j) {
        // Addressed as the whole buffer would be: row r of the block at base + r * row_bytes.
        char* ptr = tiles::aligned(mem_blocks[j], static_cast<size_t>(per_block) * row_bytes[j]);
        PipelineBlocks::t_bases[j] =
            reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(ptr) - static_cast<uintptr_t>(r0) * row_bytes[j]);
      }
      for (const RangeFn& f : fns) f(e0, e1);
    }
  });
  for (size_t q = 0; q < stages.size(); ++q) {
    if (stages[q].column < 0) continue;
    const Rec& cr = s[static_cast<size_t>(stages[q].column)];
    outer::finish(cr.op.inputs[0].dtype, cr.op.kind == ir::OpKind::Mean, rows, rowlen, partials[q].data(),
                  cr.out[0]->real);
  }
}

}  // namespace kiln::cpu
