// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The CPU's fusion executor (fusion/executor.h): a planned group runs over tiles of host memory,
// as one elementwise program per tile (interpreted: program_hwy.cpp; compiled to machine code:
// program_jit.cpp) or op by op through the row functions and kernels; a product's epilogue per
// block of its rows (fusion_group.cpp); a row pipeline per block of rows (fusion_rows.cpp).
#include <cstdint>
#include <vector>

#include "backends/cpu/vec.h"
#include "fusion/executor.h"

namespace kiln::cpu {

using fusion::Buf;
using fusion::Group;
using fusion::GroupScratch;
using fusion::Rec;

class FusionExecutor final : public fusion::Executor {
 public:
  bool program_step(const ir::Op& op, fusion::PInstr* ins) const override;
  bool long_reduction(const ir::Op& op) const override;
  bool column_reduction(const ir::Op& op, int64_t& width) const override;
  void run_op(const ir::Op& op, void* const* in, void* const* out) override;
  void run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) override;
  void run_pipeline(fusion::Buffers& mem, const fusion::PipelineLaunch& p) override;
};

/// The values of a row pipeline that live in per-thread blocks only (fusion_rows.cpp): the
/// buffers, and this thread's block of each, addressed as the whole buffer would be (valid over
/// the block's elements only).
struct PipelineBlocks {
  std::vector<Buf*> internal;
  static inline thread_local std::vector<char*> t_bases;
  /// Where b's elements are: this thread's block for an internal value, else its memory.
  char* base_of(const Buf* b) const {
    for (size_t j = 0; j < internal.size(); ++j)
      if (internal[j] == b) return t_bases[j];
    return static_cast<char*>(b->real);
  }
  bool is_internal(const Buf* b) const {
    for (const Buf* x : internal)
      if (x == b) return true;
    return false;
  }
};

/// One planned group set up on host memory (everything it touches materialised, tiles sized,
/// its compiled kernel looked up), then its tiles, run over ranges of elements alone, as a
/// product's epilogue per row block, or as a stage of a row pipeline (`blocks` set).
struct GroupRun {
  fusion::Buffers& mem;
  const std::vector<Rec>& s;
  const Group& g;
  const Rec* matmul;
  GroupScratch& w;
  const PipelineBlocks* blocks;
  const size_t ns;
  const Shape& S;
  const size_t gend;  ///< the stream index of the group's last record
  const int tail_in;  ///< the step the tail reads (-1: no tail)
  const int64_t rowlen, k_dims;
  Buf* in_scratch = nullptr;  ///< a product result kept in per-thread blocks, never materialised
  int64_t N = 0, tile = 0, ntiles = 0, grain = 1, total_rows = 0;
  /// A long tail's leaf partials (Group::long_tail), written by the tiles, one leaf each.
  mutable std::vector<float> partials;
  int ngather = 0;
  bool streaming = false;
  vec::ProgramFn kernel = nullptr;

  /// Sets the group up. `last`: no later stage of a pipeline reads its results (large ones may
  /// bypass the caches).
  GroupRun(fusion::Buffers& mem, const fusion::GroupLaunch& l, const PipelineBlocks* blocks, bool last);

  char* base_of(const Buf* b) const { return blocks ? blocks->base_of(b) : static_cast<char*>(b->real); }
  /// Is buffer b read by a (live or not: conservative) op after the group?
  bool read_after(Buf* b) const { return fusion::fl(b).last_reader > static_cast<int64_t>(gend); }
  /// Materialises b unless it lives in per-thread blocks of a row pipeline.
  void materialise_unless_internal(Buf* b) {
    if (!blocks || !blocks->is_internal(b)) mem.materialise(b);
  }
  /// Materialises everything touched in memory before going parallel.
  void materialise_all();
  /// The tile size and count, thread grain, gather slots, f32 steps and streaming stores.
  void size_tiles(bool last);
  /// Takes the program's compiled kernel when one is loaded (large programs).
  void find_kernel();
  /// Runs tiles [tb, te) of the elements [range0, range1); `block`: where element range0 of the
  /// in_scratch product is.
  void tiles(int64_t range0, int64_t range1, int64_t tb, int64_t te, const char* block) const;
  /// Runs every tile (split over the threads), then a long tail's finish.
  void run() const;
  /// Row blocks of the product spread over the threads, each followed by the group's tiles.
  void run_epilogue() const;

  /// Per-thread pointers of one chunk of tiles: step values, loads and program slots.
  struct TileState {
    char* scratch;
    size_t slot;
    std::vector<char*>& val;
    std::vector<char*>& lp;
    std::vector<void*>& prog_ptrs;
    SmallVec<void*, 4> in_p, out_p;
  };
  /// Points lp at the loads of the tile at s0 (gathered into scratch where they must be).
  void load_tile(TileState& ts, int64_t s0, int64_t len, int64_t range0, const char* block) const;
  /// Runs the program (compiled or interpreted) over the tile.
  void program_tile(TileState& ts, int64_t s0, int64_t len) const;
  /// Runs the steps one by one over the tile (ops: per-chunk copies, descriptors rewritten).
  void steps_tile(TileState& ts, std::vector<ir::Op>& ops, int64_t s0, int64_t len) const;
  /// Runs the tail (a row op) over the tile's whole rows, or adds its leaves' partials (a
  /// long tail).
  void tail_tile(TileState& ts, ir::Op& tail_op, int64_t s0, int64_t len) const;
  /// A long tail's result from the partials of every tile, written where the tail stores it.
  void finish_long_tail() const;
};

}  // namespace kiln::cpu
