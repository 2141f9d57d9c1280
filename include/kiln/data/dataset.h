// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Datasets and their compositions (Burn's dataset API): a Dataset<T> has size() and get(i);
// transforms wrap a shared pointer to another dataset, so composing is cheap and nothing is
// copied. Every get() is const and may be called from several loader threads at once.
//
//   auto ds = kiln::data::in_memory<int>({1, 2, 3, 4});
//   auto sq = kiln::data::map(ds, [](int x) { return x * x; });
//   auto [train, valid] = kiln::data::split(kiln::data::shuffle(sq, 42), 0.25);
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/error.h"

namespace kiln::data {

/// A random-access collection of items. Implementations must make get() safe to call from
/// several threads at once (it is const; keep caches behind a lock or avoid them).
template <class T>
class Dataset {
 public:
  using Item = T;
  virtual ~Dataset() = default;
  /// Number of items.
  virtual size_t size() const = 0;
  /// Item i (0 <= i < size()); throws kiln::Error for an index out of range.
  virtual T get(size_t i) const = 0;
};

/// Datasets are shared and immutable once built.
template <class T>
using DatasetPtr = std::shared_ptr<const Dataset<T>>;

/// Which draw of an item a map function sees: its index in the dataset being mapped and the
/// data loader's current epoch (0 outside a loader). Random transforms derive their random
/// numbers from (seed, epoch, index), so they do not depend on the number of loader threads.
struct ItemKey {
  uint64_t index = 0;
  uint64_t epoch = 0;
};

namespace detail {
/// Throws "[component] index i out of range for a dataset of n items".
void check_index(size_t i, size_t n, const char* component);
/// The epoch the calling thread is producing (set by DataLoader through EpochScope).
uint64_t current_epoch();
/// Sets current_epoch() for the calling thread while alive.
class EpochScope {
 public:
  explicit EpochScope(uint64_t epoch);
  ~EpochScope();
  EpochScope(const EpochScope&) = delete;
  EpochScope& operator=(const EpochScope&) = delete;

 private:
  uint64_t saved_;
};
}  // namespace detail

// ---- deterministic random numbers (non-template, src/data/random.cpp) --------------------------

/// A 64-bit hash mixing several words (SplitMix64 finaliser); the basis of every seeded choice
/// in kiln::data, identical on every platform.
uint64_t hash_mix(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0);
/// A small counter-based generator: next() returns hash_mix(key, counter++).
class Rng {
 public:
  explicit Rng(uint64_t key) : key_(key) {}
  uint64_t next() { return hash_mix(key_, counter_++); }
  /// Uniform integer in [0, n) (n > 0), without modulo bias.
  uint64_t below(uint64_t n);
  /// Uniform double in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};
/// A permutation of 0..n-1 (Fisher-Yates) determined by the seed alone.
std::vector<size_t> permutation(size_t n, uint64_t seed);
/// n indices drawn from 0..population-1, with or without replacement (without: n <= population,
/// else kiln::Error).
std::vector<size_t> sample_indices(size_t population, size_t n, bool replacement, uint64_t seed);

// ---- in-memory -----------------------------------------------------------------------------

/// A dataset holding its items in a vector.
template <class T>
class InMemoryDataset : public Dataset<T> {
 public:
  explicit InMemoryDataset(std::vector<T> items) : items_(std::move(items)) {}
  size_t size() const override { return items_.size(); }
  T get(size_t i) const override {
    detail::check_index(i, items_.size(), "InMemoryDataset");
    return items_[i];
  }
  const std::vector<T>& items() const { return items_; }

 private:
  std::vector<T> items_;
};

/// A shared in-memory dataset of `items`.
template <class T>
DatasetPtr<T> in_memory(std::vector<T> items) {
  return std::make_shared<InMemoryDataset<T>>(std::move(items));
}
/// Reads every item of `ds` once and keeps them in memory (e.g. after an expensive map).
template <class T>
DatasetPtr<T> to_memory(const DatasetPtr<T>& ds) {
  std::vector<T> items;
  items.reserve(ds->size());
  for (size_t i = 0; i < ds->size(); ++i) items.push_back(ds->get(i));
  return in_memory(std::move(items));
}

// ---- map -------------------------------------------------------------------------------------

/// Applies fn to each item as it is read: fn(item) or fn(item, ItemKey).
template <class U, class T>
class MapDataset : public Dataset<U> {
 public:
  MapDataset(DatasetPtr<T> inner, std::function<U(T, ItemKey)> fn) : inner_(std::move(inner)), fn_(std::move(fn)) {}
  size_t size() const override { return inner_->size(); }
  U get(size_t i) const override { return fn_(inner_->get(i), ItemKey{i, detail::current_epoch()}); }

 private:
  DatasetPtr<T> inner_;
  std::function<U(T, ItemKey)> fn_;
};

/// A dataset whose item i is fn(ds.get(i)) or fn(ds.get(i), ItemKey{i, epoch}) (for random
/// transforms). fn must be safe to call from several threads.
template <class T, class F>
auto map(const DatasetPtr<T>& ds, F fn) {
  KILN_CHECK(ds != nullptr, "data::map", "null dataset");
  if constexpr (std::is_invocable_v<F, T, ItemKey>) {
    using U = std::decay_t<std::invoke_result_t<F, T, ItemKey>>;
    return DatasetPtr<U>(std::make_shared<MapDataset<U, T>>(ds, std::function<U(T, ItemKey)>(std::move(fn))));
  } else {
    using U = std::decay_t<std::invoke_result_t<F, T>>;
    return DatasetPtr<U>(
        std::make_shared<MapDataset<U, T>>(ds, [f = std::move(fn)](T x, ItemKey) { return f(std::move(x)); }));
  }
}

// ---- selection: select, shuffle, slice, sample, split ------------------------------------------

/// Item i is inner.get(indices[i]); indices are checked against the inner size up front.
template <class T>
class SelectDataset : public Dataset<T> {
 public:
  SelectDataset(DatasetPtr<T> inner, std::vector<size_t> indices) : inner_(std::move(inner)), idx_(std::move(indices)) {
    KILN_CHECK(inner_ != nullptr, "data::select", "null dataset");
    for (size_t j : idx_) detail::check_index(j, inner_->size(), "data::select");
  }
  size_t size() const override { return idx_.size(); }
  T get(size_t i) const override {
    detail::check_index(i, idx_.size(), "data::select");
    return inner_->get(idx_[i]);
  }
  const std::vector<size_t>& indices() const { return idx_; }

 private:
  DatasetPtr<T> inner_;
  std::vector<size_t> idx_;
};

/// The items at `indices` (repeats allowed), in that order.
template <class T>
DatasetPtr<T> select(const DatasetPtr<T>& ds, std::vector<size_t> indices) {
  return std::make_shared<SelectDataset<T>>(ds, std::move(indices));
}
/// The items in a random order fixed by `seed` (same seed, same order, on every platform).
template <class T>
DatasetPtr<T> shuffle(const DatasetPtr<T>& ds, uint64_t seed) {
  KILN_CHECK(ds != nullptr, "data::shuffle", "null dataset");
  return select(ds, permutation(ds->size(), seed));
}
/// Items [start, end) (Burn's PartialDataset); end is clamped to the size; start > end throws.
template <class T>
DatasetPtr<T> slice(const DatasetPtr<T>& ds, size_t start, size_t end) {
  KILN_CHECK(ds != nullptr, "data::slice", "null dataset");
  end = end < ds->size() ? end : ds->size();
  KILN_CHECK(start <= end, "data::slice",
             "start " << start << " is past end " << end << " (size " << ds->size() << ")");
  std::vector<size_t> idx(end - start);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = start + i;
  return select(ds, std::move(idx));
}
/// The first n items (or all when there are fewer).
template <class T>
DatasetPtr<T> take(const DatasetPtr<T>& ds, size_t n) {
  return slice(ds, 0, n);
}
/// n items drawn at random (seeded), with or without replacement (without: n <= size).
template <class T>
DatasetPtr<T> sample(const DatasetPtr<T>& ds, size_t n, uint64_t seed, bool replacement = false) {
  KILN_CHECK(ds != nullptr, "data::sample", "null dataset");
  return select(ds, sample_indices(ds->size(), n, replacement, seed));
}
/// Training and validation parts: the items shuffled with `seed`, then the last
/// round(valid_fraction * size) of them form the validation set. 0 <= valid_fraction <= 1.
template <class T>
std::pair<DatasetPtr<T>, DatasetPtr<T>> split(const DatasetPtr<T>& ds, double valid_fraction, uint64_t seed = 0) {
  KILN_CHECK(ds != nullptr, "data::split", "null dataset");
  KILN_CHECK(valid_fraction >= 0.0 && valid_fraction <= 1.0, "data::split",
             "valid_fraction must lie in [0, 1], got " << valid_fraction);
  std::vector<size_t> p = permutation(ds->size(), seed);
  size_t nv = static_cast<size_t>(valid_fraction * static_cast<double>(p.size()) + 0.5);
  size_t nt = p.size() - nv;
  std::vector<size_t> tr(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(nt));
  std::vector<size_t> va(p.begin() + static_cast<std::ptrdiff_t>(nt), p.end());
  return {select(ds, std::move(tr)), select(ds, std::move(va))};
}

// ---- windows and concat ---------------------------------------------------------------------

/// Item i is {inner[i*stride], ..., inner[i*stride + size - 1]} (Burn's WindowsDataset).
template <class T>
class WindowDataset : public Dataset<std::vector<T>> {
 public:
  WindowDataset(DatasetPtr<T> inner, size_t window, size_t stride)
      : inner_(std::move(inner)), window_(window), stride_(stride) {
    KILN_CHECK(inner_ != nullptr, "data::windows", "null dataset");
    KILN_CHECK(window_ > 0 && stride_ > 0, "data::windows",
               "window size and stride must be positive, got " << window_ << " and " << stride_);
  }
  size_t size() const override {
    size_t n = inner_->size();
    return n < window_ ? 0 : (n - window_) / stride_ + 1;
  }
  std::vector<T> get(size_t i) const override {
    detail::check_index(i, size(), "data::windows");
    std::vector<T> w;
    w.reserve(window_);
    for (size_t k = 0; k < window_; ++k) w.push_back(inner_->get(i * stride_ + k));
    return w;
  }

 private:
  DatasetPtr<T> inner_;
  size_t window_, stride_;
};

/// Sliding windows of `window` consecutive items, starting every `stride` items; a dataset
/// shorter than the window has no windows.
template <class T>
DatasetPtr<std::vector<T>> windows(const DatasetPtr<T>& ds, size_t window, size_t stride = 1) {
  return std::make_shared<WindowDataset<T>>(ds, window, stride);
}

/// The items of several datasets one after another (Burn's ComposedDataset).
template <class T>
class ConcatDataset : public Dataset<T> {
 public:
  explicit ConcatDataset(std::vector<DatasetPtr<T>> parts) : parts_(std::move(parts)) {
    size_t total = 0;
    for (const auto& p : parts_) {
      KILN_CHECK(p != nullptr, "data::concat", "null dataset");
      ends_.push_back(total += p->size());
    }
  }
  size_t size() const override { return ends_.empty() ? 0 : ends_.back(); }
  T get(size_t i) const override {
    detail::check_index(i, size(), "data::concat");
    size_t k = 0, start = 0;
    while (i >= ends_[k]) start = ends_[k++];
    return parts_[k]->get(i - start);
  }

 private:
  std::vector<DatasetPtr<T>> parts_;
  std::vector<size_t> ends_;
};

/// Concatenation of `parts` in order.
template <class T>
DatasetPtr<T> concat(std::vector<DatasetPtr<T>> parts) {
  return std::make_shared<ConcatDataset<T>>(std::move(parts));
}

}  // namespace kiln::data
