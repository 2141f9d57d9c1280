// SPDX-License-Identifier: MIT OR Apache-2.0
// Classification metrics, process statistics and the speedometer (kiln/train/metrics.h).
#include "kiln/train/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Host copies of a batch: scores [N * C] (C = 1 for a 1-d output) and targets [N].
struct HostBatch {
  std::vector<double> scores;
  std::vector<int64_t> targets;
  int64_t n = 0, c = 0;
};

HostBatch to_host(const Tensor& output, const Tensor& target, const char* who) {
  NoGradGuard ng;
  KILN_CHECK(output.defined() && target.defined(), who, "output and target must be defined tensors");
  KILN_CHECK(output.dim() == 1 || output.dim() == 2, who,
             "output must be [N] scores or [N, C] logits, got " + std::to_string(output.dim()) + " dims");
  KILN_CHECK(target.dim() == 1 && target.size(0) == output.size(0), who,
             "target must be [N] class indices matching the output's N = " + std::to_string(output.size(0)));
  HostBatch b;
  b.n = output.size(0);
  b.c = output.dim() == 2 ? output.size(1) : 1;
  b.scores = output.detach().to_vector<double>();
  b.targets = target.detach().to_vector<int64_t>();
  return b;
}

int64_t argmax_row(const double* row, int64_t c) {
  int64_t best = 0;
  for (int64_t j = 1; j < c; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

}  // namespace

// ---- ConfusionMatrix ------------------------------------------------------------------------

ConfusionMatrix::ConfusionMatrix(int64_t num_classes) : n_(num_classes) {
  KILN_CHECK(num_classes >= 0 && num_classes <= 100000, "ConfusionMatrix",
             "num_classes must be in [0, 100000], got " + std::to_string(num_classes));
  counts_.assign(static_cast<size_t>(n_ * n_), 0);
}

void ConfusionMatrix::add(const std::vector<int64_t>& targets, const std::vector<int64_t>& predictions) {
  KILN_CHECK(targets.size() == predictions.size(), "ConfusionMatrix",
             "targets and predictions differ in length: " + std::to_string(targets.size()) + " vs " +
                 std::to_string(predictions.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    int64_t t = targets[i], p = predictions[i];
    KILN_CHECK(t >= 0 && t < n_ && p >= 0 && p < n_, "ConfusionMatrix",
               "class index out of range [0, " + std::to_string(n_) + "): target " + std::to_string(t) +
                   ", prediction " + std::to_string(p));
    ++counts_[static_cast<size_t>(t * n_ + p)];
  }
}

void ConfusionMatrix::add(const Tensor& output, const Tensor& target) {
  HostBatch b = to_host(output, target, "ConfusionMatrix");
  KILN_CHECK(b.c == n_ || (n_ == 2 && b.c == 1), "ConfusionMatrix",
             "output has " + std::to_string(b.c) + " classes, the matrix " + std::to_string(n_));
  std::vector<int64_t> pred(static_cast<size_t>(b.n));
  for (int64_t i = 0; i < b.n; ++i)
    pred[i] = b.c == 1 ? (b.scores[i] > 0 ? 1 : 0) : argmax_row(&b.scores[i * b.c], b.c);
  add(b.targets, pred);
}

void ConfusionMatrix::reset() { std::fill(counts_.begin(), counts_.end(), 0); }

int64_t ConfusionMatrix::total() const { return std::accumulate(counts_.begin(), counts_.end(), int64_t{0}); }

double ConfusionMatrix::accuracy() const {
  int64_t tot = total(), ok = 0;
  for (int64_t c = 0; c < n_; ++c) ok += at(c, c);
  return tot == 0 ? kNaN : static_cast<double>(ok) / static_cast<double>(tot);
}

double ConfusionMatrix::precision(int64_t c) const {
  int64_t col = 0;
  for (int64_t t = 0; t < n_; ++t) col += at(t, c);
  return col == 0 ? 0.0 : static_cast<double>(at(c, c)) / static_cast<double>(col);
}

double ConfusionMatrix::recall(int64_t c) const {
  int64_t row = 0;
  for (int64_t p = 0; p < n_; ++p) row += at(c, p);
  return row == 0 ? 0.0 : static_cast<double>(at(c, c)) / static_cast<double>(row);
}

double ConfusionMatrix::f1(int64_t c) const { return fbeta(c, 1.0); }

double ConfusionMatrix::fbeta(int64_t c, double beta) const {
  const double p = precision(c), r = recall(c), b2 = beta * beta;
  return b2 * p + r == 0 ? 0.0 : (1 + b2) * p * r / (b2 * p + r);
}

double ConfusionMatrix::macro_precision() const {
  if (n_ == 0) return kNaN;
  double s = 0;
  for (int64_t c = 0; c < n_; ++c) s += precision(c);
  return s / static_cast<double>(n_);
}

double ConfusionMatrix::macro_recall() const {
  if (n_ == 0) return kNaN;
  double s = 0;
  for (int64_t c = 0; c < n_; ++c) s += recall(c);
  return s / static_cast<double>(n_);
}

double ConfusionMatrix::macro_f1() const { return macro_fbeta(1.0); }

double ConfusionMatrix::macro_fbeta(double beta) const {
  if (n_ == 0) return kNaN;
  double s = 0;
  for (int64_t c = 0; c < n_; ++c) s += fbeta(c, beta);
  return s / static_cast<double>(n_);
}

std::string ConfusionMatrix::str() const {
  std::string s = "true\\pred";
  char buf[32];
  for (int64_t p = 0; p < n_; ++p) {
    std::snprintf(buf, sizeof buf, "%7lld", static_cast<long long>(p));
    s += buf;
  }
  s += "\n";
  for (int64_t t = 0; t < n_; ++t) {
    std::snprintf(buf, sizeof buf, "%9lld", static_cast<long long>(t));
    s += buf;
    for (int64_t p = 0; p < n_; ++p) {
      std::snprintf(buf, sizeof buf, "%7lld", static_cast<long long>(at(t, p)));
      s += buf;
    }
    s += "\n";
  }
  return s;
}

// ---- AUROC and top-k --------------------------------------------------------------------------

double auroc_binary(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  KILN_CHECK(scores.size() == labels.size(), "auroc", "scores and labels differ in length");
  // Mann-Whitney U with average ranks for ties.
  size_t n = scores.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double pos = 0, neg = 0, rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[idx[j]] == scores[idx[i]]) ++j;
    double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k) {
      KILN_CHECK(labels[idx[k]] == 0 || labels[idx[k]] == 1, "auroc", "binary labels must be 0 or 1");
      if (labels[idx[k]] == 1) rank_sum += avg_rank;
    }
    i = j;
  }
  for (int64_t l : labels) (l == 1 ? pos : neg) += 1;
  if (pos == 0 || neg == 0) return kNaN;
  return (rank_sum - pos * (pos + 1) / 2.0) / (pos * neg);
}

double average_precision(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  KILN_CHECK(scores.size() == labels.size(), "average_precision", "scores and labels differ in length");
  std::vector<size_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  double pos = 0;
  for (int64_t l : labels) {
    KILN_CHECK(l == 0 || l == 1, "average_precision", "binary labels must be 0 or 1, got " << l);
    pos += static_cast<double>(l);
  }
  if (pos == 0) return kNaN;
  double tp = 0, seen = 0, ap = 0, prev_recall = 0;
  for (size_t i = 0; i < idx.size();) {  // one threshold per distinct score, highest first
    size_t j = i;
    for (; j < idx.size() && scores[idx[j]] == scores[idx[i]]; ++j) tp += static_cast<double>(labels[idx[j]]);
    seen += static_cast<double>(j - i);
    const double recall = tp / pos;
    ap += (recall - prev_recall) * (tp / seen);
    prev_recall = recall;
    i = j;
  }
  return ap;
}

double auroc_ovr_macro(const std::vector<double>& scores, const std::vector<int64_t>& labels, int64_t num_classes) {
  KILN_CHECK(num_classes > 0 && scores.size() == labels.size() * static_cast<size_t>(num_classes), "auroc",
             "scores must hold labels.size() * num_classes values");
  double sum = 0;
  int64_t counted = 0;
  std::vector<double> s(labels.size());
  std::vector<int64_t> l(labels.size());
  for (int64_t c = 0; c < num_classes; ++c) {
    for (size_t i = 0; i < labels.size(); ++i) {
      s[i] = scores[i * static_cast<size_t>(num_classes) + static_cast<size_t>(c)];
      l[i] = labels[i] == c ? 1 : 0;
    }
    double a = auroc_binary(s, l);
    if (!std::isnan(a)) {
      sum += a;
      ++counted;
    }
  }
  return counted == 0 ? kNaN : sum / static_cast<double>(counted);
}

double topk_accuracy(const std::vector<double>& scores, const std::vector<int64_t>& labels, int64_t num_classes,
                     int64_t k) {
  KILN_CHECK(num_classes > 0 && scores.size() == labels.size() * static_cast<size_t>(num_classes), "topk_accuracy",
             "scores must hold labels.size() * num_classes values");
  KILN_CHECK(k >= 1, "topk_accuracy", "k must be >= 1, got " + std::to_string(k));
  if (labels.empty()) return kNaN;
  int64_t hits = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double* row = &scores[i * static_cast<size_t>(num_classes)];
    int64_t t = labels[i];
    KILN_CHECK(t >= 0 && t < num_classes, "topk_accuracy", "label out of range: " + std::to_string(t));
    // Rank of the target: classes scoring higher, or equal with a lower index, come first.
    int64_t ahead = 0;
    for (int64_t j = 0; j < num_classes; ++j)
      if (row[j] > row[t] || (row[j] == row[t] && j < t)) ++ahead;
    if (ahead < k) ++hits;
  }
  return static_cast<double>(hits) / static_cast<double>(labels.size());
}

// ---- Metric objects -----------------------------------------------------------------------------

namespace metrics {
namespace {

class Accuracy : public Metric {
 public:
  std::string name() const override { return "accuracy"; }
  void reset() override { ok_ = n_ = 0; }
  void update(const Tensor& output, const Tensor& target) override {
    HostBatch b = to_host(output, target, "accuracy");
    for (int64_t i = 0; i < b.n; ++i) {
      int64_t p = b.c == 1 ? (b.scores[i] > 0 ? 1 : 0) : argmax_row(&b.scores[i * b.c], b.c);
      ok_ += p == b.targets[i];
    }
    n_ += b.n;
  }
  double value() const override { return n_ == 0 ? kNaN : static_cast<double>(ok_) / static_cast<double>(n_); }

 private:
  int64_t ok_ = 0, n_ = 0;
};

class TopK : public Metric {
 public:
  explicit TopK(int64_t k) : k_(k) { KILN_CHECK(k >= 1, "top_k_accuracy", "k must be >= 1"); }
  std::string name() const override { return "top" + std::to_string(k_) + "_accuracy"; }
  void reset() override { hits_ = n_ = 0; }
  void update(const Tensor& output, const Tensor& target) override {
    HostBatch b = to_host(output, target, "top_k_accuracy");
    KILN_CHECK(b.c >= 1 && output.dim() == 2, "top_k_accuracy", "output must be [N, C] logits");
    hits_ += topk_accuracy(b.scores, b.targets, b.c, k_) * static_cast<double>(b.n);
    n_ += b.n;
  }
  double value() const override { return n_ == 0 ? kNaN : hits_ / static_cast<double>(n_); }

 private:
  int64_t k_;
  double hits_ = 0;
  int64_t n_ = 0;
};

enum class Kind { Precision, Recall, F1, FBeta };

class PerClass : public Metric {
 public:
  PerClass(Kind kind, int64_t n, Average avg, int64_t cls, double beta = 1.0)
      : kind_(kind), beta_(beta), avg_(avg), cls_(cls), cm_(n) {
    KILN_CHECK(avg == Average::Macro || (cls >= 0 && cls < n), "metrics",
               "class " + std::to_string(cls) + " out of range [0, " + std::to_string(n) + ")");
    KILN_CHECK(beta > 0, "fbeta", "beta must be positive, got " << beta);
  }
  std::string name() const override {
    std::ostringstream k;
    k << (kind_ == Kind::Precision ? "precision" : kind_ == Kind::Recall ? "recall" : "f");
    if (kind_ == Kind::F1) k << "1";
    if (kind_ == Kind::FBeta) k << "beta" << beta_;
    return k.str() + (avg_ == Average::Macro ? "_macro" : "_" + std::to_string(cls_));
  }
  void reset() override { cm_.reset(); }
  void update(const Tensor& output, const Tensor& target) override { cm_.add(output, target); }
  double value() const override {
    if (cm_.total() == 0) return kNaN;
    const bool macro = avg_ == Average::Macro;
    switch (kind_) {
      case Kind::Precision:
        return macro ? cm_.macro_precision() : cm_.precision(cls_);
      case Kind::Recall:
        return macro ? cm_.macro_recall() : cm_.recall(cls_);
      default:
        return macro ? cm_.macro_fbeta(beta_) : cm_.fbeta(cls_, beta_);
    }
  }

 private:
  Kind kind_;
  double beta_;
  Average avg_;
  int64_t cls_;
  ConfusionMatrix cm_;
};

class Auroc : public Metric {
 public:
  explicit Auroc(int64_t n) : n_(n) { KILN_CHECK(n >= 2, "auroc", "num_classes must be >= 2"); }
  std::string name() const override { return "auroc"; }
  void reset() override {
    scores_.clear();
    labels_.clear();
  }
  void update(const Tensor& output, const Tensor& target) override {
    HostBatch b = to_host(output, target, "auroc");
    KILN_CHECK(b.c == n_ || (n_ == 2 && b.c == 1), "auroc",
               "output has " + std::to_string(b.c) + " columns for " + std::to_string(n_) + " classes");
    for (int64_t i = 0; i < b.n; ++i) {
      const double* row = &b.scores[i * b.c];
      if (n_ == 2) {
        scores_.push_back(b.c == 1 ? row[0] : row[1] - row[0]);  // softmax is monotone in the logit gap
      } else {
        double m = *std::max_element(row, row + b.c), z = 0;
        for (int64_t j = 0; j < b.c; ++j) z += std::exp(row[j] - m);
        for (int64_t j = 0; j < b.c; ++j) scores_.push_back(std::exp(row[j] - m) / z);
      }
      labels_.push_back(b.targets[i]);
    }
  }
  double value() const override {
    if (labels_.empty()) return kNaN;
    return n_ == 2 ? auroc_binary(scores_, labels_) : auroc_ovr_macro(scores_, labels_, n_);
  }

 private:
  int64_t n_;
  std::vector<double> scores_;
  std::vector<int64_t> labels_;
};

class AveragePrecision : public Metric {
 public:
  std::string name() const override { return "average_precision"; }
  void reset() override {
    scores_.clear();
    labels_.clear();
  }
  void update(const Tensor& output, const Tensor& target) override {
    HostBatch b = to_host(output, target, "average_precision");
    KILN_CHECK(b.c <= 2, "average_precision", "expects [N] scores or [N, 2] logits, got " << output.shape());
    for (int64_t i = 0; i < b.n; ++i) {
      const double* row = &b.scores[i * b.c];
      scores_.push_back(b.c == 1 ? row[0] : row[1] - row[0]);  // softmax is monotone in the logit gap
      labels_.push_back(b.targets[i]);
    }
  }
  double value() const override { return labels_.empty() ? kNaN : train::average_precision(scores_, labels_); }

 private:
  std::vector<double> scores_;
  std::vector<int64_t> labels_;
};

class HammingScore : public Metric {
 public:
  explicit HammingScore(double threshold) : threshold_(threshold) {
    KILN_CHECK(threshold > 0 && threshold < 1, "hamming_score", "threshold must be in (0, 1), got " << threshold);
  }
  std::string name() const override { return "hamming_score"; }
  void reset() override { right_ = 0, total_ = 0; }
  void update(const Tensor& output, const Tensor& target) override {
    NoGradGuard ng;
    KILN_CHECK(output.defined() && target.defined() && output.dim() == 2 && output.shape() == target.shape(),
               "hamming_score",
               "expects logits [N, L] and 0/1 targets [N, L], got "
                   << (output.defined() ? to_string(output.shape()) : "undefined") << " and "
                   << (target.defined() ? to_string(target.shape()) : "undefined"));
    const Tensor pred = sigmoid(output.detach().to(DType::F64)) > threshold_;
    right_ += (pred == (target.detach() != 0)).sum().item<int64_t>();
    total_ += output.numel();
  }
  double value() const override {
    return total_ == 0 ? kNaN : static_cast<double>(right_) / static_cast<double>(total_);
  }

 private:
  double threshold_;
  int64_t right_ = 0, total_ = 0;
};

}  // namespace

std::shared_ptr<Metric> average_precision() { return std::make_shared<AveragePrecision>(); }
std::shared_ptr<Metric> hamming_score(double threshold) { return std::make_shared<HammingScore>(threshold); }
std::shared_ptr<Metric> accuracy() { return std::make_shared<Accuracy>(); }
std::shared_ptr<Metric> top_k_accuracy(int64_t k) { return std::make_shared<TopK>(k); }
std::shared_ptr<Metric> precision(int64_t n, Average avg, int64_t cls) {
  return std::make_shared<PerClass>(Kind::Precision, n, avg, cls);
}
std::shared_ptr<Metric> recall(int64_t n, Average avg, int64_t cls) {
  return std::make_shared<PerClass>(Kind::Recall, n, avg, cls);
}
std::shared_ptr<Metric> f1(int64_t n, Average avg, int64_t cls) {
  return std::make_shared<PerClass>(Kind::F1, n, avg, cls);
}
std::shared_ptr<Metric> fbeta(int64_t n, double beta, Average avg, int64_t cls) {
  return std::make_shared<PerClass>(Kind::FBeta, n, avg, cls, beta);
}
std::shared_ptr<Metric> auroc(int64_t n) { return std::make_shared<Auroc>(n); }
std::shared_ptr<ConfusionMatrixMetric> confusion_matrix(int64_t n) {
  return std::make_shared<ConfusionMatrixMetric>(n);
}

}  // namespace metrics

// ---- process statistics and speed ---------------------------------------------------------------

ProcessStats process_stats() {
  ProcessStats s;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    s.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long long size = 0, resident = 0;
    if (std::fscanf(f, "%lld %lld", &size, &resident) == 2) s.rss_bytes = resident * sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
  MemoryStats m = memory_stats(Device::cpu());
  s.kiln_in_use = m.in_use;
  s.kiln_peak = m.peak;
  return s;
}

void Speedometer::add(int64_t items, double seconds) {
  if (seconds <= 0 || items <= 0) return;
  double r = static_cast<double>(items) / seconds;
  rate_ = started_ ? 0.9 * rate_ + 0.1 * r : r;
  started_ = true;
}

double Speedometer::items_per_second() const { return started_ ? rate_ : 0.0; }

double Speedometer::eta_seconds(int64_t items_left) const {
  return started_ && rate_ > 0 ? static_cast<double>(items_left) / rate_ : 0.0;
}

}  // namespace kiln::train
