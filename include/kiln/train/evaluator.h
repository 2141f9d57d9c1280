// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Evaluator: the loss and metrics of a model over a whole dataset (the test split), with
// the same step, loss and metric objects a Learner uses (docs/training.md).
//
//   train::Evaluator ev = learner.evaluator();
//   train::MetricValues test = ev.evaluate(test_loader);  // {"loss", ...}, {"accuracy", ...}
#include <memory>
#include <optional>
#include <vector>

#include "kiln/train/learner.h"

namespace kiln::train {

/// What an Evaluator needs: a model and its forward (or a step), a loss, metrics, a device.
struct EvaluatorConfig {
  nn::Module* model = nullptr;
  ForwardFn forward;
  LossFn loss;  ///< default: nn::functional::cross_entropy
  StepFn step;  ///< when given, replaces forward + loss
  std::vector<std::shared_ptr<Metric>> metrics;
  std::optional<Device> device;  ///< inputs and targets are moved here when elsewhere
};

/// Runs a model over a dataset in eval mode without gradients.
class Evaluator {
 public:
  explicit Evaluator(EvaluatorConfig config);
  /// The loss (the mean over items of each batch's loss, weighted by its items; NaN on an empty
  /// source) and each metric's value, in order: {"loss", ...}, then the metrics' names. The
  /// metrics are reset first. The model's training mode is restored afterwards. `epoch` is
  /// passed to data.start_epoch.
  MetricValues evaluate(data::BatchSource& data, uint64_t epoch = 0);
  const EvaluatorConfig& config() const { return config_; }

 private:
  EvaluatorConfig config_;
};

}  // namespace kiln::train
