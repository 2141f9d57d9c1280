// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers that generated code calls for control flow (If, Loop, Scan): the same semantics as
// the run-time path's ops in ops_control.cpp.
#include "kiln/error.h"
#include "kiln/onnx.h"
#include "kiln/ops.h"

namespace kiln::onnx::ops {

bool condition(const Tensor& cond) {
  KILN_CHECK(cond.defined() && cond.numel() == 1, "onnx",
             "control flow: a condition must have one element, got shape "
                 << (cond.defined() ? to_string(cond.shape()) : std::string("(none)")));
  return cond.to(bool_).reshape({}).item<bool>();
}

int64_t trip_count(const Tensor& m) {
  KILN_CHECK(m.defined() && m.numel() == 1, "onnx",
             "Loop: the trip count must have one element, got shape "
                 << (m.defined() ? to_string(m.shape()) : std::string("(none)")));
  return m.to(i64).reshape({}).item<int64_t>();
}

Tensor scan_input(const Tensor& x, int64_t axis, bool reverse) {
  int64_t r = x.dim();
  KILN_CHECK(axis >= -r && axis < r, "onnx", "Scan: scan axis " << axis << " out of range for rank " << r);
  if (axis < 0) axis += r;
  Tensor y = x.movedim({axis}, {0});
  return reverse ? y.flip({0}) : y;
}

int64_t scan_length(const std::vector<Tensor>& xs) {
  int64_t len = -1;
  for (const auto& x : xs) {
    KILN_CHECK(x.dim() >= 1, "onnx", "Scan: a scan input has rank 0");
    KILN_CHECK(len < 0 || x.size(0) == len, "onnx", "Scan: scan inputs differ in length");
    len = x.size(0);
  }
  return len < 0 ? 0 : len;
}

Tensor stack_steps(const std::vector<Tensor>& steps, int64_t axis, bool reverse) {
  KILN_CHECK(!steps.empty(), "onnx", "control flow: a scan output with zero iterations has no known shape");
  Tensor y = stack(steps, 0);
  if (reverse) y = y.flip({0});
  int64_t r = y.dim();
  KILN_CHECK(axis >= -r && axis < r, "onnx", "Scan: output axis " << axis << " out of range for rank " << r);
  if (axis < 0) axis += r;
  return axis == 0 ? y : y.movedim({0}, {axis}).contiguous();
}

}  // namespace kiln::onnx::ops
