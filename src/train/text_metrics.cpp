// SPDX-License-Identifier: MIT OR Apache-2.0
// Text metrics (kiln/train/text_metrics.h): edit distances, BLEU, ROUGE-L and perplexity.
#include "kiln/train/text_metrics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "kiln/error.h"
#include "kiln/nn/loss.h"
#include "kiln/ops.h"

namespace kiln::train::metrics {

namespace {

/// Levenshtein distance of two sequences (one row of the table at a time).
template <class Seq>
int64_t levenshtein(const Seq& a, const Seq& b) {
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diag = row[0];
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

void check_pairs(const char* op, size_t refs, size_t hyps) {
  KILN_CHECK(refs == hyps, op, "expects as many references as hypotheses, got " << refs << " and " << hyps);
}

using Grams = std::map<std::vector<std::string>, int64_t>;
Grams ngrams(const std::vector<std::string>& t, size_t n) {
  Grams g;
  for (size_t i = 0; i + n <= t.size(); ++i) ++g[std::vector<std::string>(t.begin() + i, t.begin() + i + n)];
  return g;
}

}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

int64_t edit_distance(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis) {
  return levenshtein(reference, hypothesis);
}

double word_error_rate(const std::vector<std::string>& references, const std::vector<std::string>& hypotheses) {
  check_pairs("word_error_rate", references.size(), hypotheses.size());
  int64_t edits = 0, words = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    const auto r = split_words(references[i]);
    edits += levenshtein(r, split_words(hypotheses[i]));
    words += static_cast<int64_t>(r.size());
  }
  KILN_CHECK(words > 0, "word_error_rate", "the references hold no words");
  return static_cast<double>(edits) / static_cast<double>(words);
}

double char_error_rate(const std::vector<std::string>& references, const std::vector<std::string>& hypotheses) {
  check_pairs("char_error_rate", references.size(), hypotheses.size());
  int64_t edits = 0, chars = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    edits += levenshtein(references[i], hypotheses[i]);
    chars += static_cast<int64_t>(references[i].size());
  }
  KILN_CHECK(chars > 0, "char_error_rate", "the references hold no characters");
  return static_cast<double>(edits) / static_cast<double>(chars);
}

double corpus_bleu(const std::vector<std::vector<std::vector<std::string>>>& references,
                   const std::vector<std::vector<std::string>>& hypotheses, int max_n) {
  check_pairs("corpus_bleu", references.size(), hypotheses.size());
  KILN_CHECK(max_n >= 1, "corpus_bleu", "max_n must be at least 1, got " << max_n);
  std::vector<int64_t> matched(static_cast<size_t>(max_n), 0), total(static_cast<size_t>(max_n), 0);
  int64_t hyp_len = 0, ref_len = 0;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    const auto& hyp = hypotheses[s];
    KILN_CHECK(!references[s].empty(), "corpus_bleu", "hypothesis " << s << " has no reference");
    for (size_t n = 1; n <= static_cast<size_t>(max_n); ++n) {
      Grams most;  // the largest count of each n-gram in any one reference
      for (const auto& ref : references[s])
        for (const auto& [g, c] : ngrams(ref, n)) most[g] = std::max(most[g], c);
      int64_t count = 0;
      for (const auto& [g, c] : ngrams(hyp, n)) {
        auto it = most.find(g);
        matched[n - 1] += std::min(c, it == most.end() ? 0 : it->second);
        count += c;
      }
      total[n - 1] += std::max<int64_t>(count, 1);  // as NLTK: a hypothesis without n-grams counts 1
    }
    // The reference length closest to the hypothesis's (the shorter one on a tie).
    size_t best = references[s][0].size();
    for (const auto& ref : references[s]) {
      const auto d = std::abs(static_cast<int64_t>(ref.size()) - static_cast<int64_t>(hyp.size()));
      const auto bd = std::abs(static_cast<int64_t>(best) - static_cast<int64_t>(hyp.size()));
      if (d < bd || (d == bd && ref.size() < best)) best = ref.size();
    }
    hyp_len += static_cast<int64_t>(hyp.size());
    ref_len += static_cast<int64_t>(best);
  }
  double log_p = 0;
  for (size_t n = 0; n < static_cast<size_t>(max_n); ++n) {
    if (matched[n] == 0) return 0.0;
    log_p += std::log(static_cast<double>(matched[n]) / static_cast<double>(total[n])) / max_n;
  }
  if (hyp_len == 0) return 0.0;
  const double bp =
      hyp_len > ref_len ? 1.0 : std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(hyp_len));
  return bp * std::exp(log_p);
}

RougeScore rouge_l(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis) {
  // Longest common subsequence by dynamic programming.
  std::vector<int64_t> prev(hypothesis.size() + 1, 0), cur(hypothesis.size() + 1, 0);
  for (size_t i = 1; i <= reference.size(); ++i) {
    for (size_t j = 1; j <= hypothesis.size(); ++j)
      cur[j] = reference[i - 1] == hypothesis[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  const auto lcs = static_cast<double>(prev[hypothesis.size()]);
  RougeScore s;
  if (reference.empty() || hypothesis.empty() || lcs == 0) return s;
  s.precision = lcs / static_cast<double>(hypothesis.size());
  s.recall = lcs / static_cast<double>(reference.size());
  s.f = 2 * s.precision * s.recall / (s.precision + s.recall);
  return s;
}

namespace {
class Perplexity : public Metric {
 public:
  explicit Perplexity(int64_t ignore) : ignore_(ignore) {}
  std::string name() const override { return "perplexity"; }
  void reset() override { nll_ = 0, count_ = 0; }
  void update(const Tensor& output, const Tensor& target) override {
    KILN_CHECK(output.defined() && target.defined() && output.dim() == target.dim() + 1 && output.dim() >= 2,
               "perplexity",
               "expects logits [N, V] or [N, T, V] and ids [N] or [N, T], got " << output.shape() << " and "
                                                                                << target.shape());
    const Tensor logits = output.detach().reshape({-1, output.size(-1)}).to(DType::F64);
    const Tensor ids = target.detach().reshape({-1}).to(DType::I64);
    const Tensor kept = (ids != ignore_).sum();
    const Tensor sum = nn::functional::cross_entropy(logits, ids, {.ignore_index = ignore_, .reduction = "sum"});
    nll_ += sum.item<double>();
    count_ += kept.item<int64_t>();
  }
  double value() const override {
    return count_ == 0 ? std::numeric_limits<double>::quiet_NaN() : std::exp(nll_ / static_cast<double>(count_));
  }
  bool higher_is_better() const override { return false; }

 private:
  int64_t ignore_;
  double nll_ = 0;
  int64_t count_ = 0;
};
}  // namespace

std::shared_ptr<Metric> perplexity(int64_t ignore_index) { return std::make_shared<Perplexity>(ignore_index); }

}  // namespace kiln::train::metrics
