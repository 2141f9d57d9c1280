// Datasets and their compositions (include/kiln/data/dataset.h).
#include <gtest/gtest.h>
#include <kiln/data.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "test_util.h"

namespace kd = kiln::data;

namespace {
kd::DatasetPtr<int> range_ds(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return kd::in_memory(v);
}
std::vector<int> all(const kd::DatasetPtr<int>& ds) {
  std::vector<int> v;
  for (size_t i = 0; i < ds->size(); ++i) v.push_back(ds->get(i));
  return v;
}
}  // namespace

TEST(DataDataset, InMemoryAndIndexErrors) {
  auto ds = range_ds(4);
  EXPECT_EQ(ds->size(), 4u);
  EXPECT_EQ(ds->get(3), 3);
  kiln::test::expect_error([&] { ds->get(4); }, "InMemoryDataset", "index 4 out of range for a dataset of 4");
}

TEST(DataDataset, MapPlainAndKeyed) {
  auto sq = kd::map(range_ds(5), [](int x) { return x * x; });
  EXPECT_EQ(all(sq), (std::vector<int>{0, 1, 4, 9, 16}));
  auto keyed = kd::map(range_ds(3), [](int x, kd::ItemKey k) {
    return std::to_string(x) + ":" + std::to_string(k.index) + ":" + std::to_string(k.epoch);
  });
  EXPECT_EQ(keyed->get(2), "2:2:0");
  {
    kd::detail::EpochScope scope(7);
    EXPECT_EQ(keyed->get(1), "1:1:7");
  }
  EXPECT_EQ(keyed->get(1), "1:1:0");
  // Map changes the type.
  auto strs = kd::map(range_ds(2), [](int x) { return std::string(static_cast<size_t>(x + 1), 'a'); });
  EXPECT_EQ(strs->get(1), "aa");
}

TEST(DataDataset, ShuffleIsASeededPermutation) {
  auto ds = range_ds(100);
  std::vector<int> a = all(kd::shuffle(ds, 1)), b = all(kd::shuffle(ds, 1)), c = all(kd::shuffle(ds, 2));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, all(ds));
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, all(ds));
  // The permutation is fixed by the seed on every platform (SplitMix64-based Fisher-Yates).
  EXPECT_EQ(kd::permutation(5, 3), kd::permutation(5, 3));
  EXPECT_TRUE(kd::permutation(0, 3).empty());
}

TEST(DataDataset, SliceTakeSelect) {
  auto ds = range_ds(10);
  EXPECT_EQ(all(kd::slice(ds, 2, 5)), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(all(kd::slice(ds, 8, 100)), (std::vector<int>{8, 9}));
  EXPECT_EQ(kd::slice(ds, 10, 10)->size(), 0u);
  EXPECT_EQ(all(kd::take(ds, 3)), (std::vector<int>{0, 1, 2}));
  kiln::test::expect_error([&] { kd::slice(ds, 6, 4); }, "data::slice", "start 6 is past end 4");
  EXPECT_EQ(all(kd::select(ds, {9, 0, 9})), (std::vector<int>{9, 0, 9}));
  kiln::test::expect_error([&] { kd::select(ds, {1, 10}); }, "data::select", "index 10 out of range");
}

TEST(DataDataset, SampleWithAndWithoutReplacement) {
  auto ds = range_ds(20);
  std::vector<int> w = all(kd::sample(ds, 20, 5));
  EXPECT_EQ(std::set<int>(w.begin(), w.end()).size(), 20u);  // no repeats
  EXPECT_EQ(all(kd::sample(ds, 7, 5)), all(kd::sample(ds, 7, 5)));
  kiln::test::expect_error([&] { kd::sample(ds, 21, 5); }, "data::sample", "without replacement");
  std::vector<int> r = all(kd::sample(ds, 200, 9, true));
  EXPECT_EQ(r.size(), 200u);
  std::set<int> distinct(r.begin(), r.end());
  EXPECT_LT(distinct.size(), 200u);  // 200 draws from 20 must repeat
  EXPECT_GT(distinct.size(), 15u);   // and cover most items
  for (int v : r) EXPECT_TRUE(v >= 0 && v < 20);
  EXPECT_EQ(r, all(kd::sample(ds, 200, 9, true)));
  // Roughly uniform: each of 20 items drawn about 1000 times out of 20000.
  std::vector<int> counts(20);
  for (size_t i : kd::sample_indices(20, 20000, true, 3)) ++counts[i];
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);
}

TEST(DataDataset, Windows) {
  auto ds = range_ds(5);
  auto w = kd::windows(ds, 3);
  ASSERT_EQ(w->size(), 3u);
  EXPECT_EQ(w->get(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(w->get(2), (std::vector<int>{2, 3, 4}));
  auto s = kd::windows(ds, 2, 2);
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ(s->get(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(kd::windows(ds, 6)->size(), 0u);
  kiln::test::expect_error([&] { kd::windows(ds, 0); }, "data::windows", "positive");
}

TEST(DataDataset, Concat) {
  auto c = kd::concat<int>({range_ds(2), range_ds(0), kd::map(range_ds(3), [](int x) { return 10 + x; })});
  EXPECT_EQ(all(c), (std::vector<int>{0, 1, 10, 11, 12}));
  kiln::test::expect_error([&] { c->get(5); }, "data::concat", "out of range");
}

TEST(DataDataset, SplitIsSeededAndDisjoint) {
  auto ds = range_ds(10);
  auto [tr, va] = kd::split(ds, 0.3, 4);
  EXPECT_EQ(tr->size(), 7u);
  EXPECT_EQ(va->size(), 3u);
  std::vector<int> u = all(tr), v = all(va);
  u.insert(u.end(), v.begin(), v.end());
  std::sort(u.begin(), u.end());
  EXPECT_EQ(u, all(ds));
  EXPECT_EQ(all(kd::split(ds, 0.3, 4).second), all(va));
  EXPECT_NE(all(kd::split(ds, 0.3, 5).second), all(va));
  kiln::test::expect_error([&] { kd::split(ds, 1.5); }, "data::split", "valid_fraction");
}

TEST(DataDataset, ToMemoryReadsOnce) {
  auto counter = std::make_shared<int>(0);
  auto m = kd::map(range_ds(4), [counter](int x) {
    ++*counter;
    return x;
  });
  auto mem = kd::to_memory(m);
  EXPECT_EQ(*counter, 4);
  EXPECT_EQ(all(mem), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(*counter, 4);
}
