// SPDX-License-Identifier: MIT OR Apache-2.0
// Internal to the ONNX run-time path (model.cpp, model_fuse.cpp): a graph compiled into a flat
// plan of steps over value slots, and the fusion of adjacent steps into one.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "onnx/ops.h"
#include "ops/prepared.h"

namespace kiln::onnx {

// One step of a graph's flat execution plan: a node that runs at run time, with its inputs and
// outputs as value slots (-1: absent) and the slots whose last use it is.
struct Step {
  size_t node = 0;
  const OpFn* fn = nullptr;  // null when unsupported (running it throws)
  bool has_sub = false;      // has subgraph attributes (If/Loop/Scan): sees the whole scope
  int post = 0;              // fused activation (OpContext::post)
  float post_lo = 0, post_hi = 0;
  int pair = -1;  // a second Conv fused after this one (node index; run_conv_pair), with its activation
  int pool = -1;  // a MaxPool fused after this Conv (node index; run_conv_pool)
  int post2 = 0;
  float post2_lo = 0, post2_hi = 0;
  int res = -1;  // a residual Add fused into this Conv (OpContext::res): its operand's index in `in`
  bool res_first = false;
  int prep = -1;  // the first of its slots in Compiled::prepared (OpContext::prep), -1: none
  std::vector<int> in, out, release;
};

struct Compiled {
  const proto::GraphP* g = nullptr;
  std::vector<size_t> order;     // node indices in execution order
  std::vector<const OpFn*> fns;  // per node (by index); null when unsupported
  std::vector<char> folded;      // per node: computed at load time (constant folding)
  std::vector<std::pair<std::string, Tensor>> inits;
  std::map<const proto::GraphP*, std::shared_ptr<Compiled>> subs;
  // The flat plan (built once at load): every value name of this graph has an integer slot;
  // run time is a loop over `steps` with no name lookups. Values die after their last use.
  std::unordered_map<std::string, int> slot_of;
  std::vector<std::string> slot_names;
  std::vector<std::pair<int, Tensor>> const_slots;  // initializers and folded values
  std::vector<std::pair<std::string, int>> outer;   // names taken from the enclosing scope
  std::vector<Step> steps;
  // The ops that Conv, MatMul and Gemm steps keep (Step::prep; Note [Prepared steps]).
  std::unique_ptr<PreparedOp[]> prepared;
  std::vector<int> out_slots;  // graph outputs
  // Shape-derived steps: a step whose inputs are constants, shapes (Shape/Size of any value) or
  // outputs of other such steps computes the same outputs for the same shapes (Shape -> Gather
  // -> Unsqueeze -> Concat -> Reshape-target chains, position ids). Each runs once per
  // combination of the shapes it depends on; later runs take its outputs from its cache.
  struct StepCache {
    std::vector<int> roots;  // steps (Shape/Size) whose input shapes form the key
    std::vector<std::pair<std::vector<int64_t>, std::vector<Tensor>>> entries;
  };
  std::vector<int> root_in;                        // per step: the input slot of a Shape/Size root, else -1
  std::vector<std::unique_ptr<StepCache>> caches;  // per step: null unless shape-derived
  std::vector<char> cached_slot;                   // per slot: a value shared with a cache
  std::unique_ptr<std::mutex> cache_mu = std::make_unique<std::mutex>();
  int slot(const std::string& name) {
    auto [it, added] = slot_of.emplace(name, static_cast<int>(slot_names.size()));
    if (added) slot_names.push_back(name);
    return it->second;
  }
};

/// Whether d names the default ONNX domain.
inline bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

/// Fuses adjacent steps of c's plan (MatMul + bias, activations, residual Adds, Conv pairs,
/// Conv + MaxPool) into one step each; leaves a graph with subgraph steps alone.
void fuse_activations(Compiled& c);

}  // namespace kiln::onnx
