// SPDX-License-Identifier: MIT OR Apache-2.0
// The Vulkan backend's fusion executor (fusion.h).
#include "backends/vulkan/fusion.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>

#include "fusion/plan.h"
#include "kernel/library.h"
#include "kiln/small_vector.h"

namespace kiln::vulkan {

namespace lib = kiln::kernel::lib;

Buf* FusionExecutor::memory(void* real) {
  if (real) return static_cast<Buf*>(real);
  // An empty buffer has no memory in the decorator; a kernel still binds a buffer there.
  if (!empty_) empty_ = ctx_.allocate(0);
  return empty_;
}

Buf* FusionExecutor::memory(fusion::Buffers& mem, fusion::Buf* b) {
  mem.materialise(b);
  return memory(b->real);
}

void FusionExecutor::run_op(const ir::Op& op, void* const* in_real, void* const* out_real) {
  std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
  SmallVec<void*, 4> in, out;
  for (size_t q = 0; q < op.inputs.size(); ++q) in.push_back(memory(in_real[q]));
  for (size_t q = 0; q < op.outputs.size(); ++q) out.push_back(memory(out_real[q]));
  if (kernels_.try_run(queue_, op, in.data(), out.data())) return;
  // Through the fallback, over Storage records of the memory (the decorator owns it).
  std::deque<Storage> records;
  SmallVec<Storage*, 4> si, so;
  auto wrap = [&](void* b) { return &records.emplace_back(b, static_cast<Buf*>(b)->size, backend_, unowned_memory()); };
  for (void* b : in) si.push_back(wrap(b));
  for (void* b : out) so.push_back(wrap(b));
  execute_op(backend_, op, si.data(), so.data());
}

void FusionExecutor::run_rec(fusion::Buffers& mem, const fusion::Rec& r) {
  SmallVec<void*, 4> in, out;
  for (fusion::Buf* b : r.in) {
    mem.materialise(b);
    in.push_back(b->real);
  }
  for (fusion::Buf* b : r.out) {
    mem.materialise(b);
    out.push_back(b->real);
  }
  run_op(r.op, in.data(), out.data());
}

namespace {

/// Whether step k's value is read by a step after `last` (of the group's n), or by the tail when
/// it runs as its own kernel (the value must then be in memory). (w.src may hold more entries
/// than the group has steps: scratch kept from larger groups.)
bool read_after(const fusion::GroupScratch& w, size_t n, size_t k, size_t last, bool tail_fused) {
  for (size_t j = last + 1; j < n; ++j)
    for (const fusion::Src& s : w.src[j])
      if (s.step == static_cast<int>(k)) return true;
  return !tail_fused && static_cast<int>(k) == w.tail_in;
}

/// Buffers of a kernel for steps [begin, last]: stored values, loads (but the product's, when
/// `given`), values of earlier steps, the parameter block.
size_t bindings(const fusion::GroupLaunch& l, size_t begin, size_t last, bool tail_fused, fusion::Buf* given) {
  const fusion::GroupScratch& w = l.w;
  std::vector<int> loads, earlier;
  size_t outs = 0;
  for (size_t k = begin; k <= last; ++k) {
    outs += w.store[k] || read_after(w, l.g.steps.size(), k, last, tail_fused);
    for (const fusion::Src& s : w.src[k]) {
      if (s.step < 0 && w.loads[static_cast<size_t>(s.load)].buf == given) continue;
      std::vector<int>& v = s.step >= 0 ? earlier : loads;
      const int id = s.step >= 0 ? s.step : s.load;
      if (s.step >= 0 && static_cast<size_t>(s.step) >= begin) continue;
      if (std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
    }
  }
  return outs + loads.size() + earlier.size() + 1;
}

lib::FusedLoad::Kind kind_of(fusion::LoadKind k) {
  return k == fusion::LoadKind::Identity ? lib::FusedLoad::Identity
         : k == fusion::LoadKind::Scalar ? lib::FusedLoad::Scalar
                                         : lib::FusedLoad::Gather;
}

/// A run of consecutive steps [begin, end) of a group that fits one kernel's bindings.
struct Segment {
  size_t begin = 0, end = 0;
};

}  // namespace

/// Steps [begin, end) of a group as a fused chain: its loads (the buffers they read; loads of
/// `given`, a product's result, read its value instead) and steps.
struct GroupChain {
  std::vector<lib::FusedLoad> loads;
  std::vector<fusion::Buf*> bufs;  ///< per load (null: Given)
  std::vector<lib::FusedStep> steps;

  GroupChain(const fusion::GroupLaunch& l, size_t begin, size_t end, bool tail_fused, fusion::Buf* given) {
    const fusion::GroupScratch& w = l.w;
    const fusion::Group& g = l.g;
    std::vector<int> group_load(w.loads.size(), 0), step_load(g.steps.size(), 0);  // index + 1 in `loads`
    steps.resize(end - begin);
    for (size_t k = begin; k < end; ++k) {
      lib::FusedStep& fs = steps[k - begin];
      fs.op = &l.s[g.steps[k]].op;
      for (const fusion::Src& src : w.src[k]) {
        if (src.step >= static_cast<int>(begin)) {
          fs.src.push_back(src.step - static_cast<int>(begin));
          continue;
        }
        int& at = src.step >= 0 ? step_load[static_cast<size_t>(src.step)] : group_load[static_cast<size_t>(src.load)];
        if (at == 0) {
          lib::FusedLoad f;
          if (src.step >= 0) {  // an earlier segment's value, in its step's memory
            const fusion::Rec& r = l.s[g.steps[static_cast<size_t>(src.step)]];
            f.desc = r.op.outputs[0];
            bufs.push_back(r.out[0]);
          } else {
            const fusion::Load& L = w.loads[static_cast<size_t>(src.load)];
            f.kind = L.buf == given ? lib::FusedLoad::Given : kind_of(L.kind);
            f.desc = L.desc;
            f.shape = L.gshape;
            f.strides = L.bstrides;
            bufs.push_back(L.buf == given ? nullptr : L.buf);
          }
          loads.push_back(std::move(f));
          at = static_cast<int>(loads.size());
        }
        fs.src.push_back(-at);
      }
      fs.stored = w.store[k] || read_after(w, g.steps.size(), k, end - 1, tail_fused);
    }
  }
};

void FusionExecutor::record(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin,
                            const kernel::lib::Launch& launch, const GroupChain& c, const Around& around) {
  SmallVec<void*, 8> in, out;
  for (fusion::Buf* b : around.out) out.push_back(memory(mem, b));
  for (size_t k = 0; k < c.steps.size(); ++k)
    if (c.steps[k].stored) out.push_back(memory(mem, l.s[l.g.steps[begin + k]].out[0]));
  for (fusion::Buf* b : around.in) in.push_back(memory(mem, b));
  for (fusion::Buf* b : c.bufs)
    if (b) in.push_back(memory(mem, b));
  for (fusion::Buf* b : around.in_last) in.push_back(memory(mem, b));
  std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
  kernels_.run(queue_, launch, in.data(), out.data());
  fusion::bump(&fusion::Stats::compiled_groups);
}

void FusionExecutor::run_segment(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin, size_t end) {
  const GroupChain c(l, begin, end, false, nullptr);
  const std::optional<lib::Launch> launch = lib::fused_launch(c.loads, c.steps, shape_numel(l.g.S), ctx_.float64());
  if (!launch) {
    fusion::dbg("    steps " + std::to_string(begin) + " to " + std::to_string(end - 1) +
                ": one Vulkan kernel per op (the library has no fused form)");
    for (size_t k = begin; k < end; ++k) run_rec(mem, l.s[l.g.steps[k]]);
    return;
  }
  record(mem, l, begin, *launch, c, {});
}

bool FusionExecutor::run_with_tail(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin) {
  const size_t n = l.g.steps.size();
  const fusion::Rec& t = l.s[static_cast<size_t>(l.g.tail)];
  if (l.w.tail_in < static_cast<int>(begin) ||
      bindings(l, begin, n - 1, true, nullptr) + t.in.size() - 1 + t.out.size() > ctx_.max_bindings())
    return false;
  const GroupChain c(l, begin, n, true, nullptr);
  // A row kernel reads its input in several passes: a step stored over memory the chain loads
  // (in place) would change what a later pass reads.
  for (size_t k = 0; k < c.steps.size(); ++k)
    if (c.steps[k].stored && std::find(c.bufs.begin(), c.bufs.end(), l.s[l.g.steps[begin + k]].out[0]) != c.bufs.end())
      return false;
  const std::optional<lib::Launch> launch =
      lib::fused_tail_launch(c.loads, c.steps, l.w.tail_in - static_cast<int>(begin), t.op, ctx_.float64());
  if (!launch) return false;
  fusion::dbg("    the row op reads the steps' values in its own kernel");
  record(mem, l, begin, *launch, c, {{t.out.begin(), t.out.end()}, {}, {t.in.begin() + 1, t.in.end()}});
  return true;
}

bool FusionExecutor::run_with_product(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t end) {
  const fusion::Rec& mm = *l.matmul;
  fusion::Buf* product = mm.out[0];
  const bool keep = fusion::needed_after(product, l.g);
  if (l.g.tail >= 0 || bindings(l, 0, end - 1, false, product) + mm.in.size() + (keep ? 1 : 0) > ctx_.max_bindings())
    return false;
  const GroupChain c(l, 0, end, false, product);
  const std::optional<lib::Launch> launch = lib::fused_product_launch(mm.op, keep, c.loads, c.steps, ctx_.float64());
  if (!launch) return false;
  fusion::dbg("    steps 0 to " + std::to_string(end - 1) + " run in the product's kernel");
  std::vector<fusion::Buf*> out;
  if (keep) out.push_back(product);
  record(mem, l, 0, *launch, c, {out, {mm.in.begin(), mm.in.end()}, {}});
  return true;
}

void FusionExecutor::run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) {
  // Consecutive steps go into one kernel while its buffers fit the device's bindings.
  const size_t n = l.g.steps.size();
  std::vector<Segment> segs;
  size_t begin = 0;
  for (size_t k = 1; k <= n; ++k)
    if (k == n || bindings(l, begin, k, false, nullptr) > ctx_.max_bindings()) {
      if (k < n && fusion::debug_on()) fusion::dbg("    split before step " + std::to_string(k) + " (bindings)");
      segs.push_back({begin, k});
      begin = k;
    }
  // The first segment as the product's epilogue, the last one as the tail's input, where
  // the library has those kernels; else the product and the tail run alone around them. (A
  // group has steps; one with a tail is no product's epilogue here: run_with_product.)
  const bool in_product = l.matmul && run_with_product(mem, l, segs[0].end);
  if (l.matmul && !in_product) run_rec(mem, *l.matmul);
  const bool tail = l.g.tail >= 0;
  for (size_t q = in_product ? 1 : 0; q < segs.size() - (tail ? 1 : 0); ++q)
    run_segment(mem, l, segs[q].begin, segs[q].end);
  if (tail && !run_with_tail(mem, l, segs.back().begin)) {
    run_segment(mem, l, segs.back().begin, segs.back().end);
    run_rec(mem, l.s[static_cast<size_t>(l.g.tail)]);
  }
}

void FusionExecutor::run_pipeline(fusion::Buffers&, const fusion::PipelineLaunch&) {
  KILN_CHECK(false, "fusion", "the Vulkan backend plans no row pipelines");
}

}  // namespace kiln::vulkan
