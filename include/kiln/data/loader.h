// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// DataLoader: batches of a dataset, shuffled per epoch from a seed, built by worker threads
// with bounded prefetch, delivered in the same order whatever the number of workers.
//
//   kiln::data::DataLoader<kiln::data::ImageItem> loader(kiln::data::fashion_mnist(true),
//                                                        {.batch_size = 64, .workers = 2});
//   loader.start_epoch(0);
//   while (auto b = loader.next()) { /* b->input [64, 1, 28, 28] f32, b->target [64] i64 */ }
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/data/batch.h"
#include "kiln/data/dataset.h"
#include "kiln/data/sources.h"
#include "kiln/device.h"

namespace kiln::data {

/// Options of DataLoader.
struct DataLoaderOptions {
  size_t batch_size = 64;
  /// Reorder the items every epoch; the order depends only on (seed, epoch).
  bool shuffle = true;
  uint64_t seed = 0;
  /// Drop the last batch when it has fewer than batch_size items.
  bool drop_last = false;
  /// Threads building batches; 0 builds them on the calling thread inside next().
  size_t workers = 0;
  /// Batches each worker may hold ready before the consumer takes them (>= 1).
  size_t prefetch = 2;
  /// Where batches are put.
  Device device = Device::cpu();
  /// Data parallelism (docs/distributed.md): this process takes part `shard_index` of
  /// `num_shards` of every batch. The batches are those of one process (the same order from the
  /// seed; batch_size is the global batch), each cut into num_shards consecutive parts as even as
  /// possible, so the ranks' parts together are exactly the one process's batch. A last batch with
  /// fewer items than shards is dropped. The Learner sets them (BatchSource::shard).
  size_t num_shards = 1;
  size_t shard_index = 0;
};

/// Turns items into one batch on a device.
template <class Item>
using Batcher = std::function<Batch(std::vector<Item>, const Device&)>;

/// Default batcher of image items: images stacked to input [N, C, H, W] f32 (u8 images are
/// scaled to [0, 1]), labels to target [N] i64. All images must have one shape.
Batch batch_images(std::vector<ImageItem> items, const Device& device);
/// Default batcher of table rows: features [N, F] and target [N, T] in the items' dtypes;
/// a single integer target column gives target [N] (class indices).
Batch batch_tabular(std::vector<TabularItem> items, const Device& device);
/// The default batcher of a type: batch_images / batch_tabular (overloads).
inline Batch default_batch(std::vector<ImageItem> items, const Device& d) { return batch_images(std::move(items), d); }
inline Batch default_batch(std::vector<TabularItem> items, const Device& d) {
  return batch_tabular(std::move(items), d);
}

namespace detail {
/// The type-erased engine of DataLoader (src/data/loader.cpp): epoch order, workers, queues.
class LoaderEngine {
 public:
  /// Builds the batch of the given item indices (called on worker threads, with
  /// current_epoch() set to the epoch).
  using Produce = std::function<Batch(const std::vector<size_t>& indices)>;
  LoaderEngine(size_t dataset_size, const DataLoaderOptions& options, Produce produce);
  ~LoaderEngine();
  LoaderEngine(const LoaderEngine&) = delete;
  LoaderEngine& operator=(const LoaderEngine&) = delete;
  size_t num_batches() const;
  size_t num_items() const;
  void start_epoch(uint64_t epoch);
  std::optional<Batch> next();
  /// Sets the shard (DataLoaderOptions::num_shards), from the next start_epoch on.
  void set_shard(size_t index, size_t count);
  /// Batches built and not yet taken (for tests of the prefetch bound).
  size_t ready_batches() const;
  /// Batches built since start_epoch.
  size_t produced_batches() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};
}  // namespace detail

/// Draws batches from a dataset (a BatchSource for training loops). Destroying it mid-epoch
/// stops and joins its workers. An exception thrown while building a batch (in get(), a map
/// function or the batcher) is rethrown by next() as kiln::Error, in batch order.
template <class Item>
class DataLoader : public BatchSource {
 public:
  /// `batcher` empty: default_batch for Item (ImageItem, TabularItem).
  DataLoader(DatasetPtr<Item> dataset, const DataLoaderOptions& options = {}, Batcher<Item> batcher = {})
      : dataset_(std::move(dataset)), options_(options) {
    KILN_CHECK(dataset_ != nullptr, "DataLoader", "null dataset");
    if (!batcher) {
      if constexpr (requires(std::vector<Item> v, const Device& d) { default_batch(std::move(v), d); }) {
        batcher = [](std::vector<Item> v, const Device& d) { return default_batch(std::move(v), d); };
      } else {
        KILN_CHECK(false, "DataLoader", "this item type has no default batcher; pass one");
      }
    }
    engine_ = std::make_unique<detail::LoaderEngine>(
        dataset_->size(), options_,
        [ds = dataset_, b = std::move(batcher), dev = options_.device](const std::vector<size_t>& idx) {
          std::vector<Item> items;
          items.reserve(idx.size());
          for (size_t i : idx) items.push_back(ds->get(i));
          return b(std::move(items), dev);
        });
  }
  size_t num_batches() const override { return engine_->num_batches(); }
  size_t num_items() const override { return engine_->num_items(); }
  void start_epoch(uint64_t epoch) override { engine_->start_epoch(epoch); }
  std::optional<Batch> next() override { return engine_->next(); }
  bool shard(size_t index, size_t count) override {
    engine_->set_shard(index, count);
    options_.shard_index = index;
    options_.num_shards = count;
    return true;
  }
  const DataLoaderOptions& options() const { return options_; }
  const DatasetPtr<Item>& dataset() const { return dataset_; }
  /// Batches built and waiting (at most workers * prefetch).
  size_t ready_batches() const { return engine_->ready_batches(); }

 private:
  DatasetPtr<Item> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<detail::LoaderEngine> engine_;
};

}  // namespace kiln::data
