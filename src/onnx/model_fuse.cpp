// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX run-time path: fusion of adjacent steps of a compiled graph's plan (MatMul + bias,
// Conv/Add + activation, Conv + residual Add, Conv -> Conv pairs, Conv -> MaxPool).
#include <cmath>
#include <unordered_map>
#include <vector>

#include "onnx/plan.h"

namespace kiln::onnx {

using proto::GraphP;
using proto::NodeP;

namespace {

/// The fusion passes over one plan, sharing per slot its reader count and last reader, the
/// constants by slot and the steps dropped so far. run() applies the passes in order.
class StepFuser {
 public:
  explicit StepFuser(Compiled& c) : c_(c), g_(*c.g) {}
  /// Applies every pass, then removes the dropped steps; leaves a graph with subgraph steps alone.
  void run();

 private:
  /// Counts each slot's readers (a graph output counts 2) and its last reader; false when a
  /// step has subgraphs (they may read any value).
  bool count_uses();
  /// Input i of st as a one-element f32 constant, else def (ok cleared when it is not constant).
  float scalar(const Step& st, size_t i, float def, bool& ok) const;
  /// MatMul followed by Add of a constant f32 vector: the MatMul step adds it (sgemm onto
  /// preloaded bias rows) and writes the Add's output.
  void fuse_matmul_bias();
  /// Conv followed by Relu, or by Clip with constant bounds, and Add followed by Relu (residual
  /// blocks), where the first node's output has no other use: that step applies the activation
  /// (for Conv a oneDNN post-op) and writes the activation's output.
  void fuse_activation();
  /// Conv followed by Add of another value (a residual block's sum, its Relu fused into the Add
  /// above): the Conv adds that value before its activation and runs in the Add's place (the
  /// value may be computed after the Conv, as a downsampling branch is).
  void fuse_conv_residual();
  /// Conv -> Conv where the second alone reads the first's (activated) output and has explicit
  /// pads: one step that keeps the intermediate in oneDNN's blocked layout (run_conv_pair), in
  /// the second's place (its residual, if any, may be computed after the first).
  void fuse_conv_pairs();
  /// Conv [-> activation] -> MaxPool where the pool alone reads the conv's output (one output,
  /// no indices, explicit pads): one step that pools the conv's blocked output (run_conv_pool),
  /// in the conv's place.
  void fuse_conv_pool();
  /// Whether node n's pads are explicit (no SAME auto_pad).
  static bool explicit_pads(const NodeP& n);
  /// 1x1, stride 1, unpadded, one group (a matrix product, never blocked): not worth pairing.
  bool pointwise(const Step& st, const NodeP& n) const;

  Compiled& c_;
  const GraphP& g_;
  std::vector<int> uses_, consumer_;  ///< per slot: readers, and the last step reading it
  std::unordered_map<int, Tensor> consts_;
  std::vector<char> drop_;  ///< per step: fused into another
};

void StepFuser::run() {
  if (!count_uses()) return;
  for (const auto& [s, t] : c_.const_slots) consts_[s] = t;
  drop_.assign(c_.steps.size(), 0);
  fuse_matmul_bias();
  fuse_activation();
  fuse_conv_residual();
  fuse_conv_pairs();
  fuse_conv_pool();
  std::vector<Step> kept;
  for (size_t k = 0; k < c_.steps.size(); ++k)
    if (!drop_[k]) kept.push_back(std::move(c_.steps[k]));
  c_.steps = std::move(kept);
}

bool StepFuser::count_uses() {
  const size_t n_slots = c_.slot_names.size();
  uses_.assign(n_slots, 0);
  consumer_.assign(n_slots, -1);
  for (size_t k = 0; k < c_.steps.size(); ++k) {
    if (c_.steps[k].has_sub) return false;
    for (int s : c_.steps[k].in)
      if (s >= 0) {
        ++uses_[s];
        consumer_[s] = static_cast<int>(k);
      }
  }
  for (int s : c_.out_slots)
    if (s >= 0) uses_[s] += 2;
  return true;
}

float StepFuser::scalar(const Step& st, size_t i, float def, bool& ok) const {
  if (i >= st.in.size() || st.in[i] < 0) return def;
  auto it = consts_.find(st.in[i]);
  if (it == consts_.end() || it->second.numel() != 1 || it->second.dtype() != f32) {
    ok = false;
    return def;
  }
  return it->second.reshape({1}).item<float>();
}

void StepFuser::fuse_matmul_bias() {
  for (size_t k = 0; k < c_.steps.size(); ++k) {
    Step& mm = c_.steps[k];
    const NodeP& mn = g_.nodes[mm.node];
    if (!mm.fn || mn.op_type != "MatMul" || !is_default_domain(mn.domain) || mm.out.size() != 1 || mm.out[0] < 0 ||
        uses_[mm.out[0]] != 1 || mm.in.size() != 2)
      continue;
    const int j = consumer_[mm.out[0]];
    Step& add = c_.steps[j];
    const NodeP& an = g_.nodes[add.node];
    if (!add.fn || an.op_type != "Add" || !is_default_domain(an.domain) || add.in.size() != 2 || add.out.size() != 1)
      continue;
    const int other = add.in[0] == mm.out[0] ? add.in[1] : add.in[0];
    auto it = consts_.find(other);
    if (other < 0 || other == mm.out[0] || it == consts_.end() || it->second.dtype() != f32 || it->second.dim() != 1)
      continue;
    mm.post = 3;
    mm.in.push_back(other);
    mm.out[0] = add.out[0];
    drop_[j] = 1;
  }
}

void StepFuser::fuse_activation() {
  for (size_t k = 0; k < c_.steps.size(); ++k) {
    Step& conv = c_.steps[k];
    const NodeP& cn = g_.nodes[conv.node];
    const bool is_add = cn.op_type == "Add";
    if (drop_[k] || !conv.fn || (cn.op_type != "Conv" && !is_add) || !is_default_domain(cn.domain) ||
        conv.out.size() != 1 || conv.out[0] < 0 || uses_[conv.out[0]] != 1)
      continue;
    const int j = consumer_[conv.out[0]];
    Step& act = c_.steps[j];
    const NodeP& an = g_.nodes[act.node];
    if (!act.fn || !is_default_domain(an.domain) || act.out.size() != 1 || act.in.empty() || act.in[0] != conv.out[0])
      continue;
    bool ok = true;
    if (an.op_type == "Relu") {
      conv.post = 1;
    } else if (an.op_type == "Clip" && !is_add) {
      float lo = -INFINITY, hi = INFINITY;
      if (an.attr("min") || an.attr("max")) {  // opset < 11
        if (an.attr("min")) lo = an.attr("min")->f;
        if (an.attr("max")) hi = an.attr("max")->f;
        ok = act.in.size() == 1;
      } else {
        lo = scalar(act, 1, lo, ok);
        hi = scalar(act, 2, hi, ok);
      }
      if (!ok || !(lo <= hi)) continue;
      conv.post = 2;
      conv.post_lo = lo;
      conv.post_hi = hi;
    } else {
      continue;
    }
    conv.out[0] = act.out[0];
    drop_[j] = 1;
  }
}

void StepFuser::fuse_conv_residual() {
  for (size_t k = 0; k < c_.steps.size(); ++k) {
    Step& conv = c_.steps[k];
    const NodeP& cn = g_.nodes[conv.node];
    if (drop_[k] || !conv.fn || cn.op_type != "Conv" || !is_default_domain(cn.domain) || conv.post != 0 ||
        conv.out.size() != 1 || conv.out[0] < 0 || uses_[conv.out[0]] != 1 || conv.in.size() < 2 || conv.in.size() > 3)
      continue;
    const int j = consumer_[conv.out[0]];
    if (j < 0 || drop_[j]) continue;
    Step& add = c_.steps[j];
    const NodeP& an = g_.nodes[add.node];
    if (!add.fn || an.op_type != "Add" || !is_default_domain(an.domain) || add.in.size() != 2 || add.out.size() != 1 ||
        add.in[0] == add.in[1] || add.post == 2)
      continue;
    const bool first = add.in[1] == conv.out[0];
    const int other = first ? add.in[0] : add.in[1];
    if (other < 0) continue;
    Step fused = std::move(conv);
    fused.in.resize(3, -1);
    fused.in.push_back(other);
    fused.res = 3;
    fused.res_first = first;
    fused.post = add.post;
    fused.out[0] = add.out[0];
    for (int s : fused.in)
      if (s >= 0 && consumer_[s] == static_cast<int>(k)) consumer_[s] = j;
    add = std::move(fused);
    drop_[k] = 1;
  }
}

bool StepFuser::explicit_pads(const NodeP& n) {
  const proto::AttrP* a = n.attr("auto_pad");
  return !a || a->s.empty() || a->s == "NOTSET" || a->s == "VALID";
}

bool StepFuser::pointwise(const Step& st, const NodeP& n) const {
  auto w = consts_.find(st.in[1]);
  if (w == consts_.end()) return false;
  for (int64_t d = 2; d < w->second.dim(); ++d)
    if (w->second.size(d) != 1) return false;
  auto all = [&](const char* name, int64_t v) {
    const proto::AttrP* a = n.attr(name);
    if (!a) return true;
    for (int64_t x : a->ints)
      if (x != v) return false;
    return true;
  };
  const proto::AttrP* grp = n.attr("group");
  return (!grp || grp->i == 1) && all("strides", 1) && all("pads", 0);
}

void StepFuser::fuse_conv_pairs() {
  for (size_t k = 0; k < c_.steps.size(); ++k) {
    Step& a = c_.steps[k];
    const NodeP& an = g_.nodes[a.node];
    if (drop_[k] || !a.fn || an.op_type != "Conv" || !is_default_domain(an.domain) || a.pair >= 0 ||
        a.out.size() != 1 || a.out[0] < 0 || uses_[a.out[0]] != 1 || a.in.size() < 2 || a.in.size() > 3)
      continue;
    const int j = consumer_[a.out[0]];
    if (j < 0 || drop_[j]) continue;
    Step& b = c_.steps[j];
    const NodeP& bn = g_.nodes[b.node];
    const size_t nb = b.res >= 0 ? 4 : 3;  // inputs x, w [, bias] [, residual]
    bool reads_a = false;
    for (size_t i = 1; i < b.in.size(); ++i) reads_a = reads_a || b.in[i] == a.out[0];
    if (!b.fn || bn.op_type != "Conv" || !is_default_domain(bn.domain) || b.pair >= 0 || b.in.size() < 2 ||
        b.in.size() > nb || b.in[0] != a.out[0] || reads_a || b.out.size() != 1 || !explicit_pads(bn) ||
        pointwise(a, an) || pointwise(b, bn))
      continue;
    Step pair = std::move(a);
    pair.in.resize(3, -1);
    pair.in.push_back(b.in[1]);
    pair.in.push_back(b.in.size() > 2 ? b.in[2] : -1);
    if (b.res >= 0) {
      pair.in.push_back(b.in[3]);
      pair.res = 5;
      pair.res_first = b.res_first;
    }
    pair.pair = static_cast<int>(b.node);
    pair.post2 = b.post;
    pair.post2_lo = b.post_lo;
    pair.post2_hi = b.post_hi;
    pair.out[0] = b.out[0];
    b = std::move(pair);
    drop_[k] = 1;
  }
}

void StepFuser::fuse_conv_pool() {
  for (size_t k = 0; k < c_.steps.size(); ++k) {
    Step& a = c_.steps[k];
    const NodeP& an = g_.nodes[a.node];
    if (drop_[k] || !a.fn || an.op_type != "Conv" || !is_default_domain(an.domain) || a.pair >= 0 || a.res >= 0 ||
        a.out.size() != 1 || a.out[0] < 0 || uses_[a.out[0]] != 1 || a.in.size() < 2 || a.in.size() > 3)
      continue;
    const int j = consumer_[a.out[0]];
    if (j < 0 || drop_[j]) continue;
    Step& p = c_.steps[j];
    const NodeP& pn = g_.nodes[p.node];
    if (!p.fn || pn.op_type != "MaxPool" || !is_default_domain(pn.domain) || p.in.size() != 1 || p.in[0] != a.out[0] ||
        p.out.empty() || p.out[0] < 0 || !explicit_pads(pn))
      continue;
    bool more = false;  // the indices output
    for (size_t i = 1; i < p.out.size(); ++i) more = more || p.out[i] >= 0;
    if (more) continue;
    a.pool = static_cast<int>(p.node);
    a.out[0] = p.out[0];
    a.out.resize(1);
    drop_[static_cast<size_t>(j)] = 1;
  }
}

}  // namespace

void fuse_activations(Compiled& c) { StepFuser(c).run(); }

}  // namespace kiln::onnx
