// SPDX-License-Identifier: MIT OR Apache-2.0
// Plan steps that keep the IR op they issue (Note [Prepared steps] in prepared.h).
#include "ops/prepared.h"

#include <algorithm>

#include "kiln/autodiff.h"
#include "ops/dispatch.h"

namespace kiln::detail {

namespace {

/// Holds p's slot for one use; `held` is false when another run has it.
class Hold {
 public:
  explicit Hold(PreparedOp* p) : p_(p), held_(p && !p->busy.exchange(true, std::memory_order_acquire)) {}
  ~Hold() {
    if (held_) p_->busy.store(false, std::memory_order_release);
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  bool held() const { return held_; }

 private:
  PreparedOp* p_;
  bool held_;
};

bool same_layout(const TensorImpl& t, const ir::TensorDesc& d) {
  return t.dtype == d.dtype && t.offset == d.offset && t.shape == d.shape && t.strides == d.strides;
}

}  // namespace

Tensor run_prepared(PreparedOp* p, std::span<const Tensor> in, std::span<const int64_t> key) {
  Hold hold(p);
  if (!hold.held() || !p->ready || !std::equal(key.begin(), key.end(), p->key.begin(), p->key.end())) return {};
  SmallVec<Storage*, 4> bufs;
  for (size_t i = 0; i < p->src.size(); ++i) {
    const size_t s = p->src[i];
    if (s >= in.size() || !in[s].defined()) return {};
    const TensorImpl& t = in[s].impl();
    if (!t.storage || t.device != p->dev || !same_layout(t, p->layout[i])) return {};
    if (t.autograd && grad_enabled() && in[s].requires_grad()) return {};
    bufs.push_back(t.storage.get());
  }
  std::shared_ptr<Storage> out;
  run_prepared(p->api, p->op, p->dev, bufs.data(), &out);
  return wrap(p->result, p->dev, std::move(out));
}

void keep_prepared(PreparedOp* p, const char* api, const ir::Op& op, const Device& dev, std::span<const Tensor> in,
                   std::span<const int> src, const Shape& result_shape, std::span<const int64_t> key) {
  if (!p || dev.backend()->autodiff_options() || op.outputs.size() != 1 || src.size() != op.inputs.size() ||
      shape_numel(result_shape) != op.outputs[0].numel())
    return;
  Hold hold(p);
  if (!hold.held()) return;
  p->ready = false;
  p->src.clear();
  p->layout.clear();
  for (int s : src) {
    if (s < 0 || s > 255 || static_cast<size_t>(s) >= in.size() || !in[static_cast<size_t>(s)].defined()) return;
    p->src.push_back(static_cast<uint8_t>(s));
    p->layout.push_back(desc_of(in[static_cast<size_t>(s)]));
  }
  p->dev = dev;
  p->api = api;
  p->op = op;
  p->result = ir::contiguous_desc(result_shape, op.outputs[0].dtype);
  p->key.assign(key.begin(), key.end());
  p->ready = true;
}

Tensor matmul_op(const Tensor& a, const Tensor& b, const Tensor& bias, PreparedOp* keep,
                 std::span<const Tensor> sources, std::span<const int64_t> key) {
  const DType dt = a.dtype();
  if (a.dim() < 2 || b.dim() != 2 || !a.is_contiguous() || b.dtype() != dt || (dt != f32 && dt != f64) ||
      b.device() != a.device() || a.size(-1) != b.size(0) || a.numel() == 0 || b.numel() == 0)
    return {};
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != b.size(1) || bias.dtype() != dt ||
                         bias.device() != a.device() || !bias.is_contiguous()))
    return {};
  if (grad_enabled() && (a.requires_grad() || b.requires_grad() || (bias.defined() && bias.requires_grad()))) return {};
  const int64_t K = b.size(0), N = b.size(1), M = a.numel() / K;
  Shape ys(a.shape().begin(), a.shape().end() - 1);
  ys.push_back(N);
  ir::Op op;
  op.kind = ir::OpKind::MatMul;
  const Tensor a3 = a.view({1, M, K}), b3 = b.unsqueeze(0);
  const char* api = bias.defined() ? "linear" : "matmul";
  Tensor y = bias.defined() ? run1(api, op, {a3, b3, bias}) : run1(api, op, {a3, b3});
  if (keep) {
    static constexpr int src[3] = {0, 1, 2};
    keep_prepared(keep, api, op, a.device(), sources, std::span<const int>(src, op.inputs.size()), ys, key);
  }
  return y.view(ys);
}

}  // namespace kiln::detail
