// SPDX-License-Identifier: MIT OR Apache-2.0
// The CPU fusion executor's groups: a planned group over tiles of host memory, alone or as a
// product's epilogue per block of its rows (fusion_exec.h; the planning is src/fusion).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/fusion_exec.h"
#include "backends/cpu/fusion_tiles.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/reduce_full.h"
#include "backends/cpu/reduce_outer.h"
#include "core/machine.h"
#include "core/parallel.h"

namespace kiln::cpu {
namespace {

/// Elements per tile: KILN_FUSION_TILE when set, else sized to this machine's L1d (machine.h).
int64_t tile_target() {
  static const int64_t t = std::getenv("KILN_FUSION_TILE") ? fusion::tile_elems() : tuning().fusion_tile;
  return t;
}

/// Runs rows [row0, row1) of the product mm ([B, M, N], rows counted over B * M, within one
/// batch) into its result's memory, or into dst (contiguous rows) when dst is not null.
void run_matmul_rows(const Rec& mm, int64_t row0, int64_t row1, void* dst) {
  const ir::TensorDesc &a = mm.op.inputs[0], &b = mm.op.inputs[1], &c = mm.op.outputs[0];
  const int64_t M = c.shape[1], bi = row0 / M, m0 = row0 % M, rows = row1 - row0;
  ir::Op sub = mm.op;
  ir::TensorDesc &sa = sub.inputs[0], &sb = sub.inputs[1], &sc = sub.outputs[0];
  sa.shape = Shape{1, rows, a.shape[2]};
  sa.offset = a.offset + bi * a.strides[0] + m0 * a.strides[1];
  sb.shape = Shape{1, b.shape[1], b.shape[2]};
  sb.offset = b.offset + bi * b.strides[0];
  sc.shape = Shape{1, rows, c.shape[2]};
  sc.offset = dst ? 0 : c.offset + bi * c.strides[0] + m0 * c.strides[1];
  void* in[3] = {mm.in[0]->real, mm.in[1]->real, mm.in.size() > 2 ? mm.in[2]->real : nullptr};  // [, bias]
  void* out[1] = {dst ? dst : mm.out[0]->real};
  kKernels[static_cast<size_t>(ir::OpKind::MatMul)](sub, in, out);
}

}  // namespace

bool FusionExecutor::program_step(const ir::Op& op, fusion::PInstr* ins) const {
  return vec::program_supports(op, ins);
}

bool FusionExecutor::long_reduction(const ir::Op& op) const {
  int64_t n = 0;
  return full::supports(op, n);
}

bool FusionExecutor::column_reduction(const ir::Op& op, int64_t& width) const {
  int64_t rows = 0;
  return outer::supports(op, rows, width);
}

void FusionExecutor::run_op(const ir::Op& op, void* const* in, void* const* out) {
  kKernels[static_cast<size_t>(op.kind)](op, in, out);
}

void FusionExecutor::run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) {
  GroupRun run(mem, l, nullptr, true);
  if (fusion::debug_on() && l.matmul)
    fusion::dbg("    the epilogue of MatMul " + fusion::desc_str(l.matmul->op.outputs[0]) +
                ", run per row block of the product");
  if (l.matmul)
    run.run_epilogue();
  else
    run.run();
}

GroupRun::GroupRun(fusion::Buffers& mem, const fusion::GroupLaunch& l, const PipelineBlocks* blocks, bool last)
    : mem(mem),
      s(l.s),
      g(l.g),
      matmul(l.matmul),
      w(l.w),
      blocks(blocks),
      ns(g.steps.size()),
      S(g.S),
      gend(fusion::group_end(g)),
      tail_in(l.w.tail_in),
      rowlen(l.w.rowlen),
      k_dims(l.w.k_dims) {
  materialise_all();
  size_tiles(last);
  find_kernel();
}

void GroupRun::run() const {
  parallel_for(ntiles, grain, [&](int64_t tb, int64_t te) { tiles(0, N, tb, te, nullptr); });
  if (g.long_tail) finish_long_tail();
}

void GroupRun::materialise_all() {
  // A product's result that nothing reads after the group (and no tensor holds) is never
  // materialised: each block is computed into a thread's scratch and the group reads it there.
  in_scratch = matmul && !matmul->out[0]->alive && !read_after(matmul->out[0]) ? matmul->out[0] : nullptr;
  for (auto& L : w.loads)
    if (L.buf != in_scratch) materialise_unless_internal(L.buf);
  if (matmul) {
    for (Buf* b : matmul->in) mem.materialise(b);
    if (!in_scratch) mem.materialise(matmul->out[0]);
  }
  for (size_t k = 0; k < ns; ++k)
    if (w.store[k]) materialise_unless_internal(s[g.steps[k]].out[0]);
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    for (size_t q = 1; q < t.in.size(); ++q) mem.materialise(t.in[q]);
    for (size_t q = 0; q < t.out.size(); ++q)
      if (w.tail_store[q]) materialise_unless_internal(t.out[q]);
  }
}

void GroupRun::size_tiles(bool last) {
  N = shape_numel(S);
  const int64_t rows_per_tile = g.tail >= 0 ? std::max<int64_t>(1, tile_target() / rowlen) : 0;
  tile = g.tail >= 0 ? std::min(rows_per_tile, N / rowlen) * rowlen : std::min(tile_target(), N);
  if (g.long_tail) {  // whole leaves per tile; one partial per leaf
    const int64_t leaf = full::leaf_elems();
    tile = std::max<int64_t>(1, tile_target() / leaf) * leaf;
    partials.assign(static_cast<size_t>((N + leaf - 1) / leaf), 0.0f);
  }
  ntiles = (N + tile - 1) / tile;
  // A thread takes at least kMinElemsPerThread elements of work per step: longer chains split
  // smaller groups (each element costs a pass of every step).
  grain = std::max<int64_t>(1, fusion::kMinElemsPerThread / static_cast<int64_t>(ns + (g.tail >= 0 ? 1 : 0)) / tile);
  total_rows = g.tail >= 0 ? N / rowlen : 0;

  const std::vector<fusion::Load>& loads = w.loads;
  std::vector<int>& gather_slot = w.gather_slot;
  gather_slot.assign(loads.size(), -1);
  for (size_t q = 0; q < loads.size(); ++q)
    if (loads[q].kind == fusion::LoadKind::Gather) gather_slot[q] = ngather++;
  std::vector<char>& f32_step = w.f32_step;
  f32_step.assign(ns, 0);
  for (size_t k = 0; k < ns; ++k) {
    const ir::Op& op = s[g.steps[k]].op;
    bool all = op.outputs[0].dtype == DType::F32 && op.inputs.size() <= 2 && op.kind != ir::OpKind::Copy &&
               op.kind != ir::OpKind::Cast;
    for (auto& d : op.inputs) all &= d.dtype == DType::F32;
    f32_step[k] = all;
  }
  // Large stored results bypass the caches (non-temporal stores, no read-for-ownership): the
  // tile is computed in scratch and streamed out. Full tiles only (they are 64-byte aligned).
  // Not before a later stage of a row pipeline: it reads the results while they are in the cache.
  streaming = last && tiles::has_stream_stores() && g.tail < 0 && N * 4 >= tiles::kStreamBytes && tile % 16 == 0;
}

void GroupRun::find_kernel() {
  // Large programs run as compiled kernels once built (vec::compiled_program).
  const fusion::ProgramCode& prog = w.prog;
  if (!prog.ok || N < fusion::jit_min_elements()) return;
  kernel = vec::compiled_program(prog.code.data(), prog.code.size());
  if (kernel) fusion::bump(&fusion::Stats::compiled_groups);
  if (fusion::debug_on()) {
    const std::string why = vec::jit_unavailable_reason();
    fusion::dbg(kernel                                  ? "    runs as a compiled kernel"
                : vec::jit_mode() == vec::JitMode::kOff ? "    interpreted (KILN_FUSION_JIT=0)"
                : why.empty() ? "    interpreted (its kernel is compiling, or failed: see the .log in the cache folder)"
                              : "    interpreted (no compiled kernels: " + why + ")");
  }
}

void GroupRun::load_tile(TileState& ts, int64_t s0, int64_t len, int64_t range0, const char* block) const {
  const std::vector<fusion::Load>& loads = w.loads;
  for (size_t q = 0; q < loads.size(); ++q) {
    const fusion::Load& L = loads[q];
    const size_t esz = dtype_size(L.desc.dtype);
    char* base = base_of(L.buf);
    switch (L.kind) {
      case fusion::LoadKind::Scalar:
        ts.lp[q] = base + static_cast<size_t>(L.desc.offset) * esz;
        break;
      case fusion::LoadKind::Identity:
        ts.lp[q] = L.buf == in_scratch ? const_cast<char*>(block) + static_cast<size_t>(s0 - range0) * esz
                                       : base + static_cast<size_t>(L.desc.offset + s0) * esz;
        break;
      case fusion::LoadKind::Gather:
        ts.lp[q] = ts.scratch + ts.slot * (ns + static_cast<size_t>(w.gather_slot[q]));
        tiles::gather(base, esz, L.gshape, L.bstrides, L.desc.offset, s0, len, ts.lp[q]);
        break;
    }
  }
}

void GroupRun::program_tile(TileState& ts, int64_t s0, int64_t len) const {
  const fusion::ProgramCode& prog = w.prog;
  const size_t nloads = w.loads.size();
  std::vector<void*>& ptrs = ts.prog_ptrs;
  for (size_t q = 0; q < nloads; ++q) ptrs[q] = ts.lp[q];
  bool aligned_out = true;
  for (size_t q = 0; q < prog.stored.size(); ++q) {
    const size_t k = prog.stored[q];
    const size_t esz = dtype_size(s[g.steps[k]].op.outputs[0].dtype);
    char* dst = base_of(s[g.steps[k]].out[0]) + static_cast<size_t>(s0) * esz;
    ptrs[nloads + q] = dst;
    ts.val[k] = dst;
    aligned_out &= (reinterpret_cast<uintptr_t>(dst) & 63) == 0 && esz == 4;
  }
  if (prog.tail_slot >= 0) {
    char* tmp = ts.scratch + ts.slot * static_cast<size_t>(tail_in);
    ptrs[static_cast<size_t>(prog.tail_slot)] = tmp;
    ts.val[static_cast<size_t>(tail_in)] = tmp;
  }
  const bool stream = streaming && len == tile && aligned_out;
  if (kernel)
    kernel(ptrs.data(), len, stream ? 1 : 0);
  else
    vec::run_program(prog.code.data(), prog.code.size(), prog.nregs, ptrs.data(), len, stream);
}

void GroupRun::steps_tile(TileState& ts, std::vector<ir::Op>& ops, int64_t s0, int64_t len) const {
  const std::vector<fusion::Load>& loads = w.loads;
  const std::vector<char>& store = w.store;
  for (size_t k = 0; k < ns; ++k) {
    ir::Op& op = ops[k];
    ts.in_p.clear();
    ts.out_p.clear();
    for (size_t q = 0; q < w.src[k].size(); ++q) {
      ir::TensorDesc& d = op.inputs[q];
      const fusion::Src& sr = w.src[k][q];
      bool scalar = sr.load >= 0 && loads[static_cast<size_t>(sr.load)].kind == fusion::LoadKind::Scalar;
      d.shape = Shape{scalar ? 1 : len};
      d.strides = Strides{1};
      d.offset = 0;
      ts.in_p.push_back(sr.step >= 0 ? ts.val[static_cast<size_t>(sr.step)] : ts.lp[static_cast<size_t>(sr.load)]);
    }
    ir::TensorDesc& od = op.outputs[0];
    od.shape = Shape{len};
    od.strides = Strides{1};
    od.offset = 0;
    const size_t esz = dtype_size(od.dtype);
    char* dst = store[k] ? base_of(s[g.steps[k]].out[0]) + static_cast<size_t>(s0) * esz : nullptr;
    const bool nt = store[k] && streaming && len == tile;
    ts.val[k] = store[k] && !nt ? dst : ts.scratch + ts.slot * k;
    ts.out_p.push_back(ts.val[k]);
    // f32 rows: the vectorised row functions the CPU kernels call for contiguous f32 runs
    // (same results), without building the kernel's loop for every tile.
    bool done = false;
    if (w.f32_step[k]) {
      const auto* a = static_cast<const float*>(ts.in_p[0]);
      auto* o = reinterpret_cast<float*>(ts.val[k]);
      if (ts.in_p.size() == 1)
        done = vec::unary_f32(op, a, o, len);
      else if (ts.in_p.size() == 2)
        done = vec::binary_f32(op.kind, a, op.inputs[0].shape[0] == 1 ? 0 : 1, static_cast<const float*>(ts.in_p[1]),
                               op.inputs[1].shape[0] == 1 ? 0 : 1, o, len);
    }
    if (!done) kKernels[static_cast<int>(op.kind)](op, ts.in_p.data(), ts.out_p.data());
    if (nt) tiles::stream_copy(dst, ts.val[k], static_cast<size_t>(len) * esz);
  }
}

void GroupRun::tail_tile(TileState& ts, ir::Op& tail_op, int64_t s0, int64_t len) const {
  if (g.long_tail) {
    full::leaves(reinterpret_cast<const float*>(ts.val[static_cast<size_t>(tail_in)]), s0, s0 + len, partials.data());
    return;
  }
  const Rec& tr = s[static_cast<size_t>(g.tail)];
  const ir::Op& orig = tr.op;
  const int64_t rows = len / rowlen, row0 = s0 / rowlen;
  fusion::rows_op(tail_op, orig, S, k_dims, rows);
  ts.in_p.clear();
  ts.out_p.clear();
  ts.in_p.push_back(ts.val[static_cast<size_t>(tail_in)]);
  for (size_t q = 1; q < tr.in.size(); ++q) ts.in_p.push_back(tr.in[q]->real);
  for (size_t q = 0; q < tr.out.size(); ++q) {
    const ir::TensorDesc& od = orig.outputs[q];
    const int64_t per_row = total_rows ? od.numel() / total_rows : 0;
    const size_t esz = dtype_size(od.dtype);
    ts.out_p.push_back(w.tail_store[q]
                           ? base_of(tr.out[q]) + static_cast<size_t>(row0 * per_row) * esz
                           : ts.scratch + ts.slot * (ns + static_cast<size_t>(ngather) + std::min<size_t>(q, 3)));
  }
  kKernels[static_cast<int>(tail_op.kind)](tail_op, ts.in_p.data(), ts.out_p.data());
}

void GroupRun::finish_long_tail() const {
  const Rec& tr = s[static_cast<size_t>(g.tail)];
  const float v = full::finish(tr.op.kind == ir::OpKind::Mean, N, partials.data());
  fusion::bump(&fusion::Stats::long_reductions);
  if (w.tail_store[0]) std::memcpy(base_of(tr.out[0]), &v, sizeof v);
}

void GroupRun::tiles(int64_t range0, int64_t range1, int64_t tb, int64_t te, const char* block) const {
  const fusion::ProgramCode& prog = w.prog;
  thread_local std::vector<char> scratch_v;
  const size_t slot = static_cast<size_t>(tile) * 8;
  const size_t nslots = ns + static_cast<size_t>(ngather) + 4;
  char* scratch = tiles::aligned(scratch_v, slot * nslots);
  // per-chunk copies of the ops (descriptors rewritten per tile); a program needs none
  std::vector<ir::Op> ops(prog.ok ? 0 : ns);
  for (size_t k = 0; k < ops.size(); ++k) {
    ops[k].kind = s[g.steps[k]].op.kind;
    ops[k].attrs = s[g.steps[k]].op.attrs;
    ops[k].inputs = s[g.steps[k]].op.inputs;
    ops[k].outputs = s[g.steps[k]].op.outputs;
  }
  ir::Op tail_op;
  if (g.tail >= 0) tail_op = s[static_cast<size_t>(g.tail)].op;
  thread_local std::vector<char*> val, lp;
  thread_local std::vector<void*> prog_ptrs;
  val.assign(ns, nullptr);
  lp.assign(w.loads.size(), nullptr);
  prog_ptrs.assign(prog.ok ? prog.nslots : 0, nullptr);
  TileState ts{scratch, slot, val, lp, prog_ptrs, {}, {}};
  for (int64_t t = tb; t < te; ++t) {
    const int64_t s0 = range0 + t * tile, len = std::min(tile, range1 - s0);
    load_tile(ts, s0, len, range0, block);  // loads gathered once per tile
    if (prog.ok)
      program_tile(ts, s0, len);
    else
      steps_tile(ts, ops, s0, len);
    if (g.tail >= 0) tail_tile(ts, tail_op, s0, len);
  }
  tiles::stream_fence();
}

void GroupRun::run_epilogue() const {
  // Row blocks of the product ([B, M, Ncols], rows counted over B * M, within one batch each),
  // spread over the threads: a thread computes a block's rows (the GEMM runs single-threaded
  // inside the parallel region) and runs the group's tiles over them while they are in its cache.
  const ir::TensorDesc& c = matmul->op.outputs[0];
  const int64_t M = c.shape[1], ncols = c.shape[2];
  const int64_t block_rows =
      std::min(M, std::max<int64_t>(8, tuning().fusion_epilogue_block / std::max<int64_t>(ncols, 1)));
  const int64_t per_batch = (M + block_rows - 1) / block_rows;
  parallel_for(c.shape[0] * per_batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t row = (blk / per_batch) * M + (blk % per_batch) * block_rows;
      const int64_t row_end = std::min(row + block_rows, (blk / per_batch + 1) * M);
      char* dst = nullptr;
      if (in_scratch) {
        thread_local std::vector<char> block_v;
        dst = tiles::aligned(block_v, static_cast<size_t>((row_end - row) * ncols) * dtype_size(c.dtype));
      }
      run_matmul_rows(*matmul, row, row_end, dst);
      tiles(row * ncols, row_end * ncols, 0, ((row_end - row) * ncols + tile - 1) / tile, dst);
    }
  });
}

}  // namespace kiln::cpu
