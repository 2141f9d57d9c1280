// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Batching token sequences: padding to a rectangle with a padding mask, a DataLoader batcher for
// labelled texts, and bucketing by length (batches of similar lengths waste less padding).
//
//   auto tok = std::make_shared<kiln::text::ByteTokenizer>();
//   kiln::text::PaddedBatch b = kiln::text::pad_sequences(tok->encode_batch({"a", "abc"}), 0);
//   // b.ids [2, 3] i64, b.padding_mask [2, 3] bool (true = padding), b.lengths [2] i64
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/data/batch.h"
#include "kiln/data/dataset.h"
#include "kiln/data/loader.h"
#include "kiln/text/tokenizer.h"

namespace kiln::text {

/// A text with its class (a TextClassificationDataset's item).
struct TextItem {
  std::string text;
  int64_t label = 0;
};

/// Options of pad_sequences.
struct PadOptions {
  /// > 0: cut longer sequences to this length (their end is dropped).
  int64_t max_length = 0;
  /// > 1: round the padded length up to a multiple of this.
  int64_t pad_to_multiple_of = 1;
  /// Pad on the left (for decoders that read the last position) instead of the right.
  bool pad_left = false;
};

/// Sequences padded to one length.
struct PaddedBatch {
  Tensor ids;           ///< [N, L] i64
  Tensor padding_mask;  ///< [N, L] bool, true at padding (PyTorch's key_padding_mask convention)
  Tensor lengths;       ///< [N] i64, ids before padding (after truncation)
};

/// Pads `sequences` with `pad_id` to the longest one (L >= 1 for N > 0; N == 0 gives [0, 0]).
/// Tensors are created on `device`.
PaddedBatch pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id,
                          const PadOptions& options = {}, const Device& device = Device::cpu());

/// The padding mask of a batch of ids: ids == pad_id ([N, L] bool).
Tensor padding_mask(const Tensor& ids, int64_t pad_id);

/// A DataLoader batcher of labelled texts: Batch{input = ids [N, L] i64 padded with the
/// tokenizer's pad token, target = labels [N] i64}. The mask is padding_mask(input, pad).
/// kiln::Error when the tokenizer has no pad token.
data::Batcher<TextItem> text_classification_batcher(TokenizerPtr tokenizer, EncodeOptions encode = {},
                                                    PadOptions pad = {});

/// Options of bucket_batches / BucketBatchSource.
struct BucketOptions {
  size_t batch_size = 32;
  /// Items are sorted by length within windows of batch_size * bucket_multiplier (shuffled).
  size_t bucket_multiplier = 50;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

/// Batches of item indices, grouped by `lengths`: each window of batch_size * bucket_multiplier
/// items (in a (seed, epoch) order when shuffling) is sorted by length and cut into batches; the
/// batches are then shuffled. Every index appears once (except a dropped last batch).
std::vector<std::vector<size_t>> bucket_batches(const std::vector<size_t>& lengths, const BucketOptions& options,
                                                uint64_t epoch = 0);

/// A BatchSource of labelled texts in length buckets: tokenizes every item once, then serves
/// the batches of bucket_batches() built by text_classification_batcher's rules.
class BucketBatchSource : public data::BatchSource {
 public:
  BucketBatchSource(data::DatasetPtr<TextItem> dataset, TokenizerPtr tokenizer, const BucketOptions& options = {},
                    EncodeOptions encode = {}, const Device& device = Device::cpu());
  size_t num_batches() const override;
  size_t num_items() const override;
  void start_epoch(uint64_t epoch) override;
  std::optional<data::Batch> next() override;
  /// Padding ids over all ids of the epoch's batches (what bucketing saves).
  double padding_fraction(uint64_t epoch) const;

 private:
  std::vector<std::vector<int64_t>> ids_;
  std::vector<int64_t> labels_;
  std::vector<size_t> lengths_;
  BucketOptions options_;
  int64_t pad_;
  Device device_;
  std::vector<std::vector<size_t>> order_;
  size_t cursor_ = 0;
};

}  // namespace kiln::text
