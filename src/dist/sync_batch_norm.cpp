// SPDX-License-Identifier: MIT OR Apache-2.0
// Synchronised batch norm: the differentiable all-reduce it sums its statistics with, the reducer
// that batch norm layers call (nn::BatchStatsReducer; the arithmetic is BatchNormBase::run_synced),
// the SyncBatchNorm module and the conversion of a model's batch norms.
#include <memory>

#include "autodiff/graph.h"
#include "kiln/dist.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::dist {

Tensor all_reduce_with_grad(const Tensor& t, ProcessGroup& group) {
  KILN_CHECK(t.defined(), "all_reduce_with_grad", "expects a defined tensor");
  std::vector<Tensor> out;
  {
    NoGradGuard no_grad;
    out.push_back(t.detach().clone());
    group.all_reduce(out[0], ReduceOp::Sum);
  }
  ProcessGroup* g = &group;
  autodiff::record_custom(
      "all_reduce_with_grad", {t}, out,
      [g](const autodiff::GradContext& c) -> std::vector<Tensor> {
        // Every rank reaches this node (the same model runs on each), also where its own output
        // gradient is zero, so the ranks' collectives match.
        return {all_reduce_with_grad(c.grad_or_zeros(0), *g)};
      },
      /*save_inputs=*/false);
  return out[0];
}

namespace {

/// Sums over a given group, or over the default group as it is when first needed.
struct GroupStatsReducer final : nn::BatchStatsReducer {
  explicit GroupStatsReducer(ProcessGroup* group) : group_(group) {}
  Tensor sum(const Tensor& t) const override {
    ProcessGroup& g = group_ ? *group_ : default_group();
    return all_reduce_with_grad(t, g);
  }

 private:
  ProcessGroup* group_;
};

/// Sets the reducer of every batch norm that visit reaches.
struct Converter final : nn::Visitor {
  std::shared_ptr<const nn::BatchStatsReducer> reducer;
  size_t count = 0;
  void tensor(std::string_view, Tensor&, bool) override {}
  bool enter(std::string_view, nn::Module& m) override {
    if (auto* bn = dynamic_cast<nn::BatchNormBase*>(&m)) {
      bn->stats_reducer = reducer;
      ++count;
    }
    return true;
  }
};

}  // namespace

SyncBatchNorm::SyncBatchNorm(const nn::BatchNormConfig& c, const Device& device, ProcessGroup* group)
    : BatchNormBase(c, device, "SyncBatchNorm") {
  stats_reducer = std::make_shared<GroupStatsReducer>(group);
}

Tensor SyncBatchNorm::forward(const Tensor& x) const {
  KILN_CHECK(x.defined() && x.dim() >= 2, "SyncBatchNorm",
             "SyncBatchNorm expects input [N, C, *], got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  return run(x, "SyncBatchNorm", x.dim(), x.dim());
}

size_t convert_sync_batch_norm(nn::Module& model, ProcessGroup* group) {
  Converter conv;
  conv.reducer = std::make_shared<GroupStatsReducer>(group);
  if (auto* bn = dynamic_cast<nn::BatchNormBase*>(&model)) {
    bn->stats_reducer = conv.reducer;
    ++conv.count;
  }
  model.visit(conv);
  return conv.count;
}

}  // namespace kiln::dist
