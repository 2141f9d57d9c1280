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
  if (kernels_.try_run(ctx_, op, reinterpret_cast<Buf* const*>(in.data()), reinterpret_cast<Buf* const*>(out.data())))
    return;
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

/// A run of consecutive steps [begin, end) of a group that fits one kernel's bindings.
struct Segment {
  size_t begin = 0, end = 0;
};

/// Whether step k's value is read by a step after `last` (it must then be in memory when the
/// group is split there).
bool read_after(const fusion::GroupScratch& w, size_t k, size_t last) {
  for (size_t j = last + 1; j < w.src.size(); ++j)
    for (const fusion::Src& s : w.src[j])
      if (s.step == static_cast<int>(k)) return true;
  return static_cast<int>(k) == w.tail_in;  // the row op closing the group reads it
}

/// Buffers of a kernel for steps [begin, last]: stored values, loads, values of earlier steps,
/// the parameter block.
size_t bindings(const fusion::GroupScratch& w, size_t begin, size_t last) {
  std::vector<int> loads, earlier;
  size_t outs = 0;
  for (size_t k = begin; k <= last; ++k) {
    outs += w.store[k] || read_after(w, k, last);
    for (const fusion::Src& s : w.src[k]) {
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

}  // namespace

void FusionExecutor::run_segment(fusion::Buffers& mem, const fusion::GroupLaunch& l, size_t begin, size_t end) {
  const fusion::GroupScratch& w = l.w;
  const fusion::Group& g = l.g;
  std::vector<lib::FusedLoad> loads;
  std::vector<fusion::Buf*> load_bufs;
  std::vector<int> group_load(w.loads.size(), 0), step_load(g.steps.size(), 0);  // index + 1 in `loads`
  std::vector<lib::FusedStep> steps(end - begin);
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
          load_bufs.push_back(r.out[0]);
        } else {
          const fusion::Load& L = w.loads[static_cast<size_t>(src.load)];
          f.kind = kind_of(L.kind);
          f.desc = L.desc;
          f.shape = L.gshape;
          f.strides = L.bstrides;
          load_bufs.push_back(L.buf);
        }
        loads.push_back(std::move(f));
        at = static_cast<int>(loads.size());
      }
      fs.src.push_back(-at);
    }
    fs.stored = w.store[k] || read_after(w, k, end - 1);
  }
  const std::optional<lib::Launch> launch = lib::fused_launch(loads, steps, shape_numel(g.S), ctx_.float64());
  if (!launch) {
    fusion::dbg("    steps " + std::to_string(begin) + " to " + std::to_string(end - 1) +
                ": one Vulkan kernel per op (the library has no fused form)");
    for (size_t k = begin; k < end; ++k) run_rec(mem, l.s[g.steps[k]]);
    return;
  }
  SmallVec<Buf*, 8> in, out;
  for (size_t k = begin; k < end; ++k)
    if (steps[k - begin].stored) out.push_back(memory(mem, l.s[g.steps[k]].out[0]));
  for (fusion::Buf* b : load_bufs) in.push_back(memory(mem, b));
  std::lock_guard<std::recursive_mutex> lock(ctx_.mu);
  kernels_.run(ctx_, *launch, in.data(), out.data());
  fusion::bump(&fusion::Stats::compiled_groups);
}

void FusionExecutor::run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) {
  if (l.matmul) run_rec(mem, *l.matmul);  // the product first, whole: its epilogue reads it
  // Consecutive steps go into one kernel while its buffers fit the device's bindings.
  const size_t n = l.g.steps.size();
  size_t begin = 0;
  for (size_t k = 1; k <= n; ++k)
    if (k == n || bindings(l.w, begin, k) > kMaxBindings) {
      if (k < n && fusion::debug_on()) fusion::dbg("    split before step " + std::to_string(k) + " (bindings)");
      run_segment(mem, l, begin, k);
      begin = k;
    }
  if (l.g.tail >= 0) run_rec(mem, l.s[static_cast<size_t>(l.g.tail)]);
}

void FusionExecutor::run_pipeline(fusion::Buffers&, const fusion::PipelineLaunch&) {
  KILN_CHECK(false, "fusion", "the Vulkan backend plans no row pipelines");
}

}  // namespace kiln::vulkan
