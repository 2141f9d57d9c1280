// SPDX-License-Identifier: MIT OR Apache-2.0
// Padding, the labelled-text batcher and bucketing by length.
#include "kiln/text/batch.h"

#include <algorithm>
#include <numeric>

#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::text {

PaddedBatch pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id, const PadOptions& o,
                          const Device& device) {
  KILN_CHECK(o.max_length >= 0, "text::pad_sequences", "max_length " << o.max_length << " is negative");
  KILN_CHECK(o.pad_to_multiple_of >= 1, "text::pad_sequences",
             "pad_to_multiple_of " << o.pad_to_multiple_of << " must be >= 1");
  const auto n = static_cast<int64_t>(sequences.size());
  std::vector<int64_t> lengths(sequences.size());
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    int64_t len = static_cast<int64_t>(sequences[i].size());
    if (o.max_length > 0) len = std::min(len, o.max_length);
    lengths[i] = len;
    longest = std::max(longest, len);
  }
  int64_t width = n == 0 ? 0 : std::max<int64_t>(longest, 1);
  width = (width + o.pad_to_multiple_of - 1) / o.pad_to_multiple_of * o.pad_to_multiple_of;
  std::vector<int64_t> ids(static_cast<size_t>(n * width), pad_id);
  std::vector<uint8_t> mask(ids.size(), 1);
  for (size_t i = 0; i < sequences.size(); ++i) {
    const int64_t start = o.pad_left ? width - lengths[i] : 0;
    for (int64_t j = 0; j < lengths[i]; ++j) {
      const auto at = static_cast<size_t>(static_cast<int64_t>(i) * width + start + j);
      ids[at] = sequences[i][static_cast<size_t>(j)];
      mask[at] = 0;
    }
  }
  PaddedBatch b;
  b.ids = tensor(ids, Shape{n, width}, device);
  b.padding_mask = from_blob_copy(mask.data(), mask.size(), Shape{n, width}, DType::Bool, device);
  b.lengths = tensor(lengths, Shape{n}, device);
  return b;
}

Tensor padding_mask(const Tensor& ids, int64_t pad_id) {
  KILN_CHECK(ids.defined(), "text::padding_mask", "undefined ids");
  KILN_CHECK(ids.dtype() == DType::I64 || ids.dtype() == DType::I32, "text::padding_mask",
             "ids must be i64 or i32, got " << ids.dtype() << " " << ids.shape());
  return ids.eq(Scalar(pad_id));
}

data::Batcher<TextItem> text_classification_batcher(TokenizerPtr tokenizer, EncodeOptions encode, PadOptions pad) {
  KILN_CHECK(tokenizer != nullptr, "text::text_classification_batcher", "null tokenizer");
  const int64_t pad_id = tokenizer->special_tokens().pad;
  KILN_CHECK(pad_id >= 0, "text::text_classification_batcher", "the tokenizer has no pad token");
  return [tokenizer, encode, pad, pad_id](std::vector<TextItem> items, const Device& device) {
    std::vector<std::vector<int64_t>> seqs;
    std::vector<int64_t> labels;
    seqs.reserve(items.size());
    for (const TextItem& it : items) {
      seqs.push_back(tokenizer->encode(it.text, encode));
      labels.push_back(it.label);
    }
    PaddedBatch b = pad_sequences(seqs, pad_id, pad, device);
    return data::Batch{b.ids, tensor(labels, Shape{static_cast<int64_t>(labels.size())}, device)};
  };
}

std::vector<std::vector<size_t>> bucket_batches(const std::vector<size_t>& lengths, const BucketOptions& o,
                                                uint64_t epoch) {
  KILN_CHECK(o.batch_size >= 1, "text::bucket_batches", "batch_size must be >= 1");
  KILN_CHECK(o.bucket_multiplier >= 1, "text::bucket_batches", "bucket_multiplier must be >= 1");
  const size_t n = lengths.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (o.shuffle) order = data::permutation(n, data::hash_mix(o.seed, epoch, 0x6275636b));
  const size_t window = o.batch_size * o.bucket_multiplier;
  std::vector<std::vector<size_t>> batches;
  for (size_t w = 0; w < n; w += window) {
    auto first = order.begin() + static_cast<std::ptrdiff_t>(w);
    auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(n, w + window));
    std::stable_sort(first, last, [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
    for (auto it = first; it < last;
         it += std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(o.batch_size), last - it)) {
      auto end = it + std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(o.batch_size), last - it);
      batches.emplace_back(it, end);
    }
  }
  // Only the batch holding the very last window's tail may be short; drop it if asked.
  if (o.drop_last && !batches.empty() && batches.back().size() < o.batch_size) batches.pop_back();
  if (o.shuffle) {
    std::vector<size_t> perm = data::permutation(batches.size(), data::hash_mix(o.seed, epoch, 0x6f72646572));
    std::vector<std::vector<size_t>> shuffled(batches.size());
    for (size_t i = 0; i < perm.size(); ++i) shuffled[i] = std::move(batches[perm[i]]);
    batches = std::move(shuffled);
  }
  return batches;
}

BucketBatchSource::BucketBatchSource(data::DatasetPtr<TextItem> dataset, TokenizerPtr tokenizer,
                                     const BucketOptions& options, EncodeOptions encode, const Device& device)
    : options_(options), device_(device) {
  KILN_CHECK(dataset != nullptr && tokenizer != nullptr, "text::BucketBatchSource", "null dataset or tokenizer");
  pad_ = tokenizer->special_tokens().pad;
  KILN_CHECK(pad_ >= 0, "text::BucketBatchSource", "the tokenizer has no pad token");
  KILN_CHECK(options.batch_size >= 1, "text::BucketBatchSource", "batch_size must be >= 1");
  for (size_t i = 0; i < dataset->size(); ++i) {
    TextItem item = dataset->get(i);
    ids_.push_back(tokenizer->encode(item.text, encode));
    labels_.push_back(item.label);
    lengths_.push_back(ids_.back().size());
  }
}

size_t BucketBatchSource::num_batches() const { return bucket_batches(lengths_, options_, 0).size(); }

size_t BucketBatchSource::num_items() const {
  size_t n = 0;
  for (auto& b : bucket_batches(lengths_, options_, 0)) n += b.size();
  return n;
}

void BucketBatchSource::start_epoch(uint64_t epoch) {
  order_ = bucket_batches(lengths_, options_, epoch);
  cursor_ = 0;
}

std::optional<data::Batch> BucketBatchSource::next() {
  if (cursor_ >= order_.size()) return std::nullopt;
  const std::vector<size_t>& idx = order_[cursor_++];
  std::vector<std::vector<int64_t>> seqs;
  std::vector<int64_t> labels;
  for (size_t i : idx) {
    seqs.push_back(ids_[i]);
    labels.push_back(labels_[i]);
  }
  PaddedBatch b = pad_sequences(seqs, pad_, {}, device_);
  return data::Batch{b.ids, tensor(labels, Shape{static_cast<int64_t>(labels.size())}, device_)};
}

double BucketBatchSource::padding_fraction(uint64_t epoch) const {
  size_t pad = 0, total = 0;
  for (auto& batch : bucket_batches(lengths_, options_, epoch)) {
    size_t longest = 1;
    for (size_t i : batch) longest = std::max(longest, lengths_[i]);
    for (size_t i : batch) pad += longest - lengths_[i];
    total += longest * batch.size();
  }
  return total == 0 ? 0.0 : static_cast<double>(pad) / static_cast<double>(total);
}

}  // namespace kiln::text
