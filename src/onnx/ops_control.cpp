// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX control flow: If, Loop, Scan (opset 9+). Subgraphs see the enclosing scope's values.
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

bool truth(const OpContext& c, const Tensor& t) {
  c.check(t.numel() == 1, "condition must have one element, got shape " + to_string(t.shape()));
  return t.to(bool_).reshape({}).item<bool>();
}

Tensor stack_or_empty(const std::vector<Tensor>& xs, const OpContext& c) {
  c.check(!xs.empty(), "a scan output with zero iterations has no known shape");
  return stack(xs, 0);
}

}  // namespace

void register_control(Registry& r) {
  r["If"] = [](OpContext& c) {
    const proto::GraphP* g = truth(c, c.x(0)) ? c.attr_g("then_branch") : c.attr_g("else_branch");
    c.check(g != nullptr, "missing then_branch/else_branch");
    auto outs = c.run_graph(*g, {});
    c.check(outs.size() == c.out.size(),
            "branch returns " + std::to_string(outs.size()) + " outputs, node has " + std::to_string(c.out.size()));
    for (size_t i = 0; i < outs.size(); ++i) c.set(i, outs[i]);
  };
  r["Loop"] = [](OpContext& c) {
    const proto::GraphP* body = c.attr_g("body");
    c.check(body != nullptr, "missing body");
    int64_t max_trip = c.has(0) ? c.x(0).to(i64).reshape({}).item<int64_t>() : INT64_MAX;
    bool cond = c.has(1) ? truth(c, c.x(1)) : true;
    std::vector<Tensor> carried(c.in.begin() + std::min<size_t>(2, c.in.size()), c.in.end());
    size_t n_carried = carried.size();
    c.check(body->outputs.size() >= 1 + n_carried, "body must return cond and the loop-carried values");
    size_t n_scan = body->outputs.size() - 1 - n_carried;
    std::vector<std::vector<Tensor>> scans(n_scan);
    constexpr int64_t kMaxIters = int64_t{1} << 24;
    for (int64_t it = 0; it < max_trip && cond; ++it) {
      c.check(it < kMaxIters, "more than 2^24 iterations");
      std::vector<Tensor> ins{scalar_tensor(it, i64, c.device), scalar_tensor(cond, bool_, c.device)};
      ins.insert(ins.end(), carried.begin(), carried.end());
      auto outs = c.run_graph(*body, ins);
      cond = truth(c, outs[0]);
      for (size_t i = 0; i < n_carried; ++i) carried[i] = outs[1 + i];
      for (size_t i = 0; i < n_scan; ++i) scans[i].push_back(outs[1 + n_carried + i]);
    }
    for (size_t i = 0; i < n_carried; ++i) c.set(i, carried[i]);
    for (size_t i = 0; i < n_scan; ++i) c.set(n_carried + i, stack_or_empty(scans[i], c));
  };
  r["Scan"] = [](OpContext& c) {
    c.check(c.opset >= 9, "Scan before opset 9 (with sequence_lens) is not supported");
    const proto::GraphP* body = c.attr_g("body");
    c.check(body != nullptr, "missing body");
    int64_t m = c.attr_i("num_scan_inputs", 0);
    c.check(m >= 0 && static_cast<size_t>(m) <= c.n_in(), "num_scan_inputs out of range");
    size_t n_state = c.n_in() - static_cast<size_t>(m);
    std::vector<int64_t> in_axes = c.attr_ints("scan_input_axes"), in_dirs = c.attr_ints("scan_input_directions"),
                         out_axes = c.attr_ints("scan_output_axes"), out_dirs = c.attr_ints("scan_output_directions");
    std::vector<Tensor> state(c.in.begin(), c.in.begin() + static_cast<long>(n_state));
    std::vector<Tensor> xs;
    int64_t len = -1;
    for (int64_t j = 0; j < m; ++j) {
      Tensor x = c.x(n_state + j);
      int64_t ax = axis_of(c, in_axes.empty() ? 0 : in_axes.at(j), x.dim());
      x = x.movedim({ax}, {0});
      if (!in_dirs.empty() && in_dirs.at(j)) x = x.flip({0});
      c.check(len < 0 || x.size(0) == len, "scan inputs differ in length");
      len = x.size(0);
      xs.push_back(x);
    }
    size_t n_scan_out = body->outputs.size() - n_state;
    std::vector<std::vector<Tensor>> scans(n_scan_out);
    for (int64_t t = 0; t < std::max<int64_t>(len, 0); ++t) {
      std::vector<Tensor> ins = state;
      for (const auto& x : xs) ins.push_back(x.select(0, t));
      auto outs = c.run_graph(*body, ins);
      for (size_t i = 0; i < n_state; ++i) state[i] = outs[i];
      for (size_t i = 0; i < n_scan_out; ++i) scans[i].push_back(outs[n_state + i]);
    }
    for (size_t i = 0; i < n_state; ++i) c.set(i, state[i]);
    for (size_t i = 0; i < n_scan_out; ++i) {
      Tensor y = stack_or_empty(scans[i], c);
      if (!out_dirs.empty() && out_dirs.at(i)) y = y.flip({0});
      int64_t ax = out_axes.empty() ? 0 : axis_of(c, out_axes.at(i), y.dim());
      c.set(n_state + i, y.movedim({0}, {ax}).contiguous());
    }
  };
}

}  // namespace kiln::onnx
