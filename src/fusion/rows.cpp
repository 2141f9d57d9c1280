// SPDX-License-Identifier: MIT OR Apache-2.0
// Row pipelines: a row op (alone, or closing a group) and the groups after it that read its
// results row by row run together per block of rows, while the block is in the cache.
//
// Note [Row pipelines]
// ~~~~~~~~~~~~~~~~~~~~
// `x - x.max(-1, true)`, `x / x.sum(-1, true)`, a hand-written softmax or norm: a row op
// reduces the trailing dims of a value, and the next group reads the value and the row op's
// result broadcast over each row. Run one after the other, the value crosses memory twice
// (three times with a second reduction). As a row pipeline, the stages (the row op or the
// group it closes, then each group reading its results) run per block of whole rows: a thread
// takes a block, runs the first stage over it, then the next stage over the same rows, and so
// on. A stage reads what an earlier stage wrote only within the block's rows: element for
// element (the identity view of a full-size value) or one value per row (a row op's result
// broadcast over the row). A stage may overwrite what earlier stages wrote or read row by row
// (in-place steps), never a buffer an earlier stage reads across rows (a broadcast operand, a
// row op's parameter). So each block sees exactly the values the stages would see run one after
// the other, and results are bitwise theirs (each element and each row is computed by the same
// kernels in the same order). Values that no tensor holds and nothing after the pipeline reads
// live in per-thread blocks only, never in memory.
#include "fusion/backend.h"

namespace kiln::fusion {
namespace {

constexpr size_t kMaxStages = 8;  // stages set up at once (each holds its own plan scratch)

/// Elements per row: the trailing k dims of S.
int64_t row_len(const Shape& S, int64_t k) {
  int64_t n = 1;
  for (size_t q = S.size() - static_cast<size_t>(k); q < S.size(); ++q) n *= S[q];
  return n;
}

/// Whether d, read over iteration shape S, reads for each element the value of its row (the
/// leading dims of S, rows of the trailing k dims) from a contiguous per-row result at offset 0:
/// stride 0 (or size 1) over the trailing dims, row-major strides over the leading ones.
bool row_local(const ir::TensorDesc& d, const Shape& S, int64_t k) {
  const size_t r = S.size(), rd = d.shape.size();
  if (rd > r || d.offset != 0) return false;
  int64_t expect = 1;
  for (size_t q = r; q-- > 0;) {
    int64_t st = 0;
    if (q + rd >= r) {
      const size_t jd = q + rd - r;
      if (d.shape[jd] != 1 && d.shape[jd] != S[q]) return false;
      st = d.shape[jd] == 1 ? 0 : d.strides[jd];
    }
    if (S[q] == 1) continue;
    if (static_cast<int64_t>(q) >= static_cast<int64_t>(r) - k) {
      if (st != 0) return false;
    } else {
      if (st != expect) return false;
      expect *= S[q];
    }
  }
  return true;
}

/// Whether b holds exactly `elems` values of dtype t: a buffer used as a whole, full-size or
/// one value per row (not a view into a larger one, whose other elements may be another
/// block's).
bool holds(const Buf* b, int64_t elems, DType t) { return b->nbytes == static_cast<size_t>(elems) * dtype_size(t); }

/// What the stages so far touched: the buffers they wrote (full: element for element over S;
/// per row: one value per row) and those they read other than row by row (`shared`: a
/// broadcast operand, a row op's parameter, a view into a larger buffer). A later stage may
/// overwrite what earlier stages wrote or read row by row (block by block, the rows it writes
/// are done with, and later blocks have not read theirs yet), not a shared buffer.
struct Touched {
  std::vector<Buf*> full, per_row, shared;
  std::vector<Buf*> late;  ///< results of Sums over the rows: final only after the pipeline
  static bool has(const std::vector<Buf*>& v, Buf* b) { return std::find(v.begin(), v.end(), b) != v.end(); }
  bool written(Buf* b) const { return has(full, b) || has(per_row, b); }
  /// The reads and writes of a step of a group over S (S: the pipeline's shape; Sg: the
  /// group's, the rows for a per-row group).
  void step(const Rec& r, const Shape& S, const Shape& Sg, int64_t k) {
    const bool per_row_group = Sg != S;
    const int64_t rows = shape_numel(S) / row_len(S, k);
    for (size_t q = 0; q < r.in.size(); ++q) {
      const ir::TensorDesc& d = r.op.inputs[q];
      const bool local = (is_full_contiguous(d, Sg) && holds(r.in[q], shape_numel(Sg), d.dtype)) ||
                         (!per_row_group && row_local(d, S, k) && holds(r.in[q], rows, d.dtype));
      if (!local) shared.push_back(r.in[q]);
    }
    (per_row_group ? per_row : full).push_back(r.out[0]);
  }
  /// A row op's: its input (a value of its group, or read by rows when alone: row by row at
  /// offset 0), its parameters (shared), its outputs (full-size ones, as softmax's, or one
  /// value per row).
  void row_op(const Rec& r, const Shape& S) {
    if (r.op.inputs[0].offset != 0 || !holds(r.in[0], shape_numel(S), r.op.inputs[0].dtype)) shared.push_back(r.in[0]);
    for (size_t q = 1; q < r.in.size(); ++q) shared.push_back(r.in[q]);
    for (size_t q = 0; q < r.out.size(); ++q)
      (r.op.outputs[q].numel() == shape_numel(S) ? full : per_row).push_back(r.out[q]);
  }
};

/// Whether op r of a later stage reads what earlier stages wrote only within its rows.
bool reads_row_local(const Rec& r, const Touched& t, const Shape& S, int64_t k, size_t first_param) {
  for (size_t q = 0; q < r.in.size(); ++q) {
    Buf* b = r.in[q];
    if (!t.written(b)) continue;
    if (q >= first_param) return false;  // a row op's parameter (gamma...) made by an earlier stage
    const ir::TensorDesc& d = r.op.inputs[q];
    if (Touched::has(t.full, b) ? !is_full_contiguous(d, S) : !row_local(d, S, k)) return false;
  }
  return true;
}

/// Whether r writes what an earlier stage reads other than row by row, or a buffer it does not
/// fill exactly (a view into a larger one).
bool overwrites(const Rec& r, const Touched& t) {
  for (size_t q = 0; q < r.out.size(); ++q)
    if (Touched::has(t.shared, r.out[q]) || !holds(r.out[q], r.op.outputs[q].numel(), r.op.outputs[q].dtype))
      return true;
  return false;
}

}  // namespace

/// A row pipeline from order[head]: the first stage is `first` (a group closed by a row op,
/// consumed up to `end`) or, when null, the row op at order[head] alone (end = head + 1). Groups
/// (over the same iteration shape, or its rows) and Sums over the rows are taken after it while
/// each reads the earlier stages' results row by row (Note [Row pipelines]); the first that
/// does not ends it. Runs the pipeline when it has two stages or more and returns the first
/// position of `order` not consumed; 0 when it does not apply (nothing ran).
size_t FusionBackend::try_row_pipeline(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head,
                                       const Group* first, size_t end) {
  if (!exec_->row_pipelines()) return 0;
  std::vector<Stage> stages(1);
  Shape S;
  int64_t k = 0;
  Touched t;
  if (first) {
    if (first->tail < 0 || first->long_tail) return 0;
    stages[0].g = *first;
    S = first->S;
    const Rec& tr = s[static_cast<size_t>(first->tail)];
    k = row_dims(tr.op);
    for (size_t q : first->steps) t.step(s[q], S, S, k);
    t.row_op(tr, S);
  } else {
    const Rec& r = s[order[head]];
    const ir::TensorDesc& x = r.op.inputs[0];
    if (!is_row_kind(r.op.kind) || r.op.inputs.empty() || !x.is_contiguous()) return 0;
    k = row_dims(r.op);
    for (const auto& o : r.op.outputs)
      if (o.offset != 0 || !o.is_contiguous()) return 0;
    stages[0].lone = static_cast<ptrdiff_t>(order[head]);
    S = x.shape;
    t.row_op(r, S);
    // The input is read in place (by rows): it must not be one of the outputs.
    for (Buf* b : r.out)
      if (b == r.in[0]) return 0;
  }
  if (k <= 0 || shape_numel(S) == 0) return 0;
  // Below 64 times the small-tensor limit (256K elements by default) the values stay in the
  // L2 cache between the ops anyway, and the pipeline's setup costs more than it saves.
  if (shape_numel(S) < 64 * small_limit()) return 0;
  // Blocks are whole rows: rows longer than a tile's row limit, or fewer rows than threads over
  // more than one block's elements, would leave threads idle (the ops one by one split a long
  // row over the threads).
  const int64_t rowlen = row_len(S, k);
  if (rowlen > kMaxRowLen || (shape_numel(S) / rowlen < num_threads() && shape_numel(S) > kEpilogueBlock)) return 0;
  const size_t r = S.size(), lead = r - static_cast<size_t>(k);
  // A Sum / Mean over the rows (the leading dims) of a full-size value read in place: a bias
  // gradient, a layer norm's weight gradient (Executor::column_reduction: the kernel's bits).
  auto column_fits = [&](const Rec& cr) {
    int64_t cwidth = 0;
    if (!exec_->column_reduction(cr.op, cwidth)) return false;  // one input
    const ir::TensorDesc& x = cr.op.inputs[0];
    if (x.shape != S || x.offset != 0 || cwidth != rowlen) return false;
    Buf* in = cr.in[0];
    if (Touched::has(t.late, in) || Touched::has(t.per_row, in) || !holds(in, shape_numel(S), x.dtype)) return false;
    const ir::TensorDesc& o = cr.op.outputs[0];
    return o.offset == 0 && cr.out[0] != in && !t.written(cr.out[0]) && !Touched::has(t.shared, cr.out[0]);
  };
  auto reads_late = [&](const Rec& sr) {
    for (Buf* b : sr.in)
      if (Touched::has(t.late, b)) return true;
    return false;
  };
  while (stages.size() < kMaxStages && end < order.size()) {
    if (const Rec& cr = s[order[end]]; column_fits(cr)) {
      Stage c;
      c.column = static_cast<ptrdiff_t>(order[end]);
      bump(&Stats::pipeline_column_sums);
      stages.push_back(std::move(c));
      t.late.push_back(cr.out[0]);
      t.shared.push_back(cr.out[0]);  // written after the blocks: no stage may write it
      ++end;
      continue;
    }
    Group g;
    std::vector<size_t> hoisted;
    std::string why;
    // No ops set aside: they would run before the pipeline, and may read what it computes.
    const size_t next = cut_group(s, order, end, g, hoisted, why, false);
    if (g.steps.empty()) break;
    // A per-row group: its shape is the rows (S without the row dims, or with them as 1s), and
    // it reads earlier stages' per-row values element for element (`v + eps` then `rsqrt`).
    bool per_row = g.S != S && (g.S.size() == r || g.S.size() == lead);
    for (size_t q = 0; q < g.S.size() && per_row; ++q) per_row = g.S[q] == (q < lead ? S[q] : 1);
    if (g.S != S && !per_row) break;
    bool ok = true;
    for (size_t q : g.steps) {
      const Rec& sr = s[q];
      ok = ok && !overwrites(sr, t) && !reads_late(sr);
      for (size_t a = 0; a < sr.in.size() && ok && per_row; ++a)
        if (t.written(sr.in[a])) ok = Touched::has(t.per_row, sr.in[a]) && is_full_contiguous(sr.op.inputs[a], g.S);
      if (!per_row) ok = ok && reads_row_local(sr, t, S, k, sr.in.size());
    }
    if (g.tail >= 0) {
      const Rec& tr = s[static_cast<size_t>(g.tail)];
      ok = ok && !per_row && !g.long_tail && row_dims(tr.op) == k && reads_row_local(tr, t, S, k, 1) &&
           !overwrites(tr, t) && !reads_late(tr);
    }
    if (!ok) break;
    stages.push_back(Stage{g, -1, -1, per_row});
    end = next;
    for (size_t q : g.steps) t.step(s[q], S, g.S, k);
    if (g.tail >= 0) t.row_op(s[static_cast<size_t>(g.tail)], S);
  }
  if (stages.size() < 2) return 0;
  run_row_pipeline(s, stages, S, k);
  for (const Stage& st : stages) {
    if (st.lone >= 0) release(s, static_cast<size_t>(st.lone));
    if (st.column >= 0) release(s, static_cast<size_t>(st.column));
    for (size_t q : st.g.steps) release(s, q);
    if (st.g.tail >= 0) release(s, static_cast<size_t>(st.g.tail));
  }
  return end;
}

/// Plans each group stage (into gs_[stage]) and runs the pipeline on the executor.
void FusionBackend::run_row_pipeline(const std::vector<Rec>& s, const std::vector<Stage>& stages, const Shape& S,
                                     int64_t k) {
  std::vector<GroupScratch*> scratch(stages.size(), nullptr);
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].lone < 0 && stages[i].column < 0) scratch[i] = &plan_group(s, stages[i].g, i);
  exec_->run_pipeline(*this, PipelineLaunch{s, stages, scratch, S, k});
}

}  // namespace kiln::fusion
