// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal: matching file tensors to a module's state (load.cpp), shared with checkpoint.cpp so
// a checkpoint is validated completely before anything is modified.
#include <string>
#include <utility>
#include <vector>

#include "kiln/store.h"

namespace kiln::store::detail {

/// The report of a load and the copies it would make (model tensor handle, file tensor).
struct LoadPlan {
  LoadReport report;
  std::vector<std::pair<Tensor, Tensor>> copies;
};

/// Matches `file_tensors` (remapped and filtered as `options` says) against `model_state`.
/// Modifies nothing; throws kiln::Error for invalid regexes or two file keys that remap to one.
LoadPlan plan_load(const std::vector<std::pair<std::string, Tensor>>& model_state,
                   const std::vector<std::pair<std::string, Tensor>>& file_tensors, const LoadOptions& options);

/// Copies every planned tensor into the model's tensor in place (under NoGradGuard), converting
/// dtype and device.
void apply_plan(const LoadPlan& plan);

}  // namespace kiln::store::detail
