// DataLoader: order, determinism across worker counts, drop_last, prefetch bound, errors.
#include <gtest/gtest.h>
#include <kiln/data.h>
#include <kiln/ops.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "test_util.h"

namespace kd = kiln::data;

namespace {

// Items 0..n-1 as 1x2x2 u8 images whose pixels hold the index, label = index % 10.
kd::DatasetPtr<kd::ImageItem> indexed_images(int n) {
  std::vector<kd::ImageItem> v;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> px(4, static_cast<uint8_t>(i));
    v.push_back({kiln::from_blob_copy(px.data(), {1, 2, 2}, kiln::u8, kiln::Device::cpu()), i % 10});
  }
  return kd::in_memory(std::move(v));
}

// A batcher producing input [N] i64 (the ints) and target [N] (the ints times 10).
kd::Batch int_batch(std::vector<int> items, const kiln::Device& d) {
  std::vector<int64_t> a(items.begin(), items.end()), b;
  for (int x : items) b.push_back(10 * x);
  return {kiln::tensor(a, {static_cast<int64_t>(a.size())}, d), kiln::tensor(b, {static_cast<int64_t>(b.size())}, d)};
}

kd::DatasetPtr<int> ints(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return kd::in_memory(v);
}

std::vector<std::vector<int64_t>> epoch_of(kiln::data::BatchSource& src, uint64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  src.start_epoch(epoch);
  while (auto b = src.next()) out.push_back(b->input.to_vector<int64_t>());
  return out;
}

}  // namespace

TEST(DataLoader, EveryItemOncePerEpochInSeededOrder) {
  kd::DataLoader<int> loader(ints(10), {.batch_size = 4, .seed = 1}, int_batch);
  EXPECT_EQ(loader.num_batches(), 3u);
  EXPECT_EQ(loader.num_items(), 10u);
  auto e0 = epoch_of(loader, 0);
  ASSERT_EQ(e0.size(), 3u);
  EXPECT_EQ(e0[2].size(), 2u);  // last, partial batch
  std::vector<int64_t> flat;
  for (auto& b : e0) flat.insert(flat.end(), b.begin(), b.end());
  std::vector<int64_t> sorted = flat;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> want(10);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sorted, want);
  EXPECT_NE(flat, want);                    // shuffled
  EXPECT_EQ(epoch_of(loader, 0), e0);       // same epoch, same order
  EXPECT_NE(epoch_of(loader, 1), e0);       // the next epoch reshuffles
  EXPECT_FALSE(loader.next().has_value());  // the epoch stays finished
  kd::DataLoader<int> plain(ints(5), {.batch_size = 2, .shuffle = false}, int_batch);
  EXPECT_EQ(epoch_of(plain, 3), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
}

TEST(DataLoader, DropLast) {
  kd::DataLoader<int> loader(ints(10), {.batch_size = 4, .drop_last = true}, int_batch);
  EXPECT_EQ(loader.num_batches(), 2u);
  EXPECT_EQ(loader.num_items(), 8u);
  auto e = epoch_of(loader, 0);
  ASSERT_EQ(e.size(), 2u);
  for (auto& b : e) EXPECT_EQ(b.size(), 4u);
  kd::DataLoader<int> tiny(ints(3), {.batch_size = 4, .drop_last = true, .workers = 2}, int_batch);
  EXPECT_EQ(tiny.num_batches(), 0u);
  EXPECT_TRUE(epoch_of(tiny, 0).empty());
}

TEST(DataLoader, SameBatchesWhateverTheWorkerCount) {
  // Random augmentation inside the dataset: its draws depend on (seed, epoch, index) only.
  kd::DatasetPtr<kd::ImageItem> aug =
      kd::map_image(kd::map_image(indexed_images(50), [](const kiln::Tensor& t) { return kd::to_tensor(t); }),
                    kd::RandomCrop{.size = 2, .padding = 1, .seed = 5});
  std::vector<std::vector<float>> ref_inputs;
  std::vector<std::vector<int64_t>> ref_targets;
  for (size_t workers : {0, 1, 3}) {
    kd::DataLoader<kd::ImageItem> loader(aug, {.batch_size = 8, .seed = 11, .workers = workers, .prefetch = 2});
    std::vector<std::vector<float>> inputs;
    std::vector<std::vector<int64_t>> targets;
    for (uint64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      while (auto b = loader.next()) {
        EXPECT_EQ(b->input.dim(), 4);
        EXPECT_EQ(b->input.dtype(), kiln::f32);
        EXPECT_EQ(b->target.dtype(), kiln::i64);
        inputs.push_back(b->input.to_vector<float>());
        targets.push_back(b->target.to_vector<int64_t>());
      }
    }
    EXPECT_EQ(inputs.size(), 14u);
    if (workers == 0) {
      ref_inputs = inputs;
      ref_targets = targets;
    } else {
      EXPECT_EQ(inputs, ref_inputs) << workers << " workers";
      EXPECT_EQ(targets, ref_targets) << workers << " workers";
    }
  }
  // Epoch 0 and epoch 1 differ (order and crops).
  EXPECT_NE(ref_inputs[0], ref_inputs[7]);
}

TEST(DataLoader, PrefetchIsBounded) {
  std::atomic<int> built{0};
  kd::Batcher<int> counting = [&built](std::vector<int> v, const kiln::Device& d) {
    ++built;
    return int_batch(std::move(v), d);
  };
  kd::DataLoader<int> loader(ints(100), {.batch_size = 2, .workers = 3, .prefetch = 2}, counting);
  loader.start_epoch(0);
  // Without a consumer the workers stop after 3 * 2 batches.
  for (int i = 0; i < 200 && built.load() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(built.load(), 6);
  EXPECT_EQ(loader.ready_batches(), 6u);
  ASSERT_TRUE(loader.next().has_value());
  for (int i = 0; i < 200 && built.load() < 7; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(built.load(), 7);  // one taken, one more built
  EXPECT_LE(loader.ready_batches(), 6u);
}

TEST(DataLoader, WorkerExceptionsReachTheConsumerInOrder) {
  for (size_t workers : {0, 1, 3}) {
    auto failing = kd::map(ints(40), [](int x) {
      if (x == 13) throw std::runtime_error("item 13 is broken");
      return x;
    });
    kd::DataLoader<int> loader(failing, {.batch_size = 4, .shuffle = false, .workers = workers}, int_batch);
    loader.start_epoch(0);
    for (int b = 0; b < 3; ++b) ASSERT_TRUE(loader.next().has_value()) << workers;
    kiln::test::expect_error([&] { loader.next(); }, "DataLoader", "building batch 3 failed: item 13 is broken");
    EXPECT_FALSE(loader.next().has_value());  // the failed epoch is over
    // A kiln::Error passes unchanged; a new epoch starts cleanly.
    kd::DataLoader<int> oob(kd::select(ints(40), {1, 2}), {.batch_size = 1, .workers = workers},
                            [](std::vector<int>, const kiln::Device&) -> kd::Batch {
                              KILN_CHECK(false, "my_batcher", "bad batch");
                              return {};
                            });
    kiln::test::expect_error([&] { epoch_of(oob, 0); }, "my_batcher", "bad batch");
    kiln::test::expect_error([&] { epoch_of(oob, 1); }, "my_batcher", "bad batch");
  }
}

TEST(DataLoader, DestroyedMidEpochStopsCleanly) {
  std::atomic<int> built{0};
  auto slow = kd::map(ints(1000), [&built](int x) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ++built;
    return x;
  });
  {
    kd::DataLoader<int> loader(slow, {.batch_size = 4, .workers = 3, .prefetch = 1}, int_batch);
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
    // Restarting mid-epoch is fine too.
    loader.start_epoch(1);
    ASSERT_TRUE(loader.next().has_value());
  }  // joins the workers
  int after = built.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(built.load(), after);  // nothing runs after destruction
  EXPECT_LT(after, 1000);
}

TEST(DataLoader, ImageBatchesAndBadOptions) {
  kd::DataLoader<kd::ImageItem> loader(indexed_images(5), {.batch_size = 2, .shuffle = false});
  loader.start_epoch(0);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->input.shape(), (kiln::Shape{2, 1, 2, 2}));
  EXPECT_FLOAT_EQ(b->input.to_vector<float>()[4], 1.0f / 255.0f);
  EXPECT_EQ(b->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  kiln::test::expect_error([] { kd::DataLoader<int>(ints(3), {.batch_size = 0}, int_batch); }, "DataLoader",
                           "batch_size");
  kiln::test::expect_error([] { kd::DataLoader<int>(ints(3), {.prefetch = 0}, int_batch); }, "DataLoader", "prefetch");
  kiln::test::expect_error([] { kd::DataLoader<int>(ints(3), {}); }, "DataLoader", "no default batcher");
  kiln::test::expect_error([] { kd::DataLoader<int>(nullptr, {}, int_batch); }, "DataLoader", "null dataset");
}

TEST(DataLoader, FashionMnistThroughput) {
  if (!std::filesystem::exists(std::string(kd::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  kd::DatasetPtr<kd::ImageItem> train = kd::fashion_mnist(true);
  for (size_t workers : {0, 1, 2}) {
    kd::DataLoader<kd::ImageItem> loader(train, {.batch_size = 64, .workers = workers});
    loader.start_epoch(0);
    size_t n = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (loader.next()) ++n;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(n, 938u);  // one epoch
    std::printf("Fashion-MNIST, batch 64, %zu workers: %.0f batches/s\n", workers, n / s);
  }
  // The same with per-item tensor transforms (to_tensor, normalize, random flip), 200 batches.
  auto aug = kd::map_image(
      kd::map_image(train, [](const kiln::Tensor& im) { return kd::normalize(kd::to_tensor(im), {0.286}, {0.353}); }),
      kd::RandomHorizontalFlip{.seed = 1});
  for (size_t workers : {0, 1, 2}) {
    kd::DataLoader<kd::ImageItem> loader(aug, {.batch_size = 64, .workers = workers});
    loader.start_epoch(0);
    size_t n = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (n < 200 && loader.next()) ++n;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(n, 200u);
    std::printf("Fashion-MNIST with normalize + flip, batch 64, %zu workers: %.0f batches/s\n", workers, n / s);
  }
}

TEST(DataLoader, ShardsTogetherAreTheOneProcessBatches) {
  // Data parallelism (docs/distributed.md): shard r of W takes a consecutive part of every batch
  // of one process; 50 items, batch 8 (6 full batches and one of 2).
  auto src = ints(50);
  kd::DataLoader<int> whole(src, {.batch_size = 8, .seed = 3}, int_batch);
  for (size_t w : {1, 2, 3, 4}) {
    std::vector<std::vector<std::vector<int64_t>>> parts;
    size_t items = 0;
    for (size_t r = 0; r < w; ++r) {
      kd::DataLoader<int> shard(src, {.batch_size = 8, .seed = 3, .workers = r % 2, .num_shards = w, .shard_index = r},
                                int_batch);
      parts.push_back(epoch_of(shard, 1));
      items += shard.num_items();
      // The same number of batches on every shard; the last batch (2 items) is dropped for 3 or 4.
      EXPECT_EQ(shard.num_batches(), w <= 2 ? 7u : 6u) << w;
      EXPECT_EQ(parts.back().size(), shard.num_batches());
    }
    auto ref = epoch_of(whole, 1);
    EXPECT_EQ(items, w <= 2 ? 50u : 48u);
    for (size_t b = 0; b < parts[0].size(); ++b) {
      std::vector<int64_t> joined;
      for (size_t r = 0; r < w; ++r) {
        EXPECT_FALSE(parts[r][b].empty());
        joined.insert(joined.end(), parts[r][b].begin(), parts[r][b].end());
      }
      EXPECT_EQ(joined, ref[b]) << w << " shards, batch " << b;
    }
  }
  // BatchSource::shard sets the same from a training loop (the Learner).
  kd::DataLoader<int> later(src, {.batch_size = 8, .seed = 3}, int_batch);
  kiln::data::BatchSource& bs = later;
  EXPECT_TRUE(bs.shard(1, 2));
  auto second = epoch_of(later, 1);
  auto first_batch = epoch_of(whole, 1)[0];
  EXPECT_EQ(second[0], std::vector<int64_t>(first_batch.begin() + 4, first_batch.end()));
  EXPECT_THROW(later.shard(2, 2), kiln::Error);
  EXPECT_THROW(kd::DataLoader<int>(src, {.batch_size = 8, .num_shards = 2, .shard_index = 2}, int_batch), kiln::Error);
}
