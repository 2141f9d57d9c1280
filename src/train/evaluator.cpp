// SPDX-License-Identifier: MIT OR Apache-2.0
// The Evaluator: loss and metrics of a model over a dataset.
#include "kiln/train/evaluator.h"

#include <limits>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/nn/loss.h"

namespace kiln::train {

Evaluator::Evaluator(EvaluatorConfig config) : config_(std::move(config)) {
  KILN_CHECK(config_.model != nullptr, "Evaluator", "a model is required");
  KILN_CHECK(config_.forward || config_.step, "Evaluator", "a forward function or a step is required");
  if (!config_.loss)
    config_.loss = [](const Tensor& out, const Tensor& t) { return nn::functional::cross_entropy(out, t); };
}

MetricValues Evaluator::evaluate(data::BatchSource& data, uint64_t epoch) {
  auto& c = config_;
  const bool was_training = c.model->is_training();
  c.model->eval();
  NoGradGuard ng;
  for (auto& m : c.metrics) m->reset();
  double loss_sum = 0;
  int64_t items = 0;
  auto on = [&](const Tensor& t) { return c.device && t.defined() && t.device() != *c.device ? t.to(*c.device) : t; };
  try {
    data.start_epoch(epoch);
    while (auto batch = data.next()) {
      data::Batch b{on(batch->input), on(batch->target)};
      StepOutput so = c.step ? c.step(b) : StepOutput{Tensor(), c.forward(b.input), b.target};
      if (!c.step) so.loss = c.loss(so.output, so.target);
      KILN_CHECK(so.loss.defined() && so.loss.numel() == 1, "Evaluator",
                 "the step must return a scalar loss, got "
                     << (so.loss.defined() ? to_string(so.loss.shape()) : std::string("undefined")));
      const int64_t n = b.input.dim() > 0 ? b.input.size(0) : 1;
      loss_sum += so.loss.item<double>() * static_cast<double>(n);
      items += n;
      if (so.output.defined())
        for (auto& m : c.metrics) m->update(so.output, so.target);
    }
  } catch (...) {
    c.model->train(was_training);
    throw;
  }
  c.model->train(was_training);
  MetricValues v;
  v.emplace_back("loss", items ? loss_sum / static_cast<double>(items) : std::numeric_limits<double>::quiet_NaN());
  for (auto& m : c.metrics) v.emplace_back(m->name(), m->value());
  return v;
}

Evaluator Learner::evaluator() const {
  EvaluatorConfig e;
  e.model = config_.model;
  e.forward = config_.forward;
  e.loss = config_.loss;
  e.step = config_.valid_step ? config_.valid_step : config_.train_step;
  e.metrics = config_.metrics;
  e.device = config_.device;
  return Evaluator(std::move(e));
}

}  // namespace kiln::train
