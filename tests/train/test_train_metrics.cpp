// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::train metrics against scikit-learn (metrics_fixture.inc, made by make_metrics_fixture.py)
// and small hand-derived cases.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/train.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace {
#include "train/metrics_fixture.inc"
}

using namespace kiln;
using namespace kiln::train;

namespace {

std::vector<double> logits_vec() { return {std::begin(kLogits), std::end(kLogits)}; }
std::vector<int64_t> labels_vec() { return {std::begin(kLabels), std::end(kLabels)}; }
Tensor logits_tensor() { return kiln::tensor(std::vector<float>(std::begin(kLogits), std::end(kLogits)), {kN, kC}); }
Tensor labels_tensor() { return kiln::tensor(labels_vec(), {kN}); }

}  // namespace

TEST(TrainMetrics, ConfusionMatrixMatchesSklearn) {
  ConfusionMatrix cm(kC);
  cm.add(logits_tensor(), labels_tensor());
  for (int t = 0; t < kC; ++t)
    for (int p = 0; p < kC; ++p) EXPECT_EQ(cm.at(t, p), kConfusion[t * kC + p]) << t << "," << p;
  EXPECT_EQ(cm.total(), kN);
  EXPECT_DOUBLE_EQ(cm.accuracy(), kAccuracy);
  EXPECT_DOUBLE_EQ(cm.macro_precision(), kPrecisionMacro);
  EXPECT_DOUBLE_EQ(cm.macro_recall(), kRecallMacro);
  EXPECT_DOUBLE_EQ(cm.macro_f1(), kF1Macro);
  for (int c = 0; c < kC; ++c) {
    EXPECT_DOUBLE_EQ(cm.precision(c), kPrecisionPerClass[c]);
    EXPECT_DOUBLE_EQ(cm.recall(c), kRecallPerClass[c]);
    EXPECT_NEAR(cm.f1(c), kF1PerClass[c], 1e-15);
  }
  EXPECT_NE(cm.str().find("true\\pred"), std::string::npos);
}

TEST(TrainMetrics, MetricObjectsAccumulateOverBatches) {
  // Fed in three uneven batches, the epoch values equal sklearn's over the whole set.
  auto acc = metrics::accuracy();
  auto top2 = metrics::top_k_accuracy(2);
  auto p = metrics::precision(kC), r = metrics::recall(kC), f = metrics::f1(kC);
  auto f1c = metrics::f1(kC, metrics::Average::PerClass, 2);
  auto au = metrics::auroc(kC);
  auto cmm = metrics::confusion_matrix(kC);
  std::vector<std::shared_ptr<Metric>> all{acc, top2, p, r, f, f1c, au, cmm};
  for (auto& m : all) {
    m->reset();
    EXPECT_TRUE(std::isnan(m->value())) << m->name();
  }
  Tensor x = logits_tensor(), y = labels_tensor();
  for (auto [a, b] : {std::pair{0, 7}, std::pair{7, 30}, std::pair{30, kN}})
    for (auto& m : all) m->update(x.slice(0, a, b), y.slice(0, a, b));
  EXPECT_DOUBLE_EQ(acc->value(), kAccuracy);
  EXPECT_DOUBLE_EQ(top2->value(), kTop2);
  EXPECT_DOUBLE_EQ(p->value(), kPrecisionMacro);
  EXPECT_DOUBLE_EQ(r->value(), kRecallMacro);
  EXPECT_DOUBLE_EQ(f->value(), kF1Macro);
  EXPECT_NEAR(f1c->value(), kF1PerClass[2], 1e-15);
  EXPECT_NEAR(au->value(), kAurocOvr, 1e-12);
  EXPECT_DOUBLE_EQ(cmm->value(), kAccuracy);
  EXPECT_EQ(cmm->matrix().at(0, 0), kConfusion[0]);
  EXPECT_EQ(acc->name(), "accuracy");
  EXPECT_EQ(top2->name(), "top2_accuracy");
  EXPECT_EQ(f->name(), "f1_macro");
  EXPECT_EQ(f1c->name(), "f1_2");
  EXPECT_EQ(au->name(), "auroc");
}

TEST(TrainMetrics, TopKMatchesSklearn) {
  EXPECT_DOUBLE_EQ(topk_accuracy(logits_vec(), labels_vec(), kC, 1), kTop1);
  EXPECT_DOUBLE_EQ(topk_accuracy(logits_vec(), labels_vec(), kC, 2), kTop2);
  EXPECT_DOUBLE_EQ(topk_accuracy(logits_vec(), labels_vec(), kC, 3), kTop3);
  EXPECT_DOUBLE_EQ(topk_accuracy(logits_vec(), labels_vec(), kC, 4), 1.0);
}

TEST(TrainMetrics, AurocMatchesSklearn) {
  std::vector<double> s(std::begin(kBinScores), std::end(kBinScores));
  std::vector<int64_t> l(std::begin(kBinLabels), std::end(kBinLabels));
  EXPECT_NEAR(auroc_binary(s, l), kAurocBinary, 1e-12);
  // Binary metric object from [N] scores.
  auto m = metrics::auroc(2);
  m->update(kiln::tensor(std::vector<float>(s.begin(), s.end()), {kN}), kiln::tensor(l, {kN}));
  EXPECT_NEAR(m->value(), kAurocBinary, 1e-6);  // f32 scores: same order, same ties
  // Hand-derived: scores 0.1 0.4 0.35 0.8 with labels 0 0 1 1 -> 0.75 (sklearn's doc example).
  EXPECT_DOUBLE_EQ(auroc_binary({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(auroc_binary({0.5, 0.5}, {0, 1}), 0.5);  // a tie counts half
  EXPECT_TRUE(std::isnan(auroc_binary({0.1, 0.2}, {1, 1})));
  EXPECT_ERROR(auroc_binary({0.1}, {2}), "binary labels");
}

TEST(TrainMetrics, FbetaAveragePrecisionAndHammingMatchSklearn) {
  ConfusionMatrix cm(kC);
  cm.add(kiln::tensor(std::vector<double>(std::begin(kLogits), std::end(kLogits)), {kN, kC}),
         kiln::tensor(std::vector<int64_t>(std::begin(kLabels), std::end(kLabels)), {kN}));
  EXPECT_NEAR(cm.macro_fbeta(0.5), kFbetaHalfMacro, 1e-12);
  EXPECT_NEAR(cm.macro_fbeta(2.0), kFbetaTwoMacro, 1e-12);
  for (int64_t c = 0; c < kC; ++c) {
    EXPECT_NEAR(cm.fbeta(c, 0.5), kFbetaHalfPerClass[c], 1e-12);
    EXPECT_NEAR(cm.fbeta(c, 2.0), kFbetaTwoPerClass[c], 1e-12);
  }
  auto fb = metrics::fbeta(kC, 2.0);
  fb->update(kiln::tensor(std::vector<double>(std::begin(kLogits), std::end(kLogits)), {kN, kC}),
             kiln::tensor(std::vector<int64_t>(std::begin(kLabels), std::end(kLabels)), {kN}));
  EXPECT_NEAR(fb->value(), kFbetaTwoMacro, 1e-12);
  EXPECT_EQ(fb->name(), "fbeta2_macro");
  std::vector<double> s(std::begin(kBinScores), std::end(kBinScores));
  std::vector<int64_t> l(std::begin(kBinLabels), std::end(kBinLabels));
  EXPECT_NEAR(average_precision(s, l), kAvgPrecision, 1e-12);
  auto ap = metrics::average_precision();
  ap->update(kiln::tensor(s, {kN}), kiln::tensor(l, {kN}));
  EXPECT_NEAR(ap->value(), kAvgPrecision, 1e-12);
  auto h = metrics::hamming_score();
  const int64_t half = kN / 2;
  kiln::Tensor ml = kiln::tensor(std::vector<double>(std::begin(kMlLogits), std::end(kMlLogits)), {kN, 5});
  kiln::Tensor mt = kiln::tensor(std::vector<int64_t>(std::begin(kMlTargets), std::end(kMlTargets)), {kN, 5});
  h->update(ml.narrow(0, 0, half), mt.narrow(0, 0, half));
  h->update(ml.narrow(0, half, kN - half), mt.narrow(0, half, kN - half));
  EXPECT_NEAR(h->value(), kHammingScore, 1e-12);
  EXPECT_THROW(metrics::fbeta(kC, 0.0), kiln::Error);
  EXPECT_THROW(h->update(ml, mt.narrow(1, 0, 2)), kiln::Error);
  EXPECT_TRUE(std::isnan(average_precision({0.3, 0.2}, {0, 0})));
}

TEST(TrainMetrics, HandDerivedSmallCase) {
  // targets 0 0 1 1 2, predictions 0 1 1 1 0: precision (1/2, 2/3, 0), recall (1/2, 1, 0).
  ConfusionMatrix cm(3);
  cm.add(std::vector<int64_t>{0, 0, 1, 1, 2}, std::vector<int64_t>{0, 1, 1, 1, 0});
  EXPECT_DOUBLE_EQ(cm.precision(0), 0.5);
  EXPECT_DOUBLE_EQ(cm.precision(1), 2.0 / 3);
  EXPECT_DOUBLE_EQ(cm.precision(2), 0.0);
  EXPECT_DOUBLE_EQ(cm.recall(1), 1.0);
  EXPECT_DOUBLE_EQ(cm.f1(1), 0.8);
  EXPECT_DOUBLE_EQ(cm.accuracy(), 0.6);
  EXPECT_DOUBLE_EQ(cm.macro_f1(), (0.5 + 0.8 + 0.0) / 3);
}

TEST(TrainMetrics, BadInputsThrow) {
  ConfusionMatrix cm(3);
  EXPECT_ERROR(cm.add(std::vector<int64_t>{0, 3}, std::vector<int64_t>{0, 1}), "out of range");
  EXPECT_ERROR(cm.add(std::vector<int64_t>{0}, std::vector<int64_t>{0, 1}), "differ in length");
  EXPECT_ERROR(ConfusionMatrix(-1), "num_classes");
  auto acc = metrics::accuracy();
  EXPECT_ERROR(acc->update(zeros({4, 3}), zeros({3}, {.dtype = i64})), "target must be [N]");
  EXPECT_ERROR(metrics::top_k_accuracy(0), "k must be");
  EXPECT_ERROR(metrics::f1(3, metrics::Average::PerClass, 5), "out of range");
}

TEST(TrainMetrics, SpeedometerAndEta) {
  Speedometer s;
  EXPECT_EQ(s.items_per_second(), 0.0);
  EXPECT_EQ(s.eta_seconds(100), 0.0);
  s.add(100, 1.0);  // 100/s
  EXPECT_DOUBLE_EQ(s.items_per_second(), 100.0);
  s.add(200, 1.0);  // EMA: 0.9 * 100 + 0.1 * 200
  EXPECT_DOUBLE_EQ(s.items_per_second(), 110.0);
  EXPECT_DOUBLE_EQ(s.eta_seconds(220), 2.0);
}

TEST(TrainMetrics, ProcessStats) {
  ProcessStats a = process_stats();
  EXPECT_GT(a.rss_bytes, 1 << 20);
  volatile double sink = 0;
  for (int i = 0; i < 20000000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  Tensor big = zeros({1 << 20});  // 4 MB held by the CPU allocator
  ProcessStats b = process_stats();
  EXPECT_GT(b.cpu_seconds, a.cpu_seconds);
  EXPECT_GE(b.kiln_in_use, a.kiln_in_use + (4 << 20) - 4096);
  EXPECT_EQ(b.kiln_in_use, memory_stats(Device::cpu()).in_use);
  EXPECT_GT(big.numel(), 0);
}
