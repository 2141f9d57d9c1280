// SPDX-License-Identifier: MIT OR Apache-2.0
// Text metrics against their reference implementations: jiwer (word and character error
// rates), NLTK (corpus BLEU) and rouge-score (ROUGE-L), on the random sentence pairs of
// tests/data/text/metrics_reference.json (scripts/gen_text_metrics_reference.py); perplexity
// against exp(cross_entropy).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/train.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "test_util.h"

using namespace kiln;
namespace m = kiln::train::metrics;

namespace {
nlohmann::json reference() {
  std::ifstream f(std::string(KILN_GOLDEN_DIR) + "/../data/text/metrics_reference.json");
  EXPECT_TRUE(f.good()) << "run scripts/gen_text_metrics_reference.py";
  return nlohmann::json::parse(f);
}
}  // namespace

TEST(TextMetrics, MatchJiwerNltkAndRougeScore) {
  const nlohmann::json ref = reference();
  ASSERT_EQ(ref["cases"].size(), 40u);
  for (const auto& c : ref["cases"]) {
    const auto refs = c["references"].get<std::vector<std::string>>();
    const auto hyps = c["hypotheses"].get<std::vector<std::string>>();
    EXPECT_NEAR(m::word_error_rate(refs, hyps), c["wer"].get<double>(), 1e-12);
    EXPECT_NEAR(m::char_error_rate(refs, hyps), c["cer"].get<double>(), 1e-12);
    const auto bleu_refs = c["bleu_references"].get<std::vector<std::vector<std::vector<std::string>>>>();
    std::vector<std::vector<std::string>> bleu_hyps;
    for (const auto& h : hyps) bleu_hyps.push_back(m::split_words(h));
    EXPECT_NEAR(m::corpus_bleu(bleu_refs, bleu_hyps), c["bleu"].get<double>(), 1e-12);
    EXPECT_NEAR(m::corpus_bleu(bleu_refs, bleu_hyps, 2), c["bleu2"].get<double>(), 1e-12);
    for (size_t i = 0; i < refs.size(); ++i) {
      const m::RougeScore r = m::rouge_l(m::split_words(refs[i]), m::split_words(hyps[i]));
      EXPECT_NEAR(r.precision, c["rouge_l"][i][0].get<double>(), 1e-12);
      EXPECT_NEAR(r.recall, c["rouge_l"][i][1].get<double>(), 1e-12);
      EXPECT_NEAR(r.f, c["rouge_l"][i][2].get<double>(), 1e-12);
    }
  }
}

TEST(TextMetrics, EdgeCasesAndErrors) {
  EXPECT_EQ(m::edit_distance({"a", "b", "c"}, {"a", "c", "d"}), 2);
  EXPECT_DOUBLE_EQ(m::word_error_rate({"the cat sat"}, {"the cat sat down"}), 1.0 / 3);
  EXPECT_DOUBLE_EQ(m::char_error_rate({"abc"}, {""}), 1.0);
  EXPECT_EQ(m::rouge_l({}, {"a"}).f, 0.0);
  EXPECT_EQ(m::corpus_bleu({{{"a", "b"}}}, {{"c", "d"}}), 0.0);
  EXPECT_ERROR(m::word_error_rate({"a"}, {}), "as many references");
  EXPECT_ERROR(m::word_error_rate({""}, {"a"}), "no words");
  EXPECT_ERROR(m::corpus_bleu({{}}, {{"a"}}), "no reference");
}

TEST(TextMetrics, PerplexityIsExpOfTheMeanCrossEntropy) {
  manual_seed(2);
  Tensor logits = randn({3, 4, 7});
  Tensor ids = randint(0, 7, {3, 4});
  ids.narrow(1, 3, 1).fill_(-100);  // ignored
  auto p = m::perplexity();
  p->update(logits.narrow(0, 0, 1), ids.narrow(0, 0, 1));
  p->update(logits.narrow(0, 1, 2), ids.narrow(0, 1, 2));
  const double ce = nn::functional::cross_entropy(logits.reshape({-1, 7}), ids.reshape({-1})).item<double>();
  EXPECT_NEAR(p->value(), std::exp(ce), 1e-5 * std::exp(ce));
  EXPECT_FALSE(p->higher_is_better());
  p->reset();
  EXPECT_TRUE(std::isnan(p->value()));
  EXPECT_ERROR(p->update(logits, ids.reshape({-1})), "perplexity");
}
