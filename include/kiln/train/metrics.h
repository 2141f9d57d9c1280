// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Classification metrics for the Learner (and for direct use): accuracy, top-k accuracy,
// precision / recall / F1 (macro and per class), the confusion matrix and AUROC.
//
//   auto acc = train::metrics::accuracy();
//   acc->update(logits, targets);        // logits [N, C], targets [N] class indices
//   double a = acc->value();             // over everything seen since reset()
//
// Metrics accumulate over an epoch; the Learner calls reset() at the start of each split of
// each epoch and reads value() after every step (the running value) and at the end.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::train {

/// A metric accumulated over the batches of one epoch.
class Metric {
 public:
  virtual ~Metric() = default;
  /// Short name used in events, CSV columns and the dashboard ("accuracy", "f1_macro").
  virtual std::string name() const = 0;
  /// Forgets everything seen.
  virtual void reset() = 0;
  /// Adds one batch: the model's output (logits [N, C] or, for binary AUROC, scores [N]) and the
  /// targets ([N] class indices).
  virtual void update(const Tensor& output, const Tensor& target) = 0;
  /// The value over everything seen since reset() (NaN when nothing was seen).
  virtual double value() const = 0;
  /// Whether a larger value is better (used when a metric is monitored).
  virtual bool higher_is_better() const { return true; }
};

/// Counts of (true class, predicted class) pairs.
class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int64_t num_classes = 0);
  int64_t num_classes() const { return n_; }
  /// Adds pairs; every entry must be in [0, num_classes).
  void add(const std::vector<int64_t>& targets, const std::vector<int64_t>& predictions);
  /// Adds argmax(output, 1) against targets (output [N, C], targets [N]).
  void add(const Tensor& output, const Tensor& target);
  void reset();
  /// Items with true class t predicted as p.
  int64_t at(int64_t t, int64_t p) const { return counts_[static_cast<size_t>(t * n_ + p)]; }
  int64_t total() const;
  double accuracy() const;
  /// Per-class values; a class with a zero denominator scores 0 (sklearn's zero_division=0).
  double precision(int64_t c) const;
  double recall(int64_t c) const;
  double f1(int64_t c) const;
  /// (1 + beta^2) p r / (beta^2 p + r): recall weighs beta times as much as precision.
  double fbeta(int64_t c, double beta) const;
  /// Unweighted means over classes (sklearn's average="macro").
  double macro_precision() const;
  double macro_recall() const;
  double macro_f1() const;
  double macro_fbeta(double beta) const;
  /// A text table (rows: true class, columns: predicted class).
  std::string str() const;

 private:
  int64_t n_;
  std::vector<int64_t> counts_;
};

/// Average precision of `scores` for binary `labels` (0 or 1): sum over thresholds of
/// (R_k - R_{k-1}) P_k, tied scores one threshold (sklearn's average_precision_score). NaN
/// without positives.
double average_precision(const std::vector<double>& scores, const std::vector<int64_t>& labels);
/// Area under the ROC curve of `scores` for binary `labels` (0 or 1), ties counted half
/// (sklearn's roc_auc_score). NaN when only one class is present.
double auroc_binary(const std::vector<double>& scores, const std::vector<int64_t>& labels);
/// One-vs-rest macro AUROC: scores [N * C] row-major (probabilities or logits), labels [N].
/// Classes absent from labels are skipped; NaN when none can be scored.
double auroc_ovr_macro(const std::vector<double>& scores, const std::vector<int64_t>& labels, int64_t num_classes);
/// Fraction of rows whose target is among the k highest of `scores` [N * C] (ties broken
/// towards the lower index, as torch.topk).
double topk_accuracy(const std::vector<double>& scores, const std::vector<int64_t>& labels, int64_t num_classes,
                     int64_t k);

namespace metrics {

/// Which average of a per-class metric to report.
enum class Average { Macro, PerClass };

/// Fraction of argmax(output, 1) == target.
std::shared_ptr<Metric> accuracy();
/// Fraction of targets among the top k outputs ("top5_accuracy").
std::shared_ptr<Metric> top_k_accuracy(int64_t k);
/// Macro precision / recall / F1 over num_classes ("precision_macro"...). With
/// Average::PerClass and `cls`, the value of class `cls` ("f1_3").
std::shared_ptr<Metric> precision(int64_t num_classes, Average avg = Average::Macro, int64_t cls = 0);
std::shared_ptr<Metric> recall(int64_t num_classes, Average avg = Average::Macro, int64_t cls = 0);
std::shared_ptr<Metric> f1(int64_t num_classes, Average avg = Average::Macro, int64_t cls = 0);
/// Macro (or one class's) F-beta ("fbeta0.5_macro", "fbeta2_3"); beta > 0.
std::shared_ptr<Metric> fbeta(int64_t num_classes, double beta, Average avg = Average::Macro, int64_t cls = 0);
/// Area under the precision-recall curve of binary scores: [N] scores or [N, 2] logits (the
/// score is column 1) against 0/1 targets (sklearn's average_precision_score).
std::shared_ptr<Metric> average_precision();
/// Multilabel outputs: logits [N, L] against 0/1 targets [N, L]; a label is predicted where
/// sigmoid(logit) > threshold. The fraction of labels predicted right (1 - Hamming loss).
std::shared_ptr<Metric> hamming_score(double threshold = 0.5);
/// AUROC: binary when num_classes == 2 and the output is [N] scores or [N, 2] logits (the
/// score is column 1), one-vs-rest macro otherwise (softmax of the logits).
std::shared_ptr<Metric> auroc(int64_t num_classes);
/// A metric holding a confusion matrix (value(): accuracy); read it with matrix().
class ConfusionMatrixMetric : public Metric {
 public:
  explicit ConfusionMatrixMetric(int64_t num_classes) : cm_(num_classes) {}
  std::string name() const override { return "confusion_accuracy"; }
  void reset() override { cm_.reset(); }
  void update(const Tensor& output, const Tensor& target) override { cm_.add(output, target); }
  double value() const override { return cm_.accuracy(); }
  const ConfusionMatrix& matrix() const { return cm_; }

 private:
  ConfusionMatrix cm_;
};
std::shared_ptr<ConfusionMatrixMetric> confusion_matrix(int64_t num_classes);

}  // namespace metrics

/// Resource use of this process.
struct ProcessStats {
  double cpu_seconds = 0;   ///< user + system CPU time (getrusage)
  int64_t rss_bytes = 0;    ///< resident set size (/proc/self/statm)
  int64_t kiln_in_use = 0;  ///< bytes in live tensors on the CPU (kiln::memory_stats)
  int64_t kiln_peak = 0;    ///< peak of kiln_in_use
};
/// Reads the current process statistics.
ProcessStats process_stats();

/// Throughput and time left, from an exponential moving average of step durations.
class Speedometer {
 public:
  /// Records that `items` were processed in `seconds`.
  void add(int64_t items, double seconds);
  /// Items per second (0 before the first add).
  double items_per_second() const;
  /// Seconds to process `items_left` more items at the current rate (0 when unknown).
  double eta_seconds(int64_t items_left) const;

 private:
  double rate_ = 0;
  bool started_ = false;
};

}  // namespace kiln::train
