// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The contract between data loaders and training loops: a source of batches, epoch by epoch.
#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::data {

/// One batch: model inputs and targets (class indices, values...), already on the device.
struct Batch {
  Tensor input;
  Tensor target;
};

/// Anything a training loop can draw batches from (DataLoader implements it).
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Batches per epoch.
  virtual size_t num_batches() const = 0;
  /// Items per epoch (after drop_last).
  virtual size_t num_items() const = 0;
  /// Starts epoch `epoch` (its shuffle order depends only on the seed and `epoch`).
  virtual void start_epoch(uint64_t epoch) = 0;
  /// The next batch of the current epoch, or nullopt at its end.
  virtual std::optional<Batch> next() = 0;
  /// Data parallelism: from the next start_epoch on, yield only part `index` of `count` of every
  /// batch (the same batches, so num_batches() is the same on every rank), such that the parts of
  /// all ranks together are the whole batch. Returns false when this source cannot (the default).
  virtual bool shard(size_t /*index*/, size_t /*count*/) { return false; }
};

}  // namespace kiln::data
