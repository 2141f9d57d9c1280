// SPDX-License-Identifier: MIT OR Apache-2.0
// A character-level causal language model trained on Debian's fortunes (the `fortunes` package,
// installed by scripts/install-deps.sh), then sampled with temperature, top-k and top-p, with and
// without the key/value cache (docs/generation.md).
//
//   text-generation [--quick] [--steps N] [--seed S]
//
// Prints the validation perplexity before and after training, a sample, and the generation speed
// in tokens per second with and without the cache. --quick trains briefly and checks that the
// perplexity fell and that the cache gives the same tokens as the full forward ("passed").
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
#include <kiln/text.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;
namespace F = kiln::nn::functional;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// The records of some fortune files, each followed by a blank line: every 10th record is
/// validation, the others training.
std::pair<std::string, std::string> corpus(const std::vector<std::string>& files) {
  std::string train, valid;
  size_t k = 0;
  for (const std::string& f : files) {
    data::DatasetPtr<std::string> recs = text::records(std::string(text::kFortunesDir) + "/" + f);
    for (size_t i = 0; i < recs->size(); ++i, ++k) (k % 10 == 9 ? valid : train) += recs->get(i) + "\n\n";
  }
  return {train, valid};
}

/// Mean cross-entropy of next-token prediction over consecutive windows of `len` + 1 tokens.
double mean_loss(nn::TransformerDecoderOnly& lm, const std::vector<int64_t>& ids, int64_t len, const Device& d) {
  NoGradGuard ng;
  double total = 0;
  int64_t n = 0;
  for (size_t s = 0; s + static_cast<size_t>(len) + 1 <= ids.size(); s += static_cast<size_t>(len)) {
    std::vector<int64_t> w(ids.begin() + static_cast<std::ptrdiff_t>(s),
                           ids.begin() + static_cast<std::ptrdiff_t>(s) + len + 1);
    Tensor t = tensor<int64_t>(w, {1, len + 1}).to(d);
    Tensor logits = lm(t.narrow(1, 0, len));
    total += F::cross_entropy(logits.reshape({len, -1}), t.narrow(1, 1, len).reshape({len})).item<double>() *
             static_cast<double>(len);
    n += len;
  }
  return total / static_cast<double>(std::max<int64_t>(n, 1));
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int64_t steps = 1500;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
      steps = 60;
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoll(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--steps N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  try {
    manual_seed(seed);
    const Device d = Device::cpu().autodiff();
    auto [train_text, valid_text] = corpus(quick ? std::vector<std::string>{"computers"}
                                                 : std::vector<std::string>{"computers", "science", "literature"});
    const text::CharTokenizer tok = text::CharTokenizer::train({train_text});
    const std::vector<int64_t> train_ids = tok.encode(train_text), valid_ids = tok.encode(valid_text);
    // Windows of `len` characters: the model is trained on (and samples within) that context.
    const int64_t len = quick ? 64 : 128, batch = 16, vocab = tok.vocab_size();
    std::printf("corpus: %zu training and %zu validation characters, %lld symbols\n", train_ids.size(),
                valid_ids.size(), static_cast<long long>(vocab));

    nn::TransformerDecoderOnly lm({.vocab_size = vocab, .d_model = 96, .nhead = 4, .num_layers = 2}, d);
    optim::AdamW opt(lm.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
    const std::vector<int64_t> valid_eval(
        valid_ids.begin(), valid_ids.begin() + std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(valid_ids.size()),
                                                                        quick ? 2048 : 20000));
    lm.eval();
    const double ppl0 = std::exp(mean_loss(lm, valid_eval, len, d));
    lm.train();
    auto t0 = Clock::now();
    const auto last_start = static_cast<int64_t>(train_ids.size()) - len - 1;
    for (int64_t step = 1; step <= steps; ++step) {
      Tensor starts = randint(0, last_start, {batch}, {.dtype = i64});
      std::vector<int64_t> rows;
      for (int64_t s : starts.to_vector<int64_t>())
        rows.insert(rows.end(), train_ids.begin() + s, train_ids.begin() + s + len + 1);
      Tensor w = tensor<int64_t>(rows, {batch, len + 1}).to(d);
      Tensor logits = lm(w.narrow(1, 0, len));
      Tensor loss = F::cross_entropy(logits.reshape({batch * len, vocab}), w.narrow(1, 1, len).reshape({batch * len}));
      opt.step(loss.backward());
      if (step % (quick ? 20 : 250) == 0)
        std::printf("step %lld: training loss %.3f (%.1f s)\n", static_cast<long long>(step), loss.item<double>(),
                    seconds_since(t0));
    }
    lm.eval();
    const double ppl = std::exp(mean_loss(lm, valid_eval, len, d));
    std::printf("validation perplexity per character: %.2f before training, %.2f after %lld steps\n", ppl0, ppl,
                static_cast<long long>(steps));

    // Sampling, with and without the cache: the same seed gives the same tokens.
    const std::vector<int64_t> prompt_ids = tok.encode("The computer ");
    Tensor prompt = tensor<int64_t>(prompt_ids, {1, static_cast<int64_t>(prompt_ids.size())});
    nn::GenerateOptions o{.max_new_tokens = len - static_cast<int64_t>(prompt_ids.size()),
                          .sampling = {.temperature = 0.8, .top_k = 20, .top_p = 0.95},
                          .seed = seed};
    auto t1 = Clock::now();
    Tensor with_cache = nn::generate(lm, prompt, o);
    const double s_cache = seconds_since(t1);
    o.use_cache = false;
    t1 = Clock::now();
    Tensor without = nn::generate(lm, prompt, o);
    const double s_full = seconds_since(t1);
    const bool same = with_cache.to_vector<int64_t>() == without.to_vector<int64_t>();
    const double n_new = static_cast<double>(o.max_new_tokens);
    std::printf("sample: %s\n", tok.decode(with_cache.reshape({-1}).to_vector<int64_t>()).c_str());
    std::printf("generation: %.0f tokens/s with the cache, %.0f without (%.1fx); same tokens: %s\n", n_new / s_cache,
                n_new / s_full, s_full / s_cache, same ? "yes" : "no");
    const bool ok = same && ppl < ppl0 && std::isfinite(ppl);
    std::printf("%s\n", ok ? "passed" : "FAILED");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "text-generation: %s\n", e.what());
    return 1;
  }
}
