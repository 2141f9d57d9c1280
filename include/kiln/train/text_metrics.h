// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Metrics of text models: character and word error rates (jiwer's definitions), corpus BLEU
// (Papineni et al., NLTK's corpus_bleu without smoothing), ROUGE-L (the rouge-score package's
// LCS F-measure) and perplexity, on token sequences or whitespace-split text.
//
//   double w = train::metrics::word_error_rate({"the cat sat"}, {"the cat sat down"});  // 0.25
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/train/metrics.h"

namespace kiln::train::metrics {

/// Token edits (substitutions, deletions, insertions) turning hypothesis into reference.
int64_t edit_distance(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);

/// Word error rate over a corpus: total word edits / total reference words (jiwer.wer). Texts
/// are split at whitespace; references and hypotheses pair up by index.
double word_error_rate(const std::vector<std::string>& references, const std::vector<std::string>& hypotheses);
/// Character error rate over a corpus (jiwer.cer): character edits / reference characters.
double char_error_rate(const std::vector<std::string>& references, const std::vector<std::string>& hypotheses);

/// Corpus BLEU with up to max_n-grams, uniform weights, clipped counts and the brevity
/// penalty; each hypothesis (tokens) has one or more references. 0 when an n-gram order has
/// no match (no smoothing, as NLTK's default).
double corpus_bleu(const std::vector<std::vector<std::vector<std::string>>>& references,
                   const std::vector<std::vector<std::string>>& hypotheses, int max_n = 4);

/// ROUGE-L precision, recall and F-measure of one hypothesis against one reference (tokens).
struct RougeScore {
  double precision = 0, recall = 0, f = 0;
};
RougeScore rouge_l(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);

/// Text split at runs of whitespace.
std::vector<std::string> split_words(const std::string& text);

/// Perplexity for the Learner: exp of the mean cross-entropy of logits [N, V] (or [N, T, V])
/// against token ids [N] (or [N, T]); ids equal to ignore_index are left out.
std::shared_ptr<Metric> perplexity(int64_t ignore_index = -100);

}  // namespace kiln::train::metrics
