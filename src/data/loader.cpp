// SPDX-License-Identifier: MIT OR Apache-2.0
// The DataLoader engine: per-epoch order, worker threads with bounded per-worker queues.
//
// Note [Deterministic order]: worker w builds batches w, w + W, w + 2W, ... in that order and
// pushes them to its own queue of at most `prefetch` batches; the consumer takes batch b from
// queue b % W. So batches arrive in index order whatever W is, and each batch's items (and the
// epoch its random transforms see) depend only on (seed, epoch, b).
#include "kiln/data/loader.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace kiln::data::detail {

namespace {
struct Slot {
  size_t batch = 0;
  std::optional<Batch> value;
  std::exception_ptr error;
};
}  // namespace

struct LoaderEngine::State {
  size_t size = 0;
  DataLoaderOptions opt;
  Produce produce;

  uint64_t epoch = 0;
  std::vector<size_t> order;
  size_t nb = 0;
  size_t cursor = 0;
  bool started = false;

  std::vector<std::thread> threads;
  std::vector<std::deque<Slot>> queues;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  size_t produced = 0;

  std::vector<size_t> indices_of(size_t b) const {
    size_t begin = b * opt.batch_size;
    size_t end = std::min(begin + opt.batch_size, order.size());
    if (opt.num_shards > 1) {  // this shard's consecutive part of the batch
      const size_t m = end - begin, w = opt.num_shards, r = opt.shard_index;
      end = begin + m * (r + 1) / w;
      begin = begin + m * r / w;
    }
    return std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(begin),
                               order.begin() + static_cast<std::ptrdiff_t>(end));
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    threads.clear();
    queues.clear();
    stop = false;
  }

  void worker(size_t w) {
    const size_t W = opt.workers;
    for (size_t b = w; b < nb; b += W) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || queues[w].size() < opt.prefetch; });
        if (stop) return;
      }
      Slot s;
      s.batch = b;
      try {
        EpochScope scope(epoch);
        s.value = produce(indices_of(b));
      } catch (...) {
        s.error = std::current_exception();
      }
      bool failed = s.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;
        queues[w].push_back(std::move(s));
        ++produced;
      }
      cv.notify_all();
      if (failed) return;
    }
  }

  [[noreturn]] void rethrow(std::exception_ptr e, size_t b) {
    cursor = nb;  // the epoch ends here
    try {
      std::rethrow_exception(e);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& ex) {
      KILN_CHECK(false, "DataLoader", "building batch " << static_cast<long long>(b) << " failed: " << ex.what());
    } catch (...) {
      KILN_CHECK(false, "DataLoader", "building batch " << static_cast<long long>(b) << " failed: unknown exception");
    }
    KILN_ASSERT(false);
  }
};

LoaderEngine::LoaderEngine(size_t dataset_size, const DataLoaderOptions& options, Produce produce)
    : s_(std::make_unique<State>()) {
  KILN_CHECK(options.batch_size > 0, "DataLoader", "batch_size must be positive");
  KILN_CHECK(options.prefetch > 0, "DataLoader", "prefetch must be at least 1");
  KILN_CHECK(options.workers <= 256, "DataLoader",
             "workers must be at most 256, got " << static_cast<long long>(options.workers));
  KILN_CHECK(options.num_shards >= 1 && options.shard_index < options.num_shards, "DataLoader",
             "shard_index " << static_cast<long long>(options.shard_index) << " of num_shards "
                            << static_cast<long long>(options.num_shards) << " does not exist");
  s_->size = dataset_size;
  s_->opt = options;
  s_->produce = std::move(produce);
  s_->nb = num_batches();
}

LoaderEngine::~LoaderEngine() { s_->shutdown(); }

size_t LoaderEngine::num_batches() const {
  const size_t bs = s_->opt.batch_size, n = s_->size;
  size_t nb = s_->opt.drop_last ? n / bs : (n + bs - 1) / bs;
  // Sharded, a last batch with fewer items than shards is dropped (a shard would be empty).
  if (s_->opt.num_shards > 1 && nb > 0 && n - (nb - 1) * bs < s_->opt.num_shards) --nb;
  return nb;
}

size_t LoaderEngine::num_items() const {
  const size_t bs = s_->opt.batch_size, nb = num_batches();
  const size_t total = std::min(nb * bs, s_->size);  // items of the batches kept
  if (s_->opt.num_shards <= 1) return total;
  const size_t w = s_->opt.num_shards, r = s_->opt.shard_index;
  auto part = [&](size_t m) { return m * (r + 1) / w - m * r / w; };
  if (nb == 0) return 0;
  return (nb - 1) * part(bs) + part(total - (nb - 1) * bs);
}

void LoaderEngine::set_shard(size_t index, size_t count) {
  KILN_CHECK(count >= 1 && index < count, "DataLoader",
             "shard " << static_cast<long long>(index) << " of " << static_cast<long long>(count)
                      << " does not exist (0 <= index < count)");
  s_->shutdown();
  s_->opt.num_shards = count;
  s_->opt.shard_index = index;
  s_->nb = num_batches();
  s_->started = false;
}

void LoaderEngine::start_epoch(uint64_t epoch) {
  State& s = *s_;
  s.shutdown();
  s.epoch = epoch;
  if (s.opt.shuffle) {
    s.order = permutation(s.size, hash_mix(s.opt.seed, epoch));
  } else {
    s.order.resize(s.size);
    for (size_t i = 0; i < s.size; ++i) s.order[i] = i;
  }
  s.nb = num_batches();
  s.order.resize(std::min(s.order.size(), s.nb * s.opt.batch_size));
  s.cursor = 0;
  s.produced = 0;
  s.started = true;
  if (s.opt.workers > 0 && s.nb > 0) {
    s.queues.resize(s.opt.workers);
    for (size_t w = 0; w < s.opt.workers; ++w) s.threads.emplace_back([&s, w] { s.worker(w); });
  }
}

std::optional<Batch> LoaderEngine::next() {
  State& s = *s_;
  if (!s.started) start_epoch(0);
  if (s.cursor >= s.nb) return std::nullopt;
  size_t b = s.cursor;
  if (s.opt.workers == 0) {
    try {
      EpochScope scope(s.epoch);
      std::optional<Batch> out = s.produce(s.indices_of(b));
      ++s.cursor;
      ++s.produced;
      return out;
    } catch (...) {
      s.rethrow(std::current_exception(), b);
    }
  }
  size_t w = b % s.opt.workers;
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait(lock, [&] { return !s.queues[w].empty(); });
    slot = std::move(s.queues[w].front());
    s.queues[w].pop_front();
  }
  s.cv.notify_all();
  KILN_ASSERT(slot.batch == b);
  ++s.cursor;
  if (slot.error) {
    s.shutdown();
    s.rethrow(slot.error, b);
  }
  if (s.cursor >= s.nb) s.shutdown();
  return std::move(slot.value);
}

size_t LoaderEngine::ready_batches() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  size_t n = 0;
  for (const auto& q : s_->queues) n += q.size();
  return n;
}

size_t LoaderEngine::produced_batches() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->produced;
}

}  // namespace kiln::data::detail
