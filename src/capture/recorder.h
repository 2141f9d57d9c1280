// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The capture backend's recording (internal): capture.cpp starts one, marks the input and
// parameter buffers, runs the function and takes the graph.
#include <string>

#include "core/backend.h"
#include "kiln/capture.h"

namespace kiln::capture_detail {

/// The capture device's base backend (process-wide, never destroyed).
Backend* backend();

/// Records the ops run on the capture device while it lives (one at a time per process).
class Recording {
 public:
  Recording();
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  /// Makes the current contents of s (written from the host) a graph input or parameter.
  int64_t mark(Storage& s, CapturedValue::Kind kind, const std::string& name, const Shape& shape, DType dtype);
  /// The value a view of s reads (op is the reader's name, for errors).
  CapturedUse use(Storage& s, const ir::TensorDesc& d, const char* op);
  CapturedGraph& graph() { return graph_; }

 private:
  CapturedGraph graph_;
};

}  // namespace kiln::capture_detail
