// SPDX-License-Identifier: MIT OR Apache-2.0
// Fortune-cookie classification: which file of the Debian package `fortunes` (computers, food,
// love, politics, science, sports) a fortune comes from, with a SentencePiece tokenizer trained
// on the training split and a small transformer encoder. Reports accuracy and macro F1 on a
// held-out stratified split (the same split as baseline.py's bag-of-words model).
//
//   text-classification [--quick] [--epochs N] [--write-split DIR]
#include <kiln/data/loader.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim/lr_scheduler.h>
#include <kiln/text.h>
#include <kiln/train/metrics.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {
const std::vector<std::string> kCategories = {"computers", "food", "love", "politics", "science", "sports"};

/// Embedding + sinusoidal positions, a transformer encoder, mean pooling over the real tokens,
/// a linear classifier.
struct Classifier : nn::Module {
  nn::Embedding embed;
  nn::PositionalEncoding pos;
  nn::TransformerEncoder encoder;
  nn::Linear head;
  int64_t d_model;
  Classifier(int64_t vocab, int64_t classes, int64_t d, int64_t layers, const Device& dev)
      : embed({.num_embeddings = vocab, .embedding_dim = d, .padding_idx = 0}, dev),
        pos({.d_model = d, .max_len = 512}, dev),
        encoder({.layer = {.d_model = d, .nhead = 4, .dim_feedforward = 2 * d, .dropout = 0.1, .batch_first = true},
                 .num_layers = layers},
                dev),
        head({.in_features = d, .out_features = classes}, dev),
        d_model(d) {}
  /// ids [N, L] i64 padded with 0 -> logits [N, classes].
  Tensor forward(const Tensor& ids) {
    Tensor pad = text::padding_mask(ids, 0);
    Tensor h = pos(embed(ids).mul(std::sqrt(static_cast<double>(d_model))));
    h = encoder(h, {}, pad);
    Tensor keep = ids.ne(0).to(h.dtype()).unsqueeze(-1);
    Tensor pooled = h.mul(keep).sum({1}).div(keep.sum({1}).clamp_min(1.0));
    return head(F::dropout(pooled, 0.1, is_training()));
  }
  KILN_VISIT(Classifier, embed, pos, encoder, head)
};

/// Writes items as "label<TAB>text" lines, newlines and tabs escaped (for baseline.py).
void write_split(const std::string& path, const data::DatasetPtr<text::TextItem>& ds) {
  std::ofstream out(path);
  KILN_CHECK(out.good(), "text-classification", "cannot write '" << path << "'");
  for (size_t i = 0; i < ds->size(); ++i) {
    text::TextItem it = ds->get(i);
    std::string t;
    for (char c : it.text) t += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
    out << it.label << '\t' << t << '\n';
  }
}

/// Accuracy and macro F1 of the model on a split.
train::ConfusionMatrix evaluate(Classifier& net, const data::DatasetPtr<text::TextItem>& ds,
                                const text::TokenizerPtr& tok, int64_t max_len, const Device& device) {
  net.eval();
  NoGradGuard no_grad;
  data::DataLoader<text::TextItem> loader(ds, {.batch_size = 128, .shuffle = false},
                                          text::text_classification_batcher(tok, {.max_length = max_len}));
  train::ConfusionMatrix cm(static_cast<int64_t>(kCategories.size()));
  loader.start_epoch(0);
  while (auto b = loader.next()) cm.add(net.forward(b->input.to(device)), b->target);
  net.train();
  return cm;
}
}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int epochs = 10;
  std::string split_dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) epochs = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--write-split") == 0 && i + 1 < argc) split_dir = argv[++i];
  }
  try {
    manual_seed(0);
    auto t0 = std::chrono::steady_clock::now();
    auto corpus = text::fortunes(kCategories);
    auto [train_idx, test_idx] = text::stratified_split(corpus->labels(), 0.2, 7);
    data::DatasetPtr<text::TextItem> all = corpus;
    auto train_ds = data::to_memory(data::select(all, train_idx));
    auto test_ds = data::to_memory(data::select(all, test_idx));
    if (!split_dir.empty()) {
      write_split(split_dir + "/train.tsv", train_ds);
      write_split(split_dir + "/test.tsv", test_ds);
    }
    int64_t max_len = 128;
    if (quick) {  // a smoke test of every step (the ctest): a slice of the data, one epoch
      epochs = 1;
      max_len = 32;
      train_ds = data::take(data::shuffle(train_ds, 1), 256);
      test_ds = data::take(data::shuffle(test_ds, 1), 128);
    }
    std::printf("fortunes: %zu train, %zu test items in %zu categories\n", train_ds->size(), test_ds->size(),
                kCategories.size());

    // The tokenizer sees the training split only.
    std::vector<std::string> texts;
    for (size_t i = 0; i < train_ds->size(); ++i) texts.push_back(train_ds->get(i).text);
    text::TokenizerPtr tok;
    if (text::sentencepiece_available()) {
      tok = std::make_shared<text::SentencePieceTokenizer>(text::SentencePieceTokenizer::train(
          texts, {.model_type = "unigram", .vocab_size = quick ? 500 : 2000, .hard_vocab_limit = false}));
    } else {
      tok = std::make_shared<text::CharTokenizer>(text::CharTokenizer::train(texts, {.min_frequency = 2}));
    }
    auto since = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    std::printf("tokenizer: vocabulary %lld (%.1f s)\n", static_cast<long long>(tok->vocab_size()), since());

    const Device device = Device::cpu().autodiff();
    Classifier net(tok->vocab_size(), static_cast<int64_t>(kCategories.size()), 64, 2, device);
    text::BucketBatchSource batches(train_ds, tok, {.batch_size = 32, .seed = 1}, {.max_length = max_len});
    // Class weights N / (C * n_c): the small categories count as much as the large ones (macro F1).
    std::vector<float> weights(kCategories.size(), 0.f);
    for (size_t i = 0; i < train_ds->size(); ++i) weights[static_cast<size_t>(train_ds->get(i).label)] += 1.f;
    for (float& w : weights) {
      w = static_cast<float>(train_ds->size()) / (static_cast<float>(weights.size()) * std::max(w, 1.f));
    }
    const Tensor class_weight = tensor(weights, Shape{static_cast<int64_t>(weights.size())}, device);
    optim::AdamW opt(net.parameters(), {.lr = 2e-3, .weight_decay = 0.05});
    optim::lr_scheduler::CosineAnnealingLR sched(opt, epochs * static_cast<int64_t>(batches.num_batches()));

    for (int epoch = 0; epoch < epochs; ++epoch) {
      batches.start_epoch(static_cast<uint64_t>(epoch));
      double loss_sum = 0;
      int64_t seen = 0;
      while (auto b = batches.next()) {
        Tensor logits = net.forward(b->input.to(device));
        Tensor loss = F::cross_entropy(logits, b->target.to(device), {.weight = class_weight});
        opt.step(loss.backward());
        sched.step();
        loss_sum += loss.item<double>() * static_cast<double>(b->input.size(0));
        seen += b->input.size(0);
      }
      std::printf("epoch %d: loss %.4f (%.1f s)\n", epoch + 1, loss_sum / static_cast<double>(seen), since());
    }
    train::ConfusionMatrix cm = evaluate(net, test_ds, tok, max_len, device);
    const double secs = since();
    std::printf("test accuracy: %.2f%%  macro F1: %.4f  (%lld fortunes, %.1f s)\n", 100.0 * cm.accuracy(),
                cm.macro_f1(), static_cast<long long>(cm.total()), secs);
    for (size_t c = 0; c < kCategories.size(); ++c) {
      std::printf("  %-10s F1 %.3f\n", kCategories[c].c_str(), cm.f1(static_cast<int64_t>(c)));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
